/// \file
/// The nbMontage structures (Cai et al., DISC 2021) by their public names, with
/// open_or_create (pmds/open.hpp): buffered durable linearizability. No flush or fence on an
/// operation's critical path; a crash loses at most the operations of the last two epochs (10 ms
/// each by default), and sync() returns once everything before it is durable.
#pragma once

#include <string_view>

#include "pmds/montage/hash_map.hpp"
#include "pmds/montage/natarajan_mittal_bst.hpp"
#include "pmds/montage/queue.hpp"
#include "pmds/montage/skip_list.hpp"
#include "pmds/montage/split_ordered_hash.hpp"
#include "pmds/open.hpp"
#include "pmds/range.hpp"

namespace pmds {

using MontageHashMap = montage::HashMap<>;           // hash/montage
using MontageSkipList = montage::SkipList<>;         // skiplist/montage (ordered, range, scan)
using MontageTree = montage::NatarajanMittalTree<>;  // bst/montage
using MontageSplitOrderedHashMap = montage::SplitOrderedHashMap<>;  // hash-so/montage (grows)
using MontageQueue = montage::Queue<>;                              // queue/montage
// Byte-string keys and values (pmds::ByteStringMap).
using MontageByteStringHashMap = montage::ByteStringHashMap<>;    // hash-bytes/montage
using MontageByteStringSkipList = montage::ByteStringSkipList<>;  // skiplist-bytes/montage

/// Buffered (durable after sync()); 8-byte keys and values, hashed; nbMontage.
using BufferedHashMap = MontageHashMap;
/// Buffered (durable after sync()); byte strings, hashed; nbMontage.
using BufferedStringHashMap = MontageByteStringHashMap;

template <>
inline constexpr std::string_view pool_layout<MontageHashMap> = "hash/montage";
template <>
inline constexpr std::string_view pool_layout<MontageSkipList> = "skiplist/montage";
template <>
inline constexpr std::string_view pool_layout<MontageTree> = "bst/montage";
template <>
inline constexpr std::string_view pool_layout<MontageSplitOrderedHashMap> = "hash-so/montage";
template <>
inline constexpr std::string_view pool_layout<MontageQueue> = "queue/montage";
template <>
inline constexpr std::string_view pool_layout<MontageByteStringHashMap> = "hash-bytes/montage";
template <>
inline constexpr std::string_view pool_layout<MontageByteStringSkipList> = "skiplist-bytes/montage";

}  // namespace pmds
