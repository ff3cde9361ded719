// pmds::reference::PsyncBound<T, Psyncs> — a reference point for benchmarks of durable sets, not a
// durable structure: the transient set T plus exactly `Psyncs` psyncs (each a store, clwb and
// sfence of one cache line; one unless named) after each successful insert and remove, and
// nothing else.
//
// Why it exists: a durably linearizable set must make each successful update durable before it
// returns, so it issues at least one psync per successful update (Cohen et al., "Inherent cost of
// remembering consistently", SPAA 2018; Zuriel et al. §1 and §2.3: SOFT meets it). The
// transient twin plus that one psync is therefore the fastest any durable set built on the same
// algorithm can be on the machine at hand. Registered as "list/psync-bound", "hash/psync-bound"
// and "skiplist/psync-bound", it runs in the same `pmds bench` invocation as the durable sets, so
// "durable / transient" can be read against "psync-bound / transient": the part of a gap that is
// the machine's flush latency and the part that is the technique's own cost.
//
// PsyncBound<T, 2>, registered as "list/psync2-bound" and "hash/psync2-bound", issues two psyncs
// one after the other, on two lines: the fewest a set transformed by Mirror can pay,
// whose design serializes two write-backs per successful update — an insert's new node is
// durable before the CAS that links it, and that CAS is flushed and fenced before the volatile
// replica takes it (Figure 4, §4.3.2); a remove marks, then unlinks, each CAS flushed and fenced.
// It is the ceiling of list/mirror and hash/mirror on the machine at hand.
//
// The flushed line is the calling thread's own, kept hot: the cheapest psync there is (a durable
// set's line was usually just written, and often missed), so the reference errs on the fast
// side. The psync goes through the access layer, so the counting backend
// reports its flushes/op and fences/op like any durable structure's, and PMDS_EADR=1 drops the
// flush as it does for them.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include "pmds/interfaces.hpp"
#include "pmds/pm/access.hpp"

namespace pmds::reference {

template <class T, int Psyncs = 1>
class PsyncBound {
  static_assert(Psyncs >= 1);

 public:
  // Not durable: a benchmark reference that lives in DRAM (registry::criterion_of).
  static constexpr Criterion criterion = Criterion::none;
  static constexpr int psyncs = Psyncs;

  explicit PsyncBound(std::unique_ptr<T> inner) : inner_(std::move(inner)) {}

  bool insert(Key k, Value v) { return persisted(inner_->insert(k, v)); }
  bool remove(Key k) { return persisted(inner_->remove(k)); }
  bool contains(Key k) { return inner_->contains(k); }
  std::optional<Value> get(Key k) { return inner_->get(k); }

  // Only where T has it, so that the registry's Iterable test sees what T offers.
  template <class F>
  requires Iterable<T>
  void for_each(F&& f) { inner_->for_each(std::forward<F>(f)); }

 private:
  struct alignas(pm::cache_line_size) Line {
    std::atomic<std::uint64_t> word{0};
  };

  static bool persisted(bool updated) {
    if (updated) {
      thread_local Line lines[Psyncs];
      for (Line& line : lines) {  // each psync completes before the next begins
        line.word.store(line.word.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        pm::flush(&line);
        pm::fence();
      }
    }
    return updated;
  }

  std::unique_ptr<T> inner_;
};

}  // namespace pmds::reference
