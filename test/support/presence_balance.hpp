// A concurrent check of any set or map: three threads change the presence of a few keys, and
// every change that an operation reports must be real (test/montage, test/algo).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "pmds/interfaces.hpp"

namespace pmds::test {

// Three threads, `steps` steps each, on keys [1, keys]: each step draws a key k and calls
// step(t, rng, k, i) (i = 1..steps), which returns +1 when it made k present (an insert or a put
// that found it absent), -1 when it made k absent (a remove that found it) and 0 otherwise. Every
// such change flips k's presence, so at the end each key's changes sum to exactly its presence.
template <class M, class Step>
void expect_changes_match_presence(M& m, Key keys, Value steps, Step step) {
  std::vector<std::atomic<std::int64_t>> balance(keys + 1);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (Value i = 1; i <= steps; ++i) {
        const Key k = 1 + rng() % keys;
        balance[k].fetch_add(step(t, rng, k, i));
      }
    });
  for (auto& th : threads) th.join();
  for (Key k = 1; k <= keys; ++k) EXPECT_EQ(balance[k].load(), m.contains(k) ? 1 : 0) << k;
}

}  // namespace pmds::test
