// labels: concurrent memory
// PBcomb and PWFcomb (Fatourou et al.) and the register, stack, queue and heap built on them:
// sequential semantics against models, concurrent runs (every value out once, per-producer FIFO for
// the queue, an exact product for the register, every key out once for the heap), the three
// persistence modes, reopening a pool, tickets (a ticket invoked twice applies once;
// recover_pending after reopen), and bad input (too many threads, a bad slot, a foreign pool, a
// full pool, a full heap, a reserved key).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <deque>
#include <functional>
#include <queue>
#include <random>
#include <thread>
#include <vector>

#include "algo/algo_test_support.hpp"
#include "pmds/combining/atomic_float.hpp"
#include "pmds/combining/heap.hpp"
#include "pmds/combining/pbcomb.hpp"
#include "pmds/combining/pwfcomb.hpp"
#include "pmds/combining/queue.hpp"
#include "pmds/combining/stack.hpp"
#include "pmds/combining/wait_free_queue.hpp"
#include "support/child_process.hpp"

namespace pmds::combining {
namespace {

using algo::testing::pool_stress;
using algo::testing::sequential_against_model;
using algo::testing::TempPath;
using algo::testing::work_scale;

static_assert(Stack<CombiningStack<PBComb, Persistence::detectable>>);
static_assert(Queue<CombiningQueue<Persistence::detectable>>);
static_assert(Queue<WaitFreeCombiningQueue<Persistence::detectable>>);
static_assert(Register<CombiningAtomicFloat<PBComb, Persistence::detectable>>);
static_assert(Register<CombiningAtomicFloat<PWFComb, Persistence::detectable>>);
static_assert(PriorityQueue<CombiningHeap<PBComb, Persistence::detectable>>);
static_assert(PriorityQueue<CombiningHeap<PWFComb, Persistence::detectable>>);

constexpr std::size_t pool_bytes = 64u << 20;

// A structure of one of the three modes, with its pool when it has one.
template <class S>
class Holder {
 public:
  static constexpr bool durable = S::criterion != Criterion::none;
  template <class... Args>
  explicit Holder(Args&&... args) : path_(S::name) {
    if constexpr (durable) {
      pool_.emplace(pm::Pool::create(path_.str(), pool_bytes, "combining"));
      s_ = std::make_unique<S>(create_new, *pool_, std::forward<Args>(args)...);
    } else {
      s_ = std::make_unique<S>(std::forward<Args>(args)...);
    }
  }
  S* operator->() { return s_.get(); }
  S& operator*() { return *s_; }
  pm::Pool& pool() { return *pool_; }
  void reopen() {
    s_.reset();
    pool_.reset();
    pool_.emplace(pm::Pool::open(path_.str(), "combining"));
    s_ = std::make_unique<S>(open_existing, *pool_);
  }

 private:
  TempPath path_;
  std::optional<pm::Pool> pool_;
  std::unique_ptr<S> s_;
};

template <class S>
class StackTest : public ::testing::Test {};
using Stacks = ::testing::Types<
    CombiningStack<PBComb, Persistence::none>, CombiningStack<PBComb, Persistence::durable>,
    CombiningStack<PBComb, Persistence::detectable>,
    CombiningStack<PBComb, Persistence::detectable, StackOptions{false, true}>,
    CombiningStack<PBComb, Persistence::detectable, StackOptions{true, false}>,
    CombiningStack<PBComb, Persistence::none, StackOptions{false, false}>,
    CombiningStack<PWFComb, Persistence::none>, CombiningStack<PWFComb, Persistence::durable>,
    CombiningStack<PWFComb, Persistence::detectable>,
    CombiningStack<PWFComb, Persistence::detectable, StackOptions{false, true}>>;
TYPED_TEST_SUITE(StackTest, Stacks);

TYPED_TEST(StackTest, SequentialLifo) {
  Holder<TypeParam> s;
  EXPECT_EQ(s->pop(), std::nullopt);
  std::deque<Value> model;
  sequential_against_model([&](Value v) { s->push(v); }, [&] { return s->pop(); }, model, false, 5);
  if (::testing::Test::HasFatalFailure()) return;
  if constexpr (Holder<TypeParam>::durable) {
    s.reopen();
    EXPECT_EQ(s->recovery_stats().live_slots, model.size() + 1);  // nodes and the anchor
  }
  for (auto it = model.rbegin(); it != model.rend(); ++it) ASSERT_EQ(s->pop(), *it);
  EXPECT_EQ(s->pop(), std::nullopt);
}

TYPED_TEST(StackTest, ConcurrentEveryValueOnce) {
  for (int threads : {2, 4}) {
    Holder<TypeParam> s;
    pool_stress([&](Value v) { s->push(v); }, [&] { return s->pop(); }, threads, 20000 / work_scale,
                false);
  }
}

template <class S>
class QueueTest : public ::testing::Test {};
using Queues = ::testing::Types<
    CombiningQueue<Persistence::none>, CombiningQueue<Persistence::durable>,
    CombiningQueue<Persistence::detectable>, WaitFreeCombiningQueue<Persistence::none>,
    WaitFreeCombiningQueue<Persistence::durable>, WaitFreeCombiningQueue<Persistence::detectable>>;
TYPED_TEST_SUITE(QueueTest, Queues);

TYPED_TEST(QueueTest, SequentialFifo) {
  Holder<TypeParam> q;
  EXPECT_EQ(q->dequeue(), std::nullopt);
  std::deque<Value> model;
  sequential_against_model([&](Value v) { q->enqueue(v); }, [&] { return q->dequeue(); }, model,
                           true, 7);
  if (::testing::Test::HasFatalFailure()) return;
  if constexpr (Holder<TypeParam>::durable) {
    q.reopen();
    EXPECT_EQ(q->recovery_stats().live_slots, model.size() + 2);  // nodes, the dummy, the anchor
  }
  for (Value v : model) ASSERT_EQ(q->dequeue(), v);
  EXPECT_EQ(q->dequeue(), std::nullopt);
  q->enqueue(3);  // still works after it was emptied
  EXPECT_EQ(q->dequeue(), std::optional<Value>(3));
}

TYPED_TEST(QueueTest, ConcurrentFifoEveryValueOnce) {
  for (int threads : {2, 4}) {
    Holder<TypeParam> q;
    pool_stress([&](Value v) { q->enqueue(v); }, [&] { return q->dequeue(); }, threads,
                20000 / work_scale, true);
  }
}

template <class S>
class RegisterTest : public ::testing::Test {};
using Registers = ::testing::Types<CombiningAtomicFloat<PBComb, Persistence::none>,
                                   CombiningAtomicFloat<PBComb, Persistence::durable>,
                                   CombiningAtomicFloat<PBComb, Persistence::detectable>,
                                   CombiningAtomicFloat<PWFComb, Persistence::none>,
                                   CombiningAtomicFloat<PWFComb, Persistence::durable>,
                                   CombiningAtomicFloat<PWFComb, Persistence::detectable>>;
TYPED_TEST_SUITE(RegisterTest, Registers);

// Every thread multiplies by 2 and by 1/2 in turn: the products are exact, the final value is
// the initial one, and each fetch_multiply returns a power of two that some linearization
// produces: the values a thread sees before its "times 2" and its "times 1/2" differ by the
// factors others applied in between, so only their range is checked here (the crash lab checks
// linearizability with porcupine).
TYPED_TEST(RegisterTest, ConcurrentProductIsExact) {
  Holder<TypeParam> r;
  EXPECT_EQ(r->read(), 1.0);
  constexpr int threads = 4;
  const int per_thread = 20000 / work_scale;
  std::vector<std::thread> workers;
  std::atomic<int> bad{0};
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&] {
      for (int i = 0; i < per_thread; ++i) {
        const double before = r->fetch_multiply(i % 2 == 0 ? 2.0 : 0.5);
        const int e = std::ilogb(before);
        if (before <= 0 || std::ldexp(1.0, e) != before || e < -threads || e > threads) ++bad;
      }
    });
  for (auto& w : workers) w.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(r->read(), 1.0);
  if constexpr (Holder<TypeParam>::durable) {
    r->fetch_multiply(-4.0);
    r.reopen();
    EXPECT_EQ(r->read(), -4.0);
    EXPECT_EQ(r->recovery_stats().live_slots, 1u);
  }
}

// A ticket names one operation: invoked again it returns the first response and applies
// nothing; after a reopen, recover_pending reports it taken with that response, and the next
// ticket of the slot as not taken.
TEST(Tickets, AnOperationAppliesOnceAndIsReportedAfterReopen) {
  Holder<CombiningStack<PBComb, Persistence::detectable>> s;
  const Ticket first = s->next_ticket(3);
  s->push(10, first);
  s->push(10, first);  // the same operation again: not applied twice
  const Ticket second{3, first.seq + 1};
  EXPECT_EQ(s->pop(second), std::optional<Value>(10));
  EXPECT_EQ(s->pop(second), std::optional<Value>(10));  // its response again
  EXPECT_EQ(s->pop(), std::nullopt);
  const Ticket third{3, second.seq + 1};
  s->push(20, third);
  s.reopen();
  const auto done = s->recover_pending(third);
  EXPECT_TRUE(done.took_effect);
  const auto popped = s->recover_pending(second);  // parity of `second`: not the last one
  EXPECT_FALSE(popped.took_effect);
  const Ticket fourth{3, third.seq + 1};
  EXPECT_FALSE(s->recover_pending(fourth).took_effect);
  EXPECT_EQ(s->next_ticket(3).seq % 2, fourth.seq % 2);  // open resumes the slot's parity
  EXPECT_EQ(s->pop(fourth), std::optional<Value>(20));
  EXPECT_EQ(s->pop(), std::nullopt);
}

template <class Q>
class DetectableQueueTest : public ::testing::Test {};
using DetectableQueues = ::testing::Types<CombiningQueue<Persistence::detectable>,
                                          WaitFreeCombiningQueue<Persistence::detectable>>;
TYPED_TEST_SUITE(DetectableQueueTest, DetectableQueues);

TYPED_TEST(DetectableQueueTest, KindsHaveTheirOwnSequences) {
  Holder<TypeParam> q;
  const Ticket e = q->next_ticket(1, true);
  q->enqueue(5, e);
  const Ticket d = q->next_ticket(1, false);
  EXPECT_EQ(q->dequeue(d), std::optional<Value>(5));
  const Ticket e2 = q->next_ticket(1, true);
  q->enqueue(6, e2);
  q->enqueue(6, e2);  // the same operation again: not applied twice
  q.reopen();
  EXPECT_TRUE(q->recover_pending(e2, true).took_effect);
  const auto out = q->recover_pending(d, false);
  EXPECT_TRUE(out.took_effect);
  EXPECT_EQ(out.response, std::optional<Value>(5));
  EXPECT_FALSE(q->recover_pending(Ticket{1, d.seq + 1}, false).took_effect);
  EXPECT_EQ(q->dequeue(), std::optional<Value>(6));
  EXPECT_EQ(q->dequeue(), std::nullopt);
}

// PWFqueue's enqueuers' state names the last link to write (old_tail -> local_head). Closed when
// dequeuers have written that link and dequeued past it, the queue reopens with old_tail kept
// (the next enqueue round writes its next) and retires it once the state has moved on.
TEST(WaitFreeQueue, ReopenedWhenTheHeadIsPastTheLinkToWrite) {
  Holder<WaitFreeCombiningQueue<Persistence::detectable>> q;
  std::uint64_t next_value = 1, expected = 1;
  for (int cycle = 0; cycle < 4; ++cycle) {
    q->enqueue(next_value++);
    q->enqueue(next_value++);  // one round each: old_tail is the first
    ASSERT_EQ(q->dequeue(), std::optional<Value>(expected++));
    ASSERT_EQ(q->dequeue(), std::optional<Value>(expected++));  // the head is the tail
    q.reopen();
    // The anchor, the dummy (the last node dequeued) and the old tail the state names.
    EXPECT_EQ(q->recovery_stats().live_slots, 3u);
    EXPECT_EQ(q->dequeue(), std::nullopt);
  }
  for (int i = 0; i < 100; ++i) q->enqueue(next_value++);
  q.reopen();
  EXPECT_EQ(q->recovery_stats().live_slots, 102u);  // 100 nodes, the dummy, the anchor
  while (const auto v = q->dequeue()) ASSERT_EQ(*v, expected++);
  EXPECT_EQ(expected, next_value);
}

// A full pool: the enqueue that finds no node throws PoolFull and is not applied (its ticket is
// reported not taken); the queue stays whole, dequeues go on, and an enqueue fits again once
// dequeues freed nodes (PWFqueue's dequeued nodes come back through the epoch domain: drain()).
TYPED_TEST(DetectableQueueTest, AFullPoolFailsTheEnqueueAndLosesNothing) {
  TempPath path("combining-queue-full");
  auto pool = pm::Pool::create(path.str(), 4u << 20, "combining");
  TypeParam q(create_new, pool);
  std::uint64_t enqueued = 0;
  Ticket failed{};
  try {
    for (;;) {
      const Ticket t = q.next_ticket(2, true);
      failed = t;
      q.enqueue(enqueued + 1, t);
      ++enqueued;
    }
  } catch (const PoolFull&) {
  }
  ASSERT_GT(enqueued, 1000u);
  EXPECT_EQ(q.next_ticket(2, true).seq, failed.seq);  // the failed enqueue took no number
  EXPECT_FALSE(q.recover_pending(failed, true).took_effect);
  EXPECT_THROW(q.enqueue(0), PoolFull);  // a plain enqueue fails the same way
  std::uint64_t expected = 1;
  for (std::size_t i = 0; i < 2 * default_slots + 2; ++i)
    ASSERT_EQ(q.dequeue(), std::optional<Value>(expected++));
  q.drain();
  q.enqueue(enqueued + 1);  // on freed nodes
  ++enqueued;
  while (const auto v = q.dequeue()) ASSERT_EQ(*v, expected++);
  EXPECT_EQ(expected, enqueued + 1);
}

TEST(BadInput, TooManyThreadsAndBadSlots) {
  Holder<CombiningStack<PBComb, Persistence::detectable>> s(std::size_t{1});
  EXPECT_THROW(s->next_ticket(1), Error);
  EXPECT_THROW(s->push(1, Ticket{5, 1}), Error);
  std::thread other([&] {
    // This thread's id is not 0 while the main thread holds 0.
    EXPECT_THROW(s->push(1), TooManyThreads);
  });
  other.join();
  EXPECT_THROW((CombiningStack<PBComb, Persistence::none>(std::size_t{0})), Error);
}

// Opening `pool`'s structure as an S is refused with layout_mismatch (another structure, another
// protocol or another record layout).
template <class S>
void expect_layout_mismatch(pm::Pool& pool) {
  try {
    S s(open_existing, pool);
    ADD_FAILURE() << "opened the pool's structure as a " << S::name;
  } catch (const PoolError& e) {
    EXPECT_EQ(e.code(), PoolErrc::layout_mismatch) << e.what();
  }
}

TEST(BadInput, OpeningAnotherStructureOrAnEmptyPool) {
  TempPath path("combining-foreign");
  {
    auto pool = pm::Pool::create(path.str(), pool_bytes, "combining");
    EXPECT_THROW((CombiningStack<PBComb, Persistence::detectable>(open_existing, pool)), PoolError);
    CombiningQueue<Persistence::detectable> q(create_new, pool);
    EXPECT_THROW((CombiningQueue<Persistence::detectable>(create_new, pool)), PoolError);
  }
  auto pool = pm::Pool::open(path.str(), "combining");
  expect_layout_mismatch<CombiningStack<PBComb, Persistence::detectable>>(pool);
}

TEST(Tickets, ReinvokedAfterReopenAppliesNothing) {
  Holder<CombiningStack<PBComb, Persistence::detectable>> s;
  for (std::uint64_t seq = 1; seq <= 5; ++seq) s->push(seq, Ticket{0, seq});
  s.reopen();
  EXPECT_TRUE(s->recover_pending(Ticket{0, 5}).took_effect);
  s->push(5, Ticket{0, 5});
  std::vector<Value> values;
  while (auto v = s->pop()) values.push_back(*v);
  EXPECT_EQ(values, (std::vector<Value>{5, 4, 3, 2, 1}));
}
TEST(Tickets, ReinvokedAfterADirtyExitAppliesNothing) {
  TempPath path("combining-dirty");
  pmds::test::in_killed_child([&] {
    auto pool = pm::Pool::create(path.str(), pool_bytes, "combining");
    CombiningStack<PBComb, Persistence::detectable> s(create_new, pool);
    for (std::uint64_t seq = 1; seq <= 5; ++seq) s.push(seq, Ticket{0, seq});
    ::_exit(0);
  });
  auto pool = pm::Pool::open(path.str(), "combining");
  CombiningStack<PBComb, Persistence::detectable> s(open_existing, pool);
  EXPECT_TRUE(s.recover_pending(Ticket{0, 5}).took_effect);
  s.push(5, Ticket{0, 5});
  std::vector<Value> values;
  while (auto v = s.pop()) values.push_back(*v);
  EXPECT_EQ(values, (std::vector<Value>{5, 4, 3, 2, 1}));
}
// A full pool: the push that finds no node throws PoolFull and is not applied (its ticket is
// reported not taken); the stack stays whole, pops go on, and a push fits again once pops freed
// nodes (PWFcomb's push needs a spare node per slot, and its pops' nodes come back through the
// epoch domain: drain()).
template <class S>
class FullPoolTest : public ::testing::Test {};
using DurableStacks = ::testing::Types<CombiningStack<PBComb, Persistence::detectable>,
                                       CombiningStack<PWFComb, Persistence::detectable>>;
TYPED_TEST_SUITE(FullPoolTest, DurableStacks);

TYPED_TEST(FullPoolTest, AFullPoolFailsThePushAndLosesNothing) {
  TempPath path("combining-full");
  auto pool = pm::Pool::create(path.str(), 4u << 20, "combining");
  TypeParam s(create_new, pool);
  std::uint64_t pushed = 0;
  Ticket failed{};
  try {
    for (;;) {
      const Ticket t = s.next_ticket(2);
      failed = t;
      s.push(pushed + 1, t);
      ++pushed;
    }
  } catch (const PoolFull&) {
  }
  ASSERT_GT(pushed, 1000u);
  EXPECT_EQ(s.next_ticket(2).seq, failed.seq);  // the failed push took no sequence number
  EXPECT_FALSE(s.recover_pending(failed).took_effect);
  EXPECT_THROW(s.push(0), PoolFull);  // a plain push fails the same way
  std::uint64_t expected = pushed;
  for (std::size_t i = 0; i < 2 * default_slots; ++i)
    ASSERT_EQ(s.pop(), std::optional<Value>(expected--));
  s.drain();
  s.push(expected + 1);  // on freed nodes
  ++expected;
  while (const auto v = s.pop()) ASSERT_EQ(*v, expected--);
  EXPECT_EQ(expected, 0u);
}

template <class S>
class HeapTest : public ::testing::Test {};
using Heaps = ::testing::Types<
    CombiningHeap<PBComb, Persistence::none>, CombiningHeap<PBComb, Persistence::durable>,
    CombiningHeap<PBComb, Persistence::detectable>, CombiningHeap<PWFComb, Persistence::none>,
    CombiningHeap<PWFComb, Persistence::durable>, CombiningHeap<PWFComb, Persistence::detectable>>;
TYPED_TEST_SUITE(HeapTest, Heaps);

// Against std::priority_queue: repeated keys, get_min, a full heap that refuses an insert and
// stays as it was, and the contents and capacity kept across a reopen.
TYPED_TEST(HeapTest, SequentialAgainstAModel) {
  constexpr std::size_t capacity = 200;
  Holder<TypeParam> h(capacity);
  EXPECT_EQ(h->capacity(), capacity);
  EXPECT_EQ(h->delete_min(), std::nullopt);
  EXPECT_EQ(h->get_min(), std::nullopt);
  std::priority_queue<Key, std::vector<Key>, std::greater<>> model;
  std::mt19937_64 rng(11);
  for (int i = 0; i < 5000; ++i) {
    const unsigned r = rng() % 8;
    if (r < 4) {
      const Key k = 1 + rng() % 500;  // repeats
      if (model.size() == capacity) {
        EXPECT_THROW(h->insert(k), CapacityExceeded);
      } else {
        h->insert(k);
        model.push(k);
      }
    } else if (r < 7) {
      std::optional<Key> expected;
      if (!model.empty()) {
        expected = model.top();
        model.pop();
      }
      ASSERT_EQ(h->delete_min(), expected);
    } else {
      ASSERT_EQ(h->get_min(), model.empty() ? std::nullopt : std::optional<Key>(model.top()));
    }
    if (i == 2500)
      while (model.size() < capacity) {  // fill it once
        const Key k = 1 + rng() % 500;
        h->insert(k);
        model.push(k);
      }
  }
  if constexpr (Holder<TypeParam>::durable) {
    h.reopen();
    EXPECT_EQ(h->capacity(), capacity);
    EXPECT_EQ(h->recovery_stats().live_slots, 1u);  // the anchor holds the whole heap
  }
  std::size_t held = 0;
  h->for_each([&](Key) { ++held; });
  EXPECT_EQ(held, model.size());
  while (!model.empty()) {
    ASSERT_EQ(h->delete_min(), std::optional<Key>(model.top()));
    model.pop();
  }
  EXPECT_EQ(h->delete_min(), std::nullopt);
}

// Threads insert unique keys and delete minima: every key comes out exactly once (during the run
// or in the final drain), and the drain comes out sorted.
TYPED_TEST(HeapTest, ConcurrentEveryKeyOnce) {
  constexpr int threads = 4;
  const int per_thread = 1000 / work_scale;
  // Room for every key; 8 slots keep PWFcomb's 17 records of 4097 words within one pool chunk.
  Holder<TypeParam> h(std::size_t{threads * 1000}, std::size_t{8});
  std::vector<std::vector<Key>> taken(threads + 1);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        h->insert(static_cast<Key>(t) * per_thread + i + 1);
        if (i % 2 == 1)
          if (const auto k = h->delete_min()) taken[t].push_back(*k);
      }
    });
  for (auto& w : workers) w.join();
  Key last = 0;
  bool sorted = true;
  while (const auto k = h->delete_min()) {
    sorted = sorted && *k >= last;
    last = *k;
    taken[threads].push_back(*k);
  }
  EXPECT_TRUE(sorted);
  std::vector<Key> all;
  for (const auto& list : taken) all.insert(all.end(), list.begin(), list.end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), static_cast<std::size_t>(threads * per_thread));
  for (std::size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], i + 1);
}

TEST(BadInput, HeapCapacityAndReservedKeys) {
  EXPECT_THROW((CombiningHeap<PBComb, Persistence::none>(0)), Error);
  EXPECT_THROW((CombiningHeap<PWFComb, Persistence::none>(std::size_t{1} << 20)), Error);
  CombiningHeap<PWFComb, Persistence::none> h(4);
  EXPECT_THROW(h.insert(0), ReservedKey);
  EXPECT_THROW(h.insert(~Key{0}), ReservedKey);
  EXPECT_EQ(h.get_min(), std::nullopt);  // nothing was announced
}

// The ticket rules on each protocol: an operation invoked twice under one ticket applies once;
// after a reopen, recover_pending reports the last ticket taken, with its response.
template <class S>
class TicketTest : public ::testing::Test {};
using DetectableRegisters =
    ::testing::Types<CombiningAtomicFloat<PBComb, Persistence::detectable>,
                     CombiningAtomicFloat<PWFComb, Persistence::detectable>>;
TYPED_TEST_SUITE(TicketTest, DetectableRegisters);

TYPED_TEST(TicketTest, AnOperationAppliesOnceAndIsReportedAfterReopen) {
  Holder<TypeParam> r;
  const Ticket first = r->next_ticket(5);
  EXPECT_EQ(r->fetch_multiply(4.0, first), 1.0);
  EXPECT_EQ(r->fetch_multiply(4.0, first), 1.0);  // the same operation: not applied twice
  const Ticket second{5, first.seq + 1};
  EXPECT_EQ(r->fetch_multiply(-2.0, second), 4.0);
  r.reopen();
  const auto done = r->recover_pending(second);
  EXPECT_TRUE(done.took_effect);
  EXPECT_EQ(done.response, 4.0);
  EXPECT_EQ(r->fetch_multiply(-2.0, second), 4.0);  // invoked again after the crash: its response
  const Ticket third{5, second.seq + 1};
  EXPECT_FALSE(r->recover_pending(third).took_effect);
  EXPECT_EQ(r->read(third), -8.0);
  EXPECT_EQ(r->read(), -8.0);
}

TEST(Tickets, HeapOperationsAreReportedWithTheirKeys) {
  Holder<CombiningHeap<PWFComb, Persistence::detectable>> h(std::size_t{16});
  h->insert(9, h->next_ticket(2));
  h->insert(4, h->next_ticket(2));
  const Ticket take = h->next_ticket(2);
  EXPECT_EQ(h->delete_min(take), std::optional<Key>(4));
  h.reopen();
  const auto out = h->recover_pending(take);
  EXPECT_TRUE(out.took_effect);
  EXPECT_EQ(out.response, std::optional<Key>(4));
  EXPECT_EQ(h->delete_min(take), std::optional<Key>(4));  // not applied again
  EXPECT_EQ(h->get_min(), std::optional<Key>(9));
}

TEST(BadInput, OpeningAPBcombObjectAsPWFcomb) {
  TempPath path("combining-protocol");
  {
    auto pool = pm::Pool::create(path.str(), pool_bytes, "combining");
    CombiningAtomicFloat<PBComb, Persistence::detectable> r(create_new, pool);
  }
  auto pool = pm::Pool::open(path.str(), "combining");
  expect_layout_mismatch<CombiningAtomicFloat<PWFComb, Persistence::detectable>>(pool);
}

// A pool whose records have the layout before version '2' (protocol.hpp's kind_word: the
// Deactivate bits after the responses) is refused, not read with the new offsets.
TEST(BadInput, OpeningAnOlderRecordLayout) {
  TempPath path("combining-old-layout");
  {
    auto pool = pm::Pool::create(path.str(), pool_bytes, "combining");
    CombiningAtomicFloat<PBComb, Persistence::detectable> r(create_new, pool);
    auto* kind = reinterpret_cast<pm::atomic<std::uint64_t>*>(pool.root(0).load());
    ASSERT_EQ(kind->load(), kind_word('r', 'f'));
    kind->store(0x706d64732e726366);  // "pmds.rcf": the same register, layout 'c'
    pm::persist(kind, sizeof *kind);
  }
  auto pool = pm::Pool::open(path.str(), "combining");
  expect_layout_mismatch<CombiningAtomicFloat<PBComb, Persistence::detectable>>(pool);
}
}  // namespace
}  // namespace pmds::combining
