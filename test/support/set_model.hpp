// The single-threaded check of any set (insert that never updates, remove, contains, get)
// against std::map, for the sets' own tests (test/algo, test/linkfree_soft, test/comparators).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <random>

#include "pmds/interfaces.hpp"

namespace pmds::test {

// `ops` random operations, each answer compared with std::map's, on the keys key_of(d) for d in
// [0, draws) (default: 1..draws), values random. `model` ends as what the set must hold. Stops at
// the first difference with a fatal failure: call it under ASSERT_NO_FATAL_FAILURE.
template <class Set, class KeyOf>
void expect_set_matches_map(Set& s, std::map<Key, Value>& model, int ops, std::uint64_t draws,
                            std::uint64_t seed, KeyOf key_of) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < ops; ++i) {
    const Key k = key_of(rng() % draws);
    const Value v = rng();
    switch (rng() % 4) {
      case 0:
        ASSERT_EQ(s.insert(k, v), model.emplace(k, v).second) << "insert " << k;
        break;
      case 1:
        ASSERT_EQ(s.remove(k), model.erase(k) == 1) << "remove " << k;
        break;
      case 2:
        ASSERT_EQ(s.contains(k), model.contains(k)) << "contains " << k;
        break;
      default: {
        const auto it = model.find(k);
        ASSERT_EQ(s.get(k), it == model.end() ? std::nullopt : std::optional<Value>(it->second))
            << "get " << k;
      }
    }
  }
}

template <class Set>
void expect_set_matches_map(Set& s, std::map<Key, Value>& model, int ops, std::uint64_t draws,
                            std::uint64_t seed = 42) {
  expect_set_matches_map(s, model, ops, draws, seed, [](std::uint64_t d) { return Key{1 + d}; });
}

}  // namespace pmds::test
