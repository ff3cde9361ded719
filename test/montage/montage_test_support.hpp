// What the montage/ tests share: a structure in a pool file, created, closed cleanly and opened
// again (recovery), with the epoch clock driven by the test.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>

#include "pmds/montage/epoch_system.hpp"
#include "support/presence_balance.hpp"
#include "support/temp_path.hpp"

namespace montage_test {

using pmds::Key;
using pmds::Value;

// Quiescent: the map's contents.
template <class M>
std::map<Key, Value> contents(M& m) {
  std::map<Key, Value> out;
  m.for_each([&](Key k, Value v) { out.emplace(k, v); });
  return out;
}

// `operations` random inserts, removes and gets of keys in [1, range] on m, each checked against
// `model` (call through ASSERT_NO_FATAL_FAILURE). With top_bit, one key in 8 also has its top
// bit set (the split-ordered table's keys that share a split-order key).
template <class M>
void check_against_model(M& m, std::map<Key, Value>& model, int operations, Key range,
                         std::mt19937_64& rng, bool top_bit = false) {
  for (int i = 0; i < operations; ++i) {
    Key k = 1 + rng() % range;
    if (top_bit && rng() % 8 == 0) k |= Key{1} << 63;
    switch (rng() % 3) {
      case 0:
        ASSERT_EQ(m.insert(k, i), model.emplace(k, i).second) << k;
        break;
      case 1:
        ASSERT_EQ(m.remove(k), model.erase(k) == 1) << k;
        break;
      default:
        ASSERT_EQ(m.get(k), model.count(k) ? std::optional<Value>(model[k]) : std::nullopt) << k;
    }
  }
}

using pmds::test::expect_changes_match_presence;

// No background advancer: the test moves the clock (background_step, sync).
inline pmds::montage::Options manual_clock() {
  pmds::montage::Options o;
  o.background_thread = false;
  return o;
}

// A new S in `pool`; a hash table gets 64 buckets, so that its lists are long enough to be
// exercised. Outside a fixture too: for child processes.
template <class S>
std::unique_ptr<S> create_map(pmds::pm::Pool& pool, pmds::montage::Options o = manual_clock()) {
  if constexpr (requires { S::default_bucket_count; })
    return std::make_unique<S>(pmds::create_new, pool, std::size_t{64}, o);
  else
    return std::make_unique<S>(pmds::create_new, pool, o);
}

inline constexpr std::size_t default_pool_size = 32u << 20;

// S in a pool whose layout is S::name.
template <class S>
class InPool : public ::testing::Test {
 protected:
  // create_map<S> in a new pool of pool_size bytes.
  S& make(pmds::montage::Options o = manual_clock(), std::size_t pool_size = default_pool_size) {
    pool_.emplace(pmds::pm::Pool::create(path_, pool_size, S::name));
    s_ = create_map<S>(*pool_, o);
    return *s_;
  }
  // S(create_new, pool, args..., options) in a new pool of pool_size bytes.
  template <class... Args>
  S& create(std::size_t pool_size, pmds::montage::Options o, Args... args) {
    pool_.emplace(pmds::pm::Pool::create(path_, pool_size, S::name));
    s_ = std::make_unique<S>(pmds::create_new, *pool_, args..., o);
    return *s_;
  }
  // A clean close (the destructor syncs), then open and recover.
  S& reopen(pmds::montage::Options o = manual_clock()) {
    s_.reset();
    pool_.reset();
    pool_.emplace(pmds::pm::Pool::open(path_, S::name));
    s_ = std::make_unique<S>(pmds::open_existing, *pool_, o);
    return *s_;
  }
  void TearDown() override {
    s_.reset();
    pool_.reset();
  }

  pmds::test::TempPath path_{"montage"};
  std::optional<pmds::pm::Pool> pool_;
  std::unique_ptr<S> s_;
};

}  // namespace montage_test
