/// \file
/// Mirror (Friedman et al., PLDI 2021) applied to the lock-free algorithms of algo/,
/// by their public names, with open_or_create (pmds/open.hpp): durable linearizability, each
/// shared word a patomic pair (one replica in the pool, one in DRAM that reads go to); updates
/// pay one write-back and fence, reads none.
#pragma once

#include <string_view>

#include "pmds/algo/atomic_float.hpp"
#include "pmds/algo/harris_michael_list.hpp"
#include "pmds/algo/michael_hash.hpp"
#include "pmds/algo/ms_queue.hpp"
#include "pmds/algo/natarajan_mittal_bst.hpp"
#include "pmds/algo/skip_list.hpp"
#include "pmds/algo/treiber_stack.hpp"
#include "pmds/mirror/policy.hpp"
#include "pmds/open.hpp"

namespace pmds {

using MirrorList = algo::HarrisMichaelList<mirror::MirrorPolicy<>>;    // list/mirror
using MirrorHashSet = algo::MichaelHashTable<mirror::MirrorPolicy<>>;  // hash/mirror
using MirrorSkipList = algo::SkipList<mirror::MirrorPolicy<>>;         // skiplist/mirror
using MirrorTree = algo::NatarajanMittalTree<mirror::MirrorPolicy<>>;  // bst/mirror
using MirrorQueue = algo::MichaelScottQueue<mirror::MirrorPolicy<>>;   // queue/mirror
using MirrorStack = algo::TreiberStack<mirror::MirrorPolicy<>>;        // stack/mirror
using MirrorAtomicFloat = algo::AtomicFloat<mirror::MirrorPolicy<>>;   // register/mirror

template <>
inline constexpr std::string_view pool_layout<MirrorList> = "list/mirror";
template <>
inline constexpr std::string_view pool_layout<MirrorHashSet> = "hash/mirror";
template <>
inline constexpr std::string_view pool_layout<MirrorSkipList> = "skiplist/mirror";
template <>
inline constexpr std::string_view pool_layout<MirrorTree> = "bst/mirror";
template <>
inline constexpr std::string_view pool_layout<MirrorQueue> = "queue/mirror";
template <>
inline constexpr std::string_view pool_layout<MirrorStack> = "stack/mirror";
template <>
inline constexpr std::string_view pool_layout<MirrorAtomicFloat> = "register/mirror";

}  // namespace pmds
