// An ordered map from byte strings to byte strings that survives kill -9: a buffered one, so
// what it promises after a crash is what sync() made durable.
//
//   string_index POOL load N        puts N more keys "user:000001", "user:000002", ... after those
//                                   the pool holds, each with a value, sync()ing every 1000 puts
//                                   and printing "synced K" once that sync returned
//   string_index POOL scan FROM N   prints up to N keys >= FROM in key order, "key value"
//
// The map is pmds::BufferedStringOrderedMap (InCLL's Masstree over byte strings): no
// flush or fence on an operation's path; a crash loses at most the operations of the epoch in
// flight, never one that a completed sync() covered, and what survives is a prefix of the puts
// (buffered durable linearizability). Both commands read with range(), which may run while
// other threads write. So `load` finds keys 1..m with no gap, m at least the
// last count it printed before a kill; it checks that, prints "recovered m" and goes on from
// there. A clean exit syncs. Exit 0; 1 on a broken promise or an error (a bad or foreign pool
// file, a full pool, a key over 1024 bytes), with the message.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "pmds/incll.hpp"

namespace {

std::string user_key(std::uint64_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "user:%06llu", static_cast<unsigned long long>(i));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command = argc >= 3 ? argv[2] : "";
  if (!((command == "load" && argc == 4) || (command == "scan" && argc == 5))) {
    std::fprintf(stderr, "usage: %s POOL load N | POOL scan FROM N\n", argv[0]);
    return 2;
  }
  try {
    auto index =
        pmds::open_or_create<pmds::BufferedStringOrderedMap>(argv[1], std::uint64_t{256} << 20);
    if (command == "load") {
      // What survived: user:1..m, in order, with their values, and no key after a gap.
      std::uint64_t m = 0;
      bool ok = true;
      for (const auto& [k, v] : index->range("user:", "user;")) {  // the keys "user:..."
        ++m;
        ok = ok && k == user_key(m) && v == "profile of " + user_key(m);
      }
      if (!ok) {
        std::fprintf(stderr, "string_index: the %llu keys recovered are not user:1..%llu\n",
                     static_cast<unsigned long long>(m), static_cast<unsigned long long>(m));
        return 1;
      }
      if (index.recovered())
        std::printf("recovered %llu\n", static_cast<unsigned long long>(m));
      else
        std::printf("created\n");
      std::fflush(stdout);
      const std::uint64_t n = std::strtoull(argv[3], nullptr, 10);
      for (std::uint64_t i = m + 1; i <= m + n; ++i) {
        index->put(user_key(i), "profile of " + user_key(i));
        if (i % 1000 == 0) {
          index->sync();  // every put so far survives any crash from here on
          std::printf("synced %llu\n", static_cast<unsigned long long>(i));
          std::fflush(stdout);
        }
      }
      std::printf("holds %llu\n", static_cast<unsigned long long>(m + n));
    } else {
      std::size_t n = std::strtoull(argv[4], nullptr, 10);
      for (const auto& [k, v] : index->range(argv[3])) {
        if (n-- == 0) break;
        std::printf("%.*s %.*s\n", static_cast<int>(k.size()), k.data(), static_cast<int>(v.size()),
                    v.data());
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "string_index: %s\n", e.what());
    return 1;
  }
  return 0;
}
