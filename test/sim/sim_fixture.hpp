// Shared by the simulator's tests: a cache-line-aligned buffer of pm::atomic<uint64_t> words
// attached to the Px86 simulator, and the set of reachable crash images of chosen words.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <set>
#include <vector>

#include "pmds/pm/access.hpp"
#include "support/crash_image.hpp"

namespace simtest {

namespace pm = pmds::pm;
namespace sim = pmds::pm::sim;

using Words = std::vector<std::uint64_t>;

inline constexpr std::size_t kLines = 8;
inline constexpr std::size_t kWordsPerLine = pm::cache_line_size / sizeof(std::uint64_t);
inline constexpr std::size_t kWords = kLines * kWordsPerLine;

// Word i lives in line i / 8: words 0..7 share line 0, words 8..15 line 1, ...
class SimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (std::size_t i = 0; i < kWords; ++i) new (&buf_[i * 8]) pm::atomic<std::uint64_t>(0);
    sim::attach(buf_, sizeof buf_);
    sim::reset_warning_count();
  }
  void TearDown() override {
    sim::clear_crash_handler();
    if (sim::attached(buf_)) sim::detach(buf_);
  }

  pm::atomic<std::uint64_t>& w(std::size_t i) {
    return *std::launder(reinterpret_cast<pm::atomic<std::uint64_t>*>(&buf_[i * 8]));
  }
  void clwb(std::size_t i) { sim::flush(&w(i), pm::FlushInstruction::clwb); }

  // The region index of buf_ in a snapshot.
  std::size_t region_of(const sim::Snapshot& s) const {
    for (std::size_t r = 0; r < s.region_count(); ++r)
      if (s.region_base(r) == static_cast<const void*>(buf_)) return r;
    ADD_FAILURE() << "buffer not in the snapshot";
    return 0;
  }

  // The words at the given indices in one image.
  Words words_of(const std::vector<unsigned char>& image, const std::vector<std::size_t>& idx) {
    Words out;
    for (std::size_t i : idx) {
      std::uint64_t v;
      std::memcpy(&v, image.data() + i * 8, 8);
      out.push_back(v);
    }
    return out;
  }
  Words words_of(const sim::Snapshot& s, const sim::Choice& c,
                 const std::vector<std::size_t>& idx) {
    return words_of(s.image(region_of(s), c), idx);
  }

  // Every reachable crash image (exhaustive enumeration), projected on the given words.
  std::set<Words> reachable(const std::vector<std::size_t>& idx) {
    const sim::Snapshot s = sim::snapshot();
    std::set<Words> out;
    const bool enumerated =
        s.for_each_choice(1e6, [&](const sim::Choice& c) { out.insert(words_of(s, c, idx)); });
    EXPECT_TRUE(enumerated) << "too many images: " << s.image_count();
    return out;
  }

  // The live (volatile) content of the buffer at the given words.
  Words live(const std::vector<std::size_t>& idx) {
    Words out;
    for (std::size_t i : idx) out.push_back(w(i).load());
    return out;
  }

  alignas(64) unsigned char buf_[kLines * pm::cache_line_size];
  // The model's flush is clwb unless a test says otherwise (the host CPU must not matter).
  pmds::test::ClwbFlushes clwb_flushes_;
};

}  // namespace simtest
