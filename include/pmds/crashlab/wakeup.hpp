// pmds crash lab — one thread's wake-up call, for handing a turn from thread to thread.
//
// A POSIX semaphore per waiting thread, posted by whoever hands it the turn. Not one condition
// variable shared by all the threads that take turns: its broadcast at every hand-over woke
// every waiting thread, all but one of which went back to sleep, and the woken one then waited
// for the lock its waker still held. On a 2-core AMD EPYC KVM guest, where a wake-up costs an
// inter-processor interrupt, futex wake-ups were a fifth of a crash-lab run's CPU time (perf
// record of `pmds crashtest --structure hash/linkfree`). A post nobody has consumed yet only
// makes the next wait return at once; the callers check whose turn it is after every wake.
#pragma once

#include <semaphore.h>

#include <cerrno>
#include <chrono>
#include <ctime>

namespace pmds::crashlab {

class Wakeup {
 public:
  Wakeup() { ::sem_init(&sem_, 0, 0); }
  ~Wakeup() { ::sem_destroy(&sem_); }
  Wakeup(const Wakeup&) = delete;
  Wakeup& operator=(const Wakeup&) = delete;

  void post() { ::sem_post(&sem_); }

  void wait() {
    while (::sem_wait(&sem_) != 0) {  // EINTR: a signal handler ran; wait on
    }
  }

  // False when `deadline` passed first.
  bool wait_until(std::chrono::steady_clock::time_point deadline) {
    // steady_clock is CLOCK_MONOTONIC in libstdc++.
    const auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
    const timespec ts{static_cast<time_t>(ns / 1'000'000'000),
                      static_cast<long>(ns % 1'000'000'000)};
    while (::sem_clockwait(&sem_, CLOCK_MONOTONIC, &ts) != 0)
      if (errno != EINTR) return false;  // ETIMEDOUT
    return true;
  }

 private:
  sem_t sem_;
};

}  // namespace pmds::crashlab
