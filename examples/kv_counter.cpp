// A persistent counter that survives kill -9 of itself.
//
//   kv_counter POOL [INCREMENTS]
//
// Each increment inserts the next sequence number into a durable link-free hash set, so the count
// is the number of keys 1..n present. The set is durably linearizable: after a crash every insert
// that returned is in the file, and the one in progress at the crash may or may not be. So the keys
// recovered are always 1..n with no gap, n at least the last count this program printed before it
// died; the program checks that before it counts on.
//
// Prints "recovered N" (or "created") at start, "counted N" after every 1000 increments (each
// line is printed only after its increments returned), and "count N" at the end. Exit 0; 1 on
// a broken invariant or an error (a bad or foreign pool file, a full pool), with the message.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "pmds/linkfree_soft.hpp"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s POOL [INCREMENTS]\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const std::uint64_t increments = argc == 3 ? std::strtoull(argv[2], nullptr, 10) : 1000;
  try {
    // 256 MiB: room for about 3 million increments (64-byte nodes); the set's default of
    // 2^20 buckets, one per key up to a million keys.
    auto counter = pmds::open_or_create<pmds::LinkFreeHashSet>(path, std::uint64_t{256} << 20);

    std::uint64_t n = 0;
    while (counter->contains(n + 1)) ++n;
    if (counter->contains(n + 2)) {  // a gap: an increment survived without its predecessor
      std::fprintf(stderr, "kv_counter: key %llu is present but %llu is not\n",
                   static_cast<unsigned long long>(n + 2), static_cast<unsigned long long>(n + 1));
      return 1;
    }
    if (counter.recovered())
      std::printf("recovered %llu\n", static_cast<unsigned long long>(n));
    else
      std::printf("created\n");
    std::fflush(stdout);

    for (std::uint64_t i = 0; i < increments; ++i) {
      counter->insert(++n, 0);  // durable when it returns
      if (n % 1000 == 0) {
        std::printf("counted %llu\n", static_cast<unsigned long long>(n));
        std::fflush(stdout);
      }
    }
    std::printf("count %llu\n", static_cast<unsigned long long>(n));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kv_counter: %s\n", e.what());
    return 1;
  }
}
