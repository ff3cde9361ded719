// labels: concurrent
// Thread registry: small stable ids, reuse after exit, a clear error beyond the maximum.
#include <gtest/gtest.h>

#include <barrier>
#include <set>
#include <thread>
#include <vector>

#include "pmds/thread_registry.hpp"

namespace {

TEST(ThreadRegistry, IdIsStableWithinAThread) {
  const auto id = pmds::thread_id();
  EXPECT_LT(id, pmds::max_threads);
  EXPECT_EQ(pmds::thread_id(), id);
}

TEST(ThreadRegistry, IdsAreReusedAfterAThreadExits) {
  pmds::thread_id();
  std::size_t first = 0, second = 0;
  std::thread([&] { first = pmds::thread_id(); }).join();
  std::thread([&] { second = pmds::thread_id(); }).join();
  EXPECT_EQ(first, second);
}

TEST(ThreadRegistry, TooManyThreadsIsAClearError) {
  pmds::thread_id();
  const std::size_t already = pmds::threads_in_use();
  const std::size_t room = pmds::max_threads - already;
  std::barrier sync(static_cast<std::ptrdiff_t>(room + 1));
  std::vector<std::thread> holders;
  std::vector<std::size_t> ids(room);
  for (std::size_t i = 0; i < room; ++i)
    holders.emplace_back([&, i] {
      ids[i] = pmds::thread_id();
      sync.arrive_and_wait();  // every id is taken
      sync.arrive_and_wait();  // the main test has checked the overflow
    });
  sync.arrive_and_wait();
  std::string message;
  std::thread([&] {
    try {
      pmds::thread_id();
    } catch (const pmds::TooManyThreads& e) {
      message = e.what();
    }
  }).join();
  sync.arrive_and_wait();
  for (auto& t : holders) t.join();
  EXPECT_NE(message.find("128"), std::string::npos) << message;
  EXPECT_EQ(std::set<std::size_t>(ids.begin(), ids.end()).size(), room);  // all distinct
  EXPECT_EQ(pmds::threads_in_use(), already);                             // all given back
}

}  // namespace
