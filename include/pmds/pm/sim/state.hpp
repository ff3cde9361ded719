// pmds — the Px86 simulator's records and its one lock (pm/simulator.hpp states the model; the
// operations on these records are in pm/sim/px86.hpp).
//
// Invariant: a line has a record in State::lines exactly while it has a store that is not
// certainly durable; its `base` is the line's durable content before its first recorded store.
// Every field here is read and written only under the lock (Guard), which is re-entrant for its
// holder so that a crash handler, running inside an operation, can call any other one.
#pragma once

#include <pthread.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <source_location>
#include <unordered_map>
#include <vector>

#include "pmds/pm/backend.hpp"
#include "pmds/pm/sim/sites.hpp"
#include "pmds/pm/site.hpp"

namespace pmds::pm::sim::detail {

inline constexpr std::uintptr_t line_mask = ~(std::uintptr_t{cache_line_size} - 1);
inline constexpr std::uint64_t no_crash = ~std::uint64_t{0};

// One recorded store to one line.
struct Store {
  std::uint64_t seq;     // position among all recorded stores (visibility order)
  std::uint32_t writer;  // ThreadState::id of the storing thread
  std::uint8_t offset;   // first byte within the line
  std::uint8_t len;      // 1..64
  std::uint32_t pos;     // first byte in Line::bytes
};

// The history of a line that has stores not certainly durable; a line without such stores has
// no record (its memory content is its durable content).
struct Line {
  std::array<unsigned char, cache_line_size> base;  // durable content: memory before stores[0]
  std::vector<Store> stores;                        // above the floor, in visibility order
  std::vector<unsigned char> bytes;                 // the stores' bytes, in the same order
};

// A flush waiting for this thread's next fence: stores to `line` with seq < `seq` (those visible
// at the flush) become durable then. Sequence numbers rather than per-line counts, so an entry
// stays right when the line's record is dropped and re-created.
struct PendingFlush {
  std::uintptr_t line;
  std::uint64_t seq;
  std::uint32_t site;  // index in State::sites
};

// A not-yet-durable store by another thread whose bytes this thread loaded (the diagnostic).
struct Taint {
  std::uintptr_t line;
  std::uint64_t seq;
};

struct ThreadState {
  std::uint32_t id;  // >= 1; 0 means "no thread" in Store::writer comparisons
  std::vector<PendingFlush> pending;
  std::vector<Taint> taints;
};

struct Region {
  std::uintptr_t begin, end;
};

// A persistence site; the file pointer is the compiler's string (one per translation unit, so
// one site may have several records: site_counts() merges them).
struct SiteKey {
  const char* file;
  std::uint32_t line, column;
  bool operator==(const SiteKey&) const = default;
};
struct SiteKeyHash {
  std::size_t operator()(const SiteKey& k) const noexcept {
    return std::hash<const void*>()(k.file) ^ (std::size_t{k.line} << 20) ^ k.column;
  }
};
struct SiteRecord {
  SiteKey key;
  SiteKind kind;
  std::uint64_t executions = 0;
  bool drains_other_sites = false;
  std::optional<MutationMode> mutation;  // a mutant matches this site
};

struct State {
  std::mutex mutex;
  bool locked_for_fork = false;  // the atfork prepare handler took the mutex
  std::vector<Region> regions;
  using LineMap = std::unordered_map<std::uintptr_t, Line>;
  LineMap lines;
  // Records of lines that became durable, kept for reuse: the common store-flush-fence cycle
  // then creates and drops a record without allocating.
  std::vector<LineMap::node_type> spare_lines;
  std::vector<ThreadState*> threads;
  std::uint32_t next_thread_id = 1;
  std::uint64_t next_seq = 0;
  std::uint64_t events = 0;
  std::uint64_t crash_at = no_crash;
  std::function<void()> handler;
  bool warning_tracking = true;
  std::uint64_t warnings = 0;
  std::unordered_map<SiteKey, std::uint32_t, SiteKeyHash> site_index;
  std::vector<SiteRecord> sites;
  std::vector<Mutant> mutants;
};

// How many Guards this thread holds: the lock is re-entrant for its holder, so a crash handler
// (which runs inside an operation) can call snapshot() and any other operation.
inline thread_local unsigned lock_depth = 0;

inline void fork_prepare();
inline void fork_after();

// Created on first use and never destroyed: threads may still use the simulator while static
// destructors run, and a fork child keeps using it.
inline State& state() {
  static State* const s = [] {
    auto* created = new State;
    ::pthread_atfork(&fork_prepare, &fork_after, &fork_after);
    return created;
  }();
  return *s;
}

class Guard {
 public:
  explicit Guard(State& s) : s_(s) {
    if (lock_depth++ == 0) s_.mutex.lock();
  }
  ~Guard() {
    if (--lock_depth == 0) s_.mutex.unlock();
  }
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

 private:
  State& s_;
};

// Before fork: hold the lock so the child copies a model no thread is halfway through changing.
// A thread already holding it (a crash handler forking) keeps it in the child too.
inline void fork_prepare() {
  State& s = state();
  if (lock_depth != 0) return;
  s.mutex.lock();
  s.locked_for_fork = true;
}
inline void fork_after() {
  State& s = state();
  if (!s.locked_for_fork) return;
  s.locked_for_fork = false;
  s.mutex.unlock();
}

// Per-thread state, registered in State::threads so detach/mark_all_durable can reach it. At
// thread exit its pending flushes are dropped: they stay "may or may not", as Px86 allows.
struct ThreadSlot {
  ThreadState* ts = nullptr;
  ~ThreadSlot() {
    if (ts == nullptr) return;
    State& s = state();
    Guard g(s);
    std::erase(s.threads, ts);
    delete ts;
    ts = nullptr;
  }
};
inline thread_local ThreadSlot thread_slot;

// Lock held.
inline ThreadState& this_thread(State& s) {
  ThreadSlot& slot = thread_slot;
  if (slot.ts == nullptr) {
    slot.ts = new ThreadState{s.next_thread_id++, {}, {}};
    s.threads.push_back(slot.ts);
  }
  return *slot.ts;
}
inline ThreadState* this_thread_if_any() {
  return thread_slot.ts;
}

inline bool in_region(const State& s, std::uintptr_t a) {
  for (const Region& r : s.regions)
    if (a >= r.begin && a < r.end) return true;
  return false;
}

// The attached region that starts at `base`, or s.regions.end() (lock held).
inline std::vector<Region>::iterator region_at(State& s, std::uintptr_t base) {
  return std::find_if(s.regions.begin(), s.regions.end(),
                      [&](const Region& r) { return r.begin == base; });
}

// The mode of the first mutant that matches the site, if any (lock held).
inline std::optional<MutationMode> mutation_of(const State& s, const SiteKey& key) {
  for (const Mutant& m : s.mutants)
    if (m.matches(key.file, key.line, key.column)) return m.mode;
  return std::nullopt;
}

// The index of site's record in State::sites, created on first use (lock held).
inline std::uint32_t site_record(State& s, const std::source_location& site, SiteKind kind) {
  const SiteKey key{site.file_name(), site.line(), site.column()};
  auto it = s.site_index.find(key);
  if (it != s.site_index.end()) return it->second;
  const auto index = static_cast<std::uint32_t>(s.sites.size());
  s.sites.push_back({key, kind, 0, false, mutation_of(s, key)});
  s.site_index.emplace(key, index);
  return index;
}

// Is the site the mutant, in this mode?
inline bool mutated(const State& s, std::uint32_t site, MutationMode mode) {
  return s.sites[site].mutation == mode;
}

}  // namespace pmds::pm::sim::detail
