// pmds crash lab — a deterministic scheduler for simulated runs.
//
// The workload threads are real threads (each has its own pmds::thread_id(), simulator pending
// flushes and epoch slot), but only one runs at a time: the one holding the turn. At every
// access-layer operation (the simulator's schedule hook) the running thread draws from the
// scheduler's seeded generator whether to pass the turn, and to whom. Every decision is taken
// by the thread holding the turn, in program order, so a run — and the crash-point event
// numbers in it — replays exactly from the seed; the preemption points are exactly where Px86
// interleavings differ (access-layer operations), so no interleaving is out of reach.
//
// A structure's background work (HasBackgroundWork, interfaces.hpp) runs as one more scheduled
// thread: background_step(), then yield() (the turn goes to a workload thread), until alone()
// says every workload thread has left. Its steps are preemption points like any other, so a
// replay interleaves them exactly as the first run did. background_step() must not wait for a
// workload thread (that blocks outside the access layer: see below).
//
// Persistence windows (seed-driven too): a thread that stored to a cache line and now flushes
// it has, until that flush, published a value a crash can still take back. Another thread that
// reads it, finishes its operation and returns inside that window is where a missing flush
// shows (a reader that should have persisted what it read, a writer that flushes too late);
// with a uniform switch chance of 1% the window is rarely open long enough. So the switch
// chance at such a flush is p_persist instead (crashlab's --switch-persist), and
// stalled_in_window() tells the lab when a thread waits for its turn at such a flush, or with
// stores it has not flushed yet: a crash right after another thread's operation returns then
// is the crash that exposes a reader that should have persisted what it read.
//
// Planned preemptions, after PCT (Burckhardt et al., "A Randomized Scheduler with Probabilistic
// Guarantees of Finding Bugs", ASPLOS 2010): with Pct, d-1 change points are drawn uniformly
// over the run's expected preemption points, and at each the running thread is put down, with
// no other thread handing the turn back to it for `park_steps` preemption points (a random
// switch that finds only parked threads keeps the turn; a thread that ends hands it to a parked
// one when no other is left). A window that needs two preemptions at given places (one thread
// stopped between its read and its CAS, a second before another's write-back) then opens with
// a probability that does not shrink with the switch chance, and stays open while the third
// thread runs several operations; a random switch hands the turn back after about a hundred
// accesses (the CrashlabScheduler test: median stop 400 points planned, 104 random). PCT's strict
// priorities (the highest-priority thread always runs) are left out on purpose, measured: with
// three threads they cut the mutation score (hash/izraelevitz 5/15 -> 3/15, list/mirror 7/9 -> 5/9,
// 100 crashes per mutant) as the lowest thread hardly ran, and two threads spinning on a third of
// lower priority (combining waiters, InCLL's epoch barrier) passed the turn between themselves
// forever. The random switches stay, at p_switch.
//
// A thread that blocks outside the access layer while holding the turn (a std::mutex held
// across a persistent access, say) would stop every other thread: a waiter that has waited
// `steal_after` takes the turn instead, the run goes on (no longer replayable exactly) and
// stolen() counts it.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "pmds/crashlab/wakeup.hpp"
#include "pmds/pm/simulator.hpp"

namespace pmds::crashlab {

class Scheduler {
 public:
  struct Pct {
    std::size_t depth = 3;                // d: d-1 change points
    std::uint64_t expected_steps = 1000;  // preemption points of a run (the last run's)
  };

  // p_switch: probability that an access-layer operation passes the turn; p_persist: that a
  // flush of a line the thread stored to since it last flushed it does; pct: planned
  // preemptions (above) besides.
  Scheduler(std::size_t threads, std::uint64_t seed, double p_switch, double p_persist = 0,
            std::optional<Pct> pct = std::nullopt)
      : live_(threads, true),
        wakeups_(threads),
        written_(threads),
        stalled_(threads, false),
        rng_(seed),
        p_switch_(p_switch),
        p_persist_(p_persist),
        pct_(pct.has_value()) {
    for (auto& w : wakeups_) w = std::make_unique<Wakeup>();
    if (!pct) return;
    const std::size_t d = std::max<std::size_t>(pct->depth, 1);
    parked_until_.assign(threads, 0);
    for (std::size_t i = 1; i < d; ++i)
      change_points_.push_back(1 + rng_() % std::max<std::uint64_t>(pct->expected_steps, 1));
    std::sort(change_points_.begin(), change_points_.end(), std::greater<>());  // next: back()
  }

  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // The calling thread becomes workload thread `index` and waits for its first turn.
  void enter(std::size_t index) {
    current_index() = static_cast<int>(index);
    current_scheduler() = this;
    std::unique_lock g(mutex_);
    wait_for_turn(g, index);
  }

  // The calling workload thread is done: the turn goes to another live thread.
  void leave() {
    const int me = current_index();
    current_index() = -1;
    current_scheduler() = nullptr;
    std::unique_lock g(mutex_);
    live_[static_cast<std::size_t>(me)] = false;
    if (turn_ != me) return;
    const int next = pick_other(me);
    pass_to(next);
    g.unlock();
    if (next >= 0) wakeups_[static_cast<std::size_t>(next)]->post();
  }

  // The calling thread (holding the turn) passes it to another live thread, drawn uniformly,
  // and waits for its next turn; it keeps the turn when it is alone.
  void yield() {
    const int me = current_index();
    std::unique_lock g(mutex_);
    const int next = pick_other(me);
    if (next < 0) return;
    pass_to(next);
    wait_for_turn(g, static_cast<std::size_t>(me), next);
  }

  // True when a live thread other than the caller passed the turn at a flush ending a
  // persistence window, or with stores it has not flushed yet, and has not run since.
  bool stalled_in_window() {
    std::lock_guard g(mutex_);
    const int me = current_index();
    for (std::size_t i = 0; i < stalled_.size(); ++i)
      if (stalled_[i] && live_[i] && static_cast<int>(i) != me) return true;
    return false;
  }

  // True when no thread but the caller is live (every other one has left).
  bool alone() {
    std::lock_guard g(mutex_);
    return live_others(current_index()) == 0;
  }

  // The schedule hook: a preemption point of the calling thread (ignored for other threads).
  static void preemption_point(pm::sim::Operation op, const void* addr) {
    Scheduler* s = current_scheduler();
    if (s != nullptr) s->maybe_switch(static_cast<std::size_t>(current_index()), op, addr);
  }

  // While a Freeze lives (the crash lab's handler checking a crash point, which can take
  // seconds), the turn holder is busy on purpose: nobody steals the turn.
  class Freeze {
   public:
    explicit Freeze(Scheduler* s) : s_(s) {
      if (s_ != nullptr) {
        std::lock_guard g(s_->mutex_);
        ++s_->frozen_;
      }
    }
    ~Freeze() {
      if (s_ != nullptr) {
        std::lock_guard g(s_->mutex_);
        --s_->frozen_;
      }
    }
    Freeze(const Freeze&) = delete;
    Freeze& operator=(const Freeze&) = delete;

   private:
    Scheduler* s_;
  };

  std::uint64_t switches() const { return switches_; }
  std::uint64_t stolen() const { return stolen_; }
  std::uint64_t steps() const { return steps_; }  // preemption points passed

  // Long enough that a starved host is not taken for a blocked thread: in a fresh-clone CI run
  // (2026-12-07, 2-core Intel) masstree/incll's lab took 44 s where it takes 4.3 s alone, and a
  // turn went unpassed for 2 s (the limit then), failing a run that replays cleanly. A steal
  // fails the run (sim_lab.hpp), so passing runs never wait this long.
  static constexpr auto steal_after = std::chrono::seconds(10);
  static constexpr std::uint64_t park_steps = 1024;  // Pct: how long a change point parks

 private:
  static int& current_index() {
    thread_local int index = -1;
    return index;
  }
  static Scheduler*& current_scheduler() {
    thread_local Scheduler* s = nullptr;
    return s;
  }

  void maybe_switch(std::size_t me, pm::sim::Operation op, const void* addr) {
    std::unique_lock g(mutex_);
    if (turn_ != static_cast<int>(me)) {  // our turn was stolen: wait for it again
      wait_for_turn(g, me);
      return;
    }
    const bool window = persistence_window(me, op, addr);
    const double p = window ? std::max(p_switch_, p_persist_) : p_switch_;
    ++steps_;
    bool change_point = false;
    while (!change_points_.empty() && change_points_.back() <= steps_) {
      change_points_.pop_back();
      parked_until_[me] = steps_ + park_steps;
      change_point = true;
    }
    if (!change_point && std::uniform_real_distribution<double>(0, 1)(rng_) >= p) return;
    // A random switch does not wake a parked thread: the window its change point opened stays
    // open (at most park_steps, so a thread spinning on a parked one waits that long).
    const int next = pick_other(static_cast<int>(me), change_point);
    if (next < 0) return;
    pass_to(next);
    // Stalled with stores it has not flushed yet: at this window's flush, or before reaching
    // the flush of an earlier store (a link-free insert between its linking CAS and its psync).
    stalled_[me] = window || !written_[me].empty();
    wait_for_turn(g, me, next);
    stalled_[me] = false;
  }

  // Notes the lines thread `me` writes; true at a flush of one of them (the flush ends it).
  // Lock held.
  bool persistence_window(std::size_t me, pm::sim::Operation op, const void* addr) {
    using pm::sim::Operation;
    if (p_persist_ <= p_switch_ || me >= written_.size()) return false;
    const auto line = reinterpret_cast<std::uintptr_t>(addr) & ~std::uintptr_t{63};
    std::vector<std::uintptr_t>& lines = written_[me];
    if (op == Operation::store || op == Operation::rmw) {
      if (std::find(lines.begin(), lines.end(), line) == lines.end()) {
        if (lines.size() >= 64) lines.erase(lines.begin());  // bounded; the oldest goes
        lines.push_back(line);
      }
      return false;
    }
    if (op != Operation::flush) return false;
    const auto it = std::find(lines.begin(), lines.end(), line);
    if (it == lines.end()) return false;
    lines.erase(it);
    return true;
  }

  // Live threads other than `me`. Lock held.
  std::size_t live_others(int me) const {
    std::size_t n = 0;
    for (std::size_t i = 0; i < live_.size(); ++i) n += live_[i] && static_cast<int>(i) != me;
    return n;
  }

  // A live thread other than `me`, uniformly among those not parked (Pct); a parked one only
  // when `or_parked` and no other is left (-1 when there is none). Lock held.
  int pick_other(int me, bool or_parked = true) {
    std::vector<int> candidates, parked;
    for (std::size_t i = 0; i < live_.size(); ++i)
      if (live_[i] && static_cast<int>(i) != me)
        (pct_ && parked_until_[i] > steps_ ? parked : candidates).push_back(static_cast<int>(i));
    if (candidates.empty() && or_parked) candidates.swap(parked);
    if (candidates.empty()) return -1;
    return candidates[rng_() % candidates.size()];
  }

  // The turn goes to `next`; the caller wakes it once the lock is released (wait_for_turn's
  // `wake`), so that it does not wake only to wait for the lock (crashlab/wakeup.hpp says why
  // each thread has a wake-up of its own). Lock held.
  void pass_to(int next) {
    turn_ = next;
    ++switches_;
  }

  // Waits until the turn is `me`'s, first waking thread `wake` (>= 0) once the lock is released.
  // Steals the turn when it has not been passed for steal_after (and no Freeze lives), as a
  // waiter of the one condition variable all threads once shared did. Lock held on entry and
  // return.
  void wait_for_turn(std::unique_lock<std::mutex>& g, std::size_t me, int wake = -1) {
    using Clock = std::chrono::steady_clock;
    Clock::time_point deadline = Clock::now() + steal_after;
    std::uint64_t passes_seen = switches_;
    while (turn_ != static_cast<int>(me)) {
      g.unlock();
      if (wake >= 0) wakeups_[static_cast<std::size_t>(std::exchange(wake, -1))]->post();
      const bool woken = wakeups_[me]->wait_until(deadline);
      g.lock();
      if (woken || turn_ == static_cast<int>(me) || Clock::now() < deadline) continue;
      if (frozen_ == 0 && switches_ == passes_seen) {
        // The holder is blocked outside the access layer: go on without it.
        turn_ = static_cast<int>(me);
        ++stolen_;
      }
      passes_seen = switches_;
      deadline = Clock::now() + steal_after;
    }
    if (wake >= 0) wakeups_[static_cast<std::size_t>(wake)]->post();
  }

  std::mutex mutex_;
  std::vector<bool> live_;
  std::vector<std::unique_ptr<Wakeup>> wakeups_;      // per thread
  std::vector<std::vector<std::uintptr_t>> written_;  // per thread: lines stored, not yet flushed
  std::vector<bool> stalled_;  // per thread: passed the turn at a window's flush, not run since
  int turn_ = 0;
  std::mt19937_64 rng_;
  double p_switch_, p_persist_;
  bool pct_;
  std::vector<std::uint64_t> parked_until_;   // Pct: per thread, the step its parking ends
  std::vector<std::uint64_t> change_points_;  // Pct: steps still to come, the next one last
  std::uint64_t steps_ = 0;
  std::uint64_t switches_ = 0;
  std::uint64_t stolen_ = 0;
  int frozen_ = 0;
};

}  // namespace pmds::crashlab
