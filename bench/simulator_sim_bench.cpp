// The Px86 simulator's own speed (simulated backend): access-layer operations per second and
// crash-point events (fences, RMWs, clflushes) per second, with 1 and 2 threads. Every operation
// takes the simulator's one lock, so 2 threads measure contention, not scaling.
//
//   build/sim/bench/simulator_sim_bench                 (all patterns, 1 and 2 threads)
//   build/sim/bench/simulator_sim_bench --benchmark_filter=Persist
//
// Counters: ops/s = access-layer calls per second (summed over threads, wall time);
// events/s = crash-point events per second.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <new>

#include "pmds/pm/access.hpp"

namespace {

namespace pm = pmds::pm;
namespace sim = pmds::pm::sim;

constexpr std::size_t kRegionLines = 1024;  // 64 KiB attached region
alignas(64) unsigned char region[kRegionLines * pm::cache_line_size];

// Thread t works in its own lines [t * 256, t * 256 + 256).
pm::atomic<std::uint64_t>& word(int thread, std::size_t i) {
  auto* p = &region[(static_cast<std::size_t>(thread) * 256 + i % 256) * pm::cache_line_size];
  return *std::launder(reinterpret_cast<pm::atomic<std::uint64_t>*>(p));
}

void report(benchmark::State& state, double ops_per_iteration, double events_per_iteration) {
  const auto n = static_cast<double>(state.iterations());
  state.counters["ops/s"] = benchmark::Counter(n * ops_per_iteration, benchmark::Counter::kIsRate);
  state.counters["events/s"] =
      benchmark::Counter(n * events_per_iteration, benchmark::Counter::kIsRate);
}

// The durable-update pattern: store, clwb, sfence (3 operations, 1 event).
void Persist(benchmark::State& state) {
  std::uint64_t i = 0;
  for (auto _ : state) {
    auto& x = word(state.thread_index(), i);
    x.store(++i);
    pm::flush(&x);
    pm::fence();
  }
  report(state, 3, 1);
}

// A node initialisation: 8 stores to one line, one clwb, one sfence (10 operations, 1 event).
void PersistLine(benchmark::State& state) {
  std::uint64_t i = 0;
  for (auto _ : state) {
    auto& first = word(state.thread_index(), i++);
    auto* line = &first;
    for (int k = 0; k < 8; ++k) line[k].store(i);
    pm::flush(line);
    pm::fence();
  }
  report(state, 10, 1);
}

// A CAS followed by a clwb of its line, drained by the next CAS (2 operations, 1 event).
void CasFlush(benchmark::State& state) {
  std::uint64_t i = 0;
  for (auto _ : state) {
    auto& x = word(state.thread_index(), i++);
    std::uint64_t expected = x.load(std::memory_order_relaxed);
    x.compare_exchange_strong(expected, expected + 1);
    pm::flush(&x);
  }
  report(state, 3, 1);
}

// Loads of attached words with no undetermined store (1 operation, no event).
void Load(benchmark::State& state) {
  std::uint64_t i = 0, sum = 0;
  for (auto _ : state) sum += word(state.thread_index(), i++).load();
  benchmark::DoNotOptimize(sum);
  report(state, 1, 0);
}

// Fences alone: the cheapest event (1 operation, 1 event).
void Fence(benchmark::State& state) {
  for (auto _ : state) pm::fence();
  report(state, 1, 1);
}

BENCHMARK(Persist)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(PersistLine)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(CasFlush)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(Load)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(Fence)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  // Measure the model with clwb whatever the host has (an eADR host would record nothing).
  pm::detail::flush_instruction = pm::FlushInstruction::clwb;
  for (std::size_t i = 0; i < sizeof region / 8; ++i)
    new (&region[i * 8]) pm::atomic<std::uint64_t>(0);
  sim::attach(region, sizeof region);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  const sim::Stats st = sim::stats();
  std::printf(
      "simulator after the run: %llu events, %llu recorded stores, %zu undetermined lines\n",
      static_cast<unsigned long long>(st.events),
      static_cast<unsigned long long>(st.recorded_stores), st.undetermined_lines);
  sim::detach(region);
  return 0;
}
