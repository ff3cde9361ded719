// labels: memory
// Pool files under the simulated backend: the mapping is attached to the Px86 simulator while
// open, roots and the chunk directory persist as the access layer says, and a crash image of an
// open pool is itself a pool that opens (dirty).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "pmds/pm/pool.hpp"
#include "support/crash_image.hpp"
#include "support/temp_path.hpp"

namespace pm = pmds::pm;
namespace sim = pmds::pm::sim;
using pmds::test::region_of;
using pmds::test::TempPath;

namespace {

constexpr std::size_t kSize = 2 * 4096 + 3 * (std::size_t{1} << 20);

class PoolSim : public ::testing::Test {
 protected:
  pmds::test::ClwbFlushes clwb_;  // the model, not the host

  static std::uint64_t word(const std::vector<unsigned char>& image, std::size_t offset) {
    std::uint64_t v;
    std::memcpy(&v, image.data() + offset, sizeof v);
    return v;
  }
};

TEST_F(PoolSim, AttachedWhileOpen) {
  TempPath path("sim_attach");
  void* base = nullptr;
  {
    pm::Pool pool = pm::Pool::create(path, kSize, "test/sim");
    base = pool.base();
    EXPECT_TRUE(sim::attached(base));
    EXPECT_TRUE(sim::attached(static_cast<char*>(base) + kSize - 1));
    // create's content counts as durable: the magic is in every image.
    const sim::Snapshot s = sim::snapshot();
    const auto image = s.image(region_of(s, base), s.choice(sim::ImageKind::minimum));
    EXPECT_EQ(word(image, 0), pm::format::magic);
  }
  EXPECT_FALSE(sim::attached(base));
  pm::Pool pool = pm::Pool::open(path, "test/sim");
  EXPECT_TRUE(sim::attached(pool.base()));
  pool.close();
  EXPECT_FALSE(sim::attached(base));
}

TEST_F(PoolSim, RootsPersistOnlyWhenPersisted) {
  TempPath path("sim_roots");
  pm::Pool pool = pm::Pool::create(path, kSize, "test/sim");
  pool.root(0).store(10);
  pm::persist(&pool.root(0), 8);
  pool.root(8).store(20);  // another line, never flushed
  const sim::Snapshot s = sim::snapshot();
  const std::size_t r = region_of(s, pool.base());
  const auto min = s.image(r, s.choice(sim::ImageKind::minimum));
  const auto max = s.image(r, s.choice(sim::ImageKind::maximum));
  EXPECT_EQ(word(min, pm::format::roots_offset), 10u);
  EXPECT_EQ(word(min, pm::format::roots_offset + 8 * 8), 0u);
  EXPECT_EQ(word(max, pm::format::roots_offset + 8 * 8), 20u);
  EXPECT_EQ(word(min, pm::format::clean_flag_offset), 0u);  // open: not clean
}

// allocate() returns a slot of a new chunk only once the chunk's directory word is durable.
TEST_F(PoolSim, ClaimedChunkIsDurableBeforeItsFirstSlot) {
  TempPath path("sim_claim");
  pm::Pool pool = pm::Pool::create(path, kSize, "test/sim");
  pool.allocator().allocate(256);
  const sim::Snapshot s = sim::snapshot();
  const auto min = s.image(region_of(s, pool.base()), s.choice(sim::ImageKind::minimum));
  const std::uint64_t w = word(min, pm::format::header_size);  // chunk 0's word
  EXPECT_TRUE(pm::format::chunk_word::is_used(w));
  EXPECT_EQ(pm::format::chunk_word::slot_size(w), 256u);
  EXPECT_EQ(pm::format::chunk_word::owner(w), pmds::thread_id());
}

// close(): a crash just before its fence may or may not have the flag; after close it is set.
TEST_F(PoolSim, CloseSetsTheCleanFlagDurably) {
  TempPath path("sim_close");
  pm::Pool pool = pm::Pool::create(path, kSize, "test/sim");
  const void* base = pool.base();
  std::uint64_t at_min = 9, at_max = 9;
  sim::set_crash_handler(sim::event_count(), [&] {  // the next event: close()'s fence
    const sim::Snapshot s = sim::snapshot();
    const std::size_t r = region_of(s, base);
    at_min = word(s.image(r, s.choice(sim::ImageKind::minimum)), pm::format::clean_flag_offset);
    at_max = word(s.image(r, s.choice(sim::ImageKind::maximum)), pm::format::clean_flag_offset);
  });
  pool.close();
  EXPECT_EQ(at_min, 0u);
  EXPECT_EQ(at_max, 1u);
  EXPECT_FALSE(sim::attached(base));
  EXPECT_TRUE(pm::inspect_pool(path).clean_shutdown);
}

// A crash image of an open pool, written to a file, opens as a pool (dirty, roots as durable).
TEST_F(PoolSim, CrashImageOpensAsADirtyPool) {
  TempPath path("sim_image");
  TempPath image_path("sim_image_copy");
  void* slot = nullptr;
  {
    pm::Pool pool = pm::Pool::create(path, kSize, "test/sim");
    slot = pool.allocator().allocate(64);
    const std::uint64_t v = 0xabcdef;
    pm::write(slot, &v, sizeof v);
    pm::persist(slot, sizeof v);
    pool.root(0).store(reinterpret_cast<std::uint64_t>(slot));
    pm::persist(&pool.root(0), 8);
    ASSERT_NO_FATAL_FAILURE(pmds::test::write_crash_image(sim::snapshot(), pool.base(), image_path,
                                                          sim::ImageKind::minimum));
  }
  pm::Pool pool = pm::Pool::open(image_path, "test/sim");
  EXPECT_FALSE(pool.was_clean_shutdown());
  EXPECT_EQ(pool.root(0).load(), reinterpret_cast<std::uint64_t>(slot));
  std::uint64_t v = 0;
  std::memcpy(&v, slot, sizeof v);
  EXPECT_EQ(v, 0xabcdefu);
  EXPECT_EQ(pool.allocator().used_chunks(), 1u);
}

// A pool that grew while attached: the simulator follows the growth (sim::extend), so the
// grown chunks' stores are recorded, and a crash image of the grown pool opens at its grown size
// with every persisted slot.
TEST_F(PoolSim, AGrownPoolsCrashImageOpensWithEveryGrownChunk) {
  TempPath path("sim_grow");
  TempPath image_path("sim_grow_image");
  pm::PoolOptions o;
  o.chunk_size = std::size_t{64} << 10;
  o.max_size = std::size_t{2} << 20;
  std::vector<void*> slots;
  std::size_t size = 0, growths = 0;
  {
    pm::Pool pool = pm::Pool::create(path, std::size_t{256} << 10, "test/sim", o);
    try {
      for (;;) {
        void* p = pool.allocator().allocate(4096);
        pm::write(p, &p, sizeof p);
        pm::persist(p, sizeof p);
        slots.push_back(p);
      }
    } catch (const pmds::PoolFull&) {
    }
    size = pool.size();
    growths = pool.growths();
    EXPECT_GT(growths, 1u);
    EXPECT_TRUE(sim::attached(static_cast<char*>(pool.base()) + size - 1));
    ASSERT_NO_FATAL_FAILURE(pmds::test::write_crash_image(sim::snapshot(), pool.base(), image_path,
                                                          sim::ImageKind::minimum));
  }
  pm::Pool pool = pm::Pool::open(image_path, "test/sim");
  EXPECT_FALSE(pool.was_clean_shutdown());
  EXPECT_EQ(pool.size(), size);
  EXPECT_EQ(pool.growths(), growths);
  for (void* p : slots) {
    void* q = nullptr;
    std::memcpy(&q, p, sizeof q);
    ASSERT_EQ(q, p);
  }
}

}  // namespace
