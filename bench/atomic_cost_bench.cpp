// atomic_cost_bench — does pm::atomic cost anything under the hardware backend?
// (docs/ARCHITECTURE.md §2: "pm::atomic<T> must compile to the same code as std::atomic<T>; a
// benchmark shows it".)
//
// The same Harris–Michael list (algo/harris_michael_list.hpp) on the transient policy twice:
// words of std::atomic (TransientPolicy<StdWords>) and of pm::atomic (TransientPolicy<PmWords>).
// Key range 1024, prefilled with 512 random keys, uniform keys, 90% contains, 5% insert,
// 5% remove (docs/ARCHITECTURE.md §6, Zuriel et al.'s list setting). For each thread count, every
// repetition runs both variants back to back on fresh lists, alternating which goes first, so
// drift and noise from other processes hit both alike; the program prints each variant's median
// throughput and spread, and the median of the per-repetition ratios pm::atomic / std::atomic,
// measured in this one run. The project's requirement: that ratio within 2% of 1.
// Two throughputs per run: operations per wall-clock second, and operations per second of the
// workers' own CPU time (CLOCK_THREAD_CPUTIME_ID). On a machine shared with other jobs the
// workers are descheduled at random, which scatters the first; the second counts only the time
// the code ran, so it is the steadier measure of what the words cost.
//
// Usage: atomic_cost_bench [--duration-ms N] [--reps N] [--threads 1,2] [--keys N] [--reads P]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "pmds/algo/harris_michael_list.hpp"

namespace {

using pmds::Key;

struct Options {
  int duration_ms = 500;
  int reps = 11;
  std::vector<int> threads = {1, 2};
  Key keys = 1024;
  int reads = 90;
};

std::uint64_t next_random(std::uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Throughput {
  double wall_mops = 0;  // operations / wall-clock seconds / 1e6
  double cpu_mops = 0;   // operations / workers' CPU seconds / 1e6 (per thread, summed)
};

// One timed run on a fresh, prefilled list.
template <class Policy>
Throughput run_once(const Options& o, int threads, std::uint64_t seed) {
  pmds::algo::HarrisMichaelList<Policy> list;
  std::uint64_t s = seed | 1;
  for (Key filled = 0; filled < o.keys / 2;)
    filled += list.insert(1 + next_random(s) % o.keys, 1) ? 1 : 0;

  std::atomic<int> ready{0};
  std::atomic<bool> go{false}, stop{false};
  std::vector<std::uint64_t> done(threads, 0);
  std::vector<double> cpu(threads, 0);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::uint64_t r = seed * 7919 + static_cast<std::uint64_t>(t) * 104729 + 1;
      std::uint64_t ops = 0, sink = 0;
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      const double cpu_start = thread_cpu_seconds();
      while (!stop.load(std::memory_order_relaxed)) {
        for (int i = 0; i < 64; ++i) {
          const std::uint64_t x = next_random(r);
          const Key k = 1 + (x >> 8) % o.keys;
          const int op = static_cast<int>(x % 100);
          if (op < o.reads)
            sink += list.contains(k);
          else if (op < o.reads + (100 - o.reads) / 2)
            sink += list.insert(k, x);
          else
            sink += list.remove(k);
        }
        ops += 64;
      }
      cpu[t] = thread_cpu_seconds() - cpu_start;
      done[t] = ops + (sink & 0);  // sink keeps the calls observable
    });
  }
  while (ready.load() != threads) {
  }
  const auto start = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  std::this_thread::sleep_for(std::chrono::milliseconds(o.duration_ms));
  stop.store(true);
  for (auto& w : workers) w.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Throughput r;
  std::uint64_t total = 0;
  for (int t = 0; t < threads; ++t) {
    total += done[t];
    r.cpu_mops += static_cast<double>(done[t]) / cpu[t] / 1e6;
  }
  r.wall_mops = static_cast<double>(total) / seconds / 1e6;
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::atoi(item.c_str()));
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "atomic_cost_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--duration-ms") {
      o.duration_ms = std::atoi(value());
    } else if (a == "--reps") {
      o.reps = std::atoi(value());
    } else if (a == "--threads") {
      o.threads = parse_list(value());
    } else if (a == "--keys") {
      o.keys = std::strtoull(value(), nullptr, 10);
    } else if (a == "--reads") {
      o.reads = std::atoi(value());
    } else {
      std::fprintf(stderr,
                   "usage: atomic_cost_bench [--duration-ms N] [--reps N] [--threads 1,2] "
                   "[--keys N] [--reads P]\n");
      std::exit(a == "--help" ? 0 : 2);
    }
  }
  if (o.duration_ms <= 0 || o.reps <= 0 || o.keys < 2 || o.reads < 0 || o.reads > 100 ||
      o.threads.empty()) {
    std::fprintf(stderr, "atomic_cost_bench: bad option value\n");
    std::exit(2);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  std::printf(
      "Harris-Michael list, transient policy: std::atomic vs pm::atomic words (backend %s)\n"
      "keys %llu (prefill half), %d%% contains, rest insert/remove; %d reps x %d ms per "
      "variant\n\n",
      pmds::pm::to_string(pmds::pm::backend), static_cast<unsigned long long>(o.keys), o.reads,
      o.reps, o.duration_ms);
  std::printf("%-8s %-7s %-22s %-22s %-12s %s\n", "threads", "time", "std::atomic Mops/s",
              "pm::atomic Mops/s", "ratio pm/std", "ratio min..max");
  for (int threads : o.threads) {
    std::vector<double> with_std[2], with_pm[2], ratios[2];  // [0] wall, [1] CPU time
    for (int rep = 0; rep < o.reps; ++rep) {
      const std::uint64_t seed = 1000 + static_cast<std::uint64_t>(rep);
      Throughput s, p;
      if (rep % 2 == 0) {
        s = run_once<pmds::algo::transient>(o, threads, seed);
        p = run_once<pmds::algo::transient_pm_atomic>(o, threads, seed);
      } else {
        p = run_once<pmds::algo::transient_pm_atomic>(o, threads, seed);
        s = run_once<pmds::algo::transient>(o, threads, seed);
      }
      const double sv[2] = {s.wall_mops, s.cpu_mops}, pv[2] = {p.wall_mops, p.cpu_mops};
      for (int m = 0; m < 2; ++m) {
        with_std[m].push_back(sv[m]);
        with_pm[m].push_back(pv[m]);
        ratios[m].push_back(pv[m] / sv[m]);
      }
    }
    auto spread = [](const std::vector<double>& v) {
      char b[64];
      std::snprintf(b, sizeof b, "%.3f (%.2f..%.2f)", median(v),
                    *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
      return std::string(b);
    };
    for (int m = 0; m < 2; ++m)
      std::printf("%-8d %-7s %-22s %-22s %-12.4f %.3f..%.3f\n", threads, m == 0 ? "wall" : "cpu",
                  spread(with_std[m]).c_str(), spread(with_pm[m]).c_str(), median(ratios[m]),
                  *std::min_element(ratios[m].begin(), ratios[m].end()),
                  *std::max_element(ratios[m].begin(), ratios[m].end()));
  }
  return 0;
}
