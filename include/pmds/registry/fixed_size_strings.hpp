// pmds::registry::FixedSizeStrings<M> — a byte-string map M (pmds::ByteStringMap) seen as an
// 8-byte map (pmds::Map), so that the registry's tools run it: `pmds bench --key-size K
// --value-size V` (seed 003 §5's 32-byte keys and 1 KB values), the crash lab and the default
// suite. Each key is written as key_size bytes, each value as value_size bytes:
//   key:   its 8 bytes big-endian (so byte order is integer order, and a scan means the same),
//          then filler bytes computed from the key;
//   value: its 8 bytes big-endian, then filler bytes computed from the value.
// get checks the whole value it reads back (its size and every filler byte) and throws
// pmds::Error on a mismatch, so a torn or mixed-up value is reported, never read as a number.
// Sizes are checked at construction: at least 8, at most M::max_key_size / M::max_value_size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/pm/pool.hpp"

namespace pmds::registry {

template <class M>
class FixedSizeStrings {
 public:
  static constexpr Criterion criterion = M::criterion;

  FixedSizeStrings(std::unique_ptr<M> map, std::size_t key_size, std::size_t value_size)
      : map_(std::move(map)), key_size_(key_size), value_size_(value_size) {
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
  void background_step() requires HasBackgroundWork<M> { map_->background_step(); }
  const RecoveryStats& recovery_stats() const requires requires(const M& m) { m.recovery_stats(); }
  { return map_->recovery_stats(); }
  M& map() { return *map_; }

 private:
  static void check_size(const char* what, std::size_t size, std::size_t max) {
    if (size < 8 || size > max)
      throw PoolError(PoolErrc::bad_argument, std::string("pmds: ") + M::name + ": a " + what +
                                                  " size of " + std::to_string(size) +
                                                  " bytes is not in [8, " + std::to_string(max) +
                                                  "]");
  }

  // Byte i >= 8 of the string of word w.
  static char filler(std::uint64_t w, std::size_t i) {
    return static_cast<char>((w >> (8 * (i % 8))) ^ (i * 0x9d));
  }
  static void encode(std::uint64_t w, std::string& out) {
    for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<char>(w >> (56 - 8 * i));
    for (std::size_t i = 8; i < out.size(); ++i) out[i] = filler(w, i);
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
    encode(k, buffer);
    return buffer;
  }
  std::string_view value(Value v) {
    thread_local std::string buffer;
    buffer.resize(value_size_);
    encode(v, buffer);
    return buffer;
  }
  Key decode_key(std::string_view k) const {
    if (k.size() != key_size_) damaged("key", k.size(), key_size_);
    return decode(k);
  }
  Value decode_value(std::string_view v) const {
    if (v.size() != value_size_) damaged("value", v.size(), value_size_);
    const Value w = decode(v);
    for (std::size_t i = 8; i < v.size(); ++i)
      if (v[i] != filler(w, i))
        throw Error(std::string("pmds: ") + M::name + ": value " + std::to_string(w) +
                    " read back with a wrong byte at " + std::to_string(i));
    return w;
  }
  [[noreturn]] static void damaged(const char* what, std::size_t got, std::size_t want) {
    throw Error(std::string("pmds: ") + M::name + ": a " + what + " of " + std::to_string(got) +
                " bytes read back where " + std::to_string(want) + " were written");
  }

  std::unique_ptr<M> map_;
  std::size_t key_size_, value_size_;
};

}  // namespace pmds::registry
