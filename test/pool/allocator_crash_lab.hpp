// The allocator's crash-consistency lab under the simulated backend, shared by
// allocator_crash_sim_test.cpp (the real allocator: no violation allowed) and
// allocator_planted_bug_sim_test.cpp (a planted bug: violations must be found).
//
// A forked child opens a copy of a pool and runs client threads that allocate slots, write a
// live stamp into each and persist it, record them, and free some (clearing the stamp,
// persisted, then free()). At a drawn crash-point event the simulator's crash handler writes
// crash images of the pool (minimum, maximum, random) and the list of slots whose stamp was
// certainly durable and not being freed, then _exit()s. The parent opens every image as a pool
// (as a fresh process would: nothing volatile survives), recovers with is_live = stamp check,
// and checks:
//   - the image opens with no error, and reports a dirty shutdown;
//   - every required (durably stamped) slot is in a used chunk and live;
//   - every slot of every used chunk is exactly one of free or live: allocating every free slot
//     hands out no live slot, none twice, and claims no new chunk; then free_slots() is 0;
//   - used + free chunks = total, and recover() run twice agrees (restartable: it writes nothing).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "pmds/pm/pool.hpp"
#include "pool/pool_test_util.hpp"

namespace alloc_crash {

namespace pm = pmds::pm;
namespace sim = pmds::pm::sim;

inline constexpr std::size_t pool_size(std::size_t chunks) {
  return 2 * 4096 + chunks * (std::size_t{1} << 20);
}
inline constexpr const char* kLayout = "test/alloc-crash";
// Two slot sizes: 4096 (256 per chunk) and 1008 (1040 per chunk), so a run claims several
// chunks of each and can fill the pool.
inline constexpr std::size_t kSizes[2] = {4096, 1008};

inline std::uint64_t stamp_for(const void* slot) {
  return 0x5354414d50000001ull ^ reinterpret_cast<std::uintptr_t>(slot);
}
inline pm::atomic<std::uint64_t>& stamp_word(void* slot) {
  return *reinterpret_cast<pm::atomic<std::uint64_t>*>(slot);
}
inline bool is_live(void* slot, std::size_t = 0) {
  return stamp_word(slot).load() == stamp_for(slot);
}

// What each client thread did, readable by the crash handler while the thread runs: a record
// is published (count) only after its stamp is durable, and unmarked before its stamp is
// cleared.
struct Record {
  std::atomic<void*> slot{nullptr};
  std::atomic<bool> required{false};
};
struct ThreadLog {
  std::unique_ptr<Record[]> records;
  std::atomic<std::size_t> count{0};
};

struct Workload {
  std::size_t chunks = 6;  // pool size: chunks of 1 MiB
  int threads = 2;
  std::size_t ops_per_thread = 700;
  std::uint64_t seed = 1;
};

inline void run_client(pm::Pool& pool, ThreadLog& log, std::size_t ops, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::size_t> mine;  // indices of records still required
  auto& a = pool.allocator();
  for (std::size_t op = 0; op < ops; ++op) {
    if (!mine.empty() && rng() % 10 < 4) {
      const std::size_t k = rng() % mine.size();
      Record& r = log.records[mine[k]];
      mine[k] = mine.back();
      mine.pop_back();
      r.required.store(false);  // before the stamp is cleared
      void* slot = r.slot.load();
      stamp_word(slot).store(0);
      pm::persist(slot, sizeof(std::uint64_t));
      a.free(slot);
      continue;
    }
    void* slot = nullptr;
    try {
      slot = a.allocate(kSizes[rng() % 2]);
    } catch (const pmds::PoolFull&) {
      continue;  // a full pool is an answer, not a crash; frees will make room
    }
    stamp_word(slot).store(stamp_for(slot));
    pm::persist(slot, sizeof(std::uint64_t));
    const std::size_t i = log.count.load(std::memory_order_relaxed);
    log.records[i].slot.store(slot);
    log.records[i].required.store(true);
    log.count.store(i + 1, std::memory_order_release);  // after its stamp is durable
    mine.push_back(i);
  }
}

inline void run_workload(pm::Pool& pool, std::vector<ThreadLog>& logs, const Workload& w) {
  std::vector<std::thread> threads;
  for (int t = 0; t < w.threads; ++t)
    threads.emplace_back(
        [&, t] { run_client(pool, logs[t], w.ops_per_thread, w.seed * 1000 + t); });
  for (auto& th : threads) th.join();
}

inline std::vector<ThreadLog> make_logs(const Workload& w) {
  std::vector<ThreadLog> logs(static_cast<std::size_t>(w.threads));
  for (auto& l : logs) l.records.reset(new Record[w.ops_per_thread]);
  return logs;
}

inline void write_all(const std::string& path, const void* data, std::size_t n) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) ::_exit(90);
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t r = ::write(fd, p, n);
    if (r <= 0) ::_exit(91);
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  ::close(fd);
}

struct Images {
  std::vector<std::string> paths;  // one pool file per image
  std::vector<void*> required;     // slots that must be live in every image
};

inline const std::vector<std::pair<sim::ImageKind, std::uint64_t>>& image_kinds() {
  static const std::vector<std::pair<sim::ImageKind, std::uint64_t>> kinds = {
      {sim::ImageKind::minimum, 0},
      {sim::ImageKind::maximum, 0},
      {sim::ImageKind::random, 1},
      {sim::ImageKind::random, 2}};
  return kinds;
}

// Runs the workload on a copy of `initial` in a forked child, crashing at event `crash_at`
// after the open (or never, if the run ends first: then returns false). `prefix` names the
// image files.
inline bool crash_run(const std::string& initial, const std::string& prefix, const Workload& w,
                      std::uint64_t crash_at, Images& out) {
  const std::string work = prefix + "_work.pool";
  pool_test::write_file(work, pool_test::read_file(initial));
  const std::string required_path = prefix + "_required.bin";
  const int code = pool_test::run_in_child([&] {
    pm::Pool pool = pm::Pool::open(work, kLayout);
    pool.allocator().recover(is_live);
    std::vector<ThreadLog> logs = make_logs(w);
    const std::uintptr_t base = reinterpret_cast<std::uintptr_t>(pool.base());
    sim::set_crash_handler(sim::event_count() + crash_at, [&] {
      // Every other thread is stopped at its next access-layer operation.
      const sim::Snapshot s = sim::snapshot();
      std::size_t region = s.region_count();
      for (std::size_t r = 0; r < s.region_count(); ++r)
        if (reinterpret_cast<std::uintptr_t>(s.region_base(r)) == base) region = r;
      if (region == s.region_count()) ::_exit(92);
      std::vector<unsigned char> image(s.region_size(region));
      std::size_t k = 0;
      for (const auto& [kind, seed] : image_kinds()) {
        s.write_image(region, kind, seed, image.data());
        write_all(prefix + "_img" + std::to_string(k++) + ".pool", image.data(), image.size());
      }
      std::vector<std::uint64_t> required;
      for (ThreadLog& l : logs) {
        const std::size_t n = l.count.load(std::memory_order_acquire);
        for (std::size_t i = 0; i < n; ++i)
          if (l.records[i].required.load())
            required.push_back(reinterpret_cast<std::uintptr_t>(l.records[i].slot.load()));
      }
      write_all(required_path, required.data(), required.size() * sizeof(std::uint64_t));
      // Die at once, as a crash does: no exit processing (ThreadSanitizer's would report the
      // worker threads it finds finished but not joined, and change the exit status).
      ::syscall(SYS_exit_group, 0);
    });
    run_workload(pool, logs, w);
    sim::clear_crash_handler();
    ::_exit(3);  // the run ended before the crash point
    return 4;
  });
  ::unlink(work.c_str());
  if (code == 3) return false;
  EXPECT_EQ(code, 0) << "crash child failed";
  if (code != 0) return false;
  out.paths.clear();
  for (std::size_t k = 0; k < image_kinds().size(); ++k)
    out.paths.push_back(prefix + "_img" + std::to_string(k) + ".pool");
  const std::vector<char> req = pool_test::read_file(required_path);
  ::unlink(required_path.c_str());
  out.required.resize(req.size() / sizeof(std::uint64_t));
  if (!out.required.empty())
    std::memcpy(out.required.data(), req.data(), out.required.size() * sizeof(std::uint64_t));
  return true;
}

// The events one full run takes after the open (no crash), measured in a child.
inline std::uint64_t calibrate(const std::string& initial, const std::string& prefix,
                               const Workload& w) {
  const std::string work = prefix + "_calibrate.pool";
  const std::string result = prefix + "_events.bin";
  pool_test::write_file(work, pool_test::read_file(initial));
  const int code = pool_test::run_in_child([&] {
    pm::Pool pool = pm::Pool::open(work, kLayout);
    std::vector<ThreadLog> logs = make_logs(w);
    const std::uint64_t start = sim::event_count();
    run_workload(pool, logs, w);
    const std::uint64_t events = sim::event_count() - start;
    write_all(result, &events, sizeof events);
    ::_exit(0);
    return 1;
  });
  EXPECT_EQ(code, 0);
  std::uint64_t events = 0;
  const std::vector<char> bytes = pool_test::read_file(result);
  if (bytes.size() == sizeof events) std::memcpy(&events, bytes.data(), sizeof events);
  ::unlink(work.c_str());
  ::unlink(result.c_str());
  return events;
}

// What one image violates (all zero for a correct allocator).
struct Violations {
  std::size_t open_failed = 0;
  std::size_t clean_flag_set = 0;
  std::size_t required_lost = 0;    // a durably stamped slot not live after recovery
  std::size_t live_handed_out = 0;  // a live slot was on a free list
  std::size_t handed_twice = 0;     // a slot was on the free lists twice
  std::size_t new_chunk = 0;        // the free slots ran out before the count said
  std::size_t accounting = 0;       // live + free != slots of used chunks, or chunk counts off
  std::string first;                // the first violation, described

  std::size_t total() const {
    return open_failed + clean_flag_set + required_lost + live_handed_out + handed_twice +
           new_chunk + accounting;
  }
  void note(std::size_t& counter, const std::string& what) {
    ++counter;
    if (first.empty()) first = what;
  }
};

inline Violations check_image(const std::string& path, const std::vector<void*>& required) {
  Violations v;
  pm::Pool pool;
  try {
    pool = pm::Pool::open(path, kLayout);
  } catch (const std::exception& e) {
    v.note(v.open_failed, std::string("open failed: ") + e.what());
    return v;
  }
  if (pool.was_clean_shutdown()) v.note(v.clean_flag_set, "a crash image says clean shutdown");
  auto& a = pool.allocator();
  const pm::AllocatorRecoveryStats stats = a.recover(is_live);
  std::size_t total_slots = 0, used = 0;
  a.for_each_used_chunk([&](std::size_t, void*, std::size_t size, std::size_t) {
    total_slots += a.slots_per_chunk(size);
    ++used;
  });
  if (stats.live_slots + stats.free_slots != total_slots || stats.used_chunks != used ||
      a.used_chunks() != used || a.used_chunks() + a.free_chunks() != a.chunk_count() ||
      a.free_slots() != stats.free_slots)
    v.note(v.accounting, "recovery accounting does not add up");
  const pm::AllocatorRecoveryStats again = a.recover(is_live);
  if (again.live_slots != stats.live_slots || again.free_slots != stats.free_slots)
    v.note(v.accounting, "a second recover() disagrees with the first");
  for (void* p : required) {
    if (a.slot_size_of(p) == 0 || !is_live(p)) {
      std::ostringstream os;
      os << "durably stamped slot " << p
         << " is not live after recovery (in a used chunk: " << (a.slot_size_of(p) != 0) << ")";
      v.note(v.required_lost, os.str());
    }
  }
  // Hand out every free slot, size by size.
  const std::size_t used_before = a.used_chunks();
  std::set<void*> handed;
  for (std::size_t size : kSizes) {
    std::size_t free_of_size = 0;
    a.for_each_slot([&](void* s, std::size_t sz) {
      if (sz == size && !is_live(s)) ++free_of_size;
    });
    for (std::size_t i = 0; i < free_of_size; ++i) {
      void* p = nullptr;
      try {
        p = a.allocate(size);
      } catch (const pmds::PoolFull&) {
        v.note(v.new_chunk, "pool full while free slots remained");
        break;
      }
      if (is_live(p)) v.note(v.live_handed_out, "a live slot was handed out");
      if (!handed.insert(p).second) v.note(v.handed_twice, "a slot was handed out twice");
    }
  }
  if (a.used_chunks() != used_before) v.note(v.new_chunk, "free slots ran out early");
  if (a.free_slots() != 0) v.note(v.accounting, "free slots left after handing out all");
  return v;
}

// The whole lab: calibrate, then crash at `points` drawn events (at every event when the run
// has no more than `points`) and check every image.
// Returns the sum of violations; `crashes` and `images` count what was checked.
inline Violations run_lab(const std::string& name, std::size_t points, const Workload& w,
                          std::size_t& crashes, std::size_t& images) {
  // The model's flush is clwb whatever the host CPU has (and never eADR, which would make
  // every image the maximum one).
  pm::detail::flush_instruction = pm::FlushInstruction::clwb;
  pool_test::TempPath initial(name + "_initial");
  { pm::Pool pool = pm::Pool::create(initial, pool_size(w.chunks), kLayout); }
  const std::string prefix = initial.str() + "_run";
  const std::uint64_t events = calibrate(initial, prefix, w);
  EXPECT_GT(events, 10u);
  Violations sum;
  crashes = images = 0;
  std::mt19937_64 rng(w.seed);
  const bool every = events <= points;
  for (std::size_t i = 0; i < (every ? events : points); ++i) {
    const std::uint64_t at = every ? i : rng() % events;
    Images out;
    if (!crash_run(initial, prefix, w, at, out)) continue;
    ++crashes;
    for (const std::string& img : out.paths) {
      ++images;
      const Violations v = check_image(img, out.required);
      sum.open_failed += v.open_failed;
      sum.clean_flag_set += v.clean_flag_set;
      sum.required_lost += v.required_lost;
      sum.live_handed_out += v.live_handed_out;
      sum.handed_twice += v.handed_twice;
      sum.new_chunk += v.new_chunk;
      sum.accounting += v.accounting;
      if (sum.first.empty() && !v.first.empty())
        sum.first = "crash at event " + std::to_string(at) + ", " + img + ": " + v.first;
      ::unlink(img.c_str());
    }
  }
  return sum;
}

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// PMDS_POOL_CRASH_POINTS, else the fallback (a quarter of it under a sanitizer: every forked
// child pays the sanitizer's start-up and slow simulated operations).
inline std::size_t points_from_env(std::size_t fallback) {
  if (const char* v = std::getenv("PMDS_POOL_CRASH_POINTS")) return std::strtoull(v, nullptr, 10);
  return kSanitized ? std::max<std::size_t>(fallback / 4, 4) : fallback;
}

}  // namespace alloc_crash
