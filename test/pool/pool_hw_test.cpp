// labels: memory
// Pool files under the hardware backend: create/open/close, the root table across processes,
// the clean-shutdown flag, fixed base addresses, inspect_pool, the file lock.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>

#include "pmds/pm/pool.hpp"
#include "support/child_process.hpp"
#include "support/file_state.hpp"
#include "support/temp_path.hpp"

namespace pm = pmds::pm;
using pmds::test::run_in_child;
using pmds::test::TempPath;

namespace {

constexpr std::size_t kSize = 8 << 20;

TEST(Pool, CreateOpenCloseRoundTrip) {
  TempPath path("roundtrip");
  void* base = nullptr;
  {
    pm::Pool pool = pm::Pool::create(path, kSize, "test/roundtrip");
    EXPECT_TRUE(pool.is_open());
    EXPECT_EQ(pool.size(), kSize);
    EXPECT_EQ(pool.layout(), "test/roundtrip");
    EXPECT_EQ(pool.path(), path.str());
    EXPECT_TRUE(pool.was_clean_shutdown());  // a new pool has nothing to recover
    base = pool.base();
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(base) % (std::uintptr_t{1} << 30), 0u);
    for (std::size_t i = 0; i < pm::Pool::root_count; ++i) EXPECT_EQ(pool.root(i).load(), 0u);
    pool.root(3).store(0x1234);
    pm::persist(&pool.root(3), 8);
    EXPECT_EQ(pool.allocator().chunk_size(), std::size_t{1} << 20);
    EXPECT_EQ(pool.allocator().chunk_count(), 7u);  // 8 MiB - header - directory page
    EXPECT_EQ(pool.allocator().used_chunks(), 0u);
    pool.close();
    EXPECT_FALSE(pool.is_open());
    pool.close();  // idempotent
  }
  pm::Pool pool = pm::Pool::open(path, "test/roundtrip");
  EXPECT_EQ(pool.base(), base);
  EXPECT_EQ(pool.size(), kSize);
  EXPECT_TRUE(pool.was_clean_shutdown());
  EXPECT_EQ(pool.root(3).load(), 0x1234u);
  EXPECT_EQ(pool.root(2).load(), 0u);
}

TEST(Pool, ChunkSizeOptionAndInspect) {
  TempPath path("inspect");
  {
    pm::PoolOptions o;
    o.chunk_size = 2 << 20;
    pm::Pool pool = pm::Pool::create(path, 16 << 20, "test/inspect", o);
    EXPECT_EQ(pool.allocator().chunk_size(), std::size_t{2} << 20);
    EXPECT_EQ(pool.allocator().chunk_count(), 7u);
    pool.allocator().allocate(64);
    pool.allocator().allocate(1000);  // 1008-byte slots
    pool.root(0).store(77);
    pm::persist(&pool.root(0), 8);
    const pm::PoolInfo open_info = pm::inspect_pool(path);  // fine while open: read-only
    EXPECT_FALSE(open_info.clean_shutdown);
  }
  const pm::PoolInfo info = pm::inspect_pool(path);
  EXPECT_EQ(info.layout, "test/inspect");
  EXPECT_EQ(info.size, std::size_t{16} << 20);
  EXPECT_EQ(info.format_version, pm::format::current_version);
  EXPECT_EQ(info.header_size, pm::format::header_size);
  EXPECT_NE(info.base, 0u);
  EXPECT_TRUE(info.clean_shutdown);
  EXPECT_EQ(info.chunk_size, std::size_t{2} << 20);
  EXPECT_EQ(info.chunk_count, 7u);
  EXPECT_EQ(info.used_chunks, 2u);
  EXPECT_EQ(info.free_chunks, 5u);
  ASSERT_EQ(info.slot_sizes.size(), 2u);
  EXPECT_EQ(info.slot_sizes[0].slot_size, 64u);
  EXPECT_EQ(info.slot_sizes[0].chunks, 1u);
  EXPECT_EQ(info.slot_sizes[0].slots, (std::size_t{2} << 20) / 64);
  EXPECT_EQ(info.slot_sizes[1].slot_size, 1008u);
  EXPECT_EQ(info.slot_sizes[1].slots, (std::size_t{2} << 20) / 1008);
  EXPECT_EQ(info.roots[0], 77u);
}

// The smallest chunk (the crash lab's pools use small chunks): a slot as large as a chunk is
// handed out, a larger allocation is refused as a bad argument, and a reopened pool keeps the
// chunk size.
TEST(Pool, SmallestChunkSize) {
  TempPath path("small-chunks");
  const std::size_t chunk = pm::format::min_chunk_size;
  {
    pm::PoolOptions o;
    o.chunk_size = chunk;
    pm::Pool pool = pm::Pool::create(path, 4 << 20, "test/small", o);
    EXPECT_EQ(pool.allocator().chunk_size(), chunk);
    EXPECT_NE(pool.allocator().allocate(chunk), nullptr);
    try {
      pool.allocator().allocate(chunk + 1);
      ADD_FAILURE() << "an allocation larger than a chunk was handed out";
    } catch (const pmds::PoolError& e) {
      EXPECT_EQ(e.code(), pmds::PoolErrc::bad_argument) << e.what();
    }
  }
  const pm::PoolInfo info = pm::inspect_pool(path);
  EXPECT_EQ(info.chunk_size, chunk);
  EXPECT_EQ(info.used_chunks, 1u);
  pm::Pool reopened = pm::Pool::open(path, "test/small");
  EXPECT_EQ(reopened.allocator().chunk_size(), chunk);
}

// A pointer stored in the pool by one process is followed by another: absolute pointers work
// because every process maps the pool at the recorded base.
TEST(Pool, RootsAndPointersSurviveReopenInANewProcess) {
  TempPath path("newprocess");
  std::uintptr_t base = 0;
  {
    pm::Pool pool = pm::Pool::create(path, kSize, "test/newprocess");
    base = reinterpret_cast<std::uintptr_t>(pool.base());
    auto* node = static_cast<std::uint64_t*>(pool.allocator().allocate(64));
    auto* next = static_cast<std::uint64_t*>(pool.allocator().allocate(64));
    const std::uint64_t a[2] = {reinterpret_cast<std::uint64_t>(next), 111};
    const std::uint64_t b[2] = {0, 222};
    pm::write(node, a, sizeof a);
    pm::write(next, b, sizeof b);
    pm::persist(node, sizeof a);
    pm::persist(next, sizeof b);
    pool.root(0).store(reinterpret_cast<std::uint64_t>(node));
    pm::persist(&pool.root(0), 8);
  }
  const int code = run_in_child([&] {
    pm::Pool pool = pm::Pool::open(path, "test/newprocess");
    if (reinterpret_cast<std::uintptr_t>(pool.base()) != base) return 1;
    if (!pool.was_clean_shutdown()) return 2;
    auto* node = reinterpret_cast<std::uint64_t*>(pool.root(0).load());
    if (node == nullptr || !pool.contains(node) || node[1] != 111) return 3;
    auto* next = reinterpret_cast<std::uint64_t*>(node[0]);
    if (!pool.contains(next) || next[1] != 222 || next[0] != 0) return 4;
    pool.root(1).store(333);
    pm::persist(&pool.root(1), 8);
    return 0;
  });
  EXPECT_EQ(code, 0);
  pm::Pool pool = pm::Pool::open(path, "test/newprocess");
  EXPECT_EQ(pool.root(1).load(), 333u);  // written by the child
}

TEST(Pool, CleanShutdownFlag) {
  TempPath path("dirty");
  { pm::Pool pool = pm::Pool::create(path, kSize, "test/dirty"); }
  // A process that opens the pool and dies without close() leaves it dirty.
  const int code = run_in_child([&] {
    pm::Pool pool = pm::Pool::open(path, "test/dirty");
    if (!pool.was_clean_shutdown()) return 1;
    pool.root(5).store(55);
    pm::persist(&pool.root(5), 8);
    ::_exit(0);  // no close(): a crash
    return 1;
  });
  ASSERT_EQ(code, 0);
  EXPECT_FALSE(pm::inspect_pool(path).clean_shutdown);
  {
    pm::Pool pool = pm::Pool::open(path, "test/dirty");
    EXPECT_FALSE(pool.was_clean_shutdown());
    EXPECT_EQ(pool.root(5).load(), 55u);
  }
  pm::Pool pool = pm::Pool::open(path, "test/dirty");
  EXPECT_TRUE(pool.was_clean_shutdown());  // the previous open closed it properly
}

TEST(Pool, TwoPoolsOpenAtOnceGetDifferentBases) {
  TempPath a("two_a"), b("two_b");
  pm::Pool pa = pm::Pool::create(a, kSize, "test/two");
  pm::Pool pb = pm::Pool::create(b, kSize, "test/two");
  EXPECT_NE(pa.base(), pb.base());
  const auto* ba = static_cast<const char*>(pa.base());
  const auto* bb = static_cast<const char*>(pb.base());
  EXPECT_TRUE(ba + kSize <= bb || bb + kSize <= ba);  // disjoint
  pa.root(0).store(1);
  pb.root(0).store(2);
  EXPECT_EQ(pa.root(0).load(), 1u);
  EXPECT_EQ(pb.root(0).load(), 2u);
  pa.close();
  pb.close();
  // Both reopen at their bases in one process.
  pm::Pool ra = pm::Pool::open(a, "test/two");
  pm::Pool rb = pm::Pool::open(b, "test/two");
  EXPECT_EQ(ra.base(), static_cast<const void*>(ba));
  EXPECT_EQ(rb.base(), static_cast<const void*>(bb));
}

TEST(Pool, ExplicitBaseAndReopenManyTimes) {
  TempPath path("explicit");
  pm::PoolOptions o;
  o.base = pm::detail::base_range_begin + (std::uintptr_t{7} << 30);
  {
    pm::Pool pool = pm::Pool::create(path, kSize, "test/explicit", o);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(pool.base()), o.base);
  }
  // Every close gives the whole range back (libpmem2's reservation tail included).
  for (int i = 0; i < 20; ++i) {
    pm::Pool pool = pm::Pool::open(path, "test/explicit");
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(pool.base()), o.base);
  }
}

TEST(Pool, MoveKeepsThePoolOpen) {
  TempPath path("move");
  pm::Pool a = pm::Pool::create(path, kSize, "test/move");
  void* base = a.base();
  pm::Pool b = std::move(a);
  EXPECT_FALSE(a.is_open());  // NOLINT(bugprone-use-after-move): moved-from is closed
  EXPECT_EQ(b.base(), base);
  pm::Pool c;
  c = std::move(b);
  EXPECT_EQ(c.base(), base);
  c.root(0).store(9);
  c.close();
  EXPECT_EQ(pm::inspect_pool(path).roots[0], 9u);
}

TEST(Pool, RootIndexOutOfRangeIsAnError) {
  TempPath path("rootidx");
  pm::Pool pool = pm::Pool::create(path, kSize, "test/rootidx");
  try {
    pool.root(pm::Pool::root_count);
    FAIL() << "no exception";
  } catch (const pmds::PoolError& e) {
    EXPECT_EQ(e.code(), pmds::PoolErrc::bad_argument);
  }
}

TEST(Pool, FileOnARegularFilesystem) {
  // /tmp is a disk filesystem here (not tmpfs): the page-cache path with msync at close.
  TempPath path("ext", "/tmp");
  {
    pm::Pool pool = pm::Pool::create(path, kSize, "test/ext");
    EXPECT_TRUE(pool.page_cache_backed());  // no DAX in this machine's /tmp
    pool.root(0).store(5);
  }
  pm::Pool pool = pm::Pool::open(path, "test/ext");
  EXPECT_EQ(pool.root(0).load(), 5u);
}

// A create that dies before writing the magic leaves a file that open() rejects.
TEST(Pool, CreateWithoutMagicIsRejected) {
  TempPath path("nomagic");
  { pm::Pool pool = pm::Pool::create(path, kSize, "test/nomagic"); }
  const std::uint64_t zero = 0;
  pmds::test::patch_file(path, 0, &zero, sizeof zero);
  try {
    pm::Pool::open(path, "test/nomagic");
    FAIL() << "opened a pool without magic";
  } catch (const pmds::PoolError& e) {
    EXPECT_EQ(e.code(), pmds::PoolErrc::bad_magic);
    EXPECT_NE(std::string(e.what()).find("did not finish"), std::string::npos) << e.what();
  }
}

// The header of a created pool: every field but the magic is written and persisted before the
// magic. Checked on the bytes: a file with the magic zeroed is otherwise a complete pool.
TEST(Pool, CreateWritesAllButMagicFirst) {
  TempPath path("order");
  { pm::Pool pool = pm::Pool::create(path, kSize, "test/order"); }
  auto bytes = pmds::test::read_file(path);
  pm::format::Identity id;
  std::memcpy(&id, bytes.data(), sizeof id);
  EXPECT_EQ(id.magic, pm::format::magic);
  EXPECT_EQ(pm::format::identity_checksum(id), id.checksum);
  EXPECT_EQ(pm::format::layout_of(id), "test/order");
}

// A child forked while the pool is open still has the parent's mapping at the base: its
// open() fails (base_unavailable) and leaves the file as it was.
TEST(Pool, ForkedChildOfAnOpenPoolCannotReopenIt) {
  TempPath path("forked");
  pm::Pool pool = pm::Pool::create(path, kSize, "test/forked");
  pool.root(0).store(1);
  const pmds::test::FileState before = pmds::test::file_state(path);
  const int code = run_in_child([&] {
    try {
      pm::Pool::open(path, "test/forked");
      return 1;
    } catch (const pmds::PoolError& e) {
      return e.code() == pmds::PoolErrc::base_unavailable ? 0 : 2;
    }
  });
  EXPECT_EQ(code, 0);
  EXPECT_EQ(pmds::test::file_state(path), before);
}

TEST(Pool, LockHeldByAnotherProcessGivesInUse) {
  TempPath path("inuse");
  { pm::Pool pool = pm::Pool::create(path, kSize, "test/inuse"); }
  int to_parent[2], to_child[2];
  ASSERT_EQ(::pipe(to_parent), 0);
  ASSERT_EQ(::pipe(to_child), 0);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int code = 0;
    try {
      pm::Pool pool = pm::Pool::open(path, "test/inuse");
      char c = 'r';
      if (::write(to_parent[1], &c, 1) != 1) code = 3;
      if (::read(to_child[0], &c, 1) != 1) code = 4;
    } catch (...) {
      code = 5;
    }
    ::_exit(code);
  }
  char c = 0;
  ASSERT_EQ(::read(to_parent[0], &c, 1), 1);  // the child holds the pool open
  const pmds::test::FileState before = pmds::test::file_state(path);
  try {
    pm::Pool::open(path, "test/inuse");
    ADD_FAILURE() << "opened a pool another process holds";
  } catch (const pmds::PoolError& e) {
    EXPECT_EQ(e.code(), pmds::PoolErrc::in_use) << e.what();
  }
  EXPECT_EQ(pmds::test::file_state(path), before);
  ASSERT_EQ(::write(to_child[1], &c, 1), 1);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // The failed open released its address reservation: the pool opens now.
  pm::Pool pool = pm::Pool::open(path, "test/inuse");
  EXPECT_TRUE(pool.was_clean_shutdown());
  for (int fd : {to_parent[0], to_parent[1], to_child[0], to_child[1]}) ::close(fd);
}

}  // namespace
