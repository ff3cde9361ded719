// pmds::montage::KeyValuePayload — the persistent part of one key of an nbMontage map (seed 003
// Figure 7's Payload): a 64-byte pool block, montage::Block's header then the key and its value.
// Every montage/ map (hash_map.hpp, skip_list.hpp, natarajan_mittal_bst.hpp) stores its keys in
// these, and checks them the same way when it rebuilds its index at recovery.
#pragma once

#include <string>
#include <vector>

#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/montage/epoch_system.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/pool.hpp"

namespace pmds::montage {

// Never changes once its operation's lin_cas linked it (seed 003 §3.2).
struct KeyValuePayload : Block {
  pm::atomic<Key> key;
  pm::atomic<Value> value;
};
static_assert(sizeof(KeyValuePayload) == 64);

// The payloads recovery kept, as key-value payloads. A block too small for one, or holding a
// reserved key, is a damaged pool (docs/ARCHITECTURE.md §5): PoolCorrupt, nothing written.
inline std::vector<KeyValuePayload*> key_value_payloads(const std::vector<Block*>& blocks,
                                                        const pm::Pool& pool, const char* name) {
  std::vector<KeyValuePayload*> out;
  out.reserve(blocks.size());
  for (Block* b : blocks) {
    auto* p = static_cast<KeyValuePayload*>(b);
    if (b->kind_size.load() >> 8 < sizeof(KeyValuePayload) || is_reserved_key(p->key.load()))
      throw PoolCorrupt(std::string("pmds: pool '") + pool.path() + "': " + name +
                        ": a payload with a reserved key or the wrong size");
    out.push_back(p);
  }
  return out;
}

}  // namespace pmds::montage
