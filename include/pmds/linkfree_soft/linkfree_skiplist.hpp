// pmds::linkfree_soft::LinkFreeSkipList — "skiplist/linkfree": Zuriel et al.'s link-free technique
// applied to a lock-free skip list ("extending this algorithm to a skip list is straightforward",
// §3).
//
// Design: level 0 IS the link-free list of §3. The node (detail/linkfree_node.hpp) is the list's
// node, with the same persistent meaning (validity bits, key, value, level-0 deletion mark) and
// the same rules: invalid until linked at level 0, made valid after, flushed before insert and
// contains report it; marked at level 0 (the linearisation point of remove) only when valid;
// flushed before it is unlinked at level 0. Recovery is the list's recovery (§3.5) followed by
// rebuilding the towers over the sorted live nodes at the heights they were inserted with, with
// no flush.
//
// The upper levels are an index and volatile in meaning (never flushed: a crash image of them is
// ignored): levels 1..4 live in the node's own cache line, higher levels in the lines after it, in
// the node's pool slot, so a search's step at a high level reads the node's key and the link it
// follows from adjacent lines (a DRAM array for them cost a second miss per step: 19% of search's
// samples at 1M keys). A node of height <= 5 takes a 64-byte slot, <= 13 a 128-byte one, taller
// a 320-byte one (slot_size_for_height). The
// lock-free skip-list algorithm is the Herlihy-Shavit/Fraser one: remove marks the upper levels
// top-down and then level 0; find snips marked nodes at every level; insert links level 0 first,
// then the upper levels bottom-up, stopping if the node gets marked.
//
// Reclamation: a node may be retired only when no level links to it any more. Its remover (the
// thread whose level-0 mark succeeded) unlinks it with a find after marking; its inserter may still
// be linking upper levels then, so the node carries a handshake (tower_built by the inserter when
// it has stopped linking, after a find of its own if it sees the node marked; tower_removed by the
// remover after its find): whichever sets its bit second retires the node.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <vector>

#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/linkfree_soft/detail/linkfree_node.hpp"
#include "pmds/linkfree_soft/detail/set_root.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/allocator.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/pm/pool_format.hpp"
#include "pmds/random_height.hpp"
#include "pmds/reclaim/epoch.hpp"
#include "pmds/thread_registry.hpp"

namespace pmds::linkfree_soft {

template <FaultPolicy Faults = NoFaults>
class LinkFreeSkipList {
  using Node = detail::linkfree::SkipListNode;
  using Word = pm::atomic<std::uint64_t>;

 public:
  // Durable linearizability (Zuriel et al. §1); the registry reads it (registry::criterion_of).
  static constexpr Criterion criterion = Criterion::durable;
  static constexpr int max_levels = 32;
  // LF1 pools kept towers in DRAM and one slot size; their nodes would recover, but a pool of
  // this layout opened by LF1's code would lose its taller nodes (other slot sizes): a new tag.
  static constexpr std::uint64_t tag = detail::make_tag("SKIP-LF2");
  static constexpr const char* name = "skiplist/linkfree";

  // Creates an empty skip list in `pool` (which must hold no structure and outlive the list).
  LinkFreeSkipList(CreateTag, pm::Pool& pool)
      : pool_(pool),
        allocator_(pool.allocator()),
        head_(min_reserved_key),
        tail_(max_reserved_key) {
    init_sentinels();
    detail::write_set_root(pool, tag, 1, name);
  }
  // Opens the skip list `pool` holds and recovers it from the durable areas.
  LinkFreeSkipList(OpenTag, pm::Pool& pool)
      : pool_(pool),
        allocator_(pool.allocator()),
        head_(min_reserved_key),
        tail_(max_reserved_key) {
    init_sentinels();
    detail::read_set_root(pool, tag, name);
    recover();
  }
  LinkFreeSkipList(const LinkFreeSkipList&) = delete;
  LinkFreeSkipList& operator=(const LinkFreeSkipList&) = delete;

  // Quiescent. Runs the retired nodes' deleters; the pool keeps the nodes.
  ~LinkFreeSkipList() { epochs_.drain(); }

  bool contains(Key key) {
    check_key(key);
    auto guard = epochs_.pin();
    return search(key) != nullptr;
  }

  std::optional<Value> get(Key key) {
    check_key(key);
    auto guard = epochs_.pin();
    if (Node* n = search(key)) return n->value.load(std::memory_order_relaxed);
    return std::nullopt;
  }

  bool insert(Key key, Value value) {
    using namespace detail::linkfree;
    check_key(key);
    auto guard = epochs_.pin();
    Node* preds[max_levels];
    Node* succs[max_levels];
    int height = static_cast<int>(random_height<max_levels>());
    raise_levels_in_use(height);  // before find, so find fills windows up to `height`
    Node* fresh = nullptr;
    for (;;) {
      if (find(key, preds, succs)) {
        // §3.3: help the existing node become valid and durable before reporting failure.
        Node* existing = succs[0];
        make_valid(existing);
        flush_insert(existing);
        if (fresh != nullptr) free_unpublished(fresh);
        return false;
      }
      if (fresh == nullptr) {
        fresh = new_node(key, value, height);  // may lower height; may throw PoolFull
        if constexpr (Faults::planted == Fault::valid_before_link) make_valid(fresh);
      }
      for (int level = 0; level < height; ++level)
        next_word(fresh, level).store(word_of(succs[level]), std::memory_order_relaxed);
      std::uint64_t expected = word_of(succs[0]);
      if (preds[0]->next.compare_exchange_strong(expected, word_of(fresh))) break;
    }
    // Linked at level 0: the key is in the set. Valid only now (§3.3), then durable.
    make_valid(fresh);
    flush_insert(fresh);
    if (height > 1) link_upper_levels(fresh, key, height, preds, succs);
    return true;
  }

  bool remove(Key key) {
    using namespace detail::linkfree;
    check_key(key);
    auto guard = epochs_.pin();
    Node* preds[max_levels];
    Node* succs[max_levels];
    if (!find(key, preds, succs)) return false;
    Node* victim = succs[0];
    // Upper levels first, top-down: once marked there, the inserter stops linking it.
    for (int level = victim->height.load(std::memory_order_relaxed) - 1; level >= 1; --level) {
      Word& w = next_word(victim, level);
      std::uint64_t s = w.load(std::memory_order_acquire);
      while (!is_marked(s) && !w.compare_exchange_strong(s, s | mark_bit)) {
      }
    }
    std::uint64_t s = victim->next.load(std::memory_order_acquire);
    for (;;) {
      if (is_marked(s)) {
        // Another remover won: its deletion must be durable before this reports "absent".
        flush_delete(victim);
        return false;
      }
      make_valid(victim);  // a marked node is valid (same line: no flush in between)
      if (victim->next.compare_exchange_strong(s, s | mark_bit)) break;
    }
    // Unlink at every level; the level-0 snip flushes the mark first (trim, §3.1).
    find(key, preds, succs);
    if (victim->tower_state.fetch_add(tower_removed) & tower_built) retire(victim);
    return true;
  }

  // Quiescent: f(key, value) in key order; the number of keys.
  template <class F>
  void for_each(F&& f) {
    using namespace detail::linkfree;
    for (Node* n = next_node(&head_.node, 0); n != &tail_.node; n = next_node(n, 0))
      if (!is_marked(n->next.load())) f(n->key.load(), n->value.load());
  }
  std::size_t size() {
    std::size_t n = 0;
    for_each([&n](Key, Value) { ++n; });
    return n;
  }

  const RecoveryStats& recovery_stats() const { return recovery_; }
  pm::Pool& pool() const { return pool_; }
  // Quiescent: runs every pending reclamation now.
  void drain() { epochs_.drain(); }
  // Levels some node may use (for tests and inspection).
  int levels_in_use() const { return levels_in_use_.load(std::memory_order_relaxed); }

 private:
  // ---- towers ----------------------------------------------------------------------------

  static constexpr int inline_levels = 1 + detail::linkfree::inline_upper_levels;

  static Word& next_word(Node* n, int level) {
    if (level == 0) return n->next;
    if (level < inline_levels) return n->upper[level - 1];
    return std::launder(reinterpret_cast<Word*>(n + 1))[level - inline_levels];
  }
  static Node* next_node(Node* n, int level) {
    return detail::linkfree::node_of<Node>(next_word(n, level).load(std::memory_order_acquire));
  }

  // A node's slot: its line, then the levels past the inline ones, in whole lines (the node's
  // line stays line-aligned). Three sizes, so three chunk classes at most; the last holds a
  // tower of max_levels.
  static constexpr std::array<std::size_t, 3> node_slot_sizes = {
      sizeof(Node), 2 * sizeof(Node),
      pm::format::round_up(sizeof(Node) + (max_levels - inline_levels) * sizeof(Word),
                           pm::cache_line_size)};
  // The most levels a slot of `size` bytes holds.
  static constexpr int height_capacity(std::size_t size) {
    return std::min(max_levels,
                    inline_levels + static_cast<int>((size - sizeof(Node)) / sizeof(Word)));
  }
  static_assert(height_capacity(node_slot_sizes.back()) == max_levels);
  // The smallest slot that holds `height` levels.
  static constexpr std::size_t slot_size_for_height(int height) {
    for (const std::size_t size : node_slot_sizes)
      if (height_capacity(size) >= height) return size;
    return node_slot_sizes.back();
  }
  static constexpr bool is_node_slot_size(std::size_t size) {
    return std::ranges::find(node_slot_sizes, size) != node_slot_sizes.end();
  }

  void init_sentinels() {
    for (Node* s : {&head_.node, &tail_.node})
      s->height.store(max_levels, std::memory_order_relaxed);
    for (int level = 0; level < max_levels; ++level) {
      next_word(&head_.node, level)
          .store(detail::linkfree::word_of(&tail_.node), std::memory_order_relaxed);
      next_word(&tail_.node, level).store(0, std::memory_order_relaxed);
    }
  }

  void raise_levels_in_use(int height) {
    int seen = levels_in_use_.load(std::memory_order_acquire);
    while (seen < height && !levels_in_use_.compare_exchange_weak(seen, height)) {
    }
  }

  // ---- nodes -----------------------------------------------------------------------------

  Node* new_node(Key key, Value value, int& height) {
    using namespace detail::linkfree;
    auto* n = static_cast<Node*>(allocate_slot(height));
    init_node(n, key, value, 0);
    n->height.store(static_cast<std::uint8_t>(height), std::memory_order_relaxed);
    n->tower_state.store(height == 1 ? tower_built : 0, std::memory_order_relaxed);
    return n;
  }
  // A slot for a node of `height` levels. A full pool may still hold free slots of another node
  // size (freed by removes): then one of those, with the height lowered to what it holds if need
  // be (a height only guides searches), so that a remove always makes room for an insert.
  void* allocate_slot(int& height) {
    const std::size_t want = slot_size_for_height(height);
    try {
      return allocator_.allocate(want);
    } catch (const PoolFull&) {
      for (const std::size_t size : node_slot_sizes) {
        if (size == want) continue;
        try {
          void* slot = allocator_.allocate(size);
          height = std::min(height, height_capacity(size));
          return slot;
        } catch (const PoolFull&) {
        }
      }
      throw;
    }
  }
  // A node whose linking CAS never succeeded: nobody else has seen it.
  void free_unpublished(Node* n) { allocator_.free(n); }
  void retire(Node* n) {
    epochs_.retire(n, [a = &allocator_](Node* p) { a->free(p); });
  }

  // ---- the algorithm ---------------------------------------------------------------------

  // Herlihy-Shavit find: for each level below levels_in_use, preds[l] and succs[l] are adjacent
  // with preds[l].key < key <= succs[l].key and succs[l] unmarked at level l; snips every marked
  // node on the way (at level 0 after flushing its mark: trim of §3.1). True if succs[0] has key.
  bool find(Key key, Node** preds, Node** succs) {
    using namespace detail::linkfree;
    for (;;) {
      bool restart = false;
      const int top = levels_in_use_.load(std::memory_order_acquire);
      Node* pred = &head_.node;
      for (int level = top - 1; level >= 0 && !restart; --level) {
        Node* curr = next_node(pred, level);
        for (;;) {
          std::uint64_t succ = next_word(curr, level).load(std::memory_order_acquire);
          while (is_marked(succ)) {
            if constexpr (Faults::planted != Fault::trim_without_flush) {
              if (level == 0) flush_delete(curr);
            }
            std::uint64_t expected = word_of(curr);
            if (!next_word(pred, level).compare_exchange_strong(expected, unmarked(succ))) {
              restart = true;
              break;
            }
            curr = node_of<Node>(succ);
            succ = next_word(curr, level).load(std::memory_order_acquire);
          }
          if (restart) break;
          if (curr->key.load(std::memory_order_relaxed) < key) {
            pred = curr;
            curr = node_of<Node>(succ);
          } else {
            break;
          }
        }
        preds[level] = pred;
        succs[level] = curr;
      }
      if (!restart) return succs[0]->key.load(std::memory_order_relaxed) == key;
    }
  }

  // After level 0: link levels 1..height-1 bottom-up, stop once the node is marked (a remover
  // marks the upper levels before level 0), then do the tower handshake.
  void link_upper_levels(Node* fresh, Key key, int height, Node** preds, Node** succs) {
    using namespace detail::linkfree;
    for (int level = 1; level < height; ++level) {
      bool linked = false;
      while (!linked) {
        Word& w = next_word(fresh, level);
        std::uint64_t own = w.load(std::memory_order_acquire);
        if (is_marked(own)) goto done;
        // Only a remover's mark changes this word besides us: a failed CAS means marked.
        if (own != word_of(succs[level]) && !w.compare_exchange_strong(own, word_of(succs[level])))
          goto done;
        std::uint64_t expected = word_of(succs[level]);
        linked = next_word(preds[level], level).compare_exchange_strong(expected, word_of(fresh));
        if (!linked) {
          find(key, preds, succs);
          if (succs[0] != fresh) goto done;  // removed (and unlinked at level 0) meanwhile
        }
      }
    }
  done:
    // A remover that marked level 0 before this point may have run its unlinking find before
    // our last link: unlink again ourselves.
    if (is_marked(fresh->next.load(std::memory_order_acquire))) find(key, preds, succs);
    if (fresh->tower_state.fetch_add(tower_built) & tower_removed) retire(fresh);
  }

  // The contains traversal (§3.2, wait-free): the upper levels only guide the descent; level 0
  // is Listing 3. The found node is made valid and durable; a deletion seen is made durable.
  Node* search(Key key) {
    using namespace detail::linkfree;
    Node* pred = &head_.node;
    for (int level = levels_in_use_.load(std::memory_order_acquire) - 1; level >= 1; --level) {
      Node* curr = next_node(pred, level);
      while (curr->key.load(std::memory_order_relaxed) < key) {
        pred = curr;
        curr = next_node(curr, level);
      }
    }
    Node* curr = next_node(pred, 0);
    while (curr->key.load(std::memory_order_relaxed) < key) curr = next_node(curr, 0);
    if (curr->key.load(std::memory_order_relaxed) != key) return nullptr;
    if (is_marked(curr->next.load(std::memory_order_acquire))) {
      flush_delete(curr);
      return nullptr;
    }
    make_valid(curr);
    flush_insert(curr);
    return curr;
  }

  // ---- recovery (§3.5, extended to towers) ----------------------------------------------

  void recover() {
    using namespace detail::linkfree;
    detail::Stopwatch clock;
    struct Live {
      Key key;
      Node* node;
      int capacity;  // levels its slot holds
    };
    std::vector<Live> live;
    const pm::AllocatorRecoveryStats found = allocator_.recover([&](void* slot, std::size_t size) {
      if (!is_node_slot_size(size)) return true;  // not a link-free node: not ours to judge
      ++recovery_.slots_scanned;
      auto* n = static_cast<Node*>(slot);
      if (!is_live_image<Faults>(n)) return false;
      live.push_back({n->key.load(std::memory_order_relaxed), n, height_capacity(size)});
      return true;
    });
    recovery_.freed_slots = found.free_slots;
    std::sort(live.begin(), live.end(), [](const Live& a, const Live& b) { return a.key < b.key; });
    // Fresh towers, linked in one pass: last[l] is the last node linked at level l. A node keeps
    // the height its inserter drew (random), which its slot was sized for; the height byte is
    // volatile in meaning and may be stale, so it is clamped to what the slot holds.
    Node* last[max_levels];
    std::fill(std::begin(last), std::end(last), &head_.node);
    int top = 1;
    for (std::size_t i = 0; i < live.size(); ++i) {
      Node* n = live[i].node;
      if (i > 0 && live[i - 1].key == live[i].key) {  // only a planted bug makes these
        ++recovery_.duplicate_keys;
        allocator_.free(n);
        continue;
      }
      const int height =
          std::clamp<int>(n->height.load(std::memory_order_relaxed), 1, live[i].capacity);
      n->height.store(static_cast<std::uint8_t>(height), std::memory_order_relaxed);
      n->tower_state.store(tower_built, std::memory_order_relaxed);
      reset_recovered_flags(n);
      for (int level = 0; level < height; ++level) {
        next_word(last[level], level).store(word_of(n), std::memory_order_relaxed);
        last[level] = n;
      }
      top = std::max(top, height);
      ++recovery_.live_slots;
    }
    for (int level = 0; level < max_levels; ++level)
      next_word(last[level], level).store(word_of(&tail_.node), std::memory_order_relaxed);
    levels_in_use_.store(top, std::memory_order_relaxed);
    recovery_.seconds = clock.seconds();
  }

  pm::Pool& pool_;
  pm::ChunkAllocator& allocator_;
  // A DRAM sentinel: a node with a full tower after its line, as in a tall node's slot.
  struct Sentinel {
    explicit Sentinel(Key k) : node(k) {}
    Node node;
    Word tower[max_levels - inline_levels];
  };
  static_assert(offsetof(Sentinel, tower) == sizeof(Node));
  Sentinel head_;
  Sentinel tail_;
  alignas(pm::cache_line_size) std::atomic<int> levels_in_use_{1};
  RecoveryStats recovery_;
  reclaim::EpochDomain epochs_;  // last member: destroyed first, after ~LinkFreeSkipList drained it
};

}  // namespace pmds::linkfree_soft
