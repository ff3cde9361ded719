// pmds — persistence sites: where in the source a flush, fence, persist or non-temporal write is
// issued (docs/ARCHITECTURE.md §3, "Mutation: the lab measures itself").
//
// Every such access-layer call takes a trailing `Site site = Site::current()`. Under the
// simulated backend a Site is the caller's std::source_location, so the simulator can count each
// site's executions and turn one site into a no-op (a mutant) for `pmds crashtest --mutate`.
// Under the hardware and counting backends a Site is an empty struct: nothing is passed, nothing
// is stored, the instructions are exactly what they were.
//
// A helper that issues a persistence instruction on behalf of its callers (linkfree's
// flush_insert, the Izraelevitz policy's shared accesses) takes a Site too and passes it on, so
// the site is the line of the algorithm that asked for the instruction, not the helper's one
// line. A helper whose instruction is redundant for a reason that belongs to it, not to its
// caller, keeps its own site (the Izraelevitz policy's immutable loads, algo/policy.hpp).
#pragma once

#include <cstdint>

#if defined(PMDS_BACKEND_SIMULATED)
#include <source_location>
#endif

namespace pmds::pm {

// What a site issues. A persist site issues flushes and then a fence; it counts one execution
// per fence.
enum class SiteKind : std::uint8_t { flush, fence, persist, nontemporal };

constexpr const char* to_string(SiteKind k) {
  switch (k) {
    case SiteKind::flush:
      return "flush";
    case SiteKind::fence:
      return "fence";
    case SiteKind::persist:
      return "persist";
    case SiteKind::nontemporal:
      return "nontemporal";
  }
  return "?";
}

#if defined(PMDS_BACKEND_SIMULATED)
using Site = std::source_location;
#else
struct Site {
  static consteval Site current() noexcept { return {}; }
};
#endif

}  // namespace pmds::pm
