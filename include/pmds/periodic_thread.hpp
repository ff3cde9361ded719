// pmds::PeriodicThread — a thread that runs a step every period until stopped: the epoch
// advancers of nbMontage (montage/epoch_system.hpp) and InCLL (incll/checkpoints.hpp).
//
// A condition variable rather than a sleep, so stop() returns at once instead of after up to a
// period. start() and stop() from one owner thread; the step runs on the periodic thread only.
// What a step counts (counting backend) goes to pm::background_counters.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "pmds/pm/access.hpp"

namespace pmds {

class PeriodicThread {
 public:
  PeriodicThread() = default;
  PeriodicThread(const PeriodicThread&) = delete;
  PeriodicThread& operator=(const PeriodicThread&) = delete;
  ~PeriodicThread() { stop(); }

  // Runs step() every `period` from now on; no effect if already running.
  void start(std::chrono::microseconds period, std::function<void()> step) {
    if (thread_.joinable()) return;
    stopping_ = false;
    thread_ = std::thread([this, period, step = std::move(step)] {
      std::unique_lock lock(mutex_);
      while (!stopping_) {
        wakeup_.wait_for(lock, period);
        if (stopping_) break;
        lock.unlock();
        const pm::Counters before = pm::thread_counters();
        step();
        pm::background_counters.add(pm::thread_counters() - before);
        lock.lock();
      }
    });
  }

  // Waits for a step in progress to finish; no step runs after it returns.
  void stop() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wakeup_.notify_all();
    thread_.join();
  }

  bool running() const { return thread_.joinable(); }

 private:
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wakeup_;
  bool stopping_ = false;
};

}  // namespace pmds
