// pmds — Masstree's nodes (incll/masstree.hpp is the tree and says how it works): the version
// word readers validate and writers lock (Masstree §4.2), the layer key and the key cursor, the
// border with its permutation word (§4.6.2) and the value lines that hold InCLL's logs (InCLL
// §4.1), the interior node, and the version protocol's small operations. One layout serves
// every memory mode.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "pmds/backoff.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/pm/access.hpp"

namespace pmds::incll {

namespace masstree_detail {

inline constexpr int width = 14;  // entries per border node, separators per interior node

// The version word (Masstree §4.2).
inline constexpr std::uint64_t locked_bit = 1;
inline constexpr std::uint64_t inserting_bit = 2;
inline constexpr std::uint64_t splitting_bit = 4;
inline constexpr std::uint64_t root_bit = 8;
inline constexpr std::uint64_t border_bit = 16;
inline constexpr std::uint64_t dirty_bits = inserting_bit | splitting_bit;
inline constexpr std::uint64_t insert_unit = std::uint64_t{1} << 8;  // insert counter: bits 8-31
inline constexpr std::uint64_t insert_mask = std::uint64_t{0xffffff} << 8;
inline constexpr std::uint64_t split_unit = std::uint64_t{1} << 32;  // split counter: bits 32-63

// What a border entry holds: 0..8 the key ends in this slice with that many bytes; has_suffix
// the key goes on and the rest is in the entry's suffix; has_layer the entry is a layer root.
inline constexpr std::uint8_t has_suffix = 9;
inline constexpr std::uint8_t has_layer = 10;

// A key's position within one layer, ordered as the byte strings are.
struct LayerKey {
  std::uint64_t slice = 0;
  std::uint8_t length_class = 0;  // 0..8, or 9 (has_suffix) when the key goes on
  auto operator<=>(const LayerKey&) const = default;
};

inline std::uint8_t length_class_of(std::uint8_t kind) {
  return kind < has_suffix ? kind : has_suffix;
}

// A key and how far into it the search has descended (8 bytes per layer).
struct KeyCursor {
  std::string_view key;
  std::size_t offset = 0;

  std::size_t remaining() const { return key.size() - offset; }
  LayerKey layer_key() const {
    const std::size_t n = std::min<std::size_t>(remaining(), 8);
    std::uint64_t big_endian = 0;
    if (n == 8)  // (a constant size: one load, where a variable one calls memcpy)
      std::memcpy(&big_endian, key.data() + offset, 8);
    else if (n != 0)  // data() may be null if empty
      std::memcpy(&big_endian, key.data() + offset, n);
    const auto length = static_cast<std::uint8_t>(remaining() > 8 ? has_suffix : n);
    return {__builtin_bswap64(big_endian), length};
  }
  std::string_view suffix() const { return key.substr(offset + 8); }  // when remaining() > 8
  void descend() { offset += 8; }
};

inline void append_slice(std::string& out, std::uint64_t slice, std::size_t bytes) {
  const std::uint64_t big_endian = __builtin_bswap64(slice);
  out.append(reinterpret_cast<const char*>(&big_endian), bytes);
}

// An immutable byte string: a value of StringMasstree, or a key kept as an entry's suffix. Made
// by the memory mode (on the heap, or in a pool slot: make_bytes), replaced, never changed, so a
// reader holding an epoch pin may read it after validating the node.
struct Bytes {
  std::uint64_t size;

  std::string_view view() const { return {reinterpret_cast<const char*>(this + 1), size}; }
  // The bytes from `from` on (of a key kept as a suffix: the part below the layers it passed).
  std::string_view rest(std::size_t from) const { return view().substr(from); }
  static Bytes* make(std::string_view s) {
    auto* b = ::new (::operator new(sizeof(Bytes) + s.size())) Bytes{s.size()};
    if (!s.empty()) std::memcpy(b + 1, s.data(), s.size());
    return b;
  }
  static void destroy(Bytes* b) { ::operator delete(b); }
};

struct Interior;

// Every field is a pm::atomic (docs/ARCHITECTURE.md §2): in DRAM it is exactly std::atomic, and
// in a pool the simulator sees every store. Nodes are made by make() on raw storage (DRAM or a
// pool slot) and every field is stored explicitly, so a recycled pool slot keeps nothing old.
struct Node {
  pm::atomic<std::uint64_t> version;
  // The durable modes' logging word (incll/checkpoints.hpp: the epoch the node was logged in);
  // the transient tree leaves it 0.
  pm::atomic<std::uint64_t> logged;
  pm::atomic<Interior*> parent;

  void init_node(std::uint64_t v, std::uint64_t stamp) {
    version.store(v, std::memory_order_relaxed);
    logged.store(stamp, std::memory_order_relaxed);
    parent.store(nullptr, std::memory_order_relaxed);
  }
};

// A border entry as a writer or a scan copies it.
struct Entry {
  std::uint8_t kind = 0;
  std::uint64_t slice = 0;
  std::uint64_t value = 0;  // the value word, a Bytes* value, or the layer root (has_layer)
  Bytes* suffix = nullptr;  // has_suffix only

  LayerKey layer_key() const { return {slice, length_class_of(kind)}; }
};

// The permutation word (Masstree §4.6.2): the entry count in bits 0-3, then the slot of the
// entry at each position, 4 bits each; positions count..width-1 list the free slots.
struct Permutation {
  std::uint64_t word;

  static Permutation empty() {
    std::uint64_t w = 0;
    for (int p = 0; p < width; ++p) w |= std::uint64_t(p) << (4 + 4 * p);
    return {w};
  }
  int size() const { return static_cast<int>(word & 15); }
  int slot(int position) const { return static_cast<int>((word >> (4 + 4 * position)) & 15); }

  // The first free slot moves to `position`; the entries from there on move one place right.
  Permutation inserted(int position) const {
    const int n = size();
    std::uint64_t w = (word & ~std::uint64_t{15}) | std::uint64_t(n + 1);
    const std::uint64_t free_slot = std::uint64_t(slot(n));
    for (int p = n; p > position; --p) w = with(w, p, slot(p - 1));
    return {with(w, position, free_slot)};
  }
  // The entry at `position` leaves; its slot becomes the first free one.
  Permutation removed(int position) const {
    const int n = size();
    std::uint64_t w = (word & ~std::uint64_t{15}) | std::uint64_t(n - 1);
    const std::uint64_t gone = std::uint64_t(slot(position));
    for (int p = position; p < n - 1; ++p) w = with(w, p, slot(p + 1));
    return {with(w, n - 1, gone)};
  }

 private:
  static std::uint64_t with(std::uint64_t w, int position, std::uint64_t s) {
    const int shift = 4 + 4 * position;
    return (w & ~(std::uint64_t{15} << shift)) | (s << shift);
  }
};
static_assert(4 + 4 * width <= 64, "the permutation must fit one word");

// One cache line of a border's values with the paper's value InCLL (§4.1.3) for them: the epoch
// and index of the one value of this line logged in that epoch (log_tag: epoch << 3 | index; 0
// none), and its value at the epoch's start (log_value). The paper packs the InCLL in one word
// beside 7 value *pointers* (a 44-bit pointer, a 4-bit index, 16 epoch bits); the 8-byte form
// keeps its values inline, and a 64-bit value does not pack, so here the InCLL takes two words
// and a line holds 6 values: 14 values take three lines (6, 6, 2), each with its own InCLL. The
// byte-string form's values are pointers and could pack, but every form and mode shares this
// one border layout (one tree, one recovery walk), so it keeps the two-word InCLL too.
struct alignas(64) ValueLine {
  static constexpr int values = 6;
  pm::atomic<std::uint64_t> value[values];
  pm::atomic<std::uint64_t> log_tag;
  pm::atomic<std::uint64_t> log_value;
};

// The first line holds the node header, the permutation and the paper's InCLL_p (§4.1.1), which
// must share the permutation's line: stores to one line persist in order, so the log needs no
// fence; each value line has its own InCLL (ValueLine). The transient and logging modes leave
// the InCLL words as make() set them.
struct alignas(64) Border : Node {
  pm::atomic<std::uint64_t> permutation;
  // InCLL_p: the permutation at the start of epoch node_epoch >> 1 (permutationInCLL), and that
  // epoch with insertions_allowed in bit 0 (nodeEpoch, insAllowed). (The paper's `logged` flag is
  // Node::logged.)
  pm::atomic<std::uint64_t> permutation_log;
  pm::atomic<std::uint64_t> node_epoch;
  pm::atomic<Border*> next;
  // The least key this node may hold; immutable once the node is published.
  pm::atomic<std::uint64_t> low_slice;
  pm::atomic<std::uint8_t> low_class;
  pm::atomic<std::uint8_t> kind[width];
  pm::atomic<std::uint64_t> slice[width];
  ValueLine value_lines[(width + ValueLine::values - 1) / ValueLine::values];
  pm::atomic<Bytes*> suffix[width];

  pm::atomic<std::uint64_t>& value(int slot) {
    return value_lines[slot / ValueLine::values].value[slot % ValueLine::values];
  }
  const pm::atomic<std::uint64_t>& value(int slot) const {
    return value_lines[slot / ValueLine::values].value[slot % ValueLine::values];
  }

  // An empty border on `storage` (sizeof(Border) bytes, 64-aligned).
  static Border* make(void* storage, std::uint64_t v, std::uint64_t stamp, LayerKey low = {}) {
    auto* b = ::new (storage) Border;  // default-initialised; every field is stored below
    b->init_node(v | border_bit, stamp);
    b->permutation.store(Permutation::empty().word, std::memory_order_relaxed);
    b->permutation_log.store(Permutation::empty().word, std::memory_order_relaxed);
    // Made in epoch stamp >> 1, its InCLL_p counts as taken in that epoch (nothing to save: a
    // node new in the failed epoch is unreachable after recovery), and nothing to recover lazily.
    b->node_epoch.store(stamp | 1, std::memory_order_relaxed);
    b->next.store(nullptr, std::memory_order_relaxed);
    b->low_slice.store(low.slice, std::memory_order_relaxed);
    b->low_class.store(low.length_class, std::memory_order_relaxed);
    for (int i = 0; i < width; ++i) b->set_entry(i, Entry{}, std::memory_order_relaxed);
    for (ValueLine& line : b->value_lines) {  // (the last line's unused words too)
      for (auto& v : line.value) v.store(0, std::memory_order_relaxed);
      line.log_tag.store(0, std::memory_order_relaxed);
      line.log_value.store(0, std::memory_order_relaxed);
    }
    return b;
  }

  LayerKey low() const {
    return {low_slice.load(std::memory_order_relaxed), low_class.load(std::memory_order_relaxed)};
  }
  // (The suffix is read only for a key that has one: for the others its line is not touched.)
  Entry entry(int slot) const {
    const std::uint8_t k = kind[slot].load(std::memory_order_acquire);
    return {k, slice[slot].load(std::memory_order_acquire),
            value(slot).load(std::memory_order_acquire),
            k == has_suffix ? suffix[slot].load(std::memory_order_acquire) : nullptr};
  }
  void set_entry(int slot, const Entry& e, std::memory_order o = std::memory_order_release) {
    kind[slot].store(e.kind, o);
    slice[slot].store(e.slice, o);
    value(slot).store(e.value, o);
    suffix[slot].store(e.suffix, o);
  }
};

struct alignas(64) Interior : Node {
  pm::atomic<int> keys;
  pm::atomic<std::uint64_t> slice[width];
  pm::atomic<std::uint8_t> length_class[width];
  pm::atomic<Node*> child[width + 1];

  // An interior node without separators on `storage` (sizeof(Interior) bytes, 64-aligned).
  static Interior* make(void* storage, std::uint64_t v, std::uint64_t stamp) {
    auto* in = ::new (storage) Interior;  // default-initialised; every field is stored below
    in->init_node(v, stamp);
    in->keys.store(0, std::memory_order_relaxed);
    for (int i = 0; i < width; ++i) {
      in->slice[i].store(0, std::memory_order_relaxed);
      in->length_class[i].store(0, std::memory_order_relaxed);
    }
    for (int i = 0; i <= width; ++i) in->child[i].store(nullptr, std::memory_order_relaxed);
    return in;
  }

  LayerKey separator(int i) const {
    return {slice[i].load(std::memory_order_acquire),
            length_class[i].load(std::memory_order_acquire)};
  }
  void set_separator(int i, LayerKey k) {
    slice[i].store(k.slice, std::memory_order_release);
    length_class[i].store(k.length_class, std::memory_order_release);
  }
  // The child whose range holds k: separators equal to k lead right (a separator is the low key
  // of the node on its right).
  // (The slices alone decide unless they are equal, and the length classes are not read then.)
  int child_index(LayerKey k, int n) const {
    int i = 0;
    for (; i < n; ++i) {
      const std::uint64_t s = slice[i].load(std::memory_order_acquire);
      if (k.slice < s) break;
      if (k.slice == s && k.length_class < length_class[i].load(std::memory_order_acquire)) break;
    }
    return i;
  }
};

inline bool is_border(std::uint64_t v) {
  return (v & border_bit) != 0;
}

// Asks for a node's first six cache lines at once, before the node is read (the Masstree
// paper's prefetch of a node's lines in parallel): all five of an interior node, a border's
// header, keys and first two value lines. YCSB A ran about 5% faster with it.
inline void prefetch(const Node* n) {
  const auto* p = reinterpret_cast<const char*>(n);
#pragma GCC unroll 6  // (six instructions, not a loop of twenty run on every level of a descent)
  for (int line = 0; line < 6; ++line) __builtin_prefetch(p + 64 * line);
}

inline bool is_root(std::uint64_t v) {
  return (v & root_bit) != 0;
}
// Whether a node changed between two reads of its version (the lock bit alone is no change).
inline bool changed(std::uint64_t before, std::uint64_t after) {
  return (before ^ after) > locked_bit;
}
inline bool split_since(std::uint64_t before, std::uint64_t after) {
  return (before ^ after) >= split_unit || ((before ^ after) & root_bit) != 0;
}

using pmds::backoff;

inline std::uint64_t stable_version(const Node* n) {
  std::uint64_t v = n->version.load(std::memory_order_acquire);
  for (int spins = 0; v & dirty_bits; v = n->version.load(std::memory_order_acquire))
    backoff(spins);
  return v;
}

inline void lock(Node* n) {
  for (int spins = 0;; backoff(spins)) {
    std::uint64_t v = n->version.load(std::memory_order_relaxed);
    if (!(v & locked_bit) &&
        n->version.compare_exchange_weak(v, v | locked_bit, std::memory_order_acquire))
      return;
  }
}

// Marks a locked node dirty. Relaxed: the writer's later stores are release stores, so a reader
// that sees one of them sees this mark too.
inline void mark(Node* n, std::uint64_t dirty_bit) {
  n->version.store(n->version.load(std::memory_order_relaxed) | dirty_bit,
                   std::memory_order_relaxed);
}

inline void unlock(Node* n) {
  std::uint64_t v = n->version.load(std::memory_order_relaxed);
  if (v & inserting_bit) v = (v & ~insert_mask) | ((v + insert_unit) & insert_mask);
  if (v & splitting_bit) v += split_unit;
  n->version.store(v & ~(locked_bit | dirty_bits), std::memory_order_release);
}

inline std::size_t node_bytes(const Node* n) {
  return is_border(n->version.load(std::memory_order_relaxed)) ? sizeof(Border) : sizeof(Interior);
}

}  // namespace masstree_detail

}  // namespace pmds::incll
