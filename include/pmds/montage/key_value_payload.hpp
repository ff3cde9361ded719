// pmds::montage::KeyValuePayload — the persistent part of one key of an nbMontage map (seed 003
// Figure 7's Payload): a 64-byte pool block, montage::Block's header then the key and its value.
// Every montage/ map (hash_map.hpp, skip_list.hpp, natarajan_mittal_bst.hpp,
// split_ordered_hash.hpp) stores its keys in these, and reads them back the same way when it
// rebuilds its index at recovery.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/montage/epoch_system.hpp"
#include "pmds/montage/parallel.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/pool.hpp"

namespace pmds::montage {

// Never changes once its operation's lin_cas linked it (seed 003 §3.2).
struct KeyValuePayload : Block {
  pm::atomic<Key> key;
  pm::atomic<Value> value;
};
static_assert(sizeof(KeyValuePayload) == 64);

// One recovered key: its key and value read from the payload once, so that sorting and building
// the index do not go back to the pool.
struct KeyValueEntry {
  Key key;
  Value value;
  KeyValuePayload* payload;
};

// The payloads recovery kept (in address order: the pool is read sequentially), as entries
// sorted by `less`, over `threads` threads (parallel.hpp). A block too small for a payload, or
// holding a reserved key, is a damaged pool (docs/ARCHITECTURE.md §5): PoolCorrupt, nothing
// written.
template <class Less>
std::vector<KeyValueEntry> sorted_entries(const std::vector<Block*>& blocks, const pm::Pool& pool,
                                          const char* name, std::size_t threads, Less less) {
  std::vector<KeyValueEntry> out(blocks.size());
  in_parallel(threads, blocks.size(), [&](std::size_t first, std::size_t last) {
    for (std::size_t i = first; i < last; ++i) {
      auto* p = static_cast<KeyValuePayload*>(blocks[i]);
      const Key key = p->key.load();
      if (blocks[i]->kind_size.load() >> 8 < sizeof(KeyValuePayload) || is_reserved_key(key))
        throw PoolCorrupt(std::string("pmds: pool '") + pool.path() + "': " + name +
                          ": a payload with a reserved key or the wrong size");
      out[i] = KeyValueEntry{key, p->value.load(), p};
    }
  });
  parallel_sort(out, less, threads);
  return out;
}

// By key: the order of the ordered maps.
inline bool key_less(const KeyValueEntry& a, const KeyValueEntry& b) {
  return a.key < b.key;
}

}  // namespace pmds::montage
