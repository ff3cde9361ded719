// pmds::linkfree_soft::detail — a key's versions in SOFT's byte-string maps (Zuriel et al. §4
// extended to multi-line nodes and replacement; docs/ARCHITECTURE.md §9): the persistent node of
// one version, the volatile node's `current` word that names it, and the replace, remove and
// recovery rules over them. Written once for the hash map (soft_string_hash_map.hpp) and the
// ordered map (soft_string_skiplist.hpp), which differ only in how they find a key's node.
//
// The three additions SOFT needs for a string map, each argued where it is made:
//   1. A persistent node spans several cache lines (key and value bytes), so the same-line order
//      argument of Zuriel et al. §4.1 no longer covers it. Its header line holds the validity
//      flags, the sizes, a version and a checksum (XXH3) of the bytes; recovery keeps a node only
//      when the flags say live AND the checksum matches, so a crash that wrote the header back but
//      not every line of the bytes leaves the node not live. That keeps create at one fence: the
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
//      of a present key: stable (the node), replacing (a Version record in flight, completed by
//      whoever sees it), frozen (a remove won; no put may replace it any more). Beside it, the
//      volatile node keeps the rest of the key's stable state (`Key`): the replaced version still
//      live in the pool (`stale`) and, in the hash map, the current node's version, so that a
//      replacement reads no record (in the hash map, nothing but the volatile node) before it
//      writes.
//      Every writer first helps a replacement it finds to completion, so a key is replaced by one
//      writer at a time and the helping keeps every operation lock-free.
//
// The linearization points: insert at the CAS to "inserted" (after its node is durable), remove
// at the CAS to "deleted" (after the deletion is durable), a replacement at the CAS of `current`
// to stable (after its fence); a crash before that CAS may keep the old or the new value, and no
// completed operation has seen the new one.
#pragma once

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL  // header-only: nothing to link
#endif
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/linkfree_soft/detail/soft_pnode.hpp"
#include "pmds/node_slab.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/allocator.hpp"
#include "pmds/reclaim/epoch.hpp"
#include "pmds/thread_registry.hpp"

namespace pmds::linkfree_soft::detail {

// The persistent node of one version of a key: a 32-byte header, then the key's bytes, then the
// value's. A pool block (soft_string_block_size) is a whole number of lines from a
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

// A persistent node is one pool block of at most 8 KiB (pm::ChunkAllocator::block_size says why).
inline constexpr std::size_t soft_string_max_block_size = 8192;
inline constexpr std::size_t soft_string_max_key_size = 1024;
inline constexpr std::size_t soft_string_max_value_size =
    soft_string_max_block_size - sizeof(SoftStringPNode) - soft_string_max_key_size;  // 7136

// The block of a persistent node of n bytes: ChunkAllocator::block_size (whole lines up to 512
// bytes, then four sizes per doubling), but multiples of 128 bytes from 512 to 2 KiB. A 16-byte
// key with a 1 KiB value is a 1,072-byte node: a 1,152-byte block here, 1,280 under block_size,
// which keeps its coarser steps for InCLL's byte strings (their persistent free lists are kept
// per block size). Nodes up to 8 KiB take at most 28 slot sizes, within a pool's 32. Recovery
// reads a node in any slot that holds it, so a pool written with the coarser blocks opens as it
// was.
inline std::size_t soft_string_block_size(std::size_t n) {
  if (n <= 512 || n > 2048) return pm::ChunkAllocator::block_size(n);
  return (n + 127) / 128 * 128;
}

// A string map's key count: one cache-line counter per thread id, so an insert or remove adds
// to its own line only. size() sums them: exact when no thread writes, otherwise approximate.
class KeyCount {
 public:
  void add(std::int64_t d) {
    counts_[pmds::thread_id()].value.fetch_add(d, std::memory_order_relaxed);
  }
  std::size_t sum() const {
    std::int64_t n = 0;
    for (std::size_t t = 0; t < pmds::max_threads; ++t)
      n += counts_[t].value.load(std::memory_order_relaxed);
    return n < 0 ? 0 : static_cast<std::size_t>(n);
  }
  // Quiescent (recovery): the count is n.
  void reset(std::size_t n) {
    for (std::size_t t = 0; t < pmds::max_threads; ++t)
      counts_[t].value.store(0, std::memory_order_relaxed);
    counts_[0].value.store(static_cast<std::int64_t>(n), std::memory_order_relaxed);
  }

 private:
  struct alignas(64) Counter {
    std::atomic<std::int64_t> value{0};
  };
  std::unique_ptr<Counter[]> counts_ = std::make_unique<Counter[]>(pmds::max_threads);
};

// The replace, remove and recovery rules over a volatile node's `current` word, for the map
// named `name` whose persistent nodes are blocks of `allocator` retired through `domain`. The
// functions take the node's two words: its level-0 next word (successor | SoftState) and
// `current`.
class SoftStringVersions {
 public:
  // `current`: the key's persistent node word (PNode* | pValidity in bit 0; blocks are
  // line-aligned) when stable, with frozen_tag once a remove has won; a Version* | replacing_tag
  // while a replacement is in flight.
  static constexpr std::uintptr_t frozen_tag = 2;
  static constexpr std::uintptr_t replacing_tag = 4;
  static constexpr std::uintptr_t tag_bits = 7;
  // One replacement of a key's value, while it is in flight (immutable; retired once it
  // completed): `fresh` is written but may not be durable, and readers read `old`. Once it
  // completed, `fresh` is the key's node and `old` its stale version, still live in the pool: its
  // durable deletion is left to the key's next write, which does it within its own fence (a
  // replacement) or before its own (a remove), so that a replacement costs one fence. Recovery
  // keeps the higher version of two live ones.
  struct alignas(8) Version {
    std::uintptr_t fresh;   // the new version's node word
    std::uintptr_t old;     // the node word it replaces
    std::uintptr_t stale;   // the key's stale version before it (or 0): deleted durably by this
                            // replacement's fence, freed after it
    std::uint64_t version;  // fresh's
  };
  using PNode = SoftStringPNode;
  using Word = std::atomic<std::uintptr_t>;

  // A key's words in its volatile node, so that a replacement reads no record (and, with a
  // version word, no persistent node) before it writes. `current` as above. While current is
  // stable, `stale` is the version its last replacement replaced, still live in the pool (0 if
  // none), and `*version` the current node's version (null for a map that keeps no copy: it is
  // read from the current node's header). A replacement's completers set both before current
  // becomes stable again, each by a CAS from the value its record expects: a version only grows
  // and a stale block is not reused while a helper that read the record is pinned, so a late
  // helper's CAS fails and cannot undo a later replacement's. A writer that read current stable
  // and then these words read them for that state if its CAS of current from it succeeds.
  struct Key {
    Word& current;
    Word& stale;
    std::atomic<std::uint64_t>* version;
  };

  SoftStringVersions(const char* name, pm::ChunkAllocator& allocator, reclaim::EpochDomain& domain)
      : name_(name), allocator_(allocator), domain_(domain) {}

  static PNode* pnode_of(std::uintptr_t word) {
    return reinterpret_cast<PNode*>(word & ~std::uintptr_t{63});
  }
  static bool validity_of(std::uintptr_t word) { return (word & 1) != 0; }
  static bool is_frozen(std::uintptr_t c) { return (c & frozen_tag) != 0; }
  static bool is_replacing(std::uintptr_t c) { return (c & replacing_tag) != 0; }
  static Version* version_of(std::uintptr_t c) { return reinterpret_cast<Version*>(c & ~tag_bits); }
  // The node word whose value a reader returns: during a replacement, the old one (the new one
  // may not be durable yet).
  static std::uintptr_t pnode_word_of(std::uintptr_t c) {
    return is_replacing(c) ? version_of(c)->old : c & ~frozen_tag;
  }

  static std::uint64_t hash_of(std::string_view k) { return XXH3_64bits(k.data(), k.size()); }
  void check_key(std::string_view k) const {
    if (k.size() > soft_string_max_key_size)
      throw Error(std::string("pmds: ") + name_ + " takes keys of at most " +
                  std::to_string(soft_string_max_key_size) + " bytes; this one has " +
                  std::to_string(k.size()));
  }
  void check_value(std::string_view v) const {
    if (v.size() > soft_string_max_value_size)
      throw Error(std::string("pmds: ") + name_ + " takes values of at most " +
                  std::to_string(soft_string_max_value_size) + " bytes; this one has " +
                  std::to_string(v.size()));
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
  // The sign of (the key of the node whose current word is c) - k, reading the key's bytes from
  // its persistent node (any version: a key's bytes are the same in all). The caller knows the
  // two keys agree on their first `from` bytes and both have that many: only the rest is read.
  static int compare_key(std::uintptr_t c, std::string_view k, std::size_t from = 0) {
    const PNode* p = pnode_of(pnode_word_of(c));
    const std::size_t n = p->key_size.load(std::memory_order_relaxed) - from;
    char rest[soft_string_max_key_size];
    pm::read(rest, p->bytes() + from, n);
    const int r = std::string_view(rest, n).compare(k.substr(from));
    return (r > 0) - (r < 0);
  }

  // A pool block for one write's new persistent node. A write takes it (and fetches its lines for
  // writing) before the search that decides the node's version, so that the block's cache misses
  // overlap the search's; it keeps it across its retries, and frees it if it ends without
  // publishing it. With the hash map's copies of the key and version in its volatile node,
  // measured against the build before both (AMD EPYC, 2 vCPUs, `pmds bench --structure
  // hash-bytes/soft --key-range 1000000 --key-size 16`, 5 alternating rounds, median [min-max]
  // of per-round ratios, 1 / 2 threads): overwrite 1.17 [1.03-1.29] / 1.08 [0.93-1.18] at 100-byte
  // values and 1.20 [1.05-1.42] / 1.19 [1.16-1.35] at 1 KiB; fillrandom 1.10-1.12.
  class Block {
   public:
    explicit Block(SoftStringVersions& owner) : owner_(owner) {}
    Block(const Block&) = delete;
    Block& operator=(const Block&) = delete;
    ~Block() {
      if (slot_ != nullptr) owner_.allocator_.free(slot_);
    }

    // Holds a block for a node of (k, v), its lines on their way to this core's cache. Throws
    // PoolFull (nothing held).
    void reserve(std::string_view k, std::string_view v) {
      const std::size_t size = sizeof(PNode) + k.size() + v.size();
      const std::size_t bytes = soft_string_block_size(size);
      if (slot_ != nullptr && bytes == bytes_) return;
      if (slot_ != nullptr) owner_.allocator_.free(std::exchange(slot_, nullptr));
      slot_ = owner_.allocator_.allocate(bytes);
      bytes_ = bytes;
      // A recycled block's lines are in no cache: fetch them all for writing at once, rather
      // than one miss after another as the header is read and the bytes are stored. Measured
      // with the prefetch in try_replace (AMD EPYC, 2 vCPUs, `pmds bench --structure
      // hash-bytes/soft --workload overwrite --key-range 1000000 --key-size 16`, alternating
      // rounds against the build without them, median [min-max] of per-round ratios): 1 thread
      // 1.13x [0.87-1.17] at 100-byte values and 1.14x [1.06-1.40] at 1 KiB (5 rounds); 2
      // threads 1.11x [1.05-1.21] (6 rounds) and 1.22x [1.11-1.45] (3 rounds); fillrandom at
      // 1 KiB 1.03x [1.02-1.08].
      for (std::size_t at = 0; at < size; at += pm::cache_line_size)
        __builtin_prefetch(static_cast<char*>(slot_) + at, 1);
    }
    // The block written as version `version` of (k, v), not committed: its word. The block stays
    // this Block's (freed with it) until published(). Throws PoolFull (nothing held).
    std::uintptr_t write(std::string_view k, std::string_view v, std::uint64_t key_hash,
                         std::uint64_t version) {
      reserve(k, v);
      auto* p = static_cast<PNode*>(slot_);
      const bool validity = p->prepare_and_write(k, v, key_hash, version);
      return reinterpret_cast<std::uintptr_t>(p) | validity;
    }
    // The written block is a published node now: the map's, no longer this Block's.
    void published() { slot_ = nullptr; }

   private:
    SoftStringVersions& owner_;
    void* slot_ = nullptr;
    std::size_t bytes_ = 0;
  };

  // Listing 11 lines 30-33, by the inserter and helpers: commit the node (one fence), then
  // "intention to insert" -> "inserted". A helper may come late, after a put replaced the node:
  // it then commits the current version again, which stores what is there already.
  static void complete_insert(Word& next, const Word& current) {
    const std::uintptr_t c = pnode_word_of(current.load(std::memory_order_acquire));
    pnode_of(c)->commit(validity_of(c));
    std::uintptr_t word = next.load(std::memory_order_acquire);
    while (state_of(word) == intend_to_insert) {
      if (next.compare_exchange_weak(word, (word & ~state_mask) | inserted,
                                     std::memory_order_acq_rel, std::memory_order_acquire))
        break;
    }
  }

  // The current word once no replacement is in flight (helping any it finds).
  std::uintptr_t settled(Key key) {
    for (;;) {
      const std::uintptr_t c = key.current.load(std::memory_order_acquire);
      if (!is_replacing(c)) return c;
      complete_replace(key, c);
    }
  }

  // Replaces the value if the current word is still the stable `c`: writes version+1 in block b,
  // publishes the replacement, completes it. False (nothing changed, b still held) if `c` is no
  // longer current. Throws PoolFull (nothing changed).
  bool try_replace(Key key, std::uintptr_t c, std::uint64_t key_hash, std::string_view k,
                   std::string_view v, Block& b) {
    // Read after current (acquire), these are c's unless the CAS below fails (Key).
    const std::uintptr_t stale = key.stale.load(std::memory_order_acquire);
    // The stale version is marked deleted in this replacement's fence (complete_replace): its
    // header line is fetched while the new node is written.
    if (stale != 0) __builtin_prefetch(pnode_of(stale), 1);
    const std::uint64_t version =
        (key.version != nullptr ? key.version->load(std::memory_order_acquire)
                                : pnode_of(c)->version.load(std::memory_order_relaxed)) +
        1;
    const std::uintptr_t fresh = b.write(k, v, key_hash, version);
    Version* r = records_.make(fresh, c, stale, version);
    const std::uintptr_t replacing = reinterpret_cast<std::uintptr_t>(r) | replacing_tag;
    std::uintptr_t expected = c;
    if (!key.current.compare_exchange_strong(expected, replacing, std::memory_order_acq_rel,
                                             std::memory_order_acquire)) {
      records_.free(r);  // never seen; b keeps the block (never committed) for the next try
      return false;
    }
    b.published();
    complete_replace(key, replacing);
    return true;
  }

  // By the replacer and helpers, one fence: the new version (v+1) made live and written back,
  // and the stale version (v-1, if any) marked deleted and written back. Whichever of these a
  // crash keeps, the replaced version v is still live, so recovery finds v or v+1 as the highest
  // live version. Then the key's stale word (v) and version (v+1), then current -> stable; its
  // one winner retires the record and v-1's block.
  void complete_replace(Key key, std::uintptr_t replacing) {
    Version* const r = version_of(replacing);  // immutable once published
    pnode_of(r->fresh)->make_live(validity_of(r->fresh));
    if (r->stale != 0) {
      // The crash lab rarely reaches a crash that needs this write-back (a second replacement,
      // a remove, then a crash).
      // Mutant killed by test: soft_string_recovery_sim_test
      // SoftStringRecovery/*.AVersionTwoReplacementsBackStaysDeletedAfterARemove
      pnode_of(r->stale)->mark_deleted(validity_of(r->stale));
    }
    pm::fence();  // the one fence of a replacement
    // Each a CAS from the value r expects: a late helper's fails (Key).
    if (key.version != nullptr) {
      std::uint64_t before = r->version - 1;
      key.version->compare_exchange_strong(before, r->version, std::memory_order_acq_rel,
                                           std::memory_order_relaxed);
    }
    std::uintptr_t stale = r->stale;
    key.stale.compare_exchange_strong(stale, r->old, std::memory_order_acq_rel,
                                      std::memory_order_relaxed);
    std::uintptr_t expected = replacing;
    if (key.current.compare_exchange_strong(expected, r->fresh, std::memory_order_acq_rel,
                                            std::memory_order_acquire)) {
      // The deleter is handed the stale word now, while the record is in this core's cache: it
      // runs long after, when the record is in none, and then touches neither it nor the block.
      domain_.retire(r, [this, stale = r->stale](Version* dead) noexcept {
        if (stale != 0) allocator_.free(pnode_of(stale));
        records_.free(dead);
      });
    }
  }

  // A remove's claim on a present key: freezes `current` (no put replaces it any more). True
  // for the one remove that froze it.
  bool freeze(Key key) {
    for (;;) {
      const std::uintptr_t c = settled(key);
      if (is_frozen(c)) return false;  // another remove won
      std::uintptr_t expected = c;
      if (key.current.compare_exchange_weak(expected, c | frozen_tag, std::memory_order_acq_rel,
                                            std::memory_order_acquire))
        return true;
    }
  }

  // A remove has won the key (current frozen): "inserted" -> "intention to delete", the node
  // durably deleted (one fence), -> "deleted". Run by the winner and by anyone who finds it. A
  // version the key's last replacement left live is deleted durably first (its own fence): were
  // the two deletions to share a fence, a crash could keep the newer one's alone and bring the
  // older value back.
  static void help_remove(Word& next, Key key) {
    std::uintptr_t word = next.load(std::memory_order_acquire);
    while (state_of(word) == inserted) {
      const std::uintptr_t intent = (word & ~state_mask) | intend_to_delete;
      if (next.compare_exchange_weak(word, intent, std::memory_order_acq_rel,
                                     std::memory_order_acquire))
        word = intent;
    }
    if (state_of(word) != intend_to_delete) return;  // deleted already
    // Frozen, so stable: stale is final (Key).
    const std::uintptr_t live = key.current.load(std::memory_order_acquire) & ~frozen_tag;
    if (const std::uintptr_t stale = key.stale.load(std::memory_order_acquire); stale != 0)
      pnode_of(stale)->destroy(validity_of(stale));
    pnode_of(live)->destroy(validity_of(live));
    while (state_of(word) == intend_to_delete) {
      if (next.compare_exchange_weak(word, (word & ~state_mask) | deleted,
                                     std::memory_order_acq_rel, std::memory_order_acquire))
        break;
    }
  }

  // A retired (removed, so frozen) node's deleter: frees its current and stale blocks.
  void free_blocks(std::uintptr_t current, std::uintptr_t stale) {
    allocator_.free(pnode_of(current & ~frozen_tag));
    if (stale != 0) allocator_.free(pnode_of(stale));
  }

  // ---- recovery (§4.6 with the three additions above) -----------------------------------------

  // A live persistent node the scan found.
  template <class Order>
  struct Live {
    std::uint64_t hash;
    std::uint64_t version;
    std::uintptr_t word;  // PNode* | pValidity
    std::size_t body;     // its key and value bytes
    Order order;          // the map's own sort key (the hash map's bucket, the ordered map's
                          // ByteKeyOrder)
  };

  // Quiescent, single-threaded, at open: scans every block and returns the live ones (flags,
  // sizes within the block, checksum), in the map's order (by `order`, then less_key), one per
  // key: of two live versions of one key (a replacement the crash interrupted) it keeps the
  // higher and durably deletes the other (else it would come back once the kept one is
  // removed). order_of(hash, key) is the map's sort key; less_key(a, b) orders two Lives of
  // equal `order` (the hash map: by hash, then bytes; the ordered map: by bytes).
  template <class OrderOf, class LessKey,
            class Order = std::invoke_result_t<OrderOf&, std::uint64_t, std::string_view>>
  std::vector<Live<Order>> recover_live(RecoveryStats& stats, OrderOf&& order_of,
                                        LessKey&& less_key) {
    std::vector<Live<Order>> found;
    std::string body;
    allocator_.recover([&](void* slot, std::size_t size) {
      ++stats.slots_scanned;
      auto* p = static_cast<PNode*>(slot);
      std::uint64_t h = 0;
      if (!live(p, size, body, h)) return false;
      found.push_back({h, p->version.load(std::memory_order_relaxed),
                       reinterpret_cast<std::uintptr_t>(p) |
                           (p->valid_start.load(std::memory_order_relaxed) != 0),
                       body.size(),
                       order_of(h, std::string_view(body.data(),
                                                    p->key_size.load(std::memory_order_relaxed)))});
      return true;
    });
    // The highest version of a key first.
    std::sort(found.begin(), found.end(), [&](const Live<Order>& a, const Live<Order>& b) {
      if (a.order != b.order) return a.order < b.order;
      if (less_key(a, b)) return true;
      if (less_key(b, a)) return false;
      return a.version > b.version;
    });
    bool wrote = false;
    std::size_t kept = 0;
    std::string ka, kb;
    for (std::size_t i = 0; i < found.size(); ++i) {
      if (i > 0 && found[i].hash == found[kept - 1].hash) {
        read_key(pnode_of(found[i].word), ka);
        read_key(pnode_of(found[kept - 1].word), kb);
        if (ka == kb) {  // an older version of the key kept just before
          ++stats.duplicate_keys;
          PNode* p = pnode_of(found[i].word);
          p->deleted.store(static_cast<std::uint8_t>(validity_of(found[i].word)),
                           std::memory_order_release);
          // The crash lab rarely reaches this (a crash between a replacement's fences, then a
          // remove of that key, then a crash).
          // Mutant killed by test: soft_string_recovery_sim_test
          // SoftStringRecovery/*.AnOlderVersionDeletedAtRecoveryStaysDeletedAfterACrash
          pm::flush(p);
          wrote = true;
          allocator_.free(p);
          continue;
        }
      }
      found[kept++] = found[i];
    }
    // The older versions are durably deleted before any operation (the flush's case above).
    // Mutant killed by test: soft_string_recovery_sim_test
    // SoftStringRecovery/*.AnOlderVersionDeletedAtRecoveryStaysDeletedAfterACrash
    if (wrote) pm::fence();
    found.resize(kept);
    stats.live_slots = kept;
    stats.freed_slots = stats.slots_scanned - kept;
    return found;
  }

 private:
  // Whether slot (of `size` bytes) holds a live node: flags, sizes within the block, checksum.
  static bool live(const PNode* p, std::size_t size, std::string& body, std::uint64_t& hash) {
    const std::uint8_t s = p->valid_start.load(std::memory_order_relaxed);
    if (s != p->valid_end.load(std::memory_order_relaxed) ||
        s == p->deleted.load(std::memory_order_relaxed))
      return false;
    const std::size_t ks = p->key_size.load(std::memory_order_relaxed);
    const std::size_t vs = p->value_size.load(std::memory_order_relaxed);
    if (ks > soft_string_max_key_size || vs > soft_string_max_value_size ||
        sizeof(PNode) + ks + vs > size)
      return false;
    body.resize(ks + vs);
    pm::read(body.data(), p->bytes(), body.size());
    hash = hash_of(std::string_view(body.data(), ks));
    return p->checksum.load(std::memory_order_relaxed) ==
           PNode::body_checksum(hash, p->version.load(std::memory_order_relaxed),
                                std::string_view(body.data() + ks, vs));
  }

  const char* name_;
  pm::ChunkAllocator& allocator_;
  reclaim::EpochDomain& domain_;
  // Version records come from a slab, not glibc's malloc: free() then writes nothing into a
  // record (a retired one is in no cache by then) and takes no lock. The map drains domain_
  // before this slab goes. Under perf (overwrite, 1M keys, 100-byte values) a record's retire
  // deleter took 9% of the samples and glibc's free 4%. With the slab, the same 5-round
  // comparison as Block's gave overwrite 1.21 [1.16-1.37] / 1.16 [1.12-1.32] and 1.29
  // [1.06-1.35] / 1.36 [1.25-1.65]; fillrandom 1.13-1.17.
  NodeSlab<Version> records_;
};

}  // namespace pmds::linkfree_soft::detail
