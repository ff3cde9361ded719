// What absolute pointers save over offset pointers (pool.hpp's design decision).
//
// Traverses a singly linked list of 64-byte nodes (the node size of the sets) three ways:
//   raw            next is a plain pointer: n = n->next
//   offset         next is an offset from the pool base, the base held in a register:
//                  n = base + n->next
//   offset_reload  the same, but the base is re-read from memory at every hop (a base kept in a
//                  pool object the compiler cannot prove unchanged, e.g. behind an atomic)
// over lists of 1Ki, 32Ki and 1Mi nodes (64 KiB: L1/L2; 2 MiB: L2/L3; 64 MiB: DRAM), in address
// order (prefetch-friendly) or in a random permutation (every hop a dependent miss once the
// list outgrows the caches). Each node holds both links, so the three traversals touch the same
// lines in the same order; one benchmark case runs them in turn, repeatedly, and keeps each one's
// fastest traversal, so that load from other processes (this machine is shared) biases none of
// them. Counters: raw_ns_per_hop, and offset / reload = time relative to raw (>1: slower).
//
//   pointer_cost_bench [--benchmark_min_time=...]
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

namespace {

struct alignas(64) Node {
  Node* next;            // raw
  std::uint64_t offset;  // offset of the next node from the base; 0 ends the list
  std::uint64_t value;
};
static_assert(sizeof(Node) == 64);

std::atomic<char*> g_base{nullptr};  // the "pool object" of offset_reload

__attribute__((noinline)) std::uint64_t traverse_raw(const Node* head) {
  std::uint64_t sum = 0;
  for (const Node* n = head; n != nullptr; n = n->next) sum += n->value;
  return sum;
}

__attribute__((noinline)) std::uint64_t traverse_offset(const char* base, std::uint64_t head) {
  std::uint64_t sum = 0;
  for (std::uint64_t off = head; off != 0;) {
    const auto* n = reinterpret_cast<const Node*>(base + off);
    sum += n->value;
    off = n->offset;
  }
  return sum;
}

__attribute__((noinline)) std::uint64_t traverse_offset_reload(std::uint64_t head) {
  std::uint64_t sum = 0;
  for (std::uint64_t off = head; off != 0;) {
    const auto* n = reinterpret_cast<const Node*>(g_base.load(std::memory_order_relaxed) + off);
    sum += n->value;
    off = n->offset;
  }
  return sum;
}

template <class F>
double seconds(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  benchmark::DoNotOptimize(f());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void BM_traverse(benchmark::State& state) {
  const auto nodes = static_cast<std::size_t>(state.range(0));
  const bool shuffled = state.range(1) != 0;
  const std::size_t bytes = (nodes + 1) * sizeof(Node);
  auto* base = static_cast<char*>(
      ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (base == MAP_FAILED) std::abort();
  std::vector<std::uint32_t> order(nodes);  // slot 0 unused: offset 0 ends the list
  std::iota(order.begin(), order.end(), 1u);
  if (shuffled) std::shuffle(order.begin(), order.end(), std::mt19937_64(42));
  auto* slot = reinterpret_cast<Node*>(base);
  for (std::size_t i = 0; i < nodes; ++i) {
    Node& n = slot[order[i]];
    n.value = i;
    n.next = i + 1 < nodes ? &slot[order[i + 1]] : nullptr;
    n.offset = i + 1 < nodes ? order[i + 1] * sizeof(Node) : 0;
  }
  g_base.store(base);
  const Node* head = &slot[order[0]];
  const std::uint64_t head_offset = order[0] * sizeof(Node);

  double raw = 1e30, offset = 1e30, reload = 1e30;
  for (auto _ : state) {
    raw = std::min(raw, seconds([&] { return traverse_raw(head); }));
    offset = std::min(offset, seconds([&] { return traverse_offset(base, head_offset); }));
    reload = std::min(reload, seconds([&] { return traverse_offset_reload(head_offset); }));
  }
  state.counters["raw_ns_per_hop"] = raw * 1e9 / static_cast<double>(nodes);
  state.counters["offset"] = offset / raw;
  state.counters["reload"] = reload / raw;
  std::printf(
      "pointer_cost nodes=%zu shuffled=%d raw_ns_per_hop=%.2f offset/raw=%.3f "
      "reload/raw=%.3f\n",
      nodes, shuffled ? 1 : 0, raw * 1e9 / static_cast<double>(nodes), offset / raw, reload / raw);
  ::munmap(base, bytes);
}

// Enough traversals for a stable minimum: many for the cache-resident lists, few for the
// DRAM-bound shuffled one (0.4-0.7 s per traversal here).
BENCHMARK(BM_traverse)
    ->ArgNames({"nodes", "shuffled"})
    ->Args({1 << 10, 0})
    ->Args({1 << 10, 1})
    ->Args({1 << 15, 0})
    ->Args({1 << 15, 1})
    ->Iterations(500)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_traverse)
    ->ArgNames({"nodes", "shuffled"})
    ->Args({1 << 20, 0})
    ->Iterations(100)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_traverse)
    ->ArgNames({"nodes", "shuffled"})
    ->Args({1 << 20, 1})
    ->Iterations(7)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
