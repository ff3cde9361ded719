// masstree/logging (incll/durable_masstree.hpp over incll/checkpoints.hpp): a clean close keeps
// everything; a process that dies mid-epoch comes back as it was at its last boundary, splits
// and new roots of the failed epoch undone by the external log; concurrent writers with a fast
// background advancer; a full pool and reserved keys refused with nothing lost. The crash lab
// (simulated power failures, kill -9) is the structure's main test; these pin what it reports.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <thread>
#include <vector>

#include "pmds/incll/durable_masstree.hpp"
#include "pool/pool_test_util.hpp"

namespace {

using namespace pmds;
using Tree = incll::LoggingMasstree<>;

constexpr std::size_t kPoolSize = 64u << 20;

incll::Options manual_clock() {
  incll::Options o;
  o.background_thread = false;
  return o;
}

std::map<Key, Value> contents(const Tree& t) {
  std::map<Key, Value> out;
  t.for_each([&](Key k, Value v) { out.emplace(k, v); });
  return out;
}

class LoggingMasstree : public ::testing::Test {
 protected:
  Tree& create(incll::Options o = manual_clock(), std::size_t pool_size = kPoolSize) {
    pool_.emplace(pm::Pool::create(path_.str(), pool_size, Tree::name));
    tree_ = std::make_unique<Tree>(create_new, *pool_, o);
    return *tree_;
  }
  Tree& reopen() {
    tree_.reset();
    pool_.reset();
    pool_.emplace(pm::Pool::open(path_.str(), Tree::name));
    tree_ = std::make_unique<Tree>(open_existing, *pool_, manual_clock());
    return *tree_;
  }
  void TearDown() override {
    tree_.reset();
    pool_.reset();
  }

  pool_test::TempPath path_{"masstree-logging"};
  std::optional<pm::Pool> pool_;
  std::unique_ptr<Tree> tree_;
};

TEST_F(LoggingMasstree, CleanCloseKeepsEveryOperation) {
  Tree& t = create();
  std::map<Key, Value> model;
  std::mt19937_64 rng(1);
  for (int i = 0; i < 30'000; ++i) {
    const Key k = 1 + rng() % 5'000;
    const Value v = rng();
    switch (rng() % 4) {
      case 0:
        ASSERT_EQ(t.remove(k), model.erase(k) == 1);
        break;
      case 1:
        ASSERT_EQ(t.put(k, v), !model.contains(k));
        model[k] = v;
        break;
      default:
        ASSERT_EQ(t.insert(k, v), model.emplace(k, v).second);
    }
    if (i % 1'000 == 0) t.background_step();
  }
  EXPECT_GT(t.checkpoint_stats().logged_objects, 0u);
  Tree& r = reopen();
  EXPECT_EQ(contents(r), model);
  EXPECT_EQ(r.log_entries_applied(), 0u);  // the close passed a boundary: nothing to undo
  EXPECT_GT(r.recovery_stats().live_slots, 1u);
}

// The child makes 2,000 keys durable with sync(), then in the same epoch removes some, updates
// others and inserts 5,000 more (splits, new interior levels, a new root), and dies. The pool file
// keeps every store (as after kill -9), so only the log can undo the failed epoch.
TEST_F(LoggingMasstree, ADeadProcessComesBackAsAtItsLastBoundary) {
  create();
  tree_.reset();
  pool_.reset();
  pool_test::in_killed_child([&] {
    pm::Pool pool = pm::Pool::open(path_.str(), Tree::name);
    auto owned = std::make_unique<Tree>(open_existing, pool, manual_clock());  // never destroyed
    Tree& t = *owned;
    for (Key k = 1; k <= 2'000; ++k) t.insert(k * 3, k);
    t.sync();
    for (Key k = 1; k <= 2'000; k += 7) t.remove(k * 3);
    for (Key k = 2; k <= 2'000; k += 5) t.put(k * 3, 0);
    for (Key k = 1; k <= 5'000; ++k) t.insert(6'000 + k, k);
    ::_exit(0);
  });
  Tree& t = reopen();
  EXPECT_GT(t.log_entries_applied(), 0u);
  std::map<Key, Value> expected;
  for (Key k = 1; k <= 2'000; ++k) expected.emplace(k * 3, k);
  EXPECT_EQ(contents(t), expected);
  // The nodes the failed epoch allocated went back to the allocator: the tree works on.
  for (Key k = 1; k <= 5'000; ++k) ASSERT_TRUE(t.insert(6'000 + k, k));
  EXPECT_EQ(t.size(), 7'000u);
}

TEST_F(LoggingMasstree, ConcurrentWritersWithABackgroundAdvancer) {
  incll::Options o;
  o.epoch_length = std::chrono::microseconds(500);
  Tree& t = create(o);
  constexpr int kThreads = 4;
  std::vector<std::map<Key, Value>> models(kThreads);
  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id) {
    threads.emplace_back([&, id] {
      std::mt19937_64 rng(id);
      for (int i = 0; i < 20'000; ++i) {
        const Key k = 1 + id + kThreads * (rng() % 3'000);  // each thread owns its keys
        const Value v = rng();
        if (rng() % 3 == 0) {
          ASSERT_EQ(t.remove(k), models[id].erase(k) == 1);
        } else {
          ASSERT_EQ(t.put(k, v), !models[id].contains(k));
          models[id][k] = v;
        }
        if (i % 5'000 == 0) t.sync();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_GT(t.checkpoint_stats().epochs, 0u);
  std::map<Key, Value> all;
  for (auto& m : models) all.insert(m.begin(), m.end());
  EXPECT_EQ(contents(t), all);
  EXPECT_EQ(contents(reopen()), all);
}

TEST_F(LoggingMasstree, AFullPoolIsRefusedAndLosesNothing) {
  Tree& t = create(manual_clock(), 8u << 20);
  Key k = 1;
  try {
    for (; k < 10'000'000; ++k) {
      t.insert(k, k);
      if (k % 10'000 == 0) t.sync();
    }
    FAIL() << "an 8 MiB pool took 10M keys";
  } catch (const PoolFull&) {
  }
  ASSERT_GT(k, 1'000u);
  EXPECT_EQ(t.size(), k - 1);  // the refused insert changed nothing
  for (Key j = 1; j < k; j += 97) ASSERT_EQ(t.get(j), Value{j});
  EXPECT_EQ(reopen().size(), k - 1);
}

TEST_F(LoggingMasstree, ReservedKeysAndForeignPoolsAreRefused) {
  Tree& t = create();
  EXPECT_THROW(t.insert(min_reserved_key, 1), ReservedKey);
  EXPECT_THROW(t.put(max_reserved_key, 1), ReservedKey);
  tree_.reset();
  pool_.reset();
  pool_test::TempPath other("masstree-logging-other");
  pm::Pool::create(other.str(), kPoolSize, "something-else");
  pm::Pool pool = pm::Pool::open(other.str(), "something-else");
  try {
    Tree opened(open_existing, pool);
    FAIL() << "an empty pool opened as a Masstree";
  } catch (const PoolError& e) {
    EXPECT_EQ(e.code(), PoolErrc::layout_mismatch);
  }
}

}  // namespace
