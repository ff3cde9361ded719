// labels: memory
// nbMontage's DCSS decision against epoch advances, under the simulated backend: decide() reads
// the clock, then CASes its verdict into the descriptor. Here epoch advances run between the two
// (from the simulator's schedule hook, on the deciding thread itself), the window the crash lab
// found in hash/montage (a remove decided "committed" in an epoch the clock had left twice,
// lost after its sync() returned). The remove must then commit in the current epoch, and after
// its sync() it must survive a crash in which nothing that was not written back persists.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
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
using pmds::montage::SystemArea;

namespace {

struct Payload : Block {
  pm::atomic<std::uint64_t> value;
};

// The hook's state: the system, the status word whose CAS it waits for, and whether it fired.
EpochSystem<>* hooked_system = nullptr;
const void* hooked_status = nullptr;
bool hook_fired = false;
thread_local bool in_hook = false;

// Before the first CAS on the watched status word (decide's verdict): three epoch advances. Two
// move the clock; the third declines (no commit in the last two epochs, App. C) but, as every
// advance does, first writes back the lagging deciding thread and raises its announced epoch,
// so that no later advance looks at it again.
void advances_before_verdict(sim::Operation op, const void* addr) {
  if (in_hook || hook_fired || op != sim::Operation::rmw || addr != hooked_status) return;
  in_hook = true;
  hook_fired = true;
  for (int i = 0; i < 3; ++i) hooked_system->advance();
  in_hook = false;
}

class EpochDecisionSim : public ::testing::Test {
 protected:
  void TearDown() override { sim::set_schedule_hook(nullptr); }
  pmds::test::ClwbFlushes clwb_;  // the model, not the host
  pmds::test::TempPath path_{"montage_decision"};
  pmds::test::TempPath image_{"montage_decision_image"};
};

TEST_F(EpochDecisionSim, AVerdictReadBeforeTheClockMovedTwiceIsNotACommitInTheOldEpoch) {
  const Block* kept_payload = nullptr;
  {
    pm::Pool pool = pm::Pool::create(path_, 4u << 20, "test/montage-decision");
    EpochSystem<> system(pmds::create_new, pool, montage_test::manual_clock());
    void* area = system.area();
    pool.root(0).store(reinterpret_cast<std::uint64_t>(area));
    pm::persist(&pool.root(0), sizeof(std::uint64_t));

    // Two inserts, committed in the first epoch (no sync: an advance moves the clock only past
    // an epoch with a commit in it or the one before, App. C).
    std::atomic<std::uint64_t> removed{0}, kept{0};
    auto* p = system.pnew<Payload>();
    p->value.store(1);
    ASSERT_TRUE(system.lin_cas(removed, 0, reinterpret_cast<std::uint64_t>(p)));
    auto* q = system.pnew<Payload>();
    q->value.store(2);
    ASSERT_TRUE(system.lin_cas(kept, 0, reinterpret_cast<std::uint64_t>(q)));
    kept_payload = q;
    const std::uint64_t before = system.epoch();

    // The remove: its decision reads the clock, the clock moves twice, then its verdict.
    system.pdetach(p);
    hooked_system = &system;
    hooked_status = &static_cast<SystemArea*>(area)->descriptors[pmds::thread_id()].status;
    hook_fired = false;
    sim::set_schedule_hook(&advances_before_verdict);
    ASSERT_TRUE(system.lin_cas(removed, reinterpret_cast<std::uint64_t>(p), 0));
    sim::set_schedule_hook(nullptr);
    ASSERT_TRUE(hook_fired);
    EXPECT_EQ(system.epoch(), before + 2) << "two advances moved the clock, the third declined";

    // Everything that returned before sync() is durable when it returns (nbMontage §3.1).
    system.sync();
    ASSERT_NO_FATAL_FAILURE(pmds::test::write_crash_image(sim::snapshot(), pool.base(), image_,
                                                          sim::ImageKind::minimum));
  }
  pm::Pool pool = pm::Pool::open(image_, "test/montage-decision");
  EpochSystem<> system(pmds::open_existing, pool, reinterpret_cast<void*>(pool.root(0).load()),
                       montage_test::manual_clock());
  const std::vector<Block*> payloads = system.recover().payloads;
  ASSERT_EQ(payloads.size(), 1u)
      << "the removed payload came back (2), or the kept one is lost (0)";
  EXPECT_EQ(payloads[0], kept_payload);
}

}  // namespace
