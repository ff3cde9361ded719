// pmds bench — recovery time after a real process crash (a child fills a pool and exits without
// closing it; the parent times open + recovery + the first operation served).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "pmds/bench/target.hpp"
#include "pmds/error.hpp"
#include "pmds/registry/descriptor.hpp"

namespace pmds::bench {

struct RecoveryMeasurement {
  double milliseconds = 0;
  std::uint64_t elements = 0;          // put in before the crash
  std::optional<std::uint64_t> found;  // counted after recovery (sets/maps, queues, stacks)
};

// Recovery time after a real process crash: a child process creates the structure in a fresh
// pool at `path`, fills it with `elements`, and exits without closing anything (the pool stays
// marked dirty, as after kill -9; the page cache holds every store). The parent then opens the
// pool and times open + recovery until the first operation is served — for sets and maps a
// read of one key, which a lazy recovery (--lazy-recovery) answers only after recovering what
// it reaches; other kinds have no operation that leaves the contents as they were, and are
// timed to the end of open — and counts what it finds (the contents are read after the
// timing). Call with no other thread running in the process (fork).
inline RecoveryMeasurement measure_recovery(const Target& t, const registry::CreateOptions& o,
                                            const std::string& path, std::uint64_t elements,
                                            std::uint64_t seed) {
  RecoveryMeasurement m;
  m.elements = elements;
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) throw Error("pmds: fork failed for the recovery measurement");
  if (child == 0) {
    int code = 0;
    try {
      auto inst = registry::Instance::create(*t.entry, o, path);
      const std::uint64_t n = t.prefill(inst.object(), elements, o.key_range, seed, 1);
      if (n != elements) code = 3;
      std::fflush(nullptr);
      ::_exit(code);  // no destructor runs: the pool is never closed (dirty)
    } catch (const std::exception& e) {
      std::fprintf(stderr, "pmds: recovery measurement (child): %s\n", e.what());
      ::_exit(2);
    }
  }
  int status = 0;
  if (::waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error("pmds: the recovery measurement's child process failed for " +
                std::string(t.entry->name) + " (status " + std::to_string(status) + ")");
  const auto t0 = std::chrono::steady_clock::now();
  auto inst = registry::Instance::open(*t.entry, path, o);
  if (t.entry->kind == registry::Kind::set || t.entry->kind == registry::Kind::map)
    inst.apply({.code = registry::OpCode::contains, .key = 1 + seed % o.key_range});
  const auto t1 = std::chrono::steady_clock::now();
  m.milliseconds = std::chrono::duration<double, std::milli>(t1 - t0).count();
  if (inst.pool() != nullptr && inst.pool()->was_clean_shutdown())
    throw Error("pmds: the pool of the recovery measurement was marked clean; expected dirty");
  if (t.entry->kind != registry::Kind::register_object) m.found = inst.contents().size();
  return m;
}

}  // namespace pmds::bench
