/// \file
/// Persistent software combining (Fatourou et al.) by its public names, with
/// open_or_create (pmds/open.hpp): detectable recoverability. Each operation may carry a Ticket
/// {slot, seq}; after a crash, recover_pending(ticket) says whether it took effect and its
/// response, and invoking it again with the same ticket completes it exactly once.
#pragma once

#include <string_view>

#include "pmds/combining/atomic_float.hpp"
#include "pmds/combining/heap.hpp"
#include "pmds/combining/pbcomb.hpp"
#include "pmds/combining/pwfcomb.hpp"
#include "pmds/combining/queue.hpp"
#include "pmds/combining/stack.hpp"
#include "pmds/combining/wait_free_queue.hpp"
#include "pmds/open.hpp"

namespace pmds {

using PBCombStack = combining::CombiningStack<combining::PBComb,
                                              combining::Persistence::detectable>;  // stack/pbcomb
using PBCombQueue = combining::CombiningQueue<combining::Persistence::detectable>;  // queue/pbcomb
using PBCombHeap =
    combining::CombiningHeap<combining::PBComb, combining::Persistence::detectable>;  // heap/pbcomb
using PBCombAtomicFloat =
    combining::CombiningAtomicFloat<combining::PBComb,
                                    combining::Persistence::detectable>;  // register/pbcomb
// The wait-free protocol.
using PWFCombStack =
    combining::CombiningStack<combining::PWFComb,
                              combining::Persistence::detectable>;  // stack/pwfcomb
using PWFCombQueue =
    combining::WaitFreeCombiningQueue<combining::Persistence::detectable>;  // queue/pwfcomb
using PWFCombHeap = combining::CombiningHeap<combining::PWFComb,
                                             combining::Persistence::detectable>;  // heap/pwfcomb
using PWFCombAtomicFloat =
    combining::CombiningAtomicFloat<combining::PWFComb,
                                    combining::Persistence::detectable>;  // register/pwfcomb

/// Detectable; a FIFO queue of 8-byte values; PBComb (Fatourou et al.).
using DetectableQueue = PBCombQueue;
/// Detectable; a LIFO stack of 8-byte values; PBComb (Fatourou et al.).
using DetectableStack = PBCombStack;
/// Detectable; a min-priority queue of 8-byte keys; PBComb (Fatourou et al.).
using DetectablePriorityQueue = PBCombHeap;

template <>
inline constexpr std::string_view pool_layout<PBCombStack> = "stack/pbcomb";
template <>
inline constexpr std::string_view pool_layout<PBCombQueue> = "queue/pbcomb";
template <>
inline constexpr std::string_view pool_layout<PBCombHeap> = "heap/pbcomb";
template <>
inline constexpr std::string_view pool_layout<PBCombAtomicFloat> = "register/pbcomb";
template <>
inline constexpr std::string_view pool_layout<PWFCombStack> = "stack/pwfcomb";
template <>
inline constexpr std::string_view pool_layout<PWFCombQueue> = "queue/pwfcomb";
template <>
inline constexpr std::string_view pool_layout<PWFCombHeap> = "heap/pwfcomb";
template <>
inline constexpr std::string_view pool_layout<PWFCombAtomicFloat> = "register/pwfcomb";

}  // namespace pmds
