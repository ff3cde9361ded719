// A per-key checker of durable linearizability for set histories, shared by the seed 000 sets'
// direct crash tests (test/linkfree_soft/linkfree_sim_test.cpp, soft_crash_sim_test.cpp). The crash
// lab (include/pmds/crashlab) checks every registered structure with tools/lincheck instead; these
// tests check the recovered contents in process, exactly and fast, for their planted bugs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "pmds/interfaces.hpp"

namespace set_check {

using pmds::Key;
using pmds::Value;

// Set operations on different keys commute, and linearizability is local (Herlihy and Wing), so a
// set history is durably linearizable iff each key's sub-history is: every completed operation,
// and any subset of the pending ones, ordered consistently with real time and with the results
// they returned, leads from "absent" to the state recovery found.

enum class OpKind : std::uint8_t { insert, remove, contains, get };

struct Op {
  OpKind kind;
  Key key;
  Value value = 0;      // insert: the value; get: the value returned when found
  bool result = false;  // insert/remove/contains: returned true; get: found
  std::uint64_t invoked = 0;
  std::uint64_t responded = ~std::uint64_t{0};  // pending (no response before the crash)
  unsigned thread = 0;  // the thread that ran it: one thread's operations are sequential
  bool completed() const { return responded != ~std::uint64_t{0}; }
};

struct KeyState {
  bool present = false;
  Value value = 0;
  friend bool operator==(const KeyState&, const KeyState&) = default;
};

// Applies op to state; false if the result op returned is impossible from that state. A
// pending operation returned nothing before the crash, so any result is possible for it (what
// it returned afterwards in the run is not part of the history).
inline bool apply(const Op& op, KeyState& s) {
  const bool check = op.completed();
  switch (op.kind) {
    case OpKind::insert:
      if (check && op.result != !s.present) return false;
      if (!s.present) s = {true, op.value};
      return true;
    case OpKind::remove:
      if (check && op.result != s.present) return false;
      s = {};
      return true;
    case OpKind::contains:
      return !check || op.result == s.present;
    case OpKind::get:
      return !check || (op.result == s.present && (!s.present || op.value == s.value));
  }
  return false;
}

// True if the history of one key (all ops on that key) can end in `recovered`: a search over
// (how many operations of each thread are linearized, the key's state), memoised. The next
// operation of a thread may be linearized when no other thread's next operation responded
// before it was invoked (that one, and all later ones of its thread, respond later still); a
// pending operation, always its thread's last, may also be dropped (never took effect). The
// state space is the product of the threads' per-key operation counts times the states seen,
// small for the workloads of these tests even with long two-thread histories on one key.
inline bool key_history_ok(const std::vector<Op>& ops, const KeyState& recovered) {
  std::map<unsigned, std::vector<const Op*>> by_thread;
  for (const Op& op : ops) by_thread[op.thread].push_back(&op);
  std::vector<std::vector<const Op*>> seq;
  for (auto& [thread, list] : by_thread) {
    std::sort(list.begin(), list.end(),
              [](const Op* a, const Op* b) { return a->invoked < b->invoked; });
    seq.push_back(std::move(list));
  }
  const std::size_t threads = seq.size();
  using Position = std::vector<std::size_t>;
  std::set<std::tuple<Position, bool, Value>> seen;
  std::vector<std::pair<Position, KeyState>> stack{{Position(threads, 0), KeyState{}}};
  while (!stack.empty()) {
    auto [at, state] = stack.back();
    stack.pop_back();
    if (!seen.emplace(at, state.present, state.present ? state.value : 0).second) continue;
    bool done = true;
    for (std::size_t t = 0; t < threads; ++t)
      done = done && (at[t] == seq[t].size() ||
                      (at[t] + 1 == seq[t].size() && !seq[t][at[t]]->completed()));
    if (done && state == recovered) return true;
    for (std::size_t t = 0; t < threads; ++t) {
      if (at[t] == seq[t].size()) continue;
      const Op& op = *seq[t][at[t]];
      bool may_go_next = true;
      for (std::size_t u = 0; u < threads; ++u)
        if (u != t && at[u] < seq[u].size() && seq[u][at[u]]->responded < op.invoked)
          may_go_next = false;
      if (!may_go_next) continue;
      Position after = at;
      ++after[t];
      KeyState next = state;
      if (apply(op, next)) stack.push_back({after, next});
      if (!op.completed()) stack.push_back({after, state});
    }
  }
  return false;
}

// Checks a whole history against recovered contents; reports the first bad key.
inline ::testing::AssertionResult durably_linearizable(const std::vector<Op>& history,
                                                       const std::map<Key, Value>& recovered) {
  std::map<Key, std::vector<Op>> by_key;
  for (const Op& op : history) by_key[op.key].push_back(op);
  for (const auto& [k, v] : recovered)
    if (!by_key.count(k))
      return ::testing::AssertionFailure() << "recovered key " << k << " that no op touched";
  for (const auto& [k, ops] : by_key) {
    KeyState r;
    if (auto it = recovered.find(k); it != recovered.end()) r = {true, it->second};
    if (!key_history_ok(ops, r)) {
      auto f = ::testing::AssertionFailure();
      f << "key " << k << " recovered as "
        << (r.present ? "present (value " + std::to_string(r.value) + ")" : std::string("absent"))
        << ", which no linearization of its history reaches:";
      for (const Op& op : ops) {
        const char* names[] = {"insert", "remove", "contains", "get"};
        f << "\n  " << names[static_cast<int>(op.kind)] << "(" << op.key;
        if (op.kind == OpKind::insert) f << ", " << op.value;
        f << ") -> " << (op.completed() ? (op.result ? "true" : "false") : "pending") << " ["
          << op.invoked << ", ";
        if (op.completed())
          f << op.responded;
        else
          f << "-";
        f << "]";
      }
      return f;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace set_check
