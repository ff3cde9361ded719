// What the montage/ tests share: a structure in a pool file, created, closed cleanly and opened
// again (recovery), with the epoch clock driven by the test.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>

#include "pmds/montage/epoch_system.hpp"
#include "pool/pool_test_util.hpp"

namespace montage_test {

// No background advancer: the test moves the clock (background_step, sync).
inline pmds::montage::Options manual_clock() {
  pmds::montage::Options o;
  o.background_thread = false;
  return o;
}

// S in a pool whose layout is S::name.
template <class S>
class InPool : public ::testing::Test {
 protected:
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

  pool_test::TempPath path_{"montage"};
  std::optional<pmds::pm::Pool> pool_;
  std::unique_ptr<S> s_;
};

}  // namespace montage_test
