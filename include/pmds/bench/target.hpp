// pmds bench — what the runner needs about one structure (a Target: its registry entry and its
// prefill and timed run compiled against its concrete type, registry::instantiate), which
// workloads apply to which kinds, and the workload a kind runs by default.
#pragma once

#include <array>
#include <optional>
#include <string>

#include "pmds/bench/timed_run.hpp"
#include "pmds/bench/workload.hpp"
#include "pmds/registry/descriptor.hpp"
#if !defined(PMDS_REGISTRY_TABLE_IN_ONE_FILE)
#include "pmds/registry.hpp"
#endif

namespace pmds::bench {

// The type-erased entry points the registry instantiates per descriptor.
using PrefillFn = std::uint64_t (*)(void* object, std::uint64_t count, std::uint64_t key_range,
                                    std::uint64_t seed, unsigned threads);
using RunFn = RepResult (*)(void* object, const RunParams&);

template <class D>
struct PrefillDriver {
  static std::uint64_t run(void* object, std::uint64_t count, std::uint64_t key_range,
                           std::uint64_t seed, unsigned threads) {
    return prefill(*static_cast<typename D::type*>(object), count, key_range, seed, threads);
  }
};
template <class D>
struct RunDriver {
  static RepResult run(void* object, const RunParams& p) {
    return run_workload(*static_cast<typename D::type*>(object), p);
  }
};

// What the runner needs about one structure: its entry and its two compiled entry points.
struct Target {
  const registry::Entry* entry = nullptr;
  PrefillFn prefill = nullptr;
  RunFn run = nullptr;
};

// A target for a descriptor outside the registry (tests); `entry` must outlive the target.
template <class D>
Target target_of(const registry::Entry& entry) {
  return {&entry, &PrefillDriver<D>::run, &RunDriver<D>::run};
}

// The target of a registered entry. Its two tables (registry::instantiate) compile every
// structure's prefill and timed loop; with the registry's table (registry/entries.hpp,
// PMDS_REGISTRY_TABLE_IN_ONE_FILE) a program compiles them in one source file, which writes
// PMDS_BENCH_LOOPS_HERE() at namespace scope (tools/registry_table does, for `pmds` and the
// harness's tests).
#if defined(PMDS_REGISTRY_TABLE_IN_ONE_FILE)
Target target_of(const registry::Entry& entry);
#else
inline Target target_of(const registry::Entry& entry) {
  return {&entry, registry::instantiate<PrefillFn, PrefillDriver>()[entry.index],
          registry::instantiate<RunFn, RunDriver>()[entry.index]};
}
#endif

}  // namespace pmds::bench

#define PMDS_BENCH_LOOPS_HERE()                                                           \
  pmds::bench::Target pmds::bench::target_of(const pmds::registry::Entry& entry) {        \
    using namespace pmds::bench;                                                          \
    return {&entry, pmds::registry::instantiate<PrefillFn, PrefillDriver>()[entry.index], \
            pmds::registry::instantiate<RunFn, RunDriver>()[entry.index]};                \
  }                                                                                       \
  static_assert(true, "a semicolon follows PMDS_BENCH_LOOPS_HERE()")

namespace pmds::bench {

// Why a workload cannot run on an entry, or nullopt when it can.
inline std::optional<std::string> unsupported_reason(const registry::Entry& e, Workload w) {
  using registry::Kind;
  const bool keyed_set = e.kind == Kind::set || e.kind == Kind::map;
  switch (w) {
    case Workload::set:
    case Workload::ycsb_c:
      if (!keyed_set) return "needs a set or map";
      return std::nullopt;
    case Workload::readrandom:
    case Workload::deleterandom:
      if (e.kind != Kind::map) return "needs a map";
      return std::nullopt;
    case Workload::ycsb_a:
    case Workload::ycsb_b:
    case Workload::fillrandom:
    case Workload::overwrite:
    case Workload::readwhilewriting:
      if (!keyed_set) return "needs a map";
      if (!e.can_update()) return "needs put (update)";
      return std::nullopt;
    case Workload::ycsb_e:
      if (!keyed_set) return "needs a map";
      if (!e.can_scan) return "needs scan";
      return std::nullopt;
    case Workload::pairs:
      if (e.kind != Kind::queue && e.kind != Kind::stack) return "needs a queue or stack";
      return std::nullopt;
    case Workload::heap:
      if (e.kind != Kind::priority_queue) return "needs a priority queue";
      return std::nullopt;
    case Workload::atomicfloat:
      if (e.kind != Kind::register_object) return "needs a register";
      return std::nullopt;
  }
  return "unknown workload";
}

// The workload a kind is benchmarked with by default (the default suite, `pmds bench` without
// --workload for a single kind).
inline Workload default_workload(registry::Kind k) {
  using registry::Kind;
  switch (k) {
    case Kind::set:
    case Kind::map:
      return Workload::set;
    case Kind::queue:
    case Kind::stack:
      return Workload::pairs;
    case Kind::priority_queue:
      return Workload::heap;
    case Kind::register_object:
      return Workload::atomicfloat;
  }
  return Workload::set;
}

}  // namespace pmds::bench
