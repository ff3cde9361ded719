// labels: memory
// The SOFT string maps' recovery (detail/soft_string_versions.hpp, shared by SoftStringHashMap
// and SoftStringSkipList, each tested) under the simulated Px86 backend: what the crash lab reaches
// only rarely. A replacement leaves the replaced version live until the key's next write, so a
// crash (or a close) after one leaves two live versions of the key; recovery keeps the higher and
// must make the other's deletion durable before any operation, or a later remove of the key (by any
// thread) followed by a crash brings the old value back. Here the key is removed by another
// thread than recovery's (whose fence does not cover recovery's flushes), and the image of a
// crash right after keeps only what is certainly durable.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <thread>

#include "pmds/linkfree_soft/soft_string_hash_map.hpp"
#include "pmds/linkfree_soft/soft_string_skiplist.hpp"
#include "support/crash_image.hpp"
#include "support/temp_path.hpp"

namespace {

namespace pm = pmds::pm;
namespace sim = pmds::pm::sim;

static_assert(pm::backend == pm::Backend::simulated);

constexpr std::size_t kPoolSize = pm::Pool::min_size() + (std::size_t{3} << 20);

template <class Map>
std::map<std::string, std::string> contents(Map& m) {
  std::map<std::string, std::string> out;
  m.for_each([&](std::string_view k, std::string_view v) { out.emplace(k, v); });
  return out;
}

// A map with a few buckets (the hash map) or none (the ordered one).
template <class Map>
Map make(pm::Pool& pool) {
  if constexpr (std::is_constructible_v<Map, pmds::CreateTag, pm::Pool&, std::size_t>)
    return Map(pmds::create_new, pool, 16);
  else
    return Map(pmds::create_new, pool);
}

// The map recovered from the image of a crash at `snap` that keeps only what is certainly
// durable.
template <class Map>
std::map<std::string, std::string> contents_after_a_crash(const sim::Snapshot& snap, void* base,
                                                          const std::string& path) {
  pmds::test::write_crash_image(snap, base, path, sim::ImageKind::minimum, 0);
  auto pool = pm::Pool::open(path, Map::name);
  Map m(pmds::open_existing, pool);
  return contents(m);
}

// Opens (recovers) the map at `path`, runs ops(map) on it, and returns what is recovered from the
// image of a crash right after them.
template <class Map, class Ops>
std::map<std::string, std::string> reopen_run_and_crash(const std::string& path, Ops&& ops) {
  std::optional<sim::Snapshot> snap;
  void* base = nullptr;
  {
    auto pool = pm::Pool::open(path, Map::name);
    base = pool.base();
    Map m(pmds::open_existing, pool);
    ops(m);
    snap = sim::snapshot();
  }
  return contents_after_a_crash<Map>(*snap, base, path);
}

template <class Map>
class SoftStringRecovery : public ::testing::Test {};
using Maps = ::testing::Types<pmds::linkfree_soft::SoftStringHashMap,
                              pmds::linkfree_soft::SoftStringSkipList>;
TYPED_TEST_SUITE(SoftStringRecovery, Maps);

TYPED_TEST(SoftStringRecovery, AnOlderVersionDeletedAtRecoveryStaysDeletedAfterACrash) {
  using Map = TypeParam;
  pmds::test::TempPath path("soft_string_sim_rec");
  {
    auto pool = pm::Pool::create(path.str(), kPoolSize, Map::name);
    Map m = make<Map>(pool);
    ASSERT_TRUE(m.put("key", "old value"));
    ASSERT_FALSE(m.put("key", "new value"));
    ASSERT_TRUE(m.put("other", "stays"));
    // A replacement leaves the replaced version live until the key's next write.
    sim::mark_all_durable();
  }
  const auto recovered = reopen_run_and_crash<Map>(path.str(), [](Map& m) {
    EXPECT_EQ(m.recovery_stats().duplicate_keys, 1u);
    EXPECT_EQ(m.get("key"), "new value");
    std::thread([&] { EXPECT_TRUE(m.remove("key")); }).join();
  });
  EXPECT_EQ(recovered, (std::map<std::string, std::string>{{"other", "stays"}}))
      << "the older version came back";
}

// A second replacement deletes, within its own fence, the version the first one left live
// (v0 here); a remove then deletes the rest. The image of a crash right after the remove must
// hold no live version of the key, v0 included (its slot is not reused here, so its bytes stay).
TYPED_TEST(SoftStringRecovery, AVersionTwoReplacementsBackStaysDeletedAfterARemove) {
  using Map = TypeParam;
  pmds::test::TempPath path("soft_string_sim_chain");
  std::optional<sim::Snapshot> snap;
  void* base = nullptr;
  {
    auto pool = pm::Pool::create(path.str(), kPoolSize, Map::name);
    base = pool.base();
    Map m = make<Map>(pool);
    ASSERT_TRUE(m.put("other", "stays"));
    ASSERT_TRUE(m.put("key", "v0"));
    ASSERT_FALSE(m.put("key", "v1"));
    ASSERT_FALSE(m.put("key", "v2"));
    ASSERT_TRUE(m.remove("key"));
    snap = sim::snapshot();
  }
  EXPECT_EQ(contents_after_a_crash<Map>(*snap, base, path.str()),
            (std::map<std::string, std::string>{{"other", "stays"}}))
      << "an older version came back";
}

// A replacement numbers its node from the replaced one's version, which the hash map keeps in its
// volatile node (recovery sets it from the scan) and the ordered map reads from the pool. After a
// recovery that kept version 2, the next replacement must write version 3: the recovered node is
// still live in the image of a crash right after it, and recovery keeps the higher version. A
// key too long to be kept in the hash map's volatile node takes the same path.
TYPED_TEST(SoftStringRecovery, AReplacementAfterRecoveryOutranksTheRecoveredVersion) {
  using Map = TypeParam;
  pmds::test::TempPath path("soft_string_sim_renumber");
  const std::string long_key(40, 'k');
  {
    auto pool = pm::Pool::create(path.str(), kPoolSize, Map::name);
    Map m = make<Map>(pool);
    for (const std::string& k : {std::string("key"), long_key}) {
      ASSERT_TRUE(m.put(k, "v0"));
      ASSERT_FALSE(m.put(k, "v1"));
      ASSERT_FALSE(m.put(k, "v2"));
    }
    sim::mark_all_durable();
  }
  const auto recovered = reopen_run_and_crash<Map>(path.str(), [&](Map& m) {
    EXPECT_EQ(m.recovery_stats().duplicate_keys, 2u);  // v1 of each key
    EXPECT_FALSE(m.put("key", "v3"));
    EXPECT_FALSE(m.put(long_key, "v3"));
    EXPECT_FALSE(m.put(long_key, "v4"));
  });
  EXPECT_EQ(recovered, (std::map<std::string, std::string>{{"key", "v3"}, {long_key, "v4"}}))
      << "a replacement after recovery lost to the version recovery kept";
}

}  // namespace
