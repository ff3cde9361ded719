// pmds — the FliT transformation (Wei, Ben-David, Friedman, Blelloch, Petrank, "FliT: A Library
// for Simple and Efficient Persistent Algorithms", PPoPP 2022; docs/BIBLIOGRAPHY.md) as a memory
// policy: a second general transformation beside Izraelevitz's, so Mirror can be
// compared with both on the same algo/ code (registered as */flit).
//
// Izraelevitz persists after every shared load because the loaded value may not be durable yet.
// FliT persists after a load only when that can be so: every shared word has a flush counter,
// raised by a writer before its write and lowered after the write is flushed and fenced. A
// reader that sees a zero counter knows the value it read is durable (its writer lowered the
// counter only after persisting it) and skips the flush; a non-zero counter means a write is in
// flight, and the reader persists the word itself before acting on it.
//
//   store / compare_exchange   counter += 1; the write; flush + fence of the word; counter -= 1.
//                              A CAS persists even when it fails: it is a read too, and FliT
//                              treats every CAS as a persisted write.
//   load                       the read, then the counter; persist the word only if non-zero.
//   immutable<T>               a field written before its node is published (a key): a plain
//                              load, no counter (the paper's non-atomic persist<T> fields), as
//                              publish() made it durable before any thread could reach it.
//   Memory, recovery           Izraelevitz's: nodes in the pool, published (flushed) before they
//                              are linked, recovered by the trace.
//
// Choices, and why:
//   - Hashed counters (the paper's "hashed" placement): one process-wide DRAM table indexed by
//     the word's address, so a shared word stays 8 bytes in the pool and node layouts are the
//     Izraelevitz ones; two words sharing a counter only cost extra flushes. The table is
//     volatile, as the paper's is: after a crash every counter of the new process starts at zero
//     and every word in the pool is durable (recovery reads only what survived).
//   - The fence is per write and per flushing load, not once at the end of an operation (the
//     paper's completion fence): the policy seam has no operation-end hook, and a fence at each
//     persist is the conservative reading. A load of a durable word, the common case of a
//     read-mostly workload, still costs no flush and no fence.
//   - Written by hand, not taken from the FliT library: the access layer (pm::) must see every
//     flush and fence for the crash lab's Px86 simulator and its mutation sites.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "pmds/algo/policy.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/pm/access.hpp"

namespace pmds::algo {

namespace detail {

// FliT's flush counters, hashed by word address. 2^16 counters of 4 bytes (256 KiB): enough that
// the words written at once by a few dozen threads rarely share one.
class FlitCounters {
 public:
  static std::atomic<std::uint32_t>& of(const void* word) noexcept {
    // Words are 8-byte aligned: drop those bits, then a multiplicative hash spreads neighbouring
    // words (the fields of one node) over different cache lines of the table.
    const std::uint64_t w = reinterpret_cast<std::uintptr_t>(word) >> 3;
    return table()[(w * 0x9E3779B97F4A7C15ull) >> (64 - bits)];
  }

 private:
  static constexpr unsigned bits = 16;
  static std::array<std::atomic<std::uint32_t>, std::size_t{1} << bits>& table() noexcept {
    static std::array<std::atomic<std::uint32_t>, std::size_t{1} << bits> counters{};
    return counters;
  }
};

}  // namespace detail

struct FlitPolicy {
  static constexpr bool durable = true;
  static constexpr Criterion criterion = Criterion::durable;
  static constexpr const char* name = "flit";
  static constexpr Fault planted = Fault::none;

  template <class T>
  class shared {
   public:
    // The counter is read after the value (both seq_cst): a reader that sees a new value also
    // sees its writer's raised counter unless that writer already persisted it.
    T load(pm::Site site = pm::Site::current()) const noexcept {
      const T v = word_.load(std::memory_order_seq_cst);
      if (detail::FlitCounters::of(&word_).load(std::memory_order_seq_cst) != 0)
        pm::persist(&word_, sizeof word_, site);
      return v;
    }
    T peek() const noexcept { return word_.load(std::memory_order_relaxed); }

    void store(T v, Access = Access::plain, pm::Site site = pm::Site::current()) noexcept {
      std::atomic<std::uint32_t>& counter = detail::FlitCounters::of(&word_);
      counter.fetch_add(1, std::memory_order_seq_cst);
      word_.store(v, std::memory_order_seq_cst);
      pm::persist(&word_, sizeof word_, site);
      counter.fetch_sub(1, std::memory_order_seq_cst);
    }

    bool compare_exchange(T& expected, T desired, Access = Access::plain,
                          pm::Site site = pm::Site::current()) noexcept {
      std::atomic<std::uint32_t>& counter = detail::FlitCounters::of(&word_);
      counter.fetch_add(1, std::memory_order_seq_cst);
      const bool ok = word_.compare_exchange_strong(expected, desired, std::memory_order_seq_cst);
      pm::persist(&word_, sizeof word_, site);
      counter.fetch_sub(1, std::memory_order_seq_cst);
      return ok;
    }

    // A node being built: Memory::publish flushes it before it is linked.
    void init(T v) noexcept { word_.store(v, std::memory_order_relaxed); }

   private:
    pm::atomic<T> word_;
  };

  template <class T>
  using immutable = PublishedWord<T>;

  // Nodes, publication and the recovery trace are Izraelevitz's.
  using Recovery = IzraelevitzPolicy<>::Recovery;
  using Memory = IzraelevitzPolicy<>::Memory;
};

using flit = FlitPolicy;

static_assert(DurableMemoryPolicy<flit>);

}  // namespace pmds::algo
