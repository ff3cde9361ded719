// labels: concurrent memory
// masstree/incll and masstree/logging (incll/durable_masstree.hpp over incll/checkpoints.hpp):
// a clean close keeps everything; a process that dies mid-epoch comes back as it was at its last
// boundary, splits and new roots of the failed epoch undone by the external log (and inserts and
// removes by InCLL_p); concurrent writers with a fast background advancer; a full pool and
// reserved keys refused with nothing lost; InCLL_p keeps removes and inserts off the external log
// exactly where InCLL §4.1.1 says. The crash lab (simulated power failures, kill -9) is the
// structures' main test; these pin what it reports.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <thread>
#include <type_traits>
#include <vector>

#include "incll/durable_tree_fixture.hpp"
#include "pmds/incll/durable_masstree.hpp"
#include "support/child_process.hpp"
#include "support/temp_path.hpp"

namespace {

using namespace pmds;

using incll_test::kPoolSize;

// Lazy recovery (the eager default is tested apart, below).
incll::Options manual_clock() {
  return incll_test::manual_clock(/*lazy_recovery=*/true);
}

template <class Tree>
std::map<Key, Value> contents(const Tree& t) {
  std::map<Key, Value> out;
  t.for_each([&](Key k, Value v) { out.emplace(k, v); });
  return out;
}

// Lazy recovery, unless a test says otherwise.
template <class T>
class DurableMasstree : public incll_test::DurableTreeTest<T> {
 protected:
  static constexpr bool incll = std::is_same_v<T, incll::InCLLMasstree<>>;
  DurableMasstree() : incll_test::DurableTreeTest<T>(manual_clock(), "masstree-durable") {}
};

using Modes = ::testing::Types<incll::InCLLMasstree<>, incll::LoggingMasstree<>>;
TYPED_TEST_SUITE(DurableMasstree, Modes);

TYPED_TEST(DurableMasstree, CleanCloseKeepsEveryOperation) {
  auto& t = this->create();
  std::map<Key, Value> model;
  std::mt19937_64 rng(1);
  ASSERT_NO_FATAL_FAILURE(incll_test::random_operations(
      t, model, rng, 30'000, [](std::mt19937_64& r) -> Key { return 1 + r() % 5'000; },
      [](std::mt19937_64& r) -> Value { return r(); }));
  EXPECT_GT(t.checkpoint_stats().logged_objects, 0u);
  auto& r = this->reopen();
  EXPECT_EQ(contents(r), model);
  EXPECT_EQ(r.log_entries_applied(), 0u);  // the close passed a boundary: nothing to undo
  EXPECT_GT(r.recovery_stats().live_slots, 1u);
}

// The child makes 2,000 keys durable with sync(), then in the same epoch removes some, updates
// others and inserts 5,000 more (splits, new interior levels, a new root), and dies. The pool file
// keeps every store (as after kill -9), so only the log can undo the failed epoch.
TYPED_TEST(DurableMasstree, ADeadProcessComesBackAsAtItsLastBoundary) {
  this->create();
  this->in_dying_child([&](TypeParam& t) {
    for (Key k = 1; k <= 2'000; ++k) t.insert(k * 3, k);
    t.sync();
    for (Key k = 1; k <= 2'000; k += 7) t.remove(k * 3);
    for (Key k = 2; k <= 2'000; k += 5) t.put(k * 3, 0);
    for (Key k = 1; k <= 5'000; ++k) t.insert(6'000 + k, k);
  });
  auto& t = this->reopen();
  EXPECT_GT(t.log_entries_applied(), 0u);
  EXPECT_EQ(t.permutations_restored(), 0u);  // lazy recovery: no border is read yet
  std::map<Key, Value> expected;
  for (Key k = 1; k <= 2'000; ++k) expected.emplace(k * 3, k);
  EXPECT_EQ(contents(t), expected);
  if constexpr (TestFixture::incll) {
    EXPECT_GT(t.permutations_restored(), 0u);  // the removes, at least, once the scan read them
  } else {
    EXPECT_EQ(t.permutations_restored(), 0u);
  }
  // The nodes the failed epoch allocated went back to the allocator: the tree works on.
  for (Key k = 1; k <= 5'000; ++k) ASSERT_TRUE(t.insert(6'000 + k, k));
  EXPECT_EQ(t.size(), 7'000u);
}

// A failed epoch that split every border: thousands of log entries, which recovery applies in
// parallel (InCLL §4.2; Checkpoints::apply_log uses the machine's cores from 1,024 entries),
// and whose interior splits moved links that the walk mends.
TYPED_TEST(DurableMasstree, ALongLogIsAppliedInParallel) {
  this->create();
  constexpr Key kKeys = 40'000;
  this->in_dying_child([&](TypeParam& t) {
    for (Key k = 1; k <= kKeys; ++k) t.insert(k * 4, k);
    t.sync();
    for (Key k = 1; k <= kKeys; ++k) t.insert(k * 4 + 1, k);
  });
  auto& t = this->reopen();
  EXPECT_GE(t.log_entries_applied(), 1'024u);
  EXPECT_GT(t.parent_links_mended(), 0u);
  std::map<Key, Value> expected;
  for (Key k = 1; k <= kKeys; ++k) expected.emplace(k * 4, k);
  EXPECT_EQ(contents(t), expected);
  for (Key k = 1; k <= kKeys; ++k) ASSERT_TRUE(t.insert(k * 4 + 1, k));
  EXPECT_EQ(t.size(), 2 * kKeys);
}

TYPED_TEST(DurableMasstree, ConcurrentWritersWithABackgroundAdvancer) {
  incll::Options o;
  o.epoch_length = std::chrono::microseconds(500);
  auto& t = this->create(o);
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
  EXPECT_EQ(contents(this->reopen()), all);
}

TYPED_TEST(DurableMasstree, AFullPoolIsRefusedAndLosesNothing) {
  auto& t = this->create(manual_clock(), 8u << 20);
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
  EXPECT_EQ(this->reopen().size(), k - 1);
}

TYPED_TEST(DurableMasstree, ReservedKeysAndForeignPoolsAreRefused) {
  auto& t = this->create();
  EXPECT_THROW(t.insert(min_reserved_key, 1), ReservedKey);
  EXPECT_THROW(t.put(max_reserved_key, 1), ReservedKey);
  this->tree_.reset();
  this->pool_.reset();
  pmds::test::TempPath other("masstree-logging-other");
  pm::Pool::create(other.str(), kPoolSize, "something-else");
  pm::Pool pool = pm::Pool::open(other.str(), "something-else");
  try {
    TypeParam opened(open_existing, pool);
    FAIL() << "an empty pool opened as a Masstree";
  } catch (const PoolError& e) {
    EXPECT_EQ(e.code(), PoolErrc::layout_mismatch);
  }
}

// A pool whose anchor an earlier pmds wrote (its magic word says which format) is refused with
// that reason, and left as it was.
TYPED_TEST(DurableMasstree, APoolOfAnEarlierFormatIsRefused) {
  ASSERT_TRUE(this->create().insert(1, 1));
  this->tree_.reset();
  this->pool_.reset();
  for (const std::uint64_t old_magic : incll::checkpoint_detail::old_magic_values) {
    {
      pm::Pool pool = pm::Pool::open(this->path_.str(), TypeParam::name);
      auto* anchor = static_cast<incll::checkpoint_detail::Anchor*>(
          pm::StructureRoot::read(pool, TypeParam::tag, TypeParam::name).second);
      anchor->magic.store(old_magic);
      pm::persist(&anchor->magic, sizeof anchor->magic);
      try {
        TypeParam refused(open_existing, pool, manual_clock());
        ADD_FAILURE() << "an anchor of an earlier format was opened";
      } catch (const PoolCorrupt& e) {
        EXPECT_NE(std::string(e.what()).find("earlier pmds"), std::string::npos) << e.what();
      }
      anchor->magic.store(incll::checkpoint_detail::magic_value);
      pm::persist(&anchor->magic, sizeof anchor->magic);
    }
    EXPECT_EQ(this->reopen().get(1), std::optional<Value>(1));
    this->tree_.reset();
    this->pool_.reset();
  }
}

// A crash in the first epoch, the one the tree was created in: the nodes made at creation must
// be logged before that epoch changes them (a root split clears the first root's root bit), so
// the tree comes back empty.
TYPED_TEST(DurableMasstree, ACrashInTheEpochOfCreationComesBackEmpty) {
  pmds::test::in_killed_child([&] {
    pm::Pool pool = pm::Pool::create(this->path_.str(), kPoolSize, TypeParam::name);
    auto owned = std::make_unique<TypeParam>(create_new, pool, manual_clock());
    for (Key k = 1; k <= 1'000; ++k) owned->insert(k, k);  // splits the first root
    ::_exit(0);
  });
  EXPECT_EQ(this->reopen().size(), 0u);
}

// InCLL §4.1.1, in one epoch after a boundary: removes change only permutations (InCLL_p:
// nothing in the external log); an insert into a border that lost an entry in this epoch logs
// the border whole, once; further inserts there and inserts into untouched borders do not. The
// process then dies, and both kinds of undo bring back the state at the boundary.
TYPED_TEST(DurableMasstree, InCLLKeepsInsertsAndRemovesOffTheExternalLog) {
  this->create();
  constexpr Key kKeys = 3'000;  // keys 10, 20, ...: nothing below splits a border
  this->in_dying_child([&](TypeParam& t) {
    for (Key k = 1; k <= kKeys; ++k) t.insert(k * 10, k);
    t.sync();
    auto logged = [&t] { return t.checkpoint_stats().logged_objects; };
    constexpr bool incll = TestFixture::incll;
    auto before = logged();
    for (Key k = 1; k <= kKeys; k += 100) {  // two keys of every 7th border or so
      t.remove(k * 10);
      t.remove((k + 1) * 10);
    }
    if (incll != (logged() == before)) ::_exit(1);
    before = logged();
    t.insert(1 * 10 + 1, 0);  // beside the first removed key: the border logs whole (InCLL)
    t.insert(1 * 10 + 2, 0);  // the same border, now logged: nothing more
    if (logged() != before + (incll ? 1 : 0)) ::_exit(2);
    before = logged();
    t.insert(kKeys * 10 + 1, 0);  // the last border (ascending inserts left it room): no remove
    if (logged() != before + (incll ? 0 : 1)) ::_exit(3);
  });
  auto& t = this->reopen();
  std::map<Key, Value> expected;
  for (Key k = 1; k <= kKeys; ++k) expected.emplace(k * 10, k);
  EXPECT_EQ(contents(t), expected);
  if constexpr (TestFixture::incll) {
    EXPECT_GT(t.permutations_restored(), 20u);
  }
}

// InCLL §4.1.3, in one epoch after a boundary: the first update of a value saves the old one
// in its line's InCLL (nothing in the external log), so do repeated updates of that value; an
// update of a second value of the same line logs the border whole. The process then dies, and
// recovery brings back the values at the boundary.
TYPED_TEST(DurableMasstree, InCLLKeepsUpdatesOffTheExternalLog) {
  this->create();
  constexpr Key kKeys = 1'400;  // ascending: full borders of 14, slots 0-13 in key order
  this->in_dying_child([&](TypeParam& t) {
    for (Key k = 1; k <= kKeys; ++k) t.insert(k, k);
    t.sync();
    auto logged = [&t] { return t.checkpoint_stats().logged_objects; };
    constexpr bool incll = TestFixture::incll;
    auto before = logged();
    for (int round = 0; round < 3; ++round)
      for (Key k = 1; k <= kKeys; k += 14) t.put(k, 0);  // one value of each border, thrice
    if (incll != (logged() == before)) ::_exit(1);
    before = logged();
    t.put(2, 0);  // the same border and value line as key 1: logged whole in the InCLL mode
    t.put(3, 0);  // logged already: nothing more
    if (logged() != before + (incll ? 1 : 0)) ::_exit(2);
  });
  auto& t = this->reopen();
  std::map<Key, Value> expected;
  for (Key k = 1; k <= kKeys; ++k) expected.emplace(k, k);
  EXPECT_EQ(contents(t), expected);
  if constexpr (TestFixture::incll) {
    EXPECT_GT(t.values_restored(), 50u);
  } else {
    EXPECT_EQ(t.values_restored(), 0u);
  }
}

// InCLL §4.3 across crashes: 70 processes in a row each open the tree (lazy recovery), read
// a few keys (so some borders are recovered and most are not), change it, sync, change it more
// and die. Each must find the state of the previous one's sync, whether its borders were
// recovered in an earlier execution or still carry an older failed epoch's marks. The record of
// failed epochs holds 63: the 64th recovery finds it full, recovers every border at open and
// empties it, so the last open finds 6.
TYPED_TEST(DurableMasstree, ManyCrashesInARowEachComeBackAsAtTheirLastSync) {
  this->create();
  std::map<Key, Value> model;
  constexpr Key kKeys = 3'000;
  for (Key k = 1; k <= kKeys; ++k) model.emplace(k, k);
  for (Key k = 1; k <= kKeys; ++k) this->tree_->insert(k, k);
  // One round's changes, the same in the child and in the parent's model.
  const auto change = [](auto&& apply, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (int i = 0; i < 300; ++i) apply(1 + rng() % (2 * kKeys), rng() % 3, rng());
  };
  for (int round = 1; round <= 70; ++round) {
    this->in_dying_child([&](TypeParam& t) {
      std::mt19937_64 rng(round);
      for (int i = 0; i < 20; ++i) {
        const Key k = 1 + rng() % (2 * kKeys);
        const auto it = model.find(k);
        if (t.get(k) != (it == model.end() ? std::nullopt : std::optional<Value>(it->second)))
          ::_exit(1);
      }
      const auto apply = [&t](Key k, std::uint64_t op, Value v) {
        if (op == 0)
          t.remove(k);
        else
          t.put(k, v);
      };
      change(apply, 2 * round);
      t.sync();
      change(apply, 2 * round + 1);  // lost with the process
    });
    change(
        [&model](Key k, std::uint64_t op, Value v) {
          if (op == 0)
            model.erase(k);
          else
            model[k] = v;
        },
        2 * round);
  }
  auto& t = this->reopen();
  EXPECT_EQ(t.failed_epochs_recorded(), 6u);
  EXPECT_EQ(contents(t), model);
}

// Lazy recovery under concurrency (InCLL §4.3's recovery locks): after a crash, four
// threads reach the same unrecovered borders at once, two reading every key and two writing
// keys of their own; each border is recovered once, before anyone reads it.
TYPED_TEST(DurableMasstree, ThreadsRecoverBordersConcurrently) {
  this->create();
  constexpr Key kKeys = 20'000;
  this->in_dying_child([&](TypeParam& t) {
    for (Key k = 1; k <= kKeys; ++k) t.insert(k * 4, k);
    t.sync();
    for (Key k = 1; k <= kKeys; k += 2) t.remove(k * 4);
    for (Key k = 2; k <= kKeys; k += 2) t.put(k * 4, 0);
  });
  auto& t = this->reopen();
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int id = 0; id < 4; ++id) {
    threads.emplace_back([&, id] {
      if (id < 2) {  // readers: every key, from both ends
        for (Key i = 1; i <= kKeys; ++i) {
          const Key k = id == 0 ? i : kKeys + 1 - i;
          if (t.get(k * 4) != std::optional<Value>(k)) wrong.fetch_add(1);
        }
      } else {  // writers: keys between the old ones (4k + 1 and 4k + 2), their own
        for (Key k = 1; k <= kKeys; ++k)
          if (!t.insert(k * 4 + id - 1, k)) wrong.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(t.size(), 3 * kKeys);
  if constexpr (TestFixture::incll) {
    EXPECT_GT(t.permutations_restored(), 100u);
  }
}

// Eager recovery, the default (Options::lazy_recovery = false): every border is recovered (and
// checked) at open, and the record of failed epochs is emptied.
TYPED_TEST(DurableMasstree, EagerRecoveryUndoesEveryBorderAtOpen) {
  this->create();
  constexpr Key kKeys = 3'000;
  this->in_dying_child([&](TypeParam& t) {
    for (Key k = 1; k <= kKeys; ++k) t.insert(k * 10, k);
    t.sync();
    for (Key k = 1; k <= kKeys; k += 3) t.remove(k * 10);
    for (Key k = 2; k <= kKeys; k += 3) t.put(k * 10, 0);
  });
  incll::Options eager = manual_clock();
  eager.lazy_recovery = false;
  auto& t = this->reopen(eager);
  if constexpr (TestFixture::incll) {
    EXPECT_GT(t.permutations_restored(), 100u);
    EXPECT_GT(t.values_restored(), 100u);
  }
  EXPECT_EQ(t.failed_epochs_recorded(), 0u);
  std::map<Key, Value> expected;
  for (Key k = 1; k <= kKeys; ++k) expected.emplace(k * 10, k);
  EXPECT_EQ(contents(t), expected);
}

// InCLL_p shares the permutation's cache line, and each value InCLL its values' line
// (InCLL §4.1.2: their persistence order is the line's store order).
TEST(BorderLayout, EachInCLLSharesTheLineItLogs) {
  using incll::masstree_detail::Border;
  alignas(64) static unsigned char storage[sizeof(Border)];
  Border* b = Border::make(storage, 0, 0);
  const auto line = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) / 64; };
  EXPECT_EQ(line(&b->permutation_log), line(&b->permutation));
  EXPECT_EQ(line(&b->node_epoch), line(&b->permutation));
  for (int slot = 0; slot < incll::masstree_detail::width; ++slot) {
    const auto& l = b->value_lines[slot / incll::masstree_detail::ValueLine::values];
    EXPECT_EQ(line(&b->value(slot)), line(&l.log_tag));
    EXPECT_EQ(line(&b->value(slot)), line(&l.log_value));
  }
}

}  // namespace
