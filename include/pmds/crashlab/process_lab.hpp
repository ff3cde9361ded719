// pmds crash lab — real process crashes (docs/ARCHITECTURE.md §3, "Process crashes"). Hardware
// (or counting) backend: the workload runs at full speed with real concurrency.
//
// run_process_crashes(entry, options): one real pool file (on /dev/shm, or $PMDS_CRASHLAB_DIR)
// goes through `crashes` rounds. In each round a forked child opens the pool (recovering what
// the previous round left), runs the workload threads, and is killed with SIGKILL at a moment
// drawn from the seed; its history is recorded in a file-backed shared mapping, so it survives
// the kill (the page cache keeps every store of a killed process). Then a fresh process (this
// program in the "recover" role) reopens the pool, recovers, counts the allocator's slots, reads
// the contents back and closes the pool cleanly; the round is judged as the simulated lab's
// crashes are (crashlab/verdict.hpp: recovery, leak, the entry's criterion), its history
// starting from the contents the previous round's recovery read. The next round continues on
// the same pool: what the simulated lab's continuation checks, these rounds do by themselves.
// In some rounds (killed_recovery_percent) a first recovery process is killed with SIGKILL at a
// random moment of its recovery before the checked one runs: recovery must restart from
// wherever a crash left it.
// With lazy recovery the check does not close the pool, so every round's workload process
// opens it as after a crash.
//
// A process crash loses no store (the page cache survives it), so this tests recovery logic,
// leaks and detectability on a real file, not flushes; the kill moments are real time, so a
// round is not exactly replayable: a violation reports its seed, and the full history is kept.
// PMDS_CRASHLAB_DUMP=DIR writes every checked history to DIR.
#pragma once

#if defined(PMDS_BACKEND_SIMULATED)
#error "pmds/crashlab/process_lab.hpp runs real processes: use the hardware or counting backend"
#endif

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "pmds/crashlab/child.hpp"
#include "pmds/crashlab/entries.hpp"
#include "pmds/crashlab/history.hpp"
#include "pmds/crashlab/process.hpp"
#include "pmds/crashlab/report.hpp"
#include "pmds/crashlab/verdict.hpp"
#include "pmds/crashlab/workload.hpp"
#include "pmds/registry/descriptor.hpp"

namespace pmds::crashlab {

struct ProcessOptions {
  // 100 operations per thread: a thread the OS deschedules just before the kill leaves an
  // operation pending across the whole history, and the linearizability search grows with the
  // history's length times that overlap.
  WorkloadOptions workload{.threads = 3, .ops = 100};
  // Operations per thread for a queue, stack or priority queue, when fewer than workload.ops:
  // their histories are checked as one object, and with an operation left pending across
  // much of the history by a descheduled thread the search outgrows any limit (a 300-operation
  // queue/izraelevitz history stayed undecided for 2.5 minutes; 2-core AMD EPYC).
  std::size_t container_ops = 40;
  std::uint64_t seed = 1;
  std::uint64_t crashes = 20;
  std::uint64_t pool_size = 32ull << 20;
  double recovery_timeout_s = 30;
  // lincheck's limit per partition of up to 100 operations, retried once at 4x; a history it
  // still cannot decide is a violation ("undecided", crashlab/verdict.hpp).
  double check_timeout_s = 10;
  bool stop_at_first_violation = false;
  std::size_t keep_details = 3;
  bool keep_histories = false;
  std::string command = "pmds crashtest";
  // Rounds whose recovery is first run in a process killed with SIGKILL at a moment drawn over
  // the last recovery's duration, before the recovery that is checked: recovery must be
  // restartable wherever a crash interrupts it (crashlab/child.hpp, "stop=recovery").
  unsigned killed_recovery_percent = 50;
  // Growth rounds: the pool starts at one chunk and grows on demand up to pool_size
  // (Pool::grow). While a round's workload runs, the lab watches the file's length, and when it
  // grows kills the workload process within a drawn 0-60 us (a round that does not grow runs to
  // its end), so that kills land inside a growth: between the file's extension, its mapping and
  // the header's write-backs, or in the first claims of the new chunks.
  // LabResult::growth_kills counts the kills after which the header still records the growth
  // as begun, or the file is longer than the header says. A round whose pool did not grow
  // gives the next round a new pool, so that growth goes on. No prefill: it runs before the
  // watch starts, and the workload is what must grow the pool.
  bool grow = false;
  std::function<void(const LabResult&)> progress;  // after each process crash
};

namespace detail {

// A file-backed shared mapping for a child's history: it survives the child's SIGKILL.
class SharedLogFile {
 public:
  SharedLogFile(const std::string& path, std::size_t bytes) : file_(path), bytes_(bytes) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) throw Error("pmds crashlab: cannot create " + path);
    if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      ::close(fd);
      throw Error("pmds crashlab: cannot size " + path);
    }
    memory_ = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (memory_ == MAP_FAILED) throw Error("pmds crashlab: cannot map " + path);
  }
  ~SharedLogFile() { ::munmap(memory_, bytes_); }
  SharedLogFile(const SharedLogFile&) = delete;
  SharedLogFile& operator=(const SharedLogFile&) = delete;
  void* memory() const { return memory_; }
  std::size_t bytes() const { return bytes_; }

 private:
  ScratchFile file_;
  std::size_t bytes_;
  void* memory_ = nullptr;
};

// The child of one round: open (recover), run until killed (or done).
[[noreturn]] inline void process_round_child(const registry::Entry& e, const ProcessOptions& o,
                                             const std::string& pool_path, HistoryLog log,
                                             const Workload& w, bool prefill, int ready_fd) {
  try {
    const registry::CreateOptions co = create_options(o.workload);
    auto inst = registry::Instance::open(e, pool_path, co);
    const std::size_t threads = o.workload.threads;
    if (prefill)
      for (const auto& op : w.prefill) record_operation(log, inst, threads, op);
    // All threads start together (so they overlap), and the parent's kill timer with them.
    std::atomic<std::size_t> arrived{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> workers;
    for (std::size_t t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        arrived.fetch_add(1);
        while (!go.load()) std::this_thread::yield();
        for (const auto& op : w.per_thread[t]) record_operation(log, inst, t, op);
      });
    while (arrived.load() < threads) std::this_thread::yield();
    write_all(ready_fd, "r");
    const auto started = std::chrono::steady_clock::now();
    go.store(true);
    for (auto& th : workers) th.join();
    // The workload is over: how long it took, in microseconds (round 0 measures it).
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::steady_clock::now() - started);
    write_all(ready_fd, "d" + std::to_string(us.count()) + "\n");
  } catch (const std::exception& ex) {
    std::string m = ex.what();
    write_all(ready_fd, "e" + m);
    _exit(1);
  }
  _exit(0);  // no clean close: it is a crash after the last operation
}

}  // namespace detail

inline LabResult run_process_crashes(const registry::Entry& e, const ProcessOptions& options) {
  ProcessOptions o = options;
  if (e.kind == registry::Kind::queue || e.kind == registry::Kind::stack ||
      e.kind == registry::Kind::priority_queue)
    o.workload.ops = std::min(o.workload.ops, o.container_ops);
  LabResult r;
  r.structure = std::string(e.name);
  r.criterion = criterion_label(e.criterion);
  const auto start = std::chrono::steady_clock::now();
  if (!e.durable) {
    r.errors.push_back(r.structure + " is transient: nothing survives a crash to check");
    return r;
  }
  const std::string tag = work_directory() + "/pmds-crashlab-proc-" + std::to_string(::getpid());
  ScratchFile pool_file(tag + ".pool"), out_file(tag + ".out");
  registry::CreateOptions co = create_options(o.workload);
  co.pool_size = o.pool_size;
  if (o.grow) {
    co.chunk_size = lab_chunk_size(e, co);
    start_at_one_chunk(co);
  }
  // A new register holds its initial value, not nothing: record it as the first round's initial
  // state (as the simulated lab does); every other kind starts empty.
  std::vector<registry::Item> state;  // the contents the last recovery read (or the new pool's)
  bool new_pool = true;               // the next round works on a pool made for it
  const auto create_pool = [&] {
    ::unlink(pool_file.path().c_str());
    auto created = registry::Instance::create(e, co, pool_file.path());
    state.clear();
    if (e.kind == registry::Kind::register_object) state = created.contents();
    created.close();
    new_pool = true;
  };
  const auto file_size = [&] {
    struct stat st {};
    return ::stat(pool_file.path().c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
  };
  create_pool();

  const std::size_t threads = o.workload.threads;
  const std::size_t capacity = o.workload.ops + 64 + o.workload.key_range + 16;
  detail::SharedLogFile log_file(tag + ".history", HistoryLog::bytes_for(threads + 1, capacity));
  Lincheck checker(find_lincheck(), o.check_timeout_s);
  std::mt19937_64 rng(mix_seed(o.seed, 0x9c0ce55));
  double workload_seconds = 0;  // a round's workload when nothing kills it (round 0 measures)
  double recovery_seconds = 0;  // the last checked recovery's (the killed ones' range)
  for (std::uint64_t round = 0; round < o.crashes; ++round) {
    const std::uint64_t wseed = mix_seed(o.seed, 1000 + round);
    const Workload w = make_workload(e, o.workload, wseed);
    HistoryLog log = HistoryLog::create(log_file.memory(), log_file.bytes(), threads + 1, capacity);
    const std::uint64_t size_at_start = file_size();
    const ForkedChild child = fork_with_pipe();
    if (child.pid == 0) {
      // Growth rounds leave out the prefill (ProcessOptions::grow).
      detail::process_round_child(e, o, pool_file.path(), log, w, new_pool && !o.grow,
                                  child.to_parent);
    }
    new_pool = false;
    // Round 0 runs to its end; later rounds are killed at a moment drawn uniformly over the
    // duration of the last workload that ran to its end (1.1x, so that a few complete). The
    // child reports that duration itself ("d<microseconds>"), the parent may be descheduled.
    std::string child_error;
    const auto read_byte = [&]() -> char {
      char c = 0;
      ssize_t n;
      while ((n = ::read(child.from_child, &c, 1)) < 0 && errno == EINTR) {
      }
      return n == 1 ? c : '\0';
    };
    char c = read_byte();
    const std::uint64_t size_before = file_size();  // its threads start now
    if (c == 'e') {
      char b[4096];
      ssize_t m;
      while ((m = ::read(child.from_child, b, sizeof b)) > 0)
        child_error.append(b, static_cast<std::size_t>(m));
    } else if (c == 'r' && round > 0) {
      const auto started = std::chrono::steady_clock::now();
      // Growth rounds watch the whole workload and are killed just after the file grows (at
      // its end when it does not): a workload grows its pool in its first moments, and a drawn
      // moment mostly falls after them.
      const double delay = workload_seconds * 1.1 *
                           (o.grow ? 1.0 : std::uniform_real_distribution<double>(0, 1)(rng));
      const auto deadline = started + std::chrono::duration<double>(delay);
      // The watch spins: a yield gives the core to the workload's threads for a time slice,
      // and the growth is long over when it comes back (under a loaded ctest -j2, 0 of 40
      // kills of alloc/probe-control landed inside a growth so).
      bool grew = false;
      while (o.grow && !grew && std::chrono::steady_clock::now() < deadline)
        grew = file_size() != size_before;
      if (grew) {  // a drawn 0-60 us more, spun (a sleep's timer slack alone is 50 us)
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(rng() % 60);
        while (std::chrono::steady_clock::now() < until) {
        }
      } else {
        std::this_thread::sleep_until(deadline);
      }
      ::kill(child.pid, SIGKILL);
    }
    const ExitStatus st = wait_for(child.pid);
    if (c == 'r' && read_byte() == 'd') {  // it ran to its end
      std::string us;
      while ((c = read_byte()) >= '0' && c <= '9') us += c;
      if (!us.empty()) workload_seconds = std::stod(us) * 1e-6;
    }
    ::close(child.from_child);
    if (!child_error.empty() || (st.exited && st.code != 0) ||
        (!st.exited && st.signal != SIGKILL)) {
      r.errors.push_back("process round " + std::to_string(round) + ": the workload process " +
                         (child_error.empty() ? st.describe() : child_error));
      break;
    }
    ++r.process_crashes;
    if (o.grow && st.signal == SIGKILL) {
      const pm::PoolInfo info = pm::inspect_pool(pool_file.path());
      if (info.growth_pending != 0 || file_size() != info.size) ++r.growth_kills;
    }
    const std::uint64_t crash_time = log.now();
    const std::vector<Record> records = log.snapshot();

    // Recover in a fresh process, on the real pool: the next round goes on from there.
    ::unlink(out_file.path().c_str());
    Args a{{"entry", std::string(e.name)},
           {"image", pool_file.path()},
           {"out", out_file.path()},
           {"keys", std::to_string(o.workload.key_range)},
           {"key_size", std::to_string(o.workload.key_size)},
           {"value_size", std::to_string(o.workload.value_size)},
           {"lazy", o.workload.lazy_recovery ? "1" : "0"},
           {"timeout", std::to_string(static_cast<unsigned>(o.recovery_timeout_s))},
           // With lazy recovery the check leaves the pool as a crash would, so that the
           // next round's workload runs beside a lazy recovery again (each border
           // recovered on its first access; the byte-string trees' sweep) and may be
           // killed during it; the check's own reads changed nothing to recover.
           {"close", o.workload.lazy_recovery ? "0" : "1"},
           {"tickets", e.criterion == Criterion::detectable ? last_tickets(records) : ""}};
    // Half the rounds of a detectable entry invoke each thread's last operation again with its
    // ticket (Fatourou et al.'s recovery; crashlab/child.hpp).
    if (e.criterion == Criterion::detectable && rng() % 2 == 0) a["reexecute"] = "1";
    if (recovery_seconds > 0 && rng() % 100 < o.killed_recovery_percent) {
      // A recovery killed at a random moment: its open, the lazy sweep, recover_pending or
      // reading the contents, with the structure's background threads running.
      Args doomed = a;
      doomed["stop"] = "recovery";
      doomed["close"] = "0";
      const double delay =
          recovery_seconds * 1.1 * std::uniform_real_distribution<double>(0, 1)(rng);
      const pid_t pid = spawn(self_exe(), {self_exe()},
                              {std::string(role_variable) + "=recover",
                               std::string(args_variable) + "=" + encode_args(doomed)});
      std::this_thread::sleep_for(std::chrono::duration<double>(delay));
      ::kill(pid, SIGKILL);
      const ExitStatus killed = wait_for(pid);
      if (!killed.exited && killed.signal == SIGKILL) {
        ++r.killed_recoveries;
        // The report is written when the doomed recovery stops (crashlab/child.hpp): none
        // means the kill landed inside the recovery.
        if (read_file(out_file.path()).empty()) ++r.killed_recoveries_midway;
      }
      ::unlink(out_file.path().c_str());
    }
    const auto recovery_started = std::chrono::steady_clock::now();
    const ExitStatus recovery = run_role("recover", a, o.recovery_timeout_s + 5);
    recovery_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - recovery_started).count();
    const Recovered rec = parse_recovered(read_file(out_file.path()), recovery);
    Violation base;
    base.kind = "process";
    base.crash_number = r.process_crashes;
    base.replay = o.command + " --structure " + std::string(e.name) + " --process-crashes " +
                  std::to_string(o.crashes) + " --crashes 0 --threads " + std::to_string(threads) +
                  " --process-ops " + std::to_string(o.workload.ops) + " --keys " +
                  std::to_string(o.workload.key_range) + open_options(o.workload) + " --seed " +
                  std::to_string(o.seed) + "   (round " + std::to_string(round) +
                  "; kill times are real time: approximate)";
    Judge j{.entry = e,
            .checker = checker,
            .threads = threads,
            .key_range = o.workload.key_range,
            .dump_name =
                "process-history-" + tag.substr(tag.rfind('-') + 1) + "-" + std::to_string(round),
            .print = false,
            .keep = {}};
    if (o.keep_histories && r.details.size() < o.keep_details)
      j.keep = [&](const std::string& text) {
        const std::string file = tag + "-violation-" + std::to_string(round) + ".jsonl";
        write_file(file, text);
        return file;
      };
    HistoryText h;
    h.entry = &e;
    h.meta = {{"structure", std::string(e.name)}, {"seed", o.seed}, {"round", round}};
    h.init = &state;
    h.records = records;
    h.crashed = true;
    h.crash_time = crash_time;
    Judgement verdict = judge(j, std::move(h), rec, base);
    r.undecided += verdict.undecided;
    std::vector<Violation> found = std::move(verdict.violations);
    // The next round starts from what this recovery left: the contents it read, and closed so.
    if (rec.ok) state = contents_after_reading(e, rec.items);
    if (!found.empty() && r.first_violation_process_crash == 0)
      r.first_violation_process_crash = r.process_crashes;
    r.violations += found.size();
    for (auto& x : found)
      if (r.details.size() < o.keep_details) r.details.push_back(std::move(x));
    r.process_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (o.progress) o.progress(r);
    if (!rec.ok) break;  // the pool is in no state to go on
    if (!found.empty() && o.stop_at_first_violation) break;
    if (o.grow && file_size() == size_at_start) create_pool();  // so that growth goes on
  }
  r.process_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace pmds::crashlab
