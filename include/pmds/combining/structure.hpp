// pmds — what every combining structure (Fatourou et al.) shares around its PBcomb instances: the
// anchor that holds their persistent areas, node memory, and the recovery trace.
//
// The anchor is one slot: a header line {kind, slots, area count, parameter (the heap's capacity;
// 0 otherwise)} and the areas of the structure's combining instances (one for the stack, heap and
// register, two for the queue), each line-aligned. Durable structures keep it in a pool
// (pool.root(0), set once the anchor is durable: the root makes it reachable); transient ones in
// DRAM. Nodes (stack and queue) come from the pool's chunk allocator, consecutive per combiner
// (principle 3), or from the DRAM heap. A node is touched only by combiners, which hold the
// instance's lock, so nodes need no reclamation scheme: a combiner frees what its round unlinked
// once the round is durable.
//
// Recovery (open): the anchor is checked (kind, slot count), each PBcomb instance starts with no
// request pending, and the structure traces its nodes from the current state; every slot not
// reached is returned to the allocator (the trace of algo/policy.hpp, which checks every link
// before it is followed).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "pmds/algo/policy.hpp"
#include "pmds/combining/protocol.hpp"
#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/pool.hpp"

namespace pmds::combining {

// A response that may hold a value (a pop or dequeue of an empty structure holds none), as the
// two words it takes in a combining record.
struct MaybeValue {
  std::uint64_t value;
  std::uint64_t present;
  std::optional<Value> get() const { return present ? std::optional<Value>(value) : std::nullopt; }
};

// Flushes every line the nodes (each `bytes` long) touch, each line once: a round's nodes are
// mostly consecutive slots sharing lines (principle 3). `lines` is the caller's scratch.
template <class Node>
void flush_lines_once(const std::vector<Node*>& nodes, std::vector<std::uintptr_t>& lines,
                      pm::Site site = pm::Site::current()) {
  lines.clear();
  for (const Node* n : nodes) {
    auto line = reinterpret_cast<std::uintptr_t>(n) & ~std::uintptr_t{63};
    const auto last =
        (reinterpret_cast<std::uintptr_t>(n) + sizeof(Node) - 1) & ~std::uintptr_t{63};
    for (; line <= last; line += 64)
      if (std::find(lines.begin(), lines.end(), line) == lines.end()) {
        lines.push_back(line);
        pm::flush(reinterpret_cast<const void*>(line), site);
      }
  }
}

template <Persistence Mode>
class CombiningStructure {
 public:
  static constexpr bool persistent = Mode != Persistence::none;
  static constexpr Criterion criterion = criterion_of(Mode);
  using Word =
      std::conditional_t<persistent, pm::atomic<std::uint64_t>, std::atomic<std::uint64_t>>;
  using Trace = algo::detail::TraceRecovery<algo::detail::NodesInPlace>;

  CombiningStructure(const CombiningStructure&) = delete;
  CombiningStructure& operator=(const CombiningStructure&) = delete;

  // What the recovery that opened this structure found (zeros for one created new).
  const RecoveryStats& recovery_stats() const requires(persistent) { return stats_; }
  std::size_t slots() const { return slots_; }
  // Nothing is deferred: a combiner frees what it unlinks at the end of its round.
  void drain() {}

 protected:
  static constexpr std::size_t header_bytes = 64;
  static constexpr std::size_t root_slot = 0;

  explicit CombiningStructure(std::size_t slots) requires(!persistent) : slots_(slots) {}
  CombiningStructure(pm::Pool& pool, std::size_t slots, CreateTag) requires(persistent)
      : pool_(&pool), slots_(slots) {
    if (pool.root(root_slot).load() != 0)
      throw PoolError(PoolErrc::bad_argument,
                      "pmds: pool " + pool.path() + " already holds a structure (root slot 0)");
  }
  CombiningStructure(pm::Pool& pool, OpenTag) requires(persistent) : pool_(&pool) {}
  ~CombiningStructure() {
    if constexpr (!persistent) ::operator delete (anchor_, std::align_val_t{64});
  }

  // A new anchor of `bytes` (header included), zeroed, its header written: private until
  // publish_anchor().
  char* create_anchor(std::uint64_t kind, std::size_t bytes, std::size_t areas,
                      std::uint64_t parameter = 0) {
    if constexpr (persistent) {
      anchor_ = static_cast<char*>(pool_->allocator().allocate(bytes));
      // A recycled slot is never handed out at creation (the pool is new), but the area
      // constructors write every word they use anyway.
    } else {
      anchor_ = static_cast<char*>(::operator new (bytes, std::align_val_t{64}));
    }
    anchor_bytes_ = bytes;
    header()[0].store(kind, std::memory_order_relaxed);
    header()[1].store(slots_, std::memory_order_relaxed);
    header()[2].store(areas, std::memory_order_relaxed);
    header()[3].store(parameter, std::memory_order_relaxed);
    parameter_ = parameter;
    return anchor_;
  }
  // Makes the anchor (its areas already persisted by their PBComb constructors) reachable.
  void publish_anchor() {
    if constexpr (persistent) {
      pm::flush(anchor_);
      algo::detail::PoolRoot(*pool_, root_slot).set(anchor_);
    }
  }

  // The anchor of an opened pool, checked (kind, slot count, area count, parameter at most
  // max_parameter): returns the trace with the anchor visited.
  Trace open_anchor(std::uint64_t kind, std::size_t bytes_for(std::size_t, std::uint64_t),
                    std::size_t areas, std::uint64_t max_parameter,
                    const char* structure) requires(persistent) {
    const auto root = pool_->root(root_slot).load();
    if (root == 0)
      throw PoolError(PoolErrc::bad_argument,
                      "pmds: pool " + pool_->path() +
                          " holds no structure (never created, or its creation did not finish)");
    Trace trace(pool_->allocator(), stats_, structure);
    // The header is read before the anchor's size is known: check that much first.
    anchor_ = pool_->allocator().checked_slot<char>(reinterpret_cast<void*>(root), header_bytes,
                                                    std::string(structure) + ": the root");
    if (header()[0].load(std::memory_order_relaxed) != kind)
      throw PoolError(PoolErrc::layout_mismatch, std::string("pmds: the structure in pool ") +
                                                     pool_->path() + " is not a " + structure);
    slots_ = header()[1].load(std::memory_order_relaxed);
    if (slots_ == 0 || slots_ > max_slots || header()[2].load(std::memory_order_relaxed) != areas)
      trace.corrupt("the anchor names " + std::to_string(slots_) + " slots and " +
                    std::to_string(header()[2].load(std::memory_order_relaxed)) + " areas");
    parameter_ = header()[3].load(std::memory_order_relaxed);
    if (parameter_ > max_parameter)
      trace.corrupt("the anchor's parameter is " + std::to_string(parameter_) + " (at most " +
                    std::to_string(max_parameter) + ")");
    anchor_bytes_ = bytes_for(slots_, parameter_);
    trace.visit(anchor_, anchor_bytes_);  // the whole anchor is one slot of that size
    return trace;
  }

  // Node memory.
  void* allocate_node(std::size_t bytes) {
    if constexpr (persistent)
      return pool_->allocator().allocate(bytes);
    else
      return ::operator new (bytes, std::align_val_t{16});
  }
  void free_node(void* node) {
    if constexpr (persistent)
      pool_->allocator().free(node);
    else
      ::operator delete (node, std::align_val_t{16});
  }

  Word* header() const { return reinterpret_cast<Word*>(anchor_); }
  char* anchor() const { return anchor_; }
  std::uint64_t parameter() const { return parameter_; }
  pm::Pool& pool() const { return *pool_; }

 private:
  pm::Pool* pool_ = nullptr;
  std::size_t slots_ = 0;
  char* anchor_ = nullptr;
  std::size_t anchor_bytes_ = 0;
  std::uint64_t parameter_ = 0;
  RecoveryStats stats_;
};

}  // namespace pmds::combining
