// pmds::montage::SplitOrderedHash — Shalev & Shavit's split-ordered lists (JACM 2006), the
// extensible lock-free hash table that nbMontage §5 makes persistent, in two forms over one code:
//   "hash-so/montage"    SplitOrderedHashMap<>: the index in DRAM, each key's KeyValuePayload in
//                        the pool (buffered durable linearizability, with sync());
//   "hash-so/transient"  TransientSplitOrderedHashMap: the same index, nothing persisted — the
//                        twin nbMontage Figure 4 compares it with (DRAM (T)-SS).
// The two differ only where `durable` says so (payloads, lin_cas instead of a CAS, recovery),
// so a ratio between them measures nbMontage alone. The twin keeps key and value in its nodes
// and has no payloads, as nbMontage's DRAM (T)-SS and hash/transient (the twin of hash/montage)
// have none: making and freeing a payload per update is part of nbMontage's cost. (The
// byte-string twins use montage/transient_system.hpp instead, because their strings live in
// the payloads.)
//
// The table is ONE Harris–Michael list of every key, sorted by split-order key: a key's bits
// reversed, with the lowest bit set, so that the keys of bucket b (the key's low bits, as
// bucket_index.hpp maps every hash table in pmds) follow one another, right after b's dummy
// node, whose split-order key is b reversed (lowest bit clear). A bucket array of pointers to
// the dummies gives each bucket its entry into the list. The array only grows: when the keys
// per bucket pass load_factor the bucket count doubles, and a new bucket b is initialized on
// first use by inserting its dummy into the list, starting from its parent bucket (b with its
// highest bit cleared), whose keys include b's. Nothing moves when the table grows. A key's top
// bit does not fit in its split-order key (the lowest bit marks a regular node), so keys that
// differ only there share one; the list orders by (split-order key, key).
//
// nbMontage: as in hash_map.hpp's table, an insert's link and a remove's mark are lin_cas, after
// pnew and pdetach; the unlinking of marked nodes and the dummies' links are plain cas through
// the epoch system. Written here rather than in algo/ over the policy seam: no other technique
// has this table, so the file is its one copy (with its twin, `durable` false).
// Dummies carry no payload: recovery rebuilds the list, every dummy of the rebuilt bucket count,
// and the bucket array from the payloads.
//
// Bucket array: segments, allocated on first use — segment 0 holds bucket 0, segment s >= 1
// buckets [2^(s-1), 2^s) — so a table that grows never copies or reallocates it.
//
// Pool layout (montage): StructureRoot (epoch_system.hpp) with tag "HASHSOMT"; payload and
// anti-node blocks from the allocator.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "pmds/interfaces.hpp"
#include "pmds/montage/epoch_system.hpp"
#include "pmds/montage/key_value_payload.hpp"
#include "pmds/montage/parallel.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/reclaim/epoch.hpp"

namespace pmds::montage {

template <bool Durable, FaultPolicy Faults = NoFaults>
class SplitOrderedHash {
 public:
  static constexpr bool durable = Durable;
  static constexpr Criterion criterion = durable ? Criterion::buffered : Criterion::none;
  static constexpr EpochBound epoch_bound = durable ? EpochBound::two_epochs : EpochBound::none;
  static constexpr std::uint64_t tag = 0x544d4f5348534148;  // "HASHSOMT"
  static constexpr const char* name = durable ? "hash-so/montage" : "hash-so/transient";
  // Keys per bucket above which the bucket count doubles (Shalev & Shavit's MAX_LOAD).
  static constexpr std::size_t load_factor = 2;
  static constexpr int max_bucket_bits = 40;

  using Payload = KeyValuePayload;

  // The transient twin: an empty table in DRAM.
  SplitOrderedHash() requires(!durable) { init_buckets(1); }

  // A new, empty map in `pool`, which must hold no structure.
  SplitOrderedHash(CreateTag, pm::Pool& pool, const Options& options = {}) requires(durable) {
    StructureRoot::check_unused(pool, name);
    system_.emplace(create_new, pool, options);
    StructureRoot::write(pool, tag, 0, system_->area());
    init_buckets(1);
  }

  // Opens the map a pool holds: the index is rebuilt from the payloads recovery keeps (§3.4).
  SplitOrderedHash(OpenTag, pm::Pool& pool, const Options& options = {}) requires(durable) {
    const auto [parameter, area] = StructureRoot::read(pool, tag, name);
    (void)parameter;
    system_.emplace(open_existing, pool, area, options);
    rebuild(system_->recover(&WordKeys::damaged));
  }

  SplitOrderedHash(const SplitOrderedHash&) = delete;
  SplitOrderedHash& operator=(const SplitOrderedHash&) = delete;

  // A clean close: everything completed is made durable (sync), then the DRAM index is freed.
  ~SplitOrderedHash() {
    if constexpr (durable) sync();
    domain_.drain();  // the removed nodes; every other node is on the list
    Node* n = node_of(slot(0).load());
    while (n != nullptr) {
      Node* next = node_of(n->next.load());
      delete n;
      n = next;
    }
    for (auto& s : segments_) delete[] s.load();
  }

  // False if the key was present. Throws PoolFull (the map unchanged) when no block is left.
  bool insert(Key key, Value value) {
    check_key(key);
    auto guard = domain_.pin();
    const std::uint64_t so = regular_so_key(key);
    std::atomic<std::uint64_t>& head = bucket_head(key);
    Node* fresh = nullptr;  // made at the first attempt that needs it, reused by retries
    for (;;) {
      const Window w = find(head, so, key);
      if (w.found) {
        if (fresh != nullptr) discard(fresh);
        return false;
      }
      if (fresh == nullptr) fresh = make_node(so, key, value);
      fresh->next.store(word_of(w.curr), std::memory_order_relaxed);
      if (lin_cas(*w.prev, word_of(w.curr), word_of(fresh))) break;
    }
    grow_if_loaded(count_.fetch_add(1, std::memory_order_relaxed) + 1);
    return true;
  }

  // False if the key was absent. Linearizes at the mark of the node's next word. Throws PoolFull
  // (the map unchanged) when no block is left for the anti-node.
  bool remove(Key key) {
    check_key(key);
    auto guard = domain_.pin();
    const std::uint64_t so = regular_so_key(key);
    std::atomic<std::uint64_t>& head = bucket_head(key);
    for (;;) {
      const Window w = find(head, so, key);
      if (!w.found) return false;
      if constexpr (durable) system_->pdetach(w.curr->payload);
      if (!lin_cas(w.curr->next, w.next, w.next | mark_bit)) continue;
      count_.fetch_sub(1, std::memory_order_relaxed);
      if (cas(*w.prev, word_of(w.curr), w.next))
        retire(w.curr);
      else
        find(head, so, key);  // unlinks it
      return true;
    }
  }

  bool contains(Key key) {
    check_key(key);
    auto guard = domain_.pin();
    return seek(bucket_head(key), regular_so_key(key), key) != nullptr;
  }

  std::optional<Value> get(Key key) {
    check_key(key);
    auto guard = domain_.pin();
    const Node* n = seek(bucket_head(key), regular_so_key(key), key);
    if (n == nullptr) return std::nullopt;
    return n->value;
  }

  // Everything completed before the call is durable when it returns (two epoch advances).
  void sync() requires(durable) { system_->sync(); }
  // One epoch advance: what the background thread does every epoch (Options::epoch_length).
  void background_step() requires(durable) { system_->background_step(); }

  // Quiescent: f(key, value) for every key, in split order.
  template <class F>
  void for_each(F&& f) {
    for (Node* n = node_of(slot(0).load()); n != nullptr; n = node_of(n->next.load()))
      if (is_regular(n->so_key) && !marked(n->next.load())) f(n->key, n->value);
  }

  // Quiescent: runs every pending reclamation of DRAM nodes now.
  void drain() { domain_.drain(); }

  std::size_t bucket_count() const { return size_.load(); }
  const RecoveryStats& recovery_stats() const requires(durable) { return recovery_; }
  std::uint64_t epoch() const requires(durable) { return system_->epoch(); }

 private:
  static constexpr std::uint64_t mark_bit = 1;  // bit 1 is a lin_cas descriptor's

  // A DRAM list node, a dummy (even so_key, no payload) or a key's (odd so_key): the fields a
  // traversal reads first. key and value are copies of the payload's; nothing but next changes
  // after the node is linked.
  struct Node {
    std::uint64_t so_key;
    std::atomic<std::uint64_t> next;  // Node* | mark, or a descriptor while a lin_cas runs
    Key key;
    Value value;
    Payload* payload;
  };

  static Node* node_of(std::uint64_t w) { return reinterpret_cast<Node*>(w & ~mark_bit); }
  static std::uint64_t word_of(const Node* n) { return reinterpret_cast<std::uint64_t>(n); }
  static bool marked(std::uint64_t w) { return (w & mark_bit) != 0; }

  static std::uint64_t regular_so_key(Key key) { return reverse_bits(key) | 1; }
  static std::uint64_t dummy_so_key(std::uint64_t bucket) { return reverse_bits(bucket); }
  static bool is_regular(std::uint64_t so_key) { return (so_key & 1) != 0; }
  static std::uint64_t reverse_bits(std::uint64_t x) {
    x = (x >> 1 & 0x5555555555555555) | (x & 0x5555555555555555) << 1;
    x = (x >> 2 & 0x3333333333333333) | (x & 0x3333333333333333) << 2;
    x = (x >> 4 & 0x0f0f0f0f0f0f0f0f) | (x & 0x0f0f0f0f0f0f0f0f) << 4;
    return __builtin_bswap64(x);
  }
  // The list's order: (split-order key, key); a dummy's key is 0, below every user key.
  static bool before(const Node* n, std::uint64_t so, Key key) {
    return n->so_key < so || (n->so_key == so && n->key < key);
  }

  // ---- the epoch system's word operations, or plain atomics in the twin --------------------
  std::uint64_t load(std::atomic<std::uint64_t>& word) {
    if constexpr (durable) return system_->load(word);
    return word.load(std::memory_order_acquire);
  }
  bool cas(std::atomic<std::uint64_t>& word, std::uint64_t expected, std::uint64_t desired) {
    if constexpr (durable) return system_->cas(word, expected, desired);
    return word.compare_exchange_strong(expected, desired, std::memory_order_acq_rel);
  }
  bool lin_cas(std::atomic<std::uint64_t>& word, std::uint64_t expected, std::uint64_t desired) {
    if constexpr (durable) return system_->lin_cas(word, expected, desired);
    return word.compare_exchange_strong(expected, desired, std::memory_order_acq_rel);
  }

  struct Window {
    std::atomic<std::uint64_t>* prev;  // the word that held curr
    Node* curr;                        // first unmarked node not before (so, key), or null
    std::uint64_t next;                // curr's next word when read (unmarked)
    bool found;
  };

  // Michael's find from a dummy's next word: unlinks marked nodes on the way (plain cas: no
  // payload changes). Dummies are never marked, so `head` stays valid.
  Window find(std::atomic<std::uint64_t>& head, std::uint64_t so, Key key) {
  retry:
    std::atomic<std::uint64_t>* prev = &head;
    Node* curr = node_of(load(*prev));
    for (;;) {
      if (curr == nullptr) return {prev, nullptr, 0, false};
      const std::uint64_t next = load(curr->next);
      if (load(*prev) != word_of(curr)) goto retry;
      if (!marked(next)) {
        if (!before(curr, so, key))
          return {prev, curr, next, curr->so_key == so && curr->key == key};
        prev = &curr->next;
      } else {
        if (!cas(*prev, word_of(curr), next & ~mark_bit)) goto retry;
        retire(curr);
      }
      curr = node_of(next);
    }
  }

  // The traversal of reads, writing nothing: the unmarked node with the key, else null.
  Node* seek(std::atomic<std::uint64_t>& head, std::uint64_t so, Key key) {
    Node* n = node_of(load(head));
    for (;;) {
      // Past (so, key): absent. key + 1 does not wrap, a user key is below 2^64 - 1.
      if (n == nullptr || !before(n, so, key + 1)) return nullptr;
      const std::uint64_t next = load(n->next);
      if (n->so_key == so && n->key == key && !marked(next)) return n;
      n = node_of(next);
    }
  }

  // ---- buckets -----------------------------------------------------------------------------

  static int segment_of(std::uint64_t bucket) { return std::bit_width(bucket); }
  static std::size_t segment_size(int segment) {
    return segment == 0 ? 1 : std::size_t{1} << (segment - 1);
  }
  static std::size_t offset_in_segment(std::uint64_t bucket, int segment) {
    return segment == 0 ? 0 : bucket - (std::uint64_t{1} << (segment - 1));
  }

  // Bucket b's slot: the word that holds its dummy's address once initialized (0 before).
  std::atomic<std::uint64_t>& slot(std::uint64_t bucket) {
    const int s = segment_of(bucket);
    std::atomic<std::uint64_t>* segment = segments_[s].load(std::memory_order_acquire);
    if (segment == nullptr) {
      auto* fresh = new std::atomic<std::uint64_t>[segment_size(s)]();
      if (segments_[s].compare_exchange_strong(segment, fresh, std::memory_order_acq_rel))
        segment = fresh;
      else
        delete[] fresh;  // another thread's segment won
    }
    return segment[offset_in_segment(bucket, s)];
  }

  // The next word of the dummy of key's bucket, initializing the bucket on first use.
  std::atomic<std::uint64_t>& bucket_head(Key key) {
    const std::uint64_t b = key & (size_.load(std::memory_order_acquire) - 1);
    return dummy_of(b)->next;
  }
  Node* dummy_of(std::uint64_t bucket) {
    std::atomic<std::uint64_t>& s = slot(bucket);
    std::uint64_t d = s.load(std::memory_order_acquire);
    if (d == 0) d = initialize_bucket(bucket, s);
    return node_of(d);
  }

  // Inserts bucket b's dummy into the list after its parent's (Shalev & Shavit's
  // initialize_bucket) and publishes it in b's slot. A dummy already there (another thread's)
  // is used instead. Bucket 0's dummy is made by init_buckets.
  std::uint64_t initialize_bucket(std::uint64_t bucket, std::atomic<std::uint64_t>& s) {
    const std::uint64_t parent = bucket & ~(std::uint64_t{1} << (std::bit_width(bucket) - 1));
    std::atomic<std::uint64_t>& head = dummy_of(parent)->next;
    const std::uint64_t so = dummy_so_key(bucket);
    Node* dummy = new Node{so, {0}, 0, 0, nullptr};
    for (;;) {
      const Window w = find(head, so, 0);
      if (w.found) {  // another thread's dummy
        delete dummy;
        dummy = w.curr;
        break;
      }
      dummy->next.store(word_of(w.curr), std::memory_order_relaxed);
      if (cas(*w.prev, word_of(w.curr), word_of(dummy))) break;
    }
    std::uint64_t expected = 0;
    s.compare_exchange_strong(expected, word_of(dummy), std::memory_order_acq_rel);
    return word_of(dummy);
  }

  // Doubles the bucket count when the keys per bucket passed load_factor (one doubling per
  // observation: a CAS that fails means another thread doubled it).
  void grow_if_loaded(std::size_t count) {
    std::size_t size = size_.load(std::memory_order_relaxed);
    if (count / size > load_factor && size < (std::size_t{1} << max_bucket_bits))
      size_.compare_exchange_strong(size, size * 2, std::memory_order_acq_rel);
  }

  // `size` buckets (a power of two), bucket 0's dummy the list's head.
  void init_buckets(std::size_t size) {
    size_.store(size);
    slot(0).store(word_of(new Node{dummy_so_key(0), {0}, 0, 0, nullptr}));
  }

  // ---- nodes -------------------------------------------------------------------------------

  Node* make_node(std::uint64_t so, Key key, Value value) {
    Payload* p = nullptr;
    if constexpr (durable) {
      p = system_->template pnew<Payload>();  // PoolFull: nothing changed
      p->key.store(key, std::memory_order_relaxed);
      p->value.store(value, std::memory_order_relaxed);
    }
    return new Node{so, {0}, key, value, p};
  }

  // A node never linked: nobody else saw it or its payload.
  void discard(Node* n) {
    if constexpr (durable) system_->pdelete(n->payload);
    delete n;
  }

  // A node unlinked after its remove linearized: its payload is deleted (two epochs later, by
  // the epoch system) once no pinned thread can still read the node.
  void retire(Node* n) {
    if constexpr (durable) {
      EpochSystem<Faults>* system = &*system_;
      domain_.retire(n, [system](Node* dead) noexcept {
        system->pdelete(dead->payload);
        delete dead;
      });
    } else {
      domain_.retire(n, [](Node* dead) noexcept { delete dead; });
    }
  }

  // The index from the surviving payloads: the bucket count the keys would have grown it to,
  // every bucket's dummy, and one list of all of them in split order. The entries are sorted and
  // the nodes made over Options::recovery_threads threads, then merged with the dummies, which
  // are in split order as made: the j-th has split-order key j << (64 - log2(buckets)). A key
  // found twice (impossible without a bug) keeps one payload; the others are counted and freed.
  void rebuild(typename EpochSystem<Faults>::Recovered r) requires(durable) {
    recovery_ = r.stats;
    const std::size_t threads = system_->recovery_threads();
    const std::vector<KeyValueEntry> entries =
        sorted_entries(r.payloads, threads, [](const KeyValueEntry& a, const KeyValueEntry& b) {
          const std::uint64_t sa = regular_so_key(a.key), sb = regular_so_key(b.key);
          return sa != sb ? sa < sb : a.key < b.key;
        });
    const std::size_t n = entries.size();
    std::size_t size = 1;
    while (n / size > load_factor && size < (std::size_t{1} << max_bucket_bits)) size *= 2;
    const int bits = std::countr_zero(size);
    std::vector<Node*> nodes(n, nullptr);  // nullptr: a duplicate of the entry before
    std::vector<Node*> dummies(size);
    in_parallel(threads, n, [&](std::size_t first, std::size_t last) {
      for (std::size_t i = first; i < last; ++i)
        if (i == 0 || entries[i - 1].key != entries[i].key)
          nodes[i] = new Node{regular_so_key(entries[i].key),
                              {0},
                              entries[i].key,
                              entries[i].value,
                              entries[i].payload};
    });
    in_parallel(threads, size, [&](std::size_t first, std::size_t last) {
      for (std::size_t j = first; j < last; ++j)
        dummies[j] = new Node{bits == 0 ? 0 : j << (64 - bits), {0}, 0, 0, nullptr};
    });
    // Linked in ranges of dummies, one per thread: range [j0, j1) links dummy j0 .. the last key
    // before dummy j1; each range's last node is then linked to the next range's first dummy.
    auto first_entry_after = [&](std::size_t j) {  // the first entry past dummy j's split-order key
      const std::uint64_t so = dummies[j]->so_key;
      return static_cast<std::size_t>(std::partition_point(entries.begin(), entries.end(),
                                                           [so](const KeyValueEntry& e) {
                                                             return regular_so_key(e.key) < so;
                                                           }) -
                                      entries.begin());
    };
    const std::size_t ranges = std::max<std::size_t>(1, std::min(threads, size));
    std::vector<Node*> range_last(ranges);
    in_parallel(ranges, ranges, [&](std::size_t first_range, std::size_t last_range) {
      for (std::size_t rg = first_range; rg < last_range; ++rg) {
        const std::size_t j0 = size * rg / ranges, j1 = size * (rg + 1) / ranges;
        std::size_t i = first_entry_after(j0);
        const std::size_t end = j1 == size ? n : first_entry_after(j1);
        Node* last = nullptr;
        for (std::size_t j = j0; j < j1; ++j) {
          if (last != nullptr) last->next.store(word_of(dummies[j]), std::memory_order_relaxed);
          last = dummies[j];
          const std::uint64_t next_dummy =
              j + 1 < size ? dummies[j + 1]->so_key : ~std::uint64_t{0};
          // A key's split-order key is odd, a dummy's even: they never tie.
          for (; i < end && regular_so_key(entries[i].key) < next_dummy; ++i) {
            if (nodes[i] == nullptr) continue;  // a duplicate
            last->next.store(word_of(nodes[i]), std::memory_order_relaxed);
            last = nodes[i];
          }
        }
        range_last[rg] = last;
      }
    });
    for (std::size_t rg = 0; rg + 1 < ranges; ++rg)
      range_last[rg]->next.store(word_of(dummies[size * (rg + 1) / ranges]),
                                 std::memory_order_relaxed);
    for (std::size_t j = 0; j < size; ++j)
      slot(reverse_bits(dummies[j]->so_key)).store(word_of(dummies[j]));
    std::vector<Block*> duplicates;
    for (std::size_t i = 0; i < n; ++i)
      if (nodes[i] == nullptr) duplicates.push_back(entries[i].payload);
    size_.store(size);
    count_.store(n - duplicates.size());
    system_->free_duplicates(duplicates, recovery_);
  }

  struct NoSystem {};
  using System = std::conditional_t<durable, EpochSystem<Faults>, NoSystem>;

  std::optional<System> system_;  // before domain_: its deleters call pdelete
  reclaim::EpochDomain domain_;
  std::array<std::atomic<std::atomic<std::uint64_t>*>, max_bucket_bits + 1> segments_{};
  std::atomic<std::size_t> size_{1};   // the bucket count, a power of two
  std::atomic<std::size_t> count_{0};  // keys in the map
  RecoveryStats recovery_;
};

template <FaultPolicy Faults = NoFaults>
using SplitOrderedHashMap = SplitOrderedHash<true, Faults>;    // hash-so/montage
using TransientSplitOrderedHashMap = SplitOrderedHash<false>;  // hash-so/transient

}  // namespace pmds::montage
