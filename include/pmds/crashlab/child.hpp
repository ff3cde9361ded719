// pmds crash lab — the recovery process: this program started again in the role "recover"
// (crashlab/process.hpp), in a fresh process where nothing volatile of the crashed run survives.
//
// It opens the pool file (a crash image, or the real pool a killed process left), which maps it
// at the base address its header records, recovers the structure (the registry's open), counts
// the allocator's slots for the leak check, reads the contents back, and writes what it saw to
// an output file. Its work comes in phases (RecoveryPhase), each a place the lab may crash it:
//   open          the registry's open: the structure's recovery
//   finish        finish_recovery (the lazy sweep of the byte-string Masstrees)
//   pending       recover_pending for each thread's last ticket (detectable entries)
//   reexecute     (when asked, "reexecute=1") each thread's last operation invoked again with
//                 its ticket, as Fatourou et al.'s recovery does: it must take effect exactly once
//   contents      reading the contents back (lazy InCLL recovery runs on first access)
//   continuation  make_continuation's operations on the recovered structure, one at a time,
//                 in turn on "threads" threads that each hold a pmds thread id of their own
//                 (run_in_turn)
//   close         its clean close
//   reopen        the open after that clean close
//   reread        reading the contents again
// The output file, line by line, as the phases go:
//   phase NAME E     the phase NAME began at simulator event E (simulated backend; else no E)
//   site N D KIND LOC  (simulated backend) a persistence site the open executed N times (D: 1
//                    if a fence of it completed another site's flushes), at LOC (FILE:LINE:COL)
//   clean            the pool said it had been closed cleanly (a crashed one must not)
//   slots LIVE TOTAL slots of used chunks not on a free list after recovery / all of them
//   held N           slots the structure says it holds (RecoveryStats::live_slots), if it says
//   crash_epoch E    the epoch the crash happened in, as recovery found it (buffered structures:
//                    RecoveryStats::crash_epoch)
//   report T TAKEN OK VALUE NUMBER-BITS   (detectable entries, "tickets=T:SEQ:CODE,...") what
//                    recovery says of thread T's last operation, asked before anything else runs
//   reexec T OK VALUE NUMBER-BITS   thread T's last operation, invoked again with its ticket,
//                    returned this
//   items N          then N lines "key value"
//   continued N      (when asked, "continue=N") make_continuation's N operations are applied to
//                    the recovered structure: a line "result OK VALUE NUMBER-BITS" as each
//                    returns; then
//   closed           the clean close returned, and the pool was opened again:
//   reopened N       then N lines "key value": the contents after that second open
//   events N         simulator events the whole process took (simulated backend), last
//   crashed PHASE    (last, instead of the end of the list) the process was crashed where it was
//                    asked ("crash_phase", "crash_offset"), in PHASE; the crash image was
//                    written to crash_out
//   error TEXT       recovery threw (the structure or the pool refused the image), or the
//                    recovered structure failed in the continuation
// With "stop=recovery" the process stops after the contents (before them when reading runs
// operations: reading_operates) without closing the pool, writes its report and waits to be
// killed: the process lab kills such recoveries at a random moment (process_lab.hpp).
// A recovery that crashes (a signal) or hangs shows up in the parent as an abnormal exit.
//
// The role is dispatched before main() by a static initializer (child_role_dispatched below)
// in every program that includes this header: `PMDS_CRASHLAB_ROLE=recover` set means "be the
// recovery process and exit"; unset, nothing happens.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "pmds/crashlab/entries.hpp"
#include "pmds/crashlab/mutant_text.hpp"
#include "pmds/crashlab/process.hpp"
#include "pmds/crashlab/report.hpp"
#include "pmds/crashlab/wakeup.hpp"
#include "pmds/crashlab/workload.hpp"
#include "pmds/reclaim/epoch.hpp"
#include "pmds/registry/descriptor.hpp"
#include "pmds/thread_registry.hpp"

#if defined(PMDS_BACKEND_SIMULATED)
#include "pmds/crashlab/image_file.hpp"
#include "pmds/pm/simulator.hpp"
#endif

namespace pmds::crashlab {

// Runs body(i) for i = 0..n-1, one at a time and in that order, body(i) on participant
// i % threads: the calling thread (participant 0) and threads - 1 threads started here, which
// take their pmds thread ids one after another (the caller first), so the ids are the lowest
// ones, as in the workload that crashed. The recovered structure then works on under each id
// that workload used, and what recovery left for an id (a descriptor's serial number, a log,
// a combining slot) meets that id's next operations, as when an application's threads come
// back: a continuation on one thread never exercises the others' (nbMontage's recovery must
// retire a stale anti-node before its thread's serial numbers pass it; the mutation run found
// that write-back unexercised). A body that throws stops the rest; the exception is rethrown
// here.
inline void run_in_turn(std::size_t threads, std::size_t n,
                        const std::function<void(std::size_t)>& body) {
  threads = std::max<std::size_t>(threads, 1);
  // The turn is a token handed from participant to participant, each with a wake-up of its own
  // (crashlab/wakeup.hpp says why not a condition variable).
  std::vector<std::unique_ptr<Wakeup>> wake(threads);
  for (auto& w : wake) w = std::make_unique<Wakeup>();
  std::atomic<bool> failed{false};
  std::exception_ptr error;  // written by the token's holder only; read after the joins
  const auto participate = [&](std::size_t p) {
    for (std::size_t i = p; i < n; i += threads) {
      wake[p]->wait();
      if (failed.load()) return;
      try {
        body(i);
      } catch (...) {
        error = std::current_exception();
        failed.store(true);
        for (auto& w : wake) w->post();  // everyone waiting ends
        return;
      }
      // A thread that ends here hands its retires over in its turn, not at its exit, which
      // comes while the next participant runs (crashlab/sim_workload.hpp says why).
      if (p != 0 && i + threads >= n) reclaim::EpochDomain::detach_this_thread();
      wake[(i + 1) % threads]->post();
    }
  };
  pmds::thread_id();
  Wakeup started;
  std::vector<std::thread> others;
  for (std::size_t p = 1; p < threads; ++p) {
    others.emplace_back([&, p] {
      pmds::thread_id();
      started.post();
      participate(p);
    });
    started.wait();  // thread p took its id before thread p + 1 starts
  }
  wake[0]->post();  // body(0) first
  participate(0);
  for (auto& t : others) t.join();
  if (error) std::rethrow_exception(error);
}

// Whether reading the contents back runs operations on the structure: a queue, stack or
// priority queue is read by taking every element (crashlab/workload.hpp,
// contents_after_reading), a detectable register by a read through its protocol, in the slot of
// the recovery's thread, whose workload ticket recover_pending must be asked about before that
// slot runs anything else. A crash while reading such a structure leaves a state, or a slot,
// that no history the lab records explains: those phases are not crashed.
inline bool reading_operates(const registry::Entry& e) {
  return e.kind == registry::Kind::queue || e.kind == registry::Kind::stack ||
         e.kind == registry::Kind::priority_queue || e.criterion == Criterion::detectable;
}

// What a recovery process reported.
struct Recovered {
  bool ok = false;  // items and slots are valid
  // Recovery was crashed on purpose, in this phase; an image is at crash_out. What it reported
  // before (items, continuation results) is kept: the lab checks the rest against it.
  std::optional<RecoveryPhase> crashed;
  std::string error;         // non-empty: recovery failed (thrown error or abnormal exit)
  std::uint64_t events = 0;  // simulator events the process took
  // The simulator event at which each phase began (simulated backend; the phases it reached).
  std::array<std::optional<std::uint64_t>, recovery_phase_count> phase_start{};
  bool have_items = false;  // the contents were read back in full (items)
  bool closed = false;      // the continuation's clean close returned
  std::uint64_t live_slots = 0, total_slots = 0;
  std::optional<std::uint64_t> held_slots;   // the structure's own count, when it gives one
  std::optional<std::uint64_t> crash_epoch;  // RecoveryStats::crash_epoch, when it says
  std::vector<Report> reports;  // detectable entries: one per thread that invoked an operation
  // Detectable entries, "reexecute=1": each thread's last operation invoked again with its
  // ticket, and its response (taken: true).
  std::vector<Report> reexecuted;
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
  std::size_t expected_items = 0, expected_reopened = 0;
  bool have_reopened = false;
  std::vector<registry::Item>* section = &r.items;  // where "key value" lines go
  while (pos < text.size()) {
    const auto nl = text.find('\n', pos);
    const std::string line =
        text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    unsigned long long a = 0, b = 0, c = 0;
    unsigned ok = 0;
    char name[32] = {0};
    if (line.rfind("error ", 0) == 0) {
      r.error = line.substr(6);
    } else if (line == "clean") {
      r.clean_shutdown = true;
    } else if (line == "closed") {
      r.closed = true;
    } else if (std::sscanf(line.c_str(), "crashed %31s", name) == 1) {
      r.crashed = recovery_phase_named(name);
      if (!r.crashed) r.error = "the recovery process reported a crash in an unknown phase";
    } else if (std::sscanf(line.c_str(), "phase %31s", name) == 1) {
      const auto phase = recovery_phase_named(name);
      if (phase && std::sscanf(line.c_str(), "phase %*s %llu", &a) == 1)
        r.phase_start[static_cast<std::size_t>(*phase)] = a;
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
    } else if (unsigned long long d = 0;
               std::sscanf(line.c_str(), "reexec %llu %u %llu %llu", &a, &ok, &b, &d) == 4) {
      r.reexecuted.push_back({static_cast<std::size_t>(a),
                              true,
                              {ok != 0, b, std::bit_cast<double>(std::uint64_t{d})}});
    } else if (std::sscanf(line.c_str(), "held %llu", &a) == 1) {
      r.held_slots = a;
    } else if (std::sscanf(line.c_str(), "crash_epoch %llu", &a) == 1) {
      r.crash_epoch = a;
    } else if (std::sscanf(line.c_str(), "items %llu", &a) == 1) {
      expected_items = a;
      section = &r.items;
    } else if (line.rfind("continued ", 0) == 0) {
      r.continued = true;
    } else if (std::sscanf(line.c_str(), "result %u %llu %llu", &ok, &a, &c) == 3) {
      r.continuation.push_back({ok != 0, a, std::bit_cast<double>(std::uint64_t{c})});
    } else if (std::sscanf(line.c_str(), "reopened %llu", &a) == 1) {
      expected_reopened = a;
      have_reopened = true;
      section = &r.reopened;
    } else if (std::sscanf(line.c_str(), "%llu %llu", &a, &b) == 2) {
      section->push_back({a, b});
    }
  }
  r.have_items = r.items.size() == expected_items && text.find("\nitems ") != std::string::npos;
  if (r.error.empty() && !r.crashed) {
    if (!r.have_items ||
        (r.continued && (!r.closed || !have_reopened || r.reopened.size() != expected_reopened)))
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

// The tickets argument "THREAD:SEQ:CODE:KEY:VALUE:FACTOR-BITS,..." (crashlab/history.hpp,
// last_tickets): each thread's last operation and its ticket.
struct TicketedOperation {
  std::size_t thread = 0;
  Ticket ticket;
  registry::Operation op;
};
inline std::vector<TicketedOperation> parse_tickets(const std::string& tickets) {
  std::vector<TicketedOperation> out;
  std::size_t pos = 0;
  while (pos < tickets.size()) {
    std::size_t end = tickets.find(',', pos);
    if (end == std::string::npos) end = tickets.size();
    unsigned long long thread = 0, seq = 0, key = 0, value = 0, factor = 0;
    unsigned code = 0;
    if (std::sscanf(tickets.substr(pos, end - pos).c_str(), "%llu:%llu:%u:%llu:%llu:%llu", &thread,
                    &seq, &code, &key, &value, &factor) != 6)
      throw Error("bad tickets argument " + tickets);
    out.push_back({thread,
                   Ticket{thread, seq},
                   {static_cast<registry::OpCode>(code), key, value,
                    std::bit_cast<double>(std::uint64_t{factor})}});
    pos = end + 1;
  }
  return out;
}

inline std::string result_fields(const registry::OpResult& r) {
  return std::string(r.ok ? "1 " : "0 ") + std::to_string(r.value) + " " +
         std::to_string(std::bit_cast<std::uint64_t>(r.number));
}

// "report" lines: what recovery says of each ticket's operation.
inline std::string reports_text(const registry::Instance& inst,
                                const std::vector<TicketedOperation>& tickets) {
  std::string out;
  for (const TicketedOperation& t : tickets) {
    const auto outcome = inst.recover_pending(t.ticket, t.op.code);
    out += "report " + std::to_string(t.thread) + " " + (outcome ? "1 " : "0 ") +
           result_fields(outcome.value_or(registry::OpResult{})) + "\n";
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
  // What the process has seen so far: written at its end, or by the crash handler up to the
  // phase it crashed in (the lab checks the rest of the run against it).
  std::string report;
  RecoveryPhase phase = RecoveryPhase::open;
  [[maybe_unused]] bool operating = false;  // reading runs operations (reading_operates)
#if defined(PMDS_BACKEND_SIMULATED)
  // A crash of this process ("crash_phase", "crash_offset"): `offset` events after the start of
  // `phase` (or of the first later phase, when this one does not run). It writes the crash
  // image, and what was seen so far, and stops. The phases that read the contents of a
  // structure whose reading runs operations are never crashed (reading_operates): a crash due
  // in one waits for the next phase.
  struct Crash {
    RecoveryPhase phase;
    std::uint64_t offset;
    std::function<void()> handler;
    std::uint64_t event = 0;
    bool armed = false, suspended = false;
  };
  std::optional<Crash> crash;
#endif
  const auto enter = [&](RecoveryPhase p) {
    phase = p;
    report += std::string("phase ") + to_string(p);
#if defined(PMDS_BACKEND_SIMULATED)
    report += " " + std::to_string(pm::sim::event_count());
    if (crash) {
      if (crash->suspended) {
        crash->suspended = false;
        pm::sim::set_crash_handler(std::max(crash->event, pm::sim::event_count()), crash->handler);
      }
      if (!crash->armed && p >= crash->phase) {
        crash->armed = true;
        crash->event = pm::sim::event_count() + crash->offset;
        pm::sim::set_crash_handler(crash->event, crash->handler);
      }
      if (crash->armed && reads_contents(p) && operating) {
        pm::sim::clear_crash_handler();
        crash->suspended = true;
      }
    }
#endif
    report += "\n";
  };
  const auto events_line = [] {
#if defined(PMDS_BACKEND_SIMULATED)
    return "events " + std::to_string(pm::sim::event_count()) + "\n";
#else
    return std::string();
#endif
  };
  try {
    const registry::Entry* entry = find_entry(get("entry"));
    if (entry == nullptr) throw Error("unknown structure " + get("entry"));
    operating = reading_operates(*entry);
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
      const auto mutants = parse_mutants(m);
      if (!mutants) throw Error("bad mutant " + m);
      pm::sim::set_mutants(*mutants);
    }
    pm::sim::reset_site_counts();
    if (const auto crash_phase = recovery_phase_named(get("crash_phase"))) {
      const std::string crash_out = get("crash_out"), image = get("image");
      const auto kind = image_kind_from(get("crash_kind"));
      const std::uint64_t seed = std::stoull(get("crash_seed"));
      crash =
          Crash{*crash_phase, std::stoull(get("crash_offset")), [&, crash_out, image, kind, seed] {
                  const pm::sim::Snapshot snap = pm::sim::snapshot(false);
                  // Before the pool is mapped (no region) the image is unchanged: a copy.
                  write_crash_image(snap, snap.choice(kind, seed), image, crash_out);
                  write_or_die(out, report + "events " + std::to_string(snap.event()) +
                                        "\ncrashed " + to_string(phase) + "\n");
                  _exit(0);
                }};
    }
#endif
    enter(RecoveryPhase::open);
    registry::Instance inst = registry::Instance::open(*entry, get("image"), options);
#if defined(PMDS_BACKEND_SIMULATED)
    for (const pm::sim::SiteCount& c : pm::sim::site_counts())
      report += "site " + std::to_string(c.executions) + " " +
                (c.drains_other_sites ? "1 " : "0 ") + to_string(c.kind) + " " +
                site_location(c.file, c.line, c.column) + "\n";
#endif
    if (inst.pool()->was_clean_shutdown()) report += "clean\n";
    // Leak check: after recovery (and what it does while the structure runs) every slot of
    // every used chunk is live or free.
    enter(RecoveryPhase::finish);
    inst.finish_recovery();
    const pm::ChunkAllocator& alloc = inst.pool()->allocator();
    std::uint64_t total = 0;
    alloc.for_each_used_chunk([&](std::size_t, void*, std::size_t slot_size, std::size_t) {
      total += alloc.slots_per_chunk(slot_size);
    });
    const std::uint64_t free_slots = alloc.free_slots();
    report += "slots " + std::to_string(free_slots > total ? 0 : total - free_slots) + " " +
              std::to_string(total) + "\n";
    if (const auto stats = inst.recovery_stats()) {
      report += "held " + std::to_string(stats->live_slots) + "\n";
      if (stats->crash_epoch != 0)
        report += "crash_epoch " + std::to_string(stats->crash_epoch) + "\n";
    }
    // Detectability: each thread's last operation, by its ticket (slot = thread), before any
    // other operation (reading the contents) runs on the recovered structure.
    enter(RecoveryPhase::pending);
    const std::vector<TicketedOperation> tickets = parse_tickets(get("tickets"));
    report += reports_text(inst, tickets);
    // Fatourou et al.'s recovery: each thread's last operation invoked again with its ticket. One
    // that took effect returns its response and changes nothing; one that did not takes effect now.
    if (get("reexecute") == "1") {
      enter(RecoveryPhase::reexecute);
      for (const TicketedOperation& t : tickets)
        report += "reexec " + std::to_string(t.thread) + " " +
                  result_fields(inst.apply(t.op, t.ticket)) + "\n";
    }
    const auto items_text = [](const char* header, const std::vector<registry::Item>& items) {
      std::string t = std::string(header) + " " + std::to_string(items.size()) + "\n";
      for (const auto& it : items)
        t += std::to_string(it.key) + " " + std::to_string(it.value) + "\n";
      return t;
    };
    // A recovery the process lab kills on purpose stops here, as a crash would leave it (unread,
    // when reading runs operations: reading_operates), and waits for its SIGKILL (the alarm
    // bounds the wait): a kill that comes after the end still kills the process, so a loaded
    // host that delays the lab's kill cannot turn a killed recovery into a clean exit.
    const bool stop_after_recovery = get("stop") == "recovery";
    const auto stop_and_wait_for_kill = [&] {
      write_or_die(out, report + events_line());
      for (;;) ::pause();
    };
    if (stop_after_recovery && reading_operates(*entry)) stop_and_wait_for_kill();
    enter(RecoveryPhase::contents);
    report += items_text("items", inst.contents());
    if (stop_after_recovery) stop_and_wait_for_kill();
    if (const std::string n = get("continue"); !n.empty()) {
      // The recovered structure works on; then a clean shutdown and a second open.
      const auto ops = make_continuation(*entry, options.key_range, std::stoull(n));
      try {
        enter(RecoveryPhase::continuation);
        report += "continued " + std::to_string(ops.size()) + "\n";
        const std::string t = get("threads");
        run_in_turn(t.empty() ? 1 : std::stoull(t), ops.size(), [&](std::size_t i) {
          const registry::OpResult res = inst.apply(ops[i]);
          report += "result " + std::to_string(res.ok ? 1 : 0) + " " + std::to_string(res.value) +
                    " " + std::to_string(std::bit_cast<std::uint64_t>(res.number)) + "\n";
        });
        enter(RecoveryPhase::close);
        inst.close();
        report += "closed\n";
        enter(RecoveryPhase::reopen);
        inst = registry::Instance::open(*entry, get("image"), options);
        enter(RecoveryPhase::reread);
        report += items_text("reopened", inst.contents());
      } catch (const std::exception& e) {
        throw Error(std::string("after recovery, in further operations or the reopen: ") +
                    e.what());
      }
    }
#if defined(PMDS_BACKEND_SIMULATED)
    pm::sim::clear_crash_handler();
#endif
    report += events_line();
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
