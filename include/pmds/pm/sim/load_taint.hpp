// pmds — the Px86 simulator's load-taint diagnostic (docs/ARCHITECTURE.md §3, "a thread acting
// on a value it read that is not yet durable"), counted by sim::warning_count().
//
// When a thread loads bytes last written by ANOTHER thread's store that is not yet certainly
// durable, the simulator remembers that store; if at this thread's next recorded store or RMW
// (after the RMW's own fence effect) the remembered store is still not durable and lies on
// another line, warning_count() grows by one. It is a heuristic: it over-approximates "acting on"
// (the later store need not depend on the value) and looks only at the next act; it never
// changes the model.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "pmds/pm/sim/state.hpp"

namespace pmds::pm::sim::detail {

// A thread remembers at most this many loaded-but-not-durable stores for the diagnostic.
inline constexpr std::size_t max_taints = 64;

// Is the store (line, seq) still not certainly durable?
inline bool undetermined(const State& s, std::uintptr_t line, std::uint64_t seq) {
  auto it = s.lines.find(line);
  return it != s.lines.end() && it->second.stores.front().seq <= seq;
}

// This thread is about to act (store or RMW) on acting_line: report loaded values that are still
// not durable. A value on the same line is safe: a later store to a line persists only after
// every earlier one.
inline void check_taints(State& s, ThreadState& ts, std::uintptr_t acting_line) {
  for (const Taint& t : ts.taints)
    if (t.line != acting_line && undetermined(s, t.line, t.seq)) ++s.warnings;
  ts.taints.clear();
}

// This thread read [a, a+n): remember the latest overlapping not-yet-durable store by another
// thread, per line.
inline void note_load(State& s, std::uintptr_t a, std::size_t n) {
  if (!s.warning_tracking || s.lines.empty()) return;
  const std::uintptr_t end = a + n;
  for (std::uintptr_t line = a & line_mask; line < end; line += cache_line_size) {
    auto it = s.lines.find(line);
    if (it == s.lines.end()) continue;
    const std::size_t lo = std::max(a, line) - line;
    const std::size_t hi = std::min(end, line + cache_line_size) - line;
    ThreadState* me = this_thread_if_any();
    const std::uint32_t my_id = me != nullptr ? me->id : 0;
    const std::vector<Store>& stores = it->second.stores;
    for (auto st = stores.rbegin(); st != stores.rend(); ++st) {
      if (st->writer == my_id || st->offset >= hi || st->offset + st->len <= lo) continue;
      ThreadState& ts = this_thread(s);
      if (ts.taints.size() >= max_taints) ts.taints.erase(ts.taints.begin());
      ts.taints.push_back({line, st->seq});
      break;
    }
  }
}

}  // namespace pmds::pm::sim::detail
