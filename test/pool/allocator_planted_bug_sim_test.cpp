// The allocator crash lab must be able to fail: with a planted bug (a claimed chunk's directory
// word is never persisted) it must find durably stamped slots that recovery does not see.
#define PMDS_PLANTED_BUG_ALLOCATOR_DIRECTORY_NOT_PERSISTED
#include <gtest/gtest.h>

#include "pool/allocator_crash_lab.hpp"

namespace {

TEST(AllocatorPlantedBug, UnpersistedDirectoryLosesLiveSlots) {
  alloc_crash::Workload w;
  w.threads = 2;
  w.ops_per_thread = 400;
  w.seed = 11;
  std::size_t crashes = 0, images = 0;
  const alloc_crash::Violations v = alloc_crash::run_lab("alloc_bug", 8, w, crashes, images);
  EXPECT_GT(crashes, 0u);
  EXPECT_GT(v.required_lost, 0u) << "the lab did not notice a directory that is never persisted";
  std::printf("planted bug: %zu lost slots over %zu images; first: %s\n", v.required_lost, images,
              v.first.c_str());
}

}  // namespace
