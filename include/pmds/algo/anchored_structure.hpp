// pmds — AnchoredStructure<P>: the life cycle every algo/ structure shares, written once.
//
// A structure S<P> in algo/ derives from AnchoredStructure<P>, which holds its memory (P::Memory)
// and does what is the same in every structure around the algorithm:
//   - the constructors' convention (the one every durable structure in pmds follows):
//       S<transient> s(args...);               in DRAM
//       S<durable>   s(create_new, pool, args...);   a new structure in an unused pool
//       S<durable>   s(open_existing, pool);         the structure a pool holds, recovered
//   - creation: the anchor (the structure's root node, whose first word names its kind) is
//     built, published and made the pool's root — create_anchor();
//   - opening: the root is found, the anchor visited before it is read, its kind checked, and
//     the recovery trace handed to the structure to trace the rest — open_anchor();
//   - drain(), memory() and, durable, recovery_stats().
// The structure keeps its algorithm and its own recovery walk (which nodes it reaches and what it
// finishes for a crashed operation): those differ from one algorithm to the next.
//
// A pool holds one algo/ structure: the allocator's recovery is pool-wide (every slot the trace
// does not reach is freed), so the anchor is always in root slot 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>

#include "pmds/algo/policy.hpp"
#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/pm/pool.hpp"

namespace pmds::algo {

template <class P>
requires MemoryPolicy<P>
class AnchoredStructure {
 public:
  using Policy = P;
  static constexpr std::size_t root_slot = 0;

  AnchoredStructure(const AnchoredStructure&) = delete;
  AnchoredStructure& operator=(const AnchoredStructure&) = delete;

  // Quiescent: frees every retired node now.
  void drain() { mem_.drain(); }
  typename P::Memory& memory() { return mem_; }
  // What the recovery that opened this structure found (zeros for a structure created new).
  const RecoveryStats& recovery_stats() const requires(P::durable) { return mem_.recovery_stats(); }

 protected:
  AnchoredStructure() requires(!P::durable) = default;
  // A new structure: throws PoolError before anything is allocated if the pool already holds
  // one.
  AnchoredStructure(CreateTag, pm::Pool& pool) requires(P::durable) : mem_(pool, root_slot) {
    if (mem_.root() != nullptr)
      throw PoolError(PoolErrc::bad_argument, "pmds: pool " + pool.path() +
                                                  " already holds a structure (root slot " +
                                                  std::to_string(root_slot) + ")");
  }
  // The structure a pool holds: its constructor body calls open_anchor().
  AnchoredStructure(OpenTag, pm::Pool& pool) requires(P::durable) : mem_(pool, root_slot) {}
  ~AnchoredStructure() = default;

  // A new structure's anchor: it gets its kind, then init(anchor) initialises the other fields
  // (with init(): the anchor is private until set_root); its contents are durable before the
  // root that makes it reachable. The structure's other nodes are built (and published) first.
  template <class Anchor, class Init>
  Anchor* create_anchor(std::uint64_t kind, Init&& init) {
    Anchor* anchor = new (mem_.allocate(sizeof(Anchor))) Anchor;
    anchor->kind.init(kind);
    init(*anchor);
    mem_.publish(anchor, sizeof(Anchor));
    mem_.set_root(anchor);
    return anchor;
  }

  // The structure a pool holds: returns its anchor through `anchor` and the recovery trace, the
  // anchor already visited (before it is read: Mirror's visit copies the persistent replica
  // first). The caller visits every node it reaches, then calls trace.finish(). Throws a
  // PoolError if the pool holds no structure or another kind of structure.
  template <class Anchor>
  auto open_anchor(Anchor*& anchor, std::uint64_t kind,
                   const char* structure) requires(P::durable) {
    if (mem_.root() == nullptr)
      throw PoolError(PoolErrc::bad_argument,
                      "pmds: pool " + mem_.pool().path() +
                          " holds no structure (never created, or its creation did not finish)");
    anchor = static_cast<Anchor*>(mem_.root());
    auto trace = mem_.begin_recovery(structure);
    trace.visit(anchor);
    if (anchor->kind.peek() != kind)
      throw PoolError(PoolErrc::layout_mismatch, std::string("pmds: the structure in pool ") +
                                                     mem_.pool().path() + " is not a " + structure);
    return trace;
  }

  typename P::Memory mem_;
};

}  // namespace pmds::algo
