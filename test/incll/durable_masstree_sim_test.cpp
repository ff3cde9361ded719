// labels: memory
// The durable Masstrees under the simulated Px86 backend (docs/ARCHITECTURE.md §3), where a store
// that was never flushed may be lost in a crash: windows the crash lab's small workloads do not
// reach (parent links, recovery after recovery, the byte-string tree's free lists), each crashed
// here inside the window.
//
// Parent links. A parent link is derived state:
// recovery rebuilds the links of the nodes an interior split of the failed epoch moved (the
// interior nodes the log restores). Every other link must therefore be durable already — the
// links an interior split moved in an epoch that completed, and the links a recovery mended —
// or a lazy recovery, which reads no border, leaves a border naming a parent that no longer
// holds it, and that border's next split inserts into the wrong node. The crash lab cannot see
// this: its workloads are too small for interior splits, and it judges contents, not links.
// Here a crash image is the minimum one (only what is certainly durable), and an eager recovery,
// which compares every node's link with the walk, counts the wrong ones.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "pmds/incll/durable_masstree.hpp"
#include "pmds/pm/simulator.hpp"
#include "support/crash_image.hpp"
#include "support/temp_path.hpp"

namespace {

namespace pm = pmds::pm;
namespace sim = pmds::pm::sim;
using pmds::Key;
using pmds::Value;

static_assert(pm::backend == pm::Backend::simulated);

constexpr std::size_t kPoolSize = pm::Pool::min_size() + (std::size_t{24} << 20);

pmds::incll::Options options(bool lazy) {
  pmds::incll::Options o;
  o.background_thread = false;
  o.lazy_recovery = lazy;
  return o;
}

template <class Tree>
std::map<Key, Value> contents(const Tree& t) {
  std::map<Key, Value> out;
  t.for_each([&](Key k, Value v) { out.emplace(k, v); });
  return out;
}

// The open tree crashes now: the crash image `kind` (random ones from `seed`) of its pool replaces
// the file at `path`; the tree and the pool are gone.
template <class Tree>
void crash_now(std::optional<Tree>& tree, pm::Pool& pool, const std::string& path,
               sim::ImageKind kind, std::uint64_t seed = 0) {
  const sim::Snapshot snap = sim::snapshot();
  const void* base = pool.base();
  tree.reset();
  pool.close();
  ASSERT_NO_FATAL_FAILURE(pmds::test::write_crash_image(snap, base, path, kind, seed));
}

// The pool file at `path` put back to `saved`, opened as a Tree (lazily or eagerly) and crashed
// just before event `event` of that open (counted from the open's first): the crash image
// `image` (0: the minimum, 1: the maximum, else random from seed `image`) replaces the file.
template <class Tree>
void crash_open_at(const std::string& path, const std::string& saved, bool lazy,
                   std::uint64_t event, std::uint64_t image) {
  std::filesystem::copy_file(saved, path, std::filesystem::copy_options::overwrite_existing);
  std::optional<sim::Snapshot> crashed;
  const void* base = nullptr;
  {
    pm::Pool pool = pm::Pool::open(path, Tree::name);
    base = pool.base();
    sim::set_crash_handler(sim::event_count() + event,
                           [&crashed] { crashed.emplace(sim::snapshot()); });
    const Tree tree(pmds::open_existing, pool, options(lazy));
    sim::clear_crash_handler();
  }
  ASSERT_TRUE(crashed.has_value()) << "the open had no event " << event;
  const auto kind = image == 0   ? sim::ImageKind::minimum
                    : image == 1 ? sim::ImageKind::maximum
                                 : sim::ImageKind::random;
  ASSERT_NO_FATAL_FAILURE(pmds::test::write_crash_image(*crashed, base, path, kind, image));
}

template <class T>
class ParentLinks : public ::testing::Test {
 protected:
  using Tree = T;

  Tree& create() {
    pool_.emplace(pm::Pool::create(path_.str(), kPoolSize, Tree::name));
    return tree_.emplace(pmds::create_new, *pool_, options(/*lazy=*/true));
  }
  // Inserts `count` random keys from 1 to `max_key` (recorded in model_).
  void insert_random(int count, Key max_key = 1'000'000) {
    for (int i = 0; i < count; ++i) {
      const Key k = 1 + rng_() % max_key;
      const Value v = rng_() % 1'000'000;
      ASSERT_EQ(tree_->insert(k, v), model_.emplace(k, v).second);
    }
  }
  // The open tree crashes: a crash image of its pool replaces the file.
  void crash(sim::ImageKind kind) {
    ASSERT_NO_FATAL_FAILURE(crash_now(tree_, *pool_, path_.str(), kind));
    pool_.reset();
  }
  Tree& open(bool lazy) {
    pool_.emplace(pm::Pool::open(path_.str(), Tree::name));
    return tree_.emplace(pmds::open_existing, *pool_, options(lazy));
  }
  // A tree of 2,000 keys, synced, then 2,000 more in an epoch that fails with every store kept,
  // as after kill -9: its interior splits moved links to new nodes, which recovery discards.
  // Returns the contents at the sync (the model's again).
  std::map<Key, Value> crash_an_epoch_of_splits() {
    auto& tree = create();
    insert_random(2'000);
    tree.sync();
    const std::map<Key, Value> at_sync = model_;
    insert_random(2'000);  // the failed epoch
    crash(sim::ImageKind::maximum);
    model_ = at_sync;
    return at_sync;
  }
  // The open tree crashes (its minimum image) and recovers eagerly; returns the parent links
  // that recovery found wrong.
  std::size_t crash_and_count_wrong_links() {
    crash(sim::ImageKind::minimum);
    open(/*lazy=*/false);
    EXPECT_EQ(contents(*tree_), model_);
    return tree_->parent_links_mended();
  }

  pmds::test::ClwbFlushes clwb_;  // the model, not the host
  pmds::test::TempPath path_{"masstree-parent-links"};
  std::optional<pm::Pool> pool_;
  std::optional<Tree> tree_;
  std::mt19937_64 rng_{7};
  std::map<Key, Value> model_;
};

using Modes = ::testing::Types<pmds::incll::InCLLMasstree<>, pmds::incll::LoggingMasstree<>>;
TYPED_TEST_SUITE(ParentLinks, Modes);

// The links an interior split moved are flushed at the epoch's boundary: a crash after a sync
// finds every link right.
TYPED_TEST(ParentLinks, ThoseAnInteriorSplitMovedAreDurableAfterTheBoundary) {
  auto& tree = this->create();
  ASSERT_NO_FATAL_FAILURE(this->insert_random(2'000));
  tree.sync();  // (every node is new in its first epoch: flushed whole)
  // The low keys' borders split over and over, and so does their parent, which moves borders
  // this epoch did not touch (a touched one is flushed whole) to its new siblings.
  ASSERT_NO_FATAL_FAILURE(this->insert_random(2'000, 20'000));
  tree.sync();
  EXPECT_EQ(this->crash_and_count_wrong_links(), 0u);
}

// A lazy recovery mends the links of the nodes that the failed epoch's interior splits moved
// (their parents come back from the log) and makes them durable before the log is discarded: a
// second crash right after it finds every link right.
TYPED_TEST(ParentLinks, ThoseALazyRecoveryMendedAreDurable) {
  ASSERT_NO_FATAL_FAILURE(this->crash_an_epoch_of_splits());
  EXPECT_GT(this->open(/*lazy=*/true).parent_links_mended(), 0u)
      << "the failed epoch moved no link: a vacuous test";
  EXPECT_EQ(this->crash_and_count_wrong_links(), 0u);
}

// ... and durable before the epoch moves: the lazy recovery is crashed at each of its events
// (minimum, maximum and random images), and an eager recovery of the image that finds the epoch
// moved finds every link right.
TYPED_TEST(ParentLinks, ThoseALazyRecoveryMendedAreDurableBeforeTheEpochMoves) {
  std::map<Key, Value> at_sync;
  ASSERT_NO_FATAL_FAILURE(at_sync = this->crash_an_epoch_of_splits());
  const pmds::test::TempPath saved{"masstree-parent-links-crashed"};
  std::filesystem::copy_file(this->path_.str(), saved.str(),
                             std::filesystem::copy_options::overwrite_existing);
  std::uint64_t failed = 0, events = 0;
  {
    pm::Pool pool = pm::Pool::open(this->path_.str(), TypeParam::name);
    const std::uint64_t start = sim::event_count();
    const TypeParam lazy(pmds::open_existing, pool, options(/*lazy=*/true));
    events = sim::event_count() - start;
    failed = lazy.recovery_stats().crash_epoch;
    ASSERT_GT(lazy.parent_links_mended(), 0u) << "the failed epoch moved no link: a vacuous test";
  }
  std::size_t moved = 0;
  for (std::uint64_t event = 0; event < events; ++event) {
    for (std::uint64_t image = 0; image < 6; ++image) {
      ASSERT_NO_FATAL_FAILURE(
          crash_open_at<TypeParam>(this->path_.str(), saved.str(), /*lazy=*/true, event, image));
      pm::Pool pool = pm::Pool::open(this->path_.str(), TypeParam::name);
      const TypeParam eager(pmds::open_existing, pool, options(/*lazy=*/false));
      ASSERT_EQ(contents(eager), at_sync) << "crash at event " << event << ", image " << image;
      if (eager.recovery_stats().crash_epoch == failed) continue;  // the epoch had not moved
      ++moved;
      EXPECT_EQ(eager.parent_links_mended(), 0u)
          << "crash at event " << event << " of " << events << ", image " << image;
    }
  }
  EXPECT_GT(moved, 0u) << "no crash image found the epoch moved: a vacuous test";
}

// InCLL §3, §4.3: a lazy recovery leaves the borders of the failed epoch f for their first
// access and keeps f in the pool's record of failed epochs; an eager recovery after it (the record
// full, or the pool reopened without the option) rolls every such border back and then empties the
// record. It must empty it only once those borders are durable: were the record's emptying to
// reach the pool first, a crash would leave borders of f that no recovery rolls back any more.
// Here the eager recovery of a lazily recovered pool is crashed at each of its events (each image
// kind, random ones from several seeds), and every recovery must find the state at the start of f.
TEST(EagerAfterLazyRecovery, EmptiesTheRecordOnlyOnceTheBordersItRecoveredAreDurable) {
  using Tree = pmds::incll::InCLLMasstree<>;
  const pmds::test::ClwbFlushes clwb;  // the model, not the host
  pmds::test::TempPath path{"masstree-eager-after-lazy"};
  const pmds::test::TempPath saved{"masstree-eager-after-lazy-recovered"};
  std::map<Key, Value> at_sync;
  {
    pm::Pool pool = pm::Pool::create(path.str(), kPoolSize, Tree::name);
    std::optional<Tree> tree(std::in_place, pmds::create_new, pool, options(false));
    std::mt19937_64 rng(11);
    while (at_sync.size() < 600) {
      const Key k = 1 + rng() % 1'000'000;
      if (tree->insert(k, k + 1)) at_sync.emplace(k, k + 1);
    }
    tree->sync();
    // The failed epoch: in-place updates (each saved in its value line's InCLL) and removes
    // (each a border's permutation, saved in its InCLL_p) over most borders.
    int n = 0;
    for (const auto& [k, v] : at_sync) {
      if (n++ % 3 == 0)
        tree->remove(k);
      else
        tree->put(k, v + 7);
    }
    ASSERT_NO_FATAL_FAILURE(crash_now(tree, pool, path.str(), sim::ImageKind::maximum));
  }
  {  // The lazy recovery, closed cleanly with no border read: each still carries f.
    pm::Pool pool = pm::Pool::open(path.str(), Tree::name);
    Tree tree(pmds::open_existing, pool, options(true));
    ASSERT_EQ(tree.failed_epochs_recorded(), 1u);
  }
  std::filesystem::copy_file(path.str(), saved.str(),
                             std::filesystem::copy_options::overwrite_existing);
  // The eager recovery's events, counted on an uncrashed run (it must roll borders back).
  std::uint64_t events = 0;
  {
    pm::Pool pool = pm::Pool::open(path.str(), Tree::name);
    const std::uint64_t start = sim::event_count();
    Tree tree(pmds::open_existing, pool, options(false));
    events = sim::event_count() - start;
    ASSERT_GT(tree.permutations_restored() + tree.values_restored(), 100u) << "a vacuous test";
    EXPECT_EQ(tree.failed_epochs_recorded(), 0u);
    EXPECT_EQ(contents(tree), at_sync);
  }
  ASSERT_GT(events, 0u);
  for (std::uint64_t event = 0; event < events; ++event) {
    for (std::uint64_t image = 0; image < 5; ++image) {
      ASSERT_NO_FATAL_FAILURE(
          crash_open_at<Tree>(path.str(), saved.str(), /*lazy=*/false, event, image));
      pm::Pool pool = pm::Pool::open(path.str(), Tree::name);
      const Tree tree(pmds::open_existing, pool, options(image % 2 == 0));
      ASSERT_EQ(contents(tree), at_sync) << "crash at event " << event << " of " << events
                                         << " of the eager recovery, image " << image;
    }
  }
}

// InCLL §5's free lists of the byte-string tree: a thread's lists are made on its first write, in
// a slot that may be a recycled one (recovery hands those out first), and must read empty before
// the anchor names them. Here the slot the lists take holds old bytes that read as a list of
// blocks at a bad address; a crash right after the first write, with only what is certainly
// durable kept, must recover (were the lists' emptying not written back before the anchor's link,
// the walk of the lists would find the old bytes and refuse the pool).
TEST(ByteStringBlockLists, ANewThreadsListsAreEmptyBeforeTheAnchorNamesThem) {
  using Tree = pmds::incll::InCLLStringMasstree<>;
  const pmds::test::ClwbFlushes clwb;  // the model, not the host
  pmds::test::TempPath path{"masstree-bytes-new-lists"};
  {
    pm::Pool pool = pm::Pool::create(path.str(), kPoolSize, Tree::name);
    std::optional<Tree> tree(std::in_place, pmds::create_new, pool, options(false));
    tree->sync();
    // A slot of the lists' size with old bytes in it, durable, back on this thread's free list:
    // the lists, made by this thread's first write, take it.
    constexpr std::size_t bytes = sizeof(pmds::incll::BlockLists);
    void* slot = pool.allocator().allocate(bytes);
    const std::vector<unsigned char> old(bytes, 0x5a);
    pm::write(slot, old.data(), bytes);
    pm::persist(slot, bytes);
    pool.allocator().free(slot);
    ASSERT_TRUE(tree->insert("key", "value"));
    ASSERT_EQ(static_cast<const pm::atomic<std::uint64_t>*>(slot)->load(), 0u)
        << "the lists did not take the recycled slot: a vacuous test";
    ASSERT_NO_FATAL_FAILURE(crash_now(tree, pool, path.str(), sim::ImageKind::minimum));
  }
  pm::Pool pool = pm::Pool::open(path.str(), Tree::name);
  const Tree tree(pmds::open_existing, pool, options(false));
  EXPECT_EQ(tree.blocks_on_free_lists(), 0u);
  std::size_t entries = 0;
  tree.for_each([&](std::string_view, std::string_view) { ++entries; });
  EXPECT_EQ(entries, 0u);  // the insert's epoch failed
}

// The byte-string trees' free-list tests: their contents, keys and values.
using StringModel = std::map<std::string, std::string>;

template <class Tree>
StringModel string_contents(const Tree& t) {
  StringModel out;
  t.for_each([&](std::string_view k, std::string_view v) { out.emplace(k, v); });
  return out;
}
std::string list_key(int i) {
  return "k" + std::to_string(i);
}
std::string list_value(int round, int i) {  // 100 bytes: every value a block of one size
  return std::string(100, static_cast<char>('a' + (round * 7 + i) % 26));
}

// A new tree in a new pool at `path` that cycles blocks through its free lists (each epoch lists
// the last one's old values), frees 32 values, syncs, and starts an epoch f whose first write
// lists them (no value of their size is made in f); then f crashes, the crash image random from
// `seed`. Returns the contents at the sync, before f.
template <class Tree>
StringModel crash_an_epoch_that_lists_blocks(const std::string& path, std::uint64_t seed) {
  pm::Pool pool = pm::Pool::create(path, kPoolSize, Tree::name);
  std::optional<Tree> tree(std::in_place, pmds::create_new, pool, options(false));
  for (int round = 0; round < 6; ++round) {
    for (int i = 0; i < 64; ++i) tree->put(list_key(i), list_value(round, i));
    tree->sync();
  }
  for (int i = 0; i < 64; i += 2) tree->remove(list_key(i));  // freed here, listed in f
  tree->sync();
  StringModel at_sync = string_contents(*tree);
  EXPECT_TRUE(tree->insert("f", std::string(300, 'f')));
  crash_now(tree, pool, path, sim::ImageKind::random, seed);
  return at_sync;
}

// An eager recovery reads each free list as it was at the start of the failed epoch f (its
// EpochLinks' logs) and rewrites every link so, written back, before it empties the record of
// failed epochs: once f is forgotten, a link reads as its last durable write. Were those rewrites
// not durable, a second crash would leave f's pushes of blocks onto a list half durable and no
// longer undone: a head naming a block pushed in f whose own link, not written back, still names
// the block it named when last listed, which the tree may name since. Here f pushes the blocks
// freed in the epoch before (after epochs that cycle blocks through the lists), the crash keeps a
// random part of f, the eager recovery completes, and a crash right after it keeps only what is
// certainly durable: the second recovery must find the lists and the contents of f's start.
TEST(ByteStringBlockLists, AnEagerRecoveryRewritesTheListsDurablyBeforeItForgetsTheFailedEpoch) {
  using Tree = pmds::incll::InCLLStringMasstree<>;
  const pmds::test::ClwbFlushes clwb;  // the model, not the host
  pmds::test::TempPath path{"masstree-bytes-settle"};
  std::size_t listed_at_f = 0;
  for (std::uint64_t seed = 2; seed < 10; ++seed) {
    SCOPED_TRACE("image seed " + std::to_string(seed));
    const StringModel at_sync = crash_an_epoch_that_lists_blocks<Tree>(path.str(), seed);
    ASSERT_FALSE(HasFatalFailure());
    {  // The eager recovery, and a crash right after it.
      pm::Pool pool = pm::Pool::open(path.str(), Tree::name);
      std::optional<Tree> tree(std::in_place, pmds::open_existing, pool, options(false));
      ASSERT_EQ(string_contents(*tree), at_sync);
      ASSERT_EQ(tree->failed_epochs_recorded(), 0u);
      listed_at_f += tree->blocks_on_free_lists();
      ASSERT_NO_FATAL_FAILURE(crash_now(tree, pool, path.str(), sim::ImageKind::minimum));
    }
    {
      pm::Pool pool = pm::Pool::open(path.str(), Tree::name);
      const Tree tree(pmds::open_existing, pool, options(false));
      EXPECT_EQ(string_contents(tree), at_sync);
    }
    std::filesystem::remove(path.str());
  }
  EXPECT_GT(listed_at_f, 0u) << "no free block was listed at f's start: a vacuous test";
}

// A lazy recovery records the failed epoch f durably before any operation runs (failed_epochs.hpp:
// record), and the record must survive the next crash: the links of the byte-string tree's free
// lists that f wrote keep f's epoch until they are written again, and only the record tells the
// next recovery to read them as they were at f's start. The LOGGING tree's borders carry no InCLL
// (the crash lab's small workloads see nothing of the record there). Here f pushes blocks onto the
// lists, the crash keeps a random part of f, a lazy open records f, and a crash right after it
// keeps only what is certainly durable: the next (eager) recovery must still undo f's pushes.
TEST(ByteStringBlockLists, ALazyRecoveryRecordsTheFailedEpochDurablyBeforeOperationsRun) {
  using Tree = pmds::incll::LoggingStringMasstree<>;
  const pmds::test::ClwbFlushes clwb;  // the model, not the host
  pmds::test::TempPath path{"masstree-bytes-record"};
  for (std::uint64_t seed = 2; seed < 10; ++seed) {
    SCOPED_TRACE("image seed " + std::to_string(seed));
    const StringModel at_sync = crash_an_epoch_that_lists_blocks<Tree>(path.str(), seed);
    ASSERT_FALSE(HasFatalFailure());
    {  // The lazy recovery records f; a crash right after the open.
      pm::Pool pool = pm::Pool::open(path.str(), Tree::name);
      std::optional<Tree> tree(std::in_place, pmds::open_existing, pool, options(true));
      ASSERT_EQ(tree->failed_epochs_recorded(), 1u);
      ASSERT_NO_FATAL_FAILURE(crash_now(tree, pool, path.str(), sim::ImageKind::minimum));
    }
    {
      pm::Pool pool = pm::Pool::open(path.str(), Tree::name);
      std::optional<Tree> tree(std::in_place, pmds::open_existing, pool, options(false));
      EXPECT_EQ(string_contents(*tree), at_sync);
      // The blocks the lists hold are free: writing over them must not change any other key.
      for (int i = 0; i < 64; i += 2) ASSERT_TRUE(tree->insert(list_key(i), list_value(9, i)));
      StringModel expected = at_sync;
      for (int i = 0; i < 64; i += 2) expected[list_key(i)] = list_value(9, i);
      EXPECT_EQ(string_contents(*tree), expected);
    }
    std::filesystem::remove(path.str());
  }
}

// A lazy open of a byte-string tree mends a lower layer's parent links when an operation first
// reaches the layer (check_before_recovery), on that operation's thread, which may be a reader
// that writes nothing else and never fences again; the epoch may then move on another thread,
// whose fence does not complete the reader's write-backs (Px86: a flush takes effect at its own
// thread's next fence). The mended links must be durable before that thread goes on: were they
// not, the epoch would move past them, and a crash would leave borders naming parents that no
// longer hold them (the header's "Parent links") with no failed epoch left to mend them. Here the
// lower layer (keys sharing their first 8 bytes) has interior splits in the failed epoch, a
// reader on its own thread reaches it, the main thread syncs, and a crash keeps only what is
// certainly durable: the eager recovery must find every link right.
template <class T>
class ByteStringParentLinks : public ::testing::Test {};
using StringModes =
    ::testing::Types<pmds::incll::InCLLStringMasstree<>, pmds::incll::LoggingStringMasstree<>>;
TYPED_TEST_SUITE(ByteStringParentLinks, StringModes);

TYPED_TEST(ByteStringParentLinks, ThoseALazyLayerRecoveryMendedAreDurableBeforeItsThreadGoesOn) {
  using Tree = TypeParam;
  const pmds::test::ClwbFlushes clwb;  // the model, not the host
  pmds::test::TempPath path{"masstree-bytes-layer-links"};
  std::mt19937_64 rng(5);
  const auto layer_key = [&rng] {  // one 8-byte prefix: every key in the same lower layer
    std::string key = "prefix00";
    for (int i = 0; i < 8; ++i) key.push_back(static_cast<char>('a' + rng() % 26));
    return key;
  };
  StringModel at_sync;
  {
    pm::Pool pool = pm::Pool::create(path.str(), kPoolSize, Tree::name);
    std::optional<Tree> tree(std::in_place, pmds::create_new, pool, options(false));
    for (int i = 0; i < 2'000; ++i) tree->insert(layer_key(), "v");
    tree->sync();
    at_sync = string_contents(*tree);
    for (int i = 0; i < 2'000; ++i) tree->insert(layer_key(), "w");  // the failed epoch
    ASSERT_NO_FATAL_FAILURE(crash_now(tree, pool, path.str(), sim::ImageKind::maximum));
  }
  {
    pm::Pool pool = pm::Pool::open(path.str(), Tree::name);
    std::optional<Tree> tree(std::in_place, pmds::open_existing, pool, options(true));
    const std::size_t at_open = tree->parent_links_mended();
    std::thread reader([&] { EXPECT_TRUE(tree->get(at_sync.begin()->first).has_value()); });
    reader.join();
    ASSERT_GT(tree->parent_links_mended(), at_open)
        << "the reader mended no link of the lower layer: a vacuous test";
    tree->sync();  // the epoch moves, on this thread
    ASSERT_NO_FATAL_FAILURE(crash_now(tree, pool, path.str(), sim::ImageKind::minimum));
  }
  pm::Pool pool = pm::Pool::open(path.str(), Tree::name);
  const Tree tree(pmds::open_existing, pool, options(false));
  EXPECT_EQ(string_contents(tree), at_sync);
  EXPECT_EQ(tree.parent_links_mended(), 0u);
}

}  // namespace
