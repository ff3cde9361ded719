/// \file
/// InCLL's Masstree (Cohen et al., ASPLOS 2019) by its public names, with
/// open_or_create (pmds/open.hpp): an ordered map with put, range and scan, checkpointed in
/// epochs (64 ms by default); a crash loses the operations of the epoch it hit, sync() ends the
/// epoch at once.
#pragma once

#include <string_view>

#include "pmds/incll/durable_masstree.hpp"
#include "pmds/open.hpp"
#include "pmds/range.hpp"

namespace pmds {

using InCLLMasstree = incll::InCLLMasstree<>;      // masstree/incll
using LoggingMasstree = incll::LoggingMasstree<>;  // masstree/logging (external log only)
// Byte-string keys and values (pmds::ByteStringMap), in pool blocks; recovered eagerly.
using InCLLStringMasstree = incll::InCLLStringMasstree<>;      // masstree-bytes/incll
using LoggingStringMasstree = incll::LoggingStringMasstree<>;  // masstree-bytes/logging

/// Buffered (durable after sync()); 8-byte keys and values, ordered, range and scan; InCLL.
using BufferedOrderedMap = InCLLMasstree;
/// Buffered (durable after sync()); byte strings, ordered, range and scan; InCLL.
using BufferedStringOrderedMap = InCLLStringMasstree;

template <>
inline constexpr std::string_view pool_layout<InCLLMasstree> = "masstree/incll";
template <>
inline constexpr std::string_view pool_layout<LoggingMasstree> = "masstree/logging";
template <>
inline constexpr std::string_view pool_layout<InCLLStringMasstree> = "masstree-bytes/incll";
template <>
inline constexpr std::string_view pool_layout<LoggingStringMasstree> = "masstree-bytes/logging";

}  // namespace pmds
