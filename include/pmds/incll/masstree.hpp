// pmds — Masstree (Mao, Kohler, Morris, EuroSys 2012), the ordered byte-string index that InCLL
// makes durable. This file is the tree itself, written once over a memory mode: in
// DRAM (TransientMemory below: `masstree/transient`, the twin every InCLL figure compares
// against) or in a pool with epoch checkpoints (incll/checkpoints.hpp). docs/ARCHITECTURE.md §1
// (incll/) says what is built of InCLL so far.
//
// The shape. A trie of B+trees ("layers") over 8-byte key slices: layer 0 orders keys by their
// first 8 bytes; keys that share those 8 bytes and go on live in a layer below, keyed by their
// next 8 bytes, and so on. Within a layer a key is the pair (slice, length class): the slice is
// the next 8 bytes big-endian and zero-padded, the class 0..8 the number of key bytes left when
// the key ends in this slice, or 9 when it goes on — ordered as the byte strings are. A border
// (leaf) node holds up to `width` entries in unordered slots with a permutation word giving their
// order; an entry whose key goes on holds the key as a suffix (the whole key, of which the entry
// compares the bytes after its slice: a key pushed a layer down keeps the same copy), or, once a
// second key shares its slice, a pointer to the next layer's root. Interior nodes hold separators
// and children.
//
// Concurrency, as in the Masstree paper (§4): every node has a version word (lock bit,
// "inserting" and "splitting" dirty bits, an insert counter and a split counter). Readers take
// no lock: they read a stable (not dirty) version, read the node, and read the version again; a
// change sends them back (to the same node after an insert, or on along the border's `next` link
// / from the root after a split). Writers lock the border node, mark it dirty, write, and unlock
// (which bumps the counter of what they did). A split locks upwards (child, then parent), never
// down, and left to right along borders, so locks cannot deadlock. Every field a reader reads
// without the lock is an atomic: loads of node contents are acquire and the writer's stores
// release, so a reader that sees a new value also sees the dirty version written before it (the
// seqlock rule without stand-alone fences, which ThreadSanitizer does not model).
//
// Choices where this differs from the paper's code, each for simplicity:
// - every insert and remove marks the border "inserting" (the original skips it when a fresh
//   slot is filled), so readers of that node retry after any structural change of it;
// - removal does not free or merge empty nodes or layers (the tree keeps its shape; memory
//   returns when the tree is destroyed); values and suffixes are freed through an epoch domain;
// - a layer's root pointer (in the entry above it) is not updated when the layer's root splits:
//   readers climb from the old root by parent links (the top layer's root is updated);
// - width 14 (the original uses 15), and a border of 512 bytes: InCLL keeps logs in
//   the border's first line and in each line of values (Border, ValueLine; the nodes are in
//   incll/masstree_nodes.hpp); all modes share this layout.
//
// Two forms: Masstree (8-byte keys and values: pmds::Map, UpdatableMap, Scannable; a key is its
// 8 bytes big-endian, so the order is numeric) and StringMasstree (byte-string keys and values:
// pmds::ByteStringMap, with scan). Keys 0 and 2^64-1 of the 8-byte form are rejected with
// pmds::ReservedKey like every structure's (interfaces.hpp); a byte-string key may be empty and
// at most max_key_size bytes.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory_resource>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "pmds/backoff.hpp"
#include "pmds/error.hpp"
#include "pmds/huge_pages.hpp"
#include "pmds/incll/masstree_nodes.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/range.hpp"
#include "pmds/reclaim/epoch.hpp"

namespace pmds::incll {

// The transient memory mode: nodes in DRAM, no logging. The durable modes
// (incll/checkpoints.hpp) have the same members and keep nodes in a pool.
//
// Nodes come from an arena (std::pmr::monotonic_buffer_resource, behind a mutex: splits are
// rare next to operations), not one heap allocation each: the tree frees no node before it is
// destroyed, and the durable modes' nodes lie side by side in the pool's chunks, so the twin
// every InCLL figure compares against gets the same dense placement. (With aligned operator new
// per node, the heap's headers and padding spread the nodes out and the twin ran reads up to a
// fifth slower than the durable tree over the pool.) The arena's chunks are advised for huge
// pages (huge_pages.hpp): a descent visits six or seven nodes at random addresses, and on 4 KiB
// pages most of those visits missed the TLB.
class TransientMemory {
 public:
  static constexpr bool owns_nodes = true;  // the tree's destructor walks its nodes
  static constexpr std::uint32_t retires_per_collect = reclaim::EpochDomain::default_collect_every;

  // No barrier: nothing to checkpoint.
  struct WriteScope {};
  WriteScope begin_write() { return {}; }

  void* allocate(std::size_t bytes) {
    std::lock_guard<std::mutex> hold(arena_lock_);
    return arena_.allocate(bytes, 64);
  }
  void release(void*) {}  // the arena returns every node at once, when the tree is destroyed
  std::uint64_t new_node_stamp() const { return 0; }
  void before_write(pm::atomic<std::uint64_t>&, const void*, std::size_t) {}
  void after_derived_write(const void*, std::size_t) {}
  void before_permutation_write(masstree_detail::Border&, bool) {}
  void before_value_write(masstree_detail::Border&, int) {}
  static constexpr bool recovers_borders = false;  // (so the tree skips before_border_access)
  void before_border_access(masstree_detail::Border&) const {}

  // Byte strings (StringMasstree's keys and values): on the heap; the tree frees one once no
  // reader can hold it.
  static constexpr std::size_t max_key_size = std::size_t{1} << 20;
  static constexpr std::size_t max_value_size = std::size_t{1} << 20;
  masstree_detail::Bytes* make_bytes(std::string_view s) { return masstree_detail::Bytes::make(s); }
  void free_bytes(masstree_detail::Bytes* b) { masstree_detail::Bytes::destroy(b); }

  pm::atomic<std::uint64_t>& root_word() { return root_; }
  const pm::atomic<std::uint64_t>& root_word() const { return root_; }
  void before_root_write() {}

 private:
  pm::atomic<std::uint64_t> root_{0};
  std::mutex arena_lock_;
  pmds::HugePageResource chunks_;
  std::pmr::monotonic_buffer_resource arena_{std::size_t{1} << 16, &chunks_};
};

// The tree, over the value form: 8-byte value words (StringValues = false) or byte strings
// (StringValues = true, each value a Bytes on the heap; transient only) and a memory mode:
// TransientMemory above, or a durable mode of incll/checkpoints.hpp, which the tree tells before
// it first writes a node (before_write; before_permutation_write when an insert or a remove
// changes only a border's permutation, before_value_write when an update changes one value),
// before it reads a border (before_border_access: lazy recovery) and around every write operation
// (begin_write). Use the aliases Masstree and StringMasstree below, or
// incll/durable_masstree.hpp.
template <bool StringValues, class Memory = TransientMemory>
class BasicMasstree {
 protected:
  using LayerKey = masstree_detail::LayerKey;
  using KeyCursor = masstree_detail::KeyCursor;
  using Node = masstree_detail::Node;
  using Border = masstree_detail::Border;
  using Interior = masstree_detail::Interior;
  using Entry = masstree_detail::Entry;
  using Bytes = masstree_detail::Bytes;
  using Permutation = masstree_detail::Permutation;
  static constexpr int width = masstree_detail::width;

 public:
  static constexpr Criterion criterion = Criterion::none;
  static constexpr std::size_t max_key_size = Memory::max_key_size;

  // The memory mode is built from `args`; a memory without a root (a new one) gets an empty tree.
  template <class... Args>
  explicit BasicMasstree(Args&&... args) : memory_(std::forward<Args>(args)...) {
    if (memory_.root_word().load(std::memory_order_acquire) == 0)
      memory_.root_word().store(reinterpret_cast<std::uint64_t>(
                                    static_cast<Node*>(new_border(masstree_detail::root_bit))),
                                std::memory_order_release);
  }
  BasicMasstree(const BasicMasstree&) = delete;
  BasicMasstree& operator=(const BasicMasstree&) = delete;
  // Quiescent: frees every node, value and suffix (a durable memory keeps its nodes).
  ~BasicMasstree() {
    if constexpr (StringValues) domain_.drain();
    if constexpr (Memory::owns_nodes) destroy(root_of(top_root()));
  }

 protected:
  enum class PutMode { insert_only, insert_or_update };

  // What a found entry says about the rest of the key.
  enum class Match { absent, found, layer };

  // The value word (or Bytes*) of the key, if present.
  std::optional<std::uint64_t> find(KeyCursor key) const {
    Node* layer = top_root();
    for (;;) {
      const LayerKey k = key.layer_key();
      auto [b, v] = find_border(layer, k);
      for (;;) {
        const Permutation perm{b->permutation.load(std::memory_order_acquire)};
        int position;
        const bool present = search(b, perm, k, position);
        const Entry e = present ? b->entry(perm.slot(position)) : Entry{};
        const std::uint64_t after = b->version.load(std::memory_order_acquire);
        if (masstree_detail::changed(v, after)) {
          std::tie(b, v) = move_right(b, k);
          continue;
        }
        if (!present) return std::nullopt;
        switch (match(e, key)) {
          case Match::absent:
            return std::nullopt;
          case Match::found:
            return e.value;
          case Match::layer:
            break;
        }
        layer = reinterpret_cast<Node*>(e.value);
        key.descend();
        break;
      }
    }
  }

  // Inserts the key with `value_in` (a word, or the bytes of a StringValues value), or in
  // insert_or_update mode replaces the present value. Returns whether the key was absent; in
  // insert_only mode a present key is left alone.
  template <class V>
  bool store(KeyCursor key, V value_in, PutMode mode) {
    [[maybe_unused]] auto writing = memory_.begin_write();
    // A StringValues value and the key (kept if it ends in a suffix) are copied first, inside the
    // operation (a durable memory flushes them at its epoch's boundary) and before anything
    // changes (a full pool stops the operation here); what the tree does not take is freed.
    struct Copies {
      Memory& memory;
      Bytes* value = nullptr;
      Bytes* key = nullptr;
      ~Copies() {
        if (value != nullptr) memory.free_bytes(value);
        if (key != nullptr) memory.free_bytes(key);
      }
    } copies{memory_};
    std::uint64_t value;
    if constexpr (StringValues) {
      copies.value = memory_.make_bytes(value_in);
      if (key.remaining() > 8) copies.key = memory_.make_bytes(key.key);
      value = reinterpret_cast<std::uint64_t>(copies.value);
    } else {
      value = value_in;
    }
    Node* layer = top_root();
    for (;;) {
      const LayerKey k = key.layer_key();
      Border* b = lock_border(layer, k);
      const Permutation perm{b->permutation.load(std::memory_order_relaxed)};
      int position;
      if (search(b, perm, k, position)) {
        const int slot = perm.slot(position);
        const Entry e = b->entry(slot);
        switch (match(e, key)) {
          case Match::found:
            if (mode == PutMode::insert_or_update) {
              // A value word is replaced in place: a reader sees the old or the new one, both
              // of the same key (the slot's key changes only under the dirty mark).
              memory_.before_value_write(*b, slot);
              b->value(slot).store(value, std::memory_order_release);
              copies.value = nullptr;
              masstree_detail::unlock(b);
              retire_value(e.value);
            } else {
              masstree_detail::unlock(b);
            }
            return false;
          case Match::layer:
            masstree_detail::unlock(b);
            break;
          case Match::absent:  // the slice holds another key that goes on: push it a layer down
            layer = make_layer(b, slot, e, key.offset + 8);
            masstree_detail::unlock(b);
            key.descend();
            continue;
        }
        layer = reinterpret_cast<Node*>(e.value);
        key.descend();
        continue;
      }
      Entry fresh{k.length_class, k.slice, value, nullptr};
      copies.value = nullptr;
      if (k.length_class == masstree_detail::has_suffix) std::swap(fresh.suffix, copies.key);
      if (perm.size() < width)
        insert_entry(b, perm, position, fresh);
      else
        split_border(b, perm, position, fresh);
      return true;
    }
  }

  // Removes the key; returns whether it was present.
  bool erase(KeyCursor key) {
    [[maybe_unused]] auto writing = memory_.begin_write();
    Node* layer = top_root();
    for (;;) {
      const LayerKey k = key.layer_key();
      Border* b = lock_border(layer, k);
      const Permutation perm{b->permutation.load(std::memory_order_relaxed)};
      int position;
      if (!search(b, perm, k, position)) {
        masstree_detail::unlock(b);
        return false;
      }
      const Entry e = b->entry(perm.slot(position));
      switch (match(e, key)) {
        case Match::absent:
          masstree_detail::unlock(b);
          return false;
        case Match::found:
          memory_.before_permutation_write(*b, /*inserting=*/false);
          masstree_detail::mark(b, masstree_detail::inserting_bit);
          b->permutation.store(perm.removed(position).word, std::memory_order_release);
          masstree_detail::unlock(b);
          retire_value(e.value);
          retire_suffix(e.suffix);
          return true;
        case Match::layer:
          masstree_detail::unlock(b);
          layer = reinterpret_cast<Node*>(e.value);
          key.descend();
          break;
      }
    }
  }

  // Visits, in key order, the entries whose keys are >= `from`: visit(key bytes, value word)
  // returns false to stop. Each node is read as one consistent snapshot (not the whole scan).
  template <class F>
  void scan_from(std::string_view from, F&& visit) const {
    std::string prefix;
    std::optional<std::string_view> lower = from;
    scan_layer(top_root(), prefix, lower, visit);
  }

  static void check_key_size(std::string_view key) {
    if (key.size() > max_key_size)
      throw Error("pmds: Masstree keys are at most " + std::to_string(max_key_size) +
                  " bytes here (got " + std::to_string(key.size()) + ")");
  }

  struct NoDomain {};
  // Values and suffixes are retired through it (StringValues only: the 8-byte form retires
  // nothing, so its operations take no epoch pin), collected every Memory::retires_per_collect
  // retires.
  static auto make_domain() {
    if constexpr (StringValues)
      return reclaim::EpochDomain(Memory::retires_per_collect);
    else
      return NoDomain{};
  }
  [[no_unique_address]] mutable std::conditional_t<StringValues, reclaim::EpochDomain, NoDomain>
      domain_ = make_domain();
  Memory memory_;

 private:
  Node* top_root() const {
    return reinterpret_cast<Node*>(memory_.root_word().load(std::memory_order_acquire));
  }
  Border* new_border(std::uint64_t v, LayerKey low = {}) {
    return Border::make(memory_.allocate(sizeof(Border)), v, memory_.new_node_stamp(), low);
  }
  Interior* new_interior(std::uint64_t v) {
    return Interior::make(memory_.allocate(sizeof(Interior)), v, memory_.new_node_stamp());
  }
  // Before the first write to a node that existed before this operation (durable modes log it).
  void will_write(Node* n) { memory_.before_write(n->logged, n, masstree_detail::node_bytes(n)); }

  // A node's stable version; a border is first shown to the memory mode, which may have to
  // recover it (InCLL §4.3's lazy recovery: the durable modes; before the version is read,
  // since a crash may have left it locked or dirty).
  std::uint64_t stable_version(Node* n) const {
    if constexpr (Memory::recovers_borders)  // (the transient tree reads no version twice)
      if (masstree_detail::is_border(n->version.load(std::memory_order_relaxed)))
        memory_.before_border_access(*static_cast<Border*>(n));
    return masstree_detail::stable_version(n);
  }

  // The root of the layer `n` belongs to (n or an ancestor: layer pointers may be stale).
  static Node* root_of(Node* n) {
    while (!masstree_detail::is_root(n->version.load(std::memory_order_acquire)))
      n = n->parent.load(std::memory_order_acquire);
    return n;
  }

  // Descends the layer to the border node whose range holds k; returns it with the stable
  // version its contents must be validated against.
  std::pair<Border*, std::uint64_t> find_border(Node* layer_root, LayerKey k) const {
  retry:
    Node* n = layer_root;
    std::uint64_t v = stable_version(n);
    while (!masstree_detail::is_root(v)) {
      n = n->parent.load(std::memory_order_acquire);
      v = stable_version(n);
    }
    while (!masstree_detail::is_border(v)) {
      const auto* in = static_cast<const Interior*>(n);
      const int i = in->child_index(k, in->keys.load(std::memory_order_acquire));
      Node* child = in->child[i].load(std::memory_order_acquire);
      if (child) masstree_detail::prefetch(child);
      const std::uint64_t child_v = child ? stable_version(child) : 0;
      const std::uint64_t after = n->version.load(std::memory_order_acquire);
      if (child && !masstree_detail::changed(v, after)) {
        n = child;
        v = child_v;
        continue;
      }
      const std::uint64_t now = masstree_detail::stable_version(n);
      if (masstree_detail::split_since(v, now)) goto retry;  // keys may have left this node
      v = now;
    }
    // The border holds k's range as of v: its version was read before its parent's was found
    // unchanged (and a split changes the parent before it unlocks the border). A later split
    // shows in the version, which every caller checks before trusting the border (find and
    // lock_border move right then) — so the border's `next` is not read here: reading the right
    // sibling's low key on every descent cost about a third of a lookup's time.
    return {static_cast<Border*>(n), v};
  }

  // After a border changed under a reader: its stable version, then along `next` while k
  // belongs further right (a split moved it).
  std::pair<Border*, std::uint64_t> move_right(Border* b, LayerKey k) const {
    return move_right(b, k, stable_version(b));
  }
  std::pair<Border*, std::uint64_t> move_right(Border* b, LayerKey k, std::uint64_t v) const {
    for (;;) {
      Border* next = b->next.load(std::memory_order_acquire);
      const std::uint64_t after = b->version.load(std::memory_order_acquire);
      if (masstree_detail::changed(v, after)) {
        v = masstree_detail::stable_version(b);
        continue;
      }
      if (next == nullptr || k < next->low()) return {b, v};
      b = next;
      v = stable_version(b);
    }
  }

  // The border holding k's range, locked.
  Border* lock_border(Node* layer_root, LayerKey k) const {
    auto [b, v] = find_border(layer_root, k);
    masstree_detail::lock(b);
    if (!masstree_detail::split_since(v, b->version.load(std::memory_order_relaxed))) return b;
    for (Border* next; (next = b->next.load(std::memory_order_acquire)) && !(k < next->low());) {
      memory_.before_border_access(*next);
      masstree_detail::lock(next);
      masstree_detail::unlock(b);
      b = next;
    }
    return b;
  }

  // Finds k among the border's entries: true and its position, or false and the position it
  // would take.
  static bool search(const Border* b, Permutation perm, LayerKey k, int& position) {
    const int n = perm.size();
    for (int p = 0; p < n; ++p) {
      const int s = perm.slot(p);
      const std::uint64_t slice = b->slice[s].load(std::memory_order_acquire);
      if (slice < k.slice) continue;
      if (slice == k.slice) {  // (only then the length class: see Interior::child_index)
        const std::uint8_t length_class =
            masstree_detail::length_class_of(b->kind[s].load(std::memory_order_acquire));
        if (length_class < k.length_class) continue;
        position = p;
        return length_class == k.length_class;
      }
      position = p;
      return false;
    }
    position = n;
    return false;
  }

  // Whether an entry with the key's layer key is the key itself, another key, or a layer.
  static Match match(const Entry& e, const KeyCursor& key) {
    if (e.kind == masstree_detail::has_layer) return Match::layer;
    if (e.kind == masstree_detail::has_suffix && e.suffix->rest(key.offset + 8) != key.suffix())
      return Match::absent;
    return Match::found;
  }

  // The entry in `slot` (a key that goes on, with a suffix) becomes a layer whose one key is
  // the rest of that key, from byte `below` on; returns the new layer's root. b is locked.
  Node* make_layer(Border* b, int slot, const Entry& e, std::size_t below) {
    Border* layer = new_border(masstree_detail::root_bit);
    const KeyCursor rest{e.suffix->view(), below};
    const LayerKey k = rest.layer_key();
    Entry moved{k.length_class, k.slice, e.value, nullptr};
    if (k.length_class == masstree_detail::has_suffix)
      moved.suffix = e.suffix;  // the same copy of the key, read from further on
    else
      retire_suffix(e.suffix);
    layer->set_entry(0, moved);
    layer->permutation.store(Permutation::empty().inserted(0).word, std::memory_order_relaxed);
    will_write(b);
    masstree_detail::mark(b, masstree_detail::inserting_bit);
    b->kind[slot].store(masstree_detail::has_layer, std::memory_order_release);
    b->suffix[slot].store(nullptr, std::memory_order_release);
    b->value(slot).store(reinterpret_cast<std::uint64_t>(static_cast<Node*>(layer)),
                         std::memory_order_release);
    return layer;
  }

  // Into a free slot, then the permutation: the only live word that changes (InCLL §4.1.1).
  void insert_entry(Border* b, Permutation perm, int position, const Entry& e) {
    memory_.before_permutation_write(*b, /*inserting=*/true);
    masstree_detail::mark(b, masstree_detail::inserting_bit);
    b->set_entry(perm.slot(perm.size()), e);
    b->permutation.store(perm.inserted(position).word, std::memory_order_release);
    masstree_detail::unlock(b);
  }

  // b is locked and full: it keeps the lower half of its entries plus `e` at `position`, a new
  // right sibling takes the upper half, and the parent learns of the sibling. Unlocks b.
  void split_border(Border* b, Permutation perm, int position, const Entry& e) {
    std::array<Entry, width + 1> all;
    for (int p = 0, out = 0; p < width; ++p, ++out) {
      if (p == position) all[out++] = e;
      all[out] = b->entry(perm.slot(p));
    }
    if (position == width) all[width] = e;
    // An ascending run of inserts (the new key last) leaves b full and starts the sibling with
    // the new key alone, as the original does; otherwise the halves are even.
    const int left = position == width ? width : (width + 1) / 2;
    Border* sibling = new_border(masstree_detail::locked_bit, all[left].layer_key());
    Permutation right_perm = Permutation::empty();
    for (int i = left; i <= width; ++i) {
      sibling->set_entry(i - left, all[i]);
      right_perm = right_perm.inserted(i - left);
    }
    sibling->permutation.store(right_perm.word, std::memory_order_relaxed);
    sibling->next.store(b->next.load(std::memory_order_relaxed), std::memory_order_relaxed);
    sibling->parent.store(b->parent.load(std::memory_order_relaxed), std::memory_order_relaxed);

    will_write(b);
    masstree_detail::mark(b, masstree_detail::splitting_bit);
    Permutation left_perm = Permutation::empty();
    for (int i = 0; i < left; ++i) {
      b->set_entry(i, all[i]);
      left_perm = left_perm.inserted(i);
    }
    b->permutation.store(left_perm.word, std::memory_order_release);
    b->next.store(sibling, std::memory_order_release);
    insert_into_parent(b, sibling->low(), sibling);
    masstree_detail::unlock(sibling);
    masstree_detail::unlock(b);
  }

  // `left` (locked, splitting) has a new right sibling `right` (locked) whose least key is
  // `key`: put it in left's parent, splitting upwards as needed; a split root gets a new root.
  void insert_into_parent(Node* left, LayerKey key, Node* right) {
    if (masstree_detail::is_root(left->version.load(std::memory_order_relaxed))) {
      Interior* root = new_interior(masstree_detail::root_bit);
      root->keys.store(1, std::memory_order_relaxed);
      root->set_separator(0, key);
      root->child[0].store(left, std::memory_order_relaxed);
      root->child[1].store(right, std::memory_order_relaxed);
      left->parent.store(root, std::memory_order_release);
      right->parent.store(root, std::memory_order_release);
      left->version.store(
          left->version.load(std::memory_order_relaxed) & ~masstree_detail::root_bit,
          std::memory_order_release);
      // The top layer's root pointer follows (left is locked: no other thread can replace it);
      // lower layers' roots are found by climbing.
      if (top_root() == left) {
        memory_.before_root_write();
        memory_.root_word().store(reinterpret_cast<std::uint64_t>(static_cast<Node*>(root)),
                                  std::memory_order_release);
      }
      return;
    }
    Interior* p = lock_parent(left);
    will_write(p);
    const int n = p->keys.load(std::memory_order_relaxed);
    int at = 0;
    while (p->child[at].load(std::memory_order_relaxed) != left) ++at;
    if (n < width) {
      masstree_detail::mark(p, masstree_detail::inserting_bit);
      for (int i = n; i > at; --i) {
        p->set_separator(i, p->separator(i - 1));
        p->child[i + 1].store(p->child[i].load(std::memory_order_relaxed),
                              std::memory_order_release);
      }
      p->set_separator(at, key);
      p->child[at + 1].store(right, std::memory_order_release);
      p->keys.store(n + 1, std::memory_order_release);
      right->parent.store(p, std::memory_order_release);
      masstree_detail::unlock(p);
      return;
    }
    split_interior(p, at, key, right);
  }

  // p is locked and full; `right` goes after child `at` with separator `key`. p keeps the lower
  // half, a new sibling the upper half, the middle separator goes up. Unlocks p.
  void split_interior(Interior* p, int at, LayerKey key, Node* right) {
    std::array<LayerKey, width + 1> keys;
    std::array<Node*, width + 2> children;
    for (int i = 0, out = 0; i < width; ++i, ++out) {
      if (i == at) keys[out++] = key;
      keys[out] = p->separator(i);
    }
    if (at == width) keys[width] = key;
    for (int i = 0, out = 0; i <= width; ++i, ++out) {
      children[out] = p->child[i].load(std::memory_order_relaxed);
      if (i == at) children[++out] = right;
    }
    constexpr int left = width / 2;  // separators kept; keys[left] goes up
    Interior* sibling = new_interior(masstree_detail::locked_bit);
    sibling->keys.store(width - left, std::memory_order_relaxed);
    for (int i = left + 1; i <= width; ++i) sibling->set_separator(i - left - 1, keys[i]);
    for (int i = left + 1; i <= width + 1; ++i)
      sibling->child[i - left - 1].store(children[i], std::memory_order_relaxed);
    sibling->parent.store(p->parent.load(std::memory_order_relaxed), std::memory_order_relaxed);

    masstree_detail::mark(p, masstree_detail::splitting_bit);
    for (int i = 0; i < left; ++i) p->set_separator(i, keys[i]);
    for (int i = 0; i <= left; ++i) p->child[i].store(children[i], std::memory_order_release);
    p->keys.store(left, std::memory_order_release);
    // A child's parent changes under its old parent's lock; a writer waiting to lock the old
    // parent rechecks the link once it holds it (lock_parent). The children are not locked, so
    // the durable modes do not log this write: parent links are derived state, which their
    // recovery rebuilds under the nodes the log restores (p here, if this epoch fails;
    // incll/durable_masstree.hpp). Once the epoch has ended no recovery rebuilds it, so the
    // durable modes flush it at the boundary (after_derived_write).
    for (int i = 0; i <= width + 1; ++i) {
      Interior* const now = i <= left ? p : sibling;
      if (children[i]->parent.load(std::memory_order_relaxed) == now) continue;
      children[i]->parent.store(now, std::memory_order_release);
      memory_.after_derived_write(&children[i]->parent, sizeof children[i]->parent);
    }
    insert_into_parent(p, keys[left], sibling);
    masstree_detail::unlock(sibling);
    masstree_detail::unlock(p);
  }

  // Locks n's parent, rechecking the link once locked (the parent may have split meanwhile).
  static Interior* lock_parent(Node* n) {
    for (;;) {
      Interior* p = n->parent.load(std::memory_order_acquire);
      masstree_detail::lock(p);
      if (n->parent.load(std::memory_order_acquire) == p) return p;
      masstree_detail::unlock(p);
    }
  }

  template <class F>
  bool scan_layer(Node* layer, std::string& prefix, std::optional<std::string_view> lower,
                  F& visit) const {
    const LayerKey start = lower ? KeyCursor{*lower}.layer_key() : LayerKey{};
    Border* b = find_border(layer, start).first;
    std::array<Entry, width> entries;
    while (b != nullptr) {
      int n;
      Border* next;
      for (;;) {  // one consistent snapshot of the node
        const std::uint64_t v = stable_version(b);
        const Permutation perm{b->permutation.load(std::memory_order_acquire)};
        n = perm.size();
        for (int p = 0; p < n; ++p) entries[p] = b->entry(perm.slot(p));
        next = b->next.load(std::memory_order_acquire);
        if (!masstree_detail::changed(v, b->version.load(std::memory_order_acquire))) break;
      }
      for (int p = 0; p < n; ++p) {
        const Entry& e = entries[p];
        std::optional<std::string_view> inner;  // the bound within this entry's layer
        if (lower) {
          if (e.layer_key() < start) continue;
          if (e.layer_key() == start && start.length_class == masstree_detail::has_suffix)
            inner = KeyCursor{*lower}.suffix();
          lower.reset();  // every later entry is above the bound
        }
        const std::size_t size = prefix.size();
        masstree_detail::append_slice(prefix, e.slice,
                                      e.kind < masstree_detail::has_suffix ? e.kind : 8);
        bool go_on = true;
        if (e.kind == masstree_detail::has_layer) {
          go_on = scan_layer(reinterpret_cast<Node*>(e.value), prefix, inner, visit);
        } else if (!inner || e.suffix->rest(size + 8) >= *inner) {
          if (e.kind == masstree_detail::has_suffix) prefix.append(e.suffix->rest(size + 8));
          go_on = visit(std::string_view(prefix), e.value);
        }
        prefix.resize(size);
        if (!go_on) return false;
      }
      b = next;
    }
    return true;
  }

  void retire_value(std::uint64_t value) {
    if constexpr (StringValues)
      domain_.retire(reinterpret_cast<Bytes*>(value), [this](Bytes* p) { memory_.free_bytes(p); });
  }
  void retire_suffix(Bytes* suffix) {
    if constexpr (StringValues)  // (the 8-byte form has no suffixes)
      if (suffix != nullptr) domain_.retire(suffix, [this](Bytes* p) { memory_.free_bytes(p); });
  }

  // Quiescent: frees the subtree (live entries only: a split leaves stale copies in free slots).
  void destroy(Node* n) {
    if (masstree_detail::is_border(n->version.load(std::memory_order_relaxed))) {
      auto* b = static_cast<Border*>(n);
      const Permutation perm{b->permutation.load(std::memory_order_relaxed)};
      for (int p = 0; p < perm.size(); ++p) {
        const Entry e = b->entry(perm.slot(p));
        if (e.kind == masstree_detail::has_layer) {
          destroy(root_of(reinterpret_cast<Node*>(e.value)));
          continue;
        }
        if (e.suffix != nullptr) memory_.free_bytes(e.suffix);
        if constexpr (StringValues) memory_.free_bytes(reinterpret_cast<Bytes*>(e.value));
      }
      memory_.release(b);
      return;
    }
    auto* in = static_cast<Interior*>(n);
    for (int i = 0; i <= in->keys.load(std::memory_order_relaxed); ++i)
      destroy(in->child[i].load(std::memory_order_relaxed));
    memory_.release(in);
  }
};

// Masstree over 8-byte keys and values: the key's 8 bytes big-endian are its byte string, so
// the order is the keys' numeric order and every key lives in the top layer. Its operations take
// no epoch pin: this form never retires anything (values are inline words, and a key of exactly
// 8 bytes has no suffix), and nodes live as long as the tree. Over any memory mode; Masstree
// below is the transient one.
template <class Memory>
class MasstreeMap : public BasicMasstree<false, Memory> {
  using Base = BasicMasstree<false, Memory>;
  using typename Base::KeyCursor;
  using typename Base::PutMode;

 public:
  using Base::Base;

  bool insert(Key k, Value v) {
    Bytes8 key(k);
    return this->store(key.cursor(), v, PutMode::insert_only);
  }
  bool put(Key k, Value v) {
    Bytes8 key(k);
    return this->store(key.cursor(), v, PutMode::insert_or_update);
  }
  bool remove(Key k) {
    Bytes8 key(k);
    return this->erase(key.cursor());
  }
  std::optional<Value> get(Key k) const {
    Bytes8 key(k);
    return this->find(key.cursor());
  }
  bool contains(Key k) const { return get(k).has_value(); }

  // Up to max_count keys >= from in ascending order, visit(key, value) each; returns how many.
  // Each node's keys are read as one snapshot; the scan as a whole is not atomic.
  template <class F>
  std::size_t scan(Key from, std::size_t max_count, F&& visit) const {
    if (from == min_reserved_key) from = min_user_key;
    std::size_t count = 0;
    if (max_count == 0) return 0;
    Bytes8 key(from);
    this->scan_from(key.view(), [&](std::string_view bytes, std::uint64_t value) {
      visit(Bytes8::key_of(bytes), Value{value});
      return ++count < max_count;
    });
    return count;
  }

  /// The keys in [from, to) in ascending order, for a range-for, while other threads write
  /// (weakly consistent: pmds::Range says what that promises).
  Range<const MasstreeMap, Key, Value> range(Key from, Key to) const { return {*this, from, to}; }
  /// The keys from `from` to the end.
  Range<const MasstreeMap, Key, Value> range(Key from = min_user_key) const {
    return {*this, from};
  }

  // Quiescent: f(key, value) for every key, in key order.
  template <class F>
  void for_each(F&& f) const {
    scan(min_user_key, ~std::size_t{0}, f);
  }
  std::size_t size() const {
    std::size_t n = 0;
    for_each([&n](Key, Value) { ++n; });
    return n;
  }

 private:
  struct Bytes8 {
    char bytes[8];
    explicit Bytes8(Key k) {
      check_key(k);
      const Key big_endian = __builtin_bswap64(k);
      std::memcpy(bytes, &big_endian, 8);
    }
    std::string_view view() const { return {bytes, 8}; }
    KeyCursor cursor() const { return KeyCursor{view()}; }
    static Key key_of(std::string_view b) {
      Key big_endian;
      std::memcpy(&big_endian, b.data(), 8);
      return __builtin_bswap64(big_endian);
    }
  };
};

using Masstree = MasstreeMap<TransientMemory>;

// Masstree over byte-string keys and values (pmds::ByteStringMap), over any memory mode;
// StringMasstree below is the transient one. Values are copied in and out; visit(key, f) runs
// f(std::string_view) on the stored value without a copy.
template <class Memory>
class StringMasstreeMap : public BasicMasstree<true, Memory> {
  using Base = BasicMasstree<true, Memory>;
  using typename Base::Bytes;
  using typename Base::KeyCursor;
  using typename Base::PutMode;

 public:
  using Base::Base;
  static constexpr const char* name = "masstree-bytes/transient";  // (a durable one names itself)
  static constexpr std::size_t max_value_size = Memory::max_value_size;

  bool insert(std::string_view key, std::string_view value) {
    return put_value(key, value, PutMode::insert_only);
  }
  bool put(std::string_view key, std::string_view value) {
    return put_value(key, value, PutMode::insert_or_update);
  }
  bool remove(std::string_view key) {
    this->check_key_size(key);
    auto guard = this->domain_.pin();
    return this->erase(KeyCursor{key});
  }
  std::optional<std::string> get(std::string_view key) const {
    std::optional<std::string> out;
    visit(key, [&out](std::string_view v) { out.emplace(v); });
    return out;
  }
  bool contains(std::string_view key) const {
    return visit(key, [](std::string_view) {});
  }
  // f(value) if the key is present; returns whether it was.
  template <class F>
  bool visit(std::string_view key, F&& f) const {
    this->check_key_size(key);
    auto guard = this->domain_.pin();
    const auto word = this->find(KeyCursor{key});
    if (!word) return false;
    f(reinterpret_cast<const Bytes*>(*word)->view());
    return true;
  }

  // Up to max_count keys >= from in byte-string order, visit(key, value) each (views valid
  // during the call); returns how many.
  template <class F>
  std::size_t scan(std::string_view from, std::size_t max_count, F&& visit) const {
    this->check_key_size(from);
    std::size_t count = 0;
    if (max_count == 0) return 0;
    auto guard = this->domain_.pin();
    this->scan_from(from, [&](std::string_view key, std::uint64_t value) {
      visit(key, reinterpret_cast<const Bytes*>(value)->view());
      return ++count < max_count;
    });
    return count;
  }

  /// The keys in [from, to) in byte-string order, for a range-for, while other threads write
  /// (weakly consistent: pmds::Range says what that promises).
  Range<const StringMasstreeMap, std::string, std::string> range(std::string_view from,
                                                                 std::string_view to) const {
    return {*this, std::string(from), std::string(to)};
  }
  /// The keys from `from` to the end (every key by default).
  Range<const StringMasstreeMap, std::string, std::string> range(std::string_view from = {}) const {
    return {*this, std::string(from)};
  }

  template <class F>
  void for_each(F&& f) const {
    scan(std::string_view{}, ~std::size_t{0}, f);
  }
  std::size_t size() const {
    std::size_t n = 0;
    for_each([&n](std::string_view, std::string_view) { ++n; });
    return n;
  }

 private:
  bool put_value(std::string_view key, std::string_view value, PutMode mode) {
    this->check_key_size(key);
    if (value.size() > max_value_size)
      throw Error("pmds: Masstree values are at most " + std::to_string(max_value_size) +
                  " bytes here (got " + std::to_string(value.size()) + ")");
    auto guard = this->domain_.pin();
    return this->store(KeyCursor{key}, value, mode);
  }
};

using StringMasstree = StringMasstreeMap<TransientMemory>;

}  // namespace pmds::incll
