// pmds::montage::NatarajanMittalTree — the Natarajan–Mittal lock-free external BST on nbMontage
// (the binary search tree of its paper's §5): "bst/montage", an ordered map, buffered durable
// linearizability, with sync().
//
// The index is the tree of algo/natarajan_mittal_bst.hpp (Natarajan & Mittal, PPoPP 2014; its
// header explains the algorithm: keys in leaves, a delete FLAGS the edge to its leaf, TAGS the
// sibling edge, then one CAS on the ancestor's edge removes the leaf and its parent), in DRAM,
// rebuilt at recovery from the payloads. Each leaf points to its payload, a KeyValuePayload that
// never changes once linked (§3.2), and keeps copies of its key and value, so reads touch DRAM
// only. A key is in the map when a leaf holds it and the edge to that leaf is not flagged, so
// the two linearizing CASes are done by lin_cas (epoch_system.hpp): an insert's swing of its
// parent's edge from the old leaf to the new internal node, and a remove's flag of the edge to
// its leaf, after pdetach of the leaf's payload. Tagging and the ancestor's swing change no
// payload and are plain cas through the epoch system. Any edge may hold a lin_cas descriptor
// (an insert or a flag may aim at any leaf's edge), so every edge is read through it.
//
// Differences from the algo/ tree, each for the seam nbMontage needs (hash_map.hpp's header):
//   - edge bits: flag = 1 as there, but tag = 4, since bit 1 of a lin_cas word marks an
//     installed descriptor (epoch_system.hpp);
//   - a remove that finds its leaf's edge already flagged returns false at once (the key was
//     absent when that edge was read), rather than helping and re-seeking: each flag attempt
//     costs an anti-node (pdetach), so the attempt is made only on a clean edge;
//   - recovery builds a balanced tree from the sorted payloads (the algo/ tree recovers the
//     shape it had; here there is no shape to recover), so S.left may route by a user key, and
//     seek's first step goes toward the key where the paper's goes left.
// put (insert or update) replaces the key's leaf by a new one with one lin_cas on the edge to it,
// from the old leaf to the new: a concurrent remove's flag, an insert beside the old leaf and
// another put all CAS that edge expecting it clean and holding the old leaf, and fail; a tagged
// edge (its sibling being removed) blocks the put, which helps that removal and retries. The new
// payload and the old one's anti-node are tagged by that one lin_cas (as hash_map.hpp's put).
//
// Pool layout: StructureRoot (epoch_system.hpp) with tag "BSTMONTG"; payload and anti-node
// blocks from the allocator.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "pmds/interfaces.hpp"
#include "pmds/montage/epoch_system.hpp"
#include "pmds/montage/key_value_payload.hpp"
#include "pmds/montage/parallel.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/reclaim/epoch.hpp"

namespace pmds::montage {

template <FaultPolicy Faults = NoFaults>
class NatarajanMittalTree {
 public:
  static constexpr Criterion criterion = Criterion::buffered;
  static constexpr EpochBound epoch_bound = EpochBound::two_epochs;
  static constexpr std::uint64_t tag = 0x47544e4f4d545342;  // "BSTMONTG"
  static constexpr const char* name = "bst/montage";
  static constexpr Key infinity = max_reserved_key;  // the three sentinel keys (algo/ header)

  using Payload = KeyValuePayload;

  // A new, empty map in `pool`, which must hold no structure.
  NatarajanMittalTree(CreateTag, pm::Pool& pool, const Options& options = {}) {
    StructureRoot::check_unused(pool, name);
    system_.emplace(create_new, pool, options);
    StructureRoot::write(pool, tag, 0, system_->area());
    make_sentinels(make_leaf_node(infinity, 0, nullptr));
  }

  // Opens the map a pool holds: the index is rebuilt from the payloads recovery keeps (§3.4).
  NatarajanMittalTree(OpenTag, pm::Pool& pool, const Options& options = {}) {
    const auto [parameter, area] = StructureRoot::read(pool, tag, name);
    (void)parameter;
    system_.emplace(open_existing, pool, area, options);
    rebuild(system_->recover(&WordKeys::damaged));
  }

  NatarajanMittalTree(const NatarajanMittalTree&) = delete;
  NatarajanMittalTree& operator=(const NatarajanMittalTree&) = delete;

  // A clean close: everything completed is made durable (sync), then the DRAM index is freed.
  ~NatarajanMittalTree() {
    sync();
    domain_.drain();  // the removed nodes; every other node is reachable from R
    std::vector<Node*> stack{root_};
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      if (Node* l = address(n->left.load())) stack.push_back(l);
      if (Node* r = address(n->right.load())) stack.push_back(r);
      delete n;
    }
  }

  // False if the key was present. Throws PoolFull (the map unchanged) when no block is left.
  bool insert(Key key, Value value) { return upsert(key, value, false); }

  // Insert or update: true if the key was absent. An update replaces the key's leaf by a new one
  // in one lin_cas on the edge to it (see the header). Throws PoolFull (the map unchanged).
  bool put(Key key, Value value) { return upsert(key, value, true); }

  // False if the key was absent. Linearizes at the flag of the edge to its leaf. Throws PoolFull
  // (the map unchanged) when no block is left for the anti-node.
  bool remove(Key key) {
    check_key(key);
    auto guard = domain_.pin();
    Node* victim = nullptr;  // set once our flag committed (cleanup mode)
    for (;;) {
      const SeekRecord s = seek(key);
      if (victim == nullptr) {  // injection mode
        if (s.leaf->key != key || flagged(s.leaf_edge)) return false;
        std::atomic<std::uint64_t>& child = child_toward(s.parent, key);
        system_->pdetach(s.leaf->payload);
        if (system_->lin_cas(child, word_of(s.leaf), word_of(s.leaf) | flag_bit)) {
          victim = s.leaf;  // linearized: the key is deleted
          if (cleanup(key, s)) return true;
        } else {
          const std::uint64_t now = system_->load(child);
          if (address(now) == s.leaf && (flagged(now) || tagged(now)))
            cleanup(key, s);  // help whoever holds the edge, then retry
        }
      } else {                              // cleanup mode
        if (s.leaf != victim) return true;  // someone else removed it
        if (cleanup(key, s)) return true;
      }
    }
  }

  bool contains(Key key) {
    check_key(key);
    auto guard = domain_.pin();
    const SeekRecord s = seek(key);
    return s.leaf->key == key && !flagged(s.leaf_edge);
  }

  std::optional<Value> get(Key key) {
    check_key(key);
    auto guard = domain_.pin();
    const SeekRecord s = seek(key);
    if (s.leaf->key != key || flagged(s.leaf_edge)) return std::nullopt;
    return s.leaf->value;
  }

  // Everything completed before the call is durable when it returns (two epoch advances).
  void sync() { system_->sync(); }
  // One epoch advance: what the background thread does every epoch (Options::epoch_length).
  void background_step() { system_->background_step(); }

  // Quiescent: f(key, value) for every key, in key order.
  template <class F>
  void for_each(F&& f) {
    std::vector<std::uint64_t> stack{word_of(root_)};
    while (!stack.empty()) {
      const std::uint64_t edge = stack.back();
      stack.pop_back();
      const Node* n = address(edge);
      const std::uint64_t left = n->left.load(), right = n->right.load();
      if (address(left) == nullptr) {  // a leaf
        if (!flagged(edge) && n->key != infinity) f(n->key, n->value);
        continue;
      }
      stack.push_back(right);
      stack.push_back(left);
    }
  }

  // Quiescent: runs every pending reclamation of DRAM nodes now.
  void drain() { domain_.drain(); }

  const RecoveryStats& recovery_stats() const { return recovery_; }
  std::uint64_t epoch() const { return system_->epoch(); }

 private:
  // Edge bits. Bit 1 is the epoch system's (an installed descriptor).
  static constexpr std::uint64_t flag_bit = 1;  // the leaf below is being deleted
  static constexpr std::uint64_t tag_bit = 4;   // the node above is being removed: frozen

  // A DRAM node. A leaf has no children, its key and value are copies of its payload's (nullptr
  // for the sentinels' leaves); an internal node routes (key < node.key: left, else right). key
  // and value are written before the node is published and never change after.
  struct Node {
    Key key = 0;
    Value value = 0;
    Payload* payload = nullptr;
    std::atomic<std::uint64_t> left{0};
    std::atomic<std::uint64_t> right{0};
  };
  static_assert(alignof(Node) >= 8, "edge bits 0-2 must be free in a node's address");

  struct SeekRecord {
    Node* ancestor;
    Node* successor;
    Node* parent;
    Node* leaf;
    std::uint64_t leaf_edge;  // parent's edge to leaf, as read
  };

  static Node* address(std::uint64_t edge) {
    return reinterpret_cast<Node*>(edge & ~(flag_bit | tag_bit));
  }
  static std::uint64_t word_of(const Node* n) { return reinterpret_cast<std::uint64_t>(n); }
  static bool flagged(std::uint64_t edge) { return (edge & flag_bit) != 0; }
  static bool tagged(std::uint64_t edge) { return (edge & tag_bit) != 0; }

  static std::atomic<std::uint64_t>& child_toward(Node* n, Key key) {
    return key < n->key ? n->left : n->right;
  }

  static Node* make_leaf_node(Key key, Value value, Payload* payload) {
    Node* n = new Node;
    n->key = key;
    n->value = value;
    n->payload = payload;
    return n;
  }
  static Node* make_internal_node(Key key, Node* left, Node* right) {
    Node* n = new Node;
    n->key = key;
    n->left.store(word_of(left), std::memory_order_relaxed);
    n->right.store(word_of(right), std::memory_order_relaxed);
    return n;
  }

  // R(inf) -> {S(inf) -> {keys, leaf(inf)}, leaf(inf)}: `keys` is what S.left holds, a leaf or
  // the subtree of every key (whose rightmost leaf is an infinity leaf).
  void make_sentinels(Node* keys) {
    sentinel_s_ = make_internal_node(infinity, keys, make_leaf_node(infinity, 0, nullptr));
    root_ = make_internal_node(infinity, sentinel_s_, make_leaf_node(infinity, 0, nullptr));
  }

  // insert (update false) and put (update true).
  bool upsert(Key key, Value value, bool update) {
    check_key(key);
    auto guard = domain_.pin();
    Node* new_leaf = nullptr;  // made at the first attempt that needs them, reused by retries
    Node* new_internal = nullptr;
    auto discard_new = [&] {  // never linked: nobody saw them or the payload
      if (new_leaf != nullptr) {
        system_->pdelete(new_leaf->payload);
        delete new_leaf;
      }
      delete new_internal;
    };
    for (;;) {
      const SeekRecord s = seek(key);
      const Key leaf_key = s.leaf->key;
      const bool present = leaf_key == key;
      if (present && flagged(s.leaf_edge)) {
        cleanup(key, s);  // deleted but not yet removed: help, then retry
        continue;
      }
      if (present && !update) {
        discard_new();
        return false;
      }
      if (new_leaf == nullptr) {
        Payload* p = system_->template pnew<Payload>();  // PoolFull: nothing changed
        p->key.store(key, std::memory_order_relaxed);
        p->value.store(value, std::memory_order_relaxed);
        new_leaf = make_leaf_node(key, value, p);
      }
      std::atomic<std::uint64_t>& child = child_toward(s.parent, key);
      if (present) {
        // An update: the new leaf takes the old one's place. A remove's flag, an insert beside
        // it and another put all expect that edge clean and holding the old leaf, so they fail.
        try {
          system_->pdetach(s.leaf->payload);  // PoolFull: nothing changed
        } catch (...) {
          discard_new();  // its payload must not stay pending for the thread's next lin_cas
          throw;
        }
        if (system_->lin_cas(child, word_of(s.leaf), word_of(new_leaf))) {
          delete new_internal;
          retire(s.leaf);  // only this lin_cas unlinked it
          return false;
        }
      } else {
        if (new_internal == nullptr) new_internal = new Node;
        // The new internal node routes between the new leaf and the leaf it replaces; it is
        // published by the lin_cas (release), so plain writes suffice until then.
        new_internal->key = std::max(key, leaf_key);
        new_internal->left.store(word_of(key < leaf_key ? new_leaf : s.leaf),
                                 std::memory_order_relaxed);
        new_internal->right.store(word_of(key < leaf_key ? s.leaf : new_leaf),
                                  std::memory_order_relaxed);
        if (system_->lin_cas(child, word_of(s.leaf), word_of(new_internal))) return true;
      }
      const std::uint64_t now = system_->load(child);
      if (address(now) == s.leaf && (flagged(now) || tagged(now)))
        cleanup(key, s);  // a delete holds this edge: help it
    }
  }

  // The paper's seek: the access path to key's leaf, with the last untagged edge on it
  // (ancestor -> successor). Caller is pinned.
  SeekRecord seek(Key key) {
    SeekRecord s;
    s.ancestor = root_;
    s.successor = sentinel_s_;
    s.parent = sentinel_s_;
    std::uint64_t parent_edge = system_->load(sentinel_s_->left);
    s.leaf = address(parent_edge);
    // The paper reads leaf.left here: in its shape S.left is infinity's leaf or an internal node
    // of key infinity. A rebuilt tree's S.left routes by a user key, so the first step does too.
    std::uint64_t current_edge = system_->load(child_toward(s.leaf, key));
    Node* current = address(current_edge);
    while (current != nullptr) {
      if (!tagged(parent_edge)) {
        s.ancestor = s.parent;
        s.successor = s.leaf;
      }
      s.parent = s.leaf;
      s.leaf = current;
      parent_edge = current_edge;
      current_edge = system_->load(child_toward(current, key));
      current = address(current_edge);
    }
    s.leaf_edge = parent_edge;
    return s;
  }

  // The paper's cleanup: tag the edge that stays, then swing ancestor's edge from successor to
  // it. True when this call's swing removed the leaf (and it retired what it removed).
  bool cleanup(Key key, const SeekRecord& s) {
    std::atomic<std::uint64_t>& successor_edge = child_toward(s.ancestor, key);
    const bool go_left = key < s.parent->key;
    std::atomic<std::uint64_t>* child = go_left ? &s.parent->left : &s.parent->right;
    std::atomic<std::uint64_t>* sibling = go_left ? &s.parent->right : &s.parent->left;
    if (!flagged(system_->load(*child))) sibling = child;  // the flagged leaf is on the other side
    // Freeze the edge that moves up.
    std::uint64_t kept = system_->load(*sibling);
    while (!tagged(kept) && !system_->cas(*sibling, kept, kept | tag_bit))
      kept = system_->load(*sibling);
    kept |= tag_bit;
    // The moved edge keeps its flag (a leaf being deleted stays flagged), loses the tag.
    if (!system_->cas(successor_edge, word_of(s.successor), kept & ~tag_bit)) return false;
    retire_removed(key, s.successor, s.parent, address(kept));
    return true;
  }

  // As the algo/ tree's: every internal node on the path successor .. parent and the flagged
  // leaf beside each; a flagged leaf's payload is deleted (two epochs later, by the epoch system)
  // once no pinned thread can still read the leaf. Those edges are frozen: plain loads suffice.
  void retire_removed(Key key, Node* successor, Node* parent, Node* kept) {
    Node* n = successor;
    while (n != parent) {
      const bool go_left = key < n->key;
      const std::uint64_t on_path = (go_left ? n->left : n->right).load();
      const std::uint64_t off_path = (go_left ? n->right : n->left).load();
      retire(address(off_path));
      retire(n);
      n = address(on_path);
    }
    Node* left = address(parent->left.load());
    retire(left == kept ? address(parent->right.load()) : left);
    retire(parent);
  }

  void retire(Node* node) {
    EpochSystem<Faults>* system = &*system_;
    domain_.retire(node, [system](Node* dead) noexcept {
      if (dead->payload != nullptr) system->pdelete(dead->payload);
      delete dead;
    });
  }

  // Leaves [first, last) of the sorted keys as a balanced subtree: an internal node's key is the
  // smallest key of its right half, so that key < node.key routes left exactly. With more than
  // one thread, the two halves are built at once.
  static Node* build(const std::vector<Node*>& leaves, std::size_t first, std::size_t last,
                     std::size_t threads) {
    if (last - first == 1) return leaves[first];
    const std::size_t middle = first + (last - first) / 2;
    Node* halves[2];
    in_parallel(threads > 1 ? 2 : 1, 2, [&](std::size_t from, std::size_t to) {
      for (std::size_t h = from; h < to; ++h)
        halves[h] = h == 0 ? build(leaves, first, middle, threads / 2)
                           : build(leaves, middle, last, threads - threads / 2);
    });
    return make_internal_node(leaves[middle]->key, halves[0], halves[1]);
  }

  // The index from the surviving payloads: a balanced tree of their leaves in key order and the
  // infinity leaf, sorted and built over Options::recovery_threads threads. A key found twice
  // (impossible without a bug) keeps one payload; the others are counted and freed.
  void rebuild(typename EpochSystem<Faults>::Recovered r) {
    recovery_ = r.stats;
    const std::size_t threads = system_->recovery_threads();
    const std::vector<KeyValueEntry> entries = sorted_entries(r.payloads, threads, key_less);
    std::vector<Node*> leaves(entries.size(), nullptr);  // nullptr: a duplicate
    in_parallel(threads, entries.size(), [&](std::size_t first, std::size_t last) {
      for (std::size_t i = first; i < last; ++i)
        if (i == 0 || entries[i - 1].key != entries[i].key)
          leaves[i] = make_leaf_node(entries[i].key, entries[i].value, entries[i].payload);
    });
    std::vector<Block*> duplicates;
    for (std::size_t i = 0; i < leaves.size(); ++i)
      if (leaves[i] == nullptr) duplicates.push_back(entries[i].payload);
    std::erase(leaves, nullptr);
    leaves.push_back(make_leaf_node(infinity, 0, nullptr));
    make_sentinels(build(leaves, 0, leaves.size(), threads));
    system_->free_duplicates(duplicates, recovery_);
  }

  std::optional<EpochSystem<Faults>> system_;  // before domain_: its deleters call pdelete
  reclaim::EpochDomain domain_;
  Node* root_ = nullptr;        // R
  Node* sentinel_s_ = nullptr;  // S = R.left, never removed
  RecoveryStats recovery_;
};

}  // namespace pmds::montage
