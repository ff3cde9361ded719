// labels: concurrent memory
// NodeSlab: blocks that never straddle a line, reuse of freed blocks by the freeing thread and,
// through the shared batches, by another thread (no growth when one thread allocates and another
// frees), and distinct blocks under concurrent use. TowerSlab: whole lines per height, a freed
// block reused for a node of the same number of lines only.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "pmds/node_slab.hpp"

namespace {

struct Node32 {
  std::uint64_t key;
  std::atomic<std::uintptr_t> next;
  std::uint64_t value;
  std::uintptr_t extra;
};
struct Node24 {
  std::uint64_t a, b, c;
};
struct Node40 {
  std::uint64_t a[5];
};
struct Node72 {
  std::uint64_t a[9];
};

TEST(NodeSlab, BlocksArePowersOfTwoOrWholeLinesSoThatNoneStraddlesALine) {
  EXPECT_EQ(pmds::NodeSlab<Node32>::block_size, 32u);
  EXPECT_EQ(pmds::NodeSlab<Node24>::block_size, 32u);
  EXPECT_EQ(pmds::NodeSlab<Node40>::block_size, 64u);
  EXPECT_EQ(pmds::NodeSlab<Node72>::block_size, 128u);
  pmds::NodeSlab<Node32> slab;
  std::set<std::uintptr_t> seen;
  for (int i = 0; i < 10000; ++i) {  // past the first chunks (16, 32, 64 KiB, ...)
    const Node32* n = slab.make(std::uint64_t(i), std::uintptr_t{0}, std::uint64_t(i), 0u);
    const auto a = reinterpret_cast<std::uintptr_t>(n);
    ASSERT_EQ(a % 32, 0u);
    ASSERT_EQ(a / 64, (a + sizeof(Node32) - 1) / 64) << "block across a line";
    ASSERT_TRUE(seen.insert(a).second) << "a block handed out twice";
    ASSERT_EQ(n->key, std::uint64_t(i));
  }
  EXPECT_GE(slab.reserved_bytes(), 10000 * sizeof(Node32));
  EXPECT_LE(slab.reserved_bytes(), 4 * 10000 * sizeof(Node32));
}

TEST(NodeSlab, AFreedBlockIsTheFreeingThreadsNextBlock) {
  pmds::NodeSlab<Node72> slab;
  Node72* a = slab.make();
  Node72* b = slab.make();
  EXPECT_NE(a, b);
  slab.free(a);
  EXPECT_EQ(slab.make(), a);
  slab.free(b);
  EXPECT_EQ(slab.make(), b);
}

// A queue's pattern: one thread allocates every node, another frees them. Without the shared
// batches the freer's stack would grow without end and the allocator would keep taking chunks.
TEST(NodeSlab, BlocksFreedByOneThreadAreReusedByAnother) {
  pmds::NodeSlab<Node32> slab;
  constexpr int rounds = 200, per_round = 5000;  // 1M nodes: 32 MB if nothing were reused
  std::vector<Node32*> handed(per_round);
  std::barrier sync(2);
  std::thread freer([&] {
    for (int r = 0; r < rounds; ++r) {
      sync.arrive_and_wait();  // the allocator has filled `handed`
      for (Node32* n : handed) slab.free(n);
      sync.arrive_and_wait();
    }
  });
  for (int r = 0; r < rounds; ++r) {
    for (auto& n : handed) n = slab.make(std::uint64_t(r), std::uintptr_t{0}, 0u, 0u);
    sync.arrive_and_wait();
    sync.arrive_and_wait();
  }
  freer.join();
  // One round's nodes (160 KB) in use at a time, plus what the two threads keep on their stacks
  // and the chunk sizes' doubling.
  EXPECT_LE(slab.reserved_bytes(), std::size_t{1} << 20);
}

// Threads allocate and free at random, and pass half of the blocks they give up to another
// thread through a mailbox, so blocks move between threads' stacks and the shared batches. A
// block is written once, by the thread that made it, with a self-consistent pattern that every
// later holder checks: a block handed to two threads at once breaks it.
TEST(NodeSlab, ConcurrentThreadsHoldDistinctBlocks) {
  pmds::NodeSlab<Node24> slab;
  constexpr int threads = 4, steps = 100000;
  constexpr std::uint64_t magic = 0x9e3779b97f4a7c15;
  std::atomic<bool> torn{false};
  std::mutex mailbox_mutex;
  std::vector<Node24*> mailbox;
  const auto intact = [](const Node24* n) { return (n->a ^ n->b ^ magic) == n->c; };
  std::vector<std::vector<Node24*>> left(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<Node24*>& held = left[static_cast<std::size_t>(t)];
      for (int i = 0; i < steps; ++i) {
        if (held.size() < 256 && (held.empty() || rng() % 2 == 0)) {
          const auto a = std::uint64_t(t), b = std::uint64_t(i);
          held.push_back(slab.make(a, b, a ^ b ^ magic));
          continue;
        }
        const std::size_t j = rng() % held.size();
        Node24* n = held[j];
        held[j] = held.back();
        held.pop_back();
        if (!intact(n)) torn = true;
        Node24* other = nullptr;
        {
          std::lock_guard lock(mailbox_mutex);
          if (rng() % 2 == 0) {
            mailbox.push_back(n);
            n = nullptr;
          }
          if (!mailbox.empty()) {
            other = mailbox.back();
            mailbox.pop_back();
          }
        }
        if (n != nullptr) slab.free(n);
        if (other != nullptr) {
          if (!intact(other)) torn = true;
          slab.free(other);
        }
      }
    });
  for (auto& w : workers) w.join();
  EXPECT_FALSE(torn.load());
  std::set<Node24*> all(mailbox.begin(), mailbox.end());
  EXPECT_EQ(all.size(), mailbox.size());
  for (const auto& held : left)
    for (Node24* n : held) EXPECT_TRUE(all.insert(n).second);
}

struct Header32 {
  std::uint64_t a[4];
};
using Towers = pmds::TowerSlab<Header32, 24>;

TEST(TowerSlab, ANodeTakesWholeLinesAlignedToALine) {
  EXPECT_EQ(Towers::block_size(1), 64u);  // 40 bytes
  EXPECT_EQ(Towers::block_size(4), 64u);  // 64 bytes
  EXPECT_EQ(Towers::block_size(5), 128u);
  EXPECT_EQ(Towers::block_size(12), 128u);
  EXPECT_EQ(Towers::block_size(13), 192u);
  EXPECT_EQ(Towers::block_size(24), 256u);  // 224 bytes
  Towers slab;
  std::set<std::uintptr_t> lines;
  for (int i = 0; i < 20000; ++i) {
    const unsigned height = 1 + static_cast<unsigned>(i) % 24;
    auto* p = static_cast<std::byte*>(slab.allocate(height));
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    ASSERT_EQ(a % 64, 0u);
    std::memset(p, 0xab, Towers::node_bytes(height));  // ASan: the block holds the node
    for (std::uintptr_t l = a; l < a + Towers::block_size(height); l += 64)
      ASSERT_TRUE(lines.insert(l).second) << "two blocks share a line";
  }
  EXPECT_GE(slab.reserved_bytes(), lines.size() * 64);
}

TEST(TowerSlab, AFreedBlockIsReusedForItsOwnSizeOnly) {
  Towers slab;
  void* short1 = slab.allocate(1);
  void* tall = slab.allocate(20);
  slab.free(short1, 1);
  slab.free(tall, 20);
  EXPECT_EQ(slab.allocate(3), short1);  // 1 and 3 both take one line
  EXPECT_NE(slab.allocate(6), tall);    // two lines, not three
  EXPECT_EQ(slab.allocate(13), tall);
}

}  // namespace
