// pmds::linkfree_soft::SoftStringHashMap — "hash-bytes/soft": a durable-linearizable hash map
// from byte strings to byte strings, on SOFT's technique (Zuriel et al. §4: persistent nodes apart
// from the volatile ones, no link persisted, one psync per insert and per remove).
//
// What SOFT gives an 8-byte set (soft_list.hpp) carries over, with the three additions a string
// map needs (multi-line persistent nodes, replacement in one fence, the `current` word that
// serialises a key's writers): detail/soft_string_versions.hpp states and argues them, written
// once for this map and the ordered one (soft_string_skiplist.hpp). Reads (get, contains) never
// write or fence and read the value from the pool.
//
// The bucket array is in DRAM and fixed at creation (the bucket count is in the pool's root
// table); a bucket is a SOFT list ordered by (hash, key). Memory: a persistent node is a pool
// block of detail::soft_string_block_size(32 + key + value) bytes; per key in DRAM, one 64-byte
// volatile node (a block of the map's pmds::NodeSlab); per bucket, 16 bytes (its head and a
// prefetch hint: Bucket).
//
// get prefetches a found key's persistent node (its header and up to 1 KiB of value) as soon as
// the volatile node's hash matches, so that its lines arrive together instead of one after the
// other as the copy asks for them. Measured when the key was compared in the persistent node and
// only the lines after its first were prefetched (AMD EPYC, 2 vCPUs, `pmds bench --structure
// hash-bytes/soft --workload readrandom --key-range 1000000 --key-size 16`, 5 alternating rounds
// against the build without it, median [min-max] of per-round ratios): 1 KiB values 1.14x
// [1.03-1.35] at 1 thread, 1.23x [1.09-1.23] at 2 (3 rounds); 100-byte values 1.04x [0.91-1.16]
// and 1.00x [0.94-1.12]. Prefetching 1 KiB whatever the value's size lost 5% at 100 bytes: hence
// the node's line count.
//
// Since then the bucket also names the persistent node of the key written in it last, which get
// prefetches at once when its hash tag agrees, so that this node's miss and page walk overlap
// the volatile node's instead of following it. The same loop against the build before, 4
// rounds, 1 / 2 threads: readrandom 1.26x [1.07-1.37] / 1.19x [1.14-1.30] at 100-byte values
// and 1.09x [1.02-1.21] / 1.02x [1.00-1.15] at 1 KiB; overwrite and fillrandom 0.92-1.13 (level
// within the spread). Prefetching only the hinted node's first line, and the rest once the
// volatile node agrees, was no better (0.92-1.08x of this).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pmds/bucket_index.hpp"
#include "pmds/error.hpp"
#include "pmds/huge_pages.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/linkfree_soft/detail/set_root.hpp"
#include "pmds/linkfree_soft/detail/soft_pnode.hpp"
#include "pmds/linkfree_soft/detail/soft_string_versions.hpp"
#include "pmds/node_slab.hpp"
#include "pmds/pm/allocator.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/reclaim/epoch.hpp"
#include "pmds/thread_registry.hpp"

namespace pmds::linkfree_soft {

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
/// Zuriel et al. §4 (SOFT), extended to multi-line nodes, replacement and read-modify-write:
/// docs/ARCHITECTURE.md §9. Registered as "hash-bytes/soft"; pmds::DurableStringHashMap.
class SoftStringHashMap {
 public:
  static constexpr Criterion criterion = Criterion::durable;
  static constexpr const char* name = "hash-bytes/soft";
  static constexpr std::uint64_t tag = detail::make_tag("HBYTSOF1");
  static constexpr std::size_t default_bucket_count = std::size_t{1} << 20;
  /// A persistent node is one pool block of at most 8 KiB (pm::ChunkAllocator::block_size says
  /// why).
  static constexpr std::size_t max_block_size = detail::soft_string_max_block_size;
  static constexpr std::size_t max_key_size = detail::soft_string_max_key_size;
  static constexpr std::size_t max_value_size = detail::soft_string_max_value_size;  // 7136

  /// A new, empty map with `bucket_count` buckets (fixed) in `pool`, which must hold no structure.
  SoftStringHashMap(CreateTag, pm::Pool& pool, std::size_t bucket_count = default_bucket_count)
      : pool_(pool), allocator_(pool.allocator()) {
    check_bucket_count(bucket_count, PoolErrc::bad_argument);
    init_buckets(bucket_count);
    detail::write_set_root(pool, tag, bucket_count, name);
  }

  /// Opens the map a pool holds and recovers it: after a crash or a clean close alike, the
  /// buckets are rebuilt from the live persistent nodes (Zuriel et al. §4.6).
  SoftStringHashMap(OpenTag, pm::Pool& pool) : pool_(pool), allocator_(pool.allocator()) {
    const std::uint64_t n = detail::read_set_root(pool, tag, name);
    check_bucket_count(n, PoolErrc::corrupted);
    init_buckets(static_cast<std::size_t>(n));
    recover();
  }

  SoftStringHashMap(const SoftStringHashMap&) = delete;
  SoftStringHashMap& operator=(const SoftStringHashMap&) = delete;

  /// Quiescent: runs the pending reclamations (their deleters free into versions_, which goes
  /// before domain_); the volatile nodes and records go with their slabs, and the persistent
  /// nodes hold the map for the next open.
  ~SoftStringHashMap() { domain_.drain(); }

  /// Adds the key if it is absent; false (nothing written) if present. Durable on return.
  bool insert(std::string_view k, std::string_view v) {
    const Probe q = probe(k, v);
    auto guard = domain_.pin();
    V::Block b(versions_);
    for (;;) {
      const Window w = find(q);
      if (w.found) {
        if (w.curr_state == detail::intend_to_insert) complete_insert(w.curr);
        return false;
      }
      if (try_link(w, q, k, v, b)) return true;
    }
  }

  /// Inserts or replaces; true if the key was absent. Durable on return (one fence).
  bool put(std::string_view k, std::string_view v) {
    const Probe q = probe(k, v);
    auto guard = domain_.pin();
    V::Block b(versions_);
    b.reserve(k, v);  // a put writes a node whatever it finds: its block's misses overlap find's
    for (;;) {
      const Window w = find(q);
      if (!w.found) {
        if (try_link(w, q, k, v, b)) return true;
        continue;
      }
      if (w.curr_state == detail::intend_to_insert) complete_insert(w.curr);
      const std::uintptr_t c = settled(w.curr);
      if (!is_frozen(c) && try_replace(w.curr, c, q, k, v, b)) return false;
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
    V::Block b(versions_);
    for (;;) {
      const Window w = find(q);
      if (!w.found) {
        const std::optional<std::string> v = fn(std::optional<std::string_view>{});
        if (!v) return false;
        versions_.check_value(*v);
        if (try_link(w, q, k, *v, b)) return true;
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
      versions_.check_value(*v);
      if (try_replace(w.curr, c, q, k, *v, b)) return true;
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
    const bool won = versions_.freeze(key_of(n));
    help_remove(n);
    if (won) {
      // Only the winner trims, once (Listing 12 line 20); finds unlink it otherwise.
      std::uintptr_t expected = w.prev_word;
      const std::uintptr_t succ = n->next.load(std::memory_order_acquire);
      if (w.prev->compare_exchange_strong(
              expected, detail::make_word(node_of(succ), detail::state_of(w.prev_word)),
              std::memory_order_acq_rel, std::memory_order_relaxed))
        retire(n);
      count_.add(-1);
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
    const Node* n = seek<true>(q);
    if (n == nullptr || !in_set(n)) return false;
    read_value(pnode_word_of(n->current.load(std::memory_order_acquire)), out);
    return true;
  }

  /// The number of keys: exact when no thread writes, otherwise approximate (a sum of per-thread
  /// counts read one after the other).
  std::size_t size() const { return count_.sum(); }

  /// Quiescent: f(key, value) for every key, bucket by bucket.
  template <class F>
  void for_each(F&& f) {
    std::string key, value;
    for (std::size_t i = 0; i < bucket_count_; ++i) {
      for (const Node* n = node_of(buckets_[i].head.load(std::memory_order_acquire)); n != &tail_;
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
  using V = detail::SoftStringVersions;
  using PNode = detail::SoftStringPNode;

  // Keys of at most this many bytes are kept in their volatile node too.
  static constexpr std::size_t inline_key_size = 20;

  // The volatile node, one line (a block of nodes_): the key's hash (a bucket's order is (hash,
  // key)), the next word (successor | SoftState), the key's words (SoftStringVersions::Key:
  // current, stale, and the current node's version, from which a replacement numbers its node),
  // a prefetch hint, and the key's bytes when they fit (compared when the hashes are equal).
  // With these, a put reads nothing but this line before it writes its node: no persistent node
  // and no record, each a cache miss on its way. hash, key_size and key are set before the node
  // is published and never change.
  struct Node {
    std::uint64_t hash;
    std::atomic<std::uintptr_t> next;
    std::atomic<std::uintptr_t> current;
    std::atomic<std::uintptr_t> stale;
    std::atomic<std::uint64_t> version;
    // The current persistent node's length in cache lines: a hint for get's prefetch, which a
    // reader may see for the version before (a missed or extra prefetch, nothing else).
    std::atomic<std::uint16_t> lines;
    std::uint16_t key_size;
    char key[inline_key_size] = {};  // the key's bytes, if key_size <= inline_key_size
  };
  static_assert(sizeof(Node) == 64);
  static V::Key key_of(Node* n) { return {n->current, n->stale, &n->version}; }

  // A bucket: the head of its list and, in the same line, a prefetch hint: the persistent node
  // of the key of this bucket written last (inserted, replaced or recovered), with the top 16
  // bits of that key's hash and the node's length in lines. get prefetches the hinted node
  // together with the volatile node when the tags agree, instead of after it: the two misses
  // (and the pool page's walk) overlap. A hint may name a key's older version or a removed
  // key's block: a wasted prefetch, nothing else (it is never dereferenced).
  struct Bucket {
    std::atomic<std::uintptr_t> head;
    std::atomic<std::uintptr_t> hint;
  };
  // Pool addresses are below 2^47 and persistent nodes line-aligned: the tag takes bits 48-63,
  // the line count (at most 63) bits 0-5, the node's address the bits between.
  static constexpr unsigned hint_tag_shift = 48;
  static constexpr std::uintptr_t hint_lines_mask = pm::cache_line_size - 1;
  static constexpr std::uintptr_t hint_node_mask =
      ((std::uintptr_t{1} << hint_tag_shift) - 1) & ~hint_lines_mask;
  static std::uintptr_t hint_of(std::uint64_t hash, std::uintptr_t pnode_word, std::size_t body) {
    return (hash >> hint_tag_shift << hint_tag_shift) |
           reinterpret_cast<std::uintptr_t>(pnode_of(pnode_word)) |
           std::min<std::uintptr_t>(lines_of(body), hint_lines_mask);
  }
  static void set_hint(Bucket& b, std::uint64_t hash, std::uintptr_t pnode_word, std::size_t body) {
    b.hint.store(hint_of(hash, pnode_word, body), std::memory_order_relaxed);
  }

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

  static PNode* pnode_of(std::uintptr_t word) { return V::pnode_of(word); }
  static bool is_frozen(std::uintptr_t c) { return V::is_frozen(c); }
  static std::uintptr_t pnode_word_of(std::uintptr_t c) { return V::pnode_word_of(c); }
  static void read_key(const PNode* p, std::string& out) { V::read_key(p, out); }
  static void read_value(std::uintptr_t word, std::string& out) { V::read_value(word, out); }
  static Node* node_of(std::uintptr_t word) { return detail::node_of<Node>(word); }

  // The key checked and hashed (and the value checked, for a write).
  Probe probe(std::string_view k) const {
    versions_.check_key(k);
    return {V::hash_of(k), k};
  }
  Probe probe(std::string_view k, std::string_view v) const {
    const Probe q = probe(k);
    versions_.check_value(v);
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
    buckets_ = make_chunk_array<Bucket>(n);
    for (std::size_t i = 0; i < n; ++i)
      buckets_[i].head.store(detail::make_word(&tail_, detail::inserted),
                             std::memory_order_relaxed);
  }
  Bucket& bucket(std::uint64_t h) { return buckets_[index_(h)]; }

  // The sign of (n's key - q's key) in (hash, bytes) order; the bytes are compared only when the
  // hashes are equal (in practice: when the keys are), from the pool only for a long key.
  static int compare(const Node* n, const Probe& q) {
    if (n == &tail_) return 1;
    if (n->hash != q.hash) return n->hash < q.hash ? -1 : 1;
    if (n->key_size > inline_key_size)
      return V::compare_key(n->current.load(std::memory_order_acquire), q.key);
    const int r = std::string_view(n->key, n->key_size).compare(q.key);
    return (r > 0) - (r < 0);
  }

  static bool in_set(const Node* n) {
    const detail::SoftState s = detail::state_of(n->next.load(std::memory_order_acquire));
    return s == detail::inserted || s == detail::intend_to_delete;
  }

  // Listing 9's find: the first node not "deleted" with (hash, key) >= q, unlinking "deleted"
  // nodes on the way without any flush (§4.4).
  Window find(const Probe& q) {
  restart:
    std::atomic<std::uintptr_t>* prev = &bucket(q.hash).head;
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
  // get's (PrefetchValue) also prefetches the value's lines of a node whose hash matches.
  template <bool PrefetchValue = false>
  const Node* seek(const Probe& q) {
    const Bucket& b = bucket(q.hash);
    const Node* n = node_of(b.head.load(std::memory_order_acquire));
    std::uintptr_t hinted = 0;  // the persistent node prefetched from the hint
    if constexpr (PrefetchValue) {
      const std::uintptr_t h = b.hint.load(std::memory_order_relaxed);
      if ((h ^ q.hash) >> hint_tag_shift == 0 && h != 0) {
        hinted = h & hint_node_mask;
        prefetch_lines(reinterpret_cast<const char*>(hinted), h & hint_lines_mask);
      }
    }
    for (;;) {
      if constexpr (PrefetchValue)
        if (n != &tail_ && n->hash == q.hash) prefetch_value(n, hinted);
      const int c = compare(n, q);
      if (c > 0) return nullptr;
      if (c == 0) return n;
      n = node_of(n->next.load(std::memory_order_acquire));
    }
  }

  // A volatile node for a key of hash h and key_size bytes (read from `bytes` if the node keeps
  // them), its persistent node `word` (version `version`, `body` key and value bytes) and next
  // word `next`. Throws std::bad_alloc.
  Node* make_node(std::uint64_t h, std::uintptr_t next, std::uintptr_t word, std::size_t key_size,
                  const char* bytes, std::size_t body, std::uint64_t version) {
    Node* n = nodes_.make(h, next, word, 0, version, lines_of(body),
                          static_cast<std::uint16_t>(key_size));
    if (key_size <= inline_key_size) std::copy(bytes, bytes + key_size, n->key);
    return n;
  }

  // Listing 11's insert, one attempt at window w: links a new node in "intention to insert" and
  // completes it. False when the link changed (the caller finds again; b keeps the block).
  // PoolFull: nothing changed.
  bool try_link(const Window& w, const Probe& q, std::string_view k, std::string_view v,
                V::Block& b) {
    const std::uintptr_t word = b.write(k, v, q.hash, 0);
    Node* fresh = make_node(q.hash, detail::make_word(w.curr, detail::intend_to_insert), word,
                            k.size(), k.data(), k.size() + v.size(), 0);
    std::uintptr_t expected = w.prev_word;
    if (!w.prev->compare_exchange_strong(expected,
                                         detail::make_word(fresh, detail::state_of(w.prev_word)),
                                         std::memory_order_acq_rel, std::memory_order_relaxed)) {
      nodes_.free(fresh);  // never published
      return false;
    }
    b.published();
    complete_insert(fresh);
    set_hint(bucket(q.hash), q.hash, word, k.size() + v.size());
    count_.add(1);
    return true;
  }

  static void complete_insert(Node* n) { V::complete_insert(n->next, n->current); }
  std::uintptr_t settled(Node* n) { return versions_.settled(key_of(n)); }
  bool try_replace(Node* n, std::uintptr_t c, const Probe& q, std::string_view k,
                   std::string_view v, V::Block& b) {
    if (!versions_.try_replace(key_of(n), c, q.hash, k, v, b)) return false;
    n->lines.store(lines_of(k.size() + v.size()), std::memory_order_relaxed);
    set_hint(bucket(q.hash), q.hash, pnode_word_of(n->current.load(std::memory_order_acquire)),
             k.size() + v.size());
    return true;
  }

  // A persistent node's length in lines, for a key and value of `body` bytes together.
  static std::uint16_t lines_of(std::size_t body) {
    return static_cast<std::uint16_t>((sizeof(PNode) + body + pm::cache_line_size - 1) /
                                      pm::cache_line_size);
  }
  // The lines of n's persistent node, up to its header and 1 KiB of value: the copy's hardware
  // prefetch streams the rest.
  // (Not again if the bucket's hint named the same node.)
  static void prefetch_value(const Node* n, std::uintptr_t hinted) {
    const auto* p = reinterpret_cast<const char*>(
        pnode_of(pnode_word_of(n->current.load(std::memory_order_acquire))));
    if (reinterpret_cast<std::uintptr_t>(p) != hinted)
      prefetch_lines(p, n->lines.load(std::memory_order_relaxed));
  }
  static void prefetch_lines(const char* p, std::uint32_t lines) {
    constexpr std::uint32_t most = 1 + 1024 / pm::cache_line_size;
    lines = std::min(lines, most);
    for (std::uint32_t line = 0; line < lines; ++line)
      __builtin_prefetch(p + pm::cache_line_size * line);
  }
  static void help_remove(Node* n) { V::help_remove(n->next, key_of(n)); }

  // A node unlinked by its one successful trim: its persistent nodes are durably deleted; their
  // slots and the node are freed once no pinned thread can still read them.
  void retire(Node* n) {
    domain_.retire(n, [this](Node* dead) noexcept {
      versions_.free_blocks(dead->current.load(std::memory_order_relaxed),
                            dead->stale.load(std::memory_order_relaxed));
      nodes_.free(dead);
    });
  }

  // Quiescent, single-threaded, at open: the live persistent nodes, one per key
  // (SoftStringVersions::recover_live), each bucket's linked in (hash, key) order, all
  // "inserted". The key bytes are read (from the pool) only on equal hashes.
  void recover() {
    const detail::Stopwatch clock;
    std::string ka, kb;
    const auto found = versions_.recover_live(
        recovery_, [this](std::uint64_t h, std::string_view) { return index_(h); },
        [&](const auto& a, const auto& b) {
          if (a.hash != b.hash) return a.hash < b.hash;
          read_key(pnode_of(a.word), ka);
          read_key(pnode_of(b.word), kb);
          return ka < kb;
        });
    // Each bucket's run, linked back to front so that it ends up in ascending order. A volatile
    // node keeps a short key's bytes, read here from its persistent node: with that (and the
    // 64-byte node), opening 1M keys of 16 bytes took 1.27x [1.12-2.03] as long as with the
    // 32-byte node (AMD EPYC, 5 alternating runs, `pmds bench --structure hash-bytes/soft
    // --workload readrandom --key-range 1000000 --key-size 16 --value-size 100`'s recovery;
    // 175-220 ms before). Copying the key during the scan instead made the sort's records larger
    // and was no faster; fetching keys a few nodes ahead did not measurably help.
    for (std::size_t i = found.size(); i-- > 0;) {
      Bucket& b = buckets_[found[i].order];
      const PNode* p = pnode_of(found[i].word);
      const std::size_t key_size = p->key_size.load(std::memory_order_relaxed);
      if (key_size <= inline_key_size) read_key(p, ka);  // a longer key stays in the pool only
      Node* n = make_node(found[i].hash, b.head.load(std::memory_order_relaxed), found[i].word,
                          key_size, ka.data(), found[i].body, found[i].version);
      b.head.store(detail::make_word(n, detail::inserted), std::memory_order_relaxed);
      set_hint(b, found[i].hash, found[i].word, found[i].body);
    }
    count_.reset(found.size());
    recovery_.seconds = clock.seconds();
  }

  pm::Pool& pool_;
  pm::ChunkAllocator& allocator_;
  NodeSlab<Node> nodes_;  // outlives domain_, whose pending deleters free into it
  reclaim::EpochDomain domain_;
  V versions_{name, allocator_, domain_};
  std::size_t bucket_count_ = 0;
  BucketIndex index_;
  ChunkArray<Bucket> buckets_;  // on huge pages (huge_pages.hpp)
  detail::KeyCount count_;
  RecoveryStats recovery_;
  // The tail sentinel every bucket ends with; compare() puts it after every key.
  static inline Node tail_{~std::uint64_t{0}, {0}, {0}, {0}, {0}, {0}, 0, {}};
};

}  // namespace pmds::linkfree_soft
