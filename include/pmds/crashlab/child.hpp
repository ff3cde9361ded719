// pmds crash lab — the recovery process: this program started again in the role "recover"
// (crashlab/process.hpp), in a fresh process where nothing volatile of the crashed run survives.
//
// It opens the pool file (a crash image, or the real pool a killed process left), which maps it
// at the base address its header records, recovers the structure (the registry's open), counts
// the allocator's slots for the leak check, reads the contents back, and writes what it saw to
// an output file:
//   events N         simulator events the recovery took (simulated backend)
//   slots LIVE TOTAL slots of used chunks not on a free list after recovery / all of them
//   clean            the pool said it had been closed cleanly (a crashed one must not)
//   held N           slots the structure says it holds (RecoveryStats::live_slots), if it says
//   report T TAKEN OK VALUE NUMBER-BITS   (detectable entries, "tickets=T:SEQ:CODE,...") what
//                    recovery says of thread T's last operation, asked before anything else runs
//   site N D KIND LOC  (simulated backend) a persistence site the recovery executed N times (D: 1
//                    if a fence of it completed another site's flushes), at LOC (FILE:LINE:COL)
//   items N          then N lines "key value"
//   continued N      (when asked, "continue=N") make_continuation's N operations were applied to
//                    the recovered structure: N lines "result OK VALUE NUMBER-BITS"; then the
//                    pool was closed cleanly and opened again, and
//   reopened N       then N lines "key value": the contents after that second open
//   crashed          (instead of slots/items) recovery itself was crashed at the requested event,
//                    and the crash image was written to crash_out
//   error TEXT       recovery threw (the structure or the pool refused the image), or the
//                    recovered structure failed in the continuation
// A recovery that crashes (a signal) or hangs shows up in the parent as an abnormal exit.
//
// The role is dispatched before main() by a static initializer (child_role_dispatched below)
// in every program that includes this header: `PMDS_CRASHLAB_ROLE=recover` set means "be the
// recovery process and exit"; unset, nothing happens.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <bit>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "pmds/crashlab/entries.hpp"
#include "pmds/crashlab/process.hpp"
#include "pmds/crashlab/report.hpp"
#include "pmds/crashlab/workload.hpp"
#include "pmds/registry/descriptor.hpp"

#if defined(PMDS_BACKEND_SIMULATED)
#include "pmds/crashlab/image_file.hpp"
#include "pmds/pm/simulator.hpp"
#endif

namespace pmds::crashlab {

// What a recovery process reported.
struct Recovered {
  bool ok = false;           // items and slots are valid
  bool crashed = false;      // recovery was crashed on purpose; an image is at crash_out
  std::string error;         // non-empty: recovery failed (thrown error or abnormal exit)
  std::uint64_t events = 0;  // simulator events recovery took
  std::uint64_t live_slots = 0, total_slots = 0;
  std::optional<std::uint64_t> held_slots;  // the structure's own count, when it gives one
  std::vector<Report> reports;  // detectable entries: one per thread that invoked an operation
  std::vector<registry::Item> items;
  bool continued = false;  // the continuation ran: its results, then the contents reopened
  std::vector<registry::OpResult> continuation;
  std::vector<registry::Item> reopened;
  std::vector<SiteUse> sites;   // persistence sites the recovery (the open) executed
  bool clean_shutdown = false;  // the pool said it had been closed cleanly
};

inline Recovered parse_recovered(const std::string& text, const ExitStatus& status) {
  Recovered r;
  if (!status.exited || status.code != 0) {
    r.error = "the recovery process " + status.describe();
    return r;
  }
  std::size_t pos = 0;
  std::size_t expected_items = 0, expected_results = 0, expected_reopened = 0;
  bool have_items = false;
  std::vector<registry::Item>* section = &r.items;  // where "key value" lines go
  while (pos < text.size()) {
    const auto nl = text.find('\n', pos);
    const std::string line =
        text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    unsigned long long a = 0, b = 0, c = 0;
    unsigned ok = 0;
    if (line.rfind("error ", 0) == 0) {
      r.error = line.substr(6);
    } else if (line == "clean") {
      r.clean_shutdown = true;
    } else if (line == "crashed") {
      r.crashed = true;
    } else if (std::sscanf(line.c_str(), "events %llu", &a) == 1) {
      r.events = a;
    } else if (std::sscanf(line.c_str(), "slots %llu %llu", &a, &b) == 2) {
      r.live_slots = a;
      r.total_slots = b;
    } else if (line.rfind("site ", 0) == 0) {
      SiteUse use;
      char kind[16] = {0};
      int consumed = 0;
      if (std::sscanf(line.c_str(), "site %llu %u %15s %n", &a, &ok, kind, &consumed) == 3 &&
          consumed > 0) {
        use.recovery = a;
        use.drains_other_sites = ok != 0;
        use.kind = kind;
        use.location = line.substr(static_cast<std::size_t>(consumed));
        r.sites.push_back(use);
      }
    } else if (unsigned long long d = 0; std::sscanf(line.c_str(), "report %llu %u %llu %llu %llu",
                                                     &a, &ok, &b, &c, &d) == 5) {
      r.reports.push_back({static_cast<std::size_t>(a),
                           ok != 0,
                           {b != 0, c, std::bit_cast<double>(std::uint64_t{d})}});
    } else if (std::sscanf(line.c_str(), "held %llu", &a) == 1) {
      r.held_slots = a;
    } else if (std::sscanf(line.c_str(), "items %llu", &a) == 1) {
      expected_items = a;
      have_items = true;
    } else if (std::sscanf(line.c_str(), "continued %llu", &a) == 1) {
      r.continued = true;
      expected_results = a;
    } else if (std::sscanf(line.c_str(), "result %u %llu %llu", &ok, &a, &c) == 3) {
      r.continuation.push_back({ok != 0, a, std::bit_cast<double>(std::uint64_t{c})});
    } else if (std::sscanf(line.c_str(), "reopened %llu", &a) == 1) {
      expected_reopened = a;
      section = &r.reopened;
    } else if (std::sscanf(line.c_str(), "%llu %llu", &a, &b) == 2) {
      section->push_back({a, b});
    }
  }
  if (r.error.empty() && !r.crashed) {
    if (!have_items || r.items.size() != expected_items ||
        (r.continued &&
         (r.continuation.size() != expected_results || r.reopened.size() != expected_reopened)))
      r.error = "the recovery process wrote an incomplete report";
    else
      r.ok = true;
  }
  return r;
}

namespace detail {

inline void write_or_die(const std::string& path, const std::string& text) {
  try {
    write_file(path, text);
  } catch (...) {
    _exit(3);
  }
}

#if defined(PMDS_BACKEND_SIMULATED)
inline pm::sim::ImageKind image_kind_from(const std::string& s) {
  return s == "min"   ? pm::sim::ImageKind::minimum
         : s == "max" ? pm::sim::ImageKind::maximum
                      : pm::sim::ImageKind::random;
}
#endif

// "report" lines for the tickets "THREAD:SEQ:CODE,..." (empty: none).
inline std::string reports_text(const registry::Instance& inst, const std::string& tickets) {
  std::string out;
  std::size_t pos = 0;
  while (pos < tickets.size()) {
    std::size_t end = tickets.find(',', pos);
    if (end == std::string::npos) end = tickets.size();
    unsigned long long thread = 0, seq = 0;
    unsigned code = 0;
    if (std::sscanf(tickets.substr(pos, end - pos).c_str(), "%llu:%llu:%u", &thread, &seq, &code) !=
        3)
      throw Error("bad tickets argument " + tickets);
    const auto outcome =
        inst.recover_pending(Ticket{thread, seq}, static_cast<registry::OpCode>(code));
    const registry::OpResult r = outcome.value_or(registry::OpResult{});
    out += "report " + std::to_string(thread) + " " + (outcome ? "1 " : "0 ") +
           (r.ok ? "1 " : "0 ") + std::to_string(r.value) + " " +
           std::to_string(std::bit_cast<std::uint64_t>(r.number)) + "\n";
    pos = end + 1;
  }
  return out;
}

[[noreturn]] inline void recover_role(const Args& a) {
  const auto get = [&](const char* k) {
    auto it = a.find(k);
    return it == a.end() ? std::string() : it->second;
  };
  const std::string out = get("out");
  if (out.empty()) _exit(4);
  if (const std::string t = get("timeout"); !t.empty())
    ::alarm(static_cast<unsigned>(std::stoul(t)));
  std::string report;
  try {
    const registry::Entry* entry = find_entry(get("entry"));
    if (entry == nullptr) throw Error("unknown structure " + get("entry"));
    registry::CreateOptions options;
    options.key_range = std::stoull(get("keys"));
    options.key_size = std::stoull(get("key_size"));
    options.value_size = std::stoull(get("value_size"));
    options.lazy_recovery = get("lazy") == "1";
#if defined(PMDS_BACKEND_SIMULATED)
    // No unscheduled thread: the recovery's event numbers (recovery crash points) must replay.
    options.background_thread = false;
    // The lab's mutant (`pmds crashtest --mutate`) applies to recovery too.
    if (const std::string m = get("mutant"); !m.empty()) {
      const auto mutants = pm::sim::Mutant::parse_list(m);
      if (!mutants) throw Error("bad mutant " + m);
      pm::sim::set_mutants(*mutants);
    }
    pm::sim::reset_site_counts();
    // Crash the recovery itself just before event crash_event: write that crash image and stop.
    const std::string crash_event = get("crash_event");
    if (!crash_event.empty()) {
      const std::string crash_out = get("crash_out"), image = get("image");
      const auto kind = image_kind_from(get("crash_kind"));
      const std::uint64_t seed = std::stoull(get("crash_seed"));
      pm::sim::set_crash_handler(std::stoull(crash_event), [=] {
        const pm::sim::Snapshot snap = pm::sim::snapshot(false);
        // Before the pool is mapped (no region) the image is unchanged: a plain copy.
        write_crash_image(snap, snap.choice(kind, seed), image, crash_out);
        write_or_die(out, "events " + std::to_string(snap.event()) + "\ncrashed\n");
        _exit(0);
      });
    }
#endif
    registry::Instance inst = registry::Instance::open(*entry, get("image"), options);
#if defined(PMDS_BACKEND_SIMULATED)
    pm::sim::clear_crash_handler();
    report += "events " + std::to_string(pm::sim::event_count()) + "\n";
    for (const pm::sim::SiteCount& c : pm::sim::site_counts())
      report += "site " + std::to_string(c.executions) + " " +
                (c.drains_other_sites ? "1 " : "0 ") + to_string(c.kind) + " " +
                site_location(c.file, c.line, c.column) + "\n";
#endif
    if (inst.pool()->was_clean_shutdown()) report += "clean\n";
    // Leak check: after recovery (and what it does while the structure runs) every slot of
    // every used chunk is live or free.
    inst.finish_recovery();
    const pm::ChunkAllocator& alloc = inst.pool()->allocator();
    std::uint64_t total = 0;
    alloc.for_each_used_chunk([&](std::size_t, void*, std::size_t slot_size, std::size_t) {
      total += alloc.slots_per_chunk(slot_size);
    });
    const std::uint64_t free_slots = alloc.free_slots();
    report += "slots " + std::to_string(free_slots > total ? 0 : total - free_slots) + " " +
              std::to_string(total) + "\n";
    if (const auto stats = inst.recovery_stats())
      report += "held " + std::to_string(stats->live_slots) + "\n";
    // Detectability: each thread's last operation, by its ticket (slot = thread), before any
    // other operation (reading the contents) runs on the recovered structure.
    report += reports_text(inst, get("tickets"));
    const auto items_text = [](const char* header, const std::vector<registry::Item>& items) {
      std::string t = std::string(header) + " " + std::to_string(items.size()) + "\n";
      for (const auto& it : items)
        t += std::to_string(it.key) + " " + std::to_string(it.value) + "\n";
      return t;
    };
    report += items_text("items", inst.contents());
    if (const std::string n = get("continue"); !n.empty()) {
      // The recovered structure works on; then a clean shutdown and a second open.
      const auto ops = make_continuation(*entry, options.key_range, std::stoull(n));
      std::string results;
      try {
        for (const auto& op : ops) {
          const registry::OpResult res = inst.apply(op);
          results += "result " + std::to_string(res.ok ? 1 : 0) + " " + std::to_string(res.value) +
                     " " + std::to_string(std::bit_cast<std::uint64_t>(res.number)) + "\n";
        }
        inst.close();
        inst = registry::Instance::open(*entry, get("image"), options);
      } catch (const std::exception& e) {
        throw Error(std::string("after recovery, in further operations or the reopen: ") +
                    e.what());
      }
      report += "continued " + std::to_string(ops.size()) + "\n" + results;
      report += items_text("reopened", inst.contents());
    }
    if (get("close") == "1") inst.close();  // a clean shutdown: the process lab goes on with it
    if (get("close") == "0") {  // no shutdown (as a crash): the next open recovers again
      write_or_die(out, report);
      _exit(0);
    }
  } catch (const std::exception& e) {
    std::string what = e.what();
    for (char& c : what)
      if (c == '\n') c = ' ';
    report += "error " + what + "\n";
  }
  write_or_die(out, report);
  _exit(0);
}

// The recovery server ("zygote"): started once (exec'd, so fresh), it forks one child per
// request read from standard input and answers each with how the child ended. Forking a process
// that never ran anything but this loop gives a recovery process as fresh as an exec'd one, for
// a fraction of the cost of loading the program again.
// Request: "key=value\tkey=value...\n"; answer: "exit CODE\n", "signal N\n" or "timeout\n".
[[noreturn]] inline void zygote_role() {
  std::string buffer;
  char b[4096];
  for (;;) {
    std::size_t nl;
    while ((nl = buffer.find('\n')) == std::string::npos) {
      const ssize_t n = ::read(0, b, sizeof b);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) _exit(0);  // the lab went away
      buffer.append(b, static_cast<std::size_t>(n));
    }
    std::string line = buffer.substr(0, nl);
    buffer.erase(0, nl + 1);
    for (char& c : line)
      if (c == '\t') c = '\n';
    const Args args = decode_args(line.c_str());
    double timeout_s = 60;
    if (auto it = args.find("timeout"); it != args.end()) timeout_s = std::stod(it->second) + 5;
    const pid_t pid = ::fork();
    if (pid == 0) recover_role(args);
    std::string answer;
    if (pid < 0) {
      answer = "exit 126\n";
    } else {
      const ExitStatus st = wait_with_timeout(pid, timeout_s);
      answer = st.timed_out ? "timeout\n"
               : st.exited  ? "exit " + std::to_string(st.code) + "\n"
                            : "signal " + std::to_string(st.signal) + "\n";
    }
    try {
      write_all(1, answer);
    } catch (...) {
      _exit(0);
    }
  }
}

inline bool dispatch_child_role() {
  const char* role = std::getenv(role_variable);
  if (role == nullptr) return false;
  const Args args = decode_args(std::getenv(args_variable));
  if (std::string_view(role) == "recover") recover_role(args);
  if (std::string_view(role) == "zygote") zygote_role();
  std::fprintf(stderr, "pmds crashlab: unknown role %s\n", role);
  _exit(5);
}

}  // namespace detail

// A recovery server (zygote_role) kept by the lab: run(args) recovers in a fresh process.
class RecoveryServer {
 public:
  RecoveryServer() {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0)
      throw Error(std::string("pmds crashlab: pipe: ") + std::strerror(errno));
    pid_ = spawn(self_exe(), {self_exe()}, {std::string(role_variable) + "=zygote"}, in[0], out[1]);
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  RecoveryServer(const RecoveryServer&) = delete;
  RecoveryServer& operator=(const RecoveryServer&) = delete;
  ~RecoveryServer() {
    ::close(to_);
    ::close(from_);
    wait_with_timeout(pid_, 10);
  }

  // The recovery role with these arguments, in a fresh process; how it ended.
  ExitStatus run(const Args& a) {
    std::string line = encode_args(a);
    for (char& c : line)
      if (c == '\n') c = '\t';
    write_all(to_, line + "\n");
    std::string answer;
    char c;
    for (;;) {
      const ssize_t n = ::read(from_, &c, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw Error("pmds crashlab: the recovery server stopped");
      if (c == '\n') break;
      answer += c;
    }
    ExitStatus st;
    if (answer == "timeout") {
      st.timed_out = true;
    } else if (answer.rfind("exit ", 0) == 0) {
      st.exited = true;
      st.code = std::stoi(answer.substr(5));
    } else if (answer.rfind("signal ", 0) == 0) {
      st.signal = std::stoi(answer.substr(7));
    } else {
      throw Error("pmds crashlab: the recovery server said " + answer);
    }
    return st;
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
};

// Runs before main() in every program that includes the lab (see the header comment).
inline const bool child_role_dispatched = detail::dispatch_child_role();

}  // namespace pmds::crashlab
