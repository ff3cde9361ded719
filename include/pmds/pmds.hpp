/// \file
/// pmds — the public entry point for the common case: one durable structure in one pool file.
///
/// ```cpp
/// #include <pmds/pmds.hpp>
/// auto counts = pmds::open_or_create<pmds::LinkFreeHashSet>("kv.pool", 256 << 20);
/// counts->insert(42, 1);              // durable when it returns
/// if (counts.recovered()) ...         // the file existed: its contents were recovered
/// ```
///
/// `open_or_create<S>` works for every structure the family headers below name. It builds S with
/// S's own constructors and arguments (S(create_new, pool, args...), S(open_existing, pool)); the
/// pool's layout name is `pool_layout<S>`, the structure's name in `pmds list`, so a file made for
/// another structure is refused with PoolError (layout_mismatch) before anything is read, and `pmds
/// check` and `pmds dump` read a file made here. Errors are typed (error.hpp): PoolError for a bad
/// or mismatched file (its code() says which), PoolFull when the pool has no room left (the pool is
/// unchanged), ReservedKey for keys 0 and 2^64-1, TooManyThreads. The structure is destroyed and
/// the pool closed cleanly when the handle goes out of scope; after a crash or kill -9 the next
/// open_or_create recovers it (docs/ARCHITECTURE.md §5).
///
/// The pool grows on demand up to a limit (pmds::PoolGrowth; pmds/open.hpp says how).
///
/// This header includes every family of structures, each of which has a header of its own that
/// a program using only that family may include instead, to compile faster:
/// pmds/linkfree_soft.hpp (link-free and SOFT, Zuriel et al.), pmds/mirror.hpp (Mirror),
/// pmds/incll.hpp (InCLL's Masstree), pmds/montage.hpp (nbMontage), pmds/combining.hpp
/// (persistent combining, Fatourou et al.) and pmds/izraelevitz.hpp. Each names its
/// structures, their pool layouts and the contract names below that it provides, with
/// open_or_create (pmds/open.hpp). Nothing of the benchmark registry, the harness or the crash
/// lab is included (the registry is built on this header, registry.hpp).
#pragma once

#include "pmds/combining.hpp"
#include "pmds/error.hpp"
#include "pmds/incll.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/izraelevitz.hpp"
#include "pmds/linkfree_soft.hpp"
#include "pmds/mirror.hpp"
#include "pmds/montage.hpp"
#include "pmds/open.hpp"
#include "pmds/range.hpp"

// ---- Choose by contract ------------------------------------------------------------------------
// The same structures named by what a user gets: when an operation is durable, what the keys are,
// hashed or ordered. Each is the technique that measured best for that contract here (README,
// "Which map should I use", gives the figures and the papers); the paper-named types stay
// available.
//
// Durable on return (durable linearizability): a crash loses no operation that returned.
// Buffered (buffered durable linearizability): a crash loses at most the last epochs' operations
// (tens of milliseconds), never reorders them; sync() returns once everything before it is
// durable; no flush or fence on an operation's path.
// Detectable (detectable recoverability): after a crash, recover_pending(ticket) says whether an
// operation took effect and what it returned.
//
// The names, each defined in its family's header:
//   DurableHashMap (LinkFreeHashSet), DurableOrderedMap (SoftSkipList),
//   DurableStringHashMap (SoftStringHashMap),
//   DurableStringOrderedMap (SoftStringSkipList)                        pmds/linkfree_soft.hpp
//   BufferedHashMap (MontageHashMap),
//   BufferedStringHashMap (MontageByteStringHashMap)                    pmds/montage.hpp
//   BufferedOrderedMap (InCLLMasstree),
//   BufferedStringOrderedMap (InCLLStringMasstree)                      pmds/incll.hpp
//   DetectableQueue (PBCombQueue), DetectableStack (PBCombStack),
//   DetectablePriorityQueue (PBCombHeap)                                pmds/combining.hpp
