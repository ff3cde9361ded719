// pool_growth_counting_bench — what growing a pool costs (issue 53's measurement): a structure
// filled from a pool created small, which grows on demand (Pool::grow), against the same fill
// into a pool created at its full size.
//
// For each structure and round, two fills of the same N distinct keys (a fixed pseudo-random
// order), alternating which goes first:
//   grown      the pool created at --initial (16 MiB) with max_size = --target;
//   pre-sized  the pool created at --target, fixed.
// Each fill runs in a forked child on one thread, which times every insert (so the inserts
// during which a growth completed are known by the pool's growth count), reports, and exits
// WITHOUT closing the pool (a crash); this process then times the structure's open (its
// recovery) on that pool and removes it. N is sized so that the pre-sized pool is about 90% used: a
// calibration fill of --calibrate keys measures the pool bytes per element first.
//
// Each fill starts --settle seconds (default 10) after the last pool was removed, so that both
// start from the same memory: on a virtual machine with free page reporting (virtio-balloon, as
// on the 2-core AMD EPYC host of 2026-12-04), memory freed just now is still backed by the host
// and memory freed seconds ago is not, and the pre-sized pool, which allocates all its pages at
// creation, took the warm pages the last fill had freed: its fills' kernel time was 2.8-5.5 s
// without the wait and 7.3-7.6 s with it (4 GiB of hash-bytes/montage; the grown fills' 11.6-13.1
// s either way). Each fill also reports its user and kernel time and minor faults (getrusage).
// Before round 0, --warmup-fills (default 1) untimed fills of the full N into a growing pool: the
// first full fill of a run was the slowest of the run in every run of 2026-12-04 (more user
// time, the same faults), which biased round 0 against whichever fill came first.
//
// Prints, per structure: fill throughput of each (median over rounds), the median and spread of
// the per-round ratio grown / pre-sized, the growths, the p50/p99/max latency of the inserts
// during which a growth completed against the p50 of all inserts, the slowest insert of each
// fill (a growth ahead of need, pm/allocator.hpp, completes on a thread of its own, so an insert
// that waited for it need not be one of those), recovery time of each, and pool bytes per
// element of each. Counting backend: the registry's compiled table (the same for both).
//
// Usage: pool_growth_counting_bench [--structures a,b] [--dir DIR] [--target BYTES]
//          [--initial BYTES] [--rounds R] [--calibrate N] [--settle SECONDS]
//          [--warmup-fills K] [--json FILE]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "pmds/registry/entries.hpp"

namespace {

using namespace pmds;
using Clock = std::chrono::steady_clock;

std::uint64_t key_at(std::uint64_t i) {  // distinct keys (splitmix64 is a bijection), non-zero
  std::uint64_t z = i + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (z ^ (z >> 31)) | 1;
}

struct Fill {
  double seconds = 0;
  std::uint64_t growths = 0;
  double pool_bytes_per_element = 0;
  std::vector<double> growth_op_us;  // the inserts during which the pool grew
  double op_p50_us = 0;
  double op_max_us = 0;  // the slowest insert: a stall on a growth, whichever insert it hit
  double recovery_seconds = 0;
  // The fill's own resource use (getrusage in the child, creation excluded): where a gap
  // between the two pools goes (page faults, kernel time of the growths' fallocate and mmap).
  double user_seconds = 0, system_seconds = 0;
  double minor_faults = 0;
};

struct Usage {
  double user = 0, system = 0, minor_faults = 0;
};
Usage usage_now() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  const auto s = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
  };
  return {s(ru.ru_utime), s(ru.ru_stime), static_cast<double>(ru.ru_minflt)};
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 != 0 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// One fill in a forked child (which crashes at its end), then the timed recovery here.
Fill fill(const registry::Entry& e, const std::string& path, std::size_t initial,
          std::size_t max_size, std::uint64_t n) {
  registry::CreateOptions co;
  co.key_range = n;
  co.pool_size = initial;
  co.max_pool_size = max_size;
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe");
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    nlohmann::json out;
    try {
      auto inst = registry::Instance::create(e, co, path);
      const pm::Pool& pool = *inst.pool();
      std::vector<float> op_us(n);
      std::vector<double> growth_us;
      const Usage u0 = usage_now();
      const auto start = Clock::now();
      for (std::uint64_t i = 0; i < n; ++i) {
        const std::size_t before = pool.growths();
        const auto t0 = Clock::now();
        inst.apply({registry::OpCode::insert, key_at(i), i});
        const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
        op_us[i] = static_cast<float>(us);
        if (pool.growths() != before) growth_us.push_back(us);
      }
      out["seconds"] = std::chrono::duration<double>(Clock::now() - start).count();
      const Usage u1 = usage_now();
      out["user_s"] = u1.user - u0.user;
      out["system_s"] = u1.system - u0.system;
      out["minor_faults"] = u1.minor_faults - u0.minor_faults;
      out["growths"] = pool.growths();
      out["bytes"] =
          static_cast<double>(inst.pool()->allocator().allocated_bytes()) / static_cast<double>(n);
      out["growth_us"] = growth_us;
      out["max_us"] = *std::max_element(op_us.begin(), op_us.end());
      std::nth_element(op_us.begin(), op_us.begin() + static_cast<std::ptrdiff_t>(n / 2),
                       op_us.end());
      out["p50_us"] = op_us[n / 2];
    } catch (const std::exception& ex) {
      out["error"] = ex.what();
    }
    const std::string s = out.dump();
    if (::write(fds[1], s.data(), s.size()) != static_cast<ssize_t>(s.size())) _exit(2);
    _exit(0);  // no close: the pool is left as a crash leaves it
  }
  ::close(fds[1]);
  std::string s;
  char b[65536];
  ssize_t r;
  while ((r = ::read(fds[0], b, sizeof b)) > 0) s.append(b, static_cast<std::size_t>(r));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const auto j = nlohmann::json::parse(s.empty() ? "{}" : s);
  if (j.contains("error") || !j.contains("seconds"))
    throw std::runtime_error(std::string(e.name) + ": " + j.value("error", "the fill died"));
  Fill f;
  f.seconds = j["seconds"];
  f.growths = j["growths"];
  f.pool_bytes_per_element = j["bytes"];
  f.growth_op_us = j["growth_us"].get<std::vector<double>>();
  f.op_p50_us = j["p50_us"];
  f.op_max_us = j["max_us"];
  f.user_seconds = j["user_s"];
  f.system_seconds = j["system_s"];
  f.minor_faults = j["minor_faults"];
  const auto t0 = Clock::now();
  {
    auto inst = registry::Instance::open(e, path, co);
    inst.finish_recovery();
    f.recovery_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  ::unlink(path.c_str());
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pool_growth_counting_bench: a fill into a growing pool against a pre-sized one"};
  std::string structures = "hash/linkfree,hash-bytes/montage,masstree-bytes/incll";
  std::string dir = "/dev/shm", json_file;
  std::size_t target = std::size_t{4} << 30, initial = std::size_t{16} << 20;
  int rounds = 3, warmup_fills = 1;
  std::uint64_t calibrate = 200000;
  double settle_s = 10;
  app.add_option("--structures", structures, "registry names, comma separated");
  app.add_option("--dir", dir, "where the pool files go (default /dev/shm)");
  app.add_option("--target", target, "the size the fill reaches, bytes (default 4 GiB)");
  app.add_option("--initial", initial, "the growing pool's initial size (default 16 MiB)");
  app.add_option("--rounds", rounds, "rounds, each both fills (default 3)");
  app.add_option("--calibrate", calibrate, "keys of the calibration fill (default 200000)");
  app.add_option("--warmup-fills", warmup_fills,
                 "untimed fills before round 0 (default 1): see the comment at the top");
  app.add_option("--json", json_file, "write the results as JSON");
  app.add_option("--settle", settle_s,
                 "seconds to wait before each fill (default 10): see the comment at the top");
  CLI11_PARSE(app, argc, argv);

  nlohmann::json results = nlohmann::json::array();
  std::size_t from = 0;
  while (from <= structures.size()) {
    const std::size_t comma = std::min(structures.find(',', from), structures.size());
    const std::string name = structures.substr(from, comma - from);
    from = comma + 1;
    const registry::Entry* e = registry::find(name);
    if (e == nullptr || !e->durable) {
      std::fprintf(stderr, "no durable structure named %s\n", name.c_str());
      return 2;
    }
    const std::string path = dir + "/pmds-growth-bench-" + std::to_string(::getpid()) + ".pool";
    const Fill cal = fill(*e, path, target, 0, calibrate);
    const auto n =
        static_cast<std::uint64_t>(0.9 * static_cast<double>(target) / cal.pool_bytes_per_element);
    std::printf("%s: %.1f pool bytes per element (calibration), %llu keys to fill %zu MiB\n",
                name.c_str(), cal.pool_bytes_per_element, static_cast<unsigned long long>(n),
                target >> 20);
    for (int w = 0; w < warmup_fills; ++w) {
      std::this_thread::sleep_for(std::chrono::duration<double>(settle_s));
      const Fill f = fill(*e, path, initial, target, n);
      std::printf("  warm-up %d %7.2f s (not counted)\n", w, f.seconds);
      std::fflush(stdout);
    }
    std::vector<double> ratios, grown_s, sized_s;
    std::vector<double> growth_us, max_us_grown, max_us_sized;
    Fill last_grown, last_sized;
    for (int r = 0; r < rounds; ++r) {
      for (int k = 0; k < 2; ++k) {
        const bool grown = (r + k) % 2 == 0;
        std::this_thread::sleep_for(std::chrono::duration<double>(settle_s));
        const Fill f = grown ? fill(*e, path, initial, target, n) : fill(*e, path, target, 0, n);
        (grown ? grown_s : sized_s).push_back(f.seconds);
        (grown ? max_us_grown : max_us_sized).push_back(f.op_max_us);
        if (grown) {
          growth_us.insert(growth_us.end(), f.growth_op_us.begin(), f.growth_op_us.end());
          last_grown = f;
        } else {
          last_sized = f;
        }
        std::printf(
            "  round %d %-9s %7.2f s  %6.3f Mops/s  growths %llu  slowest insert %.0f us  "
            "recovery %.2f s  %.1f B/element  user %.2f s sys %.2f s  %.2fM minor faults\n",
            r, grown ? "grown" : "pre-sized", f.seconds, static_cast<double>(n) / f.seconds * 1e-6,
            static_cast<unsigned long long>(f.growths), f.op_max_us, f.recovery_seconds,
            f.pool_bytes_per_element, f.user_seconds, f.system_seconds, f.minor_faults * 1e-6);
        std::fflush(stdout);
      }
      ratios.push_back(sized_s.back() / grown_s.back());  // throughput grown / pre-sized
    }
    const double lo = *std::min_element(ratios.begin(), ratios.end());
    const double hi = *std::max_element(ratios.begin(), ratios.end());
    std::printf(
        "%s: throughput grown/pre-sized %.3fx (median of %d rounds, %.3f-%.3f); %llu growths, "
        "their inserts p50 %.0f us p99 %.0f us max %.0f us (all inserts p50 %.2f us; slowest, "
        "median over rounds: grown %.0f us, pre-sized %.0f us); recovery %.2f s grown, %.2f s "
        "pre-sized; %.1f / %.1f B/element\n",
        name.c_str(), median(ratios), rounds, lo, hi,
        static_cast<unsigned long long>(last_grown.growths), median(growth_us),
        percentile(growth_us, 0.99), percentile(growth_us, 1.0), last_grown.op_p50_us,
        median(max_us_grown), median(max_us_sized), last_grown.recovery_seconds,
        last_sized.recovery_seconds, last_grown.pool_bytes_per_element,
        last_sized.pool_bytes_per_element);
    results.push_back({{"structure", name},
                       {"dir", dir},
                       {"target_bytes", target},
                       {"initial_bytes", initial},
                       {"keys", n},
                       {"warmup_fills", warmup_fills},
                       {"ratios", ratios},
                       {"grown_seconds", grown_s},
                       {"presized_seconds", sized_s},
                       {"growths", last_grown.growths},
                       {"growth_op_us", growth_us},
                       {"op_p50_us", last_grown.op_p50_us},
                       {"slowest_insert_us_grown", max_us_grown},
                       {"slowest_insert_us_presized", max_us_sized},
                       {"recovery_seconds_grown", last_grown.recovery_seconds},
                       {"recovery_seconds_presized", last_sized.recovery_seconds},
                       {"bytes_per_element_grown", last_grown.pool_bytes_per_element},
                       {"bytes_per_element_presized", last_sized.pool_bytes_per_element}});
  }
  if (!json_file.empty()) std::ofstream(json_file) << results.dump(2) << "\n";
  return 0;
}
