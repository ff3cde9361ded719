// montage_sync_bench — nbMontage §5.3 (Figures 5 and 6) at this machine's scale: its hash
// table (hash/montage) on the 2:1:1 get:insert:remove workload with the background advancer off,
// every worker calling sync() after every `--every` operations of its own. Prints the throughput
// and the latency of sync (median, p99, max over all calls), one line per (threads, every).
//
// Usage: montage_sync_bench [--threads 1,2] [--every 1,10,100,1000,10000] [--keys N]
//                           [--duration S]
// Pools live in /dev/shm. Keys uniform in [1, keys], half of them inserted first (nbMontage §5.1:
// 0.5M of 1M).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "pmds/montage/hash_map.hpp"
#include "pmds/pm/pool.hpp"

namespace {

using namespace pmds;
using Clock = std::chrono::steady_clock;

std::vector<std::size_t> parse_list(const char* s) {
  std::vector<std::size_t> v;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) v.push_back(std::stoull(item));
  return v;
}

struct Result {
  double mops = 0;
  double median_us = 0, p99_us = 0, max_us = 0;
  std::size_t syncs = 0;
};

Result run(std::size_t threads, std::size_t every, std::size_t keys, double duration) {
  const std::string path = "/dev/shm/pmds_montage_sync_" + std::to_string(::getpid()) + ".pool";
  ::unlink(path.c_str());
  const std::size_t pool_size =
      (keys * 160 + (std::size_t{64} << 20)) & ~((std::size_t{1} << 20) - 1);
  Result r;
  {
    pm::Pool pool = pm::Pool::create(path, pool_size, "hash/montage");
    montage::Options o;
    o.background_thread = false;
    montage::HashMap<> map(create_new, pool, std::bit_ceil(keys), o);
    std::mt19937_64 fill(1);
    for (std::size_t i = 0; i < keys / 2;) i += map.insert(1 + fill() % keys, i) ? 1 : 0;
    map.sync();
    std::atomic<bool> go{false}, stop{false};
    std::vector<std::vector<double>> latencies(threads);
    std::vector<std::uint64_t> ops(threads);
    std::vector<std::thread> workers;
    for (std::size_t t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        std::mt19937_64 rng(100 + t);
        while (!go.load()) {
        }
        std::uint64_t n = 0;
        while (!stop.load(std::memory_order_relaxed)) {
          const Key k = 1 + rng() % keys;
          switch (rng() % 4) {
            case 0:
              map.insert(k, n);
              break;
            case 1:
              map.remove(k);
              break;
            default:
              map.get(k);
          }
          if (++n % every == 0) {
            const auto s = Clock::now();
            map.sync();
            latencies[t].push_back(
                std::chrono::duration<double, std::micro>(Clock::now() - s).count());
          }
        }
        ops[t] = n;
      });
    const auto start = Clock::now();
    go.store(true);
    std::this_thread::sleep_for(std::chrono::duration<double>(duration));
    stop.store(true);
    for (auto& w : workers) w.join();
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    std::uint64_t total = 0;
    for (auto n : ops) total += n;
    r.mops = static_cast<double>(total) / elapsed / 1e6;
    std::vector<double> all;
    for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
    std::sort(all.begin(), all.end());
    r.syncs = all.size();
    if (!all.empty()) {
      r.median_us = all[all.size() / 2];
      r.p99_us = all[std::min(all.size() - 1, all.size() * 99 / 100)];
      r.max_us = all.back();
    }
  }
  ::unlink(path.c_str());
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::size_t> threads{1, 2}, every{1, 10, 100, 1000, 10000};
  std::size_t keys = 1'000'000;
  double duration = 1.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--threads")
      threads = parse_list(argv[i + 1]);
    else if (a == "--every")
      every = parse_list(argv[i + 1]);
    else if (a == "--keys")
      keys = std::stoull(argv[i + 1]);
    else if (a == "--duration")
      duration = std::stod(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--threads L] [--every L] [--keys N] [--duration S]\n",
                   argv[0]);
      return 2;
    }
  }
  if (keys < 2 || duration <= 0) {
    std::fprintf(stderr, "montage_sync_bench: --keys must be >= 2 and --duration > 0\n");
    return 2;
  }
  std::printf("%-8s %-8s %10s %10s %12s %10s %10s\n", "threads", "every", "Mops/s", "syncs",
              "median us", "p99 us", "max us");
  for (std::size_t t : threads)
    for (std::size_t e : every) {
      if (t == 0 || e == 0) continue;
      const Result r = run(t, e, keys, duration);
      std::printf("%-8zu %-8zu %10.3f %10zu %12.2f %10.2f %10.2f\n", t, e, r.mops, r.syncs,
                  r.median_us, r.p99_us, r.max_us);
      std::fflush(stdout);
    }
  return 0;
}
