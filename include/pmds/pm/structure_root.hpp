// pmds — the pool roots of a structure that keeps its state in one area of its pool (the
// nbMontage structures, montage/; InCLL's Masstree, incll/): root(0) its tag (written last at
// create, so a crash during create leaves a pool that open rejects), root(1) a parameter (a hash
// table's bucket count, or 0), root(2) the offset of its area.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "pmds/error.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/pool.hpp"

namespace pmds::pm {

struct StructureRoot {
  static constexpr std::size_t tag_root = 0, parameter_root = 1, area_root = 2;

  // Throws PoolError bad_argument if the pool already holds a structure.
  static void check_unused(Pool& pool, const char* name) {
    if (pool.root(tag_root).load() != 0)
      throw PoolError(PoolErrc::bad_argument, std::string("pmds: cannot create a ") + name +
                                                  " in pool '" + pool.path() +
                                                  "': its root table already holds a structure");
  }
  static void write(Pool& pool, std::uint64_t tag, std::uint64_t parameter, const void* area) {
    pool.root(area_root).store(static_cast<std::uint64_t>(static_cast<const char*>(area) -
                                                          static_cast<const char*>(pool.base())));
    pool.root(parameter_root).store(parameter);
    persist(&pool.root(parameter_root), 2 * sizeof(std::uint64_t));
    pool.root(tag_root).store(tag);
    persist(&pool.root(tag_root), sizeof(std::uint64_t));
  }
  // Throws PoolError layout_mismatch unless root(0) is `tag`.
  static void check_tag(Pool& pool, std::uint64_t tag, const char* name) {
    const std::uint64_t found = pool.root(tag_root).load();
    if (found != tag)
      throw PoolError(PoolErrc::layout_mismatch,
                      std::string("pmds: pool '") + pool.path() + "' does not hold a " + name +
                          (found == 0 ? " (its root table is empty: created by a crashed create?)"
                                      : " (its root names another structure)"));
  }
  // Checks the tag; returns the parameter and the area (the structure checks the area further).
  static std::pair<std::uint64_t, void*> read(Pool& pool, std::uint64_t tag, const char* name) {
    check_tag(pool, tag, name);
    const std::uint64_t area = pool.root(area_root).load();
    if (area >= pool.size())
      throw PoolCorrupt(std::string("pmds: pool '") + pool.path() + "': " + name +
                        ": the offset of its area is outside the pool");
    return {pool.root(parameter_root).load(), static_cast<char*>(pool.base()) + area};
  }
};

}  // namespace pmds::pm
