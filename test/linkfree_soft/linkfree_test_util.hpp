// Test helpers for the link-free sets (test/linkfree_soft/linkfree_*_test.cpp): a pool file that
// removes itself (support/temp_path.hpp), and one "kind" per structure so every test runs over
// list, hash and skip list alike.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "pmds/linkfree_soft/linkfree_list.hpp"
#include "pmds/linkfree_soft/linkfree_skiplist.hpp"
#include "pmds/pm/pool.hpp"
#include "support/temp_path.hpp"

namespace pmds::test {

// A unique pool path (in /dev/shm when it exists) removed at destruction.
using TempPoolPath = ::pmds::test::TempPath;

// One structure under test: how to create it in a pool and open it from one.
template <class S, std::size_t Buckets = 0>
struct SetKind {
  using Set = S;
  static std::unique_ptr<S> create(pm::Pool& pool) {
    if constexpr (Buckets != 0)
      return std::make_unique<S>(create_new, pool, Buckets);
    else
      return std::make_unique<S>(create_new, pool);
  }
  static std::unique_ptr<S> open(pm::Pool& pool) {
    return std::make_unique<S>(open_existing, pool);
  }
};

template <class Faults = pmds::NoFaults>
using ListKind = SetKind<linkfree_soft::LinkFreeList<Faults>>;
// A small table so that buckets hold several keys (the list code inside a bucket is exercised).
template <class Faults = pmds::NoFaults>
using HashKind = SetKind<linkfree_soft::LinkFreeHashSetT<Faults>, 64>;
template <class Faults = pmds::NoFaults>
using SkipListKind = SetKind<linkfree_soft::LinkFreeSkipList<Faults>>;

// The contents of a set (quiescent), as an ordered map.
template <class S>
std::map<Key, Value> contents_of(S& s) {
  std::map<Key, Value> m;
  s.for_each([&m](Key k, Value v) { m.emplace(k, v); });
  return m;
}

}  // namespace pmds::test
