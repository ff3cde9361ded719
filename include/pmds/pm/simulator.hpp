// pmds — the Px86 crash simulator: the simulated persistence backend (docs/ARCHITECTURE.md §3).
//
// The model is x86 persistency, Px86 (Raad, Wickerson, Neiger, Vafeiadis, POPL 2020), the model
// Jaaru implements:
//   * One global lock serialises every access-layer operation; the order in which operations take
//     it is the visibility order (store buffers add no reachable persisted state under Px86).
//   * Only addresses inside attached regions (attach()) are recorded. For each 64-byte line L of a
//     region the simulator keeps the stores to L in visibility order (a store spanning two lines
//     is split per line) and a floor: the stores below it are certainly durable. Stores below the
//     floor are folded into a per-line base copy at once, so memory stays bounded by the number of
//     stores that are not yet certainly durable.
//   * Each thread has pending flushes (L, stores to L so far). clflush raises L's floor at once;
//     clwb/clflushopt add a pending flush; sfence/mfence and every locked read-modify-write (a CAS,
//     even a failed one, an exchange, a fetch_add) raise the floor of every pending flush of THAT
//     thread and clear them. A non-temporal store is a store plus a pending flush. Loads change
//     nothing. FlushInstruction::none (eADR) is a no-op, and under eADR every store is durable at
//     once (caches are in the persistence domain), so the only crash image is the maximum one.
//   * A crash image picks, for each line independently, k(L) in [floor, stores(L)] and applies the
//     first k(L) stores onto the durable base: order holds within a line, lines are independent.
//   * Crash points: floors move only at fences, RMWs and clflushes, so a crash just before one of
//     those events reaches every image. A global counter numbers them (event_count());
//     set_crash_handler(e, h) runs h() just before event e takes effect, on the thread performing
//     it, while it holds the simulator lock, so every other thread is stopped at its next
//     access-layer operation. h may call snapshot(), Snapshot::write_image() and any other
//     function here (the lock is re-entrant for its holder); the crash lab's handler writes the
//     images and _exit()s; if h returns, execution goes on.
//
// Rules for users of this backend:
//   * Every write into an attached region must go through the access layer (pm::atomic,
//     pm::write, pm::write_nontemporal); a write that bypasses it is invisible to the model, which
//     then believes the old bytes are durable. Write such content before attach(), or call
//     mark_all_durable() after it while quiescent.
//   * fork(): the simulator registers pthread_atfork handlers that take its lock before the fork
//     and release it after, in parent and child, so a child never inherits the lock held by a
//     thread that no longer exists, nor a half-updated model. Still, fork only when no other
//     thread is inside an access-layer operation (quiescent), or from a crash handler (then the
//     child holds the lock exactly as the parent's thread did, other threads' pending flushes
//     stay pending forever in the child — they never fence there). Both ways are tested, also under
//     TSan and ASan; a fork that has to wait in the prepare handler for a busy lock is not.
//   * A crash handler must not throw (access-layer operations are noexcept).
//
// Optional diagnostic, "a thread acting on a value it read that is not yet durable":
// warning_count() (pm/sim/load_taint.hpp says what it counts).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <source_location>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "pmds/error.hpp"
#include "pmds/pm/backend.hpp"
#include "pmds/pm/instructions.hpp"
#include "pmds/pm/sim/load_taint.hpp"
#include "pmds/pm/sim/px86.hpp"
#include "pmds/pm/sim/sites.hpp"
#include "pmds/pm/sim/snapshot.hpp"
#include "pmds/pm/sim/state.hpp"
#include "pmds/pm/site.hpp"

namespace pmds::pm::sim {

// =============================================================================================
// API
// =============================================================================================

// --- Called by the access layer (access.hpp); every call takes the simulator lock. -----------

// Reads n bytes at addr into out.
void load(const void* addr, void* out, std::size_t n);
// Writes n bytes (plain stores). Not durable until flushed and fenced.
void store(void* addr, const void* src, std::size_t n);
// Writes n bytes with non-temporal stores: durable after this thread's next fence or RMW.
void store_nontemporal(void* addr, const void* src, std::size_t n,
                       const std::source_location& site = std::source_location::current());
// A locked read-modify-write of n <= 16 bytes at addr: update(void* bytes) gets a copy of the
// current bytes, may change them, and returns whether it wrote (a failed CAS returns false).
// Whether or not it writes, it is a fence for this thread and one crash-point event.
template <class F>
void rmw(void* addr, std::size_t n, F&& update);
// Writes back the line holding addr. clflush: durable at once (an event); clwb/clflushopt:
// pending until this thread's next fence or RMW (not an event); none (eADR): no-op.
// `site` and `kind`: where the access layer was asked for it (see "Persistence sites" below).
void flush(const void* addr, FlushInstruction how,
           const std::source_location& site = std::source_location::current(),
           SiteKind kind = SiteKind::flush);
// sfence: this thread's pending flushes become durable. One crash-point event.
void fence(const std::source_location& site = std::source_location::current(),
           SiteKind kind = SiteKind::fence);

// --- Regions. -----------------------------------------------------------------------------

// Starts recording stores into [base, base+size); its current content counts as durable.
// base and size must be multiples of 64 (cache lines), size > 0, and the range must not overlap
// an attached region; otherwise SimulatorError.
void attach(void* base, std::size_t size);
// Extends the region that starts at base to base + size (a pool that grew); SimulatorError if
// none starts there, or if it would shrink or overlap another.
void extend(void* base, std::size_t size);
// Stops recording the region that starts at base and forgets its history (SimulatorError if no
// region starts there). Call it before unmapping the region.
void detach(void* base);
// True if addr lies in an attached region.
bool attached(const void* addr);
// Quiescent: forgets every history and pending flush; the current content of every region
// counts as durable (e.g. after a recovery, or after writing a region without the access layer).
void mark_all_durable();

// --- Crash points. ------------------------------------------------------------------------

// Crash-point events so far in this process: fences, RMWs (successful or not) and clflushes.
std::uint64_t event_count();
// Just before event number `event` (0-based: inside the handler event_count() == event) takes
// effect, the thread performing it calls handler() while holding the simulator lock. One shot:
// the handler is cleared before it is called. Replaces any earlier handler. SimulatorError if
// `event` < event_count() (it could never fire).
void set_crash_handler(std::uint64_t event, std::function<void()> handler);
void clear_crash_handler();

// --- Scheduling (added by the crash lab). -------------------------------------------------

// A function every access-layer operation calls first, on the thread performing it, before it
// takes the simulator lock (nullptr: none, the default). The crash lab installs one that runs
// its workload threads one at a time in an order drawn from a seed, so a simulated run, and
// every crash point in it, replays exactly (crashlab/scheduler.hpp). Not called while the
// calling thread holds the lock (inside a crash handler), where it must not wait. It is told
// which operation comes and on what address (the line of a flush), so a scheduler can favour
// the instants that matter: between a store and the flush that makes it durable.
enum class Operation : std::uint8_t { load, store, rmw, flush, fence };
using ScheduleHook = void (*)(Operation op, const void* addr);
void set_schedule_hook(ScheduleHook hook);
// A preemption point that accesses nothing (the hook is told Operation::load, nullptr): a
// thread that waits for another outside the access layer (pm::Mutex) calls it, so that a
// scheduler running one thread at a time can hand the turn back to the one it waits for.
void schedule_point();

// --- Persistence sites and mutants (pm/sim/sites.hpp). -------------------------------------

// The sites executed since the last reset_site_counts(), in this process.
std::vector<SiteCount> site_counts();
void reset_site_counts();
// Runs this process with these mutants (none: the default). A site matched by several takes
// the first one's mode.
void set_mutants(std::vector<Mutant> mutants);
// The mutants in force (a test that adds its own keeps these: PMDS_SIM_MUTANTS's).
std::vector<Mutant> mutants();

// --- Introspection. -----------------------------------------------------------------------

struct Stats {
  std::size_t regions = 0;
  std::size_t undetermined_lines = 0;   // lines with a store that is not certainly durable
  std::size_t undetermined_stores = 0;  // such stores, over all lines
  std::size_t pending_flushes = 0;      // over all threads
  std::uint64_t events = 0;             // event_count()
  std::uint64_t recorded_stores = 0;    // stores (per line) recorded since the process started
  std::uint64_t warnings = 0;           // warning_count()
};
Stats stats();

// The "acted on a value not yet durable" diagnostic (see the header comment). On by default.
std::uint64_t warning_count();
void reset_warning_count();
void set_warning_tracking(bool on);

// =============================================================================================
// Implementation
// =============================================================================================

namespace detail {

inline std::atomic<ScheduleHook> schedule_hook{nullptr};

// First thing in every access-layer operation (lock not held).
inline void before_operation(Operation op, const void* addr) {
  if (lock_depth != 0) return;
  if (ScheduleHook h = schedule_hook.load(std::memory_order_acquire)) h(op, addr);
}

}  // namespace detail

// --- Access-layer operations. -----------------------------------------------------------------

inline void load(const void* addr, void* out, std::size_t n) {
  detail::before_operation(Operation::load, addr);
  detail::State& s = detail::state();
  detail::Guard g(s);
  std::memcpy(out, addr, n);
  detail::note_load(s, reinterpret_cast<std::uintptr_t>(addr), n);
}

inline void store(void* addr, const void* src, std::size_t n) {
  detail::before_operation(Operation::store, addr);
  detail::State& s = detail::state();
  detail::Guard g(s);
  detail::write(s, addr, src, n, false);
}

inline void store_nontemporal(void* addr, const void* src, std::size_t n,
                              const std::source_location& site) {
  detail::before_operation(Operation::store, addr);
  detail::State& s = detail::state();
  detail::Guard g(s);
  const std::uint32_t index = detail::site_record(s, site, SiteKind::nontemporal);
  ++s.sites[index].executions;
  const bool skipped = detail::mutated(s, index, MutationMode::skip);  // a plain store then
  detail::write(s, addr, src, n, !skipped, index);
}

template <class F>
void rmw(void* addr, std::size_t n, F&& update) {
  static_assert(std::is_same_v<decltype(update(static_cast<void*>(nullptr))), bool>,
                "update(void* bytes) must return whether it wrote");
  unsigned char bytes[16];  // pm::atomic words are at most 16 bytes
  if (n > sizeof bytes)
    throw SimulatorError("pmds::pm::sim::rmw: " + std::to_string(n) + " bytes (at most 16)");
  detail::before_operation(Operation::rmw, addr);
  detail::State& s = detail::state();
  detail::Guard g(s);
  detail::event(s);
  detail::drain(s);  // a locked instruction orders earlier flushes as sfence does
  std::memcpy(bytes, addr, n);
  detail::note_load(s, reinterpret_cast<std::uintptr_t>(addr), n);
  if (update(static_cast<void*>(bytes))) detail::write(s, addr, bytes, n, false);
}

inline void flush(const void* addr, FlushInstruction how, const std::source_location& site,
                  SiteKind kind) {
  if (how == FlushInstruction::none) return;  // eADR: caches are persistent
  detail::before_operation(Operation::flush, addr);
  const std::uintptr_t line = reinterpret_cast<std::uintptr_t>(addr) & detail::line_mask;
  detail::State& s = detail::state();
  detail::Guard g(s);
  const std::uint32_t index = detail::site_record(s, site, kind);
  if (kind != SiteKind::persist) ++s.sites[index].executions;  // a persist counts its fence
  if (detail::mutated(s, index, MutationMode::skip)) return;
  if (how == FlushInstruction::clflush) {
    detail::event(s);
    detail::make_durable(s, line, s.next_seq);
    return;
  }
  // clwb / clflushopt: a line with no undetermined store has nothing to write back.
  if (s.lines.find(line) == s.lines.end()) return;
  detail::add_pending(s, detail::this_thread(s), line, index);
}

inline void fence(const std::source_location& site, SiteKind kind) {
  detail::before_operation(Operation::fence, nullptr);
  detail::State& s = detail::state();
  detail::Guard g(s);
  const std::uint32_t index = detail::site_record(s, site, kind);
  ++s.sites[index].executions;
  if (detail::mutated(s, index, MutationMode::skip)) return;  // not issued: no event either
  detail::event(s);
  detail::ThreadState* ts = detail::this_thread_if_any();
  if (ts == nullptr) return;
  if (detail::mutated(s, index, MutationMode::drop_flushes)) {
    ts->pending.clear();
    return;
  }
  for (const detail::PendingFlush& p : ts->pending)
    if (p.site != index) s.sites[index].drains_other_sites = true;
  detail::drain(s);
}

// --- Regions. -----------------------------------------------------------------------------

inline void attach(void* base, std::size_t size) {
  const auto b = reinterpret_cast<std::uintptr_t>(base);
  if (base == nullptr || size == 0 || b % cache_line_size != 0 || size % cache_line_size != 0 ||
      b + size < b)
    throw SimulatorError("pmds::pm::sim::attach: region at " + std::to_string(b) + " of " +
                         std::to_string(size) +
                         " bytes must be non-empty and start and end on a 64-byte line");
  detail::State& s = detail::state();
  detail::Guard g(s);
  for (const detail::Region& r : s.regions)
    if (b < r.end && r.begin < b + size)
      throw SimulatorError("pmds::pm::sim::attach: region at " + std::to_string(b) +
                           " overlaps the attached region at " + std::to_string(r.begin));
  s.regions.push_back({b, b + size});
}

// The attached region at `base` now ends at base + size (a pool that grew: Pool::grow). Never
// shrinks.
inline void extend(void* base, std::size_t size) {
  const auto b = reinterpret_cast<std::uintptr_t>(base);
  detail::State& s = detail::state();
  detail::Guard g(s);
  const auto r = detail::region_at(s, b);
  if (r == s.regions.end() || size % cache_line_size != 0 || b + size < r->end)
    throw SimulatorError("pmds::pm::sim::extend: no attached region at " + std::to_string(b) +
                         " that " + std::to_string(size) + " bytes would extend");
  for (const detail::Region& x : s.regions)
    if (x.begin != b && x.begin < b + size && r->end <= x.begin)
      throw SimulatorError("pmds::pm::sim::extend: the region at " + std::to_string(b) +
                           " would overlap the attached region at " + std::to_string(x.begin));
  r->end = b + size;
}

inline void detach(void* base) {
  const auto b = reinterpret_cast<std::uintptr_t>(base);
  detail::State& s = detail::state();
  detail::Guard g(s);
  const auto r = detail::region_at(s, b);
  if (r == s.regions.end())
    throw SimulatorError("pmds::pm::sim::detach: no attached region starts at " +
                         std::to_string(b));
  const detail::Region gone = *r;
  s.regions.erase(r);
  auto inside = [&](std::uintptr_t line) { return line >= gone.begin && line < gone.end; };
  std::erase_if(s.lines, [&](const auto& kv) { return inside(kv.first); });
  for (detail::ThreadState* ts : s.threads) {
    std::erase_if(ts->pending, [&](const detail::PendingFlush& p) { return inside(p.line); });
    std::erase_if(ts->taints, [&](const detail::Taint& t) { return inside(t.line); });
  }
}

inline bool attached(const void* addr) {
  detail::State& s = detail::state();
  detail::Guard g(s);
  return detail::in_region(s, reinterpret_cast<std::uintptr_t>(addr));
}

inline void mark_all_durable() {
  detail::State& s = detail::state();
  detail::Guard g(s);
  s.lines.clear();
  for (detail::ThreadState* ts : s.threads) {
    ts->pending.clear();
    ts->taints.clear();
  }
}

// --- Persistence sites and mutants. ----------------------------------------------------------

inline std::vector<SiteCount> site_counts() {
  detail::State& s = detail::state();
  detail::Guard g(s);
  std::vector<SiteCount> out;
  for (const detail::SiteRecord& r : s.sites) {
    if (r.executions == 0) continue;
    auto same = std::find_if(out.begin(), out.end(), [&](const SiteCount& c) {
      return c.line == r.key.line && c.column == r.key.column && c.file == r.key.file;
    });
    if (same == out.end()) {
      out.push_back({r.key.file, r.key.line, r.key.column, r.kind, 0, false});
      same = out.end() - 1;
    }
    same->executions += r.executions;
    same->drains_other_sites = same->drains_other_sites || r.drains_other_sites;
  }
  return out;
}

inline void reset_site_counts() {
  detail::State& s = detail::state();
  detail::Guard g(s);
  for (detail::SiteRecord& r : s.sites) {
    r.executions = 0;
    r.drains_other_sites = false;
  }
}

inline std::vector<Mutant> mutants() {
  detail::State& s = detail::state();
  detail::Guard g(s);
  return s.mutants;
}

inline void set_mutants(std::vector<Mutant> mutants) {
  detail::State& s = detail::state();
  detail::Guard g(s);
  s.mutants = std::move(mutants);
  for (detail::SiteRecord& r : s.sites) r.mutation = detail::mutation_of(s, r.key);
}

// --- Crash points. ------------------------------------------------------------------------

inline std::uint64_t event_count() {
  detail::State& s = detail::state();
  detail::Guard g(s);
  return s.events;
}

inline void set_crash_handler(std::uint64_t event, std::function<void()> handler) {
  detail::State& s = detail::state();
  detail::Guard g(s);
  if (event < s.events)
    throw SimulatorError("pmds::pm::sim::set_crash_handler: event " + std::to_string(event) +
                         " has already happened (event_count() is " + std::to_string(s.events) +
                         ")");
  if (!handler) throw SimulatorError("pmds::pm::sim::set_crash_handler: empty handler");
  s.handler = std::move(handler);
  s.crash_at = event;
}

inline void set_schedule_hook(ScheduleHook hook) {
  detail::schedule_hook.store(hook, std::memory_order_release);
}

inline void schedule_point() {
  detail::before_operation(Operation::load, nullptr);
}

inline void clear_crash_handler() {
  detail::State& s = detail::state();
  detail::Guard g(s);
  s.handler = nullptr;
  s.crash_at = detail::no_crash;
}

// --- Snapshots and images. ------------------------------------------------------------------

inline Snapshot snapshot(bool copy_regions) {
  detail::State& s = detail::state();
  detail::Guard g(s);
  Snapshot snap;
  snap.event_ = s.events;
  snap.eadr_ = pm::eadr();
  snap.copies_ = copy_regions;
  for (const detail::Region& r : s.regions) {
    const auto* p = reinterpret_cast<const unsigned char*>(r.begin);
    snap.regions_.push_back({r.begin, r.end - r.begin,
                             copy_regions ? std::vector<unsigned char>(p, p + (r.end - r.begin))
                                          : std::vector<unsigned char>()});
  }
  if (snap.eadr_) return snap;  // under eADR memory is durable: the region copies are the image
  snap.lines_.reserve(s.lines.size());
  for (const auto& [address, line] : s.lines) {
    Snapshot::LineCopy c;
    c.address = address;
    c.region = 0;
    for (std::size_t i = 0; i < s.regions.size(); ++i)
      if (address >= s.regions[i].begin && address < s.regions[i].end) c.region = i;
    c.base = line.base;
    c.stores.reserve(line.stores.size());
    for (const detail::Store& st : line.stores) c.stores.push_back({st.offset, st.len, st.pos});
    c.bytes = line.bytes;
    snap.lines_.push_back(std::move(c));
  }
  std::sort(snap.lines_.begin(), snap.lines_.end(),
            [](const auto& x, const auto& y) { return x.address < y.address; });
  return snap;
}

// --- Introspection. -----------------------------------------------------------------------

inline Stats stats() {
  detail::State& s = detail::state();
  detail::Guard g(s);
  Stats st;
  st.regions = s.regions.size();
  st.undetermined_lines = s.lines.size();
  for (const auto& kv : s.lines) st.undetermined_stores += kv.second.stores.size();
  for (const detail::ThreadState* ts : s.threads) st.pending_flushes += ts->pending.size();
  st.events = s.events;
  st.recorded_stores = s.next_seq;
  st.warnings = s.warnings;
  return st;
}

inline std::uint64_t warning_count() {
  detail::State& s = detail::state();
  detail::Guard g(s);
  return s.warnings;
}

inline void reset_warning_count() {
  detail::State& s = detail::state();
  detail::Guard g(s);
  s.warnings = 0;
}

inline void set_warning_tracking(bool on) {
  detail::State& s = detail::state();
  detail::Guard g(s);
  s.warning_tracking = on;
  if (!on)
    for (detail::ThreadState* ts : s.threads) ts->taints.clear();
}

}  // namespace pmds::pm::sim
