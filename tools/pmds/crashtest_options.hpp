// pmds crashtest — command-line options shared by the two crash-lab programs:
//   pmds-crashlab          (simulated backend) the simulated power failures, and the driver
//                          `pmds crashtest` execs;
//   pmds-crashlab-process  (hardware backend) the real process crashes, run by pmds-crashlab.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pmds::crashtest {

inline constexpr const char* help =
    R"(usage: pmds crashtest (--structure NAME[,NAME...] | --all | --fixtures) [options]

The crash lab (DESIGN.md sections 3-4): crashes durable structures and checks that
what recovery finds is allowed by the structure's criterion (durable, buffered or
detectable linearizability), with tools/lincheck (porcupine).

  Simulated power failures (Px86 model): a workload runs under the simulator and is
  crashed just before a drawn persistence event (fence, RMW, clflush); for each
  crash, K crash images (all-minimum, all-maximum, random per cache line) are each
  recovered in a fresh process (that recovery itself sometimes crashed and redone)
  and checked. Real process crashes: a workload on a real pool file is killed with
  SIGKILL at random moments; a fresh process recovers, the allocator's slots are
  checked for leaks, and the history is checked.

selection:
  --structure LIST    names or patterns ("list/*", "*/izraelevitz"), comma separated
  --all               every registered durable structure
  --fixtures          the planted-bug fixtures (each MUST show violations) and their
                      bug-free control
options:
  --crashes N         simulated crash points per structure (default 500)
  --images K          crash images per crash point (default 3)
  --process-crashes N real process crashes per structure (default 20)
  --soak              10000 simulated and 200 process crashes (also PMDS_SOAK=1)
  --threads T         workload threads (default 3)
  --ops N             operations per thread, simulated workload (default 30)
  --process-ops N     operations per thread, process workload (default 100)
  --keys R            key range of sets and maps (default 16)
  --reads P           percent of read operations (default 20)
  --prefill N         elements inserted before the workload (default R/2; 4 for queues)
  --switch P          simulated scheduler: chance to switch thread per access (0.01)
  --recovery-crashes P  percent of recoveries crashed and redone (default 20)
  --crashes-per-run N crash points per simulated workload run (default 25)
  --pool-mib N        pool size of a simulated run, MiB (default 16)
  --seed S            seed of everything (default 1)
  --stop-at-first     stop a structure at its first violation
  --keep-histories    keep the history file of each reported violation
  --json FILE         one JSON record per structure (a JSON array)
  --replay W:E:I[:R]  re-run one simulated crash check printed by a violation
  --quiet             no progress line
Exit status: 0 no violation, 1 a violation or a lab error, 2 bad usage.
)";

struct Options {
  std::string structures;
  bool all = false, fixtures = false;
  std::uint64_t crashes = 500, process_crashes = 20;
  std::size_t images = 3, threads = 3, ops = 30, process_ops = 100, prefill = 0;
  std::uint64_t keys = 16, seed = 1, pool_mib = 16;
  unsigned reads = 20, recovery_crashes = 20;
  std::size_t crashes_per_run = 25;
  double switch_probability = 0.01;
  bool stop_at_first = false, keep_histories = false, quiet = false, json_line = false;
  std::string json_file, replay;
};

// Parses args; on bad usage prints why and returns nullopt (help: prints and sets `help_shown`).
inline std::optional<Options> parse(const std::vector<std::string_view>& args, bool& help_shown) {
  Options o;
  help_shown = false;
  if (const char* s = std::getenv("PMDS_SOAK"); s != nullptr && std::string_view(s) == "1") {
    o.crashes = 10000;
    o.process_crashes = 200;
  }
  const auto fail = [](const std::string& m) -> std::optional<Options> {
    std::cerr << "pmds crashtest: " << m << " (pmds crashtest --help)\n";
    return std::nullopt;
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    const auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= args.size()) return std::nullopt;
      return std::string(args[++i]);
    };
    const auto number = [&](auto& out) -> bool {
      const auto v = value();
      if (!v || v->empty() || v->find_first_not_of("0123456789") != std::string::npos) return false;
      out = static_cast<std::remove_reference_t<decltype(out)>>(std::stoull(*v));
      return true;
    };
    if (a == "--help" || a == "-h") {
      std::cout << help;
      help_shown = true;
      return std::nullopt;
    } else if (a == "--structure") {
      const auto v = value();
      if (!v) return fail("--structure needs a name");
      o.structures += (o.structures.empty() ? "" : ",") + *v;
    } else if (a == "--all") {
      o.all = true;
    } else if (a == "--fixtures") {
      o.fixtures = true;
    } else if (a == "--soak") {
      o.crashes = 10000;
      o.process_crashes = 200;
    } else if (a == "--crashes") {
      if (!number(o.crashes)) return fail("--crashes needs a number");
    } else if (a == "--process-crashes") {
      if (!number(o.process_crashes)) return fail("--process-crashes needs a number");
    } else if (a == "--images") {
      if (!number(o.images) || o.images == 0) return fail("--images needs a number >= 1");
    } else if (a == "--threads") {
      if (!number(o.threads) || o.threads == 0 || o.threads > 32)
        return fail("--threads needs a number in 1..32");
    } else if (a == "--ops") {
      if (!number(o.ops)) return fail("--ops needs a number");
    } else if (a == "--process-ops") {
      if (!number(o.process_ops)) return fail("--process-ops needs a number");
    } else if (a == "--keys") {
      if (!number(o.keys) || o.keys == 0) return fail("--keys needs a number >= 1");
    } else if (a == "--reads") {
      if (!number(o.reads) || o.reads > 100) return fail("--reads needs a percentage");
    } else if (a == "--prefill") {
      if (!number(o.prefill)) return fail("--prefill needs a number");
    } else if (a == "--recovery-crashes") {
      if (!number(o.recovery_crashes) || o.recovery_crashes > 100)
        return fail("--recovery-crashes needs a percentage");
    } else if (a == "--crashes-per-run") {
      if (!number(o.crashes_per_run) || o.crashes_per_run == 0)
        return fail("--crashes-per-run needs a number >= 1");
    } else if (a == "--pool-mib") {
      if (!number(o.pool_mib) || o.pool_mib < 2) return fail("--pool-mib needs a number >= 2");
    } else if (a == "--seed") {
      if (!number(o.seed)) return fail("--seed needs a number");
    } else if (a == "--switch") {
      const auto v = value();
      char* end = nullptr;
      if (!v) return fail("--switch needs a probability");
      o.switch_probability = std::strtod(v->c_str(), &end);
      if (end == v->c_str() || *end != '\0' || o.switch_probability < 0 || o.switch_probability > 1)
        return fail("--switch needs a probability in [0, 1]");
    } else if (a == "--stop-at-first") {
      o.stop_at_first = true;
    } else if (a == "--keep-histories") {
      o.keep_histories = true;
    } else if (a == "--quiet") {
      o.quiet = true;
    } else if (a == "--json") {
      const auto v = value();
      if (!v) return fail("--json needs a file name");
      o.json_file = *v;
    } else if (a == "--json-line") {  // internal: pmds-crashlab-process's result on stdout
      o.json_line = true;
    } else if (a == "--replay") {
      const auto v = value();
      if (!v) return fail("--replay needs W:E:I[:R]");
      o.replay = *v;
    } else {
      return fail("unknown option " + std::string(a));
    }
  }
  if (o.structures.empty() && !o.all && !o.fixtures)
    return fail("choose structures: --structure NAME, --all or --fixtures");
  return o;
}

}  // namespace pmds::crashtest
