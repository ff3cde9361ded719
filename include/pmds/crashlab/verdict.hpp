// pmds crash lab — the verdict on one recovery, the same for simulated power failures
// (sim_lab.hpp) and process crashes (process_lab.hpp), docs/ARCHITECTURE.md §4:
//   recovery   the recovery process reported its contents (no throw, signal or hang), and
//              (simulated crashes) the pool did not claim a clean shutdown;
//   leak       every slot of every used chunk is free or held by the structure (leak_message);
//   criterion  lincheck explains the recovered contents by the history under the entry's
//              criterion;
//   after recovery (when the recovery process ran the continuation, crashlab/child.hpp): the
//              recovered structure's further operations and its contents after a clean
//              reopen are explained too — a sequential history starting from what was read,
//              under durable linearizability whatever the entry's criterion (a clean close
//              loses nothing, buffered entries' included).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pmds/crashlab/child.hpp"
#include "pmds/crashlab/history.hpp"
#include "pmds/crashlab/process.hpp"
#include "pmds/crashlab/report.hpp"
#include "pmds/crashlab/workload.hpp"
#include "pmds/registry/descriptor.hpp"

namespace pmds::crashlab {

// The leak limit, one rule for every entry. A structure that counts the slots it holds
// (RecoveryStats::live_slots: its nodes, anchor and directories) must account for every slot
// the allocator did not free: one slot more is a leak. A structure that does not count gets a
// generous bound (nodes per element, anchors, the nodes of pending operations), which only a
// recovery that never rebuilds the free lists trips. Returns the violation's message, or
// nullopt when there is no leak.
inline std::optional<std::string> leak_message(const Recovered& rec, std::size_t threads) {
  const std::string slots = std::to_string(rec.live_slots) + " of " +
                            std::to_string(rec.total_slots) + " slots are not free after recovery";
  if (rec.held_slots) {
    if (rec.live_slots == *rec.held_slots) return std::nullopt;
    return slots + ", but the structure holds " + std::to_string(*rec.held_slots);
  }
  const std::uint64_t bound = 4 * rec.items.size() + 64 + 4 * threads;
  if (rec.live_slots <= bound) return std::nullopt;
  return slots + " (" + std::to_string(rec.items.size()) + " elements, bound " +
         std::to_string(bound) + ")";
}

// How a lab judges: the entry, its checker, and what it does with the histories it checks.
struct Judge {
  const registry::Entry& entry;
  Lincheck& checker;
  std::size_t threads = 1;       // the workload's threads (the leak bound's pending nodes)
  std::uint64_t key_range = 16;  // the workload's (the continuation's keys lie above it)
  // The crash came after the pool was opened (simulated crashes): a pool that then says it
  // was closed cleanly lies. A killed process may die before its open marks the pool open.
  bool crashed_after_open = false;
  std::string dump_name;  // PMDS_CRASHLAB_DUMP=DIR writes DIR/<dump_name>.jsonl
  bool print = false;     // a replay: print each history and its verdict on stderr
  // Keeps a violating history: returns the file it wrote ("" when it keeps none).
  std::function<std::string(const std::string& text)> keep;
};

struct Judgement {
  std::vector<Violation> violations;
  std::size_t undecided = 0;  // histories lincheck could not decide (each is also a violation)
};

namespace detail {

// Checks one history; a violation is `base` with the checker's criterion, object and excerpt.
inline void check_history(const Judge& j, const HistoryText& h, const std::string& dump_name,
                          const std::string& context, const Violation& base, Judgement& out) {
  const std::string text = to_json_lines(h);
  if (const char* dir = std::getenv("PMDS_CRASHLAB_DUMP"); dir != nullptr && *dir)
    write_file(std::string(dir) + "/" + dump_name + ".jsonl", text);
  const Verdict verdict = j.checker.check(text);
  if (j.print) {
    std::fprintf(stderr, "%s", text.c_str());
    std::fprintf(stderr, "verdict: %s %s %s\n", verdict.verdict.c_str(), verdict.criterion.c_str(),
                 verdict.message.c_str());
  }
  // An undecided history is a failure, never a pass: the checker searched each of its
  // partitions with its limit and once more with four times it (tools/lincheck), and a
  // history it cannot decide proves nothing about the structure. Its replay command reruns it.
  if (verdict.verdict == "unknown") ++out.undecided;
  if (verdict.verdict != "violation" && verdict.verdict != "error" && verdict.verdict != "unknown")
    return;
  Violation v = base;
  v.criterion = verdict.verdict == "error"     ? "checker-input"
                : verdict.verdict == "unknown" ? "undecided"
                                               : verdict.criterion;
  v.object = verdict.object;
  v.message =
      context + (verdict.verdict == "unknown" ? "the checker could not decide the " +
                                                    std::string(to_string(j.entry.criterion)) +
                                                    " history: " + verdict.message
                                              : verdict.message);
  v.excerpt = verdict.excerpt;
  if (j.keep) v.history_file = j.keep(text);
  out.violations.push_back(std::move(v));
}

// What a recovery process did to the structure it recovered, as a sequential history of
// thread 0 from the contents it read: the takes that read a queue, stack or priority queue (it
// held `rec.items`, each take returned the next, the last one nothing), then the continuation's
// first `completed` operations with the results the process reported, then (`pending`) the
// next one, running when the process was crashed.
inline std::vector<Record> continuation_records(const Judge& j, const Recovered& rec,
                                                std::size_t completed, bool pending) {
  std::vector<Record> records;
  const auto add = [&](const Operation& op, std::optional<OpResult> result) {
    Record r;
    r.call = 2 * records.size() + 1;
    r.ret = result ? r.call + 1 : 0;
    r.code = static_cast<std::uint8_t>(op.code);
    r.key = op.key;
    r.value = op.value;
    r.factor = op.factor;
    if (result) {
      r.ok = result->ok ? 1 : 0;
      r.result_value = result->value;
      r.result_number = result->number;
    }
    records.push_back(r);
  };
  if (const auto take = reading_take(j.entry)) {
    for (const Item& it : rec.items) add({*take, 1, 0, 1.0}, OpResult{true, it.key, 0});
    add({*take, 1, 0, 1.0}, OpResult{false, 0, 0});
  }
  const auto ops = make_continuation(j.entry, j.key_range, completed + (pending ? 1 : 0));
  for (std::size_t i = 0; i < ops.size(); ++i)
    add(ops[i], i < completed ? std::optional<OpResult>(rec.continuation[i]) : std::nullopt);
  return records;
}

// The code of each thread's last operation in `records`.
inline std::optional<OpCode> last_code(const std::vector<Record>& records, std::size_t thread) {
  std::optional<OpCode> code;
  std::uint64_t call = 0;
  for (const Record& r : records)
    if (r.thread == thread && r.call >= call) {
      call = r.call;
      code = static_cast<OpCode>(r.code);
    }
  return code;
}

// Two responses to operation `code` as the checker compares them (result_json).
inline bool same_response(OpCode code, const OpResult& a, const OpResult& b) {
  return result_json(code, a.ok, a.value, a.number) == result_json(code, b.ok, b.value, b.number);
}

// Each `again` response must equal the one `said` reported for the same thread, where it
// reported one (taken); a violation of `base` per mismatch, its message from `what`.
inline void expect_same_responses(const std::vector<Record>& records,
                                  const std::vector<Report>& said, const std::vector<Report>& again,
                                  const std::string& what, const Violation& base, Judgement& out) {
  for (const Report& a : again)
    for (const Report& s : said) {
      if (s.thread != a.thread || !s.taken) continue;
      const auto code = last_code(records, a.thread);
      if (!code || same_response(*code, s.result, a.result)) continue;
      Violation v = base;
      v.criterion = "detectable";
      v.object = "thread " + std::to_string(a.thread);
      v.message =
          what + ": " + result_json(*code, s.result.ok, s.result.value, s.result.number).dump() +
          " then " + result_json(*code, a.result.ok, a.result.value, a.result.number).dump();
      out.violations.push_back(std::move(v));
    }
}

}  // namespace detail

// How far back in epochs a crash's loss reached, measured on a map: the crash's epoch minus the
// return epoch of the oldest completed insert (that inserted) or put whose value is missing from
// what recovery read although every other update of its key had returned before it was invoked
// (so nothing could have overwritten it); nullopt when none is missing. The entry's EpochBound
// caps it (nbMontage: 1, the operations of epochs e-1 and e; InCLL: 0).
inline std::optional<std::uint64_t> epochs_lost(const registry::Entry& e,
                                                const std::vector<Record>& records,
                                                const std::vector<registry::Item>& recovered,
                                                std::uint64_t crash_epoch) {
  if (e.kind != Kind::map || e.epoch_bound() == EpochBound::none) return std::nullopt;
  std::optional<std::uint64_t> deepest;
  for (const Record& u : records) {
    const auto code = static_cast<OpCode>(u.code);
    const bool wrote = u.ret != 0 && (code == OpCode::put || (code == OpCode::insert && u.ok != 0));
    if (!wrote || u.ret_epoch > crash_epoch) continue;
    bool overwritable = false;  // another update of the key that may follow it
    for (const Record& v : records) {
      const auto c = static_cast<OpCode>(v.code);
      const bool update = c == OpCode::put || c == OpCode::insert || c == OpCode::remove;
      overwritable =
          overwritable || (update && &v != &u && v.key == u.key && (v.ret == 0 || v.ret > u.call));
    }
    if (overwritable) continue;
    const bool present = std::any_of(
        recovered.begin(), recovered.end(),
        [&](const registry::Item& it) { return it.key == u.key && it.value == u.value; });
    if (!present) deepest = std::max(deepest.value_or(0), crash_epoch - u.ret_epoch);
  }
  return deepest;
}

// The epoch a crash's first recovery found (RecoveryStats::crash_epoch) must not be behind the
// epochs the workload saw before the crash, or the entry's epoch bound would be measured from a
// clock that lost advances: a message when it is. nbMontage's clock is its pool word, which an
// operation may read between an advance's CAS and its persist (one epoch ahead of what a crash
// then keeps); InCLL publishes an epoch only once the anchor holds it durably.
inline std::optional<std::string> clock_behind(const registry::Entry& e,
                                               const std::vector<Record>& records,
                                               std::uint64_t crash_epoch) {
  if (e.epoch_bound() == EpochBound::none) return std::nullopt;
  const std::uint64_t in_flight = e.epoch_bound() == EpochBound::two_epochs ? 1 : 0;
  std::uint64_t seen = 0;
  for (const Record& r : records) seen = std::max({seen, r.call_epoch, r.ret_epoch});
  if (seen <= crash_epoch + in_flight) return std::nullopt;
  return "recovery found the crash in epoch " + std::to_string(crash_epoch) +
         ", but an operation saw epoch " + std::to_string(seen) +
         " before it: an advance of the epoch clock was not durable";
}

// The history of what a recovery process did on the structure it recovered (its continuation,
// crashlab/child.hpp): from the contents it read (`rec.items`), its operations (reading a
// queue, stack or priority queue took its elements: those takes first), then a crash
// (`crashed`: in the continuation or its close) or its clean close. Each recovery has such a
// history: what its reopen read must follow from it, and so must what recovers from a crash of
// it. Checked under durable linearizability, whatever the entry's criterion, except when it
// ended in a crash of a buffered entry: a clean close loses nothing (a buffered structure's
// close syncs), a crash may lose a suffix (with no operation pending, detectable is durable).
inline HistoryText continuation_history(const Judge& j, const Recovered& rec,
                                        std::optional<RecoveryPhase> crashed) {
  const bool pending = crashed == RecoveryPhase::continuation;
  HistoryText c;
  c.entry = &j.entry;
  c.init = &rec.items;
  c.records = detail::continuation_records(j, rec, rec.continuation.size(), pending);
  c.crashed = true;
  c.crash_time = 2 * c.records.size() + 1;
  const bool may_lose_a_suffix =
      crashed && *crashed < RecoveryPhase::reopen && j.entry.criterion == Criterion::buffered;
  c.criterion = may_lose_a_suffix ? Criterion::buffered : Criterion::durable;
  return c;
}

// Judges one recovery. `h` is the history its contents must follow from (its `recovered` is
// set here from `rec`); `base` carries the kind, crash number and replay command of every
// violation found.
inline Judgement judge(const Judge& j, HistoryText h, const Recovered& rec, const Violation& base) {
  Judgement out;
  if (!rec.ok) {
    Violation v = base;
    v.criterion = "recovery";
    v.message = rec.error.empty() ? "recovery failed" : rec.error;
    out.violations.push_back(std::move(v));
    return out;
  }
  if (j.crashed_after_open && rec.clean_shutdown) {
    Violation v = base;
    v.criterion = "recovery";
    v.message =
        "the pool says it was closed cleanly, but its process crashed (the open's mark of an "
        "open pool was not durable)";
    out.violations.push_back(std::move(v));
  }
  if (const auto leak = leak_message(rec, j.threads)) {
    Violation v = base;
    v.criterion = "leak";
    v.message = *leak;
    out.violations.push_back(std::move(v));
  }
  h.recovered = &rec.items;
  if (h.criterion.value_or(j.entry.criterion) == Criterion::detectable) {
    // Fatourou et al.'s recovery invoked each thread's last operation again with its ticket: each
    // must have taken effect exactly once, with the response the re-invocation returned, which is
    // the one recover_pending reported for an operation it said took effect.
    h.reports = rec.reexecuted.empty() ? &rec.reports : &rec.reexecuted;
    detail::expect_same_responses(h.records, rec.reports, rec.reexecuted,
                                  "recover_pending and the operation invoked again with its "
                                  "ticket returned different responses",
                                  base, out);
  }
  detail::check_history(j, h, j.dump_name, "", base, out);
  if (rec.continued) {
    HistoryText c = continuation_history(j, rec, std::nullopt);
    c.meta = h.meta;
    c.meta["phase"] = "after recovery";
    c.recovered = &rec.reopened;
    detail::check_history(j, c, j.dump_name + "-after-recovery",
                          "after recovery, " + std::to_string(c.records.size()) +
                              " further operations and a clean reopen: ",
                          base, out);
  }
  return out;
}

// Judges the recoveries of one crash image: those crashed on purpose (`crashed`, in order,
// each from the crash image of the one before) and the one that ran to its end (`final`). A
// crash before the continuation changed nothing the structure holds; a recovery crashed in
// its continuation, its close or its reopen had read the contents and worked on: what it read
// must follow from the history so far, and from then on its continuation (continuation_history)
// is the history the next recovery must follow from. The last history is `final`'s, judged as
// any recovery is. An operation a crashed recovery invoked again with its ticket returned its
// response: the next recovery that invokes it again must return the same.
inline Judgement judge_after_crashed_recoveries(const Judge& j, HistoryText h,
                                                const std::vector<Recovered>& crashed,
                                                const Recovered& final, const Violation& base) {
  Judgement out;
  Judge current = j;
  std::string context;
  std::vector<Report> reexecuted;  // responses of re-invoked operations of the workload's
  for (std::size_t i = 0; i < crashed.size(); ++i) {
    const Recovered& r = crashed[i];
    const RecoveryPhase phase = *r.crashed;
    if (phase < RecoveryPhase::continuation) {
      // Re-invocations under the workload's tickets (the history is still the workload's).
      if (reexecuted.empty()) reexecuted = r.reexecuted;
      continue;
    }
    reexecuted.clear();
    // What r read follows from the history so far, and its continuation is the next history.
    h.recovered = &r.items;
    if (h.criterion.value_or(j.entry.criterion) == Criterion::detectable)
      h.reports = r.reexecuted.empty() ? &r.reports : &r.reexecuted;
    detail::check_history(current, h, current.dump_name, context, base, out);
    HistoryText c = continuation_history(j, r, phase);
    c.meta = h.meta;
    c.meta["phase"] = std::string("recovery crashed in ") + to_string(phase);
    h = std::move(c);
    // A crash in the close may come after its mark of a clean shutdown, one in the reopen
    // before the open marks the pool open again: the pool may then say it closed cleanly.
    current.crashed_after_open = j.crashed_after_open && phase < RecoveryPhase::close;
    current.dump_name = j.dump_name + "-after-crashed-recovery-" + std::to_string(i + 1);
    context += std::string("a recovery crashed in its ") + to_string(phase) + " phase after " +
               std::to_string(r.continuation.size()) + " further operations; ";
  }
  if (!reexecuted.empty())
    detail::expect_same_responses(h.records, reexecuted, final.reexecuted,
                                  "an operation invoked again with its ticket, before and after "
                                  "a crash of the recovery, returned different responses",
                                  base, out);
  Judgement rest = judge(current, std::move(h), final, base);
  for (Violation& v : rest.violations) {
    v.message = context + v.message;
    out.violations.push_back(std::move(v));
  }
  out.undecided += rest.undecided;
  return out;
}

}  // namespace pmds::crashlab
