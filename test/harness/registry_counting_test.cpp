// Tests of the registry (pmds/registry.hpp, registry/descriptor.hpp) over every registered entry:
// names are well formed and unique, selection by name/pattern works and rejects unknown names,
// every entry can be created (durable ones in a pool), prefilled to exactly the count the
// harness claims (its contents afterwards), driven through the type-erased operations, and —
// when durable — closed and reopened to the same contents through the registry's factories.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "pmds/bench/runner.hpp"
#include "pmds/registry.hpp"
#include "registry_test_names.hpp"

namespace {

using namespace pmds;
using registry::Entry;
using registry::Kind;
using registry::OpCode;

// A pool path in the temporary pool directory, removed when the test ends.
class TempPool {
 public:
  explicit TempPool(std::string_view tag) {
    std::string safe(tag);
    std::replace(safe.begin(), safe.end(), '/', '-');
    path_ = (bench::temporary_pool_dir() /
             ("registry-test-" + std::to_string(::getpid()) + "-" + safe + ".pool"))
                .string();
    std::filesystem::remove(path_);
  }
  ~TempPool() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(Registry, NamesAreWellFormedAndUnique) {
  std::set<std::string_view> names;
  std::size_t index = 0;
  for (const Entry& e : registry::entries()) {
    SCOPED_TRACE(std::string(e.name));
    EXPECT_EQ(e.index, index++);
    EXPECT_TRUE(names.insert(e.name).second) << "duplicate name";
    EXPECT_EQ(std::string(e.structure) + "/" + std::string(e.technique), e.name);
    EXPECT_FALSE(e.description.empty());
    EXPECT_EQ(e.durable, e.criterion != Criterion::none);
    EXPECT_EQ(e.open != nullptr, e.durable);
    EXPECT_NE(e.create, nullptr);
    EXPECT_EQ(registry::find(e.name), &e);
  }
  EXPECT_EQ(registry::find("no/such"), nullptr);
}

TEST(Registry, SelectByNamePatternAndAll) {
  const auto all = registry::select("all");
  EXPECT_EQ(all.size(), registry::entries().size());
  if (registry::entries().empty()) GTEST_SKIP() << "nothing registered yet";
  const Entry& first = registry::entries().front();
  const auto one = registry::select(std::string(first.name));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0], &first);
  for (const Entry* e : registry::select(std::string(first.structure) + "/*"))
    EXPECT_EQ(e->structure, first.structure);
  for (const Entry* e : registry::select("*/" + std::string(first.technique)))
    EXPECT_EQ(e->technique, first.technique);
  // Repeats are dropped; order follows the request.
  const auto twice = registry::select(std::string(first.name) + ",all");
  EXPECT_EQ(twice.size(), registry::entries().size());
  EXPECT_EQ(twice[0], &first);
}

TEST(Registry, SelectRejectsUnknownNamesClearly) {
  try {
    registry::select("hash/nonsense");
    FAIL() << "no exception";
  } catch (const registry::UnknownStructure& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("unknown structure \"hash/nonsense\""));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("pmds list"));
  }
  EXPECT_THROW(registry::select(""), registry::UnknownStructure);
  EXPECT_THROW(registry::select("all,"), registry::UnknownStructure);
}

TEST(Registry, InstantiatedTablesCoverEveryEntry) {
  const auto& prefill = registry::instantiate<bench::PrefillFn, bench::PrefillDriver>();
  const auto& run = registry::instantiate<bench::RunFn, bench::RunDriver>();
  EXPECT_EQ(prefill.size(), registry::entries().size());
  EXPECT_EQ(run.size(), registry::entries().size());
  for (const auto f : prefill) EXPECT_NE(f, nullptr);
  for (const auto f : run) EXPECT_NE(f, nullptr);
  std::size_t visited = 0;
  registry::for_each_descriptor([&]<class D>() {
    EXPECT_EQ(registry::entries()[visited].name, D::name);
    ++visited;
  });
  EXPECT_EQ(visited, registry::entries().size());
}

TEST(Registry, TransientEntriesRefuseToOpenAndDurableOnesNeedAPool) {
  for (const Entry& e : registry::entries()) {
    registry::CreateOptions o;
    o.key_range = 64;
    if (e.durable)
      EXPECT_THROW(registry::Instance::create(e, o), Error) << e.name;
    else
      EXPECT_THROW(registry::Instance::open(e, "/nonexistent.pool"), Error) << e.name;
  }
}

// --lazy-recovery (CreateOptions::lazy_recovery) reaches the InCLL Masstrees: a tree opened
// lazily after a process crash serves the state of its last sync: the failed epoch's removes
// and inserts undone border by border, on first access.
TEST(Registry, LazyRecoveryReachesTheInCLLMasstrees) {
  registry::CreateOptions o;
  o.key_range = 4000;
  o.lazy_recovery = true;
  o.background_thread = false;  // epochs end at sync() only: the crash's epoch is known
  for (const char* name :
       {"masstree/incll", "masstree/logging", "masstree-bytes/incll", "masstree-bytes/logging"}) {
    const Entry& e = *registry::find(name);
    TempPool pool(name);
    std::fflush(nullptr);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      auto inst = registry::Instance::create(e, o, pool.path());
      bench::target_of(e).prefill(inst.object(), 2000, 2000, 7, 1);  // keys 1..2000
      inst.apply({OpCode::sync, 0, 0, 1});
      for (Key k = 1; k <= 2000; k += 2) inst.apply({OpCode::remove, k, 0, 1});
      for (Key k = 2001; k <= 3000; ++k) inst.apply({OpCode::insert, k, k, 1});
      ::_exit(0);  // the pool is never closed: a crash in the epoch after the sync
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << name;
    auto inst = registry::Instance::open(e, pool.path(), o);
    EXPECT_TRUE(inst.apply({OpCode::contains, 1, 0, 1}).ok) << name;
    EXPECT_FALSE(inst.apply({OpCode::contains, 2001, 0, 1}).ok) << name;
    const auto items = inst.contents();
    ASSERT_EQ(items.size(), 2000u) << name;
    EXPECT_EQ(items.front().key, 1u);
    EXPECT_EQ(items.back().key, 2000u);
  }
}

// Every set/map entry: the prefill puts in exactly what it claims; operations through apply()
// behave as a set; a durable entry reopens (clean close) to the same contents.
TEST(Registry, EverySetPrefillsExactlyAndReopensToItsContents) {
  for (const Entry& e : registry::entries()) {
    if (e.kind != Kind::set && e.kind != Kind::map) continue;
    SCOPED_TRACE(std::string(e.name));
    registry::CreateOptions o;
    o.key_range = 2000;
    o.pool_size = 32u << 20;
    TempPool pool(e.name);
    std::vector<registry::Item> before;
    {
      auto inst = registry::Instance::create(e, o, pool.path());
      const bench::Target t = bench::target_of(e);
      EXPECT_EQ(t.prefill(inst.object(), 1000, 2000, 5, 2), 1000u);
      before = inst.contents();
      ASSERT_EQ(before.size(), 1000u);
      for (const auto& it : before) {
        EXPECT_GE(it.key, 1u);
        EXPECT_LE(it.key, 2000u);
      }
      // A key not in the set: insert, find, remove, through the type-erased operations.
      Key absent = 1;
      while (absent <= 2000 &&
             std::binary_search(before.begin(), before.end(), registry::Item{absent, absent},
                                [](const auto& a, const auto& b) { return a.key < b.key; }))
        ++absent;
      ASSERT_LE(absent, 2000u);
      EXPECT_FALSE(inst.apply({OpCode::contains, absent, 0, 1}).ok);
      EXPECT_TRUE(inst.apply({OpCode::insert, absent, 77, 1}).ok);
      EXPECT_FALSE(inst.apply({OpCode::insert, absent, 78, 1}).ok);
      EXPECT_TRUE(inst.apply({OpCode::contains, absent, 0, 1}).ok);
      if (e.kind == Kind::map) {
        const auto got = inst.apply({OpCode::get, absent, 0, 1});
        EXPECT_TRUE(got.ok);
        EXPECT_EQ(got.value, 77u);
      }
      EXPECT_TRUE(inst.apply({OpCode::remove, absent, 0, 1}).ok);
      EXPECT_FALSE(inst.apply({OpCode::remove, absent, 0, 1}).ok);
      EXPECT_THROW(inst.apply({OpCode::insert, 0, 0, 1}), ReservedKey);
      EXPECT_THROW(inst.apply({OpCode::enqueue, 1, 1, 1}), registry::UnsupportedOperation);
    }
    if (!e.durable) continue;
    auto reopened = registry::Instance::open(e, pool.path(), o);
    EXPECT_EQ(reopened.contents(), before);
  }
}

// ---------------------------------------------------------------------------------------------
// Bad input inside the pool (docs/ARCHITECTURE.md §5): every durable entry, a pool whose body
// (the chunks) was damaged after a clean close. Opening it, reading its contents and running a
// few operations must end in a recovery of what could be recovered or a typed pmds::Error —
// never a signal, a sanitizer report, a hang or a foreign exception. Each open runs in a forked
// child with a time limit, so a crash or a hang is reported naming the entry, seed and damage.
// When the error is PoolCorrupt (recovery found the damage), the pool's bytes past the header
// page are as the damage left them: recovery checks before it writes. PMDS_SOAK=1: more seeds.

namespace bad_body {

enum class Damage { random_bytes, outside_pool, mid_slot, cycle };
constexpr Damage all_damages[] = {Damage::random_bytes, Damage::outside_pool, Damage::mid_slot,
                                  Damage::cycle};
const char* to_string(Damage d) {
  switch (d) {
    case Damage::random_bytes:
      return "random bytes in a used slot";
    case Damage::outside_pool:
      return "a link to outside the pool";
    case Damage::mid_slot:
      return "a link into the middle of a slot";
    case Damage::cycle:
      return "a link to its own or an earlier node";
  }
  return "?";
}

// What the damage can aim at, found through the allocator of the cleanly closed pool (offsets
// from the pool's base).
struct Layout {
  std::uintptr_t base = 0;
  std::size_t size = 0;
  struct Slot {
    std::size_t offset, size;
  };
  std::vector<Slot> used_slots;       // slots with a non-zero byte (allocated once)
  std::vector<std::size_t> pointers;  // 8-byte words in them holding an address in the pool
};

Layout survey(const std::string& path, std::string_view layout) {
  Layout out;
  pm::Pool pool = pm::Pool::open(path, layout);
  out.base = reinterpret_cast<std::uintptr_t>(pool.base());
  out.size = pool.size();
  pool.allocator().for_each_slot([&](void* slot, std::size_t size) {
    const auto* words = static_cast<const std::uint64_t*>(slot);
    bool used = false;
    for (std::size_t i = 0; i < size / 8; ++i) used = used || words[i] != 0;
    if (!used) return;
    const std::size_t offset = reinterpret_cast<std::uintptr_t>(slot) - out.base;
    out.used_slots.push_back({offset, size});
    for (std::size_t i = 0; i < size / 8; ++i)
      if (words[i] >= out.base && words[i] < out.base + out.size)
        out.pointers.push_back(offset + 8 * i);
  });
  pool.close();
  return out;
}

// Damages `image` (the pool file's bytes); returns a description for failure messages.
std::string damage(std::vector<unsigned char>& image, const Layout& l, Damage d,
                   std::mt19937_64& rng) {
  const auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  const auto put_word = [&](std::size_t at, std::uint64_t v) {
    std::memcpy(image.data() + at, &v, sizeof v);
  };
  if (l.used_slots.empty()) return "nothing to damage";
  if (d == Damage::random_bytes) {
    const Layout::Slot& s = l.used_slots[pick(l.used_slots.size())];
    const std::size_t start = s.offset + pick(s.size);
    const std::size_t length = std::min<std::size_t>(1 + pick(64), image.size() - start);
    for (std::size_t i = 0; i < length; ++i) image[start + i] = static_cast<unsigned char>(rng());
    return "bytes [" + std::to_string(start) + ", " + std::to_string(start + length) + ")";
  }
  // A word holding a link (any word of a used slot when the structure keeps none in the pool).
  std::size_t at;
  if (!l.pointers.empty()) {
    at = l.pointers[pick(l.pointers.size())];
  } else {
    const Layout::Slot& s = l.used_slots[pick(l.used_slots.size())];
    at = s.offset + 8 * pick(s.size / 8);
  }
  std::uint64_t old;
  std::memcpy(&old, image.data() + at, sizeof old);
  std::uint64_t v = 0;
  switch (d) {
    case Damage::outside_pool: {
      const std::uint64_t choices[] = {l.base + l.size + 64 * pick(1024), l.base - 4096,
                                       l.base + 64 * pick(64), 0x10, ~std::uint64_t{0xF}};
      v = choices[pick(std::size(choices))];
      break;
    }
    case Damage::mid_slot: {
      const Layout::Slot& s = l.used_slots[pick(l.used_slots.size())];
      v = l.base + s.offset + (s.size >= 32 ? 16 * (1 + pick(s.size / 16 - 1)) : 8);
      break;
    }
    case Damage::cycle: {
      // The slot holding the word (a node linked to itself), or the target of another link
      // (an earlier node: a cycle, or a node with two predecessors).
      std::size_t own = 0;
      for (const Layout::Slot& s : l.used_slots)
        if (at >= s.offset && at < s.offset + s.size) own = s.offset;
      if (l.pointers.empty() || rng() % 2 == 0) {
        v = l.base + own;
      } else {
        std::memcpy(&v, image.data() + l.pointers[pick(l.pointers.size())], sizeof v);
      }
      break;
    }
    case Damage::random_bytes:
      break;
  }
  v |= old & 0x3 & ~v;  // keep the link's mark bits when the new value is aligned
  put_word(at, v);
  char text[96];
  std::snprintf(text, sizeof text, "word at %zu: %#llx -> %#llx", at,
                static_cast<unsigned long long>(old), static_cast<unsigned long long>(v));
  return text;
}

void write_file(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  ASSERT_EQ(std::fclose(f), 0);
}

std::vector<unsigned char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(in), {});
}

// A prefill of inserts and removes (or pushes and pops), through the type-erased operations.
void prefill(const registry::Instance& inst, Kind kind) {
  for (Key k = 1; k <= 48; ++k) {
    switch (kind) {
      case Kind::set:
      case Kind::map:
        inst.apply({OpCode::insert, k, k * 3, 1});
        if (k % 3 == 0) inst.apply({OpCode::remove, k / 2 + 1, 0, 1});
        break;
      case Kind::queue:
        inst.apply({OpCode::enqueue, 1, k, 1});
        if (k % 4 == 0) inst.apply({OpCode::dequeue, 1, 0, 1});
        break;
      case Kind::stack:
        inst.apply({OpCode::push, 1, k, 1});
        if (k % 4 == 0) inst.apply({OpCode::pop, 1, 0, 1});
        break;
      case Kind::priority_queue:
        inst.apply({OpCode::pq_insert, k, 0, 1});
        break;
      case Kind::register_object:
        inst.apply({OpCode::fetch_multiply, 1, 0, k % 2 == 0 ? 2.0 : 0.75});
        break;
    }
  }
}

// After recovery: a few operations of the entry's kind.
void operate(const registry::Instance& inst, Kind kind) {
  for (Key k = 1; k <= 24; ++k) {
    switch (kind) {
      case Kind::set:
      case Kind::map:
        inst.apply({OpCode::contains, k, 0, 1});
        inst.apply({k % 2 == 0 ? OpCode::insert : OpCode::remove, k, k, 1});
        inst.apply({OpCode::insert, 100 + k, k, 1});
        break;
      case Kind::queue:
        inst.apply({OpCode::enqueue, 1, 1000 + k, 1});
        if (k % 2 == 0) inst.apply({OpCode::dequeue, 1, 0, 1});
        break;
      case Kind::stack:
        inst.apply({OpCode::push, 1, 1000 + k, 1});
        if (k % 2 == 0) inst.apply({OpCode::pop, 1, 0, 1});
        break;
      case Kind::priority_queue:
        inst.apply({OpCode::pq_insert, k, 0, 1});
        inst.apply({OpCode::delete_min, 1, 0, 1});
        break;
      case Kind::register_object:
        inst.apply({OpCode::read, 1, 0, 1});
        inst.apply({OpCode::fetch_multiply, 1, 0, 2.0});
        break;
    }
  }
}

// The child's verdict, as its exit status.
enum Outcome : int { recovered = 0, corrupt = 10, other_pmds_error = 11, foreign_exception = 12 };

// Opens the damaged pool, reads it, operates, closes and reopens it; in a forked child with a
// time limit. Returns "" when acceptable, else what went wrong; `outcome` receives the child's
// status and `message` the error it reported.
std::string run_in_child(const Entry& e, const std::string& path, const registry::CreateOptions& o,
                         int& outcome, std::string& message) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) return "fork failed";
  if (child == 0) {
    ::close(fds[0]);
    int code = recovered;
    std::string what;
    try {
      {
        auto inst = registry::Instance::open(e, path, o);
        (void)inst.contents();
        operate(inst, e.kind);
      }
      auto again = registry::Instance::open(e, path, o);
      (void)again.contents();
    } catch (const PoolCorrupt& ex) {
      code = corrupt;
      what = ex.what();
    } catch (const Error& ex) {
      code = other_pmds_error;
      what = ex.what();
    } catch (const std::exception& ex) {
      code = foreign_exception;
      what = ex.what();
    }
    [[maybe_unused]] const ssize_t w = ::write(fds[1], what.data(), what.size());
    ::_exit(code);  // no destructors, no test-framework teardown in the child
  }
  ::close(fds[1]);
  // Wait with a limit: a recovery that loops is a failure, not a stuck test.
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int status = 0;
  bool done = false;
  while (!done) {
    const pid_t r = ::waitpid(child, &status, WNOHANG);
    if (r == child) {
      done = true;
    } else if (std::chrono::steady_clock::now() > limit) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      ::close(fds[0]);
      return "hang: still running after 30 s (killed)";
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  char buffer[4096];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;)
    message.append(buffer, static_cast<std::size_t>(n));
  ::close(fds[0]);
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  outcome = WEXITSTATUS(status);
  if (outcome == recovered || outcome == corrupt || outcome == other_pmds_error) return "";
  if (outcome == foreign_exception) return "an exception that is not a pmds::Error: " + message;
  return "exit status " + std::to_string(outcome) + " (a sanitizer report?)";
}

}  // namespace bad_body

// One test per durable entry (ctest runs them in parallel: as one test it was the last to end).
class RegistryDamagedPool : public testing::TestWithParam<std::string> {};

TEST_P(RegistryDamagedPool, SurvivesADamagedPoolBody) {
  using namespace bad_body;
#if defined(__SANITIZE_THREAD__)
  // One thread opens each pool: ThreadSanitizer has nothing to find, and its fork handling made
  // this test take 260 s. The release and AddressSanitizer builds run it.
  GTEST_SKIP() << "single-threaded memory-safety test: run by the release and ASan builds";
#endif
  const char* soak = std::getenv("PMDS_SOAK");
#if defined(__SANITIZE_ADDRESS__)
  const int usual_seeds = 2;  // 95 s with 6 seeds under ASan; 2 still try every damage kind
#else
  const int usual_seeds = 6;
#endif
  const int seeds = soak != nullptr && std::string(soak) == "1" ? 60 : usual_seeds;
  const Entry& e = *registry::find(GetParam());
  registry::CreateOptions o;
  o.key_range = 256;
  o.pool_size = 16u << 20;
  o.background_thread = false;
  TempPool pool(e.name);
  {
    auto inst = registry::Instance::create(e, o, pool.path());
    prefill(inst, e.kind);
  }
  const Layout layout = survey(pool.path(), e.name);
  const std::vector<unsigned char> pristine = read_file(pool.path());
  ASSERT_EQ(pristine.size(), layout.size);
  std::size_t counts[3] = {};  // recovered, PoolCorrupt, other pmds::Error
  for (int seed = 0; seed < seeds; ++seed) {
    for (const Damage d : all_damages) {
      std::mt19937_64 rng(static_cast<std::uint64_t>(seed) * 1000003u + e.index * 31u +
                          static_cast<std::uint64_t>(d));
      std::vector<unsigned char> image = pristine;
      const std::string where = damage(image, layout, d, rng);
      write_file(pool.path(), image);
      int outcome = -1;
      std::string message;
      const std::string failure = run_in_child(e, pool.path(), o, outcome, message);
      EXPECT_EQ(failure, "") << e.name << ", seed " << seed << ", " << to_string(d) << " (" << where
                             << ")";
      if (!failure.empty()) continue;
      counts[outcome == recovered ? 0 : outcome == corrupt ? 1 : 2]++;
      if (outcome == corrupt) {
        // Found before recovery wrote: the body is as the damage left it (Pool::open
        // rewrites only its header page: the clean-shutdown flag).
        EXPECT_THAT(message, ::testing::HasSubstr("corrupt structure"));
        const std::vector<unsigned char> after = read_file(pool.path());
        EXPECT_TRUE(after.size() == image.size() &&
                    std::equal(after.begin() + 4096, after.end(), image.begin() + 4096))
            << e.name << ", seed " << seed << ", " << to_string(d) << " (" << where
            << "): PoolCorrupt after recovery wrote to the pool: " << message;
      }
    }
  }
  std::printf("[ bad body ] %-22s recovered %3zu, PoolCorrupt %3zu, other pmds::Error %3zu\n",
              std::string(e.name).c_str(), counts[0], counts[1], counts[2]);
}

INSTANTIATE_TEST_SUITE_P(Registered, RegistryDamagedPool,
                         testing::ValuesIn(pmds::test::durable_entry_names()),
                         pmds::test::entry_test_name);

}  // namespace
