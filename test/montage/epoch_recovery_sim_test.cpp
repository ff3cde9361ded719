// labels: memory
// nbMontage's recovery (§3.4) under the simulated backend: a block recovery does not keep is
// reset (its epoch word zeroed) so that no later recovery keeps it, and those resets must be
// durable before recovery returns. An anti-node too recent to count at the crash still names a
// payload that recovery keeps; were its reset to stay pending on the recovering thread while
// other threads move the clock twice, a second crash would find it old enough, and it would
// cancel that payload. The crash lab cannot build this: its continuations run on the recovering
// thread, whose first fence completes the resets, and it has no advancer beside them.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <thread>
#include <vector>

#include "montage/montage_test_support.hpp"
#include "pmds/montage/epoch_system.hpp"
#include "pmds/pm/pool.hpp"
#include "support/crash_image.hpp"
#include "support/temp_path.hpp"

namespace pm = pmds::pm;
namespace sim = pmds::pm::sim;
using pmds::montage::Block;
using pmds::montage::EpochSystem;

namespace {

struct Payload : Block {
  pm::atomic<std::uint64_t> value;
};

constexpr const char* kName = "test/montage-recovery";

class EpochRecoverySim : public ::testing::Test {
 protected:
  // The pool at `path` opened, its system recovered: the payloads it kept.
  static std::vector<Block*> reopen(const std::string& path) {
    pm::Pool pool = pm::Pool::open(path, kName);
    EpochSystem<> system(pmds::open_existing, pool, reinterpret_cast<void*>(pool.root(0).load()),
                         montage_test::manual_clock());
    return system.recover().payloads;
  }
  // Names `system`'s area in the pool's root, durably, as a structure over it would.
  static void name_area(pm::Pool& pool, EpochSystem<>& system) {
    pool.root(0).store(reinterpret_cast<std::uint64_t>(system.area()));
    pm::persist(&pool.root(0), sizeof(std::uint64_t));
  }
  // An insert of a payload into `word` (empty), committed: the payload.
  static Payload* insert(EpochSystem<>& system, std::atomic<std::uint64_t>& word,
                         std::uint64_t value) {
    auto* p = system.pnew<Payload>();
    p->value.store(value);
    EXPECT_TRUE(system.lin_cas(word, 0, reinterpret_cast<std::uint64_t>(p)));
    return p;
  }
  pmds::test::ClwbFlushes clwb_;  // the model, not the host
  pmds::test::TempPath path_{"montage_recovery"};
  pmds::test::TempPath image_{"montage_recovery_image"};
};

TEST_F(EpochRecoverySim, ResetsARecentAntiNodeDurablyBeforeItReturns) {
  const Block* kept = nullptr;
  {
    pm::Pool pool = pm::Pool::create(path_, 4u << 20, kName);
    EpochSystem<> system(pmds::create_new, pool, montage_test::manual_clock());
    name_area(pool, system);
    std::atomic<std::uint64_t> word{0};
    Payload* p = insert(system, word, 1);
    system.sync();  // p is old enough to survive any later crash
    kept = p;
    // The remove: its anti-node is tagged with the current epoch, and the crash comes before
    // that epoch is two behind the clock. Every store kept, as after kill -9.
    system.pdetach(p);
    ASSERT_TRUE(system.lin_cas(word, reinterpret_cast<std::uint64_t>(p), 0));
    ASSERT_NO_FATAL_FAILURE(pmds::test::write_crash_image(sim::snapshot(), pool.base(), path_,
                                                          sim::ImageKind::maximum));
  }
  {
    pm::Pool pool = pm::Pool::open(path_, kName);
    EpochSystem<> system(pmds::open_existing, pool, reinterpret_cast<void*>(pool.root(0).load()),
                         montage_test::manual_clock());
    const std::vector<Block*> payloads = system.recover().payloads;
    ASSERT_EQ(payloads.size(), 1u) << "the recent remove counted, or the payload was lost";
    ASSERT_EQ(payloads[0], kept);
    // Another thread commits an insert and moves the clock twice; this thread does nothing
    // more. Then a crash keeps only what is certainly durable.
    std::thread other([&system] {
      std::atomic<std::uint64_t> word{0};
      insert(system, word, 2);
      system.sync();
    });
    other.join();
    ASSERT_NO_FATAL_FAILURE(pmds::test::write_crash_image(sim::snapshot(), pool.base(), image_,
                                                          sim::ImageKind::minimum));
  }
  const std::vector<Block*> payloads = reopen(image_);
  ASSERT_EQ(payloads.size(), 2u) << "the old anti-node came back and canceled the kept payload";
  EXPECT_TRUE(payloads[0] == kept || payloads[1] == kept);
}

// sync() (nbMontage §3.1) returns once the clock is two advances past the epoch it started in,
// and that clock must be durable: another thread's advance may have moved it without having
// written it back yet (its CAS done, its persist not), and were sync() to return then, a crash
// would find the clock one advance behind, and recovery, which keeps the epochs up to two before
// the clock it finds, would lose what completed in sync()'s first epoch. Here a stalled advancer's
// advance comes right after this thread's first one (a crash handler does its write-back and its
// CAS at each event of sync() in turn, once the clock has moved once), so sync() finds the clock
// at its target and stops; a crash right after it keeps only what is certainly durable.
TEST_F(EpochRecoverySim, SyncReturnsOnlyOnceTheClockItWaitedForIsDurable) {
  int stalled_runs = 0;
  for (std::uint64_t event = 1; event <= 40; ++event) {
    SCOPED_TRACE("handler at sync()'s event " + std::to_string(event));
    const Block* kept = nullptr;
    std::filesystem::remove(path_.str());
    {
      pm::Pool pool = pm::Pool::create(path_, 4u << 20, kName);
      EpochSystem<> system(pmds::create_new, pool, montage_test::manual_clock());
      name_area(pool, system);
      std::atomic<std::uint64_t> word{0};
      Payload* p = insert(system, word, 1);
      kept = p;
      auto& area = *static_cast<pmds::montage::SystemArea*>(system.area());
      auto& clock = area.epoch;
      const std::uint64_t start = clock.load();
      bool stalled = false;
      // The other advancer, from start + 1: it writes back what the epoch before committed (p
      // and this thread's descriptor, advance()'s for_each_below), then its CAS; its persist
      // after the CAS never comes.
      sim::set_crash_handler(sim::event_count() + event, [&] {
        if (clock.load() != start + 1) return;
        pm::persist(p, sizeof(Payload));
        pm::persist(&area.descriptors[pmds::thread_id()], sizeof(area.descriptors[0]));
        std::uint64_t moved_once = start + 1;
        stalled = clock.compare_exchange_strong(moved_once, start + 2);
      });
      system.sync();
      sim::clear_crash_handler();
      if (!stalled || clock.load() != start + 2) continue;  // not the window
      ++stalled_runs;
      ASSERT_NO_FATAL_FAILURE(pmds::test::write_crash_image(sim::snapshot(), pool.base(), image_,
                                                            sim::ImageKind::minimum));
    }
    const std::vector<Block*> payloads = reopen(image_);
    ASSERT_EQ(payloads.size(), 1u) << "an insert that completed before sync() was lost";
    EXPECT_EQ(payloads[0], kept);
  }
  EXPECT_GT(stalled_runs, 0) << "no run stalled an advance inside sync(): a vacuous test";
}

// An advance persists the clock before its CAS (nbMontage §3.6 as epoch_system.hpp's advance()
// does it), so that a crash finds the clock at most one advance behind the epoch a thread read:
// each advance's own persist after its CAS may be stalled, but then the next advance's persist
// before its CAS writes the stalled one back. Here two advances stall after their CAS: the
// first is another advancer's (its CAS done by hand, from e to e+1), the second this thread's
// advance() (e+1 to e+2), with a crash at its persist after the CAS. An insert committed in
// epoch e-1 is within nbMontage's bound (Theorem 2: epochs <= e+2-2 survive); were the clock
// found at e, recovery, which keeps the epochs up to two before the clock it finds, would drop
// it. The lab's workloads run one advancer, so no two advances are ever stalled at once there.
TEST_F(EpochRecoverySim, TwoStalledAdvancesLeaveTheClockAtMostOneBehind) {
  int stalled_runs = 0;
  for (std::uint64_t event = 1; event <= 40; ++event) {
    SCOPED_TRACE("handler at advance()'s event " + std::to_string(event));
    const Block* kept = nullptr;
    std::uint64_t e = 0;
    std::filesystem::remove(path_.str());
    {
      pm::Pool pool = pm::Pool::create(path_, 4u << 20, kName);
      EpochSystem<> system(pmds::create_new, pool, montage_test::manual_clock());
      name_area(pool, system);
      auto& clock = static_cast<pmds::montage::SystemArea*>(system.area())->epoch;
      std::atomic<std::uint64_t> first{0}, second{0};
      kept = insert(system, first, 1);  // committed in e-1
      ASSERT_TRUE(system.advance());
      e = clock.load();
      insert(system, second, 2);  // committed in e: the next advances may move the clock
      // The other advancer: nothing of e-1 left to write back (this thread's insert in e did
      // it), its persist of e before its CAS already done by the advance above; its CAS, then
      // its persist after the CAS never comes.
      std::uint64_t expected = e;
      ASSERT_TRUE(clock.compare_exchange_strong(expected, e + 1));
      bool stalled = false;
      sim::set_crash_handler(sim::event_count() + event, [&] {
        if (clock.load() != e + 2) return;  // this advance's CAS not done yet
        stalled = true;
        pmds::test::write_crash_image(sim::snapshot(), pool.base(), image_,
                                      sim::ImageKind::minimum);
      });
      ASSERT_TRUE(system.advance());
      sim::clear_crash_handler();
      if (!stalled) continue;  // not the window: this advance's persist after its CAS
      ++stalled_runs;
    }
    pm::Pool pool = pm::Pool::open(image_, kName);
    EpochSystem<> system(pmds::open_existing, pool, reinterpret_cast<void*>(pool.root(0).load()),
                         montage_test::manual_clock());
    const auto recovered = system.recover();
    EXPECT_GE(recovered.stats.crash_epoch, e + 1)
        << "recovery found the clock two advances behind the " << e + 2 << " of the crash";
    ASSERT_EQ(recovered.payloads.size(), 1u) << "the insert committed in epoch e-1 was lost";
    EXPECT_EQ(recovered.payloads[0], kept);
  }
  EXPECT_EQ(stalled_runs, 1) << "the crash did not come once right after the advance's CAS";
}

}  // namespace
