// labels: concurrent memory
// The Px86 simulator's crash points: the event counter, the crash handler (fires exactly before
// the chosen event, on the thread performing it, with every other thread stopped), and fork.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include "sim/sim_fixture.hpp"

namespace {

using simtest::Words;
namespace pm = pmds::pm;
namespace sim = pmds::pm::sim;

class CrashPoints : public simtest::SimTest {};

TEST_F(CrashPoints, EventsAreFencesRmwsAndClflushes) {
  const std::uint64_t e0 = sim::event_count();
  w(0).store(1);
  (void)w(0).load();
  clwb(0);
  std::uint64_t one = 1;
  pm::write(&w(1), &one, 8);
  pm::write_nontemporal(&w(2), &one, 8);
  EXPECT_EQ(sim::event_count(), e0);
  sim::fence();
  w(0).fetch_add(1);
  std::uint64_t expected = 99;
  w(0).compare_exchange_strong(expected, 3);  // fails, still an event
  w(0).exchange(4);
  sim::flush(&w(0), pm::FlushInstruction::clflush);
  sim::flush(&w(0), pm::FlushInstruction::none);  // eADR's no-op is not an event
  EXPECT_EQ(sim::event_count(), e0 + 5);
}

// x is stored, written back and fenced n times; a crash just before fence number k sees the k
// fenced values durable and the (k+1)-th store maybe.
TEST_F(CrashPoints, HandlerFiresJustBeforeTheChosenEvent) {
  const std::uint64_t e0 = sim::event_count();
  constexpr std::uint64_t k = 5;
  std::set<Words> at_crash;
  std::uint64_t seen_event = 0;
  int calls = 0;
  sim::set_crash_handler(e0 + k, [&] {
    ++calls;
    seen_event = sim::event_count();
    at_crash = reachable({0});  // takes a snapshot while the lock is held
  });
  for (std::uint64_t i = 1; i <= 10; ++i) {
    w(0).store(i);
    clwb(0);
    sim::fence();
  }
  EXPECT_EQ(calls, 1) << "one shot";
  EXPECT_EQ(seen_event, e0 + k);
  EXPECT_EQ(at_crash, (std::set<Words>{{k}, {k + 1}}));
  EXPECT_EQ(reachable({0}), (std::set<Words>{{10}})) << "execution went on after the handler";
}

TEST_F(CrashPoints, HandlerBeforeAnRmwSeesItsPendingFlushesNotYetDrained) {
  w(0).store(1);
  clwb(0);
  std::set<Words> at_crash;
  sim::set_crash_handler(sim::event_count(), [&] { at_crash = reachable({0, 8}); });
  w(8).fetch_add(1);
  EXPECT_EQ(at_crash, (std::set<Words>{{0, 0}, {1, 0}})) << "the RMW has not taken effect yet";
  EXPECT_EQ(reachable({0}), (std::set<Words>{{1}}));
}

TEST_F(CrashPoints, HandlerForAPastEventIsRefused) {
  sim::fence();
  EXPECT_THROW(sim::set_crash_handler(sim::event_count() - 1, [] {}), sim::SimulatorError);
  EXPECT_THROW(sim::set_crash_handler(sim::event_count(), nullptr), sim::SimulatorError);
  sim::set_crash_handler(sim::event_count(), [] { ADD_FAILURE() << "cleared handler fired"; });
  sim::clear_crash_handler();
  sim::fence();
}

// Two threads each store, write back and fence their own counter. Just before global event E,
// E fences have completed: thread i has fenced f_i times with sum f_i = E, so the minimum image
// sums to E; each thread has stored f_i or f_i + 1 times and the crashing thread f_i + 1, so the
// maximum image (= memory) sums to E + 1 or E + 2. The handler also waits, and checks that
// nobody moved while it held the lock.
TEST_F(CrashPoints, OtherThreadsAreStoppedAndTheSnapshotMatchesTheEventCount) {
  constexpr int kIterations = 2000;
  constexpr int kThreads = 2;
  std::atomic<bool> go{false};
  const std::uint64_t target = sim::event_count() + 1500;
  bool fired = false, stable = false;
  std::uint64_t min_sum = 0, max_sum = 0, live_sum = 0, at = 0;
  sim::set_crash_handler(target, [&] {
    fired = true;
    at = sim::event_count();
    const sim::Snapshot s = sim::snapshot();
    const Words lo = words_of(s, s.choice(sim::ImageKind::minimum), {0, 8});
    const Words hi = words_of(s, s.choice(sim::ImageKind::maximum), {0, 8});
    min_sum = lo[0] + lo[1];
    max_sum = hi[0] + hi[1];
    const Words before = live({0, 8});  // re-entrant: this thread holds the lock
    live_sum = before[0] + before[1];
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    stable = live({0, 8}) == before && sim::event_count() == at;
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      auto& x = w(static_cast<std::size_t>(t) * 8);
      for (std::uint64_t i = 1; i <= kIterations; ++i) {
        x.store(i);
        sim::flush(&x, pm::FlushInstruction::clwb);
        sim::fence();
      }
    });
  go = true;
  for (auto& th : threads) th.join();
  ASSERT_TRUE(fired);
  EXPECT_EQ(at, target);
  EXPECT_TRUE(stable) << "another thread ran while the handler held the lock";
  const std::uint64_t base = target - 1500;  // events before the threads started
  const std::uint64_t fences = at - base;
  EXPECT_EQ(min_sum, fences);
  EXPECT_GE(max_sum, fences + 1);
  EXPECT_LE(max_sum, fences + 2);
  EXPECT_EQ(live_sum, max_sum);
}

// A child forked while quiescent can use the simulator (the lock is free in it).
TEST_F(CrashPoints, ForkedChildUsesTheSimulator) {
  w(0).store(1);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child inherits the model: w(0) undetermined; it can store, fence and snapshot.
    clwb(0);
    sim::fence();
    w(8).store(2);
    const sim::Snapshot s = sim::snapshot();
    const bool ok = s.image_count() == 2.0 &&
                    words_of(s, s.choice(sim::ImageKind::minimum), {0, 8}) == Words{1, 0};
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(reachable({0, 8}), (std::set<Words>{{0, 0}, {1, 0}})) << "the parent is unchanged";
}

// The crash lab's pattern: the handler (lock held) forks a child that writes the minimum image
// to a pipe and _exit()s; the child holds the lock as the parent's thread did, so it can call
// the simulator. The parent's handler returns and execution goes on.
TEST_F(CrashPoints, HandlerCanForkAChildThatWritesAnImage) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = -1;
  w(0).store(7);
  clwb(0);
  w(8).store(8);
  sim::set_crash_handler(sim::event_count(), [&] {
    child = fork();
    if (child == 0) {
      const sim::Snapshot s = sim::snapshot();
      const auto img = s.image(region_of(s), s.choice(sim::ImageKind::minimum));
      const bool ok = write(fds[1], img.data(), img.size()) == static_cast<ssize_t>(img.size());
      _exit(ok ? 0 : 1);
    }
  });
  sim::fence();
  ASSERT_GT(child, 0);
  std::vector<unsigned char> img(sizeof buf_);
  std::size_t got = 0;
  while (got < img.size()) {
    const ssize_t r = read(fds[0], img.data() + got, img.size() - got);
    ASSERT_GT(r, 0);
    got += static_cast<std::size_t>(r);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  close(fds[0]);
  close(fds[1]);
  EXPECT_EQ(words_of(img, {0, 8}), (Words{0, 0})) << "crash before the fence: nothing durable";
  EXPECT_EQ(reachable({0, 8}), (std::set<Words>{{7, 0}, {7, 8}}));
}

}  // namespace

// The crash lab's multi-threaded pattern: while two workers run, the handler (holding the lock,
// the other worker stopped at its next operation) forks a child that reports the minimum image's
// counters and _exit()s; the workers then finish in the parent.
TEST_F(CrashPoints, HandlerForksWhileOtherThreadsWait) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = -1;
  const std::uint64_t base = sim::event_count();
  const std::uint64_t target = base + 300;
  sim::set_crash_handler(target, [&] {
    child = fork();
    if (child == 0) {
      const sim::Snapshot s = sim::snapshot();
      const Words lo = words_of(s, s.choice(sim::ImageKind::minimum), {0, 8});
      const std::uint64_t msg[3] = {s.event(), lo[0], lo[1]};
      _exit(write(fds[1], msg, sizeof msg) == static_cast<ssize_t>(sizeof msg) ? 0 : 1);
    }
  });
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      auto& x = w(t * 8);
      for (std::uint64_t i = 1; i <= 400; ++i) {
        x.store(i);
        sim::flush(&x, pm::FlushInstruction::clwb);
        sim::fence();
      }
    });
  for (auto& th : threads) th.join();
  ASSERT_GT(child, 0);
  std::uint64_t msg[3] = {};
  ASSERT_EQ(read(fds[0], msg, sizeof msg), static_cast<ssize_t>(sizeof msg));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  close(fds[0]);
  close(fds[1]);
  EXPECT_EQ(msg[0], target);
  EXPECT_EQ(msg[1] + msg[2], target - base) << "fenced values durable in the child's image";
  EXPECT_EQ(live({0, 8}), (Words{400, 400}));
}
