// pmds — the Px86 model's steps on the simulator's records (pm/simulator.hpp states the model):
// a store recorded per line in visibility order, a flush left pending until its thread's next
// fence, a fence raising the floor of each line it drains, and the crash-point event counter.
//
// Invariant: a line's record keeps the stores above its floor in visibility order (seq
// ascending); raising the floor folds the stores below it into `base`, and a line with none left
// loses its record, so memory stays bounded by the stores not yet certainly durable.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "pmds/pm/backend.hpp"
#include "pmds/pm/instructions.hpp"
#include "pmds/pm/sim/load_taint.hpp"
#include "pmds/pm/sim/state.hpp"

namespace pmds::pm::sim::detail {

// A crash-point event is about to take effect (lock held).
inline void event(State& s) {
  if (s.events == s.crash_at) [[unlikely]] {
    std::function<void()> h = std::move(s.handler);
    s.handler = nullptr;
    s.crash_at = no_crash;
    h();
  }
  ++s.events;
}

// Drops a line's record (its stores are all durable now), keeping the node for reuse.
inline void retire_line(State& s, State::LineMap::iterator it) {
  constexpr std::size_t max_spare_lines = 64;
  if (s.spare_lines.size() >= max_spare_lines) {
    s.lines.erase(it);
    return;
  }
  State::LineMap::node_type node = s.lines.extract(it);
  node.mapped().stores.clear();
  node.mapped().bytes.clear();
  s.spare_lines.push_back(std::move(node));
}

// The record of line, created (with the line's current, durable, content as base) if absent.
inline Line& line_record(State& s, std::uintptr_t line) {
  auto it = s.lines.find(line);
  if (it != s.lines.end()) return it->second;
  if (!s.spare_lines.empty()) {
    State::LineMap::node_type node = std::move(s.spare_lines.back());
    s.spare_lines.pop_back();
    node.key() = line;
    it = s.lines.insert(std::move(node)).position;
  } else {
    it = s.lines.try_emplace(line).first;
  }
  std::memcpy(it->second.base.data(), reinterpret_cast<const void*>(line), cache_line_size);
  return it->second;
}

// Raises line's floor: every store to it with seq < seq becomes durable and is folded into the
// base; a line left with no undetermined store loses its record.
inline void make_durable(State& s, std::uintptr_t line, std::uint64_t seq) {
  auto it = s.lines.find(line);
  if (it == s.lines.end()) return;
  Line& l = it->second;
  std::size_t k = 0;
  while (k < l.stores.size() && l.stores[k].seq < seq) ++k;
  if (k == 0) return;
  if (k == l.stores.size()) {  // memory holds the durable content now
    retire_line(s, it);
    return;
  }
  for (std::size_t i = 0; i < k; ++i) {
    const Store& st = l.stores[i];
    std::memcpy(l.base.data() + st.offset, l.bytes.data() + st.pos, st.len);
  }
  const std::uint32_t consumed = l.stores[k].pos;
  l.stores.erase(l.stores.begin(), l.stores.begin() + static_cast<std::ptrdiff_t>(k));
  l.bytes.erase(l.bytes.begin(), l.bytes.begin() + consumed);
  for (Store& st : l.stores) st.pos -= consumed;
}

// A fence (or locked RMW) by this thread: its pending flushes take effect.
inline void drain(State& s) {
  ThreadState* ts = this_thread_if_any();
  if (ts == nullptr) return;
  for (const PendingFlush& p : ts->pending) make_durable(s, p.line, p.seq);
  ts->pending.clear();
}

inline void add_pending(State& s, ThreadState& ts, std::uintptr_t line, std::uint32_t site) {
  if (!ts.pending.empty() && ts.pending.back().line == line) {
    ts.pending.back().seq = s.next_seq;
    return;
  }
  ts.pending.push_back({line, s.next_seq, site});
}

// Performs and records a store of n bytes (lock held).
// `site`: the non-temporal store's site (unused for a plain store).
inline void write(State& s, void* addr, const void* src, std::size_t n, bool nontemporal,
                  std::uint32_t site = 0) {
  if (n == 0) return;
  if (s.regions.empty() || pm::eadr()) {  // nothing recorded; under eADR a store is durable
    std::memcpy(addr, src, n);
    return;
  }
  auto a = reinterpret_cast<std::uintptr_t>(addr);
  const auto* from = static_cast<const unsigned char*>(src);
  ThreadState* ts = nullptr;
  while (n > 0) {
    const std::uintptr_t line = a & line_mask;
    const std::size_t offset = a - line;
    const std::size_t len = std::min(n, cache_line_size - offset);
    if (in_region(s, line)) {  // regions are whole lines
      if (ts == nullptr) {
        ts = &this_thread(s);
        if (!ts->taints.empty()) check_taints(s, *ts, line);
      }
      Line& l = line_record(s, line);
      l.stores.push_back({s.next_seq++, ts->id, static_cast<std::uint8_t>(offset),
                          static_cast<std::uint8_t>(len),
                          static_cast<std::uint32_t>(l.bytes.size())});
      l.bytes.insert(l.bytes.end(), from, from + len);
      if (nontemporal) add_pending(s, *ts, line, site);
    }
    std::memcpy(reinterpret_cast<void*>(a), from, len);
    a += len;
    from += len;
    n -= len;
  }
}

}  // namespace pmds::pm::sim::detail
