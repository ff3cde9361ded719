/// \file
/// The general Izraelevitz transformation of the lock-free algorithms of algo/ (every shared
/// access flushed and fenced), by their public names, with open_or_create (pmds/open.hpp):
/// durable, but one to two orders of magnitude slower than the paper-specific techniques.
#pragma once

#include <string_view>

#include "pmds/algo/atomic_float.hpp"
#include "pmds/algo/harris_michael_list.hpp"
#include "pmds/algo/michael_hash.hpp"
#include "pmds/algo/ms_queue.hpp"
#include "pmds/algo/natarajan_mittal_bst.hpp"
#include "pmds/algo/policy.hpp"
#include "pmds/algo/skip_list.hpp"
#include "pmds/algo/treiber_stack.hpp"
#include "pmds/open.hpp"

namespace pmds {

using IzraelevitzList = algo::HarrisMichaelList<algo::izraelevitz>;    // list/izraelevitz
using IzraelevitzHashSet = algo::MichaelHashTable<algo::izraelevitz>;  // hash/izraelevitz
using IzraelevitzSkipList = algo::SkipList<algo::izraelevitz>;         // skiplist/izraelevitz
using IzraelevitzTree = algo::NatarajanMittalTree<algo::izraelevitz>;  // bst/izraelevitz
using IzraelevitzQueue = algo::MichaelScottQueue<algo::izraelevitz>;   // queue/izraelevitz
using IzraelevitzStack = algo::TreiberStack<algo::izraelevitz>;        // stack/izraelevitz
using IzraelevitzAtomicFloat = algo::AtomicFloat<algo::izraelevitz>;   // register/izraelevitz

template <>
inline constexpr std::string_view pool_layout<IzraelevitzList> = "list/izraelevitz";
template <>
inline constexpr std::string_view pool_layout<IzraelevitzHashSet> = "hash/izraelevitz";
template <>
inline constexpr std::string_view pool_layout<IzraelevitzSkipList> = "skiplist/izraelevitz";
template <>
inline constexpr std::string_view pool_layout<IzraelevitzTree> = "bst/izraelevitz";
template <>
inline constexpr std::string_view pool_layout<IzraelevitzQueue> = "queue/izraelevitz";
template <>
inline constexpr std::string_view pool_layout<IzraelevitzStack> = "stack/izraelevitz";
template <>
inline constexpr std::string_view pool_layout<IzraelevitzAtomicFloat> = "register/izraelevitz";

}  // namespace pmds
