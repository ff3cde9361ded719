// labels: memory
// Bad input to Pool::create / Pool::open / inspect_pool: each case throws a PoolError with its
// code and a message naming the path, and a failed open leaves the file's bytes, size, mtime
// and ctime exactly as they were.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cstring>
#include <string>

#include "pmds/pm/pool.hpp"
#include "support/child_process.hpp"
#include "support/file_state.hpp"
#include "support/temp_path.hpp"

namespace pm = pmds::pm;
using pmds::PoolErrc;
using pmds::test::TempPath;

namespace {

constexpr std::size_t kSize = 8 << 20;
constexpr const char* kLayout = "test/bad";

void make_pool(const std::string& path) {
  pm::Pool pool = pm::Pool::create(path, kSize, kLayout);
  pool.allocator().allocate(64);  // a used chunk, so the directory is not all zero
}

// open() must throw `code`, name the path, and leave the file untouched; inspect_pool() too
// (except for the codes only open() can give).
void expect_open_fails(const std::string& path, PoolErrc code, std::string_view layout = kLayout) {
  const pmds::test::FileState before = pmds::test::file_state(path);
  try {
    pm::Pool pool = pm::Pool::open(path, layout);
    ADD_FAILURE() << "open succeeded; expected " << pmds::to_string(code);
  } catch (const pmds::PoolError& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  EXPECT_TRUE(pmds::test::file_state(path) == before) << "a failed open changed the file";
  if (code != PoolErrc::layout_mismatch && code != PoolErrc::base_unavailable &&
      code != PoolErrc::in_use) {
    try {
      pm::inspect_pool(path);
      ADD_FAILURE() << "inspect succeeded; expected " << pmds::to_string(code);
    } catch (const pmds::PoolError& e) {
      EXPECT_EQ(e.code(), code) << e.what();
    }
    EXPECT_TRUE(pmds::test::file_state(path) == before) << "inspect changed the file";
  }
}

template <class T>
void patch(const std::string& path, std::size_t offset, T value) {
  pmds::test::patch_file(path, offset, &value, sizeof value);
}

// Recomputes the header checksum after a patch, so the test reaches the check after it.
void fix_checksum(const std::string& path) {
  auto bytes = pmds::test::read_file(path);
  pm::format::Identity id;
  std::memcpy(&id, bytes.data(), sizeof id);
  id.checksum = pm::format::identity_checksum(id);
  pmds::test::patch_file(path, 0, &id, sizeof id);
}

// The check itself can fail: an open that does change the file (clears the clean flag) is seen.
TEST(PoolBadInput, FileStateSeesASuccessfulOpen) {
  TempPath path("sensitivity");
  make_pool(path);
  const pmds::test::FileState before = pmds::test::file_state(path);
  EXPECT_EQ(pmds::test::run_in_child([&] {
              pm::Pool pool = pm::Pool::open(path, kLayout);
              ::_exit(0);  // no close: the flag stays cleared
              return 1;
            }),
            0);
  EXPECT_FALSE(pmds::test::file_state(path) == before);
}

TEST(PoolBadInput, MissingFile) {
  TempPath path("missing");
  expect_open_fails(path, PoolErrc::not_found);
  expect_open_fails(path.str() + "/below_a_missing_dir", PoolErrc::not_found);
}

TEST(PoolBadInput, ForeignFile) {
  TempPath path("foreign");
  std::vector<char> text(kSize, 'x');
  pmds::test::write_file(path, text);
  expect_open_fails(path, PoolErrc::bad_magic);
}

TEST(PoolBadInput, EmptyAndTinyFiles) {
  TempPath path("empty");
  pmds::test::write_file(path, {});
  expect_open_fails(path, PoolErrc::truncated);
  pmds::test::write_file(path, {'P', 'M'});
  expect_open_fails(path, PoolErrc::truncated);
}

TEST(PoolBadInput, InterruptedCreateHasNoMagic) {
  TempPath path("interrupted");
  make_pool(path);
  patch<std::uint64_t>(path, 0, 0);
  expect_open_fails(path, PoolErrc::bad_magic);
}

TEST(PoolBadInput, AnotherLayout) {
  TempPath path("layout");
  make_pool(path);
  expect_open_fails(path, PoolErrc::layout_mismatch, "test/other");
  expect_open_fails(path, PoolErrc::layout_mismatch, "test/ba");  // a prefix is not a match
}

TEST(PoolBadInput, OpenWithAnEmptyOrTooLongLayoutName) {
  TempPath path("layout_arg");
  make_pool(path);
  for (const std::string& layout : {std::string(), std::string(64, 'a')}) {
    const pmds::test::FileState before = pmds::test::file_state(path);
    try {
      pm::Pool::open(path, layout);
      ADD_FAILURE() << "opened with layout '" << layout << "'";
    } catch (const pmds::PoolError& e) {
      EXPECT_EQ(e.code(), PoolErrc::bad_argument) << e.what();
    }
    EXPECT_TRUE(pmds::test::file_state(path) == before);
  }
}

TEST(PoolBadInput, NewerFormatVersion) {
  TempPath path("version");
  make_pool(path);
  patch<std::uint32_t>(path, offsetof(pm::format::Identity, format_version),
                       pm::format::current_version + 1);
  expect_open_fails(path, PoolErrc::version_too_new);
}

TEST(PoolBadInput, ShorterThanTheHeader) {
  TempPath path("short_header");
  make_pool(path);
  ASSERT_EQ(::truncate(path.str().c_str(), 2000), 0);
  expect_open_fails(path, PoolErrc::truncated);
}

TEST(PoolBadInput, ShorterThanTheRecordedSize) {
  TempPath path("short_size");
  make_pool(path);
  ASSERT_EQ(::truncate(path.str().c_str(), kSize - 4096), 0);
  expect_open_fails(path, PoolErrc::truncated);
}

TEST(PoolBadInput, LongerThanTheRecordedSize) {
  TempPath path("long");
  make_pool(path);
  ASSERT_EQ(::truncate(path.str().c_str(), kSize + 4096), 0);
  expect_open_fails(path, PoolErrc::size_mismatch);
}

TEST(PoolBadInput, CorruptedHeaderChecksum) {
  TempPath path("checksum");
  make_pool(path);
  patch<std::uint64_t>(path, offsetof(pm::format::Identity, chunk_count), 6);  // was 7
  expect_open_fails(path, PoolErrc::corrupted);
  TempPath path2("checksum_layout");
  make_pool(path2);
  patch<char>(path2, offsetof(pm::format::Identity, layout) + 5, 'X');
  expect_open_fails(path2, PoolErrc::corrupted);
}

TEST(PoolBadInput, InconsistentHeaderWithAValidChecksum) {
  TempPath path("inconsistent");
  make_pool(path);
  patch<std::uint64_t>(path, offsetof(pm::format::Identity, chunk_size), 3 << 20);
  fix_checksum(path);
  expect_open_fails(path, PoolErrc::corrupted);
  TempPath path2("inconsistent_count");
  make_pool(path2);
  patch<std::uint64_t>(path2, offsetof(pm::format::Identity, chunk_count), 100);
  fix_checksum(path2);
  expect_open_fails(path2, PoolErrc::corrupted);
}

TEST(PoolBadInput, CorruptedChunkDirectory) {
  TempPath path("directory");
  make_pool(path);
  patch<std::uint64_t>(path, pm::format::header_size + 8, 0x7);  // unknown state
  expect_open_fails(path, PoolErrc::corrupted);
  TempPath path2("directory_size");
  make_pool(path2);
  patch<std::uint64_t>(path2, pm::format::header_size + 16, pm::format::chunk_word::used(0, 24));
  expect_open_fails(path2, PoolErrc::corrupted);  // slot size not a multiple of 16
}

TEST(PoolBadInput, SamePoolOpenedTwiceInOneProcess) {
  TempPath path("twice");
  make_pool(path);
  pm::Pool pool = pm::Pool::open(path, kLayout);
  expect_open_fails(path, PoolErrc::base_unavailable);
  EXPECT_EQ(pool.root(0).load(), 0u);  // the first one is unharmed
}

TEST(PoolBadInput, BaseAddressTakenByAnotherMapping) {
  TempPath path("taken");
  make_pool(path);
  const std::uintptr_t base = pm::inspect_pool(path).base;
  void* blocker = ::mmap(reinterpret_cast<void*>(base + (1 << 20)), 4096, PROT_READ,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  ASSERT_EQ(blocker, reinterpret_cast<void*>(base + (1 << 20)));
  expect_open_fails(path, PoolErrc::base_unavailable);
  ::munmap(blocker, 4096);
  pm::Pool pool = pm::Pool::open(path, kLayout);  // free again: opens
}

TEST(PoolBadInput, DirectoryIsNotAPool) {
  TempPath path("dir");
  ASSERT_EQ(::mkdir(path.str().c_str(), 0700), 0);
  expect_open_fails(path, PoolErrc::not_regular_file);
  try {
    pm::Pool::create(path, kSize, kLayout);
    ADD_FAILURE() << "created over a directory";
  } catch (const pmds::PoolError& e) {
    EXPECT_EQ(e.code(), PoolErrc::already_exists);
  }
}

TEST(PoolBadInput, FifoIsNotAPool) {
  TempPath path("fifo");
  ASSERT_EQ(::mkfifo(path.str().c_str(), 0600), 0);
  expect_open_fails(path, PoolErrc::not_regular_file);  // and does not block on the FIFO
}

TEST(PoolBadInput, CharacterDeviceIsNotAPool) {
  // (Not through expect_open_fails: other processes may touch /dev/null's times.)
  try {
    pm::Pool::open("/dev/null", kLayout);
    ADD_FAILURE() << "opened /dev/null";
  } catch (const pmds::PoolError& e) {
    EXPECT_EQ(e.code(), PoolErrc::not_regular_file) << e.what();
  }
}

TEST(PoolBadInput, CreateOnAnExistingPath) {
  TempPath path("exists");
  make_pool(path);
  const pmds::test::FileState before = pmds::test::file_state(path);
  try {
    pm::Pool::create(path, kSize, kLayout);
    ADD_FAILURE() << "created over an existing file";
  } catch (const pmds::PoolError& e) {
    EXPECT_EQ(e.code(), PoolErrc::already_exists) << e.what();
  }
  EXPECT_TRUE(pmds::test::file_state(path) == before);
  pm::Pool pool = pm::Pool::open(path, kLayout);  // still a good pool
}

void expect_create_fails(std::size_t size, std::string_view layout, PoolErrc code,
                         pm::PoolOptions o = {}) {
  TempPath path("badcreate");
  try {
    pm::Pool::create(path, size, layout, o);
    ADD_FAILURE() << "create succeeded; expected " << pmds::to_string(code);
  } catch (const pmds::PoolError& e) {
    EXPECT_EQ(e.code(), code) << e.what();
  }
  struct stat st;
  EXPECT_NE(::stat(path.str().c_str(), &st), 0) << "a failed create left a file";
}

TEST(PoolBadInput, CreateWithBadArguments) {
  expect_create_fails(pm::Pool::min_size() - 4096, kLayout, PoolErrc::bad_argument);
  expect_create_fails(4096, kLayout, PoolErrc::bad_argument);
  expect_create_fails(0, kLayout, PoolErrc::bad_argument);
  expect_create_fails(kSize + 100, kLayout, PoolErrc::bad_argument);  // not a page multiple
  expect_create_fails(kSize, "", PoolErrc::bad_argument);
  expect_create_fails(kSize, std::string(pm::Pool::max_layout_length + 1, 'a'),
                      PoolErrc::bad_argument);
  expect_create_fails(kSize, std::string_view("a\0b", 3), PoolErrc::bad_argument);
  pm::PoolOptions o;
  o.chunk_size = 3 << 20;
  expect_create_fails(kSize, kLayout, PoolErrc::bad_argument, o);
  o.chunk_size = 32 << 10;
  expect_create_fails(kSize, kLayout, PoolErrc::bad_argument, o);
  o.chunk_size = 8 << 20;
  expect_create_fails(kSize, kLayout, PoolErrc::bad_argument, o);
  o = {};
  o.base = 12345;
  expect_create_fails(kSize, kLayout, PoolErrc::bad_argument, o);
  // The limits themselves are accepted.
  TempPath ok("limits");
  pm::Pool pool =
      pm::Pool::create(ok, pm::Pool::min_size(), std::string(pm::Pool::max_layout_length, 'z'));
  EXPECT_EQ(pool.allocator().chunk_count(), 1u);
}

TEST(PoolBadInput, CreateInAMissingDirectory) {
  try {
    pm::Pool::create("/nonexistent_dir_pmds/x.pool", kSize, kLayout);
    ADD_FAILURE() << "created in a missing directory";
  } catch (const pmds::PoolError& e) {
    EXPECT_EQ(e.code(), PoolErrc::not_found) << e.what();
  }
}

TEST(PoolBadInput, CreateAtATakenBase) {
  TempPath a("base_a");
  pm::Pool pool = pm::Pool::create(a, kSize, kLayout);
  pm::PoolOptions o;
  o.base = reinterpret_cast<std::uintptr_t>(pool.base());
  expect_create_fails(kSize, kLayout, PoolErrc::base_unavailable, o);
}

}  // namespace
