// labels: slow
// SOFT list, hash set and skip list under the simulated Px86 backend (docs/ARCHITECTURE.md §3):
// direct crash tests. A workload (1 to 3 threads, random operations on a few keys) runs with a
// crash handler at a drawn crash-point event; the handler snapshots the durable-state model and
// stamps the history; crash images of the pool (every image when there are few, else the minimum,
// the maximum and random ones) are written back to the pool file, which is opened and recovered.
// Each recovered set must be explained by the history (durable linearizability, checked exactly per
// key: every completed operation took effect, each pending one may or may not have), and must then
// work on: new inserts first reuse the slots the crash left half-created, and a clean reopen must
// give back exactly the model.
// The same test logic must report violations for SOFT's planted bugs within a bounded number of
// crash points (a checker that accepts everything proves nothing, docs/ARCHITECTURE.md §4).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "linkfree_soft/soft_test_support.hpp"

namespace {

using namespace soft_test;
namespace sim = pm::sim;
using linkfree_soft::SoftBug;
using linkfree_soft::detail::SoftPNode;

static_assert(pm::backend == pm::Backend::simulated);

// Sanitizer builds run the same campaigns with fewer crash points (the simulator serialises
// everything under one lock, which ThreadSanitizer makes slow); the planted-bug tests stop at
// the first violation and keep their bound.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr int kTrialDivisor = 4;
#else
constexpr int kTrialDivisor = 1;
#endif

// A pool of 4 chunks: enough for one chunk per worker thread.
constexpr std::size_t kPoolSize = pm::Pool::min_size() + (std::size_t{3} << 20);

struct Workload {
  unsigned threads = 1;
  int ops_per_thread = 40;
  Key key_range = 8;  // keys 1..key_range; the odd ones are inserted before the crash window
  unsigned read_percent = 30;
};

struct Campaign {
  std::vector<std::string> violations;
  std::size_t crashes = 0;
  std::size_t images = 0;
  std::size_t half_created_reused = 0;  // slots a crash left half-created, then made live again
};

// The model's flush is clwb (pending until the thread's next fence), whatever the host has.
class FlushModel {
 public:
  FlushModel() : saved_(pm::detail::flush_instruction) {
    pm::detail::flush_instruction = pm::FlushInstruction::clwb;
  }
  ~FlushModel() { pm::detail::flush_instruction = saved_; }

 private:
  pm::FlushInstruction saved_;
};

void write_file(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
}

// After recovering an image: takes every free 64-byte slot of the chunks in use from the
// allocator and gives them back with the half-created ones (validStart != validEnd, left by a
// crash inside create) last, so that they are the first the next inserts reuse. Which slots are
// half-created is read from the image bytes (plain reads, not simulated loads). Returns them.
std::vector<const SoftPNode*> put_half_created_slots_first(pm::ChunkAllocator& a,
                                                           const std::vector<unsigned char>& image,
                                                           const void* base) {
  static_assert(offsetof(SoftPNode, valid_start) == 0 && offsetof(SoftPNode, valid_end) == 1);
  std::set<const void*> half_created;
  a.for_each_slot([&](void* slot, std::size_t size) {
    if (size != sizeof(SoftPNode)) return;
    const auto offset =
        static_cast<std::size_t>(static_cast<const char*>(slot) - static_cast<const char*>(base));
    if (image[offset] != image[offset + 1]) half_created.insert(slot);
  });
  const std::size_t used = a.used_chunks();
  std::vector<void*> taken;
  for (;;) {
    void* p;
    try {
      p = a.allocate(sizeof(SoftPNode));
    } catch (const pmds::PoolFull&) {
      break;  // every chunk was in use: all free slots are taken
    }
    if (a.used_chunks() != used) {  // a new chunk: the old ones' free slots are all taken
      a.free(p);
      break;
    }
    taken.push_back(p);
  }
  std::vector<const SoftPNode*> half;
  for (void* p : taken) {
    if (half_created.count(p))
      half.push_back(static_cast<const SoftPNode*>(p));
    else
      a.free(p);
  }
  for (auto it = half.rbegin(); it != half.rend(); ++it) a.free(const_cast<SoftPNode*>(*it));
  return half;
}

// One trial: prefill, run the workload with a crash at `crash_offset` events after the start
// (no crash when it is ~0; then `events` receives the run's event count), recover every chosen
// image and check it. Appends to the campaign.
template <class K>
void run_trial(const Workload& w, std::uint64_t crash_offset, std::uint64_t seed, Campaign& c,
               std::uint64_t* events = nullptr) {
  pool_test::TempPath path("soft_sim");
  std::vector<std::vector<Op>> history(w.threads);
  std::atomic<std::uint64_t> clock{1};
  std::atomic<bool> crashed{false};
  std::uint64_t crash_stamp = 0;
  std::optional<sim::Snapshot> snap;
  void* base = nullptr;
  std::vector<Op> prefill;
  {
    auto pool = pm::Pool::create(path, kPoolSize, K::layout);
    base = pool.base();
    auto set = K::create(pool);
    for (Key k = 1; k <= w.key_range; k += 2) {
      Op op{OpKind::insert, k, 1000 + k};
      op.thread = w.threads;  // the prefill runs alone, before the workers
      op.invoked = clock.fetch_add(1);
      op.result = set->insert(k, op.value);
      op.responded = clock.fetch_add(1);
      prefill.push_back(op);
    }
    const std::uint64_t start = sim::event_count();
    if (crash_offset != ~std::uint64_t{0}) {
      sim::set_crash_handler(start + crash_offset, [&] {
        // Every other thread is stopped at its next access-layer operation: an operation whose
        // response is stamped before this one completed all its persistent accesses before.
        crash_stamp = clock.fetch_add(1);
        snap = sim::snapshot();
        crashed.store(true);
      });
    }
    std::vector<std::thread> workers;
    for (unsigned t = 0; t < w.threads; ++t) {
      workers.emplace_back([&, t] {
        std::mt19937_64 rng(seed * 131 + t);
        auto& ops = history[t];
        for (int i = 0; i < w.ops_per_thread && !crashed.load(); ++i) {
          Op op{};
          op.thread = t;
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
  }  // the set and the pool close; the file is overwritten by the crash images below
  if (!crashed.load()) return;
  ++c.crashes;

  // The history at the crash: operations invoked after it never happened; those that had not
  // responded before it are pending.
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
  ASSERT_LT(region, snap->region_count()) << "the pool is not in the snapshot";

  std::vector<sim::Choice> choices;
  std::vector<std::string> names;
  if (!snap->for_each_choice(8, [&](const sim::Choice& ch) {
        choices.push_back(ch);
        names.push_back("image " + std::to_string(choices.size()) + " of " +
                        std::to_string(static_cast<long long>(snap->image_count())));
        return true;
      })) {
    choices = {snap->choice(sim::ImageKind::minimum), snap->choice(sim::ImageKind::maximum)};
    names = {"minimum image", "maximum image"};
    for (std::uint64_t r = 0; r < 2; ++r) {
      choices.push_back(snap->choice(sim::ImageKind::random, seed * 7 + r));
      names.push_back("random image " + std::to_string(r));
    }
  }

  for (std::size_t n = 0; n < choices.size(); ++n) {
    ++c.images;
    const std::vector<unsigned char> image = snap->image(region, choices[n]);
    write_file(path, image);
    const std::string where = names[n] + ", crash at event " + std::to_string(crash_offset) +
                              ", seed " + std::to_string(seed);
    auto pool = pm::Pool::open(path, K::layout);
    auto set = K::open(pool);
    std::map<Key, Value> model = contents(*set);
    if (set->recovery_stats().duplicate_keys != 0)
      c.violations.push_back(where + ": two live PNodes with one key");
    if (auto ok = durably_linearizable(at_crash, model); !ok)
      c.violations.push_back(where + ": " + ok.message());

    // Go on from the recovered state: new keys go into the half-created slots first.
    const auto half = put_half_created_slots_first(pool.allocator(), image, base);
    for (Key k = 0; k < half.size() + 2; ++k) {
      const Key key = 100 + k;
      EXPECT_TRUE(set->insert(key, key * 2)) << where;
      model[key] = key * 2;
    }
    for (const SoftPNode* p : half) c.half_created_reused += p->live();
    if (!model.empty()) {
      const Key gone = model.begin()->first;
      EXPECT_TRUE(set->remove(gone)) << where;
      model.erase(gone);
    }
    set.reset();
    pool.close();
    auto again = pm::Pool::open(path, K::layout);
    auto reopened = K::open(again);
    if (contents(*reopened) != model)
      c.violations.push_back(where +
                             ": after recovery, inserts and a clean reopen, the set "
                             "differs from its model");
  }
}

// Crashes at `trials` drawn events of the workload; stops at the first violation if asked.
template <class K>
Campaign crash_campaign(const Workload& w, int trials, std::uint64_t seed,
                        bool stop_at_first = false) {
  FlushModel clwb;
  Campaign c;
  std::uint64_t events = 0;
  run_trial<K>(w, ~std::uint64_t{0}, seed, c, &events);
  EXPECT_GT(events, 0u);
  std::mt19937_64 rng(seed);
  if (!stop_at_first) trials = std::max(5, trials / kTrialDivisor);
  for (int i = 0; i < trials; ++i) {
    run_trial<K>(w, rng() % (events + 1), seed + 1 + static_cast<std::uint64_t>(i), c);
    if (stop_at_first && !c.violations.empty()) break;
  }
  if (!stop_at_first) {
    EXPECT_GT(c.crashes, static_cast<std::size_t>(trials) / 2);
  }
  return c;
}

template <class K>
class SoftCrashTest : public ::testing::Test {};
using Kinds = ::testing::Types<ListKind<>, HashKind<>, SkipKind<>>;
class KindNames {
 public:
  template <class T>
  static std::string GetName(int) {
    return T::layout;
  }
};
TYPED_TEST_SUITE(SoftCrashTest, Kinds, KindNames);

void expect_clean(const Campaign& c) {
  EXPECT_TRUE(c.violations.empty())
      << c.violations.size()
      << " violations; first: " << (c.violations.empty() ? "" : c.violations.front());
  std::printf(
      "[ info ] %zu crashes, %zu images recovered and checked, %zu half-created slots "
      "made live again\n",
      c.crashes, c.images, c.half_created_reused);
}

TYPED_TEST(SoftCrashTest, OneThreadEveryCompletedOperationSurvives) {
  Workload w;
  w.threads = 1;
  const Campaign c = crash_campaign<TypeParam>(w, 40, 11);
  expect_clean(c);
  // Crashes inside create leave half-created slots; the inserts after recovery reuse them first.
  // Some must have been reused, or that check was never exercised.
  EXPECT_GT(c.half_created_reused, 0u);
}

TYPED_TEST(SoftCrashTest, TwoThreadsOnSharedKeysEveryCompletedOperationSurvives) {
  Workload w;
  w.threads = 2;
  w.key_range = 4;
  const Campaign c = crash_campaign<TypeParam>(w, 30, 23);
  expect_clean(c);
}

TYPED_TEST(SoftCrashTest, ThreeThreadsEveryCompletedOperationSurvives) {
  Workload w;
  w.threads = 3;
  w.key_range = 6;
  w.ops_per_thread = 25;
  const Campaign c = crash_campaign<TypeParam>(w, 20, 37);
  expect_clean(c);
}

// Recovery writes nothing persistent: no fence, no flush, no RMW, no store in the pool. So a
// crash during recovery leaves the pool as it found it, and recovery is restartable.
TYPED_TEST(SoftCrashTest, RecoveryWritesNothingPersistent) {
  FlushModel clwb;
  pool_test::TempPath path("soft_sim_rec");
  std::map<Key, Value> model;
  {
    auto pool = pm::Pool::create(path, kPoolSize, TypeParam::layout);
    auto set = TypeParam::create(pool);
    for (Key k = 1; k <= 200; ++k) ASSERT_TRUE(set->insert(k * 3, k));
    for (Key k = 1; k <= 200; k += 4) ASSERT_TRUE(set->remove(k * 3));
    for (Key k = 1; k <= 200; ++k)
      if (k % 4 != 1) model[k * 3] = k;
  }
  auto pool = pm::Pool::open(path, TypeParam::layout);
  sim::mark_all_durable();
  const auto before = sim::stats();
  auto set = TypeParam::open(pool);
  const auto after = sim::stats();
  EXPECT_EQ(after.events, before.events) << "recovery fenced, did an RMW or a clflush";
  EXPECT_EQ(after.pending_flushes, before.pending_flushes) << "recovery flushed";
  EXPECT_EQ(after.recorded_stores, before.recorded_stores) << "recovery stored to the pool";
  EXPECT_EQ(contents(*set), model);
}

// ---- The planted bugs are caught by the same logic -----------------------------------------

template <class K>
void expect_caught(const Workload& w, int max_trials, std::uint64_t seed) {
  const Campaign c = crash_campaign<K>(w, max_trials, seed, true);
  ASSERT_FALSE(c.violations.empty())
      << "planted bug " << to_string(K::bug) << " not caught in " << max_trials << " crashes";
  std::printf("[ info ] %s: %s caught after %zu crashes: %s\n", K::layout, to_string(K::bug),
              c.crashes, c.violations.front().c_str());
}

TEST(SoftPlantedBugs, CreateWithoutFlushIsCaught) {
  Workload w;
  w.read_percent = 0;
  expect_caught<ListKind<SoftBug::create_without_flush>>(w, 50, 5);
  expect_caught<HashKind<SoftBug::create_without_flush>>(w, 50, 6);
  expect_caught<SkipKind<SoftBug::create_without_flush>>(w, 50, 7);
}

TEST(SoftPlantedBugs, RecoveryKeepingDeletedNodesIsCaught) {
  Workload w;
  w.read_percent = 0;
  expect_caught<ListKind<SoftBug::recovery_keeps_deleted>>(w, 50, 8);
  expect_caught<HashKind<SoftBug::recovery_keeps_deleted>>(w, 50, 9);
  expect_caught<SkipKind<SoftBug::recovery_keeps_deleted>>(w, 50, 10);
}

TEST(SoftPlantedBugs, PaperAllocationRuleIsCaught) {
  Workload w;
  w.read_percent = 0;
  expect_caught<ListKind<SoftBug::alloc_by_valid_start>>(w, 80, 53);
  expect_caught<HashKind<SoftBug::alloc_by_valid_start>>(w, 80, 54);
  expect_caught<SkipKind<SoftBug::alloc_by_valid_start>>(w, 80, 55);
}

}  // namespace
