/// \file
/// The link-free and SOFT structures (Zuriel et al., OOPSLA 2019) by their public
/// names, with open_or_create (pmds/open.hpp): durable linearizability with one psync per
/// successful update; no links persisted (validity bits), recovery scans the durable areas.
/// Include this alone for a program that uses only them (it compiles in about half the time of
/// pmds/pmds.hpp, which includes every family).
#pragma once

#include <string_view>

#include "pmds/linkfree_soft/hash_set.hpp"
#include "pmds/linkfree_soft/linkfree_list.hpp"
#include "pmds/linkfree_soft/linkfree_skiplist.hpp"
#include "pmds/linkfree_soft/soft_list.hpp"
#include "pmds/linkfree_soft/soft_skiplist.hpp"
#include "pmds/linkfree_soft/soft_string_hash_map.hpp"
#include "pmds/linkfree_soft/soft_string_skiplist.hpp"
#include "pmds/open.hpp"
#include "pmds/range.hpp"

namespace pmds {

using LinkFreeList = linkfree_soft::LinkFreeList<>;          // list/linkfree
using LinkFreeHashSet = linkfree_soft::LinkFreeHashSet;      // hash/linkfree
using LinkFreeSkipList = linkfree_soft::LinkFreeSkipList<>;  // skiplist/linkfree
using SoftList = linkfree_soft::SoftList<>;                  // list/soft
using SoftHashSet = linkfree_soft::SoftHashSet<>;            // hash/soft
using SoftSkipList = linkfree_soft::SoftSkipList<>;          // skiplist/soft
// Byte-string keys and values (pmds::ByteStringMap) on SOFT's technique: one psync per insert and
// replacement and remove; update(key, fn) is an atomic read-modify-write.
using SoftStringHashMap = linkfree_soft::SoftStringHashMap;    // hash-bytes/soft
using SoftStringSkipList = linkfree_soft::SoftStringSkipList;  // skiplist-bytes/soft

/// Durable on return; 8-byte keys and values, hashed; link-free (Zuriel et al. §3).
using DurableHashMap = LinkFreeHashSet;
/// Durable on return; 8-byte keys and values, ordered, range and scan; SOFT (Zuriel et al. §4).
using DurableOrderedMap = SoftSkipList;
/// Durable on return; byte strings, hashed, update(); SOFT (Zuriel et al. §4).
using DurableStringHashMap = SoftStringHashMap;
/// Durable on return; byte strings, ordered, range and scan, update(); SOFT (Zuriel et al. §4).
using DurableStringOrderedMap = SoftStringSkipList;

template <>
inline constexpr std::string_view pool_layout<LinkFreeList> = "list/linkfree";
template <>
inline constexpr std::string_view pool_layout<LinkFreeHashSet> = "hash/linkfree";
template <>
inline constexpr std::string_view pool_layout<LinkFreeSkipList> = "skiplist/linkfree";
template <>
inline constexpr std::string_view pool_layout<SoftList> = "list/soft";
template <>
inline constexpr std::string_view pool_layout<SoftHashSet> = "hash/soft";
template <>
inline constexpr std::string_view pool_layout<SoftSkipList> = "skiplist/soft";
template <>
inline constexpr std::string_view pool_layout<SoftStringHashMap> = "hash-bytes/soft";
template <>
inline constexpr std::string_view pool_layout<SoftStringSkipList> = "skiplist-bytes/soft";

}  // namespace pmds
