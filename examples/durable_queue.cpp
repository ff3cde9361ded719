// A durable queue shared by a producer thread and a consumer thread.
//
//   durable_queue POOL [VALUES]
//
// Opens (or creates) a durable Michael-Scott queue in POOL (Izraelevitz transformation: every
// completed enqueue and dequeue is durable when it returns). Whatever an earlier run left in the
// queue is taken out first, then a producer enqueues VALUES numbered values while a consumer
// dequeues them; the consumer checks it got every value once, in order (one producer: FIFO).
// Prints "left over N", then "consumed N in order". Exit 0; 1 on a broken invariant or an error.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>

#include "pmds/izraelevitz.hpp"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s POOL [VALUES]\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const std::uint64_t values = argc == 3 ? std::strtoull(argv[2], nullptr, 10) : 10000;
  try {
    auto queue = pmds::open_or_create<pmds::IzraelevitzQueue>(path, std::uint64_t{64} << 20);
    std::uint64_t left_over = 0;
    while (queue->dequeue()) ++left_over;
    std::printf("left over %llu\n", static_cast<unsigned long long>(left_over));

    std::thread producer([&] {
      for (std::uint64_t v = 1; v <= values; ++v) queue->enqueue(v);
    });
    std::uint64_t expected = 1;
    bool in_order = true;
    while (expected <= values) {
      if (const auto v = queue->dequeue()) {
        in_order = in_order && *v == expected;
        ++expected;
      } else {
        std::this_thread::yield();
      }
    }
    producer.join();
    if (!in_order || queue->dequeue()) {
      std::fprintf(stderr, "durable_queue: values out of order, lost or repeated\n");
      return 1;
    }
    std::printf("consumed %llu in order\n", static_cast<unsigned long long>(values));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "durable_queue: %s\n", e.what());
    return 1;
  }
}
