// Tests that the benchmark harness tells the truth (pmds/bench/runner.hpp, record.hpp), run on
// small structures of this file that count every call they receive:
//   - the operation mix it reports is the mix it ran (per type, calls and successes), and the
//     mix has the requested proportions;
//   - the prefill inserts exactly the number it claims (the structure's size afterwards);
//   - flushes/op and fences/op are summed from every worker's own counters (counting backend);
//   - the recovery measurement reopens a pool left dirty by a crashed child process;
//   - the JSON has the required fields, and CSV one row per record;
//   - workloads a structure cannot run are reported as unsupported.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <array>
#include <atomic>
#include <bit>
#include <cctype>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <set>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "pmds/bench/record.hpp"
#include "pmds/bench/runner.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/registry/factories.hpp"

namespace {

using namespace pmds;
using bench::Op;
using pmds::Criterion;
using registry::Describe;
using registry::Kind;

// Calls and successes per operation type, as the structure saw them.
struct Seen {
  std::array<std::atomic<std::uint64_t>, bench::op_type_count> calls{}, successes{};
  void add(Op op, bool ok) {
    calls[static_cast<std::size_t>(op)].fetch_add(1, std::memory_order_relaxed);
    if (ok) successes[static_cast<std::size_t>(op)].fetch_add(1, std::memory_order_relaxed);
  }
  void reset() {
    for (auto& c : calls) c = 0;
    for (auto& s : successes) s = 0;
  }
  std::uint64_t calls_of(Op op) const { return calls[static_cast<std::size_t>(op)].load(); }
  std::uint64_t successes_of(Op op) const { return successes[static_cast<std::size_t>(op)].load(); }
};

// A map behind a mutex that counts every call (get and contains both count as reads).
class CountingMap {
 public:
  static constexpr Criterion criterion = Criterion::none;
  bool insert(Key k, Value v) {
    check_key(k);
    std::lock_guard g(m_);
    const bool ok = map_.emplace(k, v).second;
    seen.add(Op::insert, ok);
    return ok;
  }
  bool remove(Key k) {
    std::lock_guard g(m_);
    const bool ok = map_.erase(k) == 1;
    seen.add(Op::remove, ok);
    return ok;
  }
  bool contains(Key k) {
    std::lock_guard g(m_);
    const bool ok = map_.count(k) == 1;
    seen.add(Op::read, ok);
    return ok;
  }
  std::optional<Value> get(Key k) {
    std::lock_guard g(m_);
    const auto it = map_.find(k);
    seen.add(Op::read, it != map_.end());
    if (it == map_.end()) return std::nullopt;
    return it->second;
  }
  bool put(Key k, Value v) {
    std::lock_guard g(m_);
    const bool absent = map_.insert_or_assign(k, v).second;
    seen.add(Op::update, !absent);
    return absent;
  }
  template <class F>
  std::size_t scan(Key from, std::size_t n, F&& visit) {
    std::lock_guard g(m_);
    std::size_t visited = 0;
    for (auto it = map_.lower_bound(from); it != map_.end() && visited < n; ++it, ++visited)
      visit(it->first, it->second);
    seen.calls[static_cast<std::size_t>(Op::scan)]++;
    seen.successes[static_cast<std::size_t>(Op::scan)] += visited;
    return visited;
  }
  std::size_t size() {
    std::lock_guard g(m_);
    return map_.size();
  }
  template <class F>
  void for_each(F&& visit) {
    std::lock_guard g(m_);
    for (const auto& [k, v] : map_) visit(k, v);
  }
  Seen seen;

 private:
  std::mutex m_;
  std::map<Key, Value> map_;
};

// A set without get, put or scan.
class CountingSet {
 public:
  static constexpr Criterion criterion = Criterion::none;
  bool insert(Key k, Value v) { return map_.insert(k, v); }
  bool remove(Key k) { return map_.remove(k); }
  bool contains(Key k) { return map_.contains(k); }
  Seen& seen() { return map_.seen; }

 private:
  CountingMap map_;
};

class CountingQueue {
 public:
  static constexpr Criterion criterion = Criterion::none;
  void enqueue(Value v) {
    std::lock_guard g(m_);
    q_.push_back(v);
    seen.add(Op::enqueue, true);
  }
  std::optional<Value> dequeue() {
    std::lock_guard g(m_);
    seen.add(Op::dequeue, !q_.empty());
    if (q_.empty()) return std::nullopt;
    const Value v = q_.front();
    q_.pop_front();
    return v;
  }
  Seen seen;

 private:
  std::mutex m_;
  std::deque<Value> q_;
};

class CountingHeap {
 public:
  static constexpr Criterion criterion = Criterion::none;
  void insert(Key k) {
    std::lock_guard g(m_);
    h_.push(k);
    seen.add(Op::pq_insert, true);
  }
  std::optional<Key> delete_min() {
    std::lock_guard g(m_);
    seen.add(Op::delete_min, !h_.empty());
    if (h_.empty()) return std::nullopt;
    const Key k = h_.top();
    h_.pop();
    return k;
  }
  std::optional<Key> get_min() {
    std::lock_guard g(m_);
    if (h_.empty()) return std::nullopt;
    return h_.top();
  }
  std::size_t size() {
    std::lock_guard g(m_);
    return h_.size();
  }
  Seen seen;

 private:
  std::mutex m_;
  std::priority_queue<Key, std::vector<Key>, std::greater<>> h_;
};

// A durable register kept in the pool's root slot 0: every fetch_multiply is one CAS, one flush
// and one fence, so flushes/op and fences/op must come out exactly 1.
class PoolRegister {
 public:
  static constexpr Criterion criterion = Criterion::durable;
  PoolRegister(pm::Pool& pool, bool fresh) : word_(pool.root(0)) {
    if (fresh) {
      word_.store(std::bit_cast<std::uint64_t>(1.0));
      pm::persist(&word_, sizeof word_);
    }
  }
  double read() { return std::bit_cast<double>(word_.load()); }
  double fetch_multiply(double x) {
    std::uint64_t seen = word_.load();
    while (!word_.compare_exchange_weak(
        seen, std::bit_cast<std::uint64_t>(std::bit_cast<double>(seen) * x))) {
    }
    pm::persist(&word_, sizeof word_);
    return std::bit_cast<double>(seen);
  }

 private:
  pm::atomic<std::uint64_t>& word_;
};

template <class T>
struct DramFactory {
  using type = T;
  static std::unique_ptr<T> create(pm::Pool*, const registry::CreateOptions&) {
    return std::make_unique<T>();
  }
};
struct PoolRegisterFactory {
  using type = PoolRegister;
  static std::unique_ptr<PoolRegister> create(pm::Pool* pool, const registry::CreateOptions&) {
    return std::make_unique<PoolRegister>(*pool, true);
  }
  static std::unique_ptr<PoolRegister> open(pm::Pool& pool, const registry::CreateOptions&) {
    return std::make_unique<PoolRegister>(pool, false);
  }
};

using MapD = Describe<"test/map", Kind::map, DramFactory<CountingMap>, "map">;
using SetD = Describe<"test/set", Kind::set, DramFactory<CountingSet>, "set">;
using QueueD = Describe<"test/queue", Kind::queue, DramFactory<CountingQueue>, "queue">;
using HeapD = Describe<"test/heap", Kind::priority_queue, DramFactory<CountingHeap>, "heap">;
using RegisterD =
    Describe<"test/pool-register", Kind::register_object, PoolRegisterFactory, "durable register">;

bench::RunParams short_run(bench::Workload w, unsigned threads, const bench::KeyChooser* keys) {
  bench::RunParams p;
  p.workload = w;
  p.threads = threads;
  p.warmup_s = 0.02;
  p.duration_s = 0.1;
  p.key_range = 256;
  p.reads_pct = 50;
  p.local_work = 16;
  p.keys = keys;
  return p;
}

// Every call the structure saw is in the reported measured or warm-up counts, type by type.
void expect_accounted(const Seen& seen, const bench::RepResult& r, std::initializer_list<Op> ops) {
  std::uint64_t seen_total = 0;
  for (const Op op : ops) {
    SCOPED_TRACE(bench::to_string(op));
    EXPECT_EQ(seen.calls_of(op), r.ops.calls_of(op) + r.warmup_ops.calls_of(op));
    EXPECT_EQ(seen.successes_of(op), r.ops.successes_of(op) + r.warmup_ops.successes_of(op));
    seen_total += seen.calls_of(op);
  }
  EXPECT_EQ(seen_total, r.ops.total() + r.warmup_ops.total()) << "an unexpected type was run";
}

TEST(Runner, SetMixReportsTheMixItRan) {
  for (const unsigned threads : {1u, 2u}) {
    CountingMap m;
    const bench::KeyChooser keys(bench::Distribution::uniform, 256, 0.99, 1);
    ASSERT_EQ(bench::prefill(m, 128, 256, 1, threads), 128u);
    m.seen.reset();
    auto p = short_run(bench::Workload::set, threads, &keys);
    p.reads_pct = 60;
    const auto r = bench::run_workload(m, p);
    expect_accounted(m.seen, r, {Op::read, Op::insert, Op::remove});
    // The proportions asked for: 60% reads, 20% inserts, 20% removes.
    const double n = static_cast<double>(r.ops.total());
    ASSERT_GT(n, 2000);
    EXPECT_NEAR(static_cast<double>(r.ops.calls_of(Op::read)) / n, 0.60, 0.03);
    EXPECT_NEAR(static_cast<double>(r.ops.calls_of(Op::insert)) / n, 0.20, 0.03);
    EXPECT_NEAR(static_cast<double>(r.ops.calls_of(Op::remove)) / n, 0.20, 0.03);
    // Inserts and removes balance, so the size stays near the prefill.
    EXPECT_NEAR(static_cast<double>(m.size()), 128, 40);
  }
}

TEST(Runner, OddRemainderSplitsEvenly) {
  CountingMap m;
  const bench::KeyChooser keys(bench::Distribution::uniform, 256, 0.99, 1);
  bench::prefill(m, 128, 256, 1, 1);
  auto p = short_run(bench::Workload::set, 1, &keys);
  p.reads_pct = 95;
  const auto r = bench::run_workload(m, p);
  const double n = static_cast<double>(r.ops.total());
  EXPECT_NEAR(static_cast<double>(r.ops.calls_of(Op::insert)) / n, 0.025, 0.01);
  EXPECT_NEAR(static_cast<double>(r.ops.calls_of(Op::remove)) / n, 0.025, 0.01);
}

TEST(Runner, YcsbWorkloadsReportTheMixTheyRan) {
  for (const auto w : {bench::Workload::ycsb_a, bench::Workload::ycsb_b, bench::Workload::ycsb_c}) {
    SCOPED_TRACE(bench::to_string(w));
    CountingMap m;
    const bench::KeyChooser keys(bench::Distribution::zipfian, 256, 0.99, 1);
    ASSERT_EQ(bench::prefill(m, 256, 256, 1, 2), 256u);  // YCSB loads the whole range
    m.seen.reset();
    auto p = short_run(w, 2, &keys);
    p.reads_pct = bench::fixed_read_percent(w);
    const auto r = bench::run_workload(m, p);
    expect_accounted(m.seen, r, {Op::read, Op::update});
    const double n = static_cast<double>(r.ops.total());
    EXPECT_NEAR(static_cast<double>(r.ops.calls_of(Op::read)) / n, p.reads_pct / 100.0, 0.03);
    // Every key is loaded and none is removed: every read hits, every update updates.
    EXPECT_EQ(r.ops.successes_of(Op::read), r.ops.calls_of(Op::read));
    EXPECT_EQ(r.ops.successes_of(Op::update), r.ops.calls_of(Op::update));
  }
}

// db_bench's shapes (workload.hpp): each runs only its operation; readwhilewriting's writer puts
// beside the readers and is left out of the result.
TEST(Runner, DbBenchShapesRunTheirOperationOnly) {
  using W = bench::Workload;
  const bench::KeyChooser keys(bench::Distribution::uniform, 256, 0.99, 1);
  {
    CountingMap m;  // fillrandom: from empty, puts only; a put of an absent key inserts it
    auto p = short_run(W::fillrandom, 2, &keys);
    const auto r = bench::run_workload(m, p);
    expect_accounted(m.seen, r, {Op::update});
    EXPECT_GT(r.ops.calls_of(Op::update), 0u);
    EXPECT_EQ(bench::elements_after(0, r), m.size());
    EXPECT_GT(m.size(), 0u);
  }
  for (const W w : {W::readrandom, W::overwrite}) {
    SCOPED_TRACE(bench::to_string(w));
    CountingMap m;
    ASSERT_EQ(bench::prefill(m, 256, 256, 1, 1), 256u);
    m.seen.reset();
    const Op op = w == W::readrandom ? Op::read : Op::update;
    const auto r = bench::run_workload(m, short_run(w, 2, &keys));
    expect_accounted(m.seen, r, {op});
    EXPECT_GT(r.ops.calls_of(op), 0u);
    EXPECT_EQ(bench::elements_after(256, r), m.size());
    EXPECT_EQ(r.ops.successes_of(op), r.ops.calls_of(op));
  }
  for (const unsigned threads : {1u, 2u}) {
    SCOPED_TRACE(threads);
    CountingMap m;
    ASSERT_EQ(bench::prefill(m, 256, 256, 1, 1), 256u);
    m.seen.reset();
    const auto p = short_run(W::deleterandom, threads, &keys);
    const auto r = bench::run_workload(m, p);
    // The warm-up gets keys and removes none; the measurement removes loaded keys only, and ends
    // (well before its 0.1 s) when a thread's share runs out: one thread's share is the whole
    // range; of two, the other may have a few keys left.
    expect_accounted(m.seen, r, {Op::read, Op::remove});
    EXPECT_EQ(r.warmup_ops.calls_of(Op::remove), 0u);
    EXPECT_EQ(r.ops.total(), r.ops.calls_of(Op::remove));
    EXPECT_EQ(r.ops.successes_of(Op::remove), r.ops.calls_of(Op::remove));
    EXPECT_LE(r.ops.calls_of(Op::remove), 256u);
    EXPECT_GE(r.ops.calls_of(Op::remove), threads == 1 ? 256u : 128u);
    EXPECT_LT(r.seconds, p.duration_s);
    EXPECT_EQ(bench::elements_after(256, r), m.size());
  }
  {
    CountingMap m;
    ASSERT_EQ(bench::prefill(m, 256, 256, 1, 1), 256u);
    m.seen.reset();
    const auto r = bench::run_workload(m, short_run(W::readwhilewriting, 2, &keys));
    EXPECT_EQ(r.ops.total(), r.ops.calls_of(Op::read));  // the readers alone
    EXPECT_EQ(m.seen.calls_of(Op::read),
              r.ops.calls_of(Op::read) + r.warmup_ops.calls_of(Op::read));
    EXPECT_GT(m.seen.calls_of(Op::update), 0u);  // the writer ran beside them
    // Its measured updates are counted apart: what the map saw, less the warm-up's.
    EXPECT_GT(r.writer_ops.calls_of(Op::update), 0u);
    EXPECT_EQ(r.writer_ops.total(), r.writer_ops.calls_of(Op::update));
    EXPECT_LE(r.writer_ops.calls_of(Op::update), m.seen.calls_of(Op::update));
  }
  {
    CountingMap m;  // no writer: nothing counted apart
    ASSERT_EQ(bench::prefill(m, 256, 256, 1, 1), 256u);
    const auto r = bench::run_workload(m, short_run(W::readrandom, 2, &keys));
    EXPECT_EQ(r.writer_ops.total(), 0u);
  }
}

TEST(Runner, YcsbEScansAndInsertsNewKeys) {
  CountingMap m;
  const bench::KeyChooser keys(bench::Distribution::uniform, 256, 0.99, 1);
  bench::prefill(m, 256, 256, 1, 1);
  m.seen.reset();
  auto p = short_run(bench::Workload::ycsb_e, 2, &keys);
  const auto r = bench::run_workload(m, p);
  expect_accounted(m.seen, r, {Op::scan, Op::insert});
  const double n = static_cast<double>(r.ops.total());
  EXPECT_NEAR(static_cast<double>(r.ops.calls_of(Op::scan)) / n, 0.95, 0.03);
  // Inserts are of keys above the loaded range, all new.
  EXPECT_EQ(r.ops.successes_of(Op::insert), r.ops.calls_of(Op::insert));
  EXPECT_EQ(m.size(), 256 + m.seen.successes_of(Op::insert));
  // Scans visit between 1 and 100 keys each (fewer near the top of the range).
  EXPECT_GE(r.ops.successes_of(Op::scan), r.ops.calls_of(Op::scan));
  EXPECT_LE(r.ops.successes_of(Op::scan), 100 * r.ops.calls_of(Op::scan));
}

TEST(Runner, QueuePairsFromEmptyNeverFindItEmpty) {
  CountingQueue q;
  auto p = short_run(bench::Workload::pairs, 2, nullptr);
  const auto r = bench::run_workload(q, p);
  expect_accounted(q.seen, r, {Op::enqueue, Op::dequeue});
  EXPECT_EQ(r.ops.calls_of(Op::enqueue), r.ops.calls_of(Op::dequeue));
  // Each thread enqueues before it dequeues, so no dequeue can find the queue empty.
  EXPECT_EQ(r.ops.successes_of(Op::dequeue), r.ops.calls_of(Op::dequeue));
  EXPECT_FALSE(q.dequeue().has_value()) << "pairs leave the queue empty";
}

TEST(Runner, HeapStaysHalfFull) {
  CountingHeap h;
  const bench::KeyChooser keys(bench::Distribution::uniform, 256, 0.99, 1);
  ASSERT_EQ(bench::prefill(h, 128, 256, 1, 2), 128u);
  EXPECT_EQ(h.size(), 128u);
  h.seen.reset();
  const auto r = bench::run_workload(h, short_run(bench::Workload::heap, 2, &keys));
  expect_accounted(h.seen, r, {Op::pq_insert, Op::delete_min});
  EXPECT_EQ(r.ops.calls_of(Op::pq_insert), r.ops.calls_of(Op::delete_min));
  EXPECT_EQ(h.size(), 128u);
}

TEST(Prefill, InsertsExactlyWhatItClaims) {
  for (const unsigned threads : {1u, 2u}) {
    for (const std::uint64_t range : {100ull, 1000ull, 20000ull}) {
      for (const std::uint64_t count : {std::uint64_t{0}, range / 2, range}) {
        CountingMap m;
        const auto claimed = bench::prefill(m, count, range, 7, threads);
        EXPECT_EQ(claimed, count);
        EXPECT_EQ(m.size(), count) << "range " << range << " threads " << threads;
        EXPECT_EQ(m.seen.calls_of(Op::insert), count) << "no retries needed";
        // Distinct keys, all in [1, range].
        std::set<Key> keys;
        m.for_each([&](Key k, Value v) {
          EXPECT_GE(k, 1u);
          EXPECT_LE(k, range);
          EXPECT_EQ(v, k);
          keys.insert(k);
        });
        EXPECT_EQ(keys.size(), count);
      }
    }
  }
}

TEST(Prefill, ThroughTheRegistryEntryAndInstance) {
  const registry::Entry entry = registry::entry_of<SetD>();
  const bench::Target t = bench::target_of<SetD>(entry);
  registry::CreateOptions o;
  o.key_range = 5000;
  auto inst = registry::Instance::create(entry, o);
  EXPECT_EQ(t.prefill(inst.object(), 2500, 5000, 3, 2), 2500u);
  const auto items = inst.contents();  // probes [1, key_range] with contains
  EXPECT_EQ(items.size(), 2500u);
  for (const auto& it : items) {
    EXPECT_GE(it.key, 1u);
    EXPECT_LE(it.key, 5000u);
  }
}

bench::Config quick_config(bench::Workload w) {
  bench::Config c;
  c.workload = w;
  c.threads = {1, 2};
  c.duration_s = 0.05;
  c.warmup_s = 0.01;
  c.reps = 2;
  c.key_range = 512;
  c.local_work = 8;
  return c;
}

TEST(RunTarget, OneRecordPerThreadCountWithMedianAndSpread) {
  const registry::Entry entry = registry::entry_of<MapD>();
  const auto records =
      bench::run_target(bench::target_of<MapD>(entry), quick_config(bench::Workload::set), nullptr);
  ASSERT_EQ(records.size(), 2u);
  for (const auto& r : records) {
    EXPECT_EQ(r.status, "ok");
    EXPECT_EQ(r.structure, "test/map");
    EXPECT_EQ(r.mops_reps.size(), 2u);
    EXPECT_LE(r.mops_min, r.mops);
    EXPECT_LE(r.mops, r.mops_max);
    EXPECT_GT(r.mops, 0);
    EXPECT_EQ(r.elements_after_prefill, 256u);
    EXPECT_NEAR(static_cast<double>(r.elements), 256, 64);  // inserts and removes balance
    EXPECT_EQ(r.prefill, 256u);
    EXPECT_EQ(r.reads_pct, 90u);
    // Transient and no persistence instructions; no pool, some DRAM per element.
    EXPECT_EQ(r.flushes_per_op, 0);
    EXPECT_EQ(r.fences_per_op, 0);
    EXPECT_EQ(r.pool_bytes, 0);
    if (bench::dram_in_use()) {  // malloc statistics (not under sanitizers)
      ASSERT_TRUE(r.bytes_per_element.has_value());
      EXPECT_GT(*r.bytes_per_element, 8);
    } else {
      EXPECT_FALSE(r.bytes_per_element.has_value());
    }
    EXPECT_FALSE(r.recovery_ms.has_value());
    EXPECT_GE(r.seconds_total, 2 * 0.05);
    EXPECT_GT(r.ops.total(), 0u);
  }
  EXPECT_EQ(records[0].threads, 1u);
  EXPECT_EQ(records[1].threads, 2u);
}

TEST(RunTarget, UnsupportedWorkloadsAreReportedNotRun) {
  const registry::Entry entry = registry::entry_of<SetD>();
  for (const auto w : {bench::Workload::ycsb_a, bench::Workload::ycsb_e, bench::Workload::pairs,
                       bench::Workload::heap, bench::Workload::atomicfloat}) {
    const auto records = bench::run_target(bench::target_of<SetD>(entry), quick_config(w), nullptr);
    ASSERT_EQ(records.size(), 2u);
    for (const auto& r : records) {
      EXPECT_EQ(r.status, "unsupported") << bench::to_string(w);
      EXPECT_FALSE(r.note.empty());
      EXPECT_EQ(r.ops.total(), 0u);
    }
  }
  // ycsb-c only reads: a plain set can run it.
  const auto c = bench::run_target(bench::target_of<SetD>(entry),
                                   quick_config(bench::Workload::ycsb_c), nullptr);
  EXPECT_EQ(c[0].status, "ok");
}

TEST(RunTarget, DurableRegisterCountsFlushesFencesAndMeasuresRecovery) {
  const registry::Entry entry = registry::entry_of<RegisterD>();
  auto cfg = quick_config(bench::Workload::atomicfloat);
  cfg.pool_size = 8 << 20;
  const auto records = bench::run_target(bench::target_of<RegisterD>(entry), cfg, nullptr);
  ASSERT_EQ(records.size(), 2u);
  for (const auto& r : records) {
    ASSERT_EQ(r.status, "ok");
    EXPECT_GT(r.ops.calls_of(Op::multiply), 0u);
    // One persist per operation, summed over every worker's own counters.
    EXPECT_DOUBLE_EQ(r.flushes_per_op, 1.0);
    EXPECT_DOUBLE_EQ(r.fences_per_op, 1.0);
    EXPECT_GE(r.rmws_per_op, 1.0);
    ASSERT_TRUE(r.recovery_ms.has_value());
    EXPECT_GE(*r.recovery_ms, 0);
    EXPECT_EQ(r.criterion, "durable");
  }
  // No temporary pool left behind.
  for (const auto& f : std::filesystem::directory_iterator(bench::temporary_pool_dir()))
    EXPECT_THAT(f.path().filename().string(),
                ::testing::Not(::testing::StartsWith("pmds-bench-" + std::to_string(::getpid()))));
}

// InCLL's epoch-checkpointed trees report the nodes they logged whole per epoch boundary;
// other structures report nothing.
TEST(RunTarget, CheckpointedStructuresReportLoggedNodesPerEpoch) {
  using LoggingD = Describe<"test/masstree-logging", Kind::map,
                            registry::factories::Incll<incll::LoggingMasstree<>>, "InCLL">;
  const registry::Entry entry = registry::entry_of<LoggingD>();
  auto cfg = quick_config(bench::Workload::ycsb_a);
  cfg.threads = {1};
  cfg.duration_s = 0.3;  // several 64 ms epochs
  cfg.key_range = 20'000;
  const auto records = bench::run_target(bench::target_of<LoggingD>(entry), cfg, nullptr);
  ASSERT_EQ(records.size(), 1u);
  const bench::Record& r = records[0];
  ASSERT_EQ(r.status, "ok") << r.note;
  EXPECT_GE(r.checkpoints.epochs, 4u);  // 2 repetitions of 0.31 s
  EXPECT_GT(r.checkpoints.logged_objects, 0u);
  ASSERT_TRUE(r.logged_per_epoch.has_value());
  EXPECT_DOUBLE_EQ(*r.logged_per_epoch, static_cast<double>(r.checkpoints.logged_objects) /
                                            static_cast<double>(r.checkpoints.epochs));

  const registry::Entry map = registry::entry_of<MapD>();
  const auto plain =
      bench::run_target(bench::target_of<MapD>(map), quick_config(bench::Workload::set), nullptr);
  EXPECT_FALSE(plain[0].logged_per_epoch.has_value());
  EXPECT_EQ(plain[0].checkpoints.epochs, 0u);
}

TEST(RunTarget, KeepsThePoolAtTheGivenPath) {
  const registry::Entry entry = registry::entry_of<RegisterD>();
  auto cfg = quick_config(bench::Workload::atomicfloat);
  cfg.pool_size = 8 << 20;
  cfg.threads = {1};
  cfg.pool_path =
      (bench::temporary_pool_dir() / ("harness-test-" + std::to_string(::getpid()) + ".pool"))
          .string();
  const auto records = bench::run_target(bench::target_of<RegisterD>(entry), cfg, nullptr);
  ASSERT_EQ(records.size(), 1u);
  ASSERT_TRUE(std::filesystem::exists(cfg.pool_path));
  const auto info = pm::inspect_pool(cfg.pool_path);
  EXPECT_EQ(info.layout, "test/pool-register");
  EXPECT_TRUE(info.clean_shutdown);
  std::filesystem::remove(cfg.pool_path);
}

// The CLI's isolation: each repetition in a forked child, its results sent back whole.
TEST(RunTarget, IsolatedRepetitionsReportWhatInProcessOnesDo) {
  const registry::Entry entry = registry::entry_of<RegisterD>();
  auto cfg = quick_config(bench::Workload::atomicfloat);
  cfg.pool_size = 8 << 20;
  cfg.isolate = true;
  const auto records = bench::run_target(bench::target_of<RegisterD>(entry), cfg, nullptr);
  ASSERT_EQ(records.size(), 2u);
  for (const auto& r : records) {
    ASSERT_EQ(r.status, "ok");
    EXPECT_EQ(r.mops_reps.size(), 2u);
    EXPECT_GT(r.ops.calls_of(Op::multiply), 0u);
    // The children's counters came back: one persist per operation, as in process.
    EXPECT_DOUBLE_EQ(r.flushes_per_op, 1.0);
    EXPECT_DOUBLE_EQ(r.fences_per_op, 1.0);
    ASSERT_TRUE(r.recovery_ms.has_value());
  }
  // The first repetition's prefill count and space, measured in its child.
  const registry::Entry map_entry = registry::entry_of<MapD>();
  auto map_cfg = quick_config(bench::Workload::set);
  map_cfg.isolate = true;
  for (const auto& r : bench::run_target(bench::target_of<MapD>(map_entry), map_cfg, nullptr)) {
    ASSERT_EQ(r.status, "ok");
    EXPECT_EQ(r.elements_after_prefill, 256u);
    EXPECT_NEAR(static_cast<double>(r.elements), 256, 64);
    if (bench::dram_in_use()) {
      ASSERT_TRUE(r.bytes_per_element.has_value());
      EXPECT_GT(*r.bytes_per_element, 8);
    }
  }
}

TEST(RunTarget, AnIsolatedRepetitionsErrorReachesTheCallerWithItsMessage) {
  const registry::Entry entry = registry::entry_of<RegisterD>();
  auto cfg = quick_config(bench::Workload::atomicfloat);
  cfg.pool_size = 4096;  // too small for a pool: Instance::create throws in the child
  cfg.threads = {1};
  std::string in_process, isolated;
  try {
    bench::run_target(bench::target_of<RegisterD>(entry), cfg, nullptr);
  } catch (const Error& e) {
    in_process = e.what();
  }
  cfg.isolate = true;
  try {
    bench::run_target(bench::target_of<RegisterD>(entry), cfg, nullptr);
  } catch (const Error& e) {
    isolated = e.what();
  }
  // The same error, but for the pool file's name (each repetition makes its own).
  const auto after_path = [](const std::string& m) { return m.substr(m.find("': ") + 3); };
  ASSERT_THAT(in_process, ::testing::HasSubstr("size 4096 is below the minimum"));
  EXPECT_EQ(after_path(isolated), after_path(in_process));
}

TEST(Record, MergedRepetitionsSumTheirCountsBeforeDividing) {
  bench::Record a, b;
  a.mops_reps = {10, 30};
  a.reps = 2;
  a.seconds_total = 2;
  a.counters.flushes = 100;  // 1 per operation
  for (int i = 0; i < 100; ++i) a.ops.add(Op::read, true);
  b.mops_reps = {20};
  b.reps = 1;
  b.seconds_total = 1;
  b.counters.flushes = 1200;  // 4 per operation
  for (int i = 0; i < 300; ++i) b.ops.add(Op::read, true);
  a.pool_bytes = 7;
  b.pool_bytes = 9;  // only the first repetition measures space
  a.merge_repetitions(b);
  EXPECT_EQ(a.mops_reps, (std::vector<double>{10, 30, 20}));
  EXPECT_EQ(a.reps, 3u);
  EXPECT_DOUBLE_EQ(a.mops, 20);  // the median
  EXPECT_DOUBLE_EQ(a.mops_min, 10);
  EXPECT_DOUBLE_EQ(a.mops_max, 30);
  EXPECT_DOUBLE_EQ(a.seconds_total, 3);
  EXPECT_EQ(a.ops.total(), 400u);
  EXPECT_DOUBLE_EQ(a.flushes_per_op, (1.0 * 100 + 4.0 * 300) / 400);
  EXPECT_EQ(a.pool_bytes, 7);
  EXPECT_FALSE(a.writer_mops.has_value());  // no readwhilewriting writer
}

// readwhilewriting's writer: its rate over every repetition's measured seconds, beside the
// readers' median.
TEST(Record, TheWritersRateIsItsOperationsOverTheMeasuredSeconds) {
  bench::Record a, b;
  a.mops_reps = {1};
  a.seconds_total = 1;
  for (int i = 0; i < 300; ++i) a.writer_ops.add(Op::update, true);
  b.mops_reps = {2};
  b.seconds_total = 2;
  for (int i = 0; i < 900; ++i) b.writer_ops.add(Op::update, true);
  a.finish_throughput();
  ASSERT_TRUE(a.writer_mops.has_value());
  EXPECT_DOUBLE_EQ(*a.writer_mops, 300 / 1e6);
  a.merge_repetitions(b);
  EXPECT_DOUBLE_EQ(*a.writer_mops, 1200 / 3.0 / 1e6);
  EXPECT_DOUBLE_EQ(a.mops, 1.5);  // the readers' median is apart from it
}

// B/elem is the cost per element beyond an empty structure; the empty structure's bytes are
// reported on their own.
TEST(Record, BytesPerElementLeaveTheFixedCostOut) {
  bench::Record r;
  r.elements = 10;
  r.fixed_pool_bytes = 1000;
  r.pool_bytes = 1000 + 64 * 10;
  r.fixed_dram_bytes = 500;
  r.dram_bytes = 500 + 16 * 10;
  r.finish_bytes();
  EXPECT_DOUBLE_EQ(*r.pool_bytes_per_element, 64);
  EXPECT_DOUBLE_EQ(*r.dram_bytes_per_element, 16);
  EXPECT_DOUBLE_EQ(*r.bytes_per_element, 80);
  EXPECT_DOUBLE_EQ(*r.fixed_bytes(), 1500);
  bench::Record no_dram;  // malloc statistics unavailable: no total, no fixed total
  no_dram.elements = 10;
  no_dram.pool_bytes = 640;
  no_dram.finish_bytes();
  EXPECT_DOUBLE_EQ(*no_dram.pool_bytes_per_element, 64);
  EXPECT_FALSE(no_dram.bytes_per_element.has_value());
  EXPECT_FALSE(no_dram.fixed_bytes().has_value());
}

// Ratios pair the repetitions of one round (not the medians), against the structure's transient
// twin and psync-bound of the same workload and thread count.
TEST(Record, RatiosAreTakenRoundByRound) {
  const auto record = [](std::string name, unsigned threads, std::vector<double> reps) {
    bench::Record r;
    r.structure = name;
    r.technique = name.substr(name.find('/') + 1);
    r.workload = "set";
    r.threads = threads;
    r.mops_reps = std::move(reps);
    r.finish_throughput();
    return r;
  };
  std::vector<bench::Record> records = {
      record("hash/transient", 1, {10, 20, 40}),
      record("hash/soft", 1, {8, 10, 36}),
      record("hash/psync-bound", 1, {9, 20, 40}),
      record("hash/transient", 2, {1, 1, 1}),
      record("hash/soft", 2, {1, 1}),      // fewer rounds than its twin: no ratio
      record("list/soft", 1, {5, 5, 5})};  // no twin ran
  bench::add_ratios(records);
  EXPECT_FALSE(records[0].ratio_to_transient.has_value());
  const auto& soft = records[1];
  ASSERT_TRUE(soft.ratio_to_transient.has_value());
  EXPECT_EQ(soft.ratio_to_transient->to, "hash/transient");
  EXPECT_DOUBLE_EQ(soft.ratio_to_transient->median, 0.8);  // rounds: 0.8, 0.5, 0.9
  EXPECT_DOUBLE_EQ(soft.ratio_to_transient->min, 0.5);
  EXPECT_DOUBLE_EQ(soft.ratio_to_transient->max, 0.9);
  EXPECT_EQ(soft.ratio_to_transient->rounds, 3u);
  // Not the ratio of the medians (10 / 20 = 0.5).
  EXPECT_NE(soft.ratio_to_transient->median, soft.mops / records[0].mops);
  ASSERT_TRUE(soft.ratio_to_psync_bound.has_value());
  EXPECT_DOUBLE_EQ(soft.ratio_to_psync_bound->median, 8.0 / 9);  // rounds: 0.889, 0.5, 0.9
  const auto& bound = records[2];
  ASSERT_TRUE(bound.ratio_to_transient.has_value());
  EXPECT_DOUBLE_EQ(bound.ratio_to_transient->median, 1.0);
  EXPECT_FALSE(bound.ratio_to_psync_bound.has_value());
  EXPECT_FALSE(records[4].ratio_to_transient.has_value());
  EXPECT_FALSE(records[5].ratio_to_transient.has_value());
  EXPECT_FALSE(records[5].ratio_to_psync_bound.has_value());
  std::ostringstream table;
  bench::write_ratio_table(table, records);
  EXPECT_THAT(table.str(), ::testing::HasSubstr("0.80 [0.50 - 0.90]"));
}

// A technique with its own transient twin (Fatourou et al.'s combining objects, persistence
// compiled out) is compared with that twin, and its variants too; without it, with the structure's
// "transient".
TEST(Record, TechniqueTwinsComeBeforeTheStructuresTransient) {
  const auto record = [](std::string name, std::vector<double> reps) {
    bench::Record r;
    r.structure = name;
    r.technique = name.substr(name.find('/') + 1);
    r.workload = "pairs";
    r.threads = 2;
    r.mops_reps = std::move(reps);
    r.finish_throughput();
    return r;
  };
  std::vector<bench::Record> records = {
      record("queue/transient", {10, 10}), record("queue/pbcomb-transient", {4, 4}),
      record("queue/pbcomb", {2, 2}), record("queue/pbcomb-durable", {3, 3}),
      record("queue/izraelevitz", {1, 1})};
  bench::add_ratios(records);
  EXPECT_FALSE(records[1].ratio_to_transient.has_value());  // a twin itself
  ASSERT_TRUE(records[2].ratio_to_transient.has_value());
  EXPECT_EQ(records[2].ratio_to_transient->to, "queue/pbcomb-transient");
  EXPECT_DOUBLE_EQ(records[2].ratio_to_transient->median, 0.5);
  ASSERT_TRUE(records[3].ratio_to_transient.has_value());
  EXPECT_EQ(records[3].ratio_to_transient->to, "queue/pbcomb-transient");
  ASSERT_TRUE(records[4].ratio_to_transient.has_value());
  EXPECT_EQ(records[4].ratio_to_transient->to, "queue/transient");
}

// ---- JSON: a small reader, enough to check the output parses and has its fields. ----------

struct Json;
using JsonObject = std::map<std::string, Json>;
using JsonArray = std::vector<Json>;
struct Json {
  std::variant<std::nullptr_t, bool, double, std::string, JsonArray, JsonObject> v;
};

class JsonReader {
 public:
  explicit JsonReader(const std::string& s) : s_(s) {}
  Json document() {
    Json j = value();
    space();
    if (i_ != s_.size()) throw std::runtime_error("trailing text at " + std::to_string(i_));
    return j;
  }

 private:
  void space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  void expect(char c) {
    space();
    if (i_ >= s_.size() || s_[i_] != c)
      throw std::runtime_error(std::string("expected ") + c + " at " + std::to_string(i_));
    ++i_;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      if (s_[i_] == '\\') {
        ++i_;
        if (s_[i_] == 'u') {
          out += static_cast<char>(std::stoi(s_.substr(i_ + 1, 4), nullptr, 16));
          i_ += 4;
        } else {
          out += s_[i_] == 'n' ? '\n' : s_[i_] == 't' ? '\t' : s_[i_] == 'r' ? '\r' : s_[i_];
        }
      } else {
        out += s_[i_];
      }
      ++i_;
    }
    expect('"');
    return out;
  }
  Json value() {
    space();
    if (i_ >= s_.size()) throw std::runtime_error("unexpected end");
    const char c = s_[i_];
    if (c == '{') {
      ++i_;
      JsonObject o;
      space();
      if (s_[i_] == '}') return ++i_, Json{o};
      for (;;) {
        std::string k = string();
        expect(':');
        if (o.count(k) != 0) throw std::runtime_error("duplicate key " + k);
        o[k] = value();
        space();
        if (s_[i_] == ',') {
          ++i_;
          continue;
        }
        expect('}');
        return Json{o};
      }
    }
    if (c == '[') {
      ++i_;
      JsonArray a;
      space();
      if (s_[i_] == ']') return ++i_, Json{a};
      for (;;) {
        a.push_back(value());
        space();
        if (s_[i_] == ',') {
          ++i_;
          continue;
        }
        expect(']');
        return Json{a};
      }
    }
    if (c == '"') return Json{string()};
    if (s_.compare(i_, 4, "null") == 0) return i_ += 4, Json{nullptr};
    if (s_.compare(i_, 4, "true") == 0) return i_ += 4, Json{true};
    if (s_.compare(i_, 5, "false") == 0) return i_ += 5, Json{false};
    std::size_t used = 0;
    const double d = std::stod(s_.substr(i_), &used);
    i_ += used;
    return Json{d};
  }
  const std::string& s_;
  std::size_t i_ = 0;
};

TEST(Output, JsonHasTheRequiredFields) {
  const registry::Entry map_entry = registry::entry_of<MapD>();
  const registry::Entry set_entry = registry::entry_of<SetD>();
  auto records = bench::run_target(bench::target_of<MapD>(map_entry),
                                   quick_config(bench::Workload::set), nullptr);
  const auto unsupported = bench::run_target(bench::target_of<SetD>(set_entry),
                                             quick_config(bench::Workload::pairs), nullptr);
  records.insert(records.end(), unsupported.begin(), unsupported.end());
  records[0].note = "quote \" backslash \\ newline \n tab \t";  // escaping

  std::ostringstream out;
  bench::write_json(out, records, "pmds bench --threads 1,2");
  const std::string text = out.str();
  Json doc;
  ASSERT_NO_THROW(doc = JsonReader(text).document()) << text;
  const auto& top = std::get<JsonObject>(doc.v);
  EXPECT_EQ(std::get<std::string>(top.at("command").v), "pmds bench --threads 1,2");
  const auto& results = std::get<JsonArray>(top.at("results").v);
  ASSERT_EQ(results.size(), records.size());
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = std::get<JsonObject>(results[i].v);
    for (const char* f : {"structure", "workload", "status", "technique", "kind", "criterion"})
      EXPECT_TRUE(std::holds_alternative<std::string>(r.at(f).v)) << f;
    for (const char* f : {"threads", "mops", "mops_min", "mops_max", "flushes_per_op",
                          "fences_per_op", "key_range", "reads_pct", "ops"})
      EXPECT_TRUE(std::holds_alternative<double>(r.at(f).v)) << f;
    EXPECT_TRUE(r.count("bytes_per_element") == 1);
    EXPECT_TRUE(r.count("recovery_ms") == 1);
    EXPECT_EQ(std::get<std::string>(r.at("structure").v), records[i].structure);
    EXPECT_EQ(std::get<double>(r.at("threads").v), records[i].threads);
    EXPECT_DOUBLE_EQ(std::get<double>(r.at("mops").v), records[i].mops);
    const auto& mix = std::get<JsonObject>(r.at("op_mix").v);
    std::uint64_t total = 0;
    for (const auto& [name, counts] : mix)
      total += static_cast<std::uint64_t>(
          std::get<double>(std::get<JsonObject>(counts.v).at("calls").v));
    EXPECT_EQ(total, records[i].ops.total());
  }
  const auto& first = std::get<JsonObject>(results[0].v);
  EXPECT_EQ(std::get<std::string>(first.at("note").v), records[0].note);
  EXPECT_TRUE(std::holds_alternative<double>(first.at("bytes_per_element").v) ||
              !bench::dram_in_use());
  EXPECT_TRUE(std::holds_alternative<std::nullptr_t>(first.at("recovery_ms").v));
  const auto& last = std::get<JsonObject>(results.back().v);
  EXPECT_EQ(std::get<std::string>(last.at("status").v), "unsupported");
  EXPECT_TRUE(std::holds_alternative<std::nullptr_t>(last.at("bytes_per_element").v));
}

TEST(Output, CsvHasAHeaderAndOneRowPerRecord) {
  const registry::Entry entry = registry::entry_of<MapD>();
  auto records =
      bench::run_target(bench::target_of<MapD>(entry), quick_config(bench::Workload::set), nullptr);
  records[0].note = "a, \"b\"";
  std::ostringstream out;
  bench::write_csv(out, records);
  std::istringstream in(out.str());
  std::string header, line;
  std::getline(in, header);
  EXPECT_THAT(header, ::testing::StartsWith("structure,technique,kind,criterion,workload,threads"));
  for (const char* f : {",mops,", ",mops_min,", ",mops_max,", ",flushes_per_op,", ",fences_per_op,",
                        ",bytes_per_element,", ",calls_read,"})
    EXPECT_THAT(header, ::testing::HasSubstr(f));
  int rows = 0;
  while (std::getline(in, line)) {
    ++rows;
    EXPECT_THAT(line, ::testing::StartsWith("test/map,map,map,none,set,"));
  }
  EXPECT_EQ(rows, 2);
  EXPECT_THAT(out.str(), ::testing::HasSubstr("\"a, \"\"b\"\"\""));
  std::ostringstream table;
  bench::write_table(table, records);
  EXPECT_THAT(table.str(), ::testing::HasSubstr("test/map"));
}

}  // namespace
