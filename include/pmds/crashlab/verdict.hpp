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
  v.message = context + (verdict.verdict == "unknown" ? "the checker could not decide the " +
                                                            std::string(to_string(j.entry.criterion)) +
                                                            " history: " + verdict.message
                                                      : verdict.message);
  v.excerpt = verdict.excerpt;
  if (j.keep) v.history_file = j.keep(text);
  out.violations.push_back(std::move(v));
}

// The continuation as a sequential history of thread 0, from the contents the lab read to the
// contents after the clean reopen.
inline std::vector<Record> continuation_records(const Judge& j, const Recovered& rec) {
  const auto ops = make_continuation(j.entry, j.key_range, rec.continuation.size());
  std::vector<Record> records;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    Record r;
    r.call = 2 * i + 1;
    r.ret = 2 * i + 2;
    r.code = static_cast<std::uint8_t>(ops[i].code);
    r.ok = rec.continuation[i].ok ? 1 : 0;
    r.key = ops[i].key;
    r.value = ops[i].value;
    r.factor = ops[i].factor;
    r.result_value = rec.continuation[i].value;
    r.result_number = rec.continuation[i].number;
    records.push_back(r);
  }
  return records;
}

}  // namespace detail

// Judges one recovery. `h` is the history up to the crash (its `recovered` is set here from
// `rec`); `base` carries the kind, crash number and replay command of every violation found.
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
  if (j.entry.criterion == Criterion::detectable) h.reports = &rec.reports;
  detail::check_history(j, h, j.dump_name, "", base, out);
  if (rec.continued) {
    const std::vector<registry::Item> read = contents_after_reading(j.entry, rec.items);
    HistoryText c;
    c.entry = &j.entry;
    c.meta = h.meta;
    c.meta["phase"] = "after recovery";
    c.init = &read;
    c.records = detail::continuation_records(j, rec);
    c.crashed = true;  // the clean reopen: every operation completed before it
    c.crash_time = 2 * c.records.size() + 1;
    c.recovered = &rec.reopened;
    // A clean close makes everything durable, whatever a crash may lose: a buffered structure's
    // close syncs (montage/, incll/), so nothing completed before it may be missing after the
    // reopen. Durable linearizability, not the entry's own criterion (for a buffered entry,
    // a prefix would do; with no operation pending, detectable is durable).
    c.criterion = Criterion::durable;
    detail::check_history(j, c, j.dump_name + "-after-recovery",
                          "after recovery, " + std::to_string(c.records.size()) +
                              " further operations and a clean reopen: ",
                          base, out);
  }
  return out;
}

}  // namespace pmds::crashlab
