// labels: memory
// incll::EpochLink (InCLL §5.1): the link and its log in 16 bytes. Every state a crash can
// leave — no word of an epoch's first write persisted, next_log alone, both — reads back as the
// link at the start of a failed epoch, and as the last value written otherwise; a link left torn
// or failed by one crash is right after its next write.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "pmds/incll/epoch_link.hpp"

namespace {

using pmds::incll::EpochLink;

alignas(16) char blocks[4][16];
void* const a = blocks[0];
void* const b = blocks[1];
void* const c = blocks[2];

// A link's two words as another link's (pm::atomic is not copyable).
void copy(const EpochLink& from, EpochLink& to) {
  to.next.store(from.next.load());
  to.next_log.store(from.next_log.load());
}

// The first write of epoch `e` (of `value`) stores next_log, then next: `after` is `link` with
// both persisted, and `link` becomes the state with next_log alone.
void tear_first_write(EpochLink& link, void* value, std::uint64_t e, EpochLink& after) {
  copy(link, after);
  after.write(value, e, [](std::uint32_t) { return false; });
  link.next_log.store(after.next_log.load());
}

// The failed epochs of a test (32-bit, as EpochLink compares them).
struct Failed {
  std::set<std::uint32_t> epochs;
  bool operator()(std::uint32_t e) const { return epochs.count(e) != 0; }
};

TEST(EpochLink, ReadsWhatWasWrittenWhenNoEpochFailed) {
  EpochLink l;
  l.init(a);
  Failed none;
  EXPECT_EQ(l.read(none), a);
  EXPECT_FALSE(l.written_in(5));
  l.write(b, 5, none);
  EXPECT_EQ(l.read(none), b);
  EXPECT_TRUE(l.written_in(5));
  EXPECT_FALSE(l.written_in(6));
  l.write(c, 5, none);  // same epoch: next alone
  EXPECT_EQ(l.read(none), c);
  l.write(nullptr, 6, none);
  EXPECT_EQ(l.read(none), nullptr);
}

TEST(EpochLink, AFailedEpochReadsAsItsStart) {
  EpochLink l;
  l.init(a);
  Failed none;
  l.write(b, 5, none);  // epoch 5 completes with b
  l.write(c, 6, none);  // epoch 6 writes twice, then fails
  l.write(a, 6, none);
  EXPECT_EQ(l.read(Failed{{6}}), b);
  EXPECT_EQ(l.read(none), a);
}

TEST(EpochLink, EachPrefixOfAFirstWriteReadsAsTheEpochsStart) {
  Failed none;
  EpochLink before;
  before.init(a);
  before.write(b, 5, none);
  // A crash keeps a prefix of epoch 6's first write: nothing, next_log alone, or both.
  EpochLink torn;
  EpochLink after;
  copy(before, torn);
  tear_first_write(torn, c, 6, after);
  const Failed six{{6}};
  EXPECT_EQ(before.read(six), b);    // nothing persisted
  EXPECT_EQ(torn.read(six), b);      // next_log alone: the counters differ
  EXPECT_EQ(torn.read(none), b);     // ... whether or not the record names the epoch
  EXPECT_FALSE(torn.written_in(6));  // (a write in 6 logs again)
  EXPECT_EQ(after.read(six), b);     // both: the epoch failed
  EXPECT_EQ(after.read(none), c);    // both, epoch 6 completed
}

TEST(EpochLink, AWriteAfterAFailedEpochLogsTheRecoveredValue) {
  Failed none;
  EpochLink l;
  l.init(a);
  l.write(b, 5, none);
  l.write(c, 6, none);  // epoch 6 fails: the link is b
  const Failed six{{6}};
  l.write(a, 8, six);  // epoch 8, after recovery
  EXPECT_EQ(l.read(six), a);
  EXPECT_EQ(l.read(Failed{{6, 8}}), b);  // a crash in 8 rolls back to b, not to c
}

TEST(EpochLink, AWriteAfterATornOneLogsTheRecoveredValue) {
  Failed none;
  EpochLink torn;
  torn.init(a);
  torn.write(b, 5, none);
  EpochLink after;
  tear_first_write(torn, c, 6, after);  // epoch 6 crashed with next_log alone persisted
  const Failed six{{6}};
  torn.write(a, 8, six);
  EXPECT_EQ(torn.read(six), a);
  EXPECT_EQ(torn.read(Failed{{6, 8}}), b);
  torn.write(c, 8, six);  // a second write in 8 keeps 8's start
  EXPECT_EQ(torn.read(Failed{{6, 8}}), b);
  EXPECT_EQ(torn.read(six), c);
}

TEST(EpochLink, EpochsUseAll32BitsAcrossBothHalves) {
  Failed none;
  EpochLink l;
  l.init(a);
  const std::uint64_t e = 0x1'2345'6789;  // its low 32 bits: 0x23456789
  l.write(b, e, none);
  l.write(c, e + 1, none);
  EXPECT_EQ(EpochLink::epoch_of(l.next.load(), l.next_log.load()), 0x2345678au);
  EXPECT_EQ(l.read(Failed{{0x2345678a}}), b);
  EXPECT_EQ(l.read(Failed{{0x23456789, 0x6789678a}}), c);  // halves of other epochs
}

// The list from its head, as recovery with `failed` reads it.
std::vector<void*> list(const EpochLink& head, const Failed& failed) {
  std::vector<void*> out;
  for (auto* p = static_cast<EpochLink*>(head.read(failed)); p != nullptr && out.size() < 8;
       p = static_cast<EpochLink*>(p->read(failed)))
    out.push_back(p);
  return out;
}

TEST(EpochFreeList, AFailedEpochsPushesAndPopsAreUndone) {
  alignas(16) EpochLink head, x, y, z;
  for (EpochLink* l : {&head, &x, &y, &z}) l->init();
  pmds::incll::EpochFreeList free_list(head);
  Failed none;
  free_list.push(&x, 2, none);
  free_list.push(&y, 2, none);  // epoch 2 ends with y, x
  EXPECT_EQ(free_list.pop(3, none), &y);
  EXPECT_EQ(free_list.pop(3, none), &x);
  free_list.push(&z, 3, none);
  free_list.push(&y, 3, none);  // y's link changes while y is on epoch 3's starting list
  EXPECT_EQ(list(head, none), (std::vector<void*>{&y, &z}));
  const Failed three{{3}};
  EXPECT_EQ(list(head, three), (std::vector<void*>{&y, &x}));
  // After recovery (epoch 5), the list goes on from epoch 3's start.
  EXPECT_EQ(free_list.pop(5, three), &y);
  free_list.push(&z, 5, three);
  EXPECT_EQ(list(head, three), (std::vector<void*>{&z, &x}));
  EXPECT_EQ(list(head, Failed{{3, 5}}), (std::vector<void*>{&y, &x}));
  EXPECT_EQ(free_list.pop(5, three), &z);
  EXPECT_EQ(free_list.pop(5, three), &x);
  EXPECT_EQ(free_list.pop(5, three), nullptr);
}

TEST(EpochLink, StorableIsSixteenAlignedBelowTwoToThe48) {
  EXPECT_TRUE(EpochLink::storable(nullptr));
  EXPECT_TRUE(EpochLink::storable(a));
  EXPECT_FALSE(EpochLink::storable(blocks[0] + 8));
  EXPECT_FALSE(EpochLink::storable(reinterpret_cast<void*>(std::uintptr_t{1} << 48)));
}

}  // namespace
