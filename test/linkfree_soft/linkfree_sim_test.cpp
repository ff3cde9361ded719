// Link-free list, hash set and skip list under the simulated Px86 backend
// (docs/ARCHITECTURE.md §3): direct crash tests. A workload of 1 or 2 threads runs with a crash
// handler at a drawn event; the handler snapshots the durable-state model; crash images (minimum,
// maximum, random) of the pool are written back to the pool file, which is opened and recovered;
// the recovered contents must be explained by the history (durable linearizability, checked exactly
// per key: every completed operation took effect, a pending one may or may not have).
// The same test logic must report violations for the planted-bug variants (LinkFreeBug).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "linkfree_soft/linkfree_test_util.hpp"
#include "linkfree_soft/set_history_check.hpp"

namespace pmds::test {
namespace {

namespace sim = pm::sim;
using linkfree_soft::LinkFreeBug;

using namespace set_check;

// The per-key checker on hand-made histories (it must be able to say no).
Op make_op(OpKind kind, unsigned thread, std::uint64_t invoked, std::uint64_t responded,
           bool result, Value value = 0) {
  Op op{kind, 1, value, result, invoked, responded == 0 ? ~std::uint64_t{0} : responded};
  op.thread = thread;
  return op;
}
const KeyState absent{};
KeyState present(Value v) {
  return KeyState{true, v};
}

TEST(DurableLinearizabilityCheck, CompletedOperationsMustSurvivePendingOnesMay) {
  const std::vector<Op> inserted{make_op(OpKind::insert, 0, 1, 2, true, 7)};
  EXPECT_TRUE(key_history_ok(inserted, present(7)));
  EXPECT_FALSE(key_history_ok(inserted, absent));
  EXPECT_FALSE(key_history_ok(inserted, present(8)));
  const std::vector<Op> pending{make_op(OpKind::insert, 0, 1, 0, false, 7)};
  EXPECT_TRUE(key_history_ok(pending, present(7)));
  EXPECT_TRUE(key_history_ok(pending, absent));
  EXPECT_FALSE(key_history_ok(pending, present(8)));
  // Results must fit the state: a remove of an absent key cannot return true.
  const std::vector<Op> bad_remove{make_op(OpKind::remove, 0, 1, 2, true)};
  EXPECT_FALSE(key_history_ok(bad_remove, absent));
}

TEST(DurableLinearizabilityCheck, ThreadsRespectRealTimeAndResults) {
  // Overlapping inserts: the one that returned true won, so its value is the one recovered.
  const std::vector<Op> race{make_op(OpKind::insert, 0, 1, 4, true, 10),
                             make_op(OpKind::insert, 1, 2, 3, false, 20)};
  EXPECT_TRUE(key_history_ok(race, present(10)));
  EXPECT_FALSE(key_history_ok(race, present(20)));
  EXPECT_FALSE(key_history_ok(race, absent));
  // A remove that started after an insert returned must follow it.
  const std::vector<Op> ordered{make_op(OpKind::insert, 0, 1, 2, true, 5),
                                make_op(OpKind::remove, 1, 3, 4, true)};
  EXPECT_TRUE(key_history_ok(ordered, absent));
  EXPECT_FALSE(key_history_ok(ordered, present(5)));
  // contains(false) that started after the insert returned cannot be explained.
  const std::vector<Op> miss{make_op(OpKind::insert, 0, 1, 2, true, 5),
                             make_op(OpKind::contains, 1, 3, 4, false)};
  EXPECT_FALSE(key_history_ok(miss, present(5)));
  // One thread's operations are sequential: its insert-remove-insert ends present.
  const std::vector<Op> own{make_op(OpKind::insert, 0, 1, 2, true, 1),
                            make_op(OpKind::remove, 0, 3, 4, true),
                            make_op(OpKind::insert, 0, 5, 6, true, 2)};
  EXPECT_TRUE(key_history_ok(own, present(2)));
  EXPECT_FALSE(key_history_ok(own, present(1)));
  EXPECT_FALSE(key_history_ok(own, absent));
}

TEST(DurableLinearizabilityCheck, LongTwoThreadHistoriesOnOneKeyAreChecked) {
  // 2 x 200 alternating inserts and removes, each thread's own ones succeeding in turn: the
  // search must finish (it is polynomial in the per-thread lengths) and find the end state.
  std::vector<Op> ops;
  std::uint64_t clock = 1;
  for (int i = 0; i < 200; ++i) {
    const unsigned t = static_cast<unsigned>(i % 2);
    ops.push_back(make_op(OpKind::insert, t, clock, clock + 1, true, static_cast<Value>(i)));
    clock += 2;
    ops.push_back(make_op(OpKind::remove, t, clock, clock + 1, true));
    clock += 2;
  }
  EXPECT_TRUE(key_history_ok(ops, absent));
  EXPECT_FALSE(key_history_ok(ops, present(199)));
}

struct Workload {
  int threads = 1;
  int ops_per_thread = 60;
  Key key_range = 12;  // keys 1..key_range, odd ones prefilled
  unsigned read_percent = 30;
};

struct TrialResult {
  bool crashed = false;
  std::vector<std::string> violations;  // one line per image and key that recovery got wrong
  int history_violations = 0;           // of which: contents no linearization explains
};

// Finer interleavings for the multi-threaded runs: before an access-layer operation, a thread
// sometimes yields, so the other thread can take the simulator lock in the middle of an
// operation (a mutex handed back and forth at random, rather than long runs of one thread).
void yield_sometimes() {
  thread_local std::minstd_rand rng(static_cast<unsigned>(pmds::thread_id()) + 1);
  if (rng() % 4 == 0) std::this_thread::yield();
}
struct InterleaveScope {
  explicit InterleaveScope(bool on) {
    if (on) sim::set_schedule_hook(&yield_sometimes);
  }
  ~InterleaveScope() { sim::set_schedule_hook(nullptr); }
};

constexpr std::size_t kPoolSize = pm::Pool::min_size() + (std::size_t{3} << 20);

// Crashes per campaign of the correct structures. The simulator under a sanitizer is an order
// of magnitude slower, so those builds draw fewer crash points (the release build draws all).
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr int kCrashes = 8;
#else
constexpr int kCrashes = 40;
#endif

// Runs the workload with a crash at event `crash_offset` after the start, then recovers every
// chosen image and checks it. crash_offset = ~0: no crash (returns the event count in
// `events`).
template <class Kind>
TrialResult run_trial(const Workload& w, std::uint64_t crash_offset, std::uint64_t seed,
                      std::uint64_t* events = nullptr) {
  TrialResult r;
  TempPoolPath path("lf_sim");
  std::vector<Op> prefill;
  std::vector<std::vector<Op>> history(static_cast<std::size_t>(w.threads));
  std::atomic<std::uint64_t> clock{1};
  std::atomic<bool> crashed{false};
  std::uint64_t crash_stamp = 0;
  std::optional<sim::Snapshot> snap;
  void* base = nullptr;
  {
    auto pool = pm::Pool::create(path.str(), kPoolSize, "test");
    base = pool.base();
    auto set = Kind::create(pool);
    for (Key k = 1; k <= w.key_range; k += 2) {
      Op op{OpKind::insert, k, 1000 + k};
      op.thread = static_cast<unsigned>(w.threads);  // the prefill runs alone, first
      op.invoked = clock.fetch_add(1);
      op.result = set->insert(k, op.value);
      op.responded = clock.fetch_add(1);
      EXPECT_TRUE(op.result);
      prefill.push_back(op);
    }
    InterleaveScope interleave(w.threads > 1);
    const std::uint64_t start = sim::event_count();
    if (crash_offset != ~std::uint64_t{0}) {
      sim::set_crash_handler(start + crash_offset, [&] {
        crash_stamp = clock.fetch_add(1);
        snap = sim::snapshot();
        crashed.store(true);
      });
    }
    std::vector<std::thread> workers;
    for (int t = 0; t < w.threads; ++t) {
      workers.emplace_back([&, t] {
        std::mt19937_64 rng(seed * 31 + static_cast<unsigned>(t));
        auto& ops = history[static_cast<std::size_t>(t)];
        for (int i = 0; i < w.ops_per_thread && !crashed.load(); ++i) {
          Op op{};
          op.thread = static_cast<unsigned>(t);
          op.key = 1 + rng() % w.key_range;
          const unsigned dice = static_cast<unsigned>(rng() % 100);
          op.kind = dice < w.read_percent / 2 ? OpKind::contains
                    : dice < w.read_percent   ? OpKind::get
                    : dice % 2 == 0           ? OpKind::insert
                                              : OpKind::remove;
          op.value = (static_cast<Value>(t + 1) << 32) | static_cast<Value>(i);
          op.invoked = clock.fetch_add(1);
          switch (op.kind) {
            case OpKind::insert:
              op.result = set->insert(op.key, op.value);
              break;
            case OpKind::remove:
              op.result = set->remove(op.key);
              break;
            case OpKind::contains:
              op.result = set->contains(op.key);
              break;
            case OpKind::get: {
              const auto v = set->get(op.key);
              op.result = v.has_value();
              op.value = v.value_or(0);
              break;
            }
          }
          op.responded = clock.fetch_add(1);
          ops.push_back(op);
        }
      });
    }
    for (auto& th : workers) th.join();
    if (events != nullptr) *events = sim::event_count() - start;
    sim::clear_crash_handler();
    set.reset();
  }  // the pool closes: its file is about to be overwritten by crash images anyway
  if (!crashed.load()) return r;
  r.crashed = true;

  // The history as it stood at the crash: operations invoked after it never happened; those
  // that had not responded before it are pending.
  std::vector<Op> at_crash = prefill;
  for (const auto& ops : history) {
    for (Op op : ops) {
      if (op.invoked > crash_stamp) break;
      if (op.responded > crash_stamp) op.responded = ~std::uint64_t{0};
      at_crash.push_back(op);
    }
  }
  std::size_t region = snap->region_count();
  for (std::size_t i = 0; i < snap->region_count(); ++i)
    if (snap->region_base(i) == base) region = i;
  if (region == snap->region_count()) {
    ADD_FAILURE() << "the pool's region is not in the snapshot";
    return r;
  }
  std::vector<unsigned char> image(snap->region_size(region));
  const std::pair<sim::ImageKind, const char*> kinds[] = {{sim::ImageKind::minimum, "minimum"},
                                                          {sim::ImageKind::maximum, "maximum"},
                                                          {sim::ImageKind::random, "random"},
                                                          {sim::ImageKind::random, "random"}};
  for (std::size_t n = 0; n < std::size(kinds); ++n) {
    snap->write_image(region, kinds[n].first, seed + n, image.data());
    {
      std::FILE* f = std::fopen(path.str().c_str(), "r+b");
      EXPECT_NE(f, nullptr);
      EXPECT_EQ(std::fwrite(image.data(), 1, image.size(), f), image.size());
      std::fclose(f);
    }
    auto pool = pm::Pool::open(path.str(), "test");
    auto set = Kind::open(pool);
    const auto found = contents_of(*set);
    const std::string where = std::string(kinds[n].second) + " image, crash at event " +
                              std::to_string(crash_offset) + ", seed " + std::to_string(seed);
    if (set->recovery_stats().duplicate_keys != 0)
      r.violations.push_back(where + ": recovery found two live nodes with one key");
    if (auto ok = durably_linearizable(at_crash, found); !ok) {
      ++r.history_violations;
      r.violations.push_back(where + ": " + ok.message());
    }
    // The recovered set is usable.
    const Key probe = w.key_range + 1;
    EXPECT_TRUE(set->insert(probe, 1));
    EXPECT_TRUE(set->remove(probe));
  }
  return r;
}

// Crashes at `trials` drawn events of the workload; returns every violation found.
struct CampaignResult {
  std::vector<std::string> violations;
  int history_violations = 0;
  int trials = 0;
};

// Crashes at `trials` drawn events of the workload; returns every violation found (or stops at
// the first history violation when asked).
template <class Kind>
CampaignResult crash_campaign(const Workload& w, int trials, std::uint64_t seed,
                              bool stop_at_first = false) {
  std::uint64_t events = 0;
  run_trial<Kind>(w, ~std::uint64_t{0}, seed, &events);
  EXPECT_GT(events, 0u);
  std::mt19937_64 rng(seed);
  CampaignResult all;
  int crashed = 0;
  for (int i = 0; i < trials; ++i) {
    const std::uint64_t at = rng() % (events + 1);
    const TrialResult r = run_trial<Kind>(w, at, seed + static_cast<std::uint64_t>(i));
    crashed += r.crashed;
    ++all.trials;
    all.violations.insert(all.violations.end(), r.violations.begin(), r.violations.end());
    all.history_violations += r.history_violations;
    if (stop_at_first && all.history_violations > 0) break;
  }
  // Multi-threaded runs vary in length; most drawn events must still fall inside them.
  if (!stop_at_first) {
    EXPECT_GT(crashed, trials / 2);
  }
  return all;
}

template <class Kind>
class LinkFreeCrashTest : public ::testing::Test {};
using Kinds = ::testing::Types<ListKind<>, HashKind<>, SkipListKind<>>;
TYPED_TEST_SUITE(LinkFreeCrashTest, Kinds);

TYPED_TEST(LinkFreeCrashTest, OneThreadEveryCompletedOperationSurvives) {
  Workload w;
  w.threads = 1;
  const auto violations = crash_campaign<TypeParam>(w, kCrashes, 11).violations;
  EXPECT_TRUE(violations.empty()) << violations.size() << " violations, first: "
                                  << (violations.empty() ? "" : violations.front());
}

TYPED_TEST(LinkFreeCrashTest, TwoThreadsEveryCompletedOperationSurvives) {
  Workload w;
  w.threads = 2;
  w.key_range = 6;
  const auto violations = crash_campaign<TypeParam>(w, kCrashes, 23).violations;
  EXPECT_TRUE(violations.empty()) << violations.size() << " violations, first: "
                                  << (violations.empty() ? "" : violations.front());
}

// The workload that catches valid_before_link below, on the correct code: no violation.
TYPED_TEST(LinkFreeCrashTest, TwoThreadsOnOneKeyEveryCompletedOperationSurvives) {
  Workload w;
  w.threads = 2;
  w.key_range = 1;
  w.read_percent = 0;
  w.ops_per_thread = 80;
  const auto violations = crash_campaign<TypeParam>(w, kCrashes, 12).violations;
  EXPECT_TRUE(violations.empty()) << violations.size() << " violations, first: "
                                  << (violations.empty() ? "" : violations.front());
}

// The checker is not vacuous: each planted bug is reported within a bounded number of crashes.
template <class Kind>
void expect_caught(const Workload& w, int max_trials, std::uint64_t seed) {
  const CampaignResult c = crash_campaign<Kind>(w, max_trials, seed, true);
  ASSERT_GT(c.history_violations, 0)
      << "planted bug not caught in " << max_trials
      << " crashes (other violations: " << c.violations.size() << ")";
  for (const auto& v : c.violations)
    if (v.find("no linearization") != std::string::npos) {
      std::printf("  caught after %d crashes: %s\n", c.trials, v.c_str());
      break;
    }
}

TEST(LinkFreePlantedBugs, RemoveWithoutFlushBeforeTrimIsCaught) {
  Workload w;
  w.threads = 1;
  w.read_percent = 0;
  expect_caught<ListKind<LinkFreeBug::trim_without_flush>>(w, 200, 5);
  expect_caught<HashKind<LinkFreeBug::trim_without_flush>>(w, 200, 6);
  expect_caught<SkipListKind<LinkFreeBug::trim_without_flush>>(w, 200, 7);
}

TEST(LinkFreePlantedBugs, RecoveryKeepingDeletedNodesIsCaught) {
  Workload w;
  w.threads = 1;
  w.read_percent = 0;
  expect_caught<ListKind<LinkFreeBug::recover_deleted>>(w, 200, 8);
  expect_caught<HashKind<LinkFreeBug::recover_deleted>>(w, 200, 9);
  expect_caught<SkipListKind<LinkFreeBug::recover_deleted>>(w, 200, 10);
}

TEST(LinkFreePlantedBugs, ValidBeforeLinkIsCaughtWithTwoInserters) {
  // §3.3's scenario: two threads insert the same keys; a losing insert's node, made valid
  // before its failed link, survives a crash next to (or after the removal of) the winner's.
  Workload w;
  w.threads = 2;
  w.key_range = 1;
  w.read_percent = 0;
  w.ops_per_thread = 80;
  expect_caught<ListKind<LinkFreeBug::valid_before_link>>(w, 400, 12);
  expect_caught<HashKind<LinkFreeBug::valid_before_link>>(w, 400, 13);
  expect_caught<SkipListKind<LinkFreeBug::valid_before_link>>(w, 400, 14);
}

// A crash during recovery: recovery writes only volatile-meaning fields (links, towers, flags)
// with plain stores and no flush or fence, so every image of a crash at its end (any subset of
// its stores persisted, per line a prefix) must recover to the same contents.
TYPED_TEST(LinkFreeCrashTest, RecoveryIsRestartableAndIssuesNoFlushOrFence) {
  TempPoolPath path("lf_sim_rec");
  std::map<Key, Value> model;
  {
    auto pool = pm::Pool::create(path.str(), kPoolSize, "test");
    auto set = TypeParam::create(pool);
    for (Key k = 1; k <= 300; ++k) ASSERT_TRUE(set->insert(k * 3, k));
    for (Key k = 1; k <= 300; k += 4) ASSERT_TRUE(set->remove(k * 3));
    for (Key k = 1; k <= 300; ++k)
      if (k % 4 != 1) model[k * 3] = k;
  }
  std::optional<sim::Snapshot> snap;
  void* base = nullptr;
  {
    auto pool = pm::Pool::open(path.str(), "test");
    base = pool.base();
    sim::mark_all_durable();
    const auto before = sim::stats();
    auto set = TypeParam::open(pool);
    const auto after = sim::stats();
    EXPECT_EQ(after.events, before.events) << "recovery fenced, flushed with clflush or did an RMW";
    EXPECT_EQ(after.pending_flushes, before.pending_flushes) << "recovery flushed";
    EXPECT_GT(after.undetermined_stores, 0u) << "recovery should have relinked nodes";
    EXPECT_EQ(contents_of(*set), model);
    snap = sim::snapshot();
  }
  std::size_t region = 0;
  for (std::size_t i = 0; i < snap->region_count(); ++i)
    if (snap->region_base(i) == base) region = i;
  std::vector<unsigned char> image(snap->region_size(region));
  for (std::uint64_t seed = 0; seed < 6; ++seed) {
    snap->write_image(region, seed == 0 ? sim::ImageKind::minimum : sim::ImageKind::random, seed,
                      image.data());
    std::FILE* f = std::fopen(path.str().c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(image.data(), 1, image.size(), f), image.size());
    std::fclose(f);
    auto pool = pm::Pool::open(path.str(), "test");
    auto set = TypeParam::open(pool);
    EXPECT_EQ(contents_of(*set), model) << "image " << seed;
  }
}

}  // namespace
}  // namespace pmds::test
