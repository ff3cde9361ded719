// pmds::linkfree_soft::SoftStringHashMap — "hash-bytes/soft": a durable-linearizable hash map
// from byte strings to byte strings, on SOFT's technique (seed 000 §4: persistent nodes apart
// from the volatile ones, no link persisted, one psync per insert and per remove).
//
// What SOFT gives an 8-byte set (soft_list.hpp) carries over, with three additions a string map
// needs; each is argued where it is made:
//   1. A persistent node spans several cache lines (key and value bytes), so the same-line order
//      argument of seed 000 §4.1 no longer covers it. Its header line holds the validity flags,
//      the sizes, a version and a checksum (XXH3) of the bytes; recovery keeps a node only when
//      the flags say live AND the checksum matches, so a crash that wrote the header back but not
//      every line of the bytes leaves the node not live. That keeps create at one fence: the
//      bytes and the header are written back together before it.
//   2. put replaces a present key's value, atomically across a crash, in one fence. The new
//      persistent node (version v+1) is made durable while the replaced one (v) stays live:
//      recovery keeps the higher live version (and deletes the other durably, so no later crash
//      can bring it back). v's durable deletion is left to the key's next write: a replacement
//      writes it back within its own fence (v+1 is then live whichever of the two a crash keeps),
//      a remove makes it durable before deleting v+1 (one more fence: deleting both within one
//      fence, a crash could keep v+1's deletion alone and bring v back). So insert, replace and
//      remove each cost one fence, and a remove of a key replaced since its insert two.
//   3. The volatile node's `current` word names its persistent node and serialises the writers
//      of a present key: stable (one node, or a Version record: the node and the replaced one
//      still live), replacing (a Version record in flight, completed by whoever sees it), frozen
//      (a remove won; no put may replace it any more).
//      Every writer first helps a replacement it finds to completion, so a key is replaced by one
//      writer at a time and the helping keeps every operation lock-free.
//
// Reads (get, contains) never write or fence and read the value from the pool. The linearization
// points: insert at the CAS to "inserted" (after its node is durable), remove at the CAS to
// "deleted" (after the deletion is durable), a replacement at the CAS of `current` to stable
// (after its fence); a crash before that CAS may keep the old or the new value, and no completed
// operation has seen the new one.
//
// The bucket array is in DRAM and fixed at creation (the bucket count is in the pool's root
// table); a bucket is a SOFT list ordered by (hash, key). Memory: a persistent node is a pool
// block of ChunkAllocator::block_size(32 + key + value) bytes; per key in DRAM, one 32-byte
// volatile node (malloc's block for 24 bytes) and a bucket word.
#pragma once

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL  // header-only: nothing to link
#endif
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pmds/bucket_index.hpp"
#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/linkfree_soft/detail/set_root.hpp"
#include "pmds/linkfree_soft/detail/soft_pnode.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/allocator.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/reclaim/epoch.hpp"
#include "pmds/thread_registry.hpp"

namespace pmds::linkfree_soft {

namespace detail {

// The persistent node of one version of a key: a 32-byte header, then the key's bytes, then the
// value's. A pool block (ChunkAllocator::block_size) is a whole number of lines from a
// line-aligned start, so the header is within the block's first line: its stores reach the
// NVRAM in program order (docs/ARCHITECTURE.md §3), the body's other lines in any order.
struct SoftStringPNode {
  pm::atomic<std::uint8_t> valid_start;
  pm::atomic<std::uint8_t> valid_end;
  pm::atomic<std::uint8_t> deleted;
  pm::atomic<std::uint8_t> unused;
  pm::atomic<std::uint32_t> key_size;
  pm::atomic<std::uint32_t> value_size;
  pm::atomic<std::uint32_t> unused2;
  pm::atomic<std::uint64_t> version;   // 0 at insert, +1 at each replacement
  pm::atomic<std::uint64_t> checksum;  // body_checksum(key hash, version, value)

  unsigned char* bytes() { return reinterpret_cast<unsigned char*>(this + 1); }
  const unsigned char* bytes() const { return reinterpret_cast<const unsigned char*>(this + 1); }
  std::size_t body_size() const { return std::size_t{key_size.load()} + value_size.load(); }

  // The key's bytes are covered through its hash; sizes and version share the header's line
  // with valid_end, so they are durable whenever valid_end is.
  static std::uint64_t body_checksum(std::uint64_t key_hash, std::uint64_t version,
                                     std::string_view value) {
    return XXH3_64bits_withSeed(value.data(), value.size(),
                                key_hash ^ (version * 0x9e3779b97f4a7c15));
  }

  // SoftPNode::prepare's rule (soft_pnode.hpp): pValidity = !deleted, and a live-looking slot is
  // made invalid first. Then the header and the bytes, no flush: the node is not live until
  // commit() (valid_end = pValidity), so a crash image with any of these stores is harmless,
  // and a node that is never published is freed as it is.
  bool prepare_and_write(std::string_view k, std::string_view v, std::uint64_t key_hash,
                         std::uint64_t ver) {
    const std::uint8_t d = deleted.load(std::memory_order_relaxed);
    const std::uint8_t validity = d ^ 1;
    if (valid_end.load(std::memory_order_relaxed) == validity)
      valid_end.store(d, std::memory_order_release);
    key_size.store(static_cast<std::uint32_t>(k.size()), std::memory_order_relaxed);
    value_size.store(static_cast<std::uint32_t>(v.size()), std::memory_order_relaxed);
    version.store(ver, std::memory_order_relaxed);
    checksum.store(body_checksum(key_hash, ver, v), std::memory_order_relaxed);
    if (!k.empty()) pm::write(bytes(), k.data(), k.size());
    if (!v.empty()) pm::write(bytes() + k.size(), v.data(), v.size());
    return validity != 0;
  }

  // Makes the node live: validStart, validEnd, then every line written back; durable at the
  // caller's next fence. Idempotent: helpers run it concurrently (§4.4).
  void make_live(bool validity, pm::Site site = pm::Site::current()) {
    const auto p = static_cast<std::uint8_t>(validity);
    valid_start.store(p, std::memory_order_release);
    valid_end.store(p, std::memory_order_release);
    pm::flush_range(this, sizeof *this + body_size(), site);
  }
  // Listing 7's destroy without its fence: the deleted flag (header line only), written back.
  void mark_deleted(bool validity, pm::Site site = pm::Site::current()) {
    deleted.store(static_cast<std::uint8_t>(validity), std::memory_order_release);
    pm::flush(this, site);
  }
  // The one fence of an insert.
  void commit(bool validity, pm::Site site = pm::Site::current()) {
    make_live(validity, site);
    pm::fence(site);
  }
  // The one fence of a remove.
  void destroy(bool validity, pm::Site site = pm::Site::current()) {
    mark_deleted(validity, site);
    pm::fence(site);
  }
};
static_assert(sizeof(SoftStringPNode) == 32);

}  // namespace detail

/// A hash map from byte strings to byte strings, durable when each operation returns.
///
/// - **Criterion:** durable linearizability: after a crash, every operation that returned is in
///   the recovered map, and an operation in flight is either wholly there or absent.
/// - **Cost:** one fence per insert, replacement and remove (two for a remove of a key replaced
///   since its insert); reads never write.
/// - **Progress:** lock-free (writers of one key help each other's replacement to completion).
/// - **Threads:** up to pmds::max_threads (128) threads at once; more throw TooManyThreads.
/// - **A full pool:** an insert, put or update that needs a block throws PoolFull and changes
///   nothing (remove needs none and always works).
/// - **Bad input:** a key over max_key_size or a value over max_value_size throws pmds::Error and
///   changes nothing; any other bytes, the empty string included, are a key.
/// - **A bad pool:** opening a pool that holds another structure, or a damaged root, throws
///   PoolError.
///
/// Seed 000 §4 (SOFT), extended to multi-line nodes, replacement and read-modify-write:
/// docs/ARCHITECTURE.md §9. Registered as "hash-bytes/soft"; pmds::DurableStringHashMap.
class SoftStringHashMap {
 public:
  static constexpr Criterion criterion = Criterion::durable;
  static constexpr const char* name = "hash-bytes/soft";
  static constexpr std::uint64_t tag = detail::make_tag("HBYTSOF1");
  static constexpr std::size_t default_bucket_count = std::size_t{1} << 20;
  /// A persistent node is one pool block of at most 8 KiB (pm::ChunkAllocator::block_size says
  /// why).
  static constexpr std::size_t max_block_size = 8192;
  static constexpr std::size_t max_key_size = 1024;
  static constexpr std::size_t max_value_size =
      max_block_size - sizeof(detail::SoftStringPNode) - max_key_size;  // 7136

  /// A new, empty map with `bucket_count` buckets (fixed) in `pool`, which must hold no structure.
  SoftStringHashMap(CreateTag, pm::Pool& pool, std::size_t bucket_count = default_bucket_count)
      : pool_(pool), allocator_(pool.allocator()) {
    check_bucket_count(bucket_count, PoolErrc::bad_argument);
    init_buckets(bucket_count);
    detail::write_set_root(pool, tag, bucket_count, name);
  }

  /// Opens the map a pool holds and recovers it: after a crash or a clean close alike, the
  /// buckets are rebuilt from the live persistent nodes (seed 000 §4.6).
  SoftStringHashMap(OpenTag, pm::Pool& pool) : pool_(pool), allocator_(pool.allocator()) {
    const std::uint64_t n = detail::read_set_root(pool, tag, name);
    check_bucket_count(n, PoolErrc::corrupted);
    init_buckets(static_cast<std::size_t>(n));
    recover();
  }

  SoftStringHashMap(const SoftStringHashMap&) = delete;
  SoftStringHashMap& operator=(const SoftStringHashMap&) = delete;

  /// Frees the volatile nodes (quiescent); the persistent ones hold the map for the next open.
  ~SoftStringHashMap() {
    domain_.drain();
    for (std::size_t i = 0; i < bucket_count_; ++i) {
      Node* n = node_of(buckets_[i].load(std::memory_order_relaxed));
      while (n != &tail_) {
        Node* next = node_of(n->next.load(std::memory_order_relaxed));
        if (const std::uintptr_t c = n->current.load(std::memory_order_relaxed); is_version(c))
          delete version_of(c);
        delete n;
        n = next;
      }
    }
  }

  /// Adds the key if it is absent; false (nothing written) if present. Durable on return.
  bool insert(std::string_view k, std::string_view v) {
    const Probe q = probe(k, v);
    auto guard = domain_.pin();
    for (;;) {
      const Window w = find(q);
      if (w.found) {
        if (w.curr_state == detail::intend_to_insert) complete_insert(w.curr);
        return false;
      }
      if (try_link(w, q, k, v)) return true;
    }
  }

  /// Inserts or replaces; true if the key was absent. Durable on return (one fence).
  bool put(std::string_view k, std::string_view v) {
    const Probe q = probe(k, v);
    auto guard = domain_.pin();
    for (;;) {
      const Window w = find(q);
      if (!w.found) {
        if (try_link(w, q, k, v)) return true;
        continue;
      }
      if (w.curr_state == detail::intend_to_insert) complete_insert(w.curr);
      const std::uintptr_t c = settled(w.curr);
      if (!is_frozen(c) && try_replace(w.curr, c, q, k, v)) return false;
      // A remove won the key (or changed it under us): help it, then look again.
      if (is_frozen(settled(w.curr))) help_remove(w.curr);
    }
  }

  /// An atomic read-modify-write of one key: `fn(std::optional<std::string_view> current)` returns
  /// `std::optional<std::string>`, the value to store, or nullopt to leave the map as it is. fn may
  /// run more than once (when another thread changed the key in between: compare-and-put) and
  /// must have no other effect. Returns whether a value was stored (durable on return).
  template <class F>
  bool update(std::string_view k, F&& fn) {
    const Probe q = probe(k);
    auto guard = domain_.pin();
    for (;;) {
      const Window w = find(q);
      if (!w.found) {
        const std::optional<std::string> v = fn(std::optional<std::string_view>{});
        if (!v) return false;
        check_value(*v);
        if (try_link(w, q, k, *v)) return true;
        continue;
      }
      if (w.curr_state == detail::intend_to_insert) complete_insert(w.curr);
      const std::uintptr_t c = settled(w.curr);
      if (is_frozen(c)) {
        help_remove(w.curr);
        continue;
      }
      std::string old;
      read_value(pnode_word_of(c), old);
      const std::optional<std::string> v = fn(std::optional<std::string_view>(old));
      if (!v) return false;
      check_value(*v);
      if (try_replace(w.curr, c, q, k, *v)) return true;
    }
  }

  /// False if the key was absent. Durable on return (one fence; two for a key replaced since its
  /// insert: the replaced version is deleted first).
  bool remove(std::string_view k) {
    const Probe q = probe(k);
    auto guard = domain_.pin();
    const Window w = find(q);
    // Absent, or "intention to insert": not in the map (its node may not be durable), fail.
    if (!w.found || w.curr_state == detail::intend_to_insert) return false;
    Node* n = w.curr;
    bool won = false;
    for (;;) {
      const std::uintptr_t c = settled(n);
      if (is_frozen(c)) break;  // another remove won
      std::uintptr_t expected = c;
      if (n->current.compare_exchange_weak(expected, c | frozen_tag, std::memory_order_acq_rel,
                                           std::memory_order_acquire)) {
        won = true;
        break;
      }
    }
    help_remove(n);
    if (won) {
      // Only the winner trims, once (Listing 12 line 20); finds unlink it otherwise.
      std::uintptr_t expected = w.prev_word;
      const std::uintptr_t succ = n->next.load(std::memory_order_acquire);
      if (w.prev->compare_exchange_strong(
              expected, detail::make_word(node_of(succ), detail::state_of(w.prev_word)),
              std::memory_order_acq_rel, std::memory_order_relaxed))
        retire(n);
      count_delta(-1);
    }
    return won;
  }

  bool contains(std::string_view k) {
    const Probe q = probe(k);
    auto guard = domain_.pin();
    const Node* n = seek(q);
    return n != nullptr && in_set(n);
  }

  std::optional<std::string> get(std::string_view k) {
    std::string out;
    if (!get(k, out)) return std::nullopt;
    return out;
  }
  /// The value into `out` (its capacity reused); false, `out` unchanged, if the key is absent.
  bool get(std::string_view k, std::string& out) {
    const Probe q = probe(k);
    auto guard = domain_.pin();
    const Node* n = seek(q);
    if (n == nullptr || !in_set(n)) return false;
    read_value(pnode_word_of(n->current.load(std::memory_order_acquire)), out);
    return true;
  }

  /// The number of keys: exact when no thread writes, otherwise approximate (a sum of per-thread
  /// counts read one after the other).
  std::size_t size() const {
    std::int64_t n = 0;
    for (std::size_t t = 0; t < pmds::max_threads; ++t)
      n += counts_[t].value.load(std::memory_order_relaxed);
    return n < 0 ? 0 : static_cast<std::size_t>(n);
  }

  /// Quiescent: f(key, value) for every key, bucket by bucket.
  template <class F>
  void for_each(F&& f) {
    std::string key, value;
    for (std::size_t i = 0; i < bucket_count_; ++i) {
      for (const Node* n = node_of(buckets_[i].load(std::memory_order_acquire)); n != &tail_;
           n = node_of(n->next.load(std::memory_order_acquire))) {
        if (!in_set(n)) continue;
        const std::uintptr_t p = pnode_word_of(n->current.load(std::memory_order_acquire));
        read_key(pnode_of(p), key);
        read_value(p, value);
        f(std::string_view(key), std::string_view(value));
      }
    }
  }

  /// Quiescent: runs every pending reclamation now.
  void drain() { domain_.drain(); }

  std::size_t bucket_count() const { return bucket_count_; }
  const RecoveryStats& recovery_stats() const { return recovery_; }
  pm::Pool& pool() const { return pool_; }

 private:
  using PNode = detail::SoftStringPNode;

  // The volatile node: the key's hash (a bucket's order is (hash, key); keys are compared in the
  // persistent node only when hashes are equal), the next word (successor | SoftState) and the
  // current word (below). 24 bytes: malloc's 32-byte block.
  struct Node {
    std::uint64_t hash;
    std::atomic<std::uintptr_t> next;
    std::atomic<std::uintptr_t> current;
  };

  // `current`: a persistent node word (PNode* | pValidity in bit 0; blocks are line-aligned) for
  // a key never replaced since it was inserted or recovered, else a Version* | version_tag;
  // either with frozen_tag once a remove has won, a Version* also with replacing_tag while the
  // replacement it records is in flight.
  static constexpr std::uintptr_t frozen_tag = 2;
  static constexpr std::uintptr_t replacing_tag = 4;
  static constexpr std::uintptr_t version_tag = 8;
  static constexpr std::uintptr_t tag_bits = 15;
  // One replacement of a key's value (immutable once published). While it is in flight, `fresh`
  // is written but may not be durable, and readers read `old`. Once it completed, `fresh` is the
  // key's node and `old` is still live in the pool: its durable deletion is left to the key's
  // next write, which does it within its own fence (a replacement) or before its own (a remove),
  // so that a replacement costs one fence. Recovery keeps the higher version of two live ones.
  struct alignas(16) Version {
    std::uintptr_t fresh;  // the new version's node word
    std::uintptr_t old;    // the node word it replaces
    Version* previous;     // the record this one replaces (null when `old` was a plain word); its
                           // `old` is deleted durably by this replacement and freed after it
  };

  struct Probe {
    std::uint64_t hash;
    std::string_view key;
  };
  struct Window {
    std::atomic<std::uintptr_t>* prev;
    std::uintptr_t prev_word;
    Node* curr;
    detail::SoftState curr_state;
    bool found;  // curr holds the key
  };
  struct alignas(64) Counter {
    std::atomic<std::int64_t> value{0};
  };

  static PNode* pnode_of(std::uintptr_t word) {
    return reinterpret_cast<PNode*>(word & ~std::uintptr_t{63});
  }
  static bool validity_of(std::uintptr_t word) { return (word & 1) != 0; }
  static bool is_frozen(std::uintptr_t c) { return (c & frozen_tag) != 0; }
  static bool is_replacing(std::uintptr_t c) { return (c & replacing_tag) != 0; }
  static bool is_version(std::uintptr_t c) { return (c & version_tag) != 0; }
  static Version* version_of(std::uintptr_t c) { return reinterpret_cast<Version*>(c & ~tag_bits); }
  // The node word whose value a reader returns: during a replacement, the old one (the new one
  // may not be durable yet).
  static std::uintptr_t pnode_word_of(std::uintptr_t c) {
    if (!is_version(c)) return c & ~frozen_tag;
    const Version* v = version_of(c);
    return is_replacing(c) ? v->old : v->fresh;
  }
  // A settled word's replaced version that is still live in the pool, or 0.
  static std::uintptr_t pending_of(std::uintptr_t c) {
    return is_version(c) ? version_of(c)->old : 0;
  }
  static Node* node_of(std::uintptr_t word) { return detail::node_of<Node>(word); }

  static std::uint64_t hash_of(std::string_view k) { return XXH3_64bits(k.data(), k.size()); }
  static void check_key(std::string_view k) {
    if (k.size() > max_key_size)
      throw Error(std::string("pmds: ") + name + " takes keys of at most " +
                  std::to_string(max_key_size) + " bytes; this one has " +
                  std::to_string(k.size()));
  }
  static void check_value(std::string_view v) {
    if (v.size() > max_value_size)
      throw Error(std::string("pmds: ") + name + " takes values of at most " +
                  std::to_string(max_value_size) + " bytes; this one has " +
                  std::to_string(v.size()));
  }
  // The key checked and hashed (and the value checked, for a write).
  static Probe probe(std::string_view k) {
    check_key(k);
    return {hash_of(k), k};
  }
  static Probe probe(std::string_view k, std::string_view v) {
    const Probe q = probe(k);
    check_value(v);
    return q;
  }
  static void check_bucket_count(std::uint64_t n, PoolErrc errc) {
    if (n == 0 || n > (std::uint64_t{1} << 40))
      throw PoolError(errc, std::string("pmds: ") + name + ": bucket count " + std::to_string(n) +
                                " is not in [1, 2^40]");
  }
  void init_buckets(std::size_t n) {
    bucket_count_ = n;
    index_ = BucketIndex(n);
    buckets_ = std::make_unique<std::atomic<std::uintptr_t>[]>(n);
    for (std::size_t i = 0; i < n; ++i)
      buckets_[i].store(detail::make_word(&tail_, detail::inserted), std::memory_order_relaxed);
  }
  std::atomic<std::uintptr_t>& bucket(std::uint64_t h) { return buckets_[index_(h)]; }
  void count_delta(std::int64_t d) {
    counts_[pmds::thread_id()].value.fetch_add(d, std::memory_order_relaxed);
  }

  static void read_key(const PNode* p, std::string& out) {
    out.resize(p->key_size.load(std::memory_order_relaxed));
    pm::read(out.data(), p->bytes(), out.size());
  }
  static void read_value(std::uintptr_t word, std::string& out) {
    const PNode* p = pnode_of(word);
    const std::size_t ks = p->key_size.load(std::memory_order_relaxed);
    out.resize(p->value_size.load(std::memory_order_relaxed));
    pm::read(out.data(), p->bytes() + ks, out.size());
  }

  // The sign of (n's key - q's key) in (hash, bytes) order; the bytes are read only when the
  // hashes are equal (in practice: when the keys are).
  static int compare(const Node* n, const Probe& q) {
    if (n == &tail_) return 1;
    if (n->hash != q.hash) return n->hash < q.hash ? -1 : 1;
    const PNode* p = pnode_of(pnode_word_of(n->current.load(std::memory_order_acquire)));
    const std::size_t ks = p->key_size.load(std::memory_order_relaxed);
    char key[max_key_size];
    pm::read(key, p->bytes(), ks);
    const int c = std::string_view(key, ks).compare(q.key);
    return (c > 0) - (c < 0);
  }

  static bool in_set(const Node* n) {
    const detail::SoftState s = detail::state_of(n->next.load(std::memory_order_acquire));
    return s == detail::inserted || s == detail::intend_to_delete;
  }

  // Listing 9's find: the first node not "deleted" with (hash, key) >= q, unlinking "deleted"
  // nodes on the way without any flush (§4.4).
  Window find(const Probe& q) {
  restart:
    std::atomic<std::uintptr_t>* prev = &bucket(q.hash);
    std::uintptr_t prev_word = prev->load(std::memory_order_acquire);
    for (;;) {
      Node* curr = node_of(prev_word);
      if (curr == &tail_) return {prev, prev_word, curr, detail::inserted, false};
      const std::uintptr_t succ_word = curr->next.load(std::memory_order_acquire);
      const detail::SoftState s = detail::state_of(succ_word);
      if (s != detail::deleted) {
        const int c = compare(curr, q);
        if (c >= 0) return {prev, prev_word, curr, s, c == 0};
        prev = &curr->next;
        prev_word = succ_word;
        continue;
      }
      const std::uintptr_t unlinked =
          detail::make_word(node_of(succ_word), detail::state_of(prev_word));
      if (prev->compare_exchange_strong(prev_word, unlinked, std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
        retire(curr);
        prev_word = unlinked;
      } else if (detail::state_of(prev_word) == detail::deleted) {
        goto restart;
      }
    }
  }

  // Listing 10's wait-free traversal: the node with q's key regardless of its state, or null.
  const Node* seek(const Probe& q) {
    const Node* n = node_of(bucket(q.hash).load(std::memory_order_acquire));
    for (;;) {
      const int c = compare(n, q);
      if (c > 0) return nullptr;
      if (c == 0) return n;
      n = node_of(n->next.load(std::memory_order_acquire));
    }
  }

  // A fresh node for q with its persistent node written (not committed), or PoolFull.
  Node* make_node(const Probe& q, std::string_view k, std::string_view v) {
    void* slot =
        allocator_.allocate(pm::ChunkAllocator::block_size(sizeof(PNode) + k.size() + v.size()));
    auto* p = static_cast<PNode*>(slot);
    const bool validity = p->prepare_and_write(k, v, q.hash, 0);
    try {
      return new Node{q.hash, {0}, {reinterpret_cast<std::uintptr_t>(p) | validity}};
    } catch (...) {
      allocator_.free(slot);
      throw;
    }
  }

  // Listing 11's insert, one attempt at window w: links a new node in "intention to insert" and
  // completes it. False when the link changed (the caller finds again).
  bool try_link(const Window& w, const Probe& q, std::string_view k, std::string_view v) {
    Node* fresh = make_node(q, k, v);
    fresh->next.store(detail::make_word(w.curr, detail::intend_to_insert),
                      std::memory_order_relaxed);
    std::uintptr_t expected = w.prev_word;
    if (!w.prev->compare_exchange_strong(expected,
                                         detail::make_word(fresh, detail::state_of(w.prev_word)),
                                         std::memory_order_acq_rel, std::memory_order_relaxed)) {
      allocator_.free(pnode_of(fresh->current.load(std::memory_order_relaxed)));
      delete fresh;  // never published
      return false;
    }
    complete_insert(fresh);
    count_delta(1);
    return true;
  }

  // Listing 11 lines 30-33, by the inserter and helpers: commit the node (one fence), then
  // "intention to insert" -> "inserted". A helper may come late, after a put replaced the node:
  // it then commits the current version again, which stores what is there already.
  static void complete_insert(Node* n) {
    const std::uintptr_t c = pnode_word_of(n->current.load(std::memory_order_acquire));
    pnode_of(c)->commit(validity_of(c));
    std::uintptr_t word = n->next.load(std::memory_order_acquire);
    while (detail::state_of(word) == detail::intend_to_insert) {
      if (n->next.compare_exchange_weak(word, detail::make_word(node_of(word), detail::inserted),
                                        std::memory_order_acq_rel, std::memory_order_acquire))
        break;
    }
  }

  // n's current word once no replacement is in flight (helping any it finds).
  std::uintptr_t settled(Node* n) {
    for (;;) {
      const std::uintptr_t c = n->current.load(std::memory_order_acquire);
      if (!is_replacing(c)) return c;
      complete_replace(n, c);
    }
  }

  // Replaces n's value if its current word is still the stable `c`: writes version+1 in a new
  // persistent node, publishes the replacement, completes it. False (nothing changed) if `c` is
  // no longer current.
  bool try_replace(Node* n, std::uintptr_t c, const Probe& q, std::string_view k,
                   std::string_view v) {
    const std::uint64_t version =
        pnode_of(pnode_word_of(c))->version.load(std::memory_order_relaxed) + 1;
    void* slot =
        allocator_.allocate(pm::ChunkAllocator::block_size(sizeof(PNode) + k.size() + v.size()));
    auto* p = static_cast<PNode*>(slot);
    const bool validity = p->prepare_and_write(k, v, q.hash, version);
    Version* r;
    try {
      r = new Version{reinterpret_cast<std::uintptr_t>(p) | validity, pnode_word_of(c),
                      is_version(c) ? version_of(c) : nullptr};
    } catch (...) {
      allocator_.free(slot);
      throw;
    }
    const std::uintptr_t replacing =
        reinterpret_cast<std::uintptr_t>(r) | version_tag | replacing_tag;
    std::uintptr_t expected = c;
    if (!n->current.compare_exchange_strong(expected, replacing, std::memory_order_acq_rel,
                                            std::memory_order_acquire)) {
      allocator_.free(slot);  // never committed, never seen
      delete r;
      return false;
    }
    complete_replace(n, replacing);
    return true;
  }

  // By the replacer and helpers, one fence: the new version (v+1) made live and written back,
  // and the version before the replaced one (v-1, the previous replacement's `old`, if any)
  // marked deleted and written back. Whichever of these a crash keeps, the replaced version v is
  // still live, so recovery finds v or v+1 as the highest live version. Then current -> stable;
  // its one winner retires the previous record and v-1's block.
  void complete_replace(Node* n, std::uintptr_t replacing) {
    const Version* r = version_of(replacing);
    pnode_of(r->fresh)->make_live(validity_of(r->fresh));
    // The crash lab rarely reaches a crash that needs this write-back (a second replacement,
    // a remove, then a crash); soft_string_recovery_sim_test.cpp kills its mutant.
    if (r->previous != nullptr)
      pnode_of(r->previous->old)->mark_deleted(validity_of(r->previous->old));
    pm::fence();  // the one fence of a replacement
    std::uintptr_t expected = replacing;
    if (n->current.compare_exchange_strong(expected, replacing & ~replacing_tag,
                                           std::memory_order_acq_rel, std::memory_order_acquire) &&
        r->previous != nullptr) {
      pm::ChunkAllocator* allocator = &allocator_;
      domain_.retire(r->previous, [allocator](Version* dead) noexcept {
        allocator->free(pnode_of(dead->old));
        delete dead;
      });
    }
  }

  // A remove has won n (current frozen): "inserted" -> "intention to delete", the node durably
  // deleted (one fence), -> "deleted". Run by the winner and by anyone who finds it. A version
  // the key's last replacement left live is deleted durably first (its own fence): were the
  // two deletions to share a fence, a crash could keep the newer one's alone and bring the
  // older value back.
  static void help_remove(Node* n) {
    std::uintptr_t word = n->next.load(std::memory_order_acquire);
    while (detail::state_of(word) == detail::inserted) {
      if (n->next.compare_exchange_weak(word,
                                        detail::make_word(node_of(word), detail::intend_to_delete),
                                        std::memory_order_acq_rel, std::memory_order_acquire))
        word = detail::make_word(node_of(word), detail::intend_to_delete);
    }
    if (detail::state_of(word) != detail::intend_to_delete) return;  // deleted already
    const std::uintptr_t c = n->current.load(std::memory_order_acquire) & ~frozen_tag;
    if (const std::uintptr_t pending = pending_of(c); pending != 0)
      pnode_of(pending)->destroy(validity_of(pending));
    const std::uintptr_t live = pnode_word_of(c);
    pnode_of(live)->destroy(validity_of(live));
    while (detail::state_of(word) == detail::intend_to_delete) {
      if (n->next.compare_exchange_weak(word, detail::make_word(node_of(word), detail::deleted),
                                        std::memory_order_acq_rel, std::memory_order_acquire))
        break;
    }
  }

  // A node unlinked by its one successful trim: its persistent nodes are durably deleted; their
  // slots, its record and the node are freed once no pinned thread can still read them.
  void retire(Node* n) {
    pm::ChunkAllocator* allocator = &allocator_;
    domain_.retire(n, [allocator](Node* dead) noexcept {
      const std::uintptr_t c = dead->current.load(std::memory_order_relaxed) & ~frozen_tag;
      allocator->free(pnode_of(pnode_word_of(c)));
      if (is_version(c)) {
        allocator->free(pnode_of(version_of(c)->old));
        delete version_of(c);
      }
      delete dead;
    });
  }

  // ---- recovery (§4.6 with the three additions of the header) ---------------------------------

  struct Live {
    std::size_t bucket;
    std::uint64_t hash;
    std::uint64_t version;
    std::uintptr_t word;  // PNode* | pValidity
  };

  // Whether slot (of `size` bytes) holds a live node: flags, sizes within the block, checksum.
  static bool live(const PNode* p, std::size_t size, std::string& body, std::uint64_t& hash) {
    const std::uint8_t s = p->valid_start.load(std::memory_order_relaxed);
    if (s != p->valid_end.load(std::memory_order_relaxed) ||
        s == p->deleted.load(std::memory_order_relaxed))
      return false;
    const std::size_t ks = p->key_size.load(std::memory_order_relaxed);
    const std::size_t vs = p->value_size.load(std::memory_order_relaxed);
    if (ks > max_key_size || vs > max_value_size || sizeof(PNode) + ks + vs > size) return false;
    body.resize(ks + vs);
    pm::read(body.data(), p->bytes(), body.size());
    hash = hash_of(std::string_view(body.data(), ks));
    return p->checksum.load(std::memory_order_relaxed) ==
           PNode::body_checksum(hash, p->version.load(std::memory_order_relaxed),
                                std::string_view(body.data() + ks, vs));
  }

  // Quiescent, single-threaded, at open: scans every block, keeps the live ones, and of two live
  // versions of one key (a replacement the crash interrupted) keeps the higher and durably deletes
  // the other (else it would come back once the kept one is removed). Then links each bucket's
  // nodes in (hash, key) order, all "inserted".
  void recover() {
    const detail::Stopwatch clock;
    std::vector<Live> found;
    std::string body;
    allocator_.recover([&](void* slot, std::size_t size) {
      ++recovery_.slots_scanned;
      auto* p = static_cast<PNode*>(slot);
      std::uint64_t h = 0;
      if (!live(p, size, body, h)) return false;
      found.push_back({index_(h), h, p->version.load(std::memory_order_relaxed),
                       reinterpret_cast<std::uintptr_t>(p) |
                           (p->valid_start.load(std::memory_order_relaxed) != 0)});
      return true;
    });
    // By bucket, then (hash, key) as the lists are ordered, then the highest version first. The
    // key bytes are read (from the pool, through pm::read below) only on equal hashes.
    std::string ka, kb;
    std::sort(found.begin(), found.end(), [&](const Live& a, const Live& b) {
      if (a.bucket != b.bucket) return a.bucket < b.bucket;
      if (a.hash != b.hash) return a.hash < b.hash;
      read_key(pnode_of(a.word), ka);
      read_key(pnode_of(b.word), kb);
      if (ka != kb) return ka < kb;
      return a.version > b.version;
    });
    bool wrote = false;
    std::size_t kept = 0;
    for (std::size_t i = 0; i < found.size(); ++i) {
      if (i > 0 && found[i].hash == found[kept - 1].hash) {
        read_key(pnode_of(found[i].word), ka);
        read_key(pnode_of(found[kept - 1].word), kb);
        // The crash lab rarely reaches this (a crash between a replacement's fences, then a
        // remove of that key, then a crash): soft_string_recovery_sim_test.cpp kills the
        // mutants of this flush and the fence below.
        if (ka == kb) {  // an older version of the key kept just before
          ++recovery_.duplicate_keys;
          PNode* p = pnode_of(found[i].word);
          p->deleted.store(static_cast<std::uint8_t>(validity_of(found[i].word)),
                           std::memory_order_release);
          pm::flush(p);
          wrote = true;
          allocator_.free(p);
          continue;
        }
      }
      found[kept++] = found[i];
    }
    if (wrote) pm::fence();  // the older versions are durably deleted before any operation
    found.resize(kept);
    // Each bucket's run, linked back to front so that it ends up in ascending order.
    for (std::size_t i = found.size(); i-- > 0;) {
      std::atomic<std::uintptr_t>& head = buckets_[found[i].bucket];
      auto* n = new Node{found[i].hash, {head.load(std::memory_order_relaxed)}, {found[i].word}};
      head.store(detail::make_word(n, detail::inserted), std::memory_order_relaxed);
    }
    counts_[0].value.store(static_cast<std::int64_t>(kept), std::memory_order_relaxed);
    recovery_.live_slots = kept;
    recovery_.freed_slots = recovery_.slots_scanned - kept;
    recovery_.seconds = clock.seconds();
  }

  pm::Pool& pool_;
  pm::ChunkAllocator& allocator_;
  reclaim::EpochDomain domain_;
  std::size_t bucket_count_ = 0;
  BucketIndex index_;
  std::unique_ptr<std::atomic<std::uintptr_t>[]> buckets_;
  std::unique_ptr<Counter[]> counts_ = std::make_unique<Counter[]>(pmds::max_threads);
  RecoveryStats recovery_;
  // The tail sentinel every bucket ends with; compare() puts it after every key.
  static inline Node tail_{~std::uint64_t{0}, {0}, {0}};
};

}  // namespace pmds::linkfree_soft
