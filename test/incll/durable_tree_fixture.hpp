// What the durable Masstree tests share (durable_masstree_hw_test.cpp for the 8-byte form,
// durable_string_masstree_hw_test.cpp for byte strings): a fixture with a tree in a pool file
// that a test creates, reopens (recovering it) and hands to a child process that dies without
// closing it; random operations checked against a model.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <random>

#include "pmds/incll/durable_masstree.hpp"
#include "support/child_process.hpp"
#include "support/temp_path.hpp"

namespace pmds::incll_test {

inline constexpr std::size_t kPoolSize = 64u << 20;

// The tests' options: no advancer thread (a test passes epochs with sync()), and lazy or eager
// recovery.
inline incll::Options manual_clock(bool lazy_recovery) {
  incll::Options o;
  o.background_thread = false;
  o.lazy_recovery = lazy_recovery;
  return o;
}

template <class T>
class DurableTreeTest : public ::testing::Test {
 protected:
  using Tree = T;

  // `options`: how create(), reopen() and the dying child open the tree unless told otherwise.
  DurableTreeTest(incll::Options options, const char* tag) : options_(options), path_(tag) {}

  Tree& create() { return create(options_); }
  Tree& create(incll::Options o, std::size_t pool_size = kPoolSize) {
    pool_.emplace(pm::Pool::create(path_.str(), pool_size, Tree::name));
    tree_ = std::make_unique<Tree>(create_new, *pool_, o);
    return *tree_;
  }
  Tree& reopen() { return reopen(options_); }
  Tree& reopen(incll::Options o) {
    tree_.reset();
    pool_.reset();
    pool_.emplace(pm::Pool::open(path_.str(), Tree::name));
    tree_ = std::make_unique<Tree>(open_existing, *pool_, o);
    return *tree_;
  }
  // Closes the tree, then runs body(tree) in a child process that opens it and dies without
  // closing it, every store left in the pool file as after kill -9; body may end the child
  // with an exit code of its own.
  template <class F>
  void in_dying_child(F&& body) {
    tree_.reset();
    pool_.reset();
    pmds::test::in_killed_child([&] {
      pm::Pool pool = pm::Pool::open(path_.str(), Tree::name);
      auto owned = std::make_unique<Tree>(open_existing, pool, options_);  // never closed
      body(*owned);
      ::_exit(0);
    });
  }
  void TearDown() override {
    tree_.reset();
    pool_.reset();
  }

  incll::Options options_;
  pmds::test::TempPath path_;
  std::optional<pm::Pool> pool_;
  std::unique_ptr<Tree> tree_;
};

// `count` random removes, puts and inserts (1 : 1 : 2) of make_key(rng) with make_value(rng),
// each result checked against `model` (a std::map), which they update; an epoch boundary every
// 1,000 operations. Callers wrap it in ASSERT_NO_FATAL_FAILURE.
template <class Tree, class Model, class MakeKey, class MakeValue>
void random_operations(Tree& t, Model& model, std::mt19937_64& rng, int count, MakeKey make_key,
                       MakeValue make_value) {
  for (int i = 0; i < count; ++i) {
    const auto k = make_key(rng);
    const auto v = make_value(rng);
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
}

}  // namespace pmds::incll_test
