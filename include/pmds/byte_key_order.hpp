// pmds::ByteKeyOrder — the first 15 bytes of a byte-string key and its length, in two words whose
// integer order is the keys' byte order wherever those bytes tell them apart. The ordered
// structures over byte strings keep it in their DRAM nodes (montage/ByteStringKeys,
// linkfree_soft/SoftStringSkipList), so that a comparison reads the key's bytes in the pool only
// when both keys are at least 15 bytes long and share their first 15.
//
// Why two words and not one: keys with a common prefix ("user:", "key:000000") are the usual
// case, and with one word of 8 bytes every comparison among them went to the pool. On
// redis-benchmark's keys ("key:" and 12 digits) pmds-server's skiplist-bytes/montage spent 36%
// of its cycles in that comparison (perf, 2-core AMD EPYC, 2026-12-03).
//
// The rule: head is bytes 0-7, big-endian, zero-padded; tail is bytes 8-14 the same way in its
// high 7 bytes and min(size, 15) in its low byte. Compared as (head, tail):
//   - where the padded bytes differ, the key whose byte is lower is lower: either both keys have
//     the byte, or the shorter one ended there (its padding is 0, the other's byte is not), and
//     then the shorter is a prefix of the other, so lower;
//   - where they agree, the shorter key is a prefix of the other (its padding matched the other's
//     bytes), so the lower length byte is the lower key; the length byte is capped at 15, so
//     equal words mean equal keys when that byte is below 15, and otherwise two keys of at least
//     15 bytes that agree on their first 15 (compare the rest: from `covered` on).
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace pmds {

struct ByteKeyOrder {
  static constexpr std::size_t covered = 15;  // the bytes the two words hold

  std::uint64_t head = 0;  // bytes 0-7
  std::uint64_t tail = 0;  // bytes 8-14, then min(size, covered)

  static ByteKeyOrder of(std::string_view k) {
    ByteKeyOrder o;
    for (std::size_t i = 0; i < 8; ++i) o.head = o.head << 8 | byte_at(k, i);
    for (std::size_t i = 8; i < covered; ++i) o.tail = o.tail << 8 | byte_at(k, i);
    o.tail = o.tail << 8 | (k.size() < covered ? k.size() : covered);
    return o;
  }

  // (head, tail) in order: the keys' byte order wherever the words differ.
  friend auto operator<=>(const ByteKeyOrder&, const ByteKeyOrder&) = default;
  // Equal words: the keys are equal unless both are long enough that their bytes from
  // `covered` on must decide.
  static bool bytes_decide(std::uint64_t tail) { return (tail & 0xff) == covered; }

 private:
  static std::uint64_t byte_at(std::string_view k, std::size_t i) {
    return i < k.size() ? static_cast<unsigned char>(k[i]) : 0u;
  }
};

}  // namespace pmds
