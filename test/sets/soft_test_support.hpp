// Shared by the SOFT set tests (list, hash, skip list; hardware, counting and simulated
// backends): how to create and open each structure in a pool, and a per-key checker of durable
// linearizability for set histories.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "pmds/pm/pool.hpp"
#include "pmds/sets/soft_list.hpp"
#include "pmds/sets/soft_skiplist.hpp"
#include "pool/pool_test_util.hpp"

namespace soft_test {

using pmds::Key;
using pmds::Value;
namespace pm = pmds::pm;
namespace sets = pmds::sets;

// One SOFT structure: its type, layout name, and how to create it in / open it from a pool.
template <sets::SoftBug Bug = sets::SoftBug::none>
struct ListKind {
  using type = sets::SoftList<Bug>;
  static constexpr const char* layout = "list/soft";
  static constexpr sets::SoftBug bug = Bug;
  static std::unique_ptr<type> create(pm::Pool& p) {
    return std::make_unique<type>(sets::create_new, p);
  }
  static std::unique_ptr<type> open(pm::Pool& p) {
    return std::make_unique<type>(sets::open_existing, p);
  }
  // Quiescent: frees every retired node now (their slots return to the allocator).
  static void drain(type& s) { s.shared().domain().drain(); }
};

// A small table, so that buckets hold several keys and the lists inside are exercised.
template <sets::SoftBug Bug = sets::SoftBug::none>
struct HashKind {
  using type = sets::SoftHashSet<Bug>;
  static constexpr const char* layout = "hash/soft";
  static constexpr sets::SoftBug bug = Bug;
  static constexpr std::size_t buckets = 8;
  static std::unique_ptr<type> create(pm::Pool& p) {
    return std::make_unique<type>(sets::create_new, p, buckets);
  }
  static std::unique_ptr<type> open(pm::Pool& p) {
    return std::make_unique<type>(sets::open_existing, p);
  }
  static void drain(type& s) { s.shared().domain().drain(); }
};

template <sets::SoftBug Bug = sets::SoftBug::none>
struct SkipKind {
  using type = sets::SoftSkipList<Bug>;
  static constexpr const char* layout = "skiplist/soft";
  static constexpr sets::SoftBug bug = Bug;
  static std::unique_ptr<type> create(pm::Pool& p) {
    return std::make_unique<type>(sets::create_new, p);
  }
  static std::unique_ptr<type> open(pm::Pool& p) {
    return std::make_unique<type>(sets::open_existing, p);
  }
  static void drain(type& s) { s.domain().drain(); }
};

// A structure's contents, read quiescently.
template <class S>
std::map<Key, Value> contents(S& s) {
  std::map<Key, Value> m;
  s.for_each([&](Key k, Value v) {
    EXPECT_TRUE(m.emplace(k, v).second) << "key " << k << " listed twice";
  });
  return m;
}

// ---- A per-key durable-linearizability checker -------------------------------------------------
// Set operations on different keys commute, and linearizability is local (Herlihy and Wing), so a
// set history is durably linearizable iff each key's sub-history is: every completed operation,
// and any subset of the pending ones, ordered consistently with real time and with the results
// they returned, leads from "absent" to the state recovery found. Brute force with memoisation
// over (operations placed, state); the per-key histories here are small.

enum class OpKind : std::uint8_t { insert, remove, contains, get };

struct Op {
  OpKind kind;
  Key key;
  Value value = 0;      // insert: the value; get: the value returned when found
  bool result = false;  // insert/remove/contains: returned true; get: found
  std::uint64_t invoked = 0;
  std::uint64_t responded = ~std::uint64_t{0};  // pending (no response before the crash)
  bool completed() const { return responded != ~std::uint64_t{0}; }
};

struct KeyState {
  bool present = false;
  Value value = 0;
  friend bool operator==(const KeyState&, const KeyState&) = default;
};

// Applies op to state; false if the result op returned is impossible from that state.
inline bool apply(const Op& op, KeyState& s) {
  switch (op.kind) {
    case OpKind::insert:
      if (op.result != !s.present) return false;
      if (!s.present) s = {true, op.value};
      return true;
    case OpKind::remove:
      if (op.result != s.present) return false;
      s = {};
      return true;
    case OpKind::contains:
      return op.result == s.present;
    case OpKind::get:
      return op.result == s.present && (!s.present || op.value == s.value);
  }
  return false;
}

// True if the history of one key (all ops on that key) can end in `recovered`.
inline bool key_history_ok(const std::vector<Op>& ops, const KeyState& recovered) {
  const std::size_t n = ops.size();
  if (n > 62) {
    ADD_FAILURE() << "per-key history too long for the checker: " << n;
    return false;
  }
  // must_precede[i]: ops that responded before op i was invoked.
  std::vector<std::uint64_t> must_precede(n, 0);
  std::uint64_t completed_mask = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (ops[i].completed()) completed_mask |= std::uint64_t{1} << i;
    for (std::size_t j = 0; j < n; ++j)
      if (j != i && ops[j].responded < ops[i].invoked) must_precede[i] |= std::uint64_t{1} << j;
  }
  std::set<std::tuple<std::uint64_t, bool, Value>> seen;
  // Depth-first over placed sets. `placed` ⊇ ops linearized; pending ops may also be skipped,
  // which we model by a separate "dropped" mask folded into placed (a dropped op is placed with
  // no effect), allowed only for pending ops.
  std::vector<std::pair<std::uint64_t, KeyState>> stack{{0, KeyState{}}};
  const std::uint64_t all = n == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1;
  while (!stack.empty()) {
    auto [placed, state] = stack.back();
    stack.pop_back();
    if (!seen.emplace(placed, state.present, state.present ? state.value : 0).second) continue;
    if (placed == all) {
      if (state == recovered) return true;
      continue;
    }
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t bit = std::uint64_t{1} << i;
      if ((placed & bit) != 0 || (must_precede[i] & ~placed) != 0) continue;
      KeyState next = state;
      if (apply(ops[i], next)) stack.push_back({placed | bit, next});
      // A pending op may also never take effect. Dropping it does not constrain order: ops it
      // must precede were invoked after it responded, and pending ops never responded.
      if ((completed_mask & bit) == 0) stack.push_back({placed | bit, state});
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

}  // namespace soft_test
