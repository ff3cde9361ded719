// The Izraelevitz transformation, counted (counting backend): every shared load, store and CAS
// of the list is followed by exactly one flush and one fence, a new node's contents cost one
// flush per cache line before its link, and nothing else flushes or fences. The expected
// counts below are derived from the algorithm (how many shared words each operation reads and
// writes on a quiescent list of keys 2, 4, ..., 2n), not measured. Also: the transient policy
// with pm::atomic words flushes and fences nothing, and each planted bug removes exactly the
// flush or fence it is named after.
#include <gtest/gtest.h>

#include "algo/algo_test_support.hpp"
#include "pmds/algo/harris_michael_list.hpp"
#include "pmds/algo/ms_queue.hpp"
#include "pmds/algo/treiber_stack.hpp"

namespace pmds::algo {
namespace {

using namespace testing;

static_assert(pm::backend == pm::Backend::counting);

constexpr Key n = 40;

template <class F>
pm::Counters count(F&& f) {
  const pm::Counters before = pm::thread_counters();
  f();
  return pm::thread_counters() - before;
}

template <class List>
void fill_even(List& list) {
  for (Key k = 2; k <= 2 * n; k += 2) ASSERT_TRUE(list.insert(k, value_of(k)));
}

// Shared loads of a traversal up to key 2j of the list 2, 4, ..., 2n: the head link, then key
// and next of each of the j-1 smaller nodes, then the key of node 2j (and its next link, to
// see whether it is marked, when searching for 2j itself, or always in find()).
constexpr std::uint64_t search_present(Key j) {
  return 1 + 2 * (j - 1) + 2;
}
constexpr std::uint64_t search_absent(Key j) {  // searching 2j-1: stops at 2j after its key
  return 1 + 2 * (j - 1) + 1;
}
constexpr std::uint64_t find_loads(Key j) {  // find() reads next before key at every node
  return 1 + 2 * (j - 1) + 2;
}

TEST(IzraelevitzCounts, ListFlushesAndFencesPerSharedAccess) {
  Instance<HarrisMichaelList<izraelevitz>> list;
  fill_even(*list);  // also claims this thread's chunks: no allocator flushes below
  for (Key j : {Key{1}, Key{7}, Key{20}, n}) {
    SCOPED_TRACE(j);
    pm::Counters c = count([&] { EXPECT_TRUE(list->contains(2 * j)); });
    EXPECT_EQ(c.flushes, search_present(j));
    EXPECT_EQ(c.fences, search_present(j));
    EXPECT_EQ(c.rmws, 0u);

    c = count([&] { EXPECT_FALSE(list->contains(2 * j - 1)); });
    EXPECT_EQ(c.flushes, search_absent(j));
    EXPECT_EQ(c.fences, search_absent(j));

    c = count([&] { EXPECT_EQ(list->get(2 * j), std::optional<Value>(value_of(2 * j))); });
    EXPECT_EQ(c.flushes, search_present(j) + 1);  // + the value
    EXPECT_EQ(c.fences, search_present(j) + 1);

    c = count([&] { EXPECT_FALSE(list->insert(2 * j, 1)); });  // present: find only
    EXPECT_EQ(c.flushes, find_loads(j));
    EXPECT_EQ(c.fences, find_loads(j));
    EXPECT_EQ(c.rmws, 0u);

    // insert: find's loads, one flush for the new node (24 bytes in a 32-byte slot: one
    // line; no fence: the linking CAS orders it), then the CAS, flushed and fenced.
    c = count([&] { EXPECT_TRUE(list->insert(2 * j - 1, 1)); });
    EXPECT_EQ(c.flushes, find_loads(j) + 1 + 1);
    EXPECT_EQ(c.fences, find_loads(j) + 1);
    EXPECT_EQ(c.rmws, 1u);

    // remove 2j-1 (now present, just before 2j): find, the victim's next, the marking CAS,
    // the unlinking CAS.
    c = count([&] { EXPECT_TRUE(list->remove(2 * j - 1)); });
    EXPECT_EQ(c.flushes, find_loads(j) + 3);
    EXPECT_EQ(c.fences, find_loads(j) + 3);
    EXPECT_EQ(c.rmws, 2u);

    c = count([&] { EXPECT_FALSE(list->remove(2 * j - 1)); });
    EXPECT_EQ(c.flushes, find_loads(j));
    EXPECT_EQ(c.fences, find_loads(j));
  }
}

TEST(IzraelevitzCounts, TransientPmAtomicFlushesNothing) {
  HarrisMichaelList<transient_pm_atomic> list;
  fill_even(list);
  const pm::Counters c = count([&] {
    EXPECT_TRUE(list.contains(2 * n));
    EXPECT_TRUE(list.insert(3, 1));
    EXPECT_TRUE(list.remove(3));
  });
  EXPECT_EQ(c.flushes, 0u);
  EXPECT_EQ(c.fences, 0u);
  EXPECT_EQ(c.rmws, 3u);  // the link, the mark, the unlink: pm::atomic counts its RMWs
}

// Under eADR (PMDS_EADR=1: the flush instruction is none) a flush issues nothing, so it is not
// counted; the fences still are (they still order).
TEST(IzraelevitzCounts, UnderEadrFlushesAreNotCounted) {
  Instance<HarrisMichaelList<izraelevitz>> list;
  fill_even(*list);
  const pm::FlushInstruction saved = pm::detail::flush_instruction;
  pm::detail::flush_instruction = pm::FlushInstruction::none;
  const pm::Counters c = count([&] { EXPECT_TRUE(list->contains(2 * 7)); });
  pm::detail::flush_instruction = saved;
  EXPECT_EQ(c.flushes, 0u);
  EXPECT_EQ(c.fences, search_present(7));
}

// Each planted bug changes the counts of an insert exactly where it says.
template <Fault F>
pm::Counters insert_counts() {
  Instance<HarrisMichaelList<IzraelevitzPolicy<Planted<F>>>> list;
  fill_even(*list);
  return count([&] { EXPECT_TRUE(list->insert(2 * 10 - 1, 1)); });
}

TEST(IzraelevitzCounts, PlantedBugsRemoveTheirFlushOrFence) {
  const pm::Counters none = insert_counts<Fault::none>();
  EXPECT_EQ(none.flushes, find_loads(10) + 2);
  EXPECT_EQ(none.fences, find_loads(10) + 1);
  const pm::Counters a = insert_counts<Fault::link_not_flushed>();
  EXPECT_EQ(a.flushes, none.flushes - 1);
  EXPECT_EQ(a.fences, none.fences - 1);
  const pm::Counters b = insert_counts<Fault::link_not_fenced>();
  EXPECT_EQ(b.flushes, none.flushes);
  EXPECT_EQ(b.fences, none.fences - 1);
  const pm::Counters c = insert_counts<Fault::contents_not_flushed>();
  EXPECT_EQ(c.flushes, none.flushes - 1);
  EXPECT_EQ(c.fences, none.fences);
  const pm::Counters d = insert_counts<Fault::recovery_drops_node>();
  EXPECT_EQ(d.flushes, none.flushes);  // (d) only acts in recovery
  EXPECT_EQ(d.fences, none.fences);
}

TEST(IzraelevitzCounts, QueueAndStack) {
  Instance<MichaelScottQueue<izraelevitz>> q;
  for (Value v = 0; v < 10; ++v) q->enqueue(v);
  // enqueue: tail, last.next, the link CAS, the tail CAS; plus one flush of the new node.
  pm::Counters c = count([&] { q->enqueue(10); });
  EXPECT_EQ(c.flushes, 4u + 1);
  EXPECT_EQ(c.fences, 4u);
  EXPECT_EQ(c.rmws, 2u);
  // dequeue: head, tail, first.next, the value, the head CAS.
  c = count([&] { EXPECT_EQ(q->dequeue(), std::optional<Value>(0)); });
  EXPECT_EQ(c.flushes, 5u);
  EXPECT_EQ(c.fences, 5u);
  EXPECT_EQ(c.rmws, 1u);

  Instance<TreiberStack<izraelevitz>> s;
  for (Value v = 0; v < 10; ++v) s->push(v);
  // push: top, the CAS; plus one flush of the new node.
  c = count([&] { s->push(10); });
  EXPECT_EQ(c.flushes, 2u + 1);
  EXPECT_EQ(c.fences, 2u);
  // pop: top, top.next, the CAS, the value.
  c = count([&] { EXPECT_EQ(s->pop(), std::optional<Value>(10)); });
  EXPECT_EQ(c.flushes, 4u);
  EXPECT_EQ(c.fences, 4u);
  EXPECT_EQ(c.rmws, 1u);
}

}  // namespace
}  // namespace pmds::algo
