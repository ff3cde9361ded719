// persistence_cost_bench — what a flush and a fence cost on this machine, in ns per operation.
//
// The durable structures pay for persistence in flushes and fences (Zuriel et al. count fences,
// Fatourou et al. count pwbs); this program puts a price on each, so flush/fence counts per
// operation from the counting backend can be read as time. Measured on three kinds of memory:
//   dram  anonymous private mapping;
//   shm   a file in /dev/shm (tmpfs) mapped MAP_SHARED, as a pool file there would be;
//   file  a file on the disk-backed file system ($TMPDIR or /var/tmp) mapped MAP_SHARED.
// (With no persistent memory on this machine, all three are DRAM behind the page cache: the
// figures price the instructions, not a media write.)
//
// Operations (one benchmark iteration = one operation):
//   store                  one 8-byte store to the same line (the baseline)
//   sfence                 sfence alone
//   store+INSN+sfence/same store, flush that line with INSN, sfence — always the same line
//   store+INSN+sfence/ring ... a new line each time, cycling through 16 KiB (cache-resident)
//   store+INSN+sfence/sweep ... a new line each time, sweeping 64 MiB (a cache miss each time)
//   store+clflush/...      clflush is ordered with stores by itself (Zuriel et al. §6 uses it with
//                          no fence): this prices issuing it; the same line again waits for
//                          the previous write-back. store+clflush+sfence/... waits for it.
//   write+persist/N        write N bytes (one line per store) then pm::persist(N) (flush every
//                          line, then one fence), N = 64, 256, 4096
//   write/N                the same writes alone, to subtract
//   shm/put-floor/V        the least a durable put of a V-byte value costs in a pool the size of
//                          a 1M-key map's (2 GiB of /dev/shm), whatever the structure: one random
//                          8-byte read (finding the key: at least one line no cache holds), then
//                          a line-aligned block of 48 + V bytes (a 32-byte header, a 16-byte key,
//                          the value) written at a random place chosen with what was read, and
//                          pm::persist (one fence). V = 100, 1024. Its inverse is the ceiling of
//                          a durable put's throughput here, what results/pmemkv's write ratios
//                          are read against.
// INSN is clwb or clflushopt where the CPU has it. pm::persist uses the instruction pmds chose at
// start-up (printed first).
//
// Usage: persistence_cost_bench [Google Benchmark flags, e.g. --benchmark_filter=shm]
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cpuid.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "pmds/pm/access.hpp"

namespace {

using pmds::pm::FlushInstruction;

constexpr std::size_t line = pmds::pm::cache_line_size;
constexpr std::size_t region_size = 64u << 20;  // the sweep: larger than any cache here
constexpr std::size_t ring_lines = 256;         // 16 KiB: stays in L1/L2

struct Region {
  std::string name;
  char* base = nullptr;
};

Region map_dram() {
  void* p = mmap(nullptr, region_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("mmap dram");
    std::exit(1);
  }
  std::memset(p, 1, region_size);  // fault every page in before timing
  return {"dram", static_cast<char*>(p)};
}

Region map_file(const std::string& name, const std::string& dir, std::size_t size = region_size) {
  std::string path = dir + "/pmds_persistence_cost_" + name + "_" + std::to_string(getpid());
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
    std::perror(path.c_str());
    std::exit(1);
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  unlink(path.c_str());  // the mapping keeps the file alive; nothing is left behind on exit
  if (p == MAP_FAILED) {
    std::perror("mmap file");
    std::exit(1);
  }
  std::memset(p, 1, size);
  return {name, static_cast<char*>(p)};
}

// The put floor's pool: mapped and faulted in at its first use only (a second or so), never
// unmapped (the process ends after the run).
constexpr std::size_t pool_size = std::size_t{2} << 30;
char* pool_region() {
  static const Region pool = map_file("pool", "/dev/shm", pool_size);
  return pool.base;
}

void register_put_floor() {
  for (std::size_t v : {std::size_t{100}, std::size_t{1024}}) {
    benchmark::RegisterBenchmark(
        ("shm/put-floor/" + std::to_string(v)).c_str(), [v](benchmark::State& s) {
          char* base = pool_region();
          const std::vector<char> node(48 + v, 'v');
          const std::size_t block = (node.size() + line - 1) / line * line;
          const std::size_t blocks = pool_size / block;
          std::uint64_t x = 0x9e3779b97f4a7c15;  // xorshift64
          for (auto _ : s) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // The block depends on the read, as a put's depends on its
            // lookup: the two misses do not overlap.
            const std::uint64_t found =
                *reinterpret_cast<volatile std::uint64_t*>(base + (x % (pool_size / 8)) * 8);
            char* p = base + ((x >> 24) + found) % blocks * block;
            std::memcpy(p, node.data(), node.size());
            pmds::pm::persist(p, node.size());
          }
        });
  }
}

bool cpu_has(int ebx_bit) {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && ((ebx >> ebx_bit) & 1);
}

inline void store_to(char* p, std::uint64_t v) {
  *reinterpret_cast<volatile std::uint64_t*>(p) = v;
}

enum class Pattern { same, ring, sweep };

// Offset of the i-th line the pattern touches.
inline std::size_t offset_of(Pattern pattern, std::size_t i) {
  switch (pattern) {
    case Pattern::same:
      return 0;
    case Pattern::ring:
      return (i % ring_lines) * line;
    case Pattern::sweep:
      return (i * line) % region_size;
  }
  return 0;
}

void register_all(const Region& r) {
  benchmark::RegisterBenchmark((r.name + "/store").c_str(), [base = r.base](benchmark::State& s) {
    std::uint64_t i = 0;
    for (auto _ : s) store_to(base, ++i);
  });
  benchmark::RegisterBenchmark((r.name + "/sfence").c_str(), [](benchmark::State& s) {
    for (auto _ : s) pmds::pm::hw::sfence();
  });

  struct Insn {
    FlushInstruction how;
    const char* name;
    bool fence;
  };
  std::vector<Insn> insns;
  if (cpu_has(24)) insns.push_back({FlushInstruction::clwb, "clwb", true});
  if (cpu_has(23)) insns.push_back({FlushInstruction::clflushopt, "clflushopt", true});
  insns.push_back({FlushInstruction::clflush, "clflush", false});
  insns.push_back({FlushInstruction::clflush, "clflush", true});

  const std::pair<Pattern, const char*> patterns[] = {
      {Pattern::same, "same"}, {Pattern::ring, "ring"}, {Pattern::sweep, "sweep"}};
  for (const Insn& insn : insns)
    for (auto [pattern, pattern_name] : patterns) {
      const std::string name =
          r.name + "/store+" + insn.name + (insn.fence ? "+sfence/" : "/") + pattern_name;
      benchmark::RegisterBenchmark(name.c_str(),
                                   [base = r.base, insn, pattern = pattern](benchmark::State& s) {
                                     std::size_t i = 0;
                                     for (auto _ : s) {
                                       char* p = base + offset_of(pattern, i++);
                                       store_to(p, i);
                                       pmds::pm::hw::flush_line(p, insn.how);
                                       if (insn.fence) pmds::pm::hw::sfence();
                                     }
                                   });
    }

  for (std::size_t n : {std::size_t{64}, std::size_t{256}, std::size_t{4096}}) {
    // Successive iterations use successive n-byte blocks of a 1 MiB window, so every persist
    // flushes lines the writes just dirtied, as a structure's does.
    constexpr std::size_t window = 1u << 20;
    benchmark::RegisterBenchmark((r.name + "/write+persist/" + std::to_string(n)).c_str(),
                                 [base = r.base, n](benchmark::State& s) {
                                   std::size_t block = 0;
                                   for (auto _ : s) {
                                     char* p = base + (block++ * n) % window;
                                     for (std::size_t o = 0; o < n; o += line)
                                       store_to(p + o, block);
                                     pmds::pm::persist(p, n);
                                   }
                                 });
    benchmark::RegisterBenchmark((r.name + "/write/" + std::to_string(n)).c_str(),
                                 [base = r.base, n](benchmark::State& s) {
                                   std::size_t block = 0;
                                   for (auto _ : s) {
                                     char* p = base + (block++ * n) % window;
                                     for (std::size_t o = 0; o < n; o += line)
                                       store_to(p + o, block);
                                     benchmark::ClobberMemory();
                                   }
                                 });
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::printf("pmds flush instruction: %s; clwb %s, clflushopt %s\n",
              pmds::pm::to_string(pmds::pm::flush_instruction()), cpu_has(24) ? "yes" : "no",
              cpu_has(23) ? "yes" : "no");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  const char* tmpdir = std::getenv("TMPDIR");
  std::vector<Region> regions;
  regions.push_back(map_dram());
  regions.push_back(map_file("shm", "/dev/shm"));
  regions.push_back(map_file("file", tmpdir != nullptr && *tmpdir ? tmpdir : "/var/tmp"));
  for (const Region& r : regions) register_all(r);
  register_put_floor();

  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  for (const Region& r : regions) munmap(r.base, region_size);
  return 0;
}
