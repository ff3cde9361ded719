// pmds::registry::FixedSizeStrings<M> — a byte-string map M (pmds::ByteStringMap) seen as an
// 8-byte map (pmds::Map), so that the registry's tools run it: `pmds bench --key-size K
// --value-size V` (nbMontage §5's 32-byte keys and 1 KB values), the crash lab and the default
// suite. Each key is written as key_size bytes, each value as value_size bytes:
//   key:   its 8 bytes big-endian (so byte order is integer order, and a scan means the same),
//          then filler bytes computed from the key;
//   value: its 8 bytes big-endian, then filler bytes computed from the value.
// With SharedPrefixes (a key_size of at least 16), each eight consecutive keys share all but
// their last 8 bytes, so a trie of 8-byte slices (Masstree) makes layers for them:
//   key:   g = key / 8, 8 bytes big-endian, then filler bytes computed from g, and the key's own
//          8 bytes big-endian last (byte order is still integer order).
// The filler is made and checked eight bytes at a time (chunk j >= 1 holds w ^ j * a constant)
// with fixed-size copies: byte by byte, or with a library call per chunk, it took a tenth to a
// fifth of a 1 KB-value run, work the artifact this is compared with (nbMontage's, copying one
// prepared value) does not do.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/pm/pool.hpp"

namespace pmds::registry {

template <class M, bool SharedPrefixes = false>
class FixedSizeStrings {
 public:
  static constexpr Criterion criterion = M::criterion;
  static constexpr EpochBound epoch_bound = [] {
    if constexpr (requires { M::epoch_bound; }) return M::epoch_bound;
    return EpochBound::none;
  }();
  static constexpr std::size_t largest_block = [] {
    if constexpr (requires { M::largest_block; }) return M::largest_block;
    return std::size_t{0};
  }();

  FixedSizeStrings(std::unique_ptr<M> map, std::size_t key_size, std::size_t value_size)
      : map_(std::move(map)),
        key_size_(key_size),
        value_size_(value_size),
        shared_prefixes_(SharedPrefixes && key_size >= 16) {
    check_size("key", key_size, M::max_key_size);
    check_size("value", value_size, M::max_value_size);
  }

  bool insert(Key k, Value v) { return map_->insert(key(k), value(v)); }
  bool put(Key k, Value v) requires requires(M& m, std::string_view s) { m.put(s, s); }
  { return map_->put(key(k), value(v)); }
  bool remove(Key k) { return map_->remove(key(k)); }
  bool contains(Key k) { return map_->contains(key(k)); }
  std::optional<Value> get(Key k) {
    const std::optional<std::string> v = map_->get(key(k));
    if (!v.has_value()) return std::nullopt;
    return decode_value(*v);
  }
  template <class F>
  std::size_t scan(Key from, std::size_t max_count, F&& visit) requires
      requires(M& m, std::string_view s) {
    m.scan(s, max_count, [](std::string_view, std::string_view) {});
  }
  {
    return map_->scan(
        key(from == min_reserved_key ? min_user_key : from), max_count,
        [&](std::string_view k, std::string_view v) { visit(decode_key(k), decode_value(v)); });
  }
  template <class F>
  void for_each(F&& f) {
    map_->for_each(
        [&](std::string_view k, std::string_view v) { f(decode_key(k), decode_value(v)); });
  }

  void sync() requires Syncable<M> { map_->sync(); }
  std::uint64_t epoch() const requires requires(const M& m) { m.epoch(); }
  { return map_->epoch(); }
  void background_step() requires HasBackgroundWork<M> { map_->background_step(); }
  RecoveryStats recovery_stats() const requires requires(const M& m) { m.recovery_stats(); }
  { return map_->recovery_stats(); }
  void finish_recovery_sweep() requires requires(M& m) { m.finish_recovery_sweep(); }
  { map_->finish_recovery_sweep(); }
  M& map() { return *map_; }

 private:
  static void check_size(const char* what, std::size_t size, std::size_t max) {
    if (size < 8 || size > max)
      throw PoolError(PoolErrc::bad_argument, std::string("pmds: ") + M::name + ": a " + what +
                                                  " size of " + std::to_string(size) +
                                                  " bytes is not in [8, " + std::to_string(max) +
                                                  "]");
  }

  // Chunk j >= 1 (bytes 8j .. 8j+7, the last one possibly shorter) of the string of word w.
  static std::uint64_t filler(std::uint64_t w, std::size_t j) {
    return w ^ (j * 0x9e3779b97f4a7c15);
  }
  static void encode(std::uint64_t w, std::string& out) {
    for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<char>(w >> (56 - 8 * i));
    std::size_t at = 8;
    for (; at + 8 <= out.size(); at += 8) {  // whole chunks: a fixed-size copy, inlined
      const std::uint64_t chunk = filler(w, at / 8);
      std::memcpy(out.data() + at, &chunk, 8);
    }
    const std::uint64_t last = filler(w, at / 8);
    std::memcpy(out.data() + at, &last, out.size() - at);
  }
  // The first byte of s (at 8 or after) that is not w's filler; s.size() when all are.
  static std::size_t first_wrong_byte(std::uint64_t w, std::string_view s) {
    for (std::size_t at = 8; at < s.size(); at += 8) {
      const std::uint64_t chunk = filler(w, at / 8);
      const std::size_t n = std::min<std::size_t>(8, s.size() - at);
      std::uint64_t read = chunk;  // a short last chunk: the bytes past its end compare equal
      if (n == 8)
        std::memcpy(&read, s.data() + at, 8);  // a fixed-size copy, inlined
      else
        std::memcpy(&read, s.data() + at, n);
      if (read != chunk)
        for (std::size_t i = at; i < at + n; ++i)
          if (s[i] != reinterpret_cast<const char*>(&chunk)[i - at]) return i;
    }
    return s.size();
  }
  static std::uint64_t decode(std::string_view s) {
    std::uint64_t w = 0;
    for (std::size_t i = 0; i < 8; ++i) w = w << 8 | static_cast<unsigned char>(s[i]);
    return w;
  }

  // Into a buffer of this thread's, reused: an operation allocates nothing for its arguments.
  std::string_view key(Key k) {
    check_key(k);
    thread_local std::string buffer;
    buffer.resize(key_size_);
    if (shared_prefixes_) {
      encode(k / 8, buffer);
      for (std::size_t i = 0; i < 8; ++i)
        buffer[key_size_ - 8 + i] = static_cast<char>(k >> (56 - 8 * i));
    } else {
      encode(k, buffer);
    }
    return buffer;
  }
  std::string_view value(Value v) {
    thread_local std::string buffer;
    buffer.resize(value_size_);
    encode(v, buffer);
    return buffer;
  }
  // Every byte of a key or value read back is checked (the crash lab reads contents back
  // through these: a damaged suffix or value block must not pass as its first 8 bytes).
  Key decode_key(std::string_view k) const {
    if (k.size() != key_size_) damaged("key", k.size(), key_size_);
    if (!shared_prefixes_) return checked(decode(k), k, "key");
    const Key key = decode(k.substr(key_size_ - 8));
    const std::string_view prefix = k.substr(0, key_size_ - 8);  // k / 8 and its filler
    if (checked(decode(prefix), prefix, "key prefix") != key / 8)
      throw Error(std::string("pmds: ") + M::name + ": key " + std::to_string(key) +
                  " read back with the prefix of another");
    return key;
  }
  Value decode_value(std::string_view v) const {
    if (v.size() != value_size_) damaged("value", v.size(), value_size_);
    return checked(decode(v), v, "value");
  }
  // w, once every byte of s after its first 8 is w's filler.
  static std::uint64_t checked(std::uint64_t w, std::string_view s, const char* what) {
    if (const std::size_t wrong = first_wrong_byte(w, s); wrong != s.size())
      throw Error(std::string("pmds: ") + M::name + ": " + what + " " + std::to_string(w) +
                  " read back with a wrong byte at " + std::to_string(wrong));
    return w;
  }
  [[noreturn]] static void damaged(const char* what, std::size_t got, std::size_t want) {
    throw Error(std::string("pmds: ") + M::name + ": a " + what + " of " + std::to_string(got) +
                " bytes read back where " + std::to_string(want) + " were written");
  }

  std::unique_ptr<M> map_;
  std::size_t key_size_, value_size_;
  bool shared_prefixes_;  // keys are a prefix of k / 8, then k (SharedPrefixes, 16 bytes or more)
};

}  // namespace pmds::registry
