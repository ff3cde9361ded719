// pmds — Mirror's persistent atomic word, patomic<T> (§4.1 of its paper, Figures 2, 4 and 5).
//
// Every shared word of a Mirror structure exists twice: the persistent replica in the pool and
// the volatile replica in DRAM, each a value with a sequence number, changed together by a
// double-word CAS (pm::atomic_pair). The object a structure holds is the volatile replica; the
// persistent one is at a fixed distance below it (pm::twin_offset: the pool's volatile twin,
// mirror/policy.hpp), so a word needs no handle to its pool (§4.3.1's address translation).
//
//   load()   reads the volatile replica only (Fig. 5): never a flush, and DRAM speed.
//   compare_exchange(expected, desired)   Figure 4: read both replicas consistently (sequence,
//            value, sequence); if the persistent replica is one ahead, help: flush and fence it,
//            then copy it into the volatile replica, and retry; if the replicas' sequences
//            differ otherwise, retry; a persistent value other than `expected` fails the CAS;
//            else DWCAS the persistent replica to {desired, sequence + 1}, flush, fence, and only
//            then DWCAS the volatile replica (the linearization point) — a value is durable
//            before any thread can load it (§5). A failed persistent DWCAS whose winner holds the
//            expected value (only the sequence moved) retries, as a strong CAS must; otherwise
//            the winner (durable: flushed and fenced above) is copied into the volatile replica
//            and the CAS fails with it.
//   store(v) the CAS in a loop (§4.1.2).
//   init(v)  a word of a node no other thread can reach: the volatile replica only, sequence 0;
//            Memory::publish copies the whole node into the pool before it is linked (§4.3.2).
//
// Invariant (Lemmas 5.3-5.5): the volatile sequence equals the persistent one or is one behind,
// and equal sequences carry equal values. Immutable fields (keys, values, heights: a policy's
// immutable<T>) need no sequence number (§4.1.1): MirrorPolicy makes them algo::PublishedWord<T>,
// the volatile replica's 8-byte word alone, copied to the pool with its node by Memory::publish.
//
// The persistence sites (pm/site.hpp) are this file's own lines, not the caller's: each is a
// rule of Figure 4 that the crash lab's mutation run removes in turn.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "pmds/algo/policy.hpp"
#include "pmds/faults.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/pool.hpp"

namespace pmds::mirror {

// Faults: the crash lab's planted bugs (faults.hpp, Mirror's); NoFaults compiles them away.
template <class T, FaultPolicy Faults = NoFaults>
requires(std::is_trivially_copyable_v<T> && sizeof(T) <= 8) class patomic {
 public:
  patomic() noexcept = default;
  patomic(const patomic&) = delete;
  patomic& operator=(const patomic&) = delete;

  T load() const noexcept { return value_of(volatile_.load_first()); }
  T peek() const noexcept { return value_of(volatile_.peek().first); }
  void init(T v) noexcept { volatile_.init({bits_of(v), 0}); }

  void store(T v, algo::Access a = algo::Access::plain) noexcept {
    T expected = load();
    while (!compare_exchange(expected, v, a)) {
    }
  }

  bool compare_exchange(T& expected, T desired, algo::Access = algo::Access::plain) noexcept {
    pm::atomic_pair& persistent = persistent_replica();
    const std::uint64_t want = bits_of(expected);
    for (;;) {
      // Fig. 4 lines 5-16: a value with its own sequence number, on each replica.
      const std::uint64_t p_seq = persistent.load_second();
      const std::uint64_t p_val = persistent.load_first();
      if (persistent.load_second() != p_seq) continue;
      const std::uint64_t v_seq = volatile_.load_second();
      const std::uint64_t v_val = volatile_.load_first();
      if (volatile_.load_second() != v_seq) continue;

      if (p_seq == v_seq + 1) {  // lines 19-25: finish another thread's write first
        if constexpr (Faults::planted != Fault::helper_skips_flush) {
          pm::flush(&persistent);
          // Mutant survives: the volatile DWCAS below is a locked instruction and orders the
          // flush on x86; kept for weaker models, as the writer's fence below is.
          pm::fence();
        }
        pm::WordPair before{v_val, v_seq};
        volatile_.compare_exchange(before, {p_val, p_seq});
        continue;
      }
      if (p_seq != v_seq) continue;  // line 29: a newer write is under way

      if (p_val != want) {  // lines 32-35
        expected = value_of(p_val);
        return false;
      }
      // Lines 38-49: the persistent replica first, durable, then the volatile one.
      pm::WordPair before{p_val, p_seq};
      const pm::WordPair after{bits_of(desired), p_seq + 1};
      if constexpr (Faults::planted == Fault::volatile_first) {
        pm::WordPair seen{v_val, v_seq};
        if (!volatile_.compare_exchange(seen, after)) continue;
      }
      const bool won = persistent.compare_exchange(before, after);
      if constexpr (Faults::planted == Fault::no_flush_after_cas) {
        if (won) {
          pm::WordPair seen{p_val, p_seq};
          volatile_.compare_exchange(seen, after);
          return true;
        }
      }
      pm::flush(&persistent);
      // Mutant survives: on x86 the volatile DWCAS that follows is a locked instruction and
      // orders the flush by itself (Mirror §6.1 says as much); dropping the flushes this fence
      // completes is caught. Kept as Figure 4 has it: on a weaker model (ARM: DC CVAP then DSB)
      // nothing else orders the write-back before the value becomes visible.
      pm::fence();
      if (won) {
        pm::WordPair seen{p_val, p_seq};
        volatile_.compare_exchange(seen, after);  // fails only if a helper copied it first
        return true;
      }
      if (before.first == want) continue;  // line 46: only the sequence moved
      pm::WordPair seen{v_val, v_seq};
      volatile_.compare_exchange(seen, before);  // line 47: help the winner, now durable
      expected = value_of(before.first);
      return false;
    }
  }

 private:
  static std::uint64_t bits_of(T v) noexcept {
    std::uint64_t b = 0;
    std::memcpy(&b, &v, sizeof(T));
    return b;
  }
  static T value_of(std::uint64_t b) noexcept {
    T v;
    std::memcpy(&v, &b, sizeof(T));
    return v;
  }
  pm::atomic_pair& persistent_replica() const noexcept {
    return *reinterpret_cast<pm::atomic_pair*>(reinterpret_cast<std::uintptr_t>(&volatile_) -
                                               pm::twin_offset);
  }

  pm::atomic_pair volatile_;
};

}  // namespace pmds::mirror
