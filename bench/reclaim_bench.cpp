// reclaim_bench — the xenium-vs-minimal epoch reclamation comparison that decides
// pmds::reclaim::EpochDomain (reclaim/epoch.hpp: use xenium unless it is more than 10% slower
// than a minimal epoch scheme on a list benchmark at 1 and 2 threads).
//
// A small private Harris-Michael lock-free list (DRAM nodes, new/delete) with a key range of
// 1024, prefilled with 512 random keys; uniform keys; reads x%, the rest split evenly between
// insert and remove (docs/ARCHITECTURE.md §6, Zuriel et al.'s list setting). Each operation pins
// once; the thread that unlinks a node retires it with a deleter that deletes it. For each thread
// count and read ratio, every repetition runs each scheme once (interleaved, so drift hits all
// alike), and the program prints the median throughput, the spread, and the ratios measured
// in this one run. "none" pins nothing and frees retired nodes only after the run: the list's
// cost without reclamation, for reference.
//
// Usage: reclaim_bench [--duration-ms N] [--reps N] [--keys N] [--threads 1,2] [--reads 50,90]
//                      [--only minimal|xenium|none]   (one scheme, nothing printed: for perf)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "pmds/reclaim/epoch.hpp"

namespace {

using pmds::reclaim::MinimalEpochDomain;
using pmds::reclaim::XeniumEpochDomain;

// The reference with no reclamation: per-thread lists of retired nodes, freed after the run.
class NoReclamation {
 public:
  struct Guard {
    ~Guard() {}  // non-trivial, like the real guards (and no unused-variable warning)
  };
  Guard pin() { return {}; }
  template <class T, class D>
  void retire(T* p, D&& deleter) {
    kept_[pmds::thread_id()].items.emplace_back(p, std::forward<D>(deleter));
  }
  ~NoReclamation() {
    for (std::size_t i = 0; i < pmds::max_threads; ++i)
      for (auto& r : kept_[i].items) r.run();
  }

 private:
  struct alignas(64) Slot {
    std::vector<pmds::reclaim::Retired> items;
  };
  std::unique_ptr<Slot[]> kept_{new Slot[pmds::max_threads]};
};

// ---------------------------------------------------------------------------------------------
// Harris-Michael list (Michael 2002): the mark bit of a node's next word says the node is
// logically deleted; searches unlink marked nodes, and the unlinking thread retires them.
template <class Domain>
class List {
  struct Node {
    std::uint64_t key;
    std::atomic<std::uintptr_t> next;
  };
  static constexpr std::uintptr_t mark = 1;
  static Node* node_of(std::uintptr_t w) { return reinterpret_cast<Node*>(w & ~mark); }
  static std::uintptr_t word_of(Node* n) { return reinterpret_cast<std::uintptr_t>(n); }

 public:
  List() {
    tail_ = new Node{UINT64_MAX, 0};
    head_ = new Node{0, word_of(tail_)};
  }
  ~List() {
    for (Node* n = head_; n != nullptr;) {
      Node* next = node_of(n->next.load(std::memory_order_relaxed));
      delete n;
      n = next;
    }
  }

  bool contains(std::uint64_t key) {
    auto guard = domain_.pin();
    Node* curr = node_of(head_->next.load(std::memory_order_acquire));
    while (curr->key < key) curr = node_of(curr->next.load(std::memory_order_acquire));
    return curr->key == key && (curr->next.load(std::memory_order_acquire) & mark) == 0;
  }

  bool insert(std::uint64_t key) {
    auto guard = domain_.pin();
    Node* fresh = nullptr;
    for (;;) {
      auto [prev, curr] = find(key);
      if (curr->key == key) {
        delete fresh;  // never published
        return false;
      }
      if (fresh == nullptr) fresh = new Node{key, 0};
      fresh->next.store(word_of(curr), std::memory_order_relaxed);
      std::uintptr_t expected = word_of(curr);
      if (prev->compare_exchange_strong(expected, word_of(fresh), std::memory_order_acq_rel))
        return true;
    }
  }

  bool remove(std::uint64_t key) {
    auto guard = domain_.pin();
    for (;;) {
      auto [prev, curr] = find(key);
      if (curr->key != key) return false;
      std::uintptr_t next = curr->next.load(std::memory_order_acquire);
      if (next & mark) continue;  // someone else is removing it: find() helps
      if (!curr->next.compare_exchange_strong(next, next | mark, std::memory_order_acq_rel))
        continue;
      std::uintptr_t expected = word_of(curr);
      if (prev->compare_exchange_strong(expected, next, std::memory_order_acq_rel))
        retire(curr);
      else
        find(key);  // unlinks (and retires) it
      return true;
    }
  }

 private:
  // Returns the link that points to the first node with key >= key, and that node, both
  // unmarked at the time they were read; unlinks the marked nodes met on the way.
  std::pair<std::atomic<std::uintptr_t>*, Node*> find(std::uint64_t key) {
  retry:
    std::atomic<std::uintptr_t>* prev = &head_->next;
    Node* curr = node_of(prev->load(std::memory_order_acquire));
    for (;;) {
      const std::uintptr_t next = curr->next.load(std::memory_order_acquire);
      if (next & mark) {
        std::uintptr_t expected = word_of(curr);
        if (!prev->compare_exchange_strong(expected, next & ~mark, std::memory_order_acq_rel))
          goto retry;
        retire(curr);
        curr = node_of(next);
        continue;
      }
      if (curr->key >= key) return {prev, curr};
      prev = &curr->next;
      curr = node_of(next);
    }
  }

  void retire(Node* n) {
    domain_.retire(n, [](Node* dead) { delete dead; });
  }

  Domain domain_;
  Node* head_;
  Node* tail_;
};

// ---------------------------------------------------------------------------------------------

struct Options {
  int duration_ms = 500;
  int reps = 7;
  std::uint64_t keys = 1024;
  std::vector<int> threads = {1, 2};
  std::vector<int> reads = {50, 90};
  std::string only;  // run only this scheme (for profiling): minimal, xenium or none
};

std::vector<int> parse_list(const char* s) {
  std::vector<int> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoi(item));
  return out;
}

struct Rng {
  std::uint64_t state;
  std::uint64_t next() {  // xorshift64*
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545F4914F6CDD1DULL;
  }
};

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Result {
  double mops;          // million operations per second of wall-clock time
  double mops_per_cpu;  // million operations per second of the workers' CPU time
};

// One run of one scheme.
template <class Domain>
Result run_once(const Options& o, int threads, int read_percent, std::uint64_t seed) {
  auto list = std::make_unique<List<Domain>>();
  Rng prefill{seed | 1};
  for (std::uint64_t filled = 0; filled < o.keys / 2;)
    filled += list->insert(1 + prefill.next() % o.keys);

  std::atomic<bool> go{false}, stop{false};
  std::vector<std::uint64_t> ops(static_cast<std::size_t>(threads));
  std::vector<double> cpu(static_cast<std::size_t>(threads));
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      Rng rng{seed * 7919 + static_cast<std::uint64_t>(t) * 104729 + 1};
      std::uint64_t done = 0;
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      const double cpu_start = thread_cpu_seconds();
      while (!stop.load(std::memory_order_relaxed)) {
        for (int i = 0; i < 64; ++i) {
          const std::uint64_t r = rng.next();
          const std::uint64_t key = 1 + (r >> 8) % o.keys;
          const int dice = static_cast<int>(r % 100);
          if (dice < read_percent)
            list->contains(key);
          else if ((dice - read_percent) % 2 == 0)
            list->insert(key);
          else
            list->remove(key);
        }
        done += 64;
      }
      ops[static_cast<std::size_t>(t)] = done;
      cpu[static_cast<std::size_t>(t)] = thread_cpu_seconds() - cpu_start;
    });
  const auto start = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  std::this_thread::sleep_for(std::chrono::milliseconds(o.duration_ms));
  stop.store(true);
  for (auto& w : workers) w.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::uint64_t total = 0;
  for (auto n : ops) total += n;
  double cpu_total = 0;
  for (double c : cpu) cpu_total += c;
  return {static_cast<double>(total) / seconds / 1e6,
          static_cast<double>(total) / cpu_total / 1e6 * threads};
}

// Per-repetition ratios a[i]/b[i]: runs of one repetition are adjacent in time, so pairing
// them cancels slow drift of the machine (other processes share its 2 cores).
std::vector<double> paired_ratios(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> r;
  for (std::size_t i = 0; i < a.size(); ++i) r.push_back(a[i] / b[i]);
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Single-thread costs of the two primitives, in ns: an empty pin (pin + unpin), and a retire
// inside a pin with a deleter that does nothing but count (so malloc/free is not measured).
template <class Domain>
std::pair<double, double> primitive_costs() {
  constexpr int n = 2'000'000;
  static int target;
  long deleted = 0;
  Domain domain;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    auto guard = domain.pin();
  }
  auto t1 = std::chrono::steady_clock::now();
  {
    auto guard = domain.pin();
    (void)guard;
  }
  for (int i = 0; i < n; ++i) {
    auto guard = domain.pin();
    domain.retire(&target, [&deleted](int*) { ++deleted; });
  }
  auto t2 = std::chrono::steady_clock::now();
  const double pin_ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / n;
  const double retire_ns = std::chrono::duration<double, std::nano>(t2 - t1).count() / n - pin_ns;
  return {pin_ns, retire_ns};
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--help" || a == "-h" || v == nullptr) {
      std::printf(
          "usage: %s [--duration-ms N] [--reps N] [--keys N] [--threads 1,2] [--reads 50,90]"
          " [--only minimal|xenium|none]\n",
          argv[0]);
      return a == "--help" || a == "-h" ? 0 : 2;
    }
    if (a == "--duration-ms")
      o.duration_ms = std::stoi(v);
    else if (a == "--reps")
      o.reps = std::stoi(v);
    else if (a == "--keys")
      o.keys = std::stoull(v);
    else if (a == "--threads")
      o.threads = parse_list(v);
    else if (a == "--reads")
      o.reads = parse_list(v);
    else if (a == "--only")
      o.only = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
    ++i;
  }

  if (o.only.empty()) {
    std::printf("Primitives, 1 thread, ns (median of 5): pin+unpin, retire (inside a pin)\n");
    std::vector<double> mp, mr, xp, xr;
    for (int rep = 0; rep < 5; ++rep) {
      auto [a, b] = primitive_costs<MinimalEpochDomain>();
      auto [c, d] = primitive_costs<XeniumEpochDomain>();
      mp.push_back(a), mr.push_back(b), xp.push_back(c), xr.push_back(d);
    }
    std::printf("  minimal  pin %.2f  retire %.2f\n", median(mp), median(mr));
    std::printf("  xenium   pin %.2f  retire %.2f\n\n", median(xp), median(xr));
  }

  std::printf("Harris-Michael list, %llu keys, half full, %d ms x %d reps\n",
              static_cast<unsigned long long>(o.keys), o.duration_ms, o.reps);
  std::printf(
      "wall: Mops/s of wall-clock time, median [min-max]; cpu: Mops per second of the workers'\n"
      "CPU time x threads (robust to other processes taking the cores). Ratios: median over\n"
      "repetitions of the ratio of two schemes within one repetition.\n");
  std::printf("%-4s %-5s %-5s %-22s %-22s %-22s %-9s %-9s\n", "thr", "reads", "time", "minimal",
              "xenium", "none", "xen/min", "min/none");
  for (int threads : o.threads)
    for (int reads : o.reads) {
      std::vector<Result> minimal, xenium, none;
      for (int rep = 0; rep < o.reps; ++rep) {
        const std::uint64_t seed = 0x9E3779B97F4A7C15ULL * static_cast<std::uint64_t>(rep + 1);
        // Rotate the order so that no scheme always runs first (or last) in a repetition.
        for (int k = 0; k < 3; ++k) switch ((rep + k) % 3) {
            case 0:
              if (!o.only.empty() && o.only != "minimal") break;
              minimal.push_back(run_once<MinimalEpochDomain>(o, threads, reads, seed));
              break;
            case 1:
              if (!o.only.empty() && o.only != "xenium") break;
              xenium.push_back(run_once<XeniumEpochDomain>(o, threads, reads, seed));
              break;
            default:
              if (!o.only.empty() && o.only != "none") break;
              none.push_back(run_once<NoReclamation>(o, threads, reads, seed));
              break;
          }
      }
      if (!o.only.empty()) continue;
      for (bool use_cpu : {false, true}) {
        auto pick = [use_cpu](const std::vector<Result>& rs) {
          std::vector<double> v;
          for (const Result& r : rs) v.push_back(use_cpu ? r.mops_per_cpu : r.mops);
          return v;
        };
        auto cell = [](const std::vector<double>& v) {
          char buf[64];
          std::snprintf(buf, sizeof buf, "%.3f [%.3f-%.3f]", median(v),
                        *std::min_element(v.begin(), v.end()),
                        *std::max_element(v.begin(), v.end()));
          return std::string(buf);
        };
        const auto m = pick(minimal), x = pick(xenium), n = pick(none);
        std::printf("%-4d %-5d %-5s %-22s %-22s %-22s %-9.3f %-9.3f\n", threads, reads,
                    use_cpu ? "cpu" : "wall", cell(m).c_str(), cell(x).c_str(), cell(n).c_str(),
                    median(paired_ratios(x, m)), median(paired_ratios(m, n)));
      }
      std::fflush(stdout);
    }
  return 0;
}
