// pmds::linkfree_soft — the link-free durable list and its hash-bucket form (Zuriel et al. §3,
// Listings 1-5).
//
//   LinkFreeBucketList<>     the list algorithm as a bucket list (hash_set.hpp's interface):
//                            Harris's lock-free list with the link-free persistence rules.
//   LinkFreeList<>           "list/linkfree": ListSet<LinkFreeBucketList<>>, one such list
//                            in a pool (linkfree_soft/list_set.hpp).
//   LinkFreeHashSet          "hash/linkfree": HashSet<LinkFreeBucketList<>>.
//
// Persisted: each node's validity bits, key, value and deletion mark (detail/linkfree_node.hpp
// has the node and the invariants). Not persisted: the links. Recovery (§3.5) scans the pool's
// durable areas, keeps the valid unmarked nodes, relinks them in key order without any flush
// and hands every other slot back to the allocator.
//
// The head of a list is a DRAM word (a bucket); the tail is one shared DRAM sentinel with key
// 2^64-1. Reclamation: a node is retired by the thread whose trim unlinked it; its deleter
// returns the slot to the pool allocator once no pinned thread can hold it (§5).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "pmds/interfaces.hpp"
#include "pmds/linkfree_soft/detail/linkfree_node.hpp"
#include "pmds/linkfree_soft/detail/set_root.hpp"
#include "pmds/linkfree_soft/hash_set.hpp"
#include "pmds/linkfree_soft/list_set.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/allocator.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/reclaim/epoch.hpp"

namespace pmds::linkfree_soft {

namespace detail::linkfree {

// The tail sentinel every link-free list of the process ends with: key 2^64-1 is larger than
// any user key, so traversals stop on it without a null check. Never written after start-up.
// Constant-initialised (constinit), never dynamically: code that runs from another translation
// unit's static initializer (the crash lab's recovery role, crashlab/child.hpp, in a program
// whose structures are compiled in a separate table library) may traverse a list before this
// unit's dynamic initializers have run.
inline constinit ListNode tail_sentinel{max_reserved_key};

// What all lists of one structure share: the durable areas and the reclamation domain.
struct Shared {
  explicit Shared(pm::Pool& pool) : allocator(pool.allocator()) {}
  Shared(const Shared&) = delete;
  Shared& operator=(const Shared&) = delete;

  ListNode* allocate() { return static_cast<ListNode*>(allocator.allocate(sizeof(ListNode))); }
  // The slot goes back to the allocator once no pinned thread can still hold it.
  void retire(ListNode* n) {
    epochs.retire(n, [a = &allocator](ListNode* p) { a->free(p); });
  }

  pm::ChunkAllocator& allocator;
  reclaim::EpochDomain epochs;  // destroyed first: its pending deleters still see `allocator`
};

// Recovery's sort: live nodes by (bucket, key), relinked bucket by bucket. Counting sort on the
// bucket, then a sort within each bucket (short in a hash table, the whole list otherwise).
struct LiveNode {
  Key key;
  ListNode* node;
};

}  // namespace detail::linkfree

// Faults: the crash lab's planted bugs (faults.hpp); NoFaults in every shipped type.
template <FaultPolicy Faults = NoFaults>
struct LinkFreeBucketList {
  using Node = detail::linkfree::ListNode;
  using Shared = detail::linkfree::Shared;

  // A list head: the word a head sentinel's next would hold (DRAM; rebuilt by recovery).
  struct Bucket {
    pm::atomic<std::uint64_t> head{detail::linkfree::word_of(&detail::linkfree::tail_sentinel)};
  };

  // Format 2: 32-byte nodes. A format-1 pool (a node per line) is refused at open: its slots
  // are of another size, which recovery would not read as nodes.
  static constexpr std::uint64_t hash_tag = detail::make_tag("HASH-LF2");
  static constexpr const char* hash_name = "hash/linkfree";
  static constexpr std::uint64_t list_tag = detail::make_tag("LIST-LF2");
  static constexpr const char* list_name = "list/linkfree";

  // ---- operations (§3.2-§3.4) ----------------------------------------------------------------

  // contains of Listing 3: wait-free; makes valid and flushes what it reports.
  static bool contains(Shared& s, Bucket& b, Key key) {
    auto guard = s.epochs.pin();
    return search(b, key) != nullptr;
  }

  static std::optional<Value> get(Shared& s, Bucket& b, Key key) {
    auto guard = s.epochs.pin();
    if (Node* n = search(b, key)) return n->value.load(std::memory_order_relaxed);
    return std::nullopt;
  }

  // insert of Listing 4. The new node is allocated once and reused if the linking CAS fails; if
  // the key turns out to be present it is freed at once (it was never published).
  static bool insert(Shared& s, Bucket& b, Key key, Value value) {
    using namespace detail::linkfree;
    auto guard = s.epochs.pin();
    Node* fresh = nullptr;
    for (;;) {
      auto [pred, curr] = find(s, b, key);
      if (curr->key.load(std::memory_order_relaxed) == key) {
        // §3.3: the existing node may still be invalid (linked, not yet made valid): help it
        // become valid and durable, or a crash could keep this failed insert's effect (the key
        // is present) without the insert that caused it.
        make_valid(curr);
        flush_insert(curr);
        if (fresh != nullptr) s.allocator.free(fresh);
        return false;
      }
      if (fresh == nullptr) {
        fresh = s.allocate();  // may throw PoolFull: nothing is published yet
        init_node(fresh, key, value, word_of(curr));
        if constexpr (Faults::planted == Fault::valid_before_link) make_valid(fresh);
      } else {
        fresh->next.store(word_of(curr), std::memory_order_relaxed);
      }
      std::uint64_t expected = word_of(curr);
      if (pred->compare_exchange_strong(expected, word_of(fresh))) {
        make_valid(fresh);  // §3.3: only after linking
        flush_insert(fresh);
        return true;
      }
    }
  }

  // remove of Listing 5: make valid, mark (the linearisation point), then trim, whose flush
  // makes the deletion durable before the node is unlinked and before this returns.
  static bool remove(Shared& s, Bucket& b, Key key) {
    using namespace detail::linkfree;
    auto guard = s.epochs.pin();
    for (;;) {
      auto [pred, curr] = find(s, b, key);
      if (curr->key.load(std::memory_order_relaxed) != key) return false;
      std::uint64_t succ = unmarked(curr->next.load(std::memory_order_acquire));
      make_valid(curr);  // a marked node is valid; same line as the mark, so no flush between
      if (curr->next.compare_exchange_strong(succ, succ | mark_bit)) {
        trim(s, pred, curr);
        return true;
      }
      // Lost to another remover (find will trim it, flushing the mark) or the successor
      // changed: start over.
    }
  }

  // ---- recovery (§3.5) -----------------------------------------------------------------------

  template <class IndexOf>
  static RecoveryStats recover(Shared& s, std::span<Bucket> buckets, IndexOf&& index_of) {
    using namespace detail::linkfree;
    detail::Stopwatch clock;
    RecoveryStats stats;
    std::vector<std::uint32_t> counts(buckets.size() + 1, 0);
    std::vector<LiveNode> live;
    std::vector<std::uint32_t> bucket_of_live;
    const pm::AllocatorRecoveryStats found = s.allocator.recover([&](void* slot, std::size_t size) {
      // Another size class is not a link-free node: not ours to judge, keep it.
      if (size != sizeof(Node)) return true;
      ++stats.slots_scanned;
      auto* n = static_cast<Node*>(slot);
      if (!is_live_image<Faults>(n)) return false;
      const Key k = n->key.load(std::memory_order_relaxed);
      const std::size_t i = index_of(k);
      live.push_back({k, n});
      bucket_of_live.push_back(static_cast<std::uint32_t>(i));
      ++counts[i + 1];
      return true;
    });
    stats.freed_slots = found.free_slots;
    // Counting sort by bucket.
    for (std::size_t i = 1; i < counts.size(); ++i) counts[i] += counts[i - 1];
    std::vector<LiveNode> sorted(live.size());
    {
      std::vector<std::uint32_t> fill(counts.begin(), counts.end() - 1);
      for (std::size_t j = 0; j < live.size(); ++j) sorted[fill[bucket_of_live[j]]++] = live[j];
    }
    live.clear();
    live.shrink_to_fit();
    bucket_of_live.clear();
    bucket_of_live.shrink_to_fit();
    // Each bucket: sort by key, drop duplicates (only a planted bug makes them), link.
    for (std::size_t i = 0; i < buckets.size(); ++i) {
      const auto first = sorted.begin() + counts[i];
      const auto last = sorted.begin() + counts[i + 1];
      if (first == last) continue;
      std::sort(first, last, [](const LiveNode& a, const LiveNode& b) { return a.key < b.key; });
      std::uint64_t next = word_of(&tail_sentinel);
      for (auto it = last; it != first;) {
        --it;
        if (it != first && (it - 1)->key == it->key) {
          ++stats.duplicate_keys;
          s.allocator.free(it->node);
          continue;
        }
        it->node->next.store(next, std::memory_order_relaxed);  // unmarked: a live node
        reset_recovered_flags(it->node);
        next = word_of(it->node);
        ++stats.live_slots;
      }
      buckets[i].head.store(next, std::memory_order_relaxed);
    }
    stats.seconds = clock.seconds();
    return stats;
  }

  // Quiescent: runs every pending reclamation now.
  static void drain(Shared& s) { s.epochs.drain(); }

  // Quiescent: f(key, value) for every unmarked node of the bucket, in key order.
  template <class F>
  static void for_each(Shared&, const Bucket& b, F&& f) {
    using namespace detail::linkfree;
    for (Node* n = node_of<Node>(b.head.load()); n != &tail_sentinel;) {
      const std::uint64_t next = n->next.load();
      if (!is_marked(next)) f(n->key.load(), n->value.load());
      n = node_of<Node>(next);
    }
  }

 private:
  // find of Listing 2: (the word that links to curr, curr), curr the first unmarked node with
  // key >= key; trims every marked node it passes.
  static std::pair<pm::atomic<std::uint64_t>*, Node*> find(Shared& s, Bucket& b, Key key) {
    using namespace detail::linkfree;
    pm::atomic<std::uint64_t>* pred = &b.head;
    Node* curr = node_of<Node>(pred->load(std::memory_order_acquire));
    for (;;) {
      const std::uint64_t next = curr->next.load(std::memory_order_acquire);
      if (!is_marked(next)) {
        if (curr->key.load(std::memory_order_relaxed) >= key) break;
        pred = &curr->next;
      } else {
        trim(s, pred, curr);
      }
      curr = node_of<Node>(next);  // a marked node's next never changes again
    }
    return {pred, curr};
  }

  // trim of Listing 2: flush the mark, then unlink. The thread whose CAS unlinks the node
  // retires it.
  static bool trim(Shared& s, pm::atomic<std::uint64_t>* pred, Node* curr) {
    using namespace detail::linkfree;
    if constexpr (Faults::planted != Fault::trim_without_flush) flush_delete(curr);
    std::uint64_t expected = word_of(curr);
    const std::uint64_t succ = unmarked(curr->next.load(std::memory_order_acquire));
    if (!pred->compare_exchange_strong(expected, succ)) return false;
    s.retire(curr);
    return true;
  }

  // The traversal of Listing 3 (no trimming). Returns the node if the key is in the set (made
  // valid and durably inserted), nullptr if not (and any deletion seen is durable).
  static Node* search(Bucket& b, Key key) {
    using namespace detail::linkfree;
    Node* curr = node_of<Node>(b.head.load(std::memory_order_acquire));
    while (curr->key.load(std::memory_order_relaxed) < key)
      curr = node_of<Node>(curr->next.load(std::memory_order_acquire));
    if (curr->key.load(std::memory_order_relaxed) != key) return nullptr;
    if (is_marked(curr->next.load(std::memory_order_acquire))) {
      flush_delete(curr);
      return nullptr;
    }
    make_valid(curr);
    flush_insert(curr);
    return curr;
  }
};

// "list/linkfree": one link-free list in a pool (Zuriel et al. §3), linkfree_soft/list_set.hpp.
template <FaultPolicy Faults = NoFaults>
using LinkFreeList = ListSet<LinkFreeBucketList<Faults>>;

// "hash/linkfree": Zuriel et al.'s link-free hash table, a fixed array of link-free buckets.
template <FaultPolicy Faults = NoFaults>
using LinkFreeHashSetT = HashSet<LinkFreeBucketList<Faults>>;
using LinkFreeHashSet = LinkFreeHashSetT<>;

}  // namespace pmds::linkfree_soft
