// pmds crash lab — the workloads: per-thread operation lists drawn from a seed, for any
// registered structure kind.
//
// Small and contentious on purpose: few keys (so threads meet on the same nodes and a crash
// often cuts an operation on a key others use), mostly updates (reads cannot lose anything), and
// unique values (so the checker can tell every inserted/enqueued value apart and the search for
// a linearization stays narrow).
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "pmds/pm/pool_format.hpp"
#include "pmds/registry/descriptor.hpp"

namespace pmds::crashlab {

struct WorkloadOptions {
  std::size_t threads = 3;       // workload threads (plus the prefill, recorded as thread T)
  std::size_t ops = 30;          // operations per thread
  std::uint64_t key_range = 16;  // sets/maps: keys in [1, key_range]
  unsigned read_percent = 20;    // contains/get (sets, maps), get_min (pq), read (register)
  unsigned sync_percent = 5;     // sync(), for structures that have it
  std::size_t prefill = 0;       // 0: key_range/2 for sets and maps, 4 items otherwise
  std::uint64_t buckets = 0;     // hash tables: 0 = one per key (registry::CreateOptions)
  // The byte-string maps (the -bytes entries): bytes each key and value is written as
  // (registry::CreateOptions::key_size, value_size; registry/fixed_size_strings.hpp).
  std::size_t key_size = 8, value_size = 8;
  // The InCLL Masstrees: every recovery opens lazily, each border recovered on its first access
  // (registry::CreateOptions::lazy_recovery; InCLL §4.3). Not the workload, but how every
  // process of the run opens the pool.
  bool lazy_recovery = false;
};

// Whether the entry's recovery can open lazily (registry::CreateOptions::lazy_recovery): the
// InCLL Masstrees.
inline bool recovers_lazily_on_request(const registry::Entry& e) {
  return e.structure == "masstree" || e.structure == "masstree-bytes";
}

// The creation options the lab's processes use for a workload (every open of one pool must name
// the same key and value sizes: they are how its byte strings were written).
inline registry::CreateOptions create_options(const WorkloadOptions& w) {
  registry::CreateOptions co;
  co.key_range = w.key_range;
  co.buckets = w.buckets;
  co.key_size = w.key_size;
  co.value_size = w.value_size;
  co.lazy_recovery = w.lazy_recovery;
  return co;
}

// The chunk size of the lab's pools: 64 KiB, not the default 1 MiB: every recovery scans each
// slot of every used chunk (through the simulator, in the simulated lab, whose pages fault into
// each recovery's image), which at 1 MiB was half of the simulated lab's time (hash/soft, 300
// crashes: 12.9 s; 6.5 s at 256 KiB; 4.9 s at 64 KiB); the structures run the same code. 256
// KiB (or more) where a structure takes larger blocks: an InCLL Masstree's log segments, a
// combining heap's anchor, which holds its whole state, capacity x records words (78 KiB for
// pwfcomb in the lab).
inline std::size_t lab_chunk_size(const registry::Entry& e, const registry::CreateOptions& co) {
  const std::size_t largest = e.largest_block != nullptr ? e.largest_block(co) : 0;
  return largest > (std::size_t{64} << 10)
             ? std::max(std::size_t{256} << 10, std::bit_ceil(largest))
             : std::size_t{64} << 10;
}

// Makes co (its pool_size and chunk_size set) a pool that starts at one chunk beside a chunk
// directory with room for pool_size's, and grows on demand up to pool_size (Pool::grow).
inline void start_at_one_chunk(registry::CreateOptions& co) {
  co.max_pool_size = co.pool_size;
  co.pool_size =
      pm::format::geometry_for(co.max_pool_size, co.chunk_size).chunks_offset + co.chunk_size;
}

// The key and value sizes the lab's test suite gives a byte-string entry (Entry::byte_strings):
// keys of three slices (in masstree-bytes each 8 keys share a prefix, so layers are made) and
// values of five. Other entries keep their 8-byte keys and values.
inline WorkloadOptions with_suite_strings(const registry::Entry& e, WorkloadOptions w) {
  if (e.byte_strings) {
    w.key_size = 24;
    w.value_size = 40;
  }
  return w;
}

// The options a command line adds for non-default key and value sizes and for lazy recovery
// (replay lines).
inline std::string open_options(const WorkloadOptions& w) {
  std::string s = w.lazy_recovery ? " --lazy-recovery" : "";
  if (w.key_size == 8 && w.value_size == 8) return s;
  return s + " --key-size " + std::to_string(w.key_size) + " --value-size " +
         std::to_string(w.value_size);
}

// splitmix64: derives independent seeds from one (crash index, thread, ...).
inline std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b = 0) {
  std::uint64_t z = a + 0x9e3779b97f4a7c15ull * (b + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

struct Workload {
  std::vector<registry::Operation> prefill;  // run by one thread before the others start
  std::vector<std::vector<registry::Operation>> per_thread;
};

// The factors fetch_multiply uses: powers of two and -1, so every product is exact, and the
// exponent takes a walk of mean zero (the process lab's register carries its value across 200
// rounds of about 150 multiplications: the walk's spread is ~250 of the double's +-1022, where
// the 1.5 this set once held drifted it to infinity within 35 rounds).
inline constexpr double register_factors[] = {2.0, 0.5, 4.0, 0.25, -1.0};

inline Workload make_workload(const registry::Entry& e, const WorkloadOptions& o,
                              std::uint64_t seed) {
  using registry::OpCode;
  using registry::Operation;
  Workload w;
  std::mt19937_64 rng(mix_seed(seed, 0xabcdef));
  const auto percent = [&] { return static_cast<unsigned>(rng() % 100); };
  const std::uint64_t range = std::max<std::uint64_t>(1, o.key_range);
  const auto key = [&] { return 1 + rng() % range; };
  // Unique values: (thread + 1) << 32 | sequence number (never 0).
  const auto value = [](std::size_t thread, std::size_t i) {
    return (static_cast<std::uint64_t>(thread + 1) << 32) | (i + 1);
  };
  const bool sync = e.can_sync();
  const std::size_t prefill_thread = o.threads;

  // Prefill.
  switch (e.kind) {
    case registry::Kind::set:
    case registry::Kind::map: {
      std::vector<std::uint64_t> keys(range);
      for (std::uint64_t k = 0; k < range; ++k) keys[k] = k + 1;
      std::shuffle(keys.begin(), keys.end(), rng);
      const std::size_t n = std::min<std::size_t>(o.prefill ? o.prefill : range / 2, range);
      for (std::size_t i = 0; i < n; ++i)
        w.prefill.push_back({OpCode::insert, keys[i], value(prefill_thread, i), 1.0});
      break;
    }
    case registry::Kind::queue:
    case registry::Kind::stack:
    case registry::Kind::priority_queue: {
      const std::size_t n = o.prefill ? o.prefill : 4;
      const OpCode c = e.kind == registry::Kind::queue   ? OpCode::enqueue
                       : e.kind == registry::Kind::stack ? OpCode::push
                                                         : OpCode::pq_insert;
      for (std::size_t i = 0; i < n; ++i)
        w.prefill.push_back({c, value(prefill_thread, i), value(prefill_thread, i), 1.0});
      break;
    }
    case registry::Kind::register_object:
      w.prefill.push_back({OpCode::read, 1, 0, 1.0});  // records the initial value
      break;
  }

  w.per_thread.resize(o.threads);
  for (std::size_t t = 0; t < o.threads; ++t) {
    rng.seed(mix_seed(seed, t + 1));  // each thread's list is independent of the others'
    auto& ops = w.per_thread[t];
    for (std::size_t i = 0; i < o.ops; ++i) {
      Operation op{OpCode::contains, 1, value(t, i), 1.0};
      const unsigned p = percent();
      if (sync && p < o.sync_percent) {
        op.code = OpCode::sync;
        ops.push_back(op);
        continue;
      }
      const bool read = percent() < o.read_percent;
      const bool first_half = percent() < 50;
      switch (e.kind) {
        case registry::Kind::set:
        case registry::Kind::map:
          op.key = key();
          if (read)
            op.code = e.kind == registry::Kind::map && first_half ? OpCode::get : OpCode::contains;
          else if (e.can_update() && percent() < 25)
            op.code = OpCode::put;
          else
            op.code = first_half ? OpCode::insert : OpCode::remove;
          break;
        case registry::Kind::queue:
          op.code = first_half ? OpCode::enqueue : OpCode::dequeue;
          break;
        case registry::Kind::stack:
          op.code = first_half ? OpCode::push : OpCode::pop;
          break;
        case registry::Kind::priority_queue:
          op.key = op.value;  // unique keys
          op.code = read ? OpCode::get_min : first_half ? OpCode::pq_insert : OpCode::delete_min;
          break;
        case registry::Kind::register_object:
          op.code = read ? OpCode::read : OpCode::fetch_multiply;
          op.factor = register_factors[rng() % std::size(register_factors)];
          break;
      }
      ops.push_back(op);
    }
  }
  return w;
}

// The operations the simulated lab runs, in one thread, on a structure it has just recovered,
// before it closes the pool cleanly and opens it again: a recovered structure must work on
// (Zuriel et al. §5: nodes reuse the slots recovery freed). Mostly insertions of new keys or items,
// enough of them to take every slot the workload used, so they reach the recycled slots the
// allocator hands out first — among them the slots the crash left half-written; every fourth
// operation removes an element again. A map that can replace puts a workload key every fourth
// operation too: a key recovery found is replaced, and a replacement must outrank what recovery
// kept (the SOFT string maps number a key's versions; a renumbering from 0 lost to the
// recovered version at the clean reopen and went unseen while the continuation wrote new keys
// only).
inline std::size_t continuation_length(const WorkloadOptions& o) {
  const std::size_t prefill = o.prefill ? o.prefill : std::max<std::size_t>(o.key_range / 2, 4);
  return o.threads * o.ops + prefill + 8;
}

inline std::vector<registry::Operation> make_continuation(const registry::Entry& e,
                                                          std::uint64_t key_range, std::size_t n) {
  using registry::OpCode;
  std::vector<registry::Operation> ops;
  for (std::size_t i = 0; i < n; ++i) {
    // Keys above the workload's range, values unlike any workload value (thread number 0xffff).
    const std::uint64_t value = (std::uint64_t{0xffff} << 32) | (i + 1);
    const std::uint64_t key = key_range + 1 + i;
    const bool take = i % 4 == 3;
    registry::Operation op{OpCode::insert, key, value, 1.0};
    switch (e.kind) {
      case registry::Kind::set:
      case registry::Kind::map:
        if (take)
          op = {OpCode::remove, key - 2, 0, 1.0};  // inserted two operations ago
        else if (i % 4 == 1 && e.can_update())
          op = {OpCode::put, 1 + (i / 4) % std::max<std::uint64_t>(1, key_range), value, 1.0};
        break;
      case registry::Kind::queue:
        op.code = take ? OpCode::dequeue : OpCode::enqueue;
        break;
      case registry::Kind::stack:
        op.code = take ? OpCode::pop : OpCode::push;
        break;
      case registry::Kind::priority_queue:
        op.key = value;  // unique keys
        op.code = take ? OpCode::delete_min : OpCode::pq_insert;
        break;
      case registry::Kind::register_object:
        op.code = take ? OpCode::read : OpCode::fetch_multiply;
        op.factor = register_factors[i % std::size(register_factors)];
        break;
    }
    ops.push_back(op);
  }
  return ops;
}

// The operation a queue, stack or priority queue is read with (registry's contents_of: taken
// until a take finds nothing); nullopt for a structure reading leaves as it was.
inline std::optional<registry::OpCode> reading_take(const registry::Entry& e) {
  switch (e.kind) {
    case registry::Kind::queue:
      return registry::OpCode::dequeue;
    case registry::Kind::stack:
      return registry::OpCode::pop;
    case registry::Kind::priority_queue:
      return registry::OpCode::delete_min;
    default:
      return std::nullopt;
  }
}

// What a structure holds after the lab read its contents: a queue, stack or priority queue is
// drained by reading it; sets, maps and registers keep what was read.
inline std::vector<registry::Item> contents_after_reading(const registry::Entry& e,
                                                          std::vector<registry::Item> read) {
  const bool drained = e.kind == registry::Kind::queue || e.kind == registry::Kind::stack ||
                       e.kind == registry::Kind::priority_queue;
  if (drained) read.clear();
  return read;
}

}  // namespace pmds::crashlab
