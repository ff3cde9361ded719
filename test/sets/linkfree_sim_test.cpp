// Link-free list, hash set and skip list under the simulated Px86 backend (DESIGN.md §3): direct
// crash tests. A workload of 1 or 2 threads runs with a crash handler at a drawn event; the
// handler snapshots the durable-state model; crash images (minimum, maximum, random) of the pool
// are written back to the pool file, which is opened and recovered; the recovered contents must
// be explained by the history (durable linearizability, checked exactly per key: every
// completed operation took effect, a pending one may or may not have).
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
#include <tuple>
#include <vector>

#include "sets/linkfree_test_util.hpp"

namespace pmds::test {
namespace {

namespace sim = pm::sim;
using sets::LinkFreeBug;

enum class OpType { insert, remove, contains, get };

struct Op {
  OpType type;
  Key key;
  Value value = 0;           // insert's value
  bool result = false;       // insert, remove, contains
  std::optional<Value> got;  // get
  std::uint64_t start = 0, end = 0;
  bool pending = false;  // started before the crash, not returned before it
};

using State = std::optional<Value>;  // one key: absent, or present with a value

// Applies op to s if op's recorded result is possible in state s (any result if pending).
std::optional<State> apply(const Op& op, const State& s) {
  switch (op.type) {
    case OpType::insert:
      if (!op.pending && op.result != !s.has_value()) return std::nullopt;
      return s.has_value() ? s : State(op.value);
    case OpType::remove:
      if (!op.pending && op.result != s.has_value()) return std::nullopt;
      return State();
    case OpType::contains:
      if (!op.pending && op.result != s.has_value()) return std::nullopt;
      return s;
    case OpType::get:
      if (!op.pending && op.got != s) return std::nullopt;
      return s;
  }
  return std::nullopt;
}

// Durable linearizability of one key's history over two threads (a set is a product of
// per-key objects, and linearizability is local, so per-key checking is exact): is there an
// interleaving of the threads' operations, respecting real time, with every completed operation
// and any subset of the pending ones (each the last of its thread), whose results match and
// which ends in `recovered`?
bool explainable(const State& initial, const std::vector<Op>& a, const std::vector<Op>& b,
                 const State& recovered) {
  using Node = std::tuple<std::size_t, std::size_t, bool, Value>;
  std::set<Node> seen;
  struct Step {
    std::size_t i, j;
    State s;
  };
  std::vector<Step> todo;
  todo.push_back(Step{0, 0, initial});
  auto done = [](const std::vector<Op>& ops, std::size_t i) {
    return i == ops.size() || (i + 1 == ops.size() && ops[i].pending);
  };
  while (!todo.empty()) {
    const Step step = todo.back();
    todo.pop_back();
    const std::size_t i = step.i, j = step.j;
    const State s = step.s;
    if (!seen.emplace(i, j, s.has_value(), s.value_or(0)).second) continue;
    if (done(a, i) && done(b, j) && s == recovered) return true;
    // a[i] may go next unless b[j] returned before a[i] started (then b[j] must precede it).
    if (i < a.size() && (j == b.size() || b[j].pending || !(b[j].end < a[i].start))) {
      if (auto t = apply(a[i], s)) todo.push_back(Step{i + 1, j, *t});
    }
    if (j < b.size() && (i == a.size() || a[i].pending || !(a[i].end < b[j].start))) {
      if (auto t = apply(b[j], s)) todo.push_back(Step{i, j + 1, *t});
    }
  }
  return false;
}

// The per-key checker on hand-made histories (it must be able to say no).
Op make_op(OpType type, std::uint64_t start, std::uint64_t end, bool result, Value value = 0) {
  Op op;
  op.type = type;
  op.key = 1;
  op.value = value;
  op.result = result;
  op.start = start;
  op.end = end;
  op.pending = end == 0;
  return op;
}

TEST(DurableLinearizabilityCheck, CompletedOperationsMustSurvivePendingOnesMay) {
  const std::vector<Op> none;
  const std::vector<Op> inserted{make_op(OpType::insert, 1, 2, true, 7)};
  EXPECT_TRUE(explainable(State(), inserted, none, State(7)));
  EXPECT_FALSE(explainable(State(), inserted, none, State()));
  EXPECT_FALSE(explainable(State(), inserted, none, State(8)));
  const std::vector<Op> pending{make_op(OpType::insert, 1, 0, false, 7)};
  EXPECT_TRUE(explainable(State(), pending, none, State(7)));
  EXPECT_TRUE(explainable(State(), pending, none, State()));
  EXPECT_FALSE(explainable(State(), pending, none, State(8)));
  // Results must fit the state: a remove of an absent key cannot return true.
  const std::vector<Op> bad_remove{make_op(OpType::remove, 1, 2, true)};
  EXPECT_FALSE(explainable(State(), bad_remove, none, State()));
}

TEST(DurableLinearizabilityCheck, TwoThreadsRespectRealTimeAndResults) {
  // Overlapping inserts: the one that returned true won, so its value is the one recovered.
  const std::vector<Op> a{make_op(OpType::insert, 1, 4, true, 10)};
  const std::vector<Op> b{make_op(OpType::insert, 2, 3, false, 20)};
  EXPECT_TRUE(explainable(State(), a, b, State(10)));
  EXPECT_FALSE(explainable(State(), a, b, State(20)));
  EXPECT_FALSE(explainable(State(), a, b, State()));
  // A remove that started after an insert returned must follow it.
  const std::vector<Op> ins{make_op(OpType::insert, 1, 2, true, 5)};
  const std::vector<Op> rem{make_op(OpType::remove, 3, 4, true)};
  EXPECT_TRUE(explainable(State(), ins, rem, State()));
  EXPECT_FALSE(explainable(State(), ins, rem, State(5)));
  // contains(false) that started after the insert returned cannot be explained.
  const std::vector<Op> miss{make_op(OpType::contains, 3, 4, false)};
  EXPECT_FALSE(explainable(State(), ins, miss, State(5)));
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
  std::map<Key, State> initial;
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
    for (Key k = 1; k <= w.key_range; ++k) {
      initial[k] = State();
      if (k % 2 == 1) {
        EXPECT_TRUE(set->insert(k, 1000 + k));
        initial[k] = 1000 + k;
      }
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
          Op op;
          op.key = 1 + rng() % w.key_range;
          const unsigned dice = static_cast<unsigned>(rng() % 100);
          op.type = dice < w.read_percent / 2 ? OpType::contains
                    : dice < w.read_percent   ? OpType::get
                    : dice % 2 == 0           ? OpType::insert
                                              : OpType::remove;
          op.value = (static_cast<Value>(t + 1) << 32) | static_cast<Value>(i);
          op.start = clock.fetch_add(1);
          switch (op.type) {
            case OpType::insert:
              op.result = set->insert(op.key, op.value);
              break;
            case OpType::remove:
              op.result = set->remove(op.key);
              break;
            case OpType::contains:
              op.result = set->contains(op.key);
              break;
            case OpType::get:
              op.got = set->get(op.key);
              break;
          }
          op.end = clock.fetch_add(1);
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

  // The history as it stood at the crash.
  for (auto& ops : history) {
    std::vector<Op> kept;
    for (Op op : ops) {
      if (op.start > crash_stamp) break;  // started after the crash: never happened
      op.pending = op.end > crash_stamp;
      kept.push_back(op);
    }
    ops = std::move(kept);
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
    for (const auto& [k, v] : found)
      if (!initial.contains(k)) r.violations.push_back(where + ": unknown key recovered");
    for (const auto& [k, init] : initial) {
      std::vector<Op> per_thread[2];
      for (std::size_t t = 0; t < history.size(); ++t)
        for (const Op& op : history[t])
          if (op.key == k) per_thread[t].push_back(op);
      const State got = found.contains(k) ? State(found.at(k)) : State();
      if (!explainable(init, per_thread[0], per_thread[1], got)) {
        ++r.history_violations;
        r.violations.push_back(where + ": key " + std::to_string(k) + " recovered as " +
                               (got ? std::to_string(*got) : std::string("absent")) +
                               ", which no linearization of the history explains");
      }
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
    if (v.find("linearization") != std::string::npos) {
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
