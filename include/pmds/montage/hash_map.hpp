// pmds::montage::HashMap — Michael's lock-free hash table on nbMontage (its paper's Appendix A,
// Figure 7): "hash/montage", buffered durable linearizability, with sync(); and
// ByteStringHashMap, "hash-bytes/montage", the same table over byte-string keys and values
// (pmds::ByteStringMap: nbMontage §5's 32-byte keys and 1 KB values). One code over the Keys
// parameter (key_value_payload.hpp says what differs: the payload, and what a node keeps).
//
// The index — a fixed array of buckets in DRAM, each a Michael (Harris-Michael) sorted list of
// DRAM nodes — is transient and rebuilt at recovery. Each node points to its payload, a pool
// block (montage::Block header + key + value) that never changes once linked (§3.2's
// constraint 3). Byte-string keys go to buckets by their hash and lie in a bucket's list in
// (64-bit hash, bytes) order. The two linearizing CASes are lin_cas (epoch_system.hpp): an
// insert's link of its node, and a remove's mark of the node's next word, after pdetach of its
// payload. The unlinking of a marked node is a plain cas: it changes no payload. Reads never flush
// or fence. With 8-byte keys a node keeps a copy of its key and value (immutable, like the payload:
// nbMontage §3.2), so reads touch DRAM only, as SOFT's volatile nodes do (Zuriel et al. §4), and
// the payload is read only by recovery; byte-string reads compare and copy from the payload.
//
// Why not algo/michael_hash.hpp over a memory policy, as the BST is (montage/policy.hpp,
// montage/natarajan_mittal_bst.hpp): the seam now carries payloads (algo/policy.hpp, "Payloads":
// a payload per node, the CASes at which an update takes effect marked for lin_cas, and hooks
// for a montage/ class that rebuilds the index from a scan), but algo/michael_hash.hpp holds
// 8-byte keys, and this file is one code over Keys, for 8-byte and byte-string keys and (Durable
// false) the byte strings' twin. Moving the 8-byte form alone would keep this file for the byte
// strings: the algorithm would still be written twice. What is left is a Keys parameter on
// algo/michael_hash.hpp (as algo/skip_list.hpp has: algo/keys.hpp) and a put there; until then
// this file is the reference that move will be checked against.
//
// put (insert or update) does not follow nbMontage Figure 7's update, which replaces the node
// with a lin_cas on its predecessor while a concurrent remove can still mark the old node with
// its own lin_cas, so that both would linearize and the remove would report a key that stays
// present. Here an update is one lin_cas on the OLD node's next word, from its successor s to
// (new node | mark), the new node's next being s: the old node is marked (removed) and the new
// one linked after it in the same instant. Every other operation that could change the old node
// (a remove's mark, an insert after it, another put) CASes that same word and fails. Traversals
// pass a marked node to its successor, so a reader that meets the marked old node goes on to the
// new one, which has the same key; the old node is unlinked as any marked node is. The new
// payload and the old payload's anti-node are tagged by that one lin_cas (nbMontage §3.2).
//
// The byte-string table's transient twin, "hash-bytes/transient", is this file with Durable
// false: montage/transient_system.hpp in place of the epoch system (payloads on the heap, plain
// CASes), so that the ratio between the two is nbMontage's cost alone.
//
// Pool layout: StructureRoot (epoch_system.hpp) with tag "HASHMONT" ("HASHMONB" for byte strings)
// and the bucket count; payload and anti-node blocks from the allocator.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "pmds/bucket_index.hpp"
#include "pmds/error.hpp"
#include "pmds/huge_pages.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/montage/epoch_system.hpp"
#include "pmds/montage/key_value_payload.hpp"
#include "pmds/montage/parallel.hpp"
#include "pmds/montage/transient_system.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/reclaim/epoch.hpp"

namespace pmds::montage {

// Keys: WordKeys or HashedByteStringKeys (key_value_payload.hpp). Durable false: the transient twin
// (TransientSystem instead of the epoch system; byte strings only, the 8-byte table's twin being
// algo/michael_hash.hpp's hash/transient). Use HashMap, ByteStringHashMap or
// TransientByteStringHashMap.

/// A hash map from 8-byte keys to 8-byte values (`HashMap`) or from byte strings to byte strings
/// (`ByteStringHashMap`), durable in epochs: Michael's lock-free hash table on nbMontage.
///
/// - **Criterion:** buffered durable linearizability: after a crash in epoch e the map holds
///   exactly the operations that linearized in epochs up to e-2, a consistent prefix of the
///   execution: a crash loses at most the last two epochs' operations, never reorders them (an
///   epoch is 10 ms by default: Options::epoch_length, advanced by a thread of the map's own
///   unless Options::background_thread is false). sync() returns once every operation completed
///   before it is durable (at most two epoch advances); the destructor (a clean close) syncs.
/// - **Cost:** contains and get never flush or fence (with 8-byte keys they read DRAM only). The
///   linearizing CAS of an update (insert, put, remove) issues no flush or fence: its blocks are
///   written back later, by its thread or by an epoch advance. A thread fences when its first
///   update in a newer epoch writes back its blocks of the previous one, when blocks it freed
///   come due for reuse, and once per 32 blocks when its write-back buffer fills.
/// - **Progress:** lock-free; sync() and an epoch advance are wait-free (the pool allocator's
///   slow paths, sharing free slots between threads and growing the pool, take a mutex:
///   pm/allocator.hpp).
/// - **Threads:** up to pmds::max_threads (128) threads at once; more throw TooManyThreads.
/// - **A full pool:** insert and put throw PoolFull when no block is left for the new payload,
///   remove and put of a present key when none is left for the anti-node that records the
///   removal; the map is then unchanged. contains and get need none.
/// - **Bad input:** `HashMap`: keys 0 and 2^64-1 throw ReservedKey in every operation; every
///   value is allowed. `ByteStringHashMap`: a key over max_key_size (1024 bytes) throws
///   pmds::Error in every operation, a value over max_value_size (7112 bytes) in insert and put;
///   any other bytes, the empty string included, are a key. Nothing changes.
/// - **A bad pool:** opening a pool that holds another structure throws PoolError
///   (layout_mismatch); a root that names no epoch system area, a bucket count outside [1, 2^40],
///   or a payload recovery would keep that is damaged (too small, a reserved key, sizes that do
///   not fit its block) throws PoolCorrupt, the payloads checked before recovery writes anything.
///
/// nbMontage (Appendix A's hash table, its update done as this header says).
/// Registered as "hash/montage" (`HashMap`: pmds::BufferedHashMap) and "hash-bytes/montage"
/// (`ByteStringHashMap`: pmds::BufferedStringHashMap); `TransientByteStringHashMap`
/// ("hash-bytes/transient") is the same table in DRAM, persisting nothing.
template <class Keys, bool Durable = true, FaultPolicy Faults = NoFaults>
class BasicHashMap {
  static_assert(Durable || Keys::byte_strings);

 public:
  static constexpr bool durable = Durable;
  static constexpr Criterion criterion = durable ? Criterion::buffered : Criterion::none;
  static constexpr EpochBound epoch_bound = durable ? EpochBound::two_epochs : EpochBound::none;
  static constexpr std::size_t default_bucket_count = std::size_t{1} << 20;
  static constexpr std::uint64_t tag = Keys::byte_strings ? 0x424e4f4d48534148   // "HASHMONB"
                                                          : 0x544e4f4d48534148;  // "HASHMONT"
  static constexpr const char* name =
      !Keys::byte_strings ? "hash/montage"
                          : (durable ? "hash-bytes/montage" : "hash-bytes/transient");

  using Payload = typename Keys::Payload;
  using KeyArg = typename Keys::KeyArg;
  using ValueArg = typename Keys::ValueArg;
  using ValueOut = typename Keys::ValueOut;
  using Probe = typename Keys::Probe;
  using Entry = typename Keys::Entry;
  static constexpr std::size_t max_key_size = Keys::max_key_size;
  static constexpr std::size_t max_value_size = Keys::max_value_size;

  // The transient twin: an empty map with `bucket_count` buckets in DRAM.
  explicit BasicHashMap(std::size_t bucket_count = default_bucket_count) requires(!durable) {
    check_bucket_count(bucket_count);
    init_buckets(bucket_count);
    system_.emplace();
  }

  // A new, empty map with `bucket_count` buckets in `pool`, which must hold no structure.
  BasicHashMap(CreateTag, pm::Pool& pool, std::size_t bucket_count = default_bucket_count,
               const Options& options = {}) requires(durable) {
    check_bucket_count(bucket_count);
    StructureRoot::check_unused(pool, name);
    init_buckets(bucket_count);
    system_.emplace(create_new, pool, options);
    StructureRoot::write(pool, tag, bucket_count, system_->area());
  }

  // Opens the map a pool holds: the index is rebuilt from the payloads recovery keeps (§3.4).
  BasicHashMap(OpenTag, pm::Pool& pool, const Options& options = {}) requires(durable) {
    const auto [n, area] = StructureRoot::read(pool, tag, name);
    if (n == 0 || n > (std::uint64_t{1} << 40))
      throw PoolCorrupt(std::string("pmds: pool '") + pool.path() + "': " + name +
                        " with bucket count " + std::to_string(n));
    init_buckets(static_cast<std::size_t>(n));
    system_.emplace(open_existing, pool, area, options);
    rebuild(system_->recover(&Keys::damaged));
  }

  BasicHashMap(const BasicHashMap&) = delete;
  BasicHashMap& operator=(const BasicHashMap&) = delete;

  // A clean close: everything completed is made durable (sync), then the DRAM index is freed.
  ~BasicHashMap() {
    if constexpr (durable && Faults::planted != Fault::close_without_sync) sync();
    domain_.drain();
    for (std::size_t i = 0; i < bucket_count_; ++i) {
      Node* n = node_of(buckets_[i].load(std::memory_order_relaxed));
      while (n != nullptr) {
        Node* next = node_of(n->next.load(std::memory_order_relaxed));
        if constexpr (!durable) system_->pdelete(n->payload);  // the twin's are on the heap
        delete n;
        n = next;
      }
    }
  }

  // False if the key was present. Throws PoolFull (the map unchanged) when no block is left.
  bool insert(KeyArg k, ValueArg v) {
    const Probe key = Keys::probe(k);
    Keys::check_value(v);
    auto guard = domain_.pin();
    std::atomic<std::uint64_t>& head = bucket(key);
    Node* fresh = nullptr;  // made at the first attempt that needs it, reused by retries
    for (;;) {
      const Window w = find(head, key);
      if (w.found) {
        if (fresh != nullptr) discard(fresh);
        return false;
      }
      if (fresh == nullptr) fresh = make_node(key, k, v);
      fresh->next.store(word_of(w.curr), std::memory_order_relaxed);
      if (system_->lin_cas(*w.prev, word_of(w.curr), word_of(fresh))) return true;
    }
  }

  // Insert or update: true if the key was absent. An update replaces the key's node (see the
  // header). Throws PoolFull (the map unchanged) when no block is left.
  bool put(KeyArg k, ValueArg v) {
    const Probe key = Keys::probe(k);
    Keys::check_value(v);
    auto guard = domain_.pin();
    std::atomic<std::uint64_t>& head = bucket(key);
    Node* fresh = nullptr;  // made at the first attempt, reused by retries
    for (;;) {
      const Window w = find(head, key);
      if (fresh == nullptr) fresh = make_node(key, k, v);
      if (!w.found) {
        fresh->next.store(word_of(w.curr), std::memory_order_relaxed);
        if (system_->lin_cas(*w.prev, word_of(w.curr), word_of(fresh))) return true;
        continue;
      }
      fresh->next.store(w.next, std::memory_order_relaxed);
      Block* anti = nullptr;
      try {
        if (!detach(w.curr, anti)) continue;  // PoolFull: nothing changed
      } catch (...) {
        discard(fresh);  // its payload must not stay pending for the thread's next lin_cas
        throw;
      }
      if (!system_->lin_cas(w.curr->next, w.next, word_of(fresh) | mark_bit)) continue;
      removal_committed(w.curr, anti);
      if (system_->cas(*w.prev, word_of(w.curr), word_of(fresh)))
        retire(w.curr);
      else
        find(head, key);  // unlinks it
      return false;
    }
  }

  // False if the key was absent. Linearizes at the mark of the node's next word.
  bool remove(KeyArg k) {
    const Probe key = Keys::probe(k);
    auto guard = domain_.pin();
    std::atomic<std::uint64_t>& head = bucket(key);
    for (;;) {
      const Window w = find(head, key);
      if (!w.found) return false;
      Block* anti = nullptr;
      if (!detach(w.curr, anti)) continue;
      if (!system_->lin_cas(w.curr->next, w.next, w.next | mark_bit)) continue;
      removal_committed(w.curr, anti);
      if (system_->cas(*w.prev, word_of(w.curr), w.next))
        retire(w.curr);
      else
        find(head, key);  // unlinks it
      return true;
    }
  }

  bool contains(KeyArg k) {
    const Probe key = Keys::probe(k);
    auto guard = domain_.pin();
    return seek(bucket(key), key) != nullptr;
  }

  std::optional<ValueOut> get(KeyArg k) {
    const Probe key = Keys::probe(k);
    auto guard = domain_.pin();
    const Node* n = seek(bucket(key), key);
    if (n == nullptr) return std::nullopt;
    return Keys::value(n->cached, n->payload);
  }

  // Everything completed before the call is durable when it returns (two epoch advances).
  void sync() requires(durable) { system_->sync(); }
  // One epoch advance: what the background thread does every epoch (Options::epoch_length).
  void background_step() requires(durable) { system_->background_step(); }

  // Quiescent: f(key, value) for every key, bucket by bucket, each in key order.
  template <class F>
  void for_each(F&& f) {
    for (std::size_t i = 0; i < bucket_count_; ++i)
      for (Node* n = node_of(buckets_[i].load()); n != nullptr; n = node_of(n->next.load()))
        if (!marked(n->next.load())) Keys::visit(n->order, n->cached, n->payload, f);
  }

  // Quiescent: runs every pending reclamation of DRAM nodes now.
  void drain() { domain_.drain(); }

  const RecoveryStats& recovery_stats() const requires(durable) { return recovery_; }
  std::size_t bucket_count() const { return bucket_count_; }
  std::uint64_t epoch() const requires(durable) { return system_->epoch(); }

 private:
  static constexpr std::uint64_t mark_bit = 1;

  // For 8-byte keys only, a node keeps its payload's uid and then, once its removal committed,
  // that remove's anti-node (anti_tag | the pointer), so that a remove touches no line of the
  // payload: their nodes hold copies of key and value, and the payload's line, written back at
  // its epoch's end, is cold (clwb evicts it on some hosts). pdetach_by_uid names the payload by
  // the uid; pdelete takes the anti-node from the node, not from a link in the payload. Measured
  // at 2:1:1 over 1M keys (pmds bench hash/montage, alternating rounds of the two builds): the
  // uid copy 1.06x (6 rounds); the anti-node here rather than stored in the payload at the
  // commit, 1.11x at 1 thread and 1.13x at 2 (12 rounds). One word serves both, so a node is
  // no larger than with the uid alone: a removal commits only by a lin_cas that marks the node's
  // next word, and marks are never undone, so once the anti-node is in the word every lin_cas
  // that would detach the node again must fail; detach sees the tag and retries instead.
  // Byte-string keys are compared in the payload, whose line a remove has read already.
  struct NoUid {};
  using UidOrAnti = std::conditional_t<Keys::byte_strings, NoUid, std::atomic<std::uint64_t>>;
  static constexpr std::uint64_t anti_tag = std::uint64_t{1} << 63;
  static_assert(pmds::max_threads <= (std::uint64_t{1} << 15),
                "uids ((tid << 48) | n) keep bit 63 clear");

  // A DRAM index node: the key's order word and Keys::Cached (for 8-byte keys, copies of the
  // payload's key and value; key_value_payload.hpp), the next word (Node* | mark, or a
  // descriptor while a lin_cas on it runs), the payload and, for 8-byte keys, its uid and then
  // its anti-node (above). Order and next first: a traversal of 8-byte keys reads only those
  // two, in one 16-byte block.
  struct Node {
    std::uint64_t order;
    std::atomic<std::uint64_t> next;
    [[no_unique_address]] typename Keys::Cached cached;
    Payload* payload;
    [[no_unique_address]] UidOrAnti uid_or_anti;
  };

  static auto uid_of(const Payload* p) {
    if constexpr (Keys::byte_strings)
      return NoUid{};
    else
      return EpochSystem<Faults>::uid_of(p);
  }
  // The thread's next lin_cas removes n's payload; false, with nothing done, if n's removal has
  // committed already (that lin_cas would fail: the caller retries). For 8-byte keys `anti` is
  // set to the anti-node, for removal_committed.
  bool detach(const Node* n, Block*& anti) {
    if constexpr (Keys::byte_strings) {
      system_->pdetach(n->payload);
    } else {
      const std::uint64_t uid = n->uid_or_anti.load(std::memory_order_relaxed);
      if ((uid & anti_tag) != 0) return false;
      anti = system_->pdetach_by_uid(uid);
    }
    return true;
  }
  // The caller's lin_cas removed n. Relaxed: pdelete reads the word after the reclamation's
  // grace period, which orders it.
  void removal_committed(Node* n, Block* anti) {
    if constexpr (!Keys::byte_strings)
      n->uid_or_anti.store(anti_tag | reinterpret_cast<std::uint64_t>(anti),
                           std::memory_order_relaxed);
  }
  // The anti-node removal_committed left in a retired 8-byte-key node.
  static Block* committed_anti(const Node* n) {
    return reinterpret_cast<Block*>(n->uid_or_anti.load(std::memory_order_relaxed) & ~anti_tag);
  }

  static Node* node_of(std::uint64_t w) { return reinterpret_cast<Node*>(w & ~mark_bit); }
  static std::uint64_t word_of(const Node* n) { return reinterpret_cast<std::uint64_t>(n); }
  static bool marked(std::uint64_t w) { return (w & mark_bit) != 0; }

  struct Window {
    std::atomic<std::uint64_t>* prev;  // the word that held curr
    Node* curr;                        // first unmarked node with key >= the key, or null
    std::uint64_t next;                // curr's next word when read (unmarked)
    bool found;
  };

  // Michael's find: unlinks marked nodes on the way (plain cas: no payload changes).
  Window find(std::atomic<std::uint64_t>& head, const Probe& key) {
  retry:
    std::atomic<std::uint64_t>* prev = &head;
    Node* curr = node_of(system_->load(*prev));
    for (;;) {
      if (curr == nullptr) return {prev, nullptr, 0, false};
      const std::uint64_t next = system_->load(curr->next);
      if (system_->load(*prev) != word_of(curr)) goto retry;
      if (!marked(next)) {
        const int c = compare<Keys>(curr->order, curr->cached, curr->payload, key);
        if (c >= 0) return {prev, curr, next, c == 0};
        prev = &curr->next;
      } else {
        if (!system_->cas(*prev, word_of(curr), next & ~mark_bit)) goto retry;
        retire(curr);
      }
      curr = node_of(next);
    }
  }

  // The wait-free traversal of reads: the unmarked node with the key, else null. A marked node
  // with the key is passed: a put may have linked its replacement right after it.
  Node* seek(std::atomic<std::uint64_t>& head, const Probe& key) {
    Node* n = node_of(system_->load(head));
    for (;;) {
      if (n == nullptr) return nullptr;
      const int c = compare<Keys>(n->order, n->cached, n->payload, key);
      if (c > 0) return nullptr;
      const std::uint64_t next = system_->load(n->next);
      if (c == 0 && !marked(next)) return n;
      n = node_of(next);
    }
  }

  Node* make_node(const Probe& key, KeyArg k, ValueArg v) {
    Payload* p = Keys::make_payload(*system_, k, v);  // PoolFull: nothing changed
    return new Node{key.order, {0}, Keys::cached(key, v), p, uid_of(p)};
  }

  // A node never linked: nobody else saw it or its payload.
  void discard(Node* n) {
    system_->pdelete(n->payload);
    delete n;
  }

  // A node unlinked after its remove linearized: its payload is deleted (two epochs later, by
  // the epoch system) once no pinned thread can still read the node.
  void retire(Node* n) {
    System* system = &*system_;
    domain_.retire(n, [system](Node* dead) noexcept {
      if constexpr (Keys::byte_strings)
        system->pdelete(dead->payload);
      else
        system->pdelete(dead->payload, committed_anti(dead));
      delete dead;
    });
  }

  static void check_bucket_count(std::size_t n) {
    if (n == 0 || n > (std::size_t{1} << 40))
      throw PoolError(PoolErrc::bad_argument, std::string("pmds: ") + name + ": bucket count " +
                                                  std::to_string(n) + " is not in [1, 2^40]");
  }
  void init_buckets(std::size_t n) {
    bucket_count_ = n;
    index_ = BucketIndex(n);
    buckets_ = make_chunk_array<std::atomic<std::uint64_t>>(n);
  }
  std::atomic<std::uint64_t>& bucket(const Probe& key) { return buckets_[index_(Keys::hash(key))]; }

  // The index from the surviving payloads: each bucket's nodes in key order. The entries are
  // sorted by (bucket, key), the nodes made and linked over Options::recovery_threads threads
  // (each node's next is the next entry of its bucket, each bucket's head its first entry, so
  // no two threads write one word). A key found twice (impossible without a bug) keeps one
  // payload; the others are counted and freed.
  void rebuild(typename EpochSystem<Faults>::Recovered r) requires(durable) {
    recovery_ = r.stats;
    const std::size_t threads = system_->recovery_threads();
    const BucketIndex index = index_;
    const auto bucket_of = [index](const Entry& e) { return index(Keys::hash(e)); };
    const std::vector<Entry> entries =
        sorted_entries<Keys>(r.payloads, threads, [bucket_of](const Entry& a, const Entry& b) {
          const std::size_t ia = bucket_of(a), ib = bucket_of(b);
          return ia != ib ? ia < ib : Keys::less(a, b);
        });
    const std::size_t n = entries.size();
    std::vector<Node*> nodes(n, nullptr);  // nullptr: a duplicate of the entry before
    in_parallel(threads, n, [&](std::size_t first, std::size_t last) {
      for (std::size_t i = first; i < last; ++i) {
        const Entry& e = entries[i];
        if (i == 0 || !Keys::same_key(entries[i - 1], e))
          nodes[i] = new Node{Keys::order(e), {0}, Keys::cached(e), e.payload, uid_of(e.payload)};
      }
    });
    in_parallel(threads, n, [&](std::size_t first, std::size_t last) {
      for (std::size_t i = first; i < last; ++i) {
        if (nodes[i] == nullptr) continue;
        const std::size_t b = bucket_of(entries[i]);
        std::size_t j = i + 1;
        while (j < n && nodes[j] == nullptr) ++j;
        if (j < n && bucket_of(entries[j]) == b)
          nodes[i]->next.store(word_of(nodes[j]), std::memory_order_relaxed);
        if (i == 0 || bucket_of(entries[i - 1]) != b)
          buckets_[b].store(word_of(nodes[i]), std::memory_order_relaxed);
      }
    });
    std::vector<Block*> duplicates;
    for (std::size_t i = 0; i < n; ++i)
      if (nodes[i] == nullptr) duplicates.push_back(entries[i].payload);
    system_->free_duplicates(duplicates, recovery_);
  }

  using System = std::conditional_t<durable, EpochSystem<Faults>, TransientSystem>;
  std::optional<System> system_;  // before domain_: its deleters call pdelete
  reclaim::EpochDomain domain_;
  std::size_t bucket_count_ = 0;
  BucketIndex index_;
  ChunkArray<std::atomic<std::uint64_t>> buckets_;  // on huge pages (huge_pages.hpp)
  RecoveryStats recovery_;
};

// "hash/montage": 8-byte keys and values (pmds::UpdatableMap).
template <FaultPolicy Faults = NoFaults>
using HashMap = BasicHashMap<WordKeys, true, Faults>;

// "hash-bytes/montage": byte-string keys and values (pmds::ByteStringMap), each key in a
// ByteStringPayload of the size its bytes need.
template <FaultPolicy Faults = NoFaults>
using ByteStringHashMap = BasicHashMap<HashedByteStringKeys, true, Faults>;

// "hash-bytes/transient": its twin in DRAM, the payloads on the heap.
using TransientByteStringHashMap = BasicHashMap<HashedByteStringKeys, false>;

}  // namespace pmds::montage
