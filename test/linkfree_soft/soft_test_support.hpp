// Shared by the SOFT set tests (list, hash, skip list; hardware, counting and simulated
// backends): how to create and open each structure in a pool, and how to read its contents.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "pmds/linkfree_soft/soft_list.hpp"
#include "pmds/linkfree_soft/soft_skiplist.hpp"
#include "pmds/pm/pool.hpp"
#include "support/temp_path.hpp"

namespace soft_test {

using pmds::create_new;
using pmds::Key;
using pmds::open_existing;
using pmds::Value;
namespace pm = pmds::pm;
namespace linkfree_soft = pmds::linkfree_soft;

// One SOFT structure: its type, layout name, and how to create it in / open it from a pool.
template <class Faults = pmds::NoFaults>
struct ListKind {
  using type = linkfree_soft::SoftList<Faults>;
  static constexpr const char* layout = "list/soft";
  static std::unique_ptr<type> create(pm::Pool& p) { return std::make_unique<type>(create_new, p); }
  static std::unique_ptr<type> open(pm::Pool& p) {
    return std::make_unique<type>(open_existing, p);
  }
  // Quiescent: frees every retired node now (their slots return to the allocator).
  static void drain(type& s) { s.shared().domain().drain(); }
};

// A small table, so that buckets hold several keys and the lists inside are exercised.
template <class Faults = pmds::NoFaults>
struct HashKind {
  using type = linkfree_soft::SoftHashSet<Faults>;
  static constexpr const char* layout = "hash/soft";
  static constexpr std::size_t buckets = 8;
  static std::unique_ptr<type> create(pm::Pool& p) {
    return std::make_unique<type>(create_new, p, buckets);
  }
  static std::unique_ptr<type> open(pm::Pool& p) {
    return std::make_unique<type>(open_existing, p);
  }
  static void drain(type& s) { s.shared().domain().drain(); }
};

template <class Faults = pmds::NoFaults>
struct SkipKind {
  using type = linkfree_soft::SoftSkipList<Faults>;
  static constexpr const char* layout = "skiplist/soft";
  static std::unique_ptr<type> create(pm::Pool& p) { return std::make_unique<type>(create_new, p); }
  static std::unique_ptr<type> open(pm::Pool& p) {
    return std::make_unique<type>(open_existing, p);
  }
  static void drain(type& s) { s.domain().drain(); }
};

// The three SOFT structures, for typed tests; KindNames names each test by its layout.
using Kinds = ::testing::Types<ListKind<>, HashKind<>, SkipKind<>>;
struct KindNames {
  template <class T>
  static std::string GetName(int) {
    return T::layout;
  }
};

// A structure's contents, read quiescently.
template <class S>
std::map<Key, Value> contents(S& s) {
  std::map<Key, Value> m;
  s.for_each([&](Key k, Value v) {
    EXPECT_TRUE(m.emplace(k, v).second) << "key " << k << " listed twice";
  });
  return m;
}

}  // namespace soft_test
