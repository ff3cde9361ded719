// soft_recovery_bench — how long SOFT's recovery (Zuriel et al. §4.6) takes on one thread: open a
// pool holding N keys and rebuild the list, hash set or skip list from the durable areas (scan
// every slot, keep the valid undeleted PNodes, sort, link; no flush). The target is at most
// 0.5 s for 1M keys.
//
// For each structure: a child process creates a pool in /dev/shm, inserts N distinct random keys
// and exits WITHOUT closing the pool (a process crash: recovery runs on a dirty pool); this
// process then opens the pool and times Pool::open and the structure's open (its recovery)
// separately, `--repeat` times (closing cleanly in between; recovery does the same work after a
// clean close). Prints one line per run and the median.
//
// Usage: soft_recovery_bench [--keys N] [--repeat R] [--only list|hash|skiplist]
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "pmds/linkfree_soft/soft_list.hpp"
#include "pmds/linkfree_soft/soft_skiplist.hpp"
#include "pmds/pm/pool.hpp"

namespace {

using namespace pmds;

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// This thread's CPU time (user + system): on a loaded machine (2 cores shared) it tells what the
// recovery costs apart from time spent waiting for a core.
double thread_cpu_seconds() {
  timespec ts;
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

template <class Set, class Make>
void run(const char* name, std::size_t keys, int repeat, Make make) {
  const std::string path = "/dev/shm/pmds_soft_recovery_" + std::to_string(::getpid()) + ".pool";
  ::unlink(path.c_str());
  const std::size_t pool_size =
      (keys * 64 * 5 / 4 + (std::size_t{64} << 20)) & ~((std::size_t{1} << 20) - 1);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Distinct random keys, inserted in descending order (a list then inserts at its head).
    std::mt19937_64 rng(7);
    std::vector<Key> k(keys);
    for (auto& x : k) x = 1 + rng() % (std::uint64_t{1} << 40);
    std::sort(k.begin(), k.end());
    k.erase(std::unique(k.begin(), k.end()), k.end());
    while (k.size() < keys) k.push_back(k.back() + 1);
    auto pool = pm::Pool::create(path, pool_size, name);
    auto set = make(pool, create_new);
    for (auto it = k.rbegin(); it != k.rend(); ++it)
      if (!set->insert(*it, *it / 3)) ::_exit(2);
    ::_exit(0);  // no close: the pool is dirty, as after a crash
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "%s: the filling process failed\n", name);
    std::exit(1);
  }
  std::vector<double> recover_times, recover_cpu_times;
  for (int r = 0; r < repeat; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    auto pool = pm::Pool::open(path, name);
    const double open_s = seconds_since(t0);
    const bool dirty = !pool.was_clean_shutdown();
    t0 = std::chrono::steady_clock::now();
    const double cpu0 = thread_cpu_seconds();
    auto set = make(pool, open_existing);
    const double recover_s = seconds_since(t0);
    const double recover_cpu = thread_cpu_seconds() - cpu0;
    const auto& st = set->recovery_stats();
    std::printf(
        "%-14s keys %zu  run %d (%s pool)  Pool::open %.3f s  recovery %.3f s wall, %.3f s CPU "
        "(live %zu, slots scanned %zu)\n",
        name, keys, r + 1, dirty ? "dirty" : "clean", open_s, recover_s, recover_cpu, st.live_slots,
        st.slots_scanned);
    if (st.live_slots != keys) {
      std::fprintf(stderr, "%s: recovered %zu keys, expected %zu\n", name, st.live_slots, keys);
      std::exit(1);
    }
    recover_times.push_back(recover_s);
    recover_cpu_times.push_back(recover_cpu);
  }
  std::sort(recover_times.begin(), recover_times.end());
  std::sort(recover_cpu_times.begin(), recover_cpu_times.end());
  std::printf(
      "%-14s keys %zu  median recovery %.3f s wall, %.3f s CPU, over %d runs (one "
      "thread)\n\n",
      name, keys, recover_times[recover_times.size() / 2],
      recover_cpu_times[recover_cpu_times.size() / 2], repeat);
  ::unlink(path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t keys = 1'000'000;
  int repeat = 3;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--keys" && i + 1 < argc) {
      keys = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--keys N] [--repeat R] [--only list|hash|skiplist]\n",
                   argv[0]);
      return a == "--help" ? 0 : 2;
    }
  }
  if (keys == 0) keys = 1;
  std::printf("SOFT recovery, %zu keys, one thread (pool files in /dev/shm)\n\n", keys);
  if (only.empty() || only == "list")
    run<linkfree_soft::SoftList<>>("list/soft", keys, repeat, [](pm::Pool& p, auto tag) {
      return std::make_unique<linkfree_soft::SoftList<>>(tag, p);
    });
  if (only.empty() || only == "hash")
    run<linkfree_soft::SoftHashSet<>>("hash/soft", keys, repeat, [keys](pm::Pool& p, auto tag) {
      if constexpr (std::is_same_v<decltype(tag), CreateTag>)
        return std::make_unique<linkfree_soft::SoftHashSet<>>(tag, p, std::bit_ceil(keys));
      else
        return std::make_unique<linkfree_soft::SoftHashSet<>>(tag, p);
    });
  if (only.empty() || only == "skiplist")
    run<linkfree_soft::SoftSkipList<>>("skiplist/soft", keys, repeat, [](pm::Pool& p, auto tag) {
      return std::make_unique<linkfree_soft::SoftSkipList<>>(tag, p);
    });
  return 0;
}
