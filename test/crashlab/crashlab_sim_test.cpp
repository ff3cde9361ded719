// labels: crashlab
// The crash lab's default suite, simulated power failures (docs/ARCHITECTURE.md §3–4):
//   - every registered durable structure survives at least 300 simulated crashes x 3 crash
//     images with no violation of its criterion (PMDS_SOAK=1: 10,000 crashes), half its runs on
//     a pool that starts at one chunk and grows, with crash points aimed at the growths;
//   - every planted-bug fixture IS reported within 500 crashes (two, named below, within 5,000),
//     and no bug-free control is (a lab that reports no violation on a planted bug fails here);
//   - a crash check replays exactly from its seed, and the scheduler makes runs deterministic.
// Release only (neither concurrent nor memory, test/CMakeLists.txt): the lab forks workload
// processes that spawn recovery processes and a Go checker, and takes minutes under TSan's fork
// handling and ASan's slowdown; the recovery code it crashes is under ASan in the structures'
// own recovery tests (the *_sim_test.cpp crash-image recoveries, the pool tests).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pmds/crashlab/entries.hpp"
#include "pmds/crashlab/mutation.hpp"
#include "pmds/crashlab/sim_lab.hpp"
#include "support/registry_entries.hpp"

namespace {

using namespace pmds;
using namespace pmds::crashlab;

bool soak() {
  const char* s = std::getenv("PMDS_SOAK");
  return s != nullptr && std::string(s) == "1";
}

// 300 crashes per registered structure: the suite's budget. These runs are most of the suite's
// time (61 entries; at 500 crashes, 60% of the release tests' time on the 2-core machine it is
// developed on, which runs at times 2-3x slower, and CI stops at 90 minutes), so the budget is
// set for the suite to fit; the soak (PMDS_SOAK=1) is where a structure is crashed at length. The
// planted bugs and controls below keep their own budgets (fixture_options).
SimOptions default_options() {
  SimOptions o;
  o.crashes = soak() ? 10000 : 300;
  o.images = 3;
  o.seed = 1;
  o.command = "pmds crashtest";
  return o;
}

std::string report(const LabResult& r) {
  std::string s;
  for (const auto& v : r.details) s += describe(r.structure, v);
  for (const auto& e : r.errors) s += "LAB ERROR: " + e + "\n";
  return s;
}

void print_rate(const LabResult& r) {
  std::printf(
      "[ crashlab ] %s: %llu crashes, %llu images, %llu recovery crashes, %llu undecided, %.1f s, "
      "%.1f crashes/s, %llu growths (%llu crashed)\n",
      r.structure.c_str(), static_cast<unsigned long long>(r.simulated_crashes),
      static_cast<unsigned long long>(r.images_checked),
      static_cast<unsigned long long>(r.recovery_crashes),
      static_cast<unsigned long long>(r.undecided), r.sim_seconds,
      r.sim_seconds > 0 ? static_cast<double>(r.simulated_crashes) / r.sim_seconds : 0.0,
      static_cast<unsigned long long>(r.pool_growths),
      static_cast<unsigned long long>(r.growth_crashes));
  std::printf("[ crashlab ] %s: recovery crashes by phase: %s; nested %llu; re-executed %llu%s\n",
              r.structure.c_str(), recovery_phases_text(r.recovery_crash_phases).c_str(),
              static_cast<unsigned long long>(r.nested_recovery_crashes),
              static_cast<unsigned long long>(r.reexecuted_operations),
              r.max_epochs_lost
                  ? ("; deepest loss " + std::to_string(*r.max_epochs_lost) + " epochs").c_str()
                  : "");
}

// A byte-string entry's workload writes keys and values longer than 8 bytes.
SimOptions with_strings_for(const registry::Entry& e, SimOptions o) {
  o.workload = with_suite_strings(e, o.workload);
  return o;
}

// ---- every registered durable structure ------------------------------------------------------

class CrashlabSimulated : public testing::TestWithParam<std::string> {};

TEST_P(CrashlabSimulated, SurvivesSimulatedCrashes) {
  const registry::Entry* e = registry::find(GetParam());
  ASSERT_NE(e, nullptr);
  const SimOptions o = with_strings_for(*e, default_options());
  const LabResult r = run_simulated(*e, o);
  print_rate(r);
  EXPECT_TRUE(r.errors.empty()) << report(r);
  EXPECT_GE(r.simulated_crashes, o.crashes);
  EXPECT_GE(r.images_checked, r.simulated_crashes);
  EXPECT_EQ(r.violations, 0u) << report(r);
  // Recoveries were crashed in every phase that writes the pool (a phase that only reads it,
  // such as most structures' contents, has no crash point: a crash there is one at the next
  // phase's first write), and crashed recoveries' recoveries were crashed again.
  for (const RecoveryPhase p : {RecoveryPhase::open, RecoveryPhase::continuation,
                                RecoveryPhase::close, RecoveryPhase::reopen})
    EXPECT_GT(r.recovery_crash_phases[static_cast<std::size_t>(p)], 0u) << to_string(p);
  EXPECT_GT(r.nested_recovery_crashes, 0u);
  std::uint64_t by_phase = 0;
  for (const std::uint64_t n : r.recovery_crash_phases) by_phase += n;
  EXPECT_EQ(by_phase, r.recovery_crashes + r.nested_recovery_crashes);
  // Background work (epoch advancers, the lazy sweep) was crashed inside its steps.
  if (e->has_background_work()) {
    EXPECT_GT(r.background_crashes, 0u);
  }
  // Half the runs started from a pool of one chunk: a structure that allocates per element
  // grew it in its workloads, and those growths were crashed (a register or a combining heap
  // allocates nothing after its creation: its pool grows only while it is created).
  if (e->kind != registry::Kind::register_object && e->kind != registry::Kind::priority_queue) {
    EXPECT_GT(r.pool_growths, 0u);
  }
  if (r.pool_growths > 0) {
    EXPECT_GT(r.growth_crashes, 0u);
  }
  // Detectable recovery was completed: operations recover_pending found not taken were invoked
  // again with their tickets (and checked to take effect once).
  if (e->criterion == Criterion::detectable) {
    EXPECT_GT(r.reexecuted_operations, 0u);
    EXPECT_GT(r.recovery_crash_phases[static_cast<std::size_t>(RecoveryPhase::reexecute)], 0u);
  }
  // The paper's own bound (the checker enforces it per history; this is the measured depth):
  // nbMontage loses at most epochs e-1 and e, InCLL at most the failed epoch.
  if (r.max_epochs_lost && e->epoch_bound() == EpochBound::two_epochs) {
    EXPECT_LE(*r.max_epochs_lost, 1u);
  }
  if (r.max_epochs_lost && e->epoch_bound() == EpochBound::failed_epoch) {
    EXPECT_EQ(*r.max_epochs_lost, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Registered, CrashlabSimulated,
                         testing::ValuesIn(pmds::test::durable_entry_names()),
                         pmds::test::entry_test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CrashlabSimulated);

// InCLL §4.3's lazy recovery under the lab. The registered InCLL Masstrees recover eagerly
// by default (a possibly damaged pool must be checked first), so the suite above crashes the
// eager path only; here every recovery opens lazily (and is itself crashed and redone; the
// byte-string trees' sweep runs in the lab's scheduled background steps), and the planted bug
// that leaves one border of the failed epoch undone must be reported.
class CrashlabSimulatedLazy : public testing::TestWithParam<std::string> {};

TEST_P(CrashlabSimulatedLazy, SurvivesCrashesWithLazyRecovery) {
  const registry::Entry* e = registry::find(GetParam());
  ASSERT_NE(e, nullptr);
  SimOptions o = with_strings_for(*e, default_options());
  o.workload.lazy_recovery = true;
  const LabResult r = run_simulated(*e, o);
  print_rate(r);
  EXPECT_TRUE(r.errors.empty()) << report(r);
  EXPECT_GE(r.simulated_crashes, o.crashes);
  EXPECT_GT(r.recovery_crashes, 0u);
  EXPECT_EQ(r.violations, 0u) << report(r);
}

INSTANTIATE_TEST_SUITE_P(InCLL, CrashlabSimulatedLazy,
                         testing::Values("masstree/incll", "masstree/logging",
                                         "masstree-bytes/incll", "masstree-bytes/logging"),
                         pmds::test::entry_test_name);

TEST(CrashlabSimulatedLazyFixture, LazyRecoverySkippingABorderIsReported) {
  const registry::Entry* e = find_entry("masstree/incll-bug-lazy-recovery-skips-node");
  ASSERT_NE(e, nullptr);
  SimOptions o = default_options();
  o.crashes = 500;
  o.workload.lazy_recovery = true;
  o.stop_at_first_violation = true;
  const LabResult r = run_simulated(*e, o);
  print_rate(r);
  EXPECT_TRUE(r.errors.empty()) << report(r);
  ASSERT_GT(r.violations, 0u) << "no violation in " << r.simulated_crashes << " crashes";
  std::printf("[ crashlab ] caught at simulated crash #%llu (lazy)\n",
              static_cast<unsigned long long>(r.first_violation_crash));
}

// ---- planted bugs ------------------------------------------------------------------------------

class CrashlabSimulatedPlantedBug : public testing::TestWithParam<std::string> {};

// Fixtures whose bug shows only in a rarer interleaving get lab options that make it likelier.
// register/pwfcomb-bug-paper-flush-rule needs two combiners stalled at once between their SC and
// its pwb while a third thread, served by the first, returns (combining/pwfcomb.hpp). With the
// default options (3 threads, a stall at 1 in 5 of a window's flushes) seeds 1-2 caught it only
// at simulated crash 11,313 and 6,073; with 4 threads and a stall at 1 in 2, seeds 1-10 caught
// it at crashes 25 to 2,323 (seed 1: 277). The budget keeps a margin for schedules that a later
// change of the structure's access pattern shifts. queue/pwfcomb-bug-dequeue-past-old-tail needs
// an enqueue combiner stalled between its SC and the pwb of S while a dequeuer empties the queue
// up to the link that S names (combining/wait_free_queue.hpp): not caught in 500 crashes at the
// defaults; with the same options seed 1 needed 2,100 crashes (215 s, the suite's longest test),
// seed 2 221. Short runs that start near empty catch it soonest: with 10
// operations per thread and a prefill of 1 (2026-11-28), seeds 1-10 caught it at crashes 30 to
// 2,472 (0.8 to 58 s; seed 1: 98, 2 s). The budget of 5,000 is the margin for a later change of
// the structure's access pattern.
// hash/montage-bug-payload-tagged-after-lin-cas needs a payload tagged after its commit while an
// advance passes its epoch and a crash lands two epochs later: at the defaults seed 1 caught it at
// crash 1,169; with 4 threads seeds 1-4 caught it at crashes 243 to 1,201.
SimOptions fixture_options(const std::string& fixture) {
  SimOptions o = default_options();
  if (fixture == "register/pwfcomb-bug-paper-flush-rule" ||
      fixture == "queue/pwfcomb-bug-dequeue-past-old-tail") {
    o.workload.threads = 4;
    o.persist_switch_probability = 0.5;
    o.crashes = 5000;
    if (fixture == "queue/pwfcomb-bug-dequeue-past-old-tail") {
      o.workload.ops = 10;
      o.workload.prefill = 1;
    }
  } else if (fixture == "masstree-bytes/incll-bug-bytes-freed-in-their-epoch") {
    // One thread replacing values of 8 keys: each freed block is reused at once, in the epoch
    // that freed it (with three threads mixing reads, blocks are rarely freed that soon).
    o.workload.threads = 1;
    o.workload.ops = 200;
    o.workload.key_range = 8;
    o.workload.read_percent = 0;
    o.crashes = 500;
  } else if (fixture == "masstree-bytes/incll-bug-sweep-skips-lower-layers") {
    o.workload.lazy_recovery = true;  // (only a lazy open sweeps)
    o.crashes = 500;
  } else if (fixture == "hash/montage-bug-payload-tagged-after-lin-cas") {
    o.workload.threads = 4;
    o.crashes = 3000;
  } else if (fixture.starts_with("alloc/probe-bug-growth-")) {
    // Every run grows its pool, and a third of the crash points are aimed at a growth.
    o.grow_percent = 100;
    o.growth_crash_percent = 30;
    o.crashes = 500;
  } else {
    o.crashes = 500;  // the fixtures' budget, soak or not
  }
  return with_strings_for(*find_entry(fixture), o);
}

TEST_P(CrashlabSimulatedPlantedBug, IsReportedWithinTheDefaultBudget) {
  const registry::Entry* e = find_entry(GetParam());
  ASSERT_NE(e, nullptr);
  SimOptions o = fixture_options(GetParam());
  o.stop_at_first_violation = true;
  const LabResult r = run_simulated(*e, o);
  print_rate(r);
  if (GetParam() == "alloc/probe-bug-growth-maps-elsewhere") {
    // A pool whose chunks are not where its pointers say: the workload process dies at its
    // first node in a new chunk, before any crash point there, and the lab reports it so.
    ASSERT_EQ(r.errors.size(), 1u) << report(r);
    EXPECT_NE(r.errors.front().find("killed by signal 11"), std::string::npos) << report(r);
    return;
  }
  EXPECT_TRUE(r.errors.empty()) << report(r);
  ASSERT_GT(r.violations, 0u) << GetParam() << ": the lab reported no violation in "
                              << r.simulated_crashes << " crashes";
  std::printf("[ crashlab ] %s caught at simulated crash #%llu\n%s", r.structure.c_str(),
              static_cast<unsigned long long>(r.first_violation_crash), report(r).c_str());
  // The report names a criterion and the object, shows an excerpt and a replay command.
  ASSERT_FALSE(r.details.empty());
  const Violation& v = r.details.front();
  EXPECT_FALSE(v.criterion.empty());
  // Caught by a verdict, not by a history the checker could not decide.
  EXPECT_NE(v.criterion, "undecided") << report(r);
  EXPECT_NE(v.replay.find("--replay"), std::string::npos);
  if (v.criterion == "durable") {
    EXPECT_FALSE(v.object.empty());
    EXPECT_FALSE(v.excerpt.empty());
  }
}

std::vector<std::string> bug_names() {
  std::vector<std::string> names;
  for (const auto* e : planted_bugs()) names.emplace_back(e->name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CrashlabSimulatedPlantedBug, testing::ValuesIn(bug_names()),
                         pmds::test::entry_test_name);

class CrashlabSimulatedControl : public testing::TestWithParam<std::string> {};

TEST_P(CrashlabSimulatedControl, IsNotReported) {
  const registry::Entry* e = find_entry(GetParam());
  ASSERT_NE(e, nullptr);
  SimOptions o = default_options();
  o.crashes = 500;
  const LabResult r = run_simulated(*e, o);
  print_rate(r);
  EXPECT_TRUE(r.errors.empty()) << report(r);
  EXPECT_GE(r.simulated_crashes, 500u);
  EXPECT_EQ(r.violations, 0u) << report(r);
}

std::vector<std::string> control_names() {
  std::vector<std::string> names;
  for (const auto* e : fixture_controls()) names.emplace_back(e->name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CrashlabSimulatedControl, testing::ValuesIn(control_names()),
                         pmds::test::entry_test_name);

// A structure's background work runs as a scheduled thread: it runs, and the same seed replays
// the same interleavings (its control passes above).
TEST(CrashlabScheduler, BackgroundWorkRunsScheduledAndReplays) {
  const registry::Entry* e = find_entry("list/izraelevitz-background-control");
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(e->has_background_work());
  SimOptions o = default_options();
  o.crashes = 100;
  const LabResult a = run_simulated(*e, o);
  const LabResult b = run_simulated(*e, o);
  print_rate(a);
  EXPECT_TRUE(a.errors.empty()) << report(a);  // also: no turn stolen (not replayable)
  EXPECT_GT(a.background_steps, a.workload_runs) << "the background thread did not run";
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.background_steps, b.background_steps);
}

// Runs `threads` threads of `steps` preemption points each under `s`: the thread of each step,
// in the order they ran.
std::vector<int> schedule_of(Scheduler& s, std::size_t threads, std::size_t steps) {
  std::vector<int> order;  // written only by the turn holder
  int word = 0;
  std::vector<std::thread> workers;
  for (std::size_t t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      s.enter(t);
      for (std::size_t i = 0; i < steps; ++i) {
        Scheduler::preemption_point(pm::sim::Operation::load, &word);
        order.push_back(static_cast<int>(t));
      }
      s.leave();
    });
  for (auto& w : workers) w.join();
  return order;
}

// The length, in steps the others ran, of each time a thread was stopped in the middle of its
// run and resumed.
std::vector<std::size_t> stop_lengths(const std::vector<int>& order) {
  std::vector<std::size_t> out;
  std::vector<std::size_t> last(8, 0);  // per thread: 1 + index of its last step, 0: not yet
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto t = static_cast<std::size_t>(order[i]);
    if (last[t] != 0 && last[t] != i) out.push_back(i - last[t]);
    last[t] = i + 1;
  }
  return out;
}

std::size_t median(std::vector<std::size_t> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Planned preemptions (Scheduler::Pct): a change point puts the running thread down and keeps it
// down while the others run, so that the window it stopped in stays open; a random switch hands
// the turn back after a hundred steps or so (p = 0.01, three threads). Both replay from the
// seed.
TEST(CrashlabScheduler, APlannedPreemptionStopsAThreadLongerThanARandomOne) {
  constexpr std::size_t threads = 3, steps = 400, seeds = 30;
  std::vector<std::size_t> planned_stops, random_stops;
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    // Without switches, a thread runs to its end...
    Scheduler plain(threads, seed, 0.0);
    const auto order = schedule_of(plain, threads, steps);
    ASSERT_EQ(order.size(), threads * steps);
    EXPECT_TRUE(stop_lengths(order).empty()) << "seed " << seed;
    // ... but at the change points (d - 1 = 2 of them).
    Scheduler planned(threads, seed, 0.0, 0.0, Scheduler::Pct{3, threads * steps});
    const auto stops = stop_lengths(schedule_of(planned, threads, steps));
    EXPECT_LE(stops.size(), 2u) << "seed " << seed;
    planned_stops.insert(planned_stops.end(), stops.begin(), stops.end());

    Scheduler random(threads, seed, 0.01);
    const auto r = stop_lengths(schedule_of(random, threads, steps));
    random_stops.insert(random_stops.end(), r.begin(), r.end());

    Scheduler both(threads, seed, 0.01, 0.0, Scheduler::Pct{3, threads * steps});
    Scheduler again(threads, seed, 0.01, 0.0, Scheduler::Pct{3, threads * steps});
    EXPECT_EQ(schedule_of(both, threads, steps), schedule_of(again, threads, steps))
        << "seed " << seed << " replays";
  }
  std::printf("stops in mid-run: planned %zu, median %zu steps; random %zu, median %zu steps\n",
              planned_stops.size(), median(planned_stops), random_stops.size(),
              median(random_stops));
  EXPECT_GE(planned_stops.size(), seeds) << "change points stop threads in mid-run";
  EXPECT_GE(median(planned_stops), 2 * median(random_stops));
}

// A holder that blocks outside the access layer (here: sleeps with the turn) would stop the run:
// after steal_after without a pass, the waiting thread takes the turn, and the run ends.
TEST(CrashlabScheduler, AHolderBlockedOutsideTheAccessLayerHasItsTurnStolen) {
  Scheduler s(2, 1, 1.0);  // every preemption point passes the turn
  int word = 0;
  std::thread holder([&] {
    s.enter(0);
    std::this_thread::sleep_for(Scheduler::steal_after + std::chrono::milliseconds(500));
    Scheduler::preemption_point(pm::sim::Operation::load, &word);  // waits for its turn back
    s.leave();
  });
  std::thread waiter([&] {
    s.enter(1);  // steals the turn
    Scheduler::preemption_point(pm::sim::Operation::load, &word);
    s.leave();
  });
  holder.join();
  waiter.join();
  EXPECT_EQ(s.stolen(), 1u);
}

// pm::Mutex (the pool's growth lock) is held across persistent accesses: its waiter spins
// through preemption points, so the turn goes back to the holder and nothing is stolen.
TEST(CrashlabScheduler, APmMutexWaiterHandsTheTurnBackToTheHolder) {
  Scheduler s(2, 1, 1.0);  // every preemption point passes the turn
  pm::sim::set_schedule_hook(&Scheduler::preemption_point);
  pm::Mutex mutex;
  pm::atomic<std::uint64_t> word{0};  // in DRAM: recorded by no region, still a preemption point
  std::vector<int> order;             // appended under the mutex
  const auto start = std::chrono::steady_clock::now();
  std::thread holder([&] {
    s.enter(0);
    std::lock_guard g(mutex);
    order.push_back(0);
    for (int i = 0; i < 5; ++i) word.store(word.load() + 1);  // each passes the turn
    order.push_back(0);
    s.leave();
  });
  std::thread waiter([&] {
    s.enter(1);
    std::lock_guard g(mutex);
    order.push_back(1);
    s.leave();
  });
  holder.join();
  waiter.join();
  pm::sim::set_schedule_hook(nullptr);
  EXPECT_EQ(s.stolen(), 0u);
  EXPECT_LT(std::chrono::steady_clock::now() - start, Scheduler::steal_after);
  EXPECT_EQ(order, (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(word.load(), 5u);
}

// The continuation's threads (run_in_turn): body(i) runs in order, each on participant
// i % threads (the calling thread is participant 0), one at a time.
TEST(CrashlabRunInTurn, RunsEachBodyInOrderOnItsParticipant) {
  constexpr std::size_t threads = 3, n = 10;
  std::vector<std::size_t> order;  // written by the body running, one at a time
  std::vector<std::thread::id> who(n);
  run_in_turn(threads, n, [&](std::size_t i) {
    order.push_back(i);
    who[i] = std::this_thread::get_id();
  });
  ASSERT_EQ(order.size(), n);
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_EQ(order[i], i);
    EXPECT_EQ(who[i], who[i % threads]) << i;
  }
  EXPECT_EQ(who[0], std::this_thread::get_id());
  EXPECT_NE(who[0], who[1]);
  EXPECT_NE(who[1], who[2]);
  EXPECT_NE(who[0], who[2]);
}

// A body that throws stops the rest, and the exception reaches the caller.
TEST(CrashlabRunInTurn, AThrowingBodyStopsTheRestAndIsRethrown) {
  std::vector<std::size_t> order;
  EXPECT_THROW(run_in_turn(2, 10,
                           [&](std::size_t i) {
                             order.push_back(i);
                             if (i == 4) throw std::runtime_error("body 4 fails");
                           }),
               std::runtime_error);
  EXPECT_EQ(order, (std::vector<std::size_t>{0, 1, 2, 3, 4}));
}

// ---- reproducibility ---------------------------------------------------------------------------

TEST(CrashlabReproducibility, TheSameSeedRunsTheSameInterleavingsAndFindsTheSameViolation) {
  const registry::Entry* e = find_entry("list/izraelevitz-bug-b-link-not-fenced");
  ASSERT_NE(e, nullptr);
  SimOptions o = default_options();
  o.crashes = 500;
  o.stop_at_first_violation = true;
  const LabResult a = run_simulated(*e, o);
  const LabResult b = run_simulated(*e, o);
  ASSERT_GT(a.violations, 0u) << report(a);
  EXPECT_EQ(a.first_violation_crash, b.first_violation_crash);
  EXPECT_EQ(a.events, b.events);
  ASSERT_FALSE(b.details.empty());
  EXPECT_EQ(a.details.front().replay, b.details.front().replay);
  EXPECT_EQ(a.details.front().excerpt, b.details.front().excerpt);

  // Its replay point, alone, reproduces the violation.
  const std::string& cmd = a.details.front().replay;
  const auto at = cmd.find("--replay ");
  ASSERT_NE(at, std::string::npos);
  const auto point = ReplayPoint::parse(cmd.substr(at + 9));
  ASSERT_TRUE(point.has_value()) << cmd;
  SimOptions replay = o;
  replay.replay = point;
  testing::internal::CaptureStderr();  // a replay prints the whole history
  const LabResult c = run_simulated(*e, replay);
  const std::string printed = testing::internal::GetCapturedStderr();
  EXPECT_EQ(c.simulated_crashes, 1u);
  EXPECT_GT(c.violations, 0u) << report(c);
  EXPECT_NE(printed.find("\"type\":\"crash\""), std::string::npos);
  ASSERT_FALSE(c.details.empty());
  EXPECT_EQ(c.details.front().excerpt, a.details.front().excerpt);

  // Another seed runs other interleavings.
  SimOptions other = o;
  other.seed = 2;
  other.crashes = 50;
  other.stop_at_first_violation = false;
  const LabResult d = run_simulated(*e, other);
  SimOptions same = other;
  const LabResult d2 = run_simulated(*e, same);
  EXPECT_EQ(d.events, d2.events);
  other.seed = 3;
  const LabResult f = run_simulated(*e, other);
  EXPECT_NE(d.events, f.events);
}

TEST(CrashlabReplayPoint, ParsesWhatItPrints) {
  const ReplayPoint p{12345678901234567890ull, 42, 2, RecoveryCrash{RecoveryPhase::close, 7},
                      std::nullopt};
  EXPECT_EQ(p.text(), "12345678901234567890:42:2:close@7");
  const auto q = ReplayPoint::parse(p.text());
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->workload_seed, p.workload_seed);
  EXPECT_EQ(q->event, 42u);
  EXPECT_EQ(q->image, 2u);
  ASSERT_TRUE(q->recovery_crash.has_value());
  EXPECT_EQ(q->recovery_crash->phase, RecoveryPhase::close);
  EXPECT_EQ(q->recovery_crash->offset, 7u);
  EXPECT_FALSE(q->recovery_crash2.has_value());
  // A crash of a crashed recovery's recovery: two crashes.
  const auto n = ReplayPoint::parse("1:2:0:continuation@30:open@4");
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->recovery_crash->phase, RecoveryPhase::continuation);
  EXPECT_EQ(n->recovery_crash->offset, 30u);
  EXPECT_EQ(n->recovery_crash2->phase, RecoveryPhase::open);
  EXPECT_EQ(n->recovery_crash2->offset, 4u);
  EXPECT_FALSE(ReplayPoint::parse("1:2").has_value());
  EXPECT_FALSE(ReplayPoint::parse("1:x:3").has_value());
  EXPECT_FALSE(ReplayPoint::parse("1:2:3:4").has_value());
  EXPECT_FALSE(ReplayPoint::parse("1:2:3:sideways@4").has_value());
  EXPECT_FALSE(ReplayPoint::parse("1:2:3:open@4:open@5:open@6").has_value());
  EXPECT_FALSE(ReplayPoint::parse("").has_value());
  // A PCT run states the preemption points its change points were drawn over.
  const auto pct = ReplayPoint::parse("1:2:0:open@4:pct@512");
  ASSERT_TRUE(pct.has_value());
  EXPECT_EQ(pct->pct_steps, 512u);
  EXPECT_EQ(pct->recovery_crash->phase, RecoveryPhase::open);
  EXPECT_EQ(pct->text(), "1:2:0:open@4:pct@512");
  EXPECT_EQ(ReplayPoint::parse("1:2:0:pct@9")->pct_steps, 9u);
  EXPECT_FALSE(ReplayPoint::parse("1:2:0:pct@0").has_value());
  EXPECT_FALSE(ReplayPoint::parse("1:2:0:pct@").has_value());
  EXPECT_FALSE(ReplayPoint::parse("1:2:pct@5").has_value());
  EXPECT_FALSE(ReplayPoint::parse("1:2:3:pct@5:open@1").has_value());
  EXPECT_FALSE(ReplayPoint::parse("99999999999999999999:2:3").has_value());  // past 64 bits
}

// --mix vary: each run's mix is drawn from its seed (so a replay finds it again), around the
// given one, and a few seeds cover every key range and read share of the set.
TEST(CrashlabWorkloadMix, VaryDrawsEachRunsMixFromItsSeed) {
  SimOptions o = default_options();
  o.workload.key_range = 8;
  o.workload.read_percent = 50;
  const registry::Entry& set = *registry::find("list/linkfree");
  const registry::Entry& queue = *registry::find("queue/izraelevitz");
  EXPECT_EQ(run_workload(set, o, 7).key_range, 8u);  // fixed: as given
  o.vary_mix = true;
  std::set<std::uint64_t> keys;
  std::set<unsigned> reads;
  std::set<std::size_t> set_prefills, queue_prefills;
  for (std::uint64_t seed = 0; seed < 64; ++seed) {
    const WorkloadOptions w = run_workload(set, o, mix_seed(o.seed, seed));
    EXPECT_EQ(w.key_range, run_workload(set, o, mix_seed(o.seed, seed)).key_range);
    set_prefills.insert(w.prefill);
    queue_prefills.insert(run_workload(queue, o, mix_seed(o.seed, seed)).prefill);
    EXPECT_EQ(w.threads, o.workload.threads);
    keys.insert(w.key_range);
    reads.insert(w.read_percent);
  }
  EXPECT_EQ(keys, (std::set<std::uint64_t>{4, 8, 16}));
  EXPECT_EQ(reads, (std::set<unsigned>{20, 50, 80}));
  EXPECT_EQ(set_prefills, (std::set<std::size_t>{0}));  // 0: the default, half the key range
  EXPECT_EQ(queue_prefills, (std::set<std::size_t>{0, 1}));
  EXPECT_NE(lab_command(set, o).find("--mix vary"), std::string::npos);
}

// A survivor's reason is read from its site's source: "Mutant survives:" in the comment block
// right above the site's line, or on the line itself, for every technique, or "Mutant survives
// (a, b):" for techniques (or structures) a and b alone; nothing for a site that gives none.
TEST(CrashlabMutation, ASurvivorsReasonIsReadFromTheCommentAboveItsSite) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("pmds_reason_" + std::to_string(::getpid()));
  fs::create_directories(root / "include/pmds");
  std::ofstream(root / "include/pmds/x.hpp") << "void f() {\n"
                                                "  // Write back the line.\n"
                                                "  // Mutant survives: the locked CAS that\n"
                                                "  //   follows orders it.\n"
                                                "  flush(a);\n"
                                                "  flush(b);  // Mutant survives: fenced below.\n"
                                                "  // A comment without the marker.\n"
                                                "  fence();\n"
                                                "  // Mutant survives (izraelevitz, flit): the\n"
                                                "  //   load below persists the line.\n"
                                                "  // Mutant survives (soft): never read.\n"
                                                "  load(a);\n"
                                                "  // Mutant survives (masstree/logging): no\n"
                                                "  //   InCLL.\n"
                                                "  flush(c);\n"
                                                "}\n";
  using pmds::crashlab::redundancy_reason;
  EXPECT_EQ(redundancy_reason("include/pmds/x.hpp:5:3", root),
            "the locked CAS that follows orders it.");
  EXPECT_EQ(redundancy_reason("include/pmds/x.hpp:6:3", root), "fenced below.");
  EXPECT_EQ(redundancy_reason("include/pmds/x.hpp:8:3", root), "");
  EXPECT_EQ(redundancy_reason("include/pmds/x.hpp:1:1", root), "");
  EXPECT_EQ(redundancy_reason("include/pmds/x.hpp:99:1", root), "") << "past the end";
  EXPECT_EQ(redundancy_reason("include/pmds/missing.hpp:5:3", root), "") << "no source";
  // A reason that names techniques holds for those alone.
  EXPECT_EQ(redundancy_reason("include/pmds/x.hpp:12:3", root, "izraelevitz"),
            "the load below persists the line.");
  EXPECT_EQ(redundancy_reason("include/pmds/x.hpp:12:3", root, "flit"),
            "the load below persists the line.");
  EXPECT_EQ(redundancy_reason("include/pmds/x.hpp:12:3", root, "soft"), "never read.");
  EXPECT_EQ(redundancy_reason("include/pmds/x.hpp:12:3", root, "mirror"), "");
  EXPECT_EQ(redundancy_reason("include/pmds/x.hpp:12:3", root), "") << "no technique given";
  EXPECT_EQ(redundancy_reason("include/pmds/x.hpp:5:3", root, "flit"),
            "the locked CAS that follows orders it.")
      << "a reason that names none holds for every technique";
  // ... or one structure, by its name.
  EXPECT_EQ(redundancy_reason("include/pmds/x.hpp:15:3", root, "logging", "masstree/logging"),
            "no InCLL.");
  EXPECT_EQ(redundancy_reason("include/pmds/x.hpp:15:3", root, "logging", "masstree-bytes/logging"),
            "");
  fs::remove_all(root);
}

}  // namespace
