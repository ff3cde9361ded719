// Tests of the registry (pmds/registry.hpp, registry/descriptor.hpp) over every registered entry:
// names are well formed and unique, selection by name/pattern works and rejects unknown names,
// every entry can be created (durable ones in a pool), prefilled to exactly the count the
// harness claims (its contents afterwards), driven through the type-erased operations, and —
// when durable — closed and reopened to the same contents through the registry's factories.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "pmds/bench/runner.hpp"
#include "pmds/registry.hpp"
#include "support/child_process.hpp"
#include "support/registry_entries.hpp"

namespace {

using namespace pmds;
using pmds::test::TempPool;
using registry::Entry;
using registry::Kind;
using registry::OpCode;

TEST(Registry, NamesAreWellFormedAndUnique) {
  std::set<std::string_view> names;
  std::size_t index = 0;
  for (const Entry& e : registry::entries()) {
    SCOPED_TRACE(std::string(e.name));
    EXPECT_EQ(e.index, index++);
    EXPECT_TRUE(names.insert(e.name).second) << "duplicate name";
    EXPECT_EQ(std::string(e.structure) + "/" + std::string(e.technique), e.name);
    EXPECT_FALSE(e.description.empty());
    EXPECT_EQ(e.durable, e.criterion != Criterion::none);
    EXPECT_EQ(e.open != nullptr, e.durable);
    EXPECT_NE(e.create, nullptr);
    EXPECT_EQ(registry::find(e.name), &e);
  }
  EXPECT_EQ(registry::find("no/such"), nullptr);
}

// The operation table holds exactly the kind's operations (put: the maps that update), and the
// capability tables are there exactly for the techniques that have them: epochs for the buffered
// ones (nbMontage, InCLL), tickets for the detectable ones (Fatourou et al.).
TEST(Registry, OperationAndCapabilityTablesFollowTheKindAndTheCriterion) {
  const auto kind_has = [](Kind k, OpCode c) {
    switch (c) {
      case OpCode::insert:
      case OpCode::remove:
      case OpCode::contains:
        return k == Kind::set || k == Kind::map;
      case OpCode::get:
      case OpCode::put:
        return k == Kind::map;
      case OpCode::enqueue:
      case OpCode::dequeue:
        return k == Kind::queue;
      case OpCode::push:
      case OpCode::pop:
        return k == Kind::stack;
      case OpCode::pq_insert:
      case OpCode::delete_min:
      case OpCode::get_min:
        return k == Kind::priority_queue;
      case OpCode::read:
      case OpCode::fetch_multiply:
        return k == Kind::register_object;
      case OpCode::sync:
        return true;  // checked apart, below
    }
    return false;
  };
  std::size_t buffered = 0, detectable = 0, updatable = 0;
  for (const Entry& e : registry::entries()) {
    SCOPED_TRACE(std::string(e.name));
    for (std::size_t i = 0; i < registry::op_code_count; ++i) {
      const auto c = static_cast<OpCode>(i);
      if (c == OpCode::put) {
        EXPECT_TRUE(!e.supports(c) || e.kind == Kind::map);
      } else if (c != OpCode::sync) {
        EXPECT_EQ(e.supports(c), kind_has(e.kind, c)) << registry::to_string(c);
      }
      if (e.detectable != nullptr) {
        EXPECT_EQ(e.detectable->ops[i] != nullptr, kind_has(e.kind, c) && c != OpCode::sync)
            << "ticketed " << registry::to_string(c);
      }
    }
    EXPECT_FALSE(e.supports(static_cast<OpCode>(registry::op_code_count)));
    EXPECT_EQ(e.detectable != nullptr, e.criterion == Criterion::detectable);
    const bool epochs = e.criterion == Criterion::buffered;
    EXPECT_EQ(e.buffered != nullptr, epochs);
    EXPECT_EQ(e.can_sync(), epochs);
    if (e.buffered != nullptr) {
      EXPECT_NE(e.epoch_bound(), EpochBound::none);
      EXPECT_NE(e.buffered->epoch, nullptr);
      EXPECT_TRUE(e.has_background_work());
    } else {
      EXPECT_EQ(e.epoch_bound(), EpochBound::none);
      EXPECT_FALSE(e.has_background_work());
    }
    buffered += e.buffered != nullptr;
    detectable += e.detectable != nullptr;
    updatable += e.can_update();
  }
  EXPECT_GT(buffered, 0u);
  EXPECT_GT(detectable, 0u);
  EXPECT_GT(updatable, 0u);
}

TEST(Registry, SelectByNamePatternAndAll) {
  const auto all = registry::select("all");
  EXPECT_EQ(all.size(), registry::entries().size());
  if (registry::entries().empty()) GTEST_SKIP() << "nothing registered yet";
  const Entry& first = registry::entries().front();
  const auto one = registry::select(std::string(first.name));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0], &first);
  for (const Entry* e : registry::select(std::string(first.structure) + "/*"))
    EXPECT_EQ(e->structure, first.structure);
  for (const Entry* e : registry::select("*/" + std::string(first.technique)))
    EXPECT_EQ(e->technique, first.technique);
  // Repeats are dropped; order follows the request.
  const auto twice = registry::select(std::string(first.name) + ",all");
  EXPECT_EQ(twice.size(), registry::entries().size());
  EXPECT_EQ(twice[0], &first);
}

TEST(Registry, SelectRejectsUnknownNamesClearly) {
  try {
    registry::select("hash/nonsense");
    FAIL() << "no exception";
  } catch (const registry::UnknownStructure& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("unknown structure \"hash/nonsense\""));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("pmds list"));
  }
  EXPECT_THROW(registry::select(""), registry::UnknownStructure);
  EXPECT_THROW(registry::select("all,"), registry::UnknownStructure);
}

TEST(Registry, InstantiatedTablesCoverEveryEntry) {
  // The loops of the table library (bench::target_of reads registry::instantiate's tables).
  for (const Entry& e : registry::entries()) {
    const bench::Target t = bench::target_of(e);
    EXPECT_EQ(t.entry, &e);
    EXPECT_NE(t.prefill, nullptr) << e.name;
    EXPECT_NE(t.run, nullptr) << e.name;
  }
  std::size_t visited = 0;
  registry::for_each_descriptor([&]<class D>() {
    EXPECT_EQ(registry::entries()[visited].name, D::name);
    ++visited;
  });
  EXPECT_EQ(visited, registry::entries().size());
}

TEST(Registry, TransientEntriesRefuseToOpenAndDurableOnesNeedAPool) {
  for (const Entry& e : registry::entries()) {
    registry::CreateOptions o;
    o.key_range = 64;
    if (e.durable)
      EXPECT_THROW(registry::Instance::create(e, o), Error) << e.name;
    else
      EXPECT_THROW(registry::Instance::open(e, "/nonexistent.pool"), Error) << e.name;
  }
}

// --lazy-recovery (CreateOptions::lazy_recovery) reaches the InCLL Masstrees: a tree opened
// lazily after a process crash serves the state of its last sync: the failed epoch's removes
// and inserts undone border by border, on first access.
TEST(Registry, LazyRecoveryReachesTheInCLLMasstrees) {
  registry::CreateOptions o;
  o.key_range = 4000;
  o.lazy_recovery = true;
  o.background_thread = false;  // epochs end at sync() only: the crash's epoch is known
  for (const char* name :
       {"masstree/incll", "masstree/logging", "masstree-bytes/incll", "masstree-bytes/logging"}) {
    const Entry& e = *registry::find(name);
    TempPool pool(name);
    pmds::test::in_killed_child([&] {
      auto inst = registry::Instance::create(e, o, pool.path());
      bench::target_of(e).prefill(inst.object(), 2000, 2000, 7, 1);  // keys 1..2000
      inst.apply({OpCode::sync, 0, 0, 1});
      for (Key k = 1; k <= 2000; k += 2) inst.apply({OpCode::remove, k, 0, 1});
      for (Key k = 2001; k <= 3000; ++k) inst.apply({OpCode::insert, k, k, 1});
      ::_exit(0);  // the pool is never closed: a crash in the epoch after the sync
    });
    auto inst = registry::Instance::open(e, pool.path(), o);
    EXPECT_TRUE(inst.apply({OpCode::contains, 1, 0, 1}).ok) << name;
    EXPECT_FALSE(inst.apply({OpCode::contains, 2001, 0, 1}).ok) << name;
    const auto items = inst.contents();
    ASSERT_EQ(items.size(), 2000u) << name;
    EXPECT_EQ(items.front().key, 1u);
    EXPECT_EQ(items.back().key, 2000u);
  }
}

// Every set/map entry: the prefill puts in exactly what it claims; operations through apply()
// behave as a set; a durable entry reopens (clean close) to the same contents.
TEST(Registry, EverySetPrefillsExactlyAndReopensToItsContents) {
  for (const Entry& e : registry::entries()) {
    if (e.kind != Kind::set && e.kind != Kind::map) continue;
    SCOPED_TRACE(std::string(e.name));
    registry::CreateOptions o;
    o.key_range = 2000;
    o.pool_size = 32u << 20;
    TempPool pool(e.name);
    std::vector<registry::Item> before;
    {
      auto inst = registry::Instance::create(e, o, pool.path());
      const bench::Target t = bench::target_of(e);
      EXPECT_EQ(t.prefill(inst.object(), 1000, 2000, 5, 2), 1000u);
      before = inst.contents();
      ASSERT_EQ(before.size(), 1000u);
      for (const auto& it : before) {
        EXPECT_GE(it.key, 1u);
        EXPECT_LE(it.key, 2000u);
      }
      // A key not in the set: insert, find, remove, through the type-erased operations.
      Key absent = 1;
      while (absent <= 2000 &&
             std::binary_search(before.begin(), before.end(), registry::Item{absent, absent},
                                [](const auto& a, const auto& b) { return a.key < b.key; }))
        ++absent;
      ASSERT_LE(absent, 2000u);
      EXPECT_FALSE(inst.apply({OpCode::contains, absent, 0, 1}).ok);
      EXPECT_TRUE(inst.apply({OpCode::insert, absent, 77, 1}).ok);
      EXPECT_FALSE(inst.apply({OpCode::insert, absent, 78, 1}).ok);
      EXPECT_TRUE(inst.apply({OpCode::contains, absent, 0, 1}).ok);
      if (e.kind == Kind::map) {
        const auto got = inst.apply({OpCode::get, absent, 0, 1});
        EXPECT_TRUE(got.ok);
        EXPECT_EQ(got.value, 77u);
      }
      EXPECT_TRUE(inst.apply({OpCode::remove, absent, 0, 1}).ok);
      EXPECT_FALSE(inst.apply({OpCode::remove, absent, 0, 1}).ok);
      EXPECT_THROW(inst.apply({OpCode::insert, 0, 0, 1}), ReservedKey);
      EXPECT_THROW(inst.apply({OpCode::enqueue, 1, 1, 1}), registry::UnsupportedOperation);
    }
    if (!e.durable) continue;
    auto reopened = registry::Instance::open(e, pool.path(), o);
    EXPECT_EQ(reopened.contents(), before);
  }
}

}  // namespace
