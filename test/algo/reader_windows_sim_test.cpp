// labels: memory
// The persisting transformations over algo/ (FliT, algo/flit_policy.hpp; Izraelevitz's,
// algo/policy.hpp) under the Px86 crash model: the windows where a reader acts on a value that
// is not durable yet. A writer writes, then persists; a reader that loads the word before that
// persist must persist it itself before acting on it (Izraelevitz after every load, FliT when
// the word's flush counter says a write is in flight, FliT §3). The crash lab's workloads rarely
// reach such a window (a writer stopped between its write and its persist while another
// thread's whole operation completes, then a crash before the writer goes on), so its mutation
// runs left these sites open. Here a schedule hook stops the writer thread there, after each of
// its writes in turn, a reader thread runs an operation (itself stopped too where a window needs
// two or three preemptions), and the minimum crash image (only what is certainly durable) is
// taken then: what the reader observed must survive it, and recovery must accept the image.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "algo/algo_test_support.hpp"
#include "pmds/algo/flit_policy.hpp"
#include "pmds/algo/harris_michael_list.hpp"
#include "pmds/algo/natarajan_mittal_bst.hpp"
#include "pmds/algo/skip_list.hpp"
#include "pmds/algo/treiber_stack.hpp"
#include "pmds/random_height.hpp"
#include "support/crash_image.hpp"

namespace pmds::algo {
namespace {

using namespace testing;
using pmds::test::write_minimum_image;

// Where a thread stops: before its `before_access`-th access to the access layer, or after its
// `after_writes`-th write (a CAS on a word of the pool), before that write's persist or at its
// next CAS (the write persisted, and under FliT its counter lowered).
enum class StopWriter { before_its_persist, at_its_next_cas };
struct Plan {
  int before_access = 0;  // 0: not this way
  int after_writes = 0;   // 0: not this way
  StopWriter how = StopWriter::before_its_persist;
  bool any() const { return before_access != 0 || after_writes != 0; }
};
Plan before_access(int k) {
  Plan p;
  p.before_access = k;
  return p;
}
Plan after_writes(int n, StopWriter how = StopWriter::before_its_persist) {
  Plan p;
  p.after_writes = n;
  p.how = how;
  return p;
}

// One of the two threads a window runs: its plan and where it is. A thread may stop twice: at
// `plan`, then, let go, at `then`.
enum ThreadState : int { running, stopped, finished };
struct Role {
  Plan plan, then;
  std::atomic<int> state{running};
  std::atomic<int> events{0};  // stops and the end so far: what a window waits on
  std::atomic<bool> may_go{false};
  int writes = 0;  // the writes it made (counted up to its stop), once it has finished
  // With `record`, every access it makes in order: its address as an offset into the window's
  // pool (each window maps its pool at its own address), and whether it was a write.
  struct Access {
    pm::sim::Operation op;
    std::intptr_t offset;
    bool write;
  };
  bool record = false;
  std::vector<Access> trace;
};
Role writer_role, reader_role;
const void* window_pool = nullptr;  // the base of the window's pool
thread_local Role* role = nullptr;
thread_local int accesses = 0, writes = 0;

void signal(Role& r, ThreadState s) {
  r.state = s;
  ++r.events;
  r.events.notify_all();
}

constexpr std::size_t pool_bytes = 8u << 20;

// A write: a CAS on a word of the window's pool (the structures write their shared words by CAS,
// and a failed CAS counts: both transformations persist it as a read).
bool is_write(pm::sim::Operation op, const void* addr) {
  const auto offset =
      reinterpret_cast<std::uintptr_t>(addr) - reinterpret_cast<std::uintptr_t>(window_pool);
  return op == pm::sim::Operation::rmw && offset < pool_bytes;
}

// The schedule hook (pm::sim::set_schedule_hook): stops this thread where its plan says.
void stop_as_planned(pm::sim::Operation op, const void* addr) {
  using pm::sim::Operation;
  if (role == nullptr || role->state.load() != running) return;
  if (role->record)
    role->trace.push_back(
        {op, reinterpret_cast<std::intptr_t>(addr) - reinterpret_cast<std::intptr_t>(window_pool),
         is_write(op, addr)});
  const Plan& p = role->plan;
  bool here = p.before_access != 0 && ++accesses == p.before_access;
  if (p.after_writes != 0) {
    if (writes < p.after_writes) {
      writes += is_write(op, addr);
    } else {
      here =
          p.how == StopWriter::before_its_persist ? op == Operation::flush : op == Operation::rmw;
    }
  }
  if (!here) return;
  signal(*role, stopped);
  role->may_go.wait(false);
  role->may_go = false;
  role->plan = std::exchange(role->then, Plan{});  // on to the second stop, if any
  accesses = writes = 0;
  role->state = running;
}

// Runs f on a new thread in role r, and waits until it stops or finishes.
template <class F>
std::thread start(Role& r, const Plan& plan, F f, const Plan& then = {}) {
  r.plan = plan;
  r.then = then;
  r.state = running;
  r.may_go = false;
  const int before = r.events;
  std::thread t([&r, f] {
    role = &r;
    accesses = writes = 0;
    f();
    r.writes = writes;
    role = nullptr;
    signal(r, finished);
  });
  r.events.wait(before);
  return t;
}

// Lets a stopped thread go on, and waits until it stops again or finishes.
void resume(Role& r) {
  const int before = r.events;
  r.may_go = true;
  r.may_go.notify_all();
  r.events.wait(before);
}

// Lets a thread go on to its end (nothing if it has none), and waits for it.
void finish(Role& r, std::thread& t) {
  r.then = {};
  r.may_go = true;
  r.may_go.notify_all();
  if (t.joinable()) t.join();
}

// A structure's contents: a map's pairs, a stack's values from the top.
template <class S>
auto contents(const S& s) {
  if constexpr (requires { &S::get; }) {
    return contents_of(s);
  } else {
    std::vector<Value> values;
    s.for_each([&](Value v) { values.push_back(v); });
    return values;
  }
}

// What a reader saw and what the crash image kept.
template <class S>
struct Window {
  bool stopped;  // both threads stopped as planned (false: one made fewer accesses or writes)
  bool reader_stopped;  // the reader stopped at its first plan
  std::optional<Value> read;
  bool reader_result;
  decltype(contents(std::declval<const S&>())) recovered;
  decltype(contents(std::declval<const S&>())) recovered_again;  // set by an `after` step
};

// Where the two threads of a window stop. The writer always stops (its plan); the reader runs a
// whole operation after the writer stopped, or, with a plan, stops too and the crash comes with
// both stopped; or, reader_first, it runs first to its stop, the writer to its own, and then
// the reader finishes (two preemptions), or stops again at `reader_then` (three).
struct Schedule {
  Plan writer;
  Plan reader;
  bool reader_first = false;
  Plan reader_then = {};
};

// The contents an S in the pool at `path` recovers to.
template <class S>
auto recovered(const std::string& path) {
  auto pool = pm::Pool::open(path, "algo/window");
  S map(open_existing, pool);
  return contents(map);
}

// No step after the recovery (a step may crash the recovered structure: write_minimum_image of
// its pool at `pool_path` to `image_path`).
struct Nothing {
  template <class S>
  void operator()(S&, const std::string& /*pool_path*/, const std::string& /*image_path*/) const {}
};

// A structure `setup` filled (made durable), then `write` on a writer thread and `read` on a
// reader thread stopped as `schedule` says, then the minimum crash image and its recovery; then
// `after` on the recovered structure, which may crash it again.
template <class S, class Setup, class Write, class Read, class After = Nothing>
Window<S> window(Setup setup, const Schedule& schedule, Write write, Read read, After after = {}) {
  pmds::test::ClwbFlushes clwb;  // the model, not the host
  TempPath pool_path("window"), image_path("window-image");
  Window<S> out{};
  {
    auto pool = pm::Pool::create(pool_path.str(), pool_bytes, "algo/window");
    S map(create_new, pool);
    // On a thread of its own: a skip list's tower heights are drawn from the inserting thread's
    // generator, which a fresh thread (with the same pmds thread id: the smallest free one, this
    // thread holding its own) starts anew, so every window of a test builds the same structure,
    // whether the test runs alone or after others.
    (void)thread_id();
    std::thread([&] { setup(map); }).join();
    pm::sim::mark_all_durable();
    window_pool = pool.base();
    pm::sim::set_schedule_hook(&stop_as_planned);
    const auto write_it = [&] { write(map); };
    const auto read_it = [&] { read(map, out); };
    std::thread reader, writer;
    if (schedule.reader_first) {
      reader = start(reader_role, schedule.reader, read_it, schedule.reader_then);
      out.reader_stopped = reader_role.state == stopped;
    }
    if (!schedule.reader_first || out.reader_stopped) {
      writer = start(writer_role, schedule.writer, write_it);
      if (writer_role.state == stopped) {
        if (schedule.reader_first) {
          resume(reader_role);
          out.stopped = !schedule.reader_then.any() || reader_role.state == stopped;
        } else {
          reader = start(reader_role, schedule.reader, read_it);
          out.reader_stopped = reader_role.state == stopped;
          if (!schedule.reader.any()) finish(reader_role, reader);
          out.stopped = !schedule.reader.any() || out.reader_stopped;
        }
      }
    }
    if (out.stopped) write_minimum_image(pool_path.str(), image_path.str());
    finish(reader_role, reader);
    finish(writer_role, writer);
    pm::sim::set_schedule_hook(nullptr);
  }
  if (!out.stopped) return out;
  TempPath again_path("window-again");
  {
    auto pool = pm::Pool::open(image_path.str(), "algo/window");
    S map(open_existing, pool);
    out.recovered = contents(map);
    after(map, image_path.str(), again_path.str());
  }
  if (std::filesystem::exists(again_path.str()))
    out.recovered_again = recovered<S>(again_path.str());
  return out;
}

// Runs `check` on the window after each write of the writer in turn, until it makes no more.
template <class S, class Setup, class Write, class Read, class Check, class After = Nothing>
void each_window(Setup setup, StopWriter how, Write write, Read read, Check check,
                 int max_writes = 64, After after = {}) {
  int windows = 0;
  for (int n = 1; n <= max_writes; ++n) {
    SCOPED_TRACE("the writer stopped after its write " + std::to_string(n));
    const Window<S> w =
        window<S>(setup, Schedule{after_writes(n, how), Plan{}, false}, write, read, after);
    if (!w.stopped) break;
    ++windows;
    check(w);
  }
  EXPECT_GT(windows, 0) << "the writer never stopped: a vacuous test";
}

// Runs `check` on every window with two preemptions: the reader stopped before each of its
// accesses in turn and, for each, the writer stopped before the persist of each of its writes;
// then the reader finishes.
template <class S, class Setup, class Write, class Read, class Check>
void each_interleaving(Setup setup, Write write, Read read, Check check, int max_accesses,
                       int max_writes) {
  int windows = 0;
  for (int k = 1; k <= max_accesses; ++k) {
    for (int n = 1; n <= max_writes; ++n) {
      SCOPED_TRACE("the reader stopped before its access " + std::to_string(k) +
                   ", the writer after its write " + std::to_string(n));
      const Window<S> w =
          window<S>(setup, Schedule{after_writes(n), before_access(k), true}, write, read);
      if (!w.reader_stopped) return;  // k is past the reader's last access
      if (!w.stopped) break;
      ++windows;
      check(w);
    }
  }
  EXPECT_GT(windows, 0) << "the writer never stopped: a vacuous test";
}

// A setup that inserts `keys` into a map.
auto holding(std::initializer_list<Key> keys) {
  return [keys = std::vector<Key>(keys)](auto& map) {
    for (Key k : keys) EXPECT_TRUE(map.insert(k, value_of(k)));
  };
}

template <class S>
class ReaderWindows : public ::testing::Test {};
using OrderedMaps = ::testing::Types<HarrisMichaelList<flit>, SkipList<flit>,
                                     NatarajanMittalTree<flit>, HarrisMichaelList<izraelevitz>,
                                     SkipList<izraelevitz>, NatarajanMittalTree<izraelevitz>>;
TYPED_TEST_SUITE(ReaderWindows, OrderedMaps);

// In the list, slots are taken in insertion order, two to a line: 10 and 5 share one, 20 and 30
// the next, so a reader's own persist of 20's link does not write 10's back with it.

// A get that finds the new key reports it present: the insert took effect.
TYPED_TEST(ReaderWindows, AGetThatFindsAnInsertInFlightMakesItDurable) {
  int found = 0;
  each_window<TypeParam>(
      holding({10, 5}), StopWriter::before_its_persist,
      [](TypeParam& m) { EXPECT_TRUE(m.insert(20, value_of(20))); },
      [](TypeParam& m, auto& w) { w.read = m.get(20); },
      [&](const auto& w) {
        if (w.read) {
          ++found;
          EXPECT_EQ(w.recovered, keys_of({5, 10, 20})) << "the get saw 20, then lost";
        }
      });
  EXPECT_GT(found, 0) << "no window where the get found 20: a vacuous test";
}

// An insert whose search passes the new key links its own key beside it: it must survive.
TYPED_TEST(ReaderWindows, AnInsertLinkedAfterAnInsertInFlightMakesItDurable) {
  each_window<TypeParam>(
      holding({10, 5}), StopWriter::before_its_persist,
      [](TypeParam& m) { EXPECT_TRUE(m.insert(20, value_of(20))); },
      [](TypeParam& m, auto&) { EXPECT_TRUE(m.insert(30, value_of(30))); },
      [](const auto& w) {
        EXPECT_EQ(w.recovered.count(30), 1u) << "30 was inserted, then lost";
        EXPECT_EQ(w.recovered.count(5) + w.recovered.count(10), 2u);
      });
}

// The same behind a key that a search reaches only by walking its level: in the skip list 5 has
// a tower of one level and 10-40 of two (the setup thread's heights), so a search for 8 reads
// 5's link, which the insert of 7 wrote, only as it walks level 0 from 5.
TYPED_TEST(ReaderWindows, AnInsertLinkedAfterAnInsertInFlightBehindAShortTowerMakesItDurable) {
  each_window<TypeParam>(
      holding({10, 20, 30, 40, 5}), StopWriter::before_its_persist,
      [](TypeParam& m) { EXPECT_TRUE(m.insert(7, value_of(7))); },
      [](TypeParam& m, auto&) { EXPECT_TRUE(m.insert(8, value_of(8))); },
      [](const auto& w) {
        EXPECT_EQ(w.recovered.count(8), 1u) << "8 was inserted, then lost";
        auto others = w.recovered;  // 7 present or not: its insert is in flight
        others.erase(7);
        others.erase(8);
        EXPECT_EQ(others, keys_of({5, 10, 20, 30, 40}));
      });
}

// The same through the list's head (or the tree's leftmost leaf): the new key is the smallest.
TYPED_TEST(ReaderWindows, AnInsertLinkedAfterANewHeadInFlightMakesItDurable) {
  each_window<TypeParam>(
      holding({10}), StopWriter::before_its_persist,
      [](TypeParam& m) { EXPECT_TRUE(m.insert(5, value_of(5))); },
      [](TypeParam& m, auto&) { EXPECT_TRUE(m.insert(7, value_of(7))); },
      [](const auto& w) {
        EXPECT_EQ(w.recovered.count(7), 1u) << "7 was inserted, then lost";
        EXPECT_EQ(w.recovered.count(10), 1u);
      });
}

// The first insert into an empty map: the root's (or the head's) edge is what a reader meets.
TYPED_TEST(ReaderWindows, AGetThatFindsTheFirstInsertInFlightMakesItDurable) {
  int found = 0;
  each_window<TypeParam>(
      holding({}), StopWriter::before_its_persist,
      [](TypeParam& m) { EXPECT_TRUE(m.insert(10, value_of(10))); },
      [](TypeParam& m, auto& w) { w.read = m.get(10); },
      [&](const auto& w) {
        if (w.read) {
          ++found;
          EXPECT_EQ(w.recovered, keys_of({10})) << "the get saw 10, then lost";
        }
      });
  EXPECT_GT(found, 0) << "no window where the get found 10: a vacuous test";
}

// A get that sees the key removed reports it absent: the remove took effect. The remove stops
// before a write's persist, or at its next CAS: its write persisted and, under FliT, its counter
// lowered, so a get that sees that write does not persist it, and it must be durable already.
TYPED_TEST(ReaderWindows, AGetThatSeesARemoveInFlightMakesItDurable) {
  for (const StopWriter how : {StopWriter::before_its_persist, StopWriter::at_its_next_cas}) {
    int missed = 0;
    each_window<TypeParam>(
        holding({10, 5, 20}), how, [](TypeParam& m) { m.remove(20); },
        [](TypeParam& m, auto& w) { w.read = m.get(20); },
        [&](const auto& w) {
          if (!w.read) {
            ++missed;
            EXPECT_EQ(w.recovered.count(20), 0u) << "the get saw 20 removed, then kept";
          }
        });
    EXPECT_GT(missed, 0) << "no window where the get saw 20 removed: a vacuous test";
  }
}

// Two removes of one key: whichever returns true, once one has returned the key is gone.
TYPED_TEST(ReaderWindows, ARemoveThatMeetsARemoveInFlightMakesItDurable) {
  each_window<TypeParam>(
      holding({10, 5, 20}), StopWriter::before_its_persist, [](TypeParam& m) { m.remove(20); },
      [](TypeParam& m, auto& w) { w.reader_result = m.remove(20); },
      [](const auto& w) {
        EXPECT_EQ(w.recovered, keys_of({5, 10}))
            << "a remove of 20 returned " << w.reader_result << ", then 20 came back";
      });
}

// A remove unlinks its key's nodes by CASes whose persists must be durable before the nodes'
// slots are reused: here no thread reads those links again (insert(5) writes only where the
// smallest keys are), so without them the minimum image still links the old slots, which now
// hold the new key's nodes.
template <class S>
class SlotReuse : public ::testing::Test {};
using UnlinkingMaps = ::testing::Types<SkipList<flit>, NatarajanMittalTree<flit>,
                                       SkipList<izraelevitz>, NatarajanMittalTree<izraelevitz>>;
TYPED_TEST_SUITE(SlotReuse, UnlinkingMaps);

TYPED_TEST(SlotReuse, AnUnlinkIsDurableBeforeItsSlotsAreReused) {
  pmds::test::ClwbFlushes clwb;  // the model, not the host
  TempPath pool_path("reuse"), image_path("reuse-image");
  {
    auto pool = pm::Pool::create(pool_path.str(), pool_bytes, "algo/window");
    TypeParam map(create_new, pool);
    holding({10, 20, 30, 40, 50})(map);
    pm::sim::mark_all_durable();
    EXPECT_TRUE(map.remove(30));
    map.drain();
    EXPECT_TRUE(map.insert(5, value_of(5)));
    write_minimum_image(pool_path.str(), image_path.str());
  }
  EXPECT_EQ(recovered<TypeParam>(image_path.str()), keys_of({5, 10, 20, 40, 50}));
}

template <class S>
class SkipListWindows : public ::testing::Test {};
using SkipLists = ::testing::Types<SkipList<flit>, SkipList<izraelevitz>>;
TYPED_TEST_SUITE(SkipListWindows, SkipLists);

// A skip list of the keys 1..64, whose towers are the same in every window (the setup's thread
// draws them anew).
constexpr Key tower_keys = 64;
template <class List>
void fill(List& l) {
  for (Key k = 1; k <= tower_keys; ++k) EXPECT_TRUE(l.insert(k, value_of(k)));
}

// The key of its tallest tower, and the writes its remove alone makes: h-1 upper marks, the
// level-0 mark, an unlink a level and the release (2h + 1 writes).
template <class List>
std::pair<Key, int> tallest_tower() {
  Key tallest = 0;
  int most = 0;
  for (Key k = 1; k <= tower_keys; ++k) {
    window<List>(
        fill<List>, Schedule{after_writes(1000), Plan{}, false}, [k](List& l) { l.remove(k); },
        [](List&, auto&) {});
    if (writer_role.writes > most) std::tie(tallest, most) = std::pair(k, writer_role.writes);
  }
  return {tallest, most};
}

// The skip list's remove marks a node's levels top-down, each mark persisted before the next:
// recovery requires a node unmarked at a level to be unmarked at every level below. Levels 0-3
// share the node's first line, so a lost upper mark shows only on a tower of 5 levels or more:
// the tallest tower's remove, with a crash at each of its CASes.
TYPED_TEST(SkipListWindows, AnUpperLevelsMarkIsDurableBeforeTheMarkBelowIt) {
  using List = TypeParam;
  const auto [tallest, most] = tallest_tower<List>();
  ASSERT_GE(most, 11) << "no tower of 5 levels or more";
  each_window<List>(
      fill<List>, StopWriter::at_its_next_cas, [tallest](List& l) { l.remove(tallest); },
      [](List&, auto&) {},
      [tallest](const auto& w) {
        auto others = w.recovered;  // the key present or not: its remove is in flight
        others.erase(tallest);
        EXPECT_EQ(others.size(), tower_keys - 1);
      },
      most);
}

// A remove that finds an upper level already marked by another remove in flight does not mark it
// again: it marks the levels below, level 0 last; the mark it skipped must be durable by then, or
// a crash before its unlinks finds the node unmarked above a marked level: on the tallest tower
// (see above). Three preemptions: the reader's remove stopped
// after its search, right before it reads the top level's link; the writer's remove stopped
// after marking it, before the persist; the reader again, before the persist of each of its
// writes in turn (its marks, then its unlinks).
TYPED_TEST(SkipListWindows, ARemoveThatFindsAnUpperLevelMarkedMakesItDurable) {
  using List = TypeParam;
  const auto [tallest, most] = tallest_tower<List>();
  ASSERT_GE(most, 11) << "no tower of 5 levels or more";
  const auto nothing = [](List&, auto&) {};
  const auto never = after_writes(1000);
  const auto remove_it = [tallest](List& l) { l.remove(tallest); };
  const auto remove_it_too = [tallest](List& l, auto&) { l.remove(tallest); };
  // Each alone: the writer's writes, and the reader's loads, by address.
  writer_role.record = reader_role.record = true;
  writer_role.trace.clear();
  reader_role.trace.clear();
  window<List>(fill<List>, Schedule{never, Plan{}, false}, remove_it, nothing);
  window<List>(fill<List>, Schedule{never, before_access(1 << 20), true}, remove_it, remove_it_too);
  writer_role.record = reader_role.record = false;
  // The reader stopped right before it reads the top level's link in its marking loop: its
  // second load of the word the writer writes first (the top level's mark), its search having
  // made the first. Then the writer stopped after each of its writes in turn, and for each, the
  // reader again after each of its own.
  const auto top = std::find_if(writer_role.trace.begin(), writer_role.trace.end(),
                                [](const Role::Access& a) { return a.write; });
  ASSERT_NE(top, writer_role.trace.end());
  int before_its_load = 0;
  for (std::size_t i = 0, loads = 0; i < reader_role.trace.size() && before_its_load == 0; ++i)
    if (reader_role.trace[i].op == pm::sim::Operation::load &&
        reader_role.trace[i].offset == top->offset && ++loads == 2)
      before_its_load = static_cast<int>(i) + 1;
  ASSERT_GT(before_its_load, 0);
  int windows = 0;
  for (int n = 1; n <= most; ++n) {
    for (int m = 1; m <= most; ++m) {
      SCOPED_TRACE("the writer stopped after its write " + std::to_string(n) +
                   ", the reader again before the persist of its write " + std::to_string(m));
      const auto w = window<List>(
          fill<List>,
          Schedule{after_writes(n), before_access(before_its_load), true, after_writes(m)},
          remove_it, remove_it_too);
      if (!w.stopped) break;
      ++windows;
      auto others = w.recovered;  // the key present or not: both removes are in flight
      others.erase(tallest);
      EXPECT_EQ(others.size(), tower_keys - 1);
    }
  }
  EXPECT_GT(windows, 0) << "the threads never stopped: a vacuous test";
}

// A remove whose search found the key unmarked, stopped before it reads the key's level-0 link,
// while another remove marks it: it answers false (removed already) with no CAS of its own.
TYPED_TEST(SkipListWindows, ARemoveThatMeetsAMarkAfterItsSearchMakesItDurable) {
  using List = TypeParam;
  each_interleaving<List>(
      holding({10, 5, 20}), [](List& l) { l.remove(20); },
      [](List& l, auto& w) { w.reader_result = l.remove(20); },
      [](const auto& w) {
        EXPECT_EQ(w.recovered, keys_of({5, 10}))
            << "a remove of 20 returned " << w.reader_result << ", then 20 came back";
      },
      /*max_accesses=*/200, /*max_writes=*/8);
}

// Recovery finishes a crashed remove: it unlinks the marked node at every level and retires it.
// Those unlinks must be durable before the slot is reused: here the recovered list reuses it
// (insert(5) writes only where the smallest keys are), then crashes again.
TYPED_TEST(SkipListWindows, ARecoveredUnlinkIsDurableBeforeItsSlotIsReused) {
  using List = TypeParam;
  each_window<List>(
      holding({10, 20, 30, 40, 50}), StopWriter::at_its_next_cas,
      [](List& l) { EXPECT_TRUE(l.remove(30)); }, [](List&, auto&) {},
      [](const auto& w) {
        auto others = w.recovered;  // 30 present or not: its remove is in flight
        others.erase(30);
        EXPECT_EQ(others, keys_of({10, 20, 40, 50}));
        EXPECT_EQ(w.recovered_again, [&] {
          auto expected = w.recovered;
          expected.emplace(5, value_of(5));
          return expected;
        }());
      },
      /*max_writes=*/64,
      [](List& l, const std::string& pool_path, const std::string& image_path) {
        l.drain();
        EXPECT_TRUE(l.insert(5, value_of(5)));
        write_minimum_image(pool_path, image_path);
      });
}

// The first n tower heights a fresh thread draws, in order (random_height.hpp). Every thread these
// tests start is a fresh one with the smallest free pmds id (the test's own thread holds its own),
// so each draws these; after skip_draws(k) its next draw is the k-th of them (from 0).
template <class List>
std::vector<unsigned> first_draws(int n) {
  (void)thread_id();
  std::vector<unsigned> height(static_cast<std::size_t>(n));
  std::thread([&] {
    for (auto& h : height) h = random_height<List::max_height>();
  }).join();
  return height;
}
template <class List>
void skip_draws(int k) {
  for (int i = 0; i < k; ++i) random_height<List::max_height>();
}

// An insert whose link at an upper level lost its race (the successor it found there was removed
// meanwhile) aims its own link at the new successor, by a CAS, before it links the level. That
// CAS must be durable before the old successor's slot is reused: here nothing reads the link
// again (above level 3 it is in the node's second line, which the insert's release does not
// touch, and the later insert of a smaller key stops its search at that level before the node),
// so without it the minimum image links the node to the old slot, which holds the smaller key.
TYPED_TEST(SkipListWindows, AnInsertsReaimedUpperLinkIsDurableBeforeTheOldSlotIsReused) {
  using List = TypeParam;
  // Towers of 5 levels or more are one in 16: the first 160 draws hold a few.
  constexpr int draws = 160;
  const std::vector<unsigned> height = first_draws<List>(draws);
  // The setup inserts 2, 4, ..., 320 (heights height[0..159]). P and S: two keys next to each
  // other at level 4 (towers of 5 levels or more; S's node in the slot size of a 5-level one).
  // The writer inserts P + 1 with a tower of exactly 5 levels (its draw `five`): S is its
  // successor at level 4, and its link there is its only word in its second line.
  auto tall = [&](int from) {
    int i = from;
    while (i < draws && height[i] < 5) ++i;
    return i;
  };
  const int p = tall(0), q = tall(p + 1);
  const int five = static_cast<int>(std::find(height.begin(), height.end(), 5u) - height.begin());
  ASSERT_LT(q, draws) << "no two towers of 5 levels or more";
  ASSERT_LE(height[q], 12u) << "S's node is larger than a 5-level one";
  ASSERT_LT(five, draws) << "no tower of exactly 5 levels";
  const Key P = 2 * static_cast<Key>(p + 1), S = 2 * static_cast<Key>(q + 1);
  const Key inserted = P + 1, smaller = P - 1;

  pmds::test::ClwbFlushes clwb;  // the model, not the host
  TempPath pool_path("reaim"), image_path("reaim-image");
  std::vector<std::intptr_t> removes_writes, reusers_stores;
  {
    auto pool = pm::Pool::create(pool_path.str(), pool_bytes, "algo/window");
    List map(create_new, pool);
    std::thread([&] {
      for (Key k = 2; k <= 2 * draws; k += 2) EXPECT_TRUE(map.insert(k, value_of(k)));
    }).join();
    pm::sim::mark_all_durable();
    window_pool = pool.base();
    pm::sim::set_schedule_hook(&stop_as_planned);
    writer_role.record = reader_role.record = true;
    writer_role.trace.clear();
    // The writer stopped after its level-0 link, its search done; S removed, at every level.
    std::thread writer = start(writer_role, after_writes(1, StopWriter::at_its_next_cas), [&] {
      skip_draws<List>(five);
      EXPECT_TRUE(map.insert(inserted, value_of(inserted)));
    });
    EXPECT_EQ(writer_role.state, stopped);
    reader_role.trace.clear();
    std::thread remover = start(reader_role, Plan{}, [&] { EXPECT_TRUE(map.remove(S)); });
    finish(reader_role, remover);
    for (const auto& a : reader_role.trace)
      if (a.write) removes_writes.push_back(a.offset);
    finish(writer_role, writer);
    // The smaller key's insert takes S's slot, which its drain freed to the same thread.
    reader_role.trace.clear();
    std::thread reuser = start(reader_role, Plan{}, [&] {
      map.drain();
      skip_draws<List>(five);
      EXPECT_TRUE(map.insert(smaller, value_of(smaller)));
    });
    finish(reader_role, reuser);
    for (const auto& a : reader_role.trace)
      if (a.op == pm::sim::Operation::store) reusers_stores.push_back(a.offset);
    writer_role.record = reader_role.record = false;
    pm::sim::set_schedule_hook(nullptr);
    write_minimum_image(pool_path.str(), image_path.str());
  }
  // Not vacuous: the writer re-aimed its level-4 link (a CAS on the last word it initialized,
  // its node's highest), and the smaller key's node was written over S's links.
  std::intptr_t last_init = -1;
  bool reaimed = false;
  for (const auto& a : writer_role.trace) {
    if (a.op == pm::sim::Operation::store) last_init = std::max(last_init, a.offset);
    if (a.write && a.offset == last_init) reaimed = true;
  }
  EXPECT_TRUE(reaimed) << "the writer's level-4 link never lost its race";
  EXPECT_TRUE(std::find_first_of(reusers_stores.begin(), reusers_stores.end(),
                                 removes_writes.begin(),
                                 removes_writes.end()) != reusers_stores.end())
      << "the smaller key's node is not in S's slot";
  std::map<Key, Value> expected;
  for (Key k = 2; k <= 2 * draws; k += 2) expected.emplace(k, value_of(k));
  expected.erase(S);
  expected.emplace(inserted, value_of(inserted));
  expected.emplace(smaller, value_of(smaller));
  EXPECT_EQ(recovered<List>(image_path.str()), expected);
}

// A list whose every level a test can walk: what is wrong with it once it is quiescent.
template <class List>
struct EveryLevel : List {
  using List::List;
  // Every remove's find() has run since its mark, so no node linked at any level is marked, and
  // each level's keys ascend strictly.
  std::vector<std::string> faults() const {
    std::vector<std::string> out;
    for (int level = 0; level < List::max_height; ++level) {
      std::optional<Key> last;
      for (auto* n = pointer_of<typename List::Node>(this->head_->next(level).peek());
           n != nullptr;) {
        const std::uintptr_t link = n->next(level).peek();
        const Key key = n->key.peek();
        const std::string where = "level " + std::to_string(level) + ", key " + std::to_string(key);
        if (is_marked(link)) out.push_back(where + ": a removed node still linked");
        if (last && *last >= key) out.push_back(where + ": after key " + std::to_string(*last));
        last = key;
        n = pointer_of<typename List::Node>(link);
      }
    }
    return out;
  }
  // The keys linked at `level`.
  std::vector<Key> keys_at(int level) const {
    std::vector<Key> out;
    for (auto* n = pointer_of<typename List::Node>(this->head_->next(level).peek()); n != nullptr;
         n = pointer_of<typename List::Node>(n->next(level).peek()))
      out.push_back(n->key.peek());
    return out;
  }
};

// An insert of key K whose search read K's old node N0 unmarked at level 1, then found K absent
// at level 0 (a remove of K marked N0 meanwhile, and has not unlinked it yet), must not link its
// node in front of N0 at level 1: the remove's find() stops at the first node of K, so it would
// never unlink N0 there, and N0 would be freed while still linked (the header's "Reclamation").
// The insert stopped right before it reads N0's level-0 link; the remove then stopped after its
// marks, before its first unlink; the insert runs to its end, then the remove.
TYPED_TEST(SkipListWindows, AnInsertNeverLinksInFrontOfARemovedNodeOfItsKey) {
  using List = EveryLevel<TypeParam>;
  constexpr int draws = 32;
  const std::vector<unsigned> height = first_draws<List>(draws);
  // K: the first key of the setup 2, 4, ..., 64 with a tower of 2 levels or more; the insert
  // draws the same height. The remove's writes before its first unlink: its marks, one a level.
  const int i = static_cast<int>(
      std::find_if(height.begin(), height.end(), [](unsigned h) { return h >= 2; }) -
      height.begin());
  ASSERT_LT(i, draws) << "no tower of 2 levels or more";
  const Key K = 2 * static_cast<Key>(i + 1);
  const int marks = static_cast<int>(height[i]);
  const auto fill = [&](List& l) {
    std::thread([&] {
      for (Key k = 2; k <= 2 * draws; k += 2) EXPECT_TRUE(l.insert(k, value_of(k)));
    }).join();
  };
  const auto insert_it = [&](List& l, bool expected) {
    skip_draws<List>(i);
    EXPECT_EQ(l.insert(K, value_of(K + 1)), expected);
  };

  // Where the insert reads N0's level-0 link: the remove's last mark is on that word (each run
  // on a fresh pool lays the list out the same).
  int before_its_load = 0;
  for (bool recording : {true, false}) {
    TempPath pool_path("in-front");
    auto pool = pm::Pool::create(pool_path.str(), pool_bytes, "algo/window");
    List list(create_new, pool);
    fill(list);
    window_pool = pool.base();
    pm::sim::set_schedule_hook(&stop_as_planned);
    if (recording) {
      writer_role.record = reader_role.record = true;
      writer_role.trace.clear();
      reader_role.trace.clear();
      std::thread a = start(reader_role, Plan{}, [&] { insert_it(list, false); });
      finish(reader_role, a);
      std::thread b = start(writer_role, Plan{}, [&] { EXPECT_TRUE(list.remove(K)); });
      finish(writer_role, b);
      writer_role.record = reader_role.record = false;
      pm::sim::set_schedule_hook(nullptr);
      std::vector<std::intptr_t> writes;
      for (const auto& a : writer_role.trace)
        if (a.write) writes.push_back(a.offset);
      ASSERT_GT(writes.size(), static_cast<std::size_t>(marks));
      const auto load = std::find_if(
          reader_role.trace.begin(), reader_role.trace.end(), [&](const Role::Access& a) {
            return a.op == pm::sim::Operation::load && a.offset == writes[marks - 1];
          });
      ASSERT_NE(load, reader_role.trace.end()) << "the insert never read N0's level-0 link";
      before_its_load = static_cast<int>(load - reader_role.trace.begin()) + 1;
      continue;
    }
    std::thread a =
        start(reader_role, before_access(before_its_load), [&] { insert_it(list, true); });
    ASSERT_EQ(reader_role.state, stopped);
    std::thread b = start(writer_role, after_writes(marks, StopWriter::at_its_next_cas),
                          [&] { EXPECT_TRUE(list.remove(K)); });
    EXPECT_EQ(writer_role.state, stopped) << "the remove never reached its first unlink";
    finish(reader_role, a);
    finish(writer_role, b);
    pm::sim::set_schedule_hook(nullptr);
    // Not vacuous: the new node of K is linked at level 1 (its tower is N0's height).
    const auto level1 = list.keys_at(1);
    EXPECT_NE(std::find(level1.begin(), level1.end(), K), level1.end());
    EXPECT_THAT(list.faults(), ::testing::IsEmpty());
    std::map<Key, Value> expected;
    for (Key k = 2; k <= 2 * draws; k += 2) expected.emplace(k, value_of(k));
    expected[K] = value_of(K + 1);
    EXPECT_EQ(contents(list), expected);
  }
}

// The stack: a pop that finds it empty after a pop in flight took its last value. (A push's and a
// pop's other loads of the top feed their CAS on the top, which persists it either way.)
template <class S>
class StackWindows : public ::testing::Test {};
using Stacks = ::testing::Types<TreiberStack<flit>, TreiberStack<izraelevitz>>;
TYPED_TEST_SUITE(StackWindows, Stacks);

TYPED_TEST(StackWindows, APopThatFindsTheStackEmptiedByAPopInFlightMakesItDurable) {
  using Stack = TypeParam;
  each_window<Stack>([](Stack& s) { s.push(value_of(1)); }, StopWriter::before_its_persist,
                     [](Stack& s) { EXPECT_EQ(s.pop(), value_of(1)); },
                     [](Stack& s, auto& w) { w.read = s.pop(); },
                     [](const auto& w) {
                       EXPECT_EQ(w.read, std::nullopt);
                       EXPECT_TRUE(w.recovered.empty())
                           << "a pop found the stack empty, then its value came back";
                     });
}

}  // namespace
}  // namespace pmds::algo
