// labels: concurrent memory
// masstree-bytes/incll and masstree-bytes/logging (incll/durable_masstree.hpp, byte-string form):
// keys and values of any length in pool blocks, keys sharing prefixes so that layers are made;
// a clean close keeps everything; a process that dies mid-epoch comes back as at its last
// boundary, with the layers, values and suffixes of the failed epoch undone and their blocks
// back in the allocator; blocks freed by updates are reused once their epoch ended; a full pool
// and over-long keys and values are refused with nothing lost; a lazy open serves at once and
// finds the free blocks by a sweep while it runs. The crash lab
// (simulated power failures, kill -9) is the structures' main test; these pin what it reports.
#include <gtest/gtest.h>

#include <array>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "incll/durable_tree_fixture.hpp"
#include "pmds/incll/durable_masstree.hpp"
#include "support/child_process.hpp"
#include "support/file_state.hpp"
#include "support/temp_path.hpp"

namespace {

using namespace pmds;

using incll_test::kPoolSize;

// Eager recovery unless a test says lazy.
incll::Options manual_clock() {
  return incll_test::manual_clock(/*lazy_recovery=*/false);
}

using Model = std::map<std::string, std::string>;

template <class Tree>
Model contents(const Tree& t) {
  Model out;
  t.for_each([&](std::string_view k, std::string_view v) { out.emplace(k, v); });
  return out;
}

// A key of the i-th of 64 prefix groups: a shared prefix of 0 to 40 bytes (so some keys end
// inside a slice, some exactly at its end, some go on for layers), then the number i.
std::string key_of(std::uint64_t i) {
  std::string k(i % 64 % 41, static_cast<char>('a' + i % 64 % 26));
  k += std::to_string(i);
  return k;
}
std::string value_of(std::uint64_t v, std::size_t size) {
  std::string s(size, static_cast<char>('A' + v % 26));
  if (size >= 8) s.replace(0, 8, std::to_string(v % 100'000'000).append(8, '.').substr(0, 8));
  return s;
}

template <class T>
class DurableStringMasstree : public incll_test::DurableTreeTest<T> {
 protected:
  DurableStringMasstree()
      : incll_test::DurableTreeTest<T>(manual_clock(), "masstree-bytes-durable") {}

  // The slots an eager recovery frees, of a copy of the pool file (left as it was for a lazy
  // open); its contents must be `expected` if given.
  std::size_t freed_by_eager_recovery_of_a_copy(const Model* expected) {
    pmds::test::TempPath copy("masstree-bytes-eager-copy");
    pmds::test::write_file(copy.str(), pmds::test::read_file(this->path_.str()));
    pm::Pool pool = pm::Pool::open(copy.str(), T::name);
    T eager(open_existing, pool, manual_clock());
    if (expected != nullptr) {
      EXPECT_EQ(contents(eager), *expected);
    }
    return eager.recovery_stats().freed_slots;
  }
};

using Modes = ::testing::Types<incll::InCLLStringMasstree<>, incll::LoggingStringMasstree<>>;
TYPED_TEST_SUITE(DurableStringMasstree, Modes);

TYPED_TEST(DurableStringMasstree, CleanCloseKeepsEveryOperation) {
  auto& t = this->create();
  Model model;
  std::mt19937_64 rng(1);
  ASSERT_NO_FATAL_FAILURE(incll_test::random_operations(
      t, model, rng, 30'000, [](std::mt19937_64& r) { return key_of(r() % 3'000); },
      [](std::mt19937_64& r) {
        const std::uint64_t v = r();
        return value_of(v, r() % 4 == 0 ? r() % 2'000 : r() % 40);
      }));
  ASSERT_EQ(contents(t), model);
  auto& r = this->reopen();
  EXPECT_EQ(contents(r), model);  // in byte order, as std::map orders them
  EXPECT_EQ(r.log_entries_applied(), 0u);
  // Every live key has its value block, and the longer ones a suffix block.
  EXPECT_GT(r.recovery_stats().live_slots, model.size());
}

// The child makes 1,500 keys durable with sync(), then in the same epoch removes some, updates
// others with values of other sizes, and inserts 4,000 more, many sharing a prefix with a key
// that had it alone (new layers) — and dies. Only the logs can undo the failed epoch; the blocks
// it made must go back to the allocator.
TYPED_TEST(DurableStringMasstree, ADeadProcessComesBackAsAtItsLastBoundary) {
  this->create();
  Model expected;
  for (std::uint64_t i = 0; i < 1'500; ++i) expected.emplace(key_of(i * 7), value_of(i, i % 50));
  this->in_dying_child([&](TypeParam& t) {
    for (const auto& [k, v] : expected) t.insert(k, v);
    t.sync();
    std::uint64_t n = 0;
    for (const auto& [k, v] : expected) {
      if (++n % 5 == 0) t.remove(k);
      if (n % 3 == 0) t.put(k, value_of(n, 300 + n % 700));
    }
    for (std::uint64_t i = 0; i < 4'000; ++i) t.insert(key_of(i * 7 + 1), value_of(i, 64));
  });
  auto& t = this->reopen();
  EXPECT_GT(t.log_entries_applied(), 0u);
  EXPECT_GT(t.recovery_stats().freed_slots, 0u);
  ASSERT_EQ(contents(t), expected);
  for (std::uint64_t i = 0; i < 4'000; ++i)
    ASSERT_TRUE(t.insert(key_of(i * 7 + 1), value_of(i, 64)));
  EXPECT_EQ(t.size(), 5'500u);
}

// One key updated 120,000 times with 1 KiB values, epochs passing: 120 MiB of values in a 64 MiB
// pool, which holds them only if each replaced block is reused once its epoch ended.
TYPED_TEST(DurableStringMasstree, ReplacedValuesAreReusedAfterTheirEpoch) {
  auto& t = this->create();
  for (std::uint64_t i = 0; i < 120'000; ++i) {
    t.put("the key", value_of(i, 1'000));
    if (i % 100 == 0) t.background_step();
  }
  EXPECT_EQ(t.get("the key"), value_of(119'999, 1'000));
  EXPECT_GT(t.checkpoint_stats().reused_blocks, 100'000u);  // from the free lists (InCLL §5)
  EXPECT_EQ(this->reopen().get("the key"), value_of(119'999, 1'000));
}

// InCLL §5: the free lists are checkpointed with the tree. A first child removes keys (the
// tree frees their values), passes an epoch so that the freed blocks go on its lists, and dies;
// recovery finds them there. A second child takes blocks from the lists (its inserts reuse
// them) and frees others, all in one epoch, and dies: recovery finds the same lists and the
// same contents as after the first.
TYPED_TEST(DurableStringMasstree, FreeListsComeBackAsAtTheLastBoundary) {
  this->create();
  Model expected;
  for (std::uint64_t i = 400; i < 500; ++i) expected[key_of(i)] = value_of(i, 100);
  this->in_dying_child([&](TypeParam& t) {
    for (std::uint64_t i = 0; i < 500; ++i) t.insert(key_of(i), value_of(i, 100));
    t.sync();
    for (std::uint64_t i = 0; i < 400; ++i) t.remove(key_of(i));
    t.sync();
    t.remove("absent");  // a write operation of the next epoch: the freed blocks go on the lists
    t.sync();
  });
  const std::size_t listed = this->reopen().blocks_on_free_lists();
  EXPECT_GT(listed, 100u);
  ASSERT_EQ(contents(*this->tree_), expected);
  this->in_dying_child([&](TypeParam& t) {
    for (std::uint64_t i = 0; i < 300; ++i) t.insert(key_of(i), value_of(i, 100));
    for (std::uint64_t i = 400; i < 450; ++i) t.remove(key_of(i));
  });
  auto& t = this->reopen();
  EXPECT_EQ(t.blocks_on_free_lists(), listed);
  EXPECT_EQ(contents(t), expected);
}

// The child makes a value durable, then in one epoch replaces it 2,000 times (the tree's epoch
// domain frees the replaced blocks as it goes) and inserts keys with values of the same block
// size, and dies. The value the failed epoch replaced first must come back whole: its block may
// not be reused before that epoch ends.
template <class Tree>
Model replace_in_one_epoch_and_die(const std::string& path) {
  {
    pm::Pool pool = pm::Pool::create(path, kPoolSize, Tree::name);
    Tree t(create_new, pool, manual_clock());
    t.insert("kept", value_of(1, 100));
    t.insert("replaced", value_of(2, 100));
  }
  pmds::test::in_killed_child([&] {
    pm::Pool pool = pm::Pool::open(path, Tree::name);
    auto t = std::make_unique<Tree>(open_existing, pool, manual_clock());  // never closed
    for (std::uint64_t i = 0; i < 2'000; ++i) t->put("replaced", value_of(i + 3, 100));
    for (std::uint64_t i = 0; i < 2'000; ++i) t->insert(key_of(i), value_of(i, 100));
    ::_exit(0);
  });
  pm::Pool pool = pm::Pool::open(path, Tree::name);
  return contents(Tree(open_existing, pool, manual_clock()));
}

TYPED_TEST(DurableStringMasstree, AValueReplacedInTheFailedEpochComesBackWhole) {
  this->tree_.reset();
  const Model expected{{"kept", value_of(1, 100)}, {"replaced", value_of(2, 100)}};
  EXPECT_EQ(replace_in_one_epoch_and_die<TypeParam>(this->path_.str()), expected);
}

// The check above can fail: with the replaced blocks reused within their epoch (a planted bug),
// the value comes back as bytes another operation wrote, or the pool as corrupt.
TEST(DurableStringMasstreePlantedBug, BlocksReusedInTheirEpochLoseTheReplacedValue) {
  using Buggy =
      incll::DurableMasstree<incll::Mode::incll, Planted<Fault::bytes_freed_in_their_epoch>, true>;
  pmds::test::TempPath path{"masstree-bytes-planted"};
  const Model expected{{"kept", value_of(1, 100)}, {"replaced", value_of(2, 100)}};
  try {
    EXPECT_NE(replace_in_one_epoch_and_die<Buggy>(path.str()), expected);
  } catch (const PoolCorrupt& e) {
    SUCCEED() << e.what();
  }
}

TYPED_TEST(DurableStringMasstree, AFullPoolIsRefusedAndLosesNothing) {
  auto& t = this->create(manual_clock(), 8u << 20);
  Model model;
  std::uint64_t i = 0;
  try {
    for (;; ++i) {
      const std::string k = key_of(i), v = value_of(i, 3'000);
      ASSERT_TRUE(t.insert(k, v));
      model.emplace(k, v);
    }
  } catch (const PoolFull&) {
  }
  EXPECT_GT(model.size(), 100u);
  EXPECT_FALSE(t.contains(key_of(i)));
  EXPECT_EQ(contents(t), model);
  EXPECT_EQ(contents(this->reopen()), model);
}

TYPED_TEST(DurableStringMasstree, OverLongKeysAndValuesAreRefused) {
  auto& t = this->create();
  ASSERT_TRUE(t.insert("k", "v"));
  const std::string long_key(TypeParam::max_key_size + 1, 'k');
  const std::string long_value(TypeParam::max_value_size + 1, 'v');
  EXPECT_THROW(t.insert(long_key, "v"), Error);
  EXPECT_THROW(t.put("k", long_value), Error);
  EXPECT_TRUE(t.insert(std::string(TypeParam::max_key_size, 'k'), long_value.substr(1)));
  EXPECT_EQ(t.get("k"), "v");
  EXPECT_EQ(this->reopen().get("k"), "v");
}

// The lazy open (incll/durable_masstree.hpp, "the lazy open of byte strings"). A child fills
// the tree (keys in prefix groups: lower layers), syncs, removes and replaces entries (their
// blocks freed in that epoch), syncs, then in the epoch it dies in inserts, replaces and
// removes more (blocks taken in the failed epoch, and the freed ones listed in it). A copy of
// the pool opened eagerly says what recovery must free; the pool opened lazily serves reads and
// writes before its sweep is done, gives back exactly as many slots when it is, and keeps every
// entry: the blocks it gave back are reused by new entries, and a reopen finds all of them.
TYPED_TEST(DurableStringMasstree, LazyOpenServesAtOnceAndFreesWhatEagerRecoveryFrees) {
  this->create();
  Model model;
  for (std::uint64_t i = 0; i < 2'000; ++i) model.emplace(key_of(i * 7), value_of(i, i % 200));
  // The epoch the child syncs last, on a model (the child's is its own copy) and on a tree.
  const auto second_epoch = [](Model& m, auto&& remove, auto&& put) {
    std::uint64_t n = 0;
    for (auto it = m.begin(); it != m.end(); ++n) {
      if (n % 5 == 0) {
        remove(it->first);
        it = m.erase(it);
        continue;
      }
      if (n % 3 == 0) put(it->first, it->second = value_of(n, 100 + n % 400));
      ++it;
    }
  };
  this->in_dying_child([&](TypeParam& t) {
    Model m = model;
    for (const auto& [k, v] : m) t.insert(k, v);
    t.sync();
    second_epoch(
        m, [&](const std::string& k) { t.remove(k); },
        [&](const std::string& k, const std::string& v) { t.put(k, v); });
    t.sync();
    std::uint64_t n = 0;
    for (const auto& [k, v] : m)
      if (++n % 4 == 0) t.put(k, value_of(n, 64));
    for (std::uint64_t i = 0; i < 1'000; ++i) t.insert(key_of(i * 7 + 1), value_of(i, 64));
    for (std::uint64_t i = 0; i < 500; ++i) t.remove(key_of(i * 7));
  });
  second_epoch(
      model, [](const std::string&) {}, [](const std::string&, const std::string&) {});
  const std::size_t freed_by_eager = this->freed_by_eager_recovery_of_a_copy(&model);
  ASSERT_GT(freed_by_eager, 0u);

  incll::Options lazy = manual_clock();
  lazy.lazy_recovery = true;
  auto& t = this->reopen(lazy);
  EXPECT_FALSE(t.recovery_sweep_done());
  EXPECT_EQ(t.recovery_stats().freed_slots, 0u);
  // Operations before the sweep: they recover the borders they reach, and take new chunks.
  EXPECT_EQ(t.get(model.begin()->first), model.begin()->second);
  for (std::uint64_t i = 0; i < 300; ++i) {
    const std::string k = key_of(i * 7 + 3);
    ASSERT_TRUE(t.insert(k, value_of(i, 150)));
    model[k] = value_of(i, 150);
    const std::string old = key_of(i * 7 + 1400 * 7);
    if (model.erase(old) != 0) {
      ASSERT_TRUE(t.remove(old));
    }
  }
  EXPECT_FALSE(t.recovery_sweep_done());
  t.finish_recovery_sweep();
  EXPECT_TRUE(t.recovery_sweep_done());
  EXPECT_EQ(t.recovery_stats().freed_slots, freed_by_eager);
  EXPECT_EQ(contents(t), model);
  // New entries of every size take the slots it gave back; none may be one the tree names.
  for (std::uint64_t i = 0; i < 3'000; ++i) {
    const std::string k = key_of(i * 7 + 5);
    ASSERT_TRUE(t.insert(k, value_of(i, i % 500)));
    model[k] = value_of(i, i % 500);
  }
  EXPECT_EQ(contents(t), model);
  EXPECT_EQ(contents(this->reopen()), model);
}

// The sweep on a thread of its own (Options::background_thread, with the epoch advancer)
// beside two threads that insert, replace and remove: it frees what an eager recovery of the
// same crash frees, and every entry stays.
TYPED_TEST(DurableStringMasstree, TheSweepRunsBesideOperations) {
  this->create();
  Model model;
  for (std::uint64_t i = 0; i < 6'000; ++i) model.emplace(key_of(i * 5), value_of(i, i % 150));
  this->in_dying_child([&](TypeParam& t) {
    for (const auto& [k, v] : model) t.insert(k, v);
    t.sync();
    for (std::uint64_t i = 0; i < 3'000; ++i) t.put(key_of(i * 5), value_of(i, 90));
    for (std::uint64_t i = 0; i < 1'000; ++i) t.insert(key_of(i * 5 + 1), value_of(i, 30));
  });
  const std::size_t freed_by_eager = this->freed_by_eager_recovery_of_a_copy(nullptr);
  incll::Options lazy;  // the advancer and the sweep on threads of their own
  lazy.lazy_recovery = true;
  auto& t = this->reopen(lazy);
  std::array<Model, 2> added;
  std::vector<std::thread> threads;
  for (std::uint64_t w = 0; w < 2; ++w)
    threads.emplace_back([&, w] {
      for (std::uint64_t i = 0; i < 3'000; ++i) {
        const std::string k = key_of((i * 2 + w) * 5 + 2);
        if (!t.insert(k, value_of(i, 20 + i % 300))) ADD_FAILURE() << "insert " << k;
        added[w][k] = value_of(i, 20 + i % 300);
        const std::string old = key_of((i * 2 + w) * 5);
        if (i % 3 == 0 && !t.remove(old)) ADD_FAILURE() << "remove " << old;
        if (i % 3 == 0) added[w][old] = "";
      }
    });
  for (auto& th : threads) th.join();
  t.finish_recovery_sweep();
  EXPECT_EQ(t.recovery_stats().freed_slots, freed_by_eager);
  for (const Model& a : added)
    for (const auto& [k, v] : a)
      if (v.empty())
        model.erase(k);
      else
        model[k] = v;
  EXPECT_EQ(contents(t), model);
  EXPECT_EQ(contents(this->reopen()), model);
}

// While the sweep runs, the chunks used before the open are withheld: in a pool with no free
// chunk, the first operation, which needs node slots, finishes the sweep (it has no thread of
// its own here) and gets slots it gave back, instead of PoolFull.
TYPED_TEST(DurableStringMasstree, AFullPoolFinishesTheSweepFirst) {
  auto& t = this->create(manual_clock(), 8u << 20);
  Model model;
  try {
    for (std::uint64_t i = 0;; ++i) {
      ASSERT_TRUE(t.insert(key_of(i), value_of(i, 3'000)));
      model.emplace(key_of(i), value_of(i, 3'000));
    }
  } catch (const PoolFull&) {
  }
  ASSERT_GT(model.size(), 100u);
  for (std::uint64_t i = 0; i < 100; ++i) {  // blocks for the insert below, on the free lists
    ASSERT_TRUE(t.remove(key_of(i)));
    model.erase(key_of(i));
  }
  t.sync();
  t.remove("absent");  // (a write operation of the next epoch lists the freed blocks)
  t.sync();
  incll::Options lazy = manual_clock();
  lazy.lazy_recovery = true;
  auto& reopened = this->reopen(lazy);
  EXPECT_FALSE(reopened.recovery_sweep_done());
  ASSERT_TRUE(reopened.insert("new key", value_of(7, 3'000)));
  model.emplace("new key", value_of(7, 3'000));
  EXPECT_TRUE(reopened.recovery_sweep_done());
  EXPECT_GT(reopened.recovery_stats().freed_slots, 0u);
  EXPECT_EQ(contents(reopened), model);
}

// A crash while the sweep is under way (the child opens lazily, writes, syncs and dies before
// the sweep ends) comes back as at that sync, eagerly and lazily.
TYPED_TEST(DurableStringMasstree, ACrashDuringTheSweepRecoversAgain) {
  auto& created = this->create();
  Model model;
  for (std::uint64_t i = 0; i < 1'500; ++i) {
    model.emplace(key_of(i * 7), value_of(i, i % 300));
    created.insert(key_of(i * 7), value_of(i, i % 300));
  }
  incll::Options lazy = manual_clock();
  lazy.lazy_recovery = true;
  for (int round = 0; round < 2; ++round) {
    this->options_ = lazy;
    this->in_dying_child([&](TypeParam& t) {
      if (t.recovery_sweep_done()) ::_exit(3);
      for (std::uint64_t i = 0; i < 200; ++i) {
        t.put(key_of(i * 7), value_of(i + round, 200));
        t.remove(key_of((i + 700 + round * 200) * 7));
        t.insert(key_of(i * 7 + 2 + round), value_of(i, 50));
      }
      t.sync();
      for (std::uint64_t i = 200; i < 400; ++i) t.put(key_of(i * 7), value_of(i, 900));
      if (t.recovery_sweep_done()) ::_exit(4);
    });
    for (std::uint64_t i = 0; i < 200; ++i) {
      model[key_of(i * 7)] = value_of(i + round, 200);
      model.erase(key_of((i + 700 + round * 200) * 7));
      model[key_of(i * 7 + 2 + round)] = value_of(i, 50);
    }
  }
  EXPECT_EQ(contents(this->reopen(lazy)), model);
  EXPECT_EQ(contents(this->reopen(manual_clock())), model);
}

}  // namespace
