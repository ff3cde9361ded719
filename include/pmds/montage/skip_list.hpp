// pmds::montage::SkipList — a lock-free skip list on nbMontage (the skip list of its paper's §5):
// "skiplist/montage", an ordered map with scan, buffered durable linearizability, with sync();
// and ByteStringSkipList, "skiplist-bytes/montage", the same list over byte-string keys and
// values in byte order (pmds::ByteStringMap), and its transient twin
// "skiplist-bytes/transient" (TransientByteStringSkipList).
//
// SkipList is algo/skip_list.hpp's list (Herlihy & Shavit §14.4, after Fraser; its header
// explains the algorithm, the two-owner reclamation of a node and what it does for nbMontage)
// over MontagePolicy (montage/policy.hpp), as the BST is: the index in DRAM, each node pointing
// to its payload, a KeyValuePayload that never changes once linked (§3.2), and keeping copies of
// its key and value so that reads touch DRAM only. What this file adds around it (the pool's root,
// the epoch system and sync are montage/structure.hpp's): recovery, the list rebuilt from the
// payloads that survive (§3.4), and the clean close.
//
// BasicSkipList, the byte-string lists, is the same algorithm step for step, written over
// ByteStringKeys (key_value_payload.hpp): a node keeps the key's first 16 bytes in order words and
// compares the rest in its payload, which algo/'s 8-byte nodes cannot carry; a Keys parameter on
// algo/skip_list.hpp would retire it. The linearizing CASes are the level-0 ones, done by lin_cas
// (epoch_system.hpp): an insert's level-0 link, a put's replacing CAS (below) and a remove's
// level-0 mark, after pdetach of the payload. Every other CAS (upper levels, unlinking) changes no
// payload and is plain; level-0 words are read through the epoch system (they may hold a lin_cas
// descriptor), upper-level words directly (no lin_cas acts on them). Reads never flush or fence.
//
// put replaces a present key's node as algo/'s does: one lin_cas on the OLD node's level-0 link,
// from its successor s to (new node | mark), the new node's level-0 link being s. The old node's
// upper levels are marked first, as a remove marks them (top-down, level 0 last, which the
// wait-free search relies on); a remove, an insert after it or another put CASes that same
// level-0 word and fails. A remove that finds its node marked looks again (the key may be in the
// replacement) instead of reporting the key gone. The new node then links its own upper levels,
// as an inserted one does, after a find has unlinked the old node.
//
// Pool layout: StructureRoot (epoch_system.hpp) with tag "SKIPMONT" ("SKIPMONB" for byte
// strings); payload and anti-node blocks from the allocator. SkipList's payloads are
// KeyValuePayloads as before it moved onto algo/ (a pool written by either opens in the other).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "pmds/algo/skip_list.hpp"
#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/montage/epoch_system.hpp"
#include "pmds/montage/key_value_payload.hpp"
#include "pmds/montage/parallel.hpp"
#include "pmds/montage/policy.hpp"
#include "pmds/montage/structure.hpp"
#include "pmds/montage/transient_system.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/random_height.hpp"
#include "pmds/range.hpp"
#include "pmds/reclaim/epoch.hpp"

namespace pmds::montage {

// "skiplist/montage": 8-byte keys and values.
template <FaultPolicy Faults = NoFaults>
class SkipList : public Structure<algo::SkipList<MontagePolicy<Faults>>, Faults> {
  using Base = Structure<algo::SkipList<MontagePolicy<Faults>>, Faults>;
  using Base::mem_;
  using typename Base::Node;

 public:
  static constexpr std::uint64_t tag = 0x544e4f4d50494b53;  // "SKIPMONT"
  static constexpr const char* name = "skiplist/montage";

  // A new, empty map in `pool`, which must hold no structure.
  SkipList(CreateTag, pm::Pool& pool, const Options& options = {}) {
    this->create(pool, options, tag, name);
  }

  // Opens the map a pool holds: the index is rebuilt from the payloads recovery keeps (§3.4).
  SkipList(OpenTag, pm::Pool& pool, const Options& options = {}) {
    rebuild(this->recover(pool, options, tag, name, &WordKeys::damaged));
  }

  // A clean close (montage/structure.hpp): sync, then the algorithm frees the DRAM index.
  ~SkipList() { this->sync(); }

 private:
  // The index from the surviving payloads, in key order, each node of a fresh random height: the
  // entries are sorted and the nodes made over Options::recovery_threads threads, then linked in
  // one pass. A key found twice (impossible without a bug) keeps one payload; the others are
  // counted and freed.
  void rebuild(const typename Base::Recovered& r) {
    this->adopt_in_order(this->nodes_in_key_order(r, [this](const KeyValueEntry& e) {
      return this->make_recovered_node(e.key, e.value, e.payload);
    }));
  }
};

// The byte-string lists (the header says why they are not algo/'s). Durable false: the
// transient twin (TransientSystem instead of the epoch system). Use ByteStringSkipList or
// TransientByteStringSkipList.
template <class Keys, bool Durable = true, FaultPolicy Faults = NoFaults>
class BasicSkipList {
  static_assert(Keys::byte_strings);

 public:
  static constexpr bool durable = Durable;
  static constexpr Criterion criterion = durable ? Criterion::buffered : Criterion::none;
  static constexpr EpochBound epoch_bound = durable ? EpochBound::two_epochs : EpochBound::none;
  static constexpr std::uint64_t tag = 0x424e4f4d50494b53;  // "SKIPMONB"
  static constexpr const char* name =
      durable ? "skiplist-bytes/montage" : "skiplist-bytes/transient";
  static constexpr int max_height = 20;  // as algo/skip_list.hpp
  static constexpr std::size_t max_key_size = Keys::max_key_size;
  static constexpr std::size_t max_value_size = Keys::max_value_size;

  using Payload = typename Keys::Payload;
  using KeyArg = typename Keys::KeyArg;
  using ValueArg = typename Keys::ValueArg;
  using ValueOut = typename Keys::ValueOut;
  using Probe = typename Keys::Probe;
  using Entry = typename Keys::Entry;

  // The transient twin: an empty map in DRAM.
  BasicSkipList() requires(!durable) { system_.emplace(); }

  // A new, empty map in `pool`, which must hold no structure.
  BasicSkipList(CreateTag, pm::Pool& pool, const Options& options = {}) requires(durable) {
    StructureRoot::check_unused(pool, name);
    system_.emplace(create_new, pool, options);
    StructureRoot::write(pool, tag, 0, system_->area());
  }

  // Opens the map a pool holds: the index is rebuilt from the payloads recovery keeps (§3.4).
  BasicSkipList(OpenTag, pm::Pool& pool, const Options& options = {}) requires(durable) {
    const auto [parameter, area] = StructureRoot::read(pool, tag, name);
    (void)parameter;
    system_.emplace(open_existing, pool, area, options);
    rebuild(system_->recover(&Keys::damaged));
  }

  BasicSkipList(const BasicSkipList&) = delete;
  BasicSkipList& operator=(const BasicSkipList&) = delete;

  // A clean close: everything completed is made durable (sync), then the DRAM index is freed.
  ~BasicSkipList() {
    if constexpr (durable) sync();
    domain_.drain();  // the removed nodes; every other node is still linked at level 0
    for (Node* n = node_of(head_->link(0).load()); n != nullptr;) {
      Node* next = node_of(n->link(0).load());
      if constexpr (!durable) system_->pdelete(n->payload);  // the twin's are on the heap
      Node::destroy(n);
      n = next;
    }
  }

  // False if the key was present. Throws PoolFull (the map unchanged) when no block is left.
  bool insert(KeyArg k, ValueArg v) { return upsert(k, v, false); }

  // Insert or update: true if the key was absent. An update replaces the key's node (see the
  // header). Throws PoolFull (the map unchanged) when no block is left.
  bool put(KeyArg k, ValueArg v) { return upsert(k, v, true); }

  // False if the key was absent. Linearizes at the level-0 mark.
  bool remove(KeyArg k) {
    const Probe key = Keys::probe(k);
    auto guard = domain_.pin();
    Window w;
    for (;;) {
      if (!find(key, w)) return false;
      Node* node = w.succs[0];
      mark_upper_levels(node);
      const std::uint64_t link = system_->load(node->link(0));
      // Marked: removed, or replaced by a put (the key still in, in the next node): find again.
      if (marked(link)) continue;
      // PoolFull here leaves the key in: its upper-level marks only take it off the express
      // lanes (searches still reach it at level 0), and a later remove finishes the job.
      system_->pdetach(node->payload);
      if (!system_->lin_cas(node->link(0), link, link | mark_bit)) continue;
      find(key, w);  // unlinks it at every level
      release(node);
      return true;
    }
  }

  bool contains(KeyArg k) {
    const Probe key = Keys::probe(k);
    auto guard = domain_.pin();
    return search(key) != nullptr;
  }

  std::optional<ValueOut> get(KeyArg k) {
    const Probe key = Keys::probe(k);
    auto guard = domain_.pin();
    const Node* n = search(key);
    if (n == nullptr) return std::nullopt;
    return Keys::value(n->cached, n->payload);
  }

  // Up to max_count keys >= from in ascending order, visit(key, value) each; returns how many.
  // Each key visited was in the map when its level-0 link was read (not an atomic snapshot).
  template <class F>
  std::size_t scan(KeyArg from, std::size_t max_count, F&& visit) {
    const Probe key = Keys::probe(from);
    auto guard = domain_.pin();
    std::size_t count = 0;
    Node* n = lower_bound(key);
    while (n != nullptr && count < max_count) {
      const std::uint64_t link = system_->load(n->link(0));
      if (!marked(link)) {
        Keys::visit(n->order, n->cached, n->payload, visit);
        ++count;
      }
      n = node_of(link);
    }
    return count;
  }

  // The owned key of an element of range(): the byte string's copy.
  using KeyOut = std::string;
  /// The keys in [from, to) in ascending order, for a range-for, while other threads write
  /// (weakly consistent: pmds::Range says what that promises).
  Range<BasicSkipList, KeyOut, ValueOut> range(KeyArg from, KeyArg to) {
    return {*this, KeyOut(from), KeyOut(to)};
  }
  /// The keys from `from` to the end.
  Range<BasicSkipList, KeyOut, ValueOut> range(KeyArg from) { return {*this, KeyOut(from)}; }
  /// Every key.
  Range<BasicSkipList, KeyOut, ValueOut> range() { return range(KeyArg{}); }

  // Everything completed before the call is durable when it returns (two epoch advances).
  void sync() requires(durable) { system_->sync(); }
  // One epoch advance: what the background thread does every epoch (Options::epoch_length).
  void background_step() requires(durable) { system_->background_step(); }

  // Quiescent: f(key, value) for every key, in key order.
  template <class F>
  void for_each(F&& f) {
    for (Node* n = node_of(head_->link(0).load()); n != nullptr;) {
      const std::uint64_t link = n->link(0).load();
      if (!marked(link)) Keys::visit(n->order, n->cached, n->payload, f);
      n = node_of(link);
    }
  }

  // Quiescent: runs every pending reclamation of DRAM nodes now.
  void drain() { domain_.drain(); }

  const RecoveryStats& recovery_stats() const requires(durable) { return recovery_; }
  std::uint64_t epoch() const requires(durable) { return system_->epoch(); }

 private:
  static constexpr std::uint64_t mark_bit = 1;

  // A DRAM index node: the key's order word and Keys::Cached (the second word of the key's
  // order: key_value_payload.hpp), payload, height, the releases left before it is retired
  // (algo/skip_list.hpp's header), then `height` link words (Node* | mark; at level 0 also a
  // lin_cas descriptor while one runs).
  struct Node {
    std::uint64_t order;
    [[no_unique_address]] typename Keys::Cached cached;
    Payload* payload;
    int height;
    std::atomic<int> owners;

    std::atomic<std::uint64_t>& link(int i) {
      return reinterpret_cast<std::atomic<std::uint64_t>*>(this + 1)[i];
    }
    static Node* make(std::uint64_t order, typename Keys::Cached cached, Payload* p, int height,
                      int owners) {
      void* memory = ::operator new(sizeof(Node) + sizeof(std::uint64_t) * height);
      Node* n = ::new (memory) Node{order, cached, p, height, {owners}};
      for (int i = 0; i < height; ++i) ::new (&n->link(i)) std::atomic<std::uint64_t>(0);
      return n;
    }
    static void destroy(Node* n) { ::operator delete(n); }  // trivially destructible parts
  };
  static_assert(sizeof(Node) % alignof(std::atomic<std::uint64_t>) == 0);

  static Node* node_of(std::uint64_t w) { return reinterpret_cast<Node*>(w & ~mark_bit); }
  static std::uint64_t word_of(const Node* n) { return reinterpret_cast<std::uint64_t>(n); }
  static bool marked(std::uint64_t w) { return (w & mark_bit) != 0; }

  struct Window {
    std::array<Node*, max_height> preds;
    std::array<Node*, max_height> succs;
  };

  // A link's value: level 0 through the epoch system (it completes a descriptor it meets).
  std::uint64_t load_link(Node* n, int level) {
    return level == 0 ? system_->load(n->link(0)) : n->link(level).load();
  }
  bool cas_link(Node* n, int level, std::uint64_t expected, std::uint64_t desired) {
    if (level == 0) return system_->cas(n->link(0), expected, desired);
    return n->link(level).compare_exchange_strong(expected, desired);
  }

  // insert (update false) and put. Absent key: a new node linked at level 0 by lin_cas on its
  // predecessor's link. Present key (put): the old node's upper levels are marked as a remove
  // marks them, then one lin_cas on its level-0 link, from its successor s to (new node | mark),
  // the new node's level-0 link being s: the old node is removed and the new one in, at once.
  // Either way the new node's upper levels are then linked.
  bool upsert(KeyArg k, ValueArg value, bool update) {
    const Probe key = Keys::probe(k);
    Keys::check_value(value);
    auto guard = domain_.pin();
    const int height = static_cast<int>(random_height<max_height>());
    raise_levels(height);
    Window w;
    Node* node = nullptr;  // made at the first attempt that needs it, reused by retries
    Node* replaced = nullptr;
    for (;;) {
      if (find(key, w)) {
        if (!update) {
          if (node != nullptr) discard(node);
          return false;
        }
        Node* old = w.succs[0];
        if (node == nullptr) node = make_node(key, k, value, height);
        mark_upper_levels(old);
        const std::uint64_t link = system_->load(old->link(0));
        if (marked(link)) continue;  // removed or replaced meanwhile
        node->link(0).store(link, std::memory_order_relaxed);
        try {
          system_->pdetach(old->payload);  // PoolFull: the key stays in (see remove)
        } catch (...) {
          discard(node);  // its payload must not stay pending for the thread's next lin_cas
          throw;
        }
        if (!system_->lin_cas(old->link(0), link, word_of(node) | mark_bit)) continue;
        replaced = old;
        find(key, w);                         // unlinks the old node at every level
        if (w.succs[0] != node) goto linked;  // removed meanwhile
        break;
      }
      if (node == nullptr) node = make_node(key, k, value, height);
      for (int i = 0; i < height; ++i)
        node->link(i).store(word_of(w.succs[i]), std::memory_order_relaxed);
      if (system_->lin_cas(w.preds[0]->link(0), word_of(w.succs[0]), word_of(node))) break;
    }
    // The key is in (level 0). Link the upper levels, stopping if the node gets marked.
    for (int level = 1; level < height; ++level) {
      for (;;) {
        Node* succ = w.succs[level];
        // A removed node of this key ahead: as algo/skip_list.hpp, find again (it unlinks it).
        if (succ != nullptr && compare<Keys>(succ->order, succ->cached, succ->payload, key) == 0) {
          find(key, w);
          if (w.succs[0] != node) goto linked;  // removed meanwhile
          continue;
        }
        std::uint64_t link = node->link(level).load();
        if (marked(link)) goto linked;
        if (node_of(link) != succ &&
            !node->link(level).compare_exchange_strong(link, word_of(succ)))
          continue;  // marked meanwhile: seen at the top of the loop
        std::uint64_t expected = word_of(succ);
        if (w.preds[level]->link(level).compare_exchange_strong(expected, word_of(node))) break;
        find(key, w);
        if (w.succs[0] != node) goto linked;  // removed meanwhile
      }
    }
  linked:
    // If a remover marked the node, its find() may have run before one of our links above.
    if (marked(system_->load(node->link(0)))) find(key, w);
    release(node);
    if (replaced != nullptr) release(replaced);  // its remover's release
    return replaced == nullptr;
  }

  // Marks a node's upper levels, top-down (a remove's and a put's first step; level 0 last).
  static void mark_upper_levels(Node* node) {
    for (int level = node->height - 1; level >= 1; --level) {
      std::uint64_t link = node->link(level).load();
      // Until it is marked, by this CAS or another's: a failed CAS reloads `link`, a successful
      // one ends the loop (looping on `link` alone would CAS a second time, to fail).
      while (!marked(link) && !node->link(level).compare_exchange_weak(link, link | mark_bit)) {
      }
    }
  }

  // levels_ as algo/skip_list.hpp's: raised before a node of that height is linked.
  void raise_levels(int height) {
    int seen = levels_.load(std::memory_order_relaxed);
    while (seen < height && !levels_.compare_exchange_weak(seen, height)) {
    }
  }

  // Herlihy–Shavit find: preds/succs around key at every level below levels_, unlinking marked
  // nodes on the way. True when succs[0] holds key. Caller is pinned.
  bool find(const Probe& key, Window& w) {
  retry:
    Node* pred = head_.get();
    bool found = false;
    for (int level = levels_.load(std::memory_order_acquire) - 1; level >= 0; --level) {
      Node* curr = node_of(load_link(pred, level));
      while (curr != nullptr) {
        const std::uint64_t succ_link = load_link(curr, level);
        if (marked(succ_link)) {
          const std::uint64_t succ = succ_link & ~mark_bit;
          if (!cas_link(pred, level, word_of(curr), succ)) goto retry;
          curr = node_of(succ);
          continue;
        }
        const int c = compare<Keys>(curr->order, curr->cached, curr->payload, key);
        found = c == 0;
        if (c >= 0) break;
        pred = curr;
        curr = node_of(succ_link);
      }
      w.preds[level] = pred;
      w.succs[level] = curr;
    }
    return w.succs[0] != nullptr && found;
  }

  // Wait-free search, writes nothing: the node holding key, unmarked at some level when read
  // (marks go top-down, level 0 last, so it was present then), or nullptr.
  Node* search(const Probe& key) {
    Node* pred = head_.get();
    for (int level = levels_.load(std::memory_order_acquire) - 1; level >= 0; --level) {
      Node* curr = node_of(load_link(pred, level));
      while (curr != nullptr) {
        const std::uint64_t succ_link = load_link(curr, level);
        if (marked(succ_link)) {
          curr = node_of(succ_link);
          continue;
        }
        const int c = compare<Keys>(curr->order, curr->cached, curr->payload, key);
        if (c == 0) return curr;
        if (c > 0) break;
        pred = curr;
        curr = node_of(succ_link);
      }
    }
    return nullptr;
  }

  // The first level-0 node with key >= key (marked or not), writing nothing.
  Node* lower_bound(const Probe& key) {
    Node* pred = head_.get();
    Node* curr = nullptr;
    for (int level = levels_.load(std::memory_order_acquire) - 1; level >= 0; --level) {
      curr = node_of(load_link(pred, level));
      while (curr != nullptr && compare<Keys>(curr->order, curr->cached, curr->payload, key) < 0) {
        pred = curr;
        curr = node_of(load_link(curr, level));
      }
    }
    return curr;
  }

  Node* make_node(const Probe& key, KeyArg k, ValueArg v, int height) {
    Payload* p = Keys::make_payload(*system_, k, v);                   // PoolFull: nothing changed
    return Node::make(key.order, Keys::cached(key, v), p, height, 2);  // inserter and remover
  }

  // A node never linked: nobody else saw it or its payload.
  void discard(Node* n) {
    system_->pdelete(n->payload);
    Node::destroy(n);
  }

  // The last of the node's two owners retires it: its payload is deleted (two epochs later, by
  // the epoch system) once no pinned thread can still read the node.
  void release(Node* node) {
    if (node->owners.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    System* system = &*system_;
    domain_.retire(node, [system](Node* dead) noexcept {
      system->pdelete(dead->payload);
      Node::destroy(dead);
    });
  }

  // The index from the surviving payloads, in key order, each node with a fresh random height;
  // only a future remover owns them. The entries are sorted and the nodes made over
  // Options::recovery_threads threads, then linked in one pass. A key found twice (impossible
  // without a bug) keeps one payload; the others are counted and freed.
  void rebuild(typename EpochSystem<Faults>::Recovered r) requires(durable) {
    recovery_ = r.stats;
    const std::size_t threads = system_->recovery_threads();
    const std::vector<Entry> entries = sorted_entries<Keys>(r.payloads, threads, &Keys::less);
    std::vector<Node*> nodes(entries.size(), nullptr);  // nullptr: a duplicate
    in_parallel(threads, entries.size(), [&](std::size_t first, std::size_t last) {
      for (std::size_t i = first; i < last; ++i) {
        const Entry& e = entries[i];
        if (i > 0 && Keys::same_key(entries[i - 1], e)) continue;
        nodes[i] = Node::make(Keys::order(e), Keys::cached(e), e.payload,
                              static_cast<int>(random_height<max_height>()), 1);
      }
    });
    std::array<Node*, max_height> last;
    last.fill(head_.get());
    int levels = 1;
    std::vector<Block*> duplicates;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      Node* n = nodes[i];
      if (n == nullptr) {
        duplicates.push_back(entries[i].payload);
        continue;
      }
      for (int l = 0; l < n->height; ++l) {
        last[l]->link(l).store(word_of(n), std::memory_order_relaxed);
        last[l] = n;
      }
      levels = std::max(levels, n->height);
    }
    levels_.store(levels);
    system_->free_duplicates(duplicates, recovery_);
  }

  using System = std::conditional_t<durable, EpochSystem<Faults>, TransientSystem>;
  std::optional<System> system_;  // before domain_: its deleters call pdelete
  reclaim::EpochDomain domain_;
  struct NodeDeleter {
    void operator()(Node* n) const { Node::destroy(n); }
  };
  // Owned, so that a constructor that throws (a pool of another structure) frees it.
  std::unique_ptr<Node, NodeDeleter> head_{Node::make(0, {}, nullptr, max_height, 0)};
  std::atomic<int> levels_{1};
  RecoveryStats recovery_;
};

// "skiplist-bytes/montage": byte-string keys and values (pmds::ByteStringMap), in byte order.
template <FaultPolicy Faults = NoFaults>
using ByteStringSkipList = BasicSkipList<ByteStringKeys, true, Faults>;

// "skiplist-bytes/transient": its twin in DRAM, the payloads on the heap.
using TransientByteStringSkipList = BasicSkipList<ByteStringKeys, false>;

}  // namespace pmds::montage
