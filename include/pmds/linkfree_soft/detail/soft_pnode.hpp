// pmds::linkfree_soft — what the SOFT list, hash set and skip list share (Zuriel et al.
// §2.3, §4, §5):
//   SoftPNode       the persistent node in a durable area (a 64-byte slot of the pool allocator);
//   SoftState       the four states of a volatile node, kept in the low bits of its next word;
//   recover_soft_pnodes  the recovery scan of every durable area (no flush).
//
// ---- The PNode's validity scheme (§4.1), and one generalisation --------------------------------
// Three flags, validStart, validEnd and deleted. A PNode is live (in the set after a crash) iff
// validStart == validEnd != deleted. The paper allocates with pValidity = !validStart, which is
// right for the slot states its own runs leave (all three flags equal: "valid and removed"), and
// create() flips validStart, writes key and value, then flips validEnd: in between the node is
// invalid. But recovery (§4.6) returns INVALID PNodes to the free lists too, i.e. slots left
// half-created by a crash: validStart = !x, validEnd = deleted = x. Reusing such a slot with
// pValidity = !validStart = x would make create() store validStart = x (all three flags now x),
// and its final validEnd = x leaves the node "valid and removed": a completed insert that
// recovery would drop. So we choose pValidity = !deleted, which equals the paper's choice for
// every all-equal slot and is also right for a half-created one. The one slot state it cannot
// start from is validEnd == !deleted (a live-looking slot: only a recovery that freed a
// duplicate key leaves one, see recover_soft_pnodes); prepare() first flips validEnd back to
// deleted there. All these stores are to the one cache line of the slot, so they reach the
// NVRAM in program order (Zuriel et al. §1, the same-line argument; docs/ARCHITECTURE.md §3) and
// need no fence between them; prepare() runs before the node is published, so no other thread
// writes it yet.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "pmds/faults.hpp"
#include "pmds/follow_link.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/linkfree_soft/detail/set_root.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/allocator.hpp"

namespace pmds::linkfree_soft {

namespace detail {

// ---- The persistent node (Zuriel et al. Listing 6) -------------------------------------------
// Within one cache line: the three flags, key and value must share a line for create()'s and
// destroy()'s store order to be the order in which they can reach the NVRAM. 32 bytes aligned
// to 32 (never straddling two lines), two to a line, as in Zuriel et al.'s artifact: half the pool
// bytes of a line per key (hash/soft at 1M keys: 80 bytes per key, pool and DRAM, against 112).
struct alignas(32) SoftPNode {
  pm::atomic<std::uint8_t> valid_start;
  pm::atomic<std::uint8_t> valid_end;
  pm::atomic<std::uint8_t> deleted;
  pm::atomic<Key> key;
  pm::atomic<Value> value;

  // The recovery rule (§4.6): valid (validStart == validEnd) and not deleted.
  bool live() const {
    const std::uint8_t s = valid_start.load(std::memory_order_relaxed);
    return s == valid_end.load(std::memory_order_relaxed) &&
           s != deleted.load(std::memory_order_relaxed);
  }

  // The allocation step (Listing 7's alloc, generalised: see the header comment). Called by the
  // allocating thread on a slot nobody else can see yet; returns pValidity.
  template <FaultPolicy Faults = NoFaults>
  bool prepare() {
    if constexpr (Faults::planted == Fault::alloc_by_valid_start)
      return valid_start.load(std::memory_order_relaxed) == 0;
    const std::uint8_t d = deleted.load(std::memory_order_relaxed);
    const std::uint8_t validity = d ^ 1;
    if (valid_end.load(std::memory_order_relaxed) == validity) {
      // A live-looking slot that recovery freed: make it invalid before any other store, so no
      // crash image shows it live with a half-written key. Same line: ordered, no fence needed.
      valid_end.store(d, std::memory_order_release);
    }
    return validity != 0;
  }

  // Listing 7's create: validStart, key, value, validEnd, then one psync. Idempotent for a given
  // (key, value, validity), so helpers may run it concurrently with the inserter (§4.4).
  template <FaultPolicy Faults = NoFaults>
  void create(Key k, Value v, bool validity, pm::Site site = pm::Site::current()) {
    const auto p = static_cast<std::uint8_t>(validity);
    valid_start.store(p, std::memory_order_release);
    // release: the key and value stores are not moved before validStart (same line, so they
    // also reach the NVRAM after it), and validEnd not before them.
    key.store(k, std::memory_order_release);
    value.store(v, std::memory_order_release);
    valid_end.store(p, std::memory_order_release);
    // The one fence of an insert (§2.3: SOFT's bound).
    if constexpr (Faults::planted == Fault::create_without_flush)
      pm::fence(site);
    else
      pm::persist(this, sizeof *this, site);
  }

  // Listing 7's destroy: the deleted flag, then one psync. Afterwards all three flags equal
  // pValidity: "valid and removed", exactly the state of a freshly allocated slot.
  void destroy(bool validity, pm::Site site = pm::Site::current()) {
    deleted.store(static_cast<std::uint8_t>(validity), std::memory_order_release);
    pm::persist(this, sizeof *this, site);  // the one fence of a remove
  }
};
static_assert(sizeof(SoftPNode) == 32 && alignof(SoftPNode) == 32);

// The slot size SOFT asks the pool allocator for: slots of a size class are consecutive from a
// chunk's line-aligned start, so 32-byte slots are 32-aligned.
inline constexpr std::size_t soft_slot_size = sizeof(SoftPNode);

// ---- The four states of a volatile node (§2.3, §4.2) -----------------------------------------
// A node's state lives in the two low bits of its own next word (the successor pointer), so the
// state and the link change together in one CAS, as Harris's mark does.
enum SoftState : std::uintptr_t {
  inserted = 0,          // in the set; its PNode is durable
  intend_to_insert = 1,  // linked, not yet in the set; its PNode may not be durable yet
  intend_to_delete = 2,  // still in the set; its removal may not be durable yet
  deleted = 3,           // not in the set; its PNode is durably deleted; may be unlinked
};
inline constexpr std::uintptr_t state_mask = 3;

inline SoftState state_of(std::uintptr_t word) {
  return static_cast<SoftState>(word & state_mask);
}
// A branch, not a mask: most words a search reads are `inserted` (0), pmds/follow_link.hpp.
template <class Node>
Node* node_of(std::uintptr_t word) {
  return follow_link<Node>(word, state_mask);
}
template <class Node>
std::uintptr_t make_word(Node* n, SoftState s) {
  return reinterpret_cast<std::uintptr_t>(n) | s;
}

// A volatile node's pointer to its PNode with pValidity in bit 0 (PNodes are 32-aligned):
// keeps a list node at 32 bytes, malloc's 48-byte block (Zuriel et al. §6 notes SOFT's larger
// volatile nodes cost it cache misses).
inline std::uintptr_t pack_pnode(SoftPNode* p, bool validity) {
  return reinterpret_cast<std::uintptr_t>(p) | static_cast<std::uintptr_t>(validity);
}
inline SoftPNode* pnode_of(std::uintptr_t packed) {
  return reinterpret_cast<SoftPNode*>(packed & ~std::uintptr_t{1});
}
inline bool validity_of(std::uintptr_t packed) {
  return (packed & 1) != 0;
}

// ---- Recovery (§4.6, §5) ----------------------------------------------------------------------

// A live PNode found by the scan.
struct LivePNode {
  Key key;
  Value value;
  std::uintptr_t pnode;  // pack_pnode(slot, validStart)
};

// The live PNodes of a recovery, grouped: group g (a hash set's bucket g; the only group of a
// list or skip list) is nodes[begin[g], begin[g + 1]), in ascending key order.
struct RecoveredPNodes {
  std::vector<LivePNode> nodes;
  std::vector<std::size_t> begin;  // group_count + 1 offsets
};

// The durable areas are the pool allocator's 64-byte slots. Scans every slot once: a live PNode
// (by the rule above, or by the planted bug's) is kept, every other slot goes back to the free
// lists. The kept ones are grouped by group_of(key) in [0, group_count) with a counting sort
// (a hash set then fills its buckets in array order, with no global sort and no cache miss per
// key on the bucket array) and sorted by key within each group. Two live PNodes with one key
// cannot arise from SOFT (a key's new PNode is created only after its old one is durably
// deleted); if the pool holds them anyway, the first in slot order is kept and the others are
// freed (counted in duplicate_keys). A freed duplicate still looks live in the pool until its
// slot is reused (recovery writes nothing; prepare() invalidates it first), so a later recovery
// counts it again. Quiescent and single-threaded; writes nothing persistent,
// so no flush, and restartable after a crash during it.
template <FaultPolicy Faults, class GroupOf>
RecoveredPNodes recover_soft_pnodes(pm::ChunkAllocator& allocator, RecoveryStats& stats,
                                    std::size_t group_count, GroupOf group_of) {
  std::vector<LivePNode> scanned;  // in slot order (chunks are scanned in address order)
  allocator.recover([&](void* slot, std::size_t size) {
    if (size != soft_slot_size) return false;  // not a SOFT slot (a pool holds one structure)
    ++stats.slots_scanned;
    const auto* p = static_cast<const SoftPNode*>(slot);
    const std::uint8_t s = p->valid_start.load(std::memory_order_relaxed);
    bool keep;
    if constexpr (Faults::planted == Fault::recovery_keeps_deleted) {
      keep = s == p->valid_end.load(std::memory_order_relaxed);
    } else {
      keep = p->live();
    }
    if (!keep) return false;
    const Key k = p->key.load(std::memory_order_relaxed);
    // A live PNode always holds a user key (insert checks it); a slot that never held a node
    // reads as zeros and is not live. Anything else is not ours to link.
    if (is_reserved_key(k)) return false;
    scanned.push_back({k, p->value.load(std::memory_order_relaxed),
                       pack_pnode(const_cast<SoftPNode*>(p), s != 0)});
    return true;
  });

  RecoveredPNodes out;
  out.begin.assign(group_count + 1, 0);
  if (group_count == 1) {
    out.nodes = std::move(scanned);
  } else {
    for (const LivePNode& n : scanned) ++out.begin[group_of(n.key) + 1];
    for (std::size_t g = 0; g < group_count; ++g) out.begin[g + 1] += out.begin[g];
    out.nodes.resize(scanned.size());
    std::vector<std::size_t> next(out.begin.begin(), out.begin.end() - 1);
    for (const LivePNode& n : scanned) out.nodes[next[group_of(n.key)]++] = n;  // stable
    scanned = {};
  }
  out.begin[group_count] = out.nodes.size();

  // Within each group: by key, then by address (= slot order), so that among duplicates the
  // first in slot order comes first and is kept.
  const auto by_key = [](const LivePNode& a, const LivePNode& b) {
    return a.key != b.key ? a.key < b.key : a.pnode < b.pnode;
  };
  std::size_t kept = 0;
  for (std::size_t g = 0; g < group_count; ++g) {
    const std::size_t first = out.begin[g], last = out.begin[g + 1];
    LivePNode* range = out.nodes.data() + first;
    const std::size_t n = last - first;
    if (n > 16) {
      std::sort(range, range + n, by_key);
    } else {
      for (std::size_t i = 1; i < n; ++i)  // a bucket holds a key or two: insertion sort
        for (std::size_t j = i; j > 0 && by_key(range[j], range[j - 1]); --j)
          std::swap(range[j], range[j - 1]);
    }
    out.begin[g] = kept;
    for (std::size_t i = 0; i < n; ++i) {
      if (i > 0 && range[i].key == range[i - 1].key) {
        ++stats.duplicate_keys;
        allocator.free(pnode_of(range[i].pnode));  // prepare() makes it invalid before reuse
        continue;
      }
      out.nodes[kept++] = range[i];  // compacts in place: kept <= first + i
    }
  }
  out.begin[group_count] = kept;
  out.nodes.resize(kept);
  stats.live_slots = kept;
  stats.freed_slots = stats.slots_scanned - kept;
  return out;
}

}  // namespace detail
}  // namespace pmds::linkfree_soft
