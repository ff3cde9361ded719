// pmds — the crash lab's planted bugs in the pool layer: the chunk allocator and the pool's
// growth (docs/ARCHITECTURE.md §4–5). A fixture (crashlab/allocator_probe.hpp) sets one; the lab
// must report it. Only the simulated backend reads the setting: planted() is false at compile
// time in every other backend, which compiles the bugs away.
#pragma once

#include "pmds/pm/backend.hpp"

namespace pmds::pm {

enum class PlantedPoolBug {
  none,
  // The allocator never persists a claimed chunk's directory word: a crash can free a chunk
  // that holds a durable element.
  directory_not_persisted,
  // Pool::grow persists the header's new chunk count before the file is extended: a crash in
  // between leaves a header that claims more than the file holds.
  growth_size_before_extension,
  // Pool::grow hands the new chunks to the allocator before the header says they exist (its
  // write-back is left to a later persist of the header): a crash can trim a chunk that holds
  // a durable element.
  growth_chunks_before_header,
  // Pool::grow maps the file's extension at another address than the pool's base + old size
  // (a pool whose base moves when it grows): the chunks the allocator hands out are not there.
  growth_maps_elsewhere,
};

inline PlantedPoolBug planted_pool_bug = PlantedPoolBug::none;

// Whether `bug` is planted (never outside the simulated backend).
inline bool planted(PlantedPoolBug bug) {
  return backend == Backend::simulated && planted_pool_bug == bug;
}

}  // namespace pmds::pm
