// labels: memory
// FliT (algo/flit_policy.hpp) under the Px86 crash model: the windows where a reader acts on a
// value that is not durable yet. A writer raises the word's flush counter, writes, persists,
// lowers the counter; a reader that loads the word while the counter is raised persists it
// itself before acting on it (FliT §3). The crash lab's workloads rarely reach such a window
// (a writer stopped between its write and its persist while another thread's whole operation
// completes, then a crash before the writer goes on), so its mutation runs left these sites
// open. Here a schedule hook stops the writer thread there, after each of its writes in turn, a
// reader thread runs a whole operation, and the minimum crash image (only what is certainly
// durable) is taken then: what the reader observed must survive it. The ordered maps over
// algo/ (list, skip list, tree) each run every scenario.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "algo/algo_test_support.hpp"
#include "pmds/algo/flit_policy.hpp"
#include "pmds/algo/harris_michael_list.hpp"
#include "pmds/algo/natarajan_mittal_bst.hpp"
#include "pmds/algo/skip_list.hpp"
#include "pmds/algo/treiber_stack.hpp"
#include "pmds/crashlab/image_file.hpp"
#include "support/crash_image.hpp"

namespace pmds::algo {
namespace {

using namespace testing;

// Where the writer thread stops: before the persist of its n-th write (a CAS on a word whose
// flush counter it raised), or at its first CAS after that write, the write's persist done and
// its counter lowered.
enum class StopWriter { before_its_persist, at_its_next_cas };

// The schedule hook's state (a hook is a plain function pointer).
StopWriter stop_at = StopWriter::before_its_persist;
int stop_after_writes = 1;
thread_local bool is_writer = false;
thread_local int writes = 0;
enum WriterState : int { running, stopped, finished };
std::atomic<int> writer_state{running};
std::atomic<bool> writer_may_go{false};

void stop_the_writer(pm::sim::Operation op, const void* addr) {
  using pm::sim::Operation;
  if (!is_writer || writer_state.load() != running) return;
  if (writes < stop_after_writes) {
    // FliT raises the counter before its CAS: a CAS seen with the counter raised is a write.
    writes += op == Operation::rmw && detail::FlitCounters::of(addr).load() != 0;
    return;
  }
  const bool stop =
      stop_at == StopWriter::before_its_persist ? op == Operation::flush : op == Operation::rmw;
  if (!stop) return;
  writer_state.store(stopped);
  writer_state.notify_all();
  writer_may_go.wait(false);
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
  bool stopped;  // the writer stopped where asked (false: it made fewer writes)
  std::optional<Value> read;
  bool reader_result;
  decltype(contents(std::declval<const S&>())) recovered;
  decltype(contents(std::declval<const S&>())) recovered_again;  // set by an `after` step
};

// The minimum crash image (only what is certainly durable) of the pool at `pool_path`, now.
void write_minimum_image(const std::string& pool_path, const std::string& image_path) {
  const pm::sim::Snapshot snap = pm::sim::snapshot(false);
  crashlab::write_crash_image(snap, snap.choice(pm::sim::ImageKind::minimum), pool_path,
                              image_path);
}

// The contents an S in the pool at `path` recovers to.
template <class S>
auto recovered(const std::string& path) {
  auto pool = pm::Pool::open(path, "algo/flit-window");
  S map(open_existing, pool);
  return contents(map);
}

// No step after the recovery (a step may crash the recovered structure: write_minimum_image of
// its pool at `pool_path` to `image_path`).
struct Nothing {
  template <class S>
  void operator()(S&, const std::string& /*pool_path*/, const std::string& /*image_path*/) const {}
};

// A structure `setup` filled (made durable), then `write` on a writer thread, stopped after its
// n-th write as `stop` says; while it is stopped, `read` on this thread, then the minimum crash
// image.
template <class S, class Setup, class Write, class Read, class After = Nothing>
Window<S> window(Setup setup, StopWriter stop, int n, Write write, Read read, After after = {}) {
  pmds::test::ClwbFlushes clwb;  // the model, not the host
  TempPath pool_path("flit-window"), image_path("flit-window-image");
  Window<S> out{};
  {
    auto pool = pm::Pool::create(pool_path.str(), 8u << 20, "algo/flit-window");
    S map(create_new, pool);
    setup(map);
    pm::sim::mark_all_durable();
    stop_at = stop;
    stop_after_writes = n;
    writer_state = running;
    writer_may_go = false;
    pm::sim::set_schedule_hook(&stop_the_writer);
    std::thread writer([&] {
      is_writer = true;
      writes = 0;
      write(map);
      is_writer = false;
      if (writer_state.load() == running) writer_state = finished;
      writer_state.notify_all();
    });
    writer_state.wait(running);
    out.stopped = writer_state.load() == stopped;
    if (out.stopped) {
      read(map, out);
      write_minimum_image(pool_path.str(), image_path.str());
    }
    writer_may_go = true;
    writer_may_go.notify_all();
    writer.join();
    pm::sim::set_schedule_hook(nullptr);
  }
  if (!out.stopped) return out;
  TempPath again_path("flit-window-again");
  {
    auto pool = pm::Pool::open(image_path.str(), "algo/flit-window");
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
void each_window(Setup setup, StopWriter stop, Write write, Read read, Check check,
                 int max_writes = 64, After after = {}) {
  int windows = 0;
  for (int n = 1; n <= max_writes; ++n) {
    SCOPED_TRACE("the writer stopped after its write " + std::to_string(n));
    const Window<S> w = window<S>(setup, stop, n, write, read, after);
    if (!w.stopped) break;
    ++windows;
    check(w);
  }
  EXPECT_GT(windows, 0) << "the writer never stopped: a vacuous test";
}

// A setup that inserts `keys` into a map.
auto holding(std::initializer_list<Key> keys) {
  return [keys = std::vector<Key>(keys)](auto& map) {
    for (Key k : keys) EXPECT_TRUE(map.insert(k, value_of(k)));
  };
}

std::map<Key, Value> keys_of(std::initializer_list<Key> ks) {
  std::map<Key, Value> m;
  for (Key k : ks) m.emplace(k, value_of(k));
  return m;
}

template <class S>
class FlitWindows : public ::testing::Test {};
using OrderedMaps =
    ::testing::Types<HarrisMichaelList<flit>, SkipList<flit>, NatarajanMittalTree<flit>>;
TYPED_TEST_SUITE(FlitWindows, OrderedMaps);

// In the list, slots are taken in insertion order, two to a line: 10 and 5 share one, 20 and 30
// the next, so a reader's own persist of 20's link does not write 10's back with it.

// A get that finds the new key reports it present: the insert took effect.
TYPED_TEST(FlitWindows, AGetThatFindsAnInsertInFlightMakesItDurable) {
  each_window<TypeParam>(
      holding({10, 5}), StopWriter::before_its_persist,
      [](TypeParam& m) { EXPECT_TRUE(m.insert(20, value_of(20))); },
      [](TypeParam& m, auto& w) { w.read = m.get(20); },
      [](const auto& w) {
        if (w.read) {
          EXPECT_EQ(w.recovered, keys_of({5, 10, 20})) << "the get saw 20, then lost";
        }
      });
}

// An insert whose search passes the new key links its own key beside it: it must survive.
TYPED_TEST(FlitWindows, AnInsertLinkedAfterAnInsertInFlightMakesItDurable) {
  each_window<TypeParam>(
      holding({10, 5}), StopWriter::before_its_persist,
      [](TypeParam& m) { EXPECT_TRUE(m.insert(20, value_of(20))); },
      [](TypeParam& m, auto&) { EXPECT_TRUE(m.insert(30, value_of(30))); },
      [](const auto& w) {
        EXPECT_EQ(w.recovered.count(30), 1u) << "30 was inserted, then lost";
        EXPECT_EQ(w.recovered.count(5) + w.recovered.count(10), 2u);
      });
}

// The same through the list's head (or the tree's leftmost leaf): the new key is the smallest.
TYPED_TEST(FlitWindows, AnInsertLinkedAfterANewHeadInFlightMakesItDurable) {
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
TYPED_TEST(FlitWindows, AGetThatFindsTheFirstInsertInFlightMakesItDurable) {
  each_window<TypeParam>(
      holding({}), StopWriter::before_its_persist,
      [](TypeParam& m) { EXPECT_TRUE(m.insert(10, value_of(10))); },
      [](TypeParam& m, auto& w) { w.read = m.get(10); },
      [](const auto& w) {
        if (w.read) {
          EXPECT_EQ(w.recovered, keys_of({10})) << "the get saw 10, then lost";
        }
      });
}

// A get that sees the key removed reports it absent: the remove took effect.
TYPED_TEST(FlitWindows, AGetThatSeesARemoveInFlightMakesItDurable) {
  each_window<TypeParam>(
      holding({10, 5, 20}), StopWriter::before_its_persist, [](TypeParam& m) { m.remove(20); },
      [](TypeParam& m, auto& w) { w.read = m.get(20); },
      [](const auto& w) {
        if (!w.read) {
          EXPECT_EQ(w.recovered.count(20), 0u) << "the get saw 20 removed, then kept";
        }
      });
}

// A remove stopped at its next CAS, its write's persist done and its counter lowered: a get
// that sees that write then does not persist it, so it must be durable already.
TYPED_TEST(FlitWindows, AGetThatSeesARemovesWriteFindsItDurable) {
  each_window<TypeParam>(
      holding({10, 5, 20}), StopWriter::at_its_next_cas, [](TypeParam& m) { m.remove(20); },
      [](TypeParam& m, auto& w) { w.read = m.get(20); },
      [](const auto& w) {
        if (!w.read) {
          EXPECT_EQ(w.recovered.count(20), 0u) << "the get saw 20 removed, then kept";
        }
      });
}

// Two removes of one key: whichever returns true, once one has returned the key is gone.
TYPED_TEST(FlitWindows, ARemoveThatMeetsARemoveInFlightMakesItDurable) {
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
class FlitSlotReuse : public ::testing::Test {};
using UnlinkingMaps = ::testing::Types<SkipList<flit>, NatarajanMittalTree<flit>>;
TYPED_TEST_SUITE(FlitSlotReuse, UnlinkingMaps);

TYPED_TEST(FlitSlotReuse, AnUnlinkIsDurableBeforeItsSlotsAreReused) {
  pmds::test::ClwbFlushes clwb;  // the model, not the host
  TempPath pool_path("flit-reuse"), image_path("flit-reuse-image");
  {
    auto pool = pm::Pool::create(pool_path.str(), 8u << 20, "algo/flit-window");
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

// The skip list's remove marks a node's levels top-down, each mark persisted before the next:
// recovery requires a node unmarked at a level to be unmarked at every level below. Levels 0-3
// share the node's first line, so a lost upper mark shows only on a node of height 5 or more:
// 32 keys removed in turn, with a crash at each of the writer's CASes, meet a few such nodes.
TEST(FlitSkipListWindows, AnUpperLevelsMarkIsDurableBeforeTheMarkBelowIt) {
  using List = SkipList<flit>;
  constexpr Key keys = 32;
  each_window<List>(
      [](List& l) {
        for (Key k = 1; k <= keys; ++k) EXPECT_TRUE(l.insert(k, value_of(k)));
      },
      StopWriter::at_its_next_cas,
      [](List& l) {
        for (Key k = 1; k <= keys; ++k) EXPECT_TRUE(l.remove(k));
      },
      [](List&, auto&) {},
      [](const auto& w) {
        // The removes ran in key order: what is left is the keys from some k on.
        const Key first = w.recovered.empty() ? keys + 1 : w.recovered.begin()->first;
        EXPECT_EQ(w.recovered.size(), keys + 1 - first) << "not the keys from " << first << " on";
      },
      /*max_writes=*/400);
}

// Recovery finishes a crashed remove: it unlinks the marked node at every level and retires it.
// Those unlinks must be durable before the slot is reused: here the recovered list reuses it
// (insert(5) writes only where the smallest keys are), then crashes again.
TEST(FlitSkipListWindows, ARecoveredUnlinkIsDurableBeforeItsSlotIsReused) {
  using List = SkipList<flit>;
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

// The stack: a pop that finds it empty after a pop in flight took its last value. (A push's and a
// pop's other loads of the top feed their CAS on the top, which persists it either way.)
TEST(FlitStackWindows, APopThatFindsTheStackEmptiedByAPopInFlightMakesItDurable) {
  using Stack = TreiberStack<flit>;
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
