// Forked children for the tests: one that reports through its exit code, one that must end by
// ::_exit(0) with everything open (a dirty exit), one that dies of SIGKILL (what kill -9 does),
// and one that the test kills mid-run once it has made enough progress.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <new>
#include <thread>
#include <vector>

namespace pmds::test {

// Runs body() in a forked child and returns its exit status (the child's return value of body,
// 100 + n for an exception, 200 for an abnormal end). The child never returns into the test.
inline int run_in_child(const std::function<int()>& body) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int code = 0;
    try {
      code = body();
    } catch (...) {
      code = 100;
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200;
}

// Runs `body` in a child process, which must end it by calling ::_exit(0) with the structure
// and pool still open (as kill -9 would: no destructor runs, so no clean close syncs; the pool
// file keeps every store, and recovery must not trust what came after the last sync). A body
// that returns instead fails the test.
template <class F>
void in_killed_child(F&& body) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    body();
    ::_exit(4);  // too late: the body's destructors have closed the structure cleanly
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
}

// Runs `body` in a child process that then dies of SIGKILL with whatever the body left open
// (what `kill -9` does to a real writer: no destructor runs). The child exits without the
// signal, failing the test, when the body throws or records a test failure.
template <class F>
void in_child_killed_by_sigkill(F&& body) {
  std::fflush(nullptr);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = 3;
    try {
      body();
      if (!::testing::Test::HasFailure()) ::raise(SIGKILL);
    } catch (...) {
      code = 4;
    }
    ::_exit(code);  // reached only when the child could not do its part
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "the child ended otherwise (status " << status << ")";
}

// Runs body(progress) in a forked child whose threads count their completed steps in
// progress[0 .. counters) (a page shared with the test). Once every counter has reached
// `at_least`, and `then` more has passed, the test kills the child with SIGKILL (what kill -9
// does mid-operation) and returns the counts the child had published. The test fails when the
// child ends by itself first, or when 60 s pass before the counts are reached.
template <class F>
std::vector<std::uint64_t> killed_mid_run(std::size_t counters, std::uint64_t at_least, F&& body,
                                          std::chrono::microseconds then = {}) {
  using Counter = std::atomic<std::uint64_t>;
  void* shared = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED || counters * sizeof(Counter) > 4096) {
    ADD_FAILURE() << "no shared page for " << counters << " counters";
    return std::vector<std::uint64_t>(counters, 0);
  }
  auto* progress = static_cast<Counter*>(shared);
  for (std::size_t i = 0; i < counters; ++i) new (&progress[i]) Counter(0);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    try {
      body(progress);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
    }
    ::_exit(2);
  }
  std::vector<std::uint64_t> done(counters, 0);
  if (pid < 0) {
    ADD_FAILURE() << "fork failed";
    ::munmap(shared, 4096);
    return done;
  }
  const auto reached = [&] {
    for (std::size_t i = 0; i < counters; ++i)
      if (progress[i].load() < at_least) return false;
    return true;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool child_exited = false;
  while (!reached()) {
    if (::waitpid(pid, nullptr, WNOHANG) == pid) {
      child_exited = true;
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!child_exited && then.count() > 0) std::this_thread::sleep_for(then);
  ::kill(pid, SIGKILL);
  int status = 0;
  if (!child_exited) ::waitpid(pid, &status, 0);
  EXPECT_TRUE(!child_exited && WIFSIGNALED(status)) << "the child stopped by itself";
  for (std::size_t i = 0; i < counters; ++i) {
    done[i] = progress[i].load();
    EXPECT_GE(done[i], at_least) << "counter " << i << ": timed out";
  }
  ::munmap(shared, 4096);
  return done;
}

}  // namespace pmds::test
