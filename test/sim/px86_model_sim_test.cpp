// labels: concurrent memory
// The Px86 simulator's model (docs/ARCHITECTURE.md §3): known store/flush/fence/RMW sequences on an
// attached buffer, each checked against the EXACT set of reachable crash images (exhaustive
// enumeration).
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sim/sim_fixture.hpp"

namespace {

using simtest::Words;
namespace pm = pmds::pm;
namespace sim = pmds::pm::sim;

class Px86 : public simtest::SimTest {};

TEST_F(Px86, UnflushedStoreMayOrMayNotPersist) {
  w(0).store(1);
  EXPECT_EQ(reachable({0}), (std::set<Words>{{0}, {1}}));
  EXPECT_EQ(sim::snapshot().image_count(), 2.0);
}

TEST_F(Px86, StoresToOneLinePersistOnlyAsPrefixes) {
  // Same word: every prefix of 1, 2, 3.
  w(0).store(1);
  w(0).store(2);
  w(0).store(3);
  EXPECT_EQ(reachable({0}), (std::set<Words>{{0}, {1}, {2}, {3}}));
  // Two words of one line: y persisting without x (0, 1) is not reachable.
  w(8).store(1);
  w(9).store(1);
  EXPECT_EQ(reachable({8, 9}), (std::set<Words>{{0, 0}, {1, 0}, {1, 1}}));
}

TEST_F(Px86, ClwbThenSfencePersists) {
  w(0).store(1);
  clwb(0);
  sim::fence();
  EXPECT_EQ(reachable({0}), (std::set<Words>{{1}}));
  EXPECT_EQ(sim::snapshot().undetermined_lines(), 0u);
  EXPECT_EQ(sim::stats().pending_flushes, 0u);
}

TEST_F(Px86, ClwbWithoutFenceMayOrMayNotPersist) {
  w(0).store(1);
  clwb(0);
  EXPECT_EQ(reachable({0}), (std::set<Words>{{0}, {1}}));
  EXPECT_EQ(sim::stats().pending_flushes, 1u);
  // clflushopt behaves as clwb.
  w(8).store(1);
  sim::flush(&w(8), pm::FlushInstruction::clflushopt);
  EXPECT_EQ(reachable({0, 8}), (std::set<Words>{{0, 0}, {0, 1}, {1, 0}, {1, 1}}));
  sim::fence();
  EXPECT_EQ(reachable({0, 8}), (std::set<Words>{{1, 1}}));
}

TEST_F(Px86, ClflushPersistsWithoutFence) {
  w(0).store(1);
  const std::uint64_t before = sim::event_count();
  sim::flush(&w(0), pm::FlushInstruction::clflush);
  EXPECT_EQ(sim::event_count(), before + 1) << "clflush is a crash-point event";
  EXPECT_EQ(reachable({0}), (std::set<Words>{{1}}));
}

// Each kind of locked RMW, on another line, makes this thread's pending flushes durable.
TEST_F(Px86, LockedRmwOfTheSameThreadDrainsPendingFlushes) {
  const std::vector<std::function<void(pm::atomic<std::uint64_t>&)>> rmws = {
      [](auto& z) {
        std::uint64_t e = z.load();
        EXPECT_TRUE(z.compare_exchange_strong(e, e + 1));
      },
      [](auto& z) {
        std::uint64_t e = z.load() + 100;  // fails: a failed CAS is still a locked instruction
        EXPECT_FALSE(z.compare_exchange_strong(e, 7));
      },
      [](auto& z) { z.exchange(5); },
      [](auto& z) { z.fetch_add(1); },
      [](auto& z) { z.fetch_sub(1); },
  };
  std::uint64_t value = 0;
  for (const auto& rmw : rmws) {
    ++value;
    w(0).store(value);
    clwb(0);
    EXPECT_EQ(reachable({0}), (std::set<Words>{{value - 1}, {value}}));
    const std::uint64_t before = sim::event_count();
    rmw(w(16));
    EXPECT_EQ(sim::event_count(), before + 1) << "an RMW is one crash-point event";
    EXPECT_EQ(reachable({0}), (std::set<Words>{{value}})) << "rmw kind " << value;
  }
}

TEST_F(Px86, FenceOrRmwByAnotherThreadDoesNotDrain) {
  w(0).store(1);
  clwb(0);
  std::thread([&] {
    sim::fence();
    w(16).fetch_add(1);
  }).join();
  EXPECT_EQ(reachable({0}), (std::set<Words>{{0}, {1}}));
  sim::fence();
  EXPECT_EQ(reachable({0}), (std::set<Words>{{1}}));
}

TEST_F(Px86, ThreadExitDropsItsPendingFlushes) {
  std::thread([&] {
    w(0).store(1);
    clwb(0);
  }).join();
  sim::fence();  // a fence by a later thread (possibly reusing the same thread id) is unrelated
  EXPECT_EQ(reachable({0}), (std::set<Words>{{0}, {1}}));
}

TEST_F(Px86, LinesAreIndependent) {
  w(0).store(1);
  w(8).store(1);
  EXPECT_EQ(reachable({0, 8}), (std::set<Words>{{0, 0}, {0, 1}, {1, 0}, {1, 1}}));
  w(0).store(2);
  EXPECT_EQ(sim::snapshot().image_count(), 6.0);  // (2 stores + 1) x (1 store + 1)
  EXPECT_EQ(reachable({0, 8}).size(), 6u);
}

TEST_F(Px86, StoreAfterClwbIsNotCoveredByIt) {
  w(0).store(1);
  clwb(0);
  w(0).store(2);
  w(1).store(3);
  sim::fence();
  EXPECT_EQ(reachable({0, 1}), (std::set<Words>{{1, 0}, {2, 0}, {2, 3}}));
  clwb(1);
  sim::fence();
  EXPECT_EQ(reachable({0, 1}), (std::set<Words>{{2, 3}}));
}

TEST_F(Px86, FlushOfAnotherLineDoesNotCover) {
  w(0).store(1);
  clwb(8);
  sim::fence();
  EXPECT_EQ(reachable({0}), (std::set<Words>{{0}, {1}}));
}

TEST_F(Px86, NonTemporalStoreIsDurableAfterTheFence) {
  const std::uint64_t one = 1;
  pm::write_nontemporal(&w(0), &one, 8);
  EXPECT_EQ(reachable({0}), (std::set<Words>{{0}, {1}}));
  sim::fence();
  EXPECT_EQ(reachable({0}), (std::set<Words>{{1}}));
  // Spanning two lines: both halves become durable at the fence.
  const std::uint64_t two[2] = {2, 2};
  pm::write_nontemporal(&w(15), two, 16);
  EXPECT_EQ(reachable({15, 16}), (std::set<Words>{{0, 0}, {0, 2}, {2, 0}, {2, 2}}));
  w(24).fetch_add(1);  // an RMW drains non-temporal stores too
  EXPECT_EQ(reachable({15, 16}), (std::set<Words>{{2, 2}}));
}

TEST_F(Px86, StoreSpanningTwoLinesIsSplitPerLine) {
  unsigned char bytes[16];
  std::memset(bytes, 0xAB, sizeof bytes);
  pm::write(&buf_[60], bytes, sizeof bytes);  // bytes 60..63 of line 0, 0..11 of line 1
  const sim::Snapshot s = sim::snapshot();
  EXPECT_EQ(s.undetermined_lines(), 2u);
  // std::string as a byte container (GCC 12 warns falsely on std::set of byte vectors).
  std::set<std::string> torn;
  s.for_each_choice(100, [&](const sim::Choice& c) {
    const auto img = s.image(region_of(s), c);
    torn.insert(std::string(img.begin() + 60, img.begin() + 76));
  });
  const std::string none(16, '\0'), all(16, '\xAB');
  const std::string first = all.substr(0, 4) + none.substr(0, 12);   // line 0 part persisted
  const std::string second = none.substr(0, 4) + all.substr(0, 12);  // line 1 part persisted
  EXPECT_EQ(torn, (std::set<std::string>{none, all, first, second}));
}

TEST_F(Px86, LoadsChangeNothingAndAreNotEvents) {
  w(0).store(1);
  const std::uint64_t before = sim::event_count();
  EXPECT_EQ(w(0).load(), 1u);
  clwb(0);  // clwb is not an event either
  w(1).store(2);
  EXPECT_EQ(sim::event_count(), before);
  EXPECT_EQ(reachable({0, 1}), (std::set<Words>{{0, 0}, {1, 0}, {1, 2}}));
}

TEST_F(Px86, SixteenByteCasIsOneStore) {
  struct Pair {
    std::uint64_t value, sequence;
  };
  auto& p = *reinterpret_cast<pm::atomic<Pair>*>(&w(2));  // 16-byte aligned, in line 0
  Pair expected{0, 0};
  EXPECT_TRUE(p.compare_exchange_strong(expected, Pair{7, 8}));
  EXPECT_EQ(reachable({2, 3}), (std::set<Words>{{0, 0}, {7, 8}}));
  sim::flush(&p, pm::FlushInstruction::clwb);
  expected = Pair{1, 1};
  EXPECT_FALSE(p.compare_exchange_strong(expected, Pair{9, 9}));  // drains the clwb
  EXPECT_EQ(expected.value, 7u);
  EXPECT_EQ(reachable({2, 3}), (std::set<Words>{{7, 8}}));
}

TEST_F(Px86, AttachTakesCurrentContentAsDurable) {
  sim::detach(buf_);
  std::uint64_t v = 42;
  std::memcpy(&buf_[0], &v, 8);  // before attach, plain writes are allowed
  sim::attach(buf_, sizeof buf_);
  w(0).store(43);
  EXPECT_EQ(reachable({0}), (std::set<Words>{{42}, {43}}));
}

TEST_F(Px86, UnattachedMemoryIsNotRecorded) {
  alignas(64) static pm::atomic<std::uint64_t> outside{0};
  const auto before = sim::stats().recorded_stores;
  outside.store(5);
  EXPECT_EQ(outside.load(), 5u);
  EXPECT_EQ(sim::stats().recorded_stores, before);
  EXPECT_FALSE(sim::attached(&outside));
  EXPECT_TRUE(sim::attached(&w(3)));
}

TEST_F(Px86, FloorFoldsHistorySoMemoryStaysBounded) {
  for (std::uint64_t i = 1; i <= 1000; ++i) {
    w(0).store(i);
    w(8).store(i);
    clwb(0);
    clwb(8);
    sim::fence();
  }
  const sim::Stats st = sim::stats();
  EXPECT_EQ(st.undetermined_lines, 0u);
  EXPECT_EQ(st.undetermined_stores, 0u);
  // A partial fold keeps only the stores above the floor.
  w(0).store(2000);
  clwb(0);
  w(0).store(2001);
  sim::fence();
  EXPECT_EQ(sim::stats().undetermined_stores, 1u);
  EXPECT_EQ(reachable({0}), (std::set<Words>{{2000}, {2001}}));
}

TEST_F(Px86, MinimumMaximumAndRandomImages) {
  w(0).store(1);
  w(0).store(2);
  clwb(0);
  sim::fence();
  w(0).store(3);  // line 0: floor at 2, may be 2 or 3
  w(8).store(1);
  w(8).store(2);  // line 1: 0, 1 or 2
  w(16).store(9);
  clwb(16);
  sim::fence();  // line 2: durable 9
  const std::vector<std::size_t> idx = {0, 8, 16};
  const sim::Snapshot s = sim::snapshot();
  EXPECT_EQ(s.image_count(), 6.0);
  EXPECT_EQ(words_of(s, s.choice(sim::ImageKind::minimum), idx), (Words{2, 0, 9}));
  EXPECT_EQ(words_of(s, s.choice(sim::ImageKind::maximum), idx), (Words{3, 2, 9}));
  EXPECT_EQ(words_of(s, s.choice(sim::ImageKind::maximum), idx), live(idx));

  const std::set<Words> all = reachable(idx);
  std::set<Words> drawn;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    const Words img = words_of(s, s.choice(sim::ImageKind::random, seed), idx);
    EXPECT_TRUE(all.count(img)) << "random image outside the reachable set";
    EXPECT_EQ(img, words_of(s, s.choice(sim::ImageKind::random, seed), idx)) << "seeded";
    drawn.insert(img);
  }
  EXPECT_EQ(drawn, all) << "200 uniform draws over 6 images should reach them all";

  // write_image with a kind writes the same bytes as image() with that kind's choice.
  std::vector<unsigned char> out(s.region_size(region_of(s)));
  s.write_image(region_of(s), sim::ImageKind::random, 7, out.data());
  EXPECT_EQ(out, s.image(region_of(s), s.choice(sim::ImageKind::random, 7)));

  // The snapshot is self-contained: later stores do not change it.
  w(0).store(77);
  EXPECT_EQ(words_of(s, s.choice(sim::ImageKind::maximum), idx), (Words{3, 2, 9}));
}

TEST_F(Px86, EnumerationRespectsItsLimit) {
  for (std::size_t line = 0; line < simtest::kLines; ++line) {
    w(line * 8).store(1);
    w(line * 8).store(2);
  }
  const sim::Snapshot s = sim::snapshot();
  EXPECT_EQ(s.image_count(), 6561.0);  // 3^8
  int calls = 0;
  EXPECT_FALSE(s.for_each_choice(1000, [&](const sim::Choice&) { ++calls; }));
  EXPECT_EQ(calls, 0);
  EXPECT_TRUE(s.for_each_choice(1e4, [&](const sim::Choice&) { ++calls; }));
  EXPECT_EQ(calls, 6561);
  calls = 0;
  EXPECT_TRUE(s.for_each_choice(1e4, [&](const sim::Choice&) { return ++calls < 10; }));
  EXPECT_EQ(calls, 10);
}

TEST_F(Px86, EadrModeGivesOnlyTheMaximumImage) {
  w(0).store(1);  // recorded before eADR is switched on
  pm::detail::flush_instruction = pm::FlushInstruction::none;
  ASSERT_TRUE(pm::eadr());
  w(8).store(2);
  pm::flush(&w(8));  // a no-op under eADR, and not an event
  const sim::Snapshot s = sim::snapshot();
  EXPECT_TRUE(s.eadr());
  EXPECT_EQ(s.image_count(), 1.0);
  EXPECT_EQ(reachable({0, 8}), (std::set<Words>{{1, 2}}));
  EXPECT_EQ(words_of(s, s.choice(sim::ImageKind::minimum), {0, 8}), (Words{1, 2}));
}

TEST_F(Px86, MarkAllDurableForgetsHistoryAndPendingFlushes) {
  w(0).store(1);
  clwb(0);
  w(8).store(2);
  sim::mark_all_durable();
  EXPECT_EQ(sim::stats().pending_flushes, 0u);
  EXPECT_EQ(reachable({0, 8}), (std::set<Words>{{1, 2}}));
  w(0).store(3);
  sim::fence();  // the forgotten pending flush must not cover the new store
  EXPECT_EQ(reachable({0}), (std::set<Words>{{1}, {3}}));
}

TEST_F(Px86, DetachForgetsTheRegion) {
  w(0).store(1);
  clwb(0);
  sim::detach(buf_);
  EXPECT_FALSE(sim::attached(buf_));
  EXPECT_EQ(sim::snapshot().region_count(), 0u);
  EXPECT_EQ(sim::stats().pending_flushes, 0u);
  EXPECT_EQ(sim::stats().undetermined_lines, 0u);
  w(0).store(2);  // performed, not recorded
  EXPECT_EQ(w(0).load(), 2u);
  EXPECT_EQ(sim::stats().undetermined_lines, 0u);
  sim::attach(buf_, sizeof buf_);  // re-attached: the content now counts as durable
  EXPECT_EQ(reachable({0}), (std::set<Words>{{2}}));
}

TEST_F(Px86, BadRegionsAreTypedErrors) {
  EXPECT_THROW(sim::attach(buf_ + 8, 64), sim::SimulatorError);   // misaligned base
  EXPECT_THROW(sim::attach(buf_, 0), sim::SimulatorError);        // empty
  EXPECT_THROW(sim::attach(nullptr, 64), sim::SimulatorError);    // null
  EXPECT_THROW(sim::attach(buf_ + 64, 64), sim::SimulatorError);  // overlaps
  EXPECT_THROW(sim::detach(buf_ + 64), sim::SimulatorError);      // not a region start
  alignas(64) static unsigned char other[128];
  EXPECT_THROW(sim::attach(other, 100), sim::SimulatorError);  // size not whole lines
  const sim::Snapshot s = sim::snapshot();
  EXPECT_THROW(s.region_base(5), sim::SimulatorError);
  EXPECT_THROW(s.write_image(0, sim::Choice{1, 2, 3}, nullptr), sim::SimulatorError);
}

TEST_F(Px86, TwoRegionsShareOneChoice) {
  alignas(64) static unsigned char other[128];
  auto& v = *new (other) pm::atomic<std::uint64_t>(0);
  sim::attach(other, sizeof other);
  v.store(5);
  w(0).store(6);
  const sim::Snapshot s = sim::snapshot();
  EXPECT_EQ(s.region_count(), 2u);
  std::set<std::pair<std::uint64_t, std::uint64_t>> pairs;
  std::size_t other_region = s.region_base(0) == static_cast<void*>(other) ? 0 : 1;
  s.for_each_choice(100, [&](const sim::Choice& c) {
    std::uint64_t a, b;
    std::memcpy(&a, s.image(other_region, c).data(), 8);
    std::memcpy(&b, s.image(region_of(s), c).data(), 8);
    pairs.insert({a, b});
  });
  EXPECT_EQ(pairs,
            (std::set<std::pair<std::uint64_t, std::uint64_t>>{{0, 0}, {0, 6}, {5, 0}, {5, 6}}));
  sim::detach(other);
}

// The optional diagnostic: a thread storing after loading another thread's non-durable value.
TEST_F(Px86, WarnsWhenActingOnAValueNotYetDurable) {
  std::thread([&] { w(0).store(1); }).join();  // written by another thread, never flushed
  EXPECT_EQ(w(0).load(), 1u);
  w(8).store(1);  // acts on it while it is not durable
  EXPECT_EQ(sim::warning_count(), 1u);

  sim::reset_warning_count();
  EXPECT_EQ(w(0).load(), 1u);
  clwb(0);
  sim::fence();  // Izraelevitz et al.: flush what you read before acting on it
  w(8).store(2);
  EXPECT_EQ(sim::warning_count(), 0u);

  std::thread([&] { w(16).store(1); }).join();
  EXPECT_EQ(w(16).load(), 1u);
  w(17).store(1);  // same line: persists only after the value it depends on
  EXPECT_EQ(sim::warning_count(), 0u);

  w(24).store(1);  // own store, not flushed: program order, not a warning
  EXPECT_EQ(w(24).load(), 1u);
  w(32).store(1);
  EXPECT_EQ(sim::warning_count(), 0u);

  std::thread([&] { w(40).store(1); }).join();
  EXPECT_EQ(w(40).load(), 1u);
  clwb(40);
  w(48).fetch_add(1);  // the RMW drains the clwb before it acts
  EXPECT_EQ(sim::warning_count(), 0u);
}

}  // namespace
