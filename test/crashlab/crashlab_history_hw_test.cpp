// labels: crashlab memory
// The crash lab's parts that need no crash: history recording (what a crash at any instruction
// leaves readable), the JSON lines lincheck reads (checked end to end through lincheck, good
// and bad, and its verdicts remembered), the workload generator's determinism, the lab's own
// JSON records read back, a simulated run's CPU affinity.
#include <gtest/gtest.h>
#include <sched.h>

#include <bit>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "pmds/crashlab/history.hpp"
#include "pmds/crashlab/process.hpp"
#include "pmds/crashlab/report.hpp"
#include "pmds/crashlab/workload.hpp"

namespace {

using namespace pmds;
using namespace pmds::crashlab;
using registry::OpCode;
using registry::Operation;
using registry::OpResult;

struct LogBlock {
  explicit LogBlock(std::size_t threads, std::size_t capacity)
      : bytes(HistoryLog::bytes_for(threads, capacity)),
        memory(static_cast<unsigned char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64))) {}
  ~LogBlock() { std::free(memory); }
  std::size_t bytes;
  unsigned char* memory;
};

TEST(CrashlabHistoryLog, RecordsCompletedAndPendingOperationsWithIncreasingTimestamps) {
  LogBlock block(2, 4);
  HistoryLog log = HistoryLog::create(block.memory, block.bytes, 2, 4);
  log.record(0, {OpCode::insert, 5, 50, 1}, [] { return OpResult{true, 0, 0}; });
  // A crash inside the operation: the record is invoked, without a response.
  bool inside_checked = false;
  try {
    log.record(1, {OpCode::remove, 5, 0, 1}, [&]() -> OpResult {
      // What a reader sees while the op runs (a crash here): op 2 pending.
      const HistoryLog seen = HistoryLog::attach(block.memory, block.bytes);
      const auto rs = seen.snapshot();
      EXPECT_EQ(rs.size(), 2u);
      EXPECT_EQ(rs[1].ret, 0u);
      EXPECT_GT(rs[1].call, rs[0].ret);
      inside_checked = true;
      throw std::runtime_error("crash");
    });
  } catch (const std::runtime_error&) {
  }
  EXPECT_TRUE(inside_checked);
  const auto rs = log.snapshot();
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].thread, 0u);
  EXPECT_LT(rs[0].call, rs[0].ret);
  EXPECT_EQ(rs[0].ok, 1u);
  EXPECT_EQ(rs[1].ret, 0u);  // pending
  EXPECT_GT(log.now(), rs[1].call);
}

TEST(CrashlabHistoryLog, RefusesMoreRecordsThanItsCapacityAndForeignBlocks) {
  LogBlock block(1, 1);
  HistoryLog log = HistoryLog::create(block.memory, block.bytes, 1, 1);
  log.record(0, {OpCode::contains, 1, 0, 1}, [] { return OpResult{}; });
  EXPECT_THROW(log.record(0, {OpCode::contains, 1, 0, 1}, [] { return OpResult{}; }), Error);
  std::vector<unsigned char> junk(block.bytes, 0xab);
  EXPECT_THROW(HistoryLog::attach(junk.data(), junk.size()), Error);
  EXPECT_THROW(HistoryLog::create(block.memory, 8, 1, 1), Error);
}

// A durable map's entry, as the histories and workloads read it: its name, kind and criterion
// (nothing here creates a structure, so it names none: registry::find or the fixtures' table
// would compile every structure).
const registry::Entry& list_entry() {
  static const registry::Entry entry = [] {
    registry::Entry e;
    e.name = "list/izraelevitz-control";
    e.structure = "list";
    e.technique = "izraelevitz-control";
    e.kind = registry::Kind::map;
    e.criterion = Criterion::durable;
    e.durable = true;
    e.can_iterate = true;
    return e;
  }();
  return entry;
}

Record rec(std::uint16_t thread, OpCode code, std::uint64_t key, std::uint64_t value,
           std::uint64_t call, std::uint64_t ret, bool ok) {
  Record r;
  r.thread = thread;
  r.code = static_cast<std::uint8_t>(code);
  r.key = key;
  r.value = value;
  r.call = call;
  r.ret = ret;
  r.ok = ok ? 1 : 0;
  return r;
}

// A list's history: thread 0's insert(5) returned, thread 1's insert(6) was pending at the crash.
HistoryText two_inserts_and_a_crash() {
  HistoryText h;
  h.entry = &list_entry();
  h.records = {rec(0, OpCode::insert, 5, 50, 1, 2, true),
               rec(1, OpCode::insert, 6, 60, 3, 0, false)};
  h.crashed = true;
  h.crash_time = 4;
  return h;
}

TEST(CrashlabHistoryJson, GoodAndBadHistoriesThroughLincheck) {
  Lincheck checker(find_lincheck());
  std::vector<registry::Item> survived{{5, 50}};
  std::vector<registry::Item> lost;
  HistoryText h = two_inserts_and_a_crash();
  h.recovered = &survived;
  const std::string good = to_json_lines(h);
  EXPECT_NE(good.find("\"criterion\":\"durable\""), std::string::npos) << good;
  EXPECT_EQ(checker.check(good).verdict, "ok") << good;

  h.recovered = &lost;  // the completed insert(5) is gone
  const Verdict bad = checker.check(to_json_lines(h));
  EXPECT_EQ(bad.verdict, "violation");
  EXPECT_EQ(bad.criterion, "durable");
  EXPECT_EQ(bad.object, "key 5");
  ASSERT_FALSE(bad.excerpt.empty());

  // The pending insert(6) may have taken effect.
  std::vector<registry::Item> both{{5, 50}, {6, 60}};
  h.recovered = &both;
  EXPECT_EQ(checker.check(to_json_lines(h)).verdict, "ok");
  // But not with another value.
  std::vector<registry::Item> wrong{{5, 50}, {6, 61}};
  h.recovered = &wrong;
  EXPECT_EQ(checker.check(to_json_lines(h)).verdict, "violation");
}

// A history checked before (its text the same but for the header's meta, which names the
// structure and the replay point) gets the same verdict from memory; any other is asked.
TEST(CrashlabHistoryJson, LincheckAnswersARepeatedHistoryFromMemory) {
  Lincheck checker(find_lincheck());
  std::vector<registry::Item> survived{{5, 50}};
  std::vector<registry::Item> lost;
  HistoryText h = two_inserts_and_a_crash();
  h.recovered = &lost;  // the completed insert(5) is gone
  h.meta = {{"structure", "list/linkfree"}, {"replay", "1:100:0"}};
  const std::string first = to_json_lines(h);
  EXPECT_EQ(checker.check(first).verdict, "violation");
  EXPECT_EQ(checker.repeats(), 0u);

  h.meta = {{"structure", "list/linkfree"}, {"replay", "1:200:2"}};  // another crash point
  const std::string again = to_json_lines(h);
  ASSERT_NE(again, first);
  const Verdict repeated = checker.check(again);
  EXPECT_EQ(checker.repeats(), 1u);
  EXPECT_EQ(repeated.verdict, "violation");
  EXPECT_EQ(repeated.object, "key 5");

  h.recovered = &survived;  // another history: asked, and judged on its own
  EXPECT_EQ(checker.check(to_json_lines(h)).verdict, "ok");
  EXPECT_EQ(checker.repeats(), 1u);

  // An input error is asked every time (its message names the line of lincheck's input).
  const std::string bad =
      "{\"type\":\"header\",\"model\":\"set\",\"criterion\":\"durable\"}\n"
      "{\"type\":\"op\",\"thread\":0,\"op\":\"fly\",\"args\":[],\"call\":1,\"ret\":2}\n"
      "{\"type\":\"end\"}\n";
  EXPECT_EQ(checker.check(bad).verdict, "error");
  EXPECT_EQ(checker.check(bad).verdict, "error");
  EXPECT_EQ(checker.repeats(), 1u);
}

// A simulated workload run keeps itself, and what it starts, on the CPU it runs on (the
// calling thread only: the test's own threads keep their affinity).
TEST(CrashlabProcess, StayOnThisCpuKeepsTheCallerAndTheThreadsItStarts) {
  const auto cpus = [] {
    cpu_set_t set;
    EXPECT_EQ(::sched_getaffinity(0, sizeof set, &set), 0);
    return CPU_COUNT(&set);
  };
  const int before = cpus();
  int pinned = 0, started = 0, where = -1, on = -2;
  std::thread([&] {
    stay_on_this_cpu();
    pinned = cpus();
    where = ::sched_getcpu();
    std::thread([&] {
      started = cpus();
      on = ::sched_getcpu();
    }).join();
  }).join();
  EXPECT_EQ(pinned, 1);
  EXPECT_EQ(started, 1);
  EXPECT_EQ(on, where);
  EXPECT_EQ(cpus(), before);
}

// The papers' epoch bounds as marks on a buffered history's operations (crash in epoch 10).
TEST(CrashlabHistoryJson, EpochMarksFollowEachPapersBound) {
  const auto at = [](std::uint64_t call_epoch, std::uint64_t ret_epoch, bool done) {
    Record r = rec(0, OpCode::insert, 5, 50, 1, done ? 2 : 0, true);
    r.call_epoch = call_epoch;
    r.ret_epoch = ret_epoch;
    return r;
  };
  const auto mark = [](EpochBound b, const Record& r) {
    const char* m = epoch_mark(b, r, 10);
    return std::string(m == nullptr ? "" : m);
  };
  // nbMontage: returned by epoch e-2 = 8 survives; later, or pending, may be lost.
  EXPECT_EQ(mark(EpochBound::two_epochs, at(7, 8, true)), "durable");
  EXPECT_EQ(mark(EpochBound::two_epochs, at(8, 9, true)), "");
  EXPECT_EQ(mark(EpochBound::two_epochs, at(8, 8, false)), "");
  // InCLL: returned before the failed epoch 10 survives; begun in it is undone.
  EXPECT_EQ(mark(EpochBound::failed_epoch, at(9, 9, true)), "durable");
  EXPECT_EQ(mark(EpochBound::failed_epoch, at(9, 10, true)), "");
  EXPECT_EQ(mark(EpochBound::failed_epoch, at(10, 10, true)), "lost");
  EXPECT_EQ(mark(EpochBound::failed_epoch, at(10, 10, false)), "lost");
  EXPECT_EQ(mark(EpochBound::none, at(1, 1, true)), "");
  // sync has the checker's own rule.
  Record s = at(1, 1, true);
  s.code = static_cast<std::uint8_t>(OpCode::sync);
  EXPECT_EQ(mark(EpochBound::two_epochs, s), "");
}

TEST(CrashlabHistoryJson, StatesOfEveryKind) {
  registry::Entry e = list_entry();
  e.kind = registry::Kind::stack;
  // Contents of a stack come top first; the checker's state is bottom first.
  EXPECT_EQ(state_json(e, {{3, 0}, {2, 0}, {1, 0}}).dump(), "{\"items\":[1,2,3]}");
  e.kind = registry::Kind::queue;
  EXPECT_EQ(state_json(e, {{3, 0}, {2, 0}}).dump(), "{\"items\":[3,2]}");
  e.kind = registry::Kind::register_object;
  EXPECT_EQ(state_json(e, {{std::bit_cast<std::uint64_t>(1.5), 0}}).dump(), "{\"value\":1.5}");
  e.kind = registry::Kind::set;
  e.can_iterate = false;  // read back by probing: no values
  EXPECT_EQ(state_json(e, {{7, 0}}).dump(), "{\"keys\":[[7]]}");
  e.kind = registry::Kind::map;
  EXPECT_EQ(state_json(e, {{7, 70}}).dump(), "{\"keys\":[[7,70]]}");
  EXPECT_EQ(state_json(e, {}).dump(), "{\"keys\":[]}");
}

TEST(CrashlabWorkload, IsAFunctionOfItsSeed) {
  const registry::Entry& e = list_entry();
  WorkloadOptions o;
  const Workload a = make_workload(e, o, 7), b = make_workload(e, o, 7), c = make_workload(e, o, 8);
  const auto same = [](const Workload& x, const Workload& y) {
    if (x.per_thread.size() != y.per_thread.size() || x.prefill.size() != y.prefill.size())
      return false;
    for (std::size_t t = 0; t < x.per_thread.size(); ++t)
      for (std::size_t i = 0; i < x.per_thread[t].size(); ++i)
        if (x.per_thread[t][i].code != y.per_thread[t][i].code ||
            x.per_thread[t][i].key != y.per_thread[t][i].key ||
            x.per_thread[t][i].value != y.per_thread[t][i].value)
          return false;
    return true;
  };
  EXPECT_TRUE(same(a, b));
  EXPECT_FALSE(same(a, c));
  ASSERT_EQ(a.per_thread.size(), o.threads);
  EXPECT_EQ(a.prefill.size(), o.key_range / 2);
  for (const auto& ops : a.per_thread) {
    ASSERT_EQ(ops.size(), o.ops);
    for (const auto& op : ops) {
      EXPECT_GE(op.key, 1u);
      EXPECT_LE(op.key, o.key_range);
      EXPECT_NE(op.code, OpCode::sync);  // the list has no sync
    }
  }
}

TEST(CrashlabJson, ReadsWhatTheLabWrites) {
  Violation v;
  v.kind = "simulated";
  v.criterion = "durable";
  v.object = "key 5";
  v.message = "quote \" backslash \\ newline \n \xc3\xa9";
  v.excerpt = {"insert(5) -> true", "recovered: {}"};
  v.replay = "pmds crashtest --structure x --replay 1:2:0";
  v.crash_number = 3;
  LabResult r;
  r.structure = "list/izraelevitz";
  r.criterion = "durable";
  r.simulated_crashes = 18446744073709551615ull;
  r.violations = 1;
  r.sim_seconds = 2.5;
  r.details = {v};
  r.errors = {"a lab error"};
  const std::string line = json_line(result_json(r));
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;  // one record per line (pipes)
  const LabResult back = result_from_json(nlohmann::json::parse(line));
  EXPECT_EQ(back.structure, r.structure);
  EXPECT_EQ(back.simulated_crashes, r.simulated_crashes);
  EXPECT_EQ(back.violations, 1u);
  EXPECT_DOUBLE_EQ(back.sim_seconds, 2.5);
  EXPECT_EQ(back.errors, r.errors);
  ASSERT_EQ(back.details.size(), 1u);
  EXPECT_EQ(back.details[0].message, v.message);
  EXPECT_EQ(back.details[0].excerpt, v.excerpt);
  EXPECT_EQ(back.details[0].replay, v.replay);
  EXPECT_EQ(back.details[0].crash_number, 3u);
  EXPECT_TRUE(back.details[0].history_file.empty());
  // A missing field keeps its default; bytes that are not UTF-8 are replaced, not thrown on.
  EXPECT_EQ(result_from_json(nlohmann::json::parse("{}")).violations, 0u);
  EXPECT_NO_THROW(json_line(Json{{"message", "\xff"}}));
}

}  // namespace
