// pmds crashtest — command-line options, declared once (add_options) for the three programs that
// parse them:
//   pmds                   `pmds crashtest --help`, and checks them before it execs
//   pmds-crashlab          (simulated backend) the simulated power failures, and the driver
//                          `pmds crashtest` execs;
//   pmds-crashlab-process  (hardware backend) the real process crashes, run by pmds-crashlab.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "pmds/bench/options.hpp"
#include "pmds/crashlab/workload.hpp"

namespace pmds::crashtest {

inline constexpr const char* description =
    "the crash lab: crash structures at every persistence event and check\n"
    "the recovered state against their criterion";

struct Options {
  std::vector<std::string> structures;  // names or patterns, in the order given
  bool all = false, fixtures = false, soak = false;
  std::uint64_t crashes = 500, process_crashes = 20;
  std::size_t images = 3, threads = 3, ops = 30, process_ops = 100, prefill = 0;
  std::size_t key_size = 8, value_size = 8;  // the -bytes entries' strings
  bool lazy_recovery = false;                // the InCLL Masstrees' recoveries open lazily
  std::uint64_t keys = 16, seed = 1, pool_mib = 0;
  unsigned reads = 20, recovery_crashes = 20, return_crashes = 40, pct = 50,
           background_crashes = 15, grow = 50, growth_crashes = 10;
  bool process_grow = false;
  std::size_t pct_depth = 3;
  std::size_t crashes_per_run = 25;
  double switch_probability = 0.01, persist_switch_probability = 0.2;
  bool stop_at_first = false, keep_histories = false, quiet = false, json_line = false;
  std::string json_file, replay;
  bool mutate = false;               // the mutation run (crashlab/mutation.hpp)
  bool mutate_default_keys = false;  // --mutate without --keys (Masstrees then take more)
  bool planned_rerun = false;        // --mutate without --pct: survivors run again under PCT alone
  std::string mix;       // "fixed" or "vary" (SimOptions::vary_mix); empty: vary with --mutate
  std::string mutant;    // one lab run with these sites mutated (comma separated)
  double min_score = 0;  // --mutate: exit 1 when a structure's score is below
  std::uint64_t census_crashes = 100;
};

// The lab's workload from the options, with `ops` operations per thread (--ops in simulated
// runs, --process-ops in killed ones).
inline crashlab::WorkloadOptions workload_options(const Options& o, std::size_t ops) {
  return {.threads = o.threads,
          .ops = ops,
          .key_range = o.keys,
          .read_percent = o.reads,
          .sync_percent = 5,
          .prefill = o.prefill,
          .key_size = o.key_size,
          .value_size = o.value_size,
          .lazy_recovery = o.lazy_recovery};
}

// Declares the options on `app`, filling `o` when it parses.
inline void add_options(CLI::App& app, Options& o) {
  using bench::real_number;
  using bench::whole_number;
  constexpr std::uint64_t any = std::numeric_limits<std::uint64_t>::max();
  app.footer(
      "The crash lab (docs/ARCHITECTURE.md §3-§4): crashes durable structures and checks that\n"
      "what recovery finds is allowed by the structure's criterion (durable, buffered or\n"
      "detectable linearizability), with tools/lincheck (porcupine).\n"
      "\n"
      "  Simulated power failures (Px86 model): a workload runs under the simulator and is\n"
      "  crashed just before a drawn persistence event (fence, RMW, clflush); for each\n"
      "  crash, K crash images (all-minimum, all-maximum, random per cache line) are each\n"
      "  recovered in a fresh process (that recovery itself sometimes crashed and redone)\n"
      "  and checked. Real process crashes: a workload on a real pool file is killed with\n"
      "  SIGKILL at random moments; a fresh process recovers, the allocator's slots are\n"
      "  checked for leaks, and the history is checked.\n"
      "\n"
      "Exit status: 0 no violation, 1 a violation or a lab error, 2 bad usage.");
  // An option given twice: the last one counts (--structure: all of them); flags take no value.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.option_defaults()->disable_flag_override();
  app.option_defaults()->group("options");

  const std::string selection = "selection (at least one)";
  app.add_option("--structure", o.structures,
                 "names or patterns (\"list/*\", \"*/izraelevitz\"), comma separated")
      ->type_name("LIST")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->group(selection);
  app.add_flag("--all", o.all, "every registered durable structure")->group(selection);
  app.add_flag("--fixtures", o.fixtures,
               "the planted-bug fixtures (each MUST show violations) and their\n"
               "bug-free control")
      ->group(selection);

  CLI::Option* crashes =
      app.add_option("--crashes", o.crashes, "simulated crash points per structure (default 500)")
          ->type_name("N")
          ->transform(whole_number(0, any));
  app.add_option("--images", o.images, "crash images per crash point (default 3)")
      ->type_name("K")
      ->transform(whole_number(1, any));
  CLI::Option* process_crashes = app.add_option("--process-crashes", o.process_crashes,
                                                "real process crashes per structure (default 20)")
                                     ->type_name("N")
                                     ->transform(whole_number(0, any));
  app.add_flag("--soak", o.soak, "10000 simulated and 200 process crashes (also PMDS_SOAK=1)")
      ->envname("PMDS_SOAK");
  app.add_option("--threads", o.threads, "workload threads (default 3)")
      ->type_name("T")
      ->transform(whole_number(1, 32));
  app.add_option("--ops", o.ops, "operations per thread, simulated workload (default 30)")
      ->type_name("N")
      ->transform(whole_number(0, any));
  app.add_option("--process-ops", o.process_ops,
                 "operations per thread, process workload (default 100; at most 40 for\n"
                 "a queue, stack or priority queue, whose history is one object)")
      ->type_name("N")
      ->transform(whole_number(0, any));
  CLI::Option* keys = app.add_option("--keys", o.keys,
                                     "key range of sets and maps (default 16; 8 with --mutate,\n"
                                     "32 for a Masstree there)")
                          ->type_name("R")
                          ->transform(whole_number(1, any));
  CLI::Option* reads = app.add_option("--reads", o.reads,
                                      "percent of read operations (default 20; 50 with --mutate)")
                           ->type_name("P")
                           ->transform(whole_number(0, 100));
  app.add_option("--prefill", o.prefill,
                 "elements inserted before the workload (default R/2; 4 for queues)")
      ->type_name("N")
      ->transform(whole_number(0, any));
  app.add_option("--key-size", o.key_size,
                 "bytes each key is written as, byte-string maps (-bytes entries; default 8)")
      ->type_name("BYTES")
      ->transform(whole_number(8, any));
  app.add_option("--value-size", o.value_size,
                 "bytes each value is written as, byte-string maps (-bytes entries; default 8)")
      ->type_name("BYTES")
      ->transform(whole_number(8, any));
  app.add_flag("--lazy-recovery", o.lazy_recovery,
               "InCLL Masstrees: every recovery opens lazily, each border recovered\n"
               "on its first access (InCLL §4.3; default: eager)");
  app.add_option("--switch", o.switch_probability,
                 "simulated scheduler: chance to switch thread per access (0.01)")
      ->type_name("P")
      ->check(real_number(0, 1, false));
  app.add_option("--switch-persist", o.persist_switch_probability,
                 "... at a flush of a line the thread wrote since it last flushed it\n"
                 "(a persistence window; default 0.2)")
      ->type_name("P")
      ->check(real_number(0, 1, false));
  CLI::Option* pct =
      app.add_option("--pct", o.pct,
                     "percent of simulated workload runs scheduled with PCT's planned\n"
                     "preemptions (hash tables then have one bucket; default 50; 0 with\n"
                     "--mutate, whose survivors are then run again under PCT alone;\n"
                     "--mutate --pct 0: no second run)")
          ->type_name("P")
          ->transform(whole_number(0, 100));
  app.add_option("--pct-depth", o.pct_depth,
                 "PCT's depth d: d-1 planned preemptions per run (default 3)")
      ->type_name("D")
      ->transform(whole_number(1, 16));
  app.add_option("--background-crashes", o.background_crashes,
                 "percent of crash points taken inside a step of the structure's\n"
                 "background work (epoch advancer, lazy sweep), if it has any (default 15)")
      ->type_name("P")
      ->transform(whole_number(0, 100));
  app.add_option("--return-crashes", o.return_crashes,
                 "percent of crash points taken right after an operation returns\n"
                 "while another thread waits at a window's flush (default 40)")
      ->type_name("P")
      ->transform(whole_number(0, 100));
  app.add_option("--recovery-crashes", o.recovery_crashes,
                 "percent of recoveries crashed and redone (default 20)")
      ->type_name("P")
      ->transform(whole_number(0, 100));
  app.add_option("--crashes-per-run", o.crashes_per_run,
                 "crash points per simulated workload run (default 25)")
      ->type_name("N")
      ->transform(whole_number(1, any));
  app.add_option("--grow", o.grow,
                 "percent of simulated workload runs whose pool starts at one chunk and\n"
                 "grows on demand up to the pool size (default 50)")
      ->type_name("P")
      ->transform(whole_number(0, 100));
  app.add_option("--growth-crashes", o.growth_crashes,
                 "in those runs, percent of crash points aimed at a growth (default 10)")
      ->type_name("P")
      ->transform(whole_number(0, 100));
  app.add_flag("--process-grow", o.process_grow,
               "process crashes: the pool starts at one chunk and grows, and each round is\n"
               "killed just after the file grows (a round that did not grow gets a new pool)");
  app.add_option("--pool-mib", o.pool_mib,
                 "pool size of a simulated run, MiB, of 256 KiB chunks (default 16)")
      ->type_name("N")
      ->transform(whole_number(2, any >> 20));
  app.add_option("--seed", o.seed, "seed of everything (default 1)")
      ->type_name("S")
      ->transform(whole_number(0, any));
  app.add_flag("--stop-at-first", o.stop_at_first, "stop a structure at its first violation");
  app.add_flag("--keep-histories", o.keep_histories,
               "keep the history file of each reported violation");
  app.add_option("--json", o.json_file, "one JSON record per structure (a JSON array)")
      ->type_name("FILE")
      ->check(bench::non_empty("a file name"));
  app.add_option("--replay", o.replay, "re-run one simulated crash check printed by a violation")
      ->type_name("W:E:I[:P@N[:P@N]][:pct@S]");
  app.add_flag("--quiet", o.quiet, "no progress line");
  app.add_option("--mix", o.mix,
                 "fixed: every workload run uses --keys and --reads; vary: each run\n"
                 "draws keys from {K/2, K, 2K}, reads from {R-30, R, R+30} and\n"
                 "a queue's or stack's prefill from {1, 4} (default fixed; vary\n"
                 "with --mutate)")
      ->check(CLI::IsMember({"fixed", "vary"}));

  const std::string mutation = "mutation (the lab measures itself; simulated crashes only)";
  app.add_flag("--mutate", o.mutate,
               "for each persistence site (flush, fence, persist, non-temporal\n"
               "write) the structures execute, run the lab with that site removed;\n"
               "report which removals it catches (--crashes per mutant: default\n"
               "300; each stops at its first violation)")
      ->group(mutation);
  app.add_option("--mutant", o.mutant,
                 "run the lab with sites mutated, as --mutate prints them:\n"
                 "skip@FILE:LINE[:COL] or drop-flushes@FILE:LINE[:COL], comma\n"
                 "separated (several at once: is a survivor covered by another?)")
      ->type_name("M[,M...]")
      ->group(mutation);
  app.add_option("--min-score", o.min_score,
                 "with --mutate: exit 1 when a structure's score (caught/mutants)\n"
                 "is below S")
      ->type_name("S")
      ->check(real_number(0, 1, false))
      ->group(mutation);
  app.add_option("--census-crashes", o.census_crashes,
                 "with --mutate: crash points of the unmutated run that lists the\n"
                 "sites (default 100)")
      ->type_name("N")
      ->transform(whole_number(1, any))
      ->group(mutation);
  // Internal (no group: not in --help): pmds-crashlab-process prints its result as one JSON line.
  app.add_flag("--json-line", o.json_line)->group("");
  app.set_help_flag("-h,--help", "this text")->group("options");

  app.callback([&o, crashes, process_crashes, reads, keys, pct] {
    if (o.structures.empty() && !o.all && !o.fixtures)
      throw CLI::RequiredError("choose structures: --structure NAME, --all or --fixtures",
                               CLI::ExitCodes::RequiredError);
    if (o.mutate || !o.mutant.empty()) {
      // Mutants exist only in the simulator: no process crashes (the hardware backend).
      if (process_crashes->count() != 0 && o.process_crashes != 0)
        throw CLI::ValidationError("--process-crashes",
                                   "mutants run only under simulated crashes; drop it");
      o.process_crashes = 0;
    }
    if (o.mutate) {
      if (!o.mutant.empty() || !o.replay.empty())
        throw CLI::ValidationError("--mutate", "runs every mutant: not with --mutant or --replay");
      if (crashes->count() == 0) o.crashes = 300;
      // Half reads: a reader-side persist is caught only when a reader runs inside a writer's
      // window (list/linkfree's contains psync: first violation at 35 crash points with 50%
      // reads, 241 with 20%). Eight keys: helping paths need two operations on one key
      // (skiplist/linkfree's insert-helps-an-existing-node psync: 79 crash points with 8 keys,
      // not caught in 300 with 16).
      if (reads->count() == 0) o.reads = 50;
      if (keys->count() == 0) {
        o.keys = 8;
        o.mutate_default_keys = true;
      }
      // The random scheduler only: a removed persistence site is caught by a reader inside a
      // writer's window, which the random switches and the window switches open; planned
      // preemptions and one hash bucket (--pct) aim at logic windows, and in a mutant's 100
      // crash points cost more catches than they gave (hash/izraelevitz 5/15 -> 3-4/15,
      // hash/mirror 7/9 -> 5/9 at --pct 50). A survivor is then run again under PCT alone
      // (crashlab/mutation.hpp), for the removals only two preemptions expose.
      if (pct->count() == 0) {
        o.pct = 0;
        o.planned_rerun = true;
      }
      // And each run its own mix around those: a removal may be caught under one mix only
      // (skip_list.hpp's upper-level link persist under izraelevitz: caught with 16 keys and
      // half reads, or 8 keys and 20% reads, not in 300 crash points with 8 keys and half reads).
      if (o.mix.empty()) o.mix = "vary";
      if (o.crashes == 0) throw CLI::ValidationError("--crashes", "a mutant needs crashes");
      o.stop_at_first = true;
    }
    if (o.soak) {  // explicit counts win
      if (crashes->count() == 0) o.crashes = 10000;
      if (process_crashes->count() == 0) o.process_crashes = 200;
    }
  });
}

}  // namespace pmds::crashtest
