// Helpers shared by the tests that run under the simulated Px86 backend: find an open pool's
// region in a snapshot, replace a pool file with one of its crash images (docs/ARCHITECTURE.md
// §3), so that opening the file again recovers from that crash, or write a pool file's crash
// image (the minimum one, or another kind) to a new file.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "pmds/crashlab/image_file.hpp"
#include "pmds/pm/simulator.hpp"

namespace pmds::test {

// While it lives, the model's flush is clwb (pending until the thread's next fence), whatever
// instruction the host has: a sim test's crash images then do not depend on the host.
class ClwbFlushes {
 public:
  ClwbFlushes() : saved_(pmds::pm::detail::flush_instruction) {
    pmds::pm::detail::flush_instruction = pmds::pm::FlushInstruction::clwb;
  }
  ~ClwbFlushes() { pmds::pm::detail::flush_instruction = saved_; }
  ClwbFlushes(const ClwbFlushes&) = delete;
  ClwbFlushes& operator=(const ClwbFlushes&) = delete;

 private:
  pmds::pm::FlushInstruction saved_;
};

// The snapshot's region of the pool mapped at `base` (a failure, and 0, when it has none).
inline std::size_t region_of(const pmds::pm::sim::Snapshot& snap, const void* base) {
  for (std::size_t r = 0; r < snap.region_count(); ++r)
    if (snap.region_base(r) == base) return r;
  ADD_FAILURE() << "the pool is not in the snapshot";
  return 0;
}

// Writes the crash image `kind` (random images draw from `seed`) of the pool mapped at `base`
// to the file at `path`, replacing what it held.
inline void write_crash_image(const pmds::pm::sim::Snapshot& snap, const void* base,
                              const std::string& path, pmds::pm::sim::ImageKind kind,
                              std::uint64_t seed = 0) {
  const std::size_t region = region_of(snap, base);
  std::vector<unsigned char> image(snap.region_size(region));
  snap.write_image(region, kind, seed, image.data());
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(std::fwrite(image.data(), 1, image.size(), f), image.size()) << path;
  ASSERT_EQ(std::fclose(f), 0) << path;
}

// Writes the crash image `kind` of the pool file at `pool_path` as it is now (the snapshot's
// region 0) to a new file `image_path`.
inline void write_pool_image(const std::string& pool_path, const std::string& image_path,
                             pmds::pm::sim::ImageKind kind) {
  const pmds::pm::sim::Snapshot snap = pmds::pm::sim::snapshot(false);
  pmds::crashlab::write_crash_image(snap, snap.choice(kind), pool_path, image_path);
}

// The same with the minimum image: only what is certainly durable.
inline void write_minimum_image(const std::string& pool_path, const std::string& image_path) {
  write_pool_image(pool_path, image_path, pmds::pm::sim::ImageKind::minimum);
}

}  // namespace pmds::test
