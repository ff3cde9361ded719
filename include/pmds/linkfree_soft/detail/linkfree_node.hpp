// pmds::linkfree_soft — the link-free node of Zuriel et al. §3 (Listing 1) and the rules every
// link-free structure (list, hash buckets, skip list) applies to it.
//
// One node per key, within one cache line (32 bytes for the list and the hash table, a whole
// line for the skip list), allocated from the pool's per-thread chunks (the durable areas of §5).
// Its persistent meaning, read by recovery from the durable image only:
//   validity  two validity bits v1 (bit 0) and v2 (bit 1) plus a constant tag in bits 2..7;
//             valid iff the tag is present and v1 == v2 (§2.2). A never-used slot reads zero:
//             no tag, so it is never taken for a node.
//   key, value
//   next      the level-0 successor with the Harris deletion mark in bit 0 (§3): a node is in
//             the set iff it is valid and its next is unmarked (§3.5).
// Everything else in the node is volatile in meaning, though it lives in the pool: the
// insert-flush and delete-flush flags (the link-and-persist extension, §2.2), the successor
// pointers themselves (never flushed: "link-free"), and the skip list's tower (levels 1..4 in
// the node's line, higher ones in the lines after it in the node's slot, a height and a
// build/remove handshake). Recovery rewrites them.
//
// Why within one line matters: stores to one line reach the NVRAM in program order (x86 TSO plus
// the same-line argument of §3.3/§3.4, docs/ARCHITECTURE.md §3), so no flush is needed between
// invalidating a node and initialising it, nor between making it valid and marking it: a crash
// image of the line is always a prefix of its stores.
//
// Invariants (§3): a node is invalid from its (re)initialisation until it is linked; it is made
// valid (by the inserter or by any helper) only after it is linked; a marked node is valid (the
// remover makes it valid before marking); a marked node is flushed before it is unlinked (trim),
// so an unlinked node's deletion is durable; every operation flushes what it reports (insert and
// contains returning true flush the node's insertion, remove and contains returning false flush
// the deletion they saw), using the flags to skip a flush someone already completed.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "pmds/faults.hpp"
#include "pmds/follow_link.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/pm/access.hpp"

namespace pmds::linkfree_soft {

namespace detail::linkfree {

inline constexpr std::uint8_t v1_bit = 1;
inline constexpr std::uint8_t v2_bit = 2;
inline constexpr std::uint8_t validity_tag = 0xA4;  // bits 2..7 = 101001
inline constexpr std::uint8_t tag_mask = 0xFC;

inline constexpr std::uint64_t mark_bit = 1;
inline constexpr bool is_marked(std::uint64_t p) {
  return (p & mark_bit) != 0;
}
inline constexpr std::uint64_t unmarked(std::uint64_t p) {
  return p & ~mark_bit;
}

// Skip-list tower handshake (volatile meaning): the node is retired by whichever of its inserter
// (done linking the upper levels) and its remover (done unlinking) finishes second.
inline constexpr std::uint8_t tower_built = 1;
inline constexpr std::uint8_t tower_removed = 2;
inline constexpr int inline_upper_levels = 4;  // levels 1..4 live in the node's own line

// The node of the list and the hash table: 32 bytes, aligned to 32 so that it never straddles
// two lines (the one-line argument above holds), two to a line. The artifact of Zuriel et al. uses
// the same size; a whole line per node doubled the pool's bytes per key, and a 1024-key list of
// lines (64 KiB) likely spilled out of a core's L1 (not measured apart).
struct alignas(32) ListNode {
  // --- persistent meaning -----------------------------------------------------------------
  pm::atomic<std::uint8_t> validity;
  // --- volatile meaning (rewritten by recovery) --------------------------------------------
  pm::atomic<std::uint8_t> insert_flushed;  // a psync completed after the node became valid
  pm::atomic<std::uint8_t> delete_flushed;  // a psync completed after the node was marked
  std::uint8_t unused_[5];
  // --- persistent meaning -----------------------------------------------------------------
  pm::atomic<Key> key;
  pm::atomic<Value> value;
  pm::atomic<std::uint64_t> next;  // marked pointer

  ListNode() = default;
  // A sentinel (DRAM only): never valid-checked, never marked, never flushed.
  // constexpr: the sentinel is constant-initialised (linkfree_list.hpp says why).
  constexpr explicit ListNode(Key k)
      : validity(0), insert_flushed(1), delete_flushed(0), unused_{}, key(k), value(0), next(0) {}
};
static_assert(sizeof(ListNode) == 32 && alignof(ListNode) == 32,
              "a link-free list node is half a cache line, never straddling two");

// The skip list's node: a whole line, the list node's fields at the same places, then levels
// 1..4 of its tower; a taller node's slot holds the rest of its tower in the lines after this one
// (LinkFreeSkipList::slot_size_for_height).
struct alignas(pm::cache_line_size) SkipListNode {
  // --- persistent meaning -----------------------------------------------------------------
  pm::atomic<std::uint8_t> validity;
  // --- volatile meaning (rewritten by recovery) --------------------------------------------
  pm::atomic<std::uint8_t> insert_flushed;
  pm::atomic<std::uint8_t> delete_flushed;
  pm::atomic<std::uint8_t> height;       // levels 0..height-1
  pm::atomic<std::uint8_t> tower_state;  // tower_built | tower_removed
  std::uint8_t unused_[3];
  // --- persistent meaning -----------------------------------------------------------------
  pm::atomic<Key> key;
  pm::atomic<Value> value;
  pm::atomic<std::uint64_t> next;  // level 0, marked pointer
  // --- volatile meaning: levels 1..4 (5.. follow the line, in the node's slot) -------------
  pm::atomic<std::uint64_t> upper[inline_upper_levels];

  SkipListNode() = default;
  // A sentinel (DRAM only): never valid-checked, never marked, never flushed.
  explicit SkipListNode(Key k) : validity(0), key(k), value(0), next(0) {
    insert_flushed.store(1, std::memory_order_relaxed);
    delete_flushed.store(0, std::memory_order_relaxed);
    height.store(0, std::memory_order_relaxed);
    tower_state.store(0, std::memory_order_relaxed);
    for (auto& u : upper) u.store(0, std::memory_order_relaxed);
  }
};
static_assert(sizeof(SkipListNode) == pm::cache_line_size, "a skip-list node is one cache line");
static_assert(alignof(SkipListNode) == pm::cache_line_size);

// The node a (possibly marked) successor word points to. A branch, not a mask: see
// pmds/follow_link.hpp (one cycle less per node of a search).
template <class N>
N* node_of(std::uint64_t p) {
  return follow_link<N>(p, mark_bit);
}
template <class N>
std::uint64_t word_of(const N* n) {
  return reinterpret_cast<std::uint64_t>(n);
}

// True when the validity byte says valid (tag present, v1 == v2).
inline constexpr bool validity_is_valid(std::uint8_t v) {
  return (v & tag_mask) == validity_tag && ((v & v1_bit) != 0) == ((v & v2_bit) != 0);
}

// flipV1 of §3.1, made safe for slot reuse: a slot from the allocator is either valid (a removed
// node: valid and marked; a never-used slot counts as valid with both bits 0) or already invalid
// (a node whose insert never linked it, or a slot recovery found invalid). Flip v1 only when
// valid, so an invalid slot stays invalid rather than flipping back to valid. Called before the
// node is published, and before the initialising stores (init_node), which are release stores
// so that neither the compiler nor the CPU moves one of them above it: all are in this line, so
// the NVRAM sees them in this order too (Zuriel et al. §3.3 "the subsequent memory fence").
template <class N>
void make_invalid(N* n) {
  std::uint8_t v = n->validity.load(std::memory_order_relaxed);
  if ((v & tag_mask) != validity_tag) v = validity_tag;  // never used: v1 == v2 == 0
  if (validity_is_valid(v)) n->validity.store(v ^ v1_bit, std::memory_order_relaxed);
}

// makeValid of §3.1: v2 := v1. Idempotent, so helpers may race on it (v1 does not change while
// the node is reachable: only a new allocation flips it, after reclamation).
template <class N>
void make_valid(N* n) {
  const std::uint8_t v = n->validity.load(std::memory_order_acquire);
  if (validity_is_valid(v)) return;
  const std::uint8_t valid = (v & v1_bit) != 0 ? (validity_tag | v1_bit | v2_bit) : validity_tag;
  n->validity.store(valid, std::memory_order_release);
}

// FLUSH_INSERT / FLUSH_DELETE of §3.1: psync the node unless someone already did since the
// insertion (deletion) was written; set the flag only after the psync completed. The psync's
// site is the caller's line (pm/site.hpp): each call is its own mutant in the crash lab.
template <class N>
void flush_insert(N* n, pm::Site site = pm::Site::current()) {
  if (n->insert_flushed.load(std::memory_order_acquire) != 0) return;
  pm::persist(n, sizeof(N), site);
  n->insert_flushed.store(1, std::memory_order_release);
}
template <class N>
void flush_delete(N* n, pm::Site site = pm::Site::current()) {
  if (n->delete_flushed.load(std::memory_order_acquire) != 0) return;
  pm::persist(n, sizeof(N), site);
  n->delete_flushed.store(1, std::memory_order_release);
}

// Recovery's question about a slot (its durable image): is this node in the set? (§3.5)
template <FaultPolicy Faults, class N>
bool is_live_image(const N* n) {
  if (!validity_is_valid(n->validity.load(std::memory_order_relaxed))) return false;
  const std::uint64_t next = n->next.load(std::memory_order_relaxed);
  // A linked node's successor is written before the node becomes valid (same line), so a valid
  // image with a null successor is a never-initialised slot, not a node.
  if (unmarked(next) == 0) return false;
  if constexpr (Faults::planted != Fault::recover_deleted) {
    if (is_marked(next)) return false;
  }
  return !is_reserved_key(n->key.load(std::memory_order_relaxed));
}

// Prepares a slot from the allocator for a new key (§3.3 lines 11-16, before the linking CAS).
// Not yet published. Release stores (plain movs on x86): each stays after the invalidation, in
// program order, all in the node's line; the linking CAS publishes them.
template <class N>
void init_node(N* n, Key k, Value v, std::uint64_t next) {
  make_invalid(n);
  n->key.store(k, std::memory_order_release);
  n->value.store(v, std::memory_order_release);
  n->insert_flushed.store(0, std::memory_order_release);
  n->delete_flushed.store(0, std::memory_order_release);
  n->next.store(next, std::memory_order_release);
}

// After recovery linked a live node: its content is durable (recovery reads only durable data),
// and no deletion of it has been written yet. Plain stores, no flush (§2.1).
template <class N>
void reset_recovered_flags(N* n) {
  n->insert_flushed.store(1, std::memory_order_relaxed);
  n->delete_flushed.store(0, std::memory_order_relaxed);
}

}  // namespace detail::linkfree
}  // namespace pmds::linkfree_soft
