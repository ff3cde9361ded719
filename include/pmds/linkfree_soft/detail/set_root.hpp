// pmds::linkfree_soft — what every durable set of Zuriel et al. (link-free, SOFT) shares about its
// pool: the two root-table words a set owns. (The create/open tags and RecoveryStats are every
// durable structure's: interfaces.hpp.)
//
// A pool holds one set. The set owns:
//   root(0)  a tag naming the structure and technique ("which set is this pool"), written last
//            at create, so a crash during create leaves a pool that open() rejects;
//   root(1)  a parameter recovery needs (the bucket count of a hash set, 1 for a list);
//   the pool allocator's size classes of its nodes (32 bytes for the link-free list and hash
//   table and for every SOFT PNode; 64, 128 and 320 for the link-free skip list, a node's line
//   and the rest of its tower; its slots are the durable areas, Zuriel et al. §5).
// Nothing else about a set is persistent: links, towers and buckets are rebuilt by recovery.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/pm/structure_root.hpp"

namespace pmds::linkfree_soft {

namespace detail {

inline constexpr std::size_t tag_root = 0;
inline constexpr std::size_t parameter_root = 1;

// Eight ASCII characters as a root tag (readable in `pmds inspect`'s hex dump).
constexpr std::uint64_t make_tag(const char (&s)[9]) {
  std::uint64_t t = 0;
  for (int i = 7; i >= 0; --i) t = (t << 8) | static_cast<unsigned char>(s[i]);
  return t;
}

// Records a new set in an unused pool: the parameter first, made durable, then the tag, made
// durable, so any crash image with the tag also has the parameter.
inline void write_set_root(pm::Pool& pool, std::uint64_t tag, std::uint64_t parameter,
                           const char* what) {
  if (pool.root(tag_root).load() != 0)
    throw PoolError(PoolErrc::bad_argument, std::string("pmds: cannot create a ") + what +
                                                " in pool '" + pool.path() +
                                                "': its root table already holds a structure");
  pool.root(parameter_root).store(parameter);
  pm::persist(&pool.root(parameter_root), sizeof(std::uint64_t));
  pool.root(tag_root).store(tag);
  pm::persist(&pool.root(tag_root), sizeof(std::uint64_t));
}

// Checks that the pool holds the set `what` (tag) and returns its parameter.
inline std::uint64_t read_set_root(pm::Pool& pool, std::uint64_t tag, const char* what) {
  pm::StructureRoot::check_tag(pool, tag, what);
  return pool.root(parameter_root).load();
}

class Stopwatch {
 public:
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace detail
}  // namespace pmds::linkfree_soft
