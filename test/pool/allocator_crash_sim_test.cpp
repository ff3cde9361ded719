// The chunk allocator's crash consistency under the Px86 simulator (allocator_crash_lab.hpp):
// crash at drawn events while two threads allocate, stamp, persist and free; every crash image
// (minimum, maximum, random) opens, recovers, and keeps every slot exactly one of live or free.
// PMDS_POOL_CRASH_POINTS=n sets the number of crash points (default 24; 6 under a sanitizer).
#include <gtest/gtest.h>

#include "pool/allocator_crash_lab.hpp"

namespace {

TEST(AllocatorCrash, EveryImageRecoversConsistently) {
  alloc_crash::Workload w;
  w.threads = 2;
  w.ops_per_thread = 700;
  w.seed = 7;
  std::size_t crashes = 0, images = 0;
  const alloc_crash::Violations v =
      alloc_crash::run_lab("alloc_crash", alloc_crash::points_from_env(24), w, crashes, images);
  EXPECT_GE(crashes, alloc_crash::points_from_env(24) / 2) << "most drawn events must crash";
  EXPECT_EQ(v.total(), 0u) << v.first;
  EXPECT_EQ(v.open_failed, 0u);
  EXPECT_EQ(v.required_lost, 0u);
  EXPECT_EQ(v.live_handed_out, 0u);
  EXPECT_EQ(v.handed_twice, 0u);
  std::printf("checked %zu crash images from %zu crashes\n", images, crashes);
}

// The same lab with one thread and a crash at every event of a short run: exhaustive over
// crash points, not sampled.
TEST(AllocatorCrash, EveryCrashPointOfAShortRun) {
  alloc_crash::Workload w;
  w.chunks = 2;
  w.threads = 1;
  w.ops_per_thread = alloc_crash::kSanitized ? 12 : 40;
  w.seed = 3;
  std::size_t crashes = 0, images = 0;
  const alloc_crash::Violations v = alloc_crash::run_lab("alloc_every", 200, w, crashes, images);
  EXPECT_GT(crashes, alloc_crash::kSanitized ? 5u : 20u);
  EXPECT_EQ(v.total(), 0u) << v.first;
}

}  // namespace
