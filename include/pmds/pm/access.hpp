// pmds — the persistence access layer (docs/ARCHITECTURE.md §2).
//
// Every word that lives in persistent memory is read and written through this header:
//   pm::atomic<T>          the std::atomic surface, T of 1, 2, 4, 8 or 16 bytes;
//   pm::atomic_pair        two 8-byte words read one at a time, changed together by a
//                          double-word CAS (a value and its sequence number: Mirror);
//   pm::write(dst, src, n) a bulk copy of plain stores;
//   pm::read(dst, src, n)  a bulk copy of loads; pm::read_string(src, n) the same into a string;
//   pm::write_nontemporal  a bulk copy of non-temporal stores (durable at the next fence);
//   pm::flush(p)           write back the cache line holding p (clwb/clflushopt/clflush);
//   pm::fence()            sfence: earlier flushes of this thread are durable after it;
//   pm::persist(p, n)      flush every line of [p, p+n), then fence.
// flush, fence, flush_range, persist and write_nontemporal take a trailing pm::Site, defaulted
// to their caller's source location (pm/site.hpp).
// Volatile (DRAM) data uses plain std::atomic.
//
// Backends (pm/backend.hpp): hardware (std::atomic plus the instructions; pm::atomic<T> has
// std::atomic<T>'s layout and code), counting (hardware plus per-thread counters), simulated
// (every operation goes to the Px86 simulator of pm/simulator.hpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>

#include "pmds/pm/backend.hpp"
#include "pmds/pm/instructions.hpp"
#include "pmds/pm/site.hpp"

#if defined(PMDS_BACKEND_SIMULATED)
#include "pmds/pm/simulator.hpp"
#endif

namespace pmds::pm {

// ---------------------------------------------------------------------------------------------
// Counters (meaningful under the counting backend; always zero under the hardware backend).

struct Counters {
  std::uint64_t flushes = 0;  // cache-line write-backs issued
  std::uint64_t fences = 0;   // sfences issued
  std::uint64_t rmws = 0;     // locked read-modify-writes on persistent words (CAS, xchg, xadd)

  Counters operator-(const Counters& o) const {
    return {flushes - o.flushes, fences - o.fences, rmws - o.rmws};
  }
  Counters& operator+=(const Counters& o) {
    flushes += o.flushes;
    fences += o.fences;
    rmws += o.rmws;
    return *this;
  }
};

namespace detail {
// Trivially constructible and destructible, so reading it costs one TLS access and no guard.
inline thread_local Counters thread_counters;
}  // namespace detail

// This thread's counts since it started. Read it before and after the operations to measure.
inline Counters thread_counters() {
  return detail::thread_counters;
}

// What the structures' background threads (pmds::PeriodicThread: the epoch advancers) counted,
// added after each of their steps, so that a benchmark charges an advancer's flushes (InCLL's
// boundary flush) to the operations that caused them.
struct SharedCounters {
  std::atomic<std::uint64_t> flushes{0}, fences{0}, rmws{0};

  void add(const Counters& c) {
    flushes.fetch_add(c.flushes, std::memory_order_relaxed);
    fences.fetch_add(c.fences, std::memory_order_relaxed);
    rmws.fetch_add(c.rmws, std::memory_order_relaxed);
  }
  Counters read() const {
    return {flushes.load(std::memory_order_relaxed), fences.load(std::memory_order_relaxed),
            rmws.load(std::memory_order_relaxed)};
  }
};
inline SharedCounters background_counters;

// ---------------------------------------------------------------------------------------------
// Flush, fence, persist, bulk writes.

namespace detail {

inline void flush_at([[maybe_unused]] const void* p, [[maybe_unused]] Site site,
                     [[maybe_unused]] SiteKind kind) {
#if defined(PMDS_BACKEND_SIMULATED)
  sim::flush(p, detail::flush_instruction, site, kind);
#else
  if constexpr (backend == Backend::counting)  // under eADR (none) no write-back is issued
    detail::thread_counters.flushes += detail::flush_instruction != FlushInstruction::none;
  hw::flush_line(p, detail::flush_instruction);
#endif
}

inline void fence_at([[maybe_unused]] Site site, [[maybe_unused]] SiteKind kind) {
#if defined(PMDS_BACKEND_SIMULATED)
  sim::fence(site, kind);
#else
  if constexpr (backend == Backend::counting) ++detail::thread_counters.fences;
  hw::sfence();
#endif
}

inline void flush_range_at(const void* p, std::size_t n, Site site, SiteKind kind) {
  if (n == 0) return;
  auto first = reinterpret_cast<std::uintptr_t>(p) & ~(cache_line_size - 1);
  const auto last = reinterpret_cast<std::uintptr_t>(p) + n - 1;
  for (; first <= last; first += cache_line_size)
    flush_at(reinterpret_cast<const void*>(first), site, kind);
}

}  // namespace detail

// Each takes the caller's site (pm/site.hpp): a helper that persists for its callers passes its
// own Site parameter on.
inline void flush(const void* p, Site site = Site::current()) {
  detail::flush_at(p, site, SiteKind::flush);
}

inline void fence(Site site = Site::current()) {
  detail::fence_at(site, SiteKind::fence);
}

// Flushes every cache line that [p, p+n) touches (no fence).
inline void flush_range(const void* p, std::size_t n, Site site = Site::current()) {
  detail::flush_range_at(p, n, site, SiteKind::flush);
}

inline void persist(const void* p, std::size_t n, Site site = Site::current()) {
  detail::flush_range_at(p, n, site, SiteKind::persist);
  detail::fence_at(site, SiteKind::persist);
}

// A bulk copy of plain stores into persistent memory; not durable until flushed and fenced.
inline void write(void* dst, const void* src, std::size_t n) {
#if defined(PMDS_BACKEND_SIMULATED)
  sim::store(dst, src, n);
#else
  std::memcpy(dst, src, n);
#endif
}

// A bulk copy out of persistent memory (the simulator sees the loads).
inline void read(void* dst, const void* src, std::size_t n) {
#if defined(PMDS_BACKEND_SIMULATED)
  sim::load(src, dst, n);
#else
  std::memcpy(dst, src, n);
#endif
}

// pm::read of n bytes into a new string, copied once: a string made with n zeros and then read
// into writes its bytes twice (GCC 12 kept both passes in hash-bytes/transient's get: a memset
// beside the memcpy, 4% of its time).
inline std::string read_string(const void* src, std::size_t n) {
#if defined(PMDS_BACKEND_SIMULATED)
  std::string out(n, '\0');
  read(out.data(), src, n);
  return out;
#else
  return std::string(static_cast<const char*>(src), n);  // read() is a memcpy
#endif
}

// A bulk copy of non-temporal stores: durable after this thread's next fence (or locked RMW).
// The hardware backend uses libpmem's tuned non-temporal memcpy (no drain: the caller fences).
inline void write_nontemporal(void* dst, const void* src, std::size_t n,
                              [[maybe_unused]] Site site = Site::current()) {
#if defined(PMDS_BACKEND_SIMULATED)
  sim::store_nontemporal(dst, src, n, site);
#else
  if constexpr (backend == Backend::counting)
    detail::thread_counters.flushes += (n + cache_line_size - 1) / cache_line_size;
  pmem_memcpy(dst, src, n, PMEM_F_MEM_NONTEMPORAL | PMEM_F_MEM_NODRAIN);
#endif
}

// ---------------------------------------------------------------------------------------------
// pm::atomic<T>

template <class T>
concept PersistentWord = std::is_trivially_copyable_v<T> &&
    (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16);

namespace detail {

inline void count_rmw() {
  if constexpr (backend == Backend::counting) ++thread_counters.rmws;
}

// 16-byte words: a double-word CAS (lock cmpxchg16b, needs -mcx16; the pmds CMake target sets
// it). GCC inlines the __sync builtin for 16 bytes, while std::atomic<16 bytes> goes through
// libatomic, and ThreadSanitizer understands the builtin.
using u128 = unsigned __int128;

inline u128 cas16(u128* p, u128 expected, u128 desired) {
  return __sync_val_compare_and_swap(p, expected, desired);
}

template <class T>
u128 to_u128(const T& v) {
  u128 r;
  std::memcpy(&r, &v, 16);
  return r;
}
template <class T>
T from_u128(u128 v) {
  T r;
  std::memcpy(&r, &v, 16);
  return r;
}

}  // namespace detail

#if !defined(PMDS_BACKEND_SIMULATED)

// Hardware and counting backends, T of up to 8 bytes: exactly std::atomic<T>.
template <PersistentWord T>
class alignas(sizeof(T)) atomic {
 public:
  atomic() noexcept = default;
  constexpr atomic(T v) noexcept : v_(v) {}  // NOLINT: implicit like std::atomic
  atomic(const atomic&) = delete;
  atomic& operator=(const atomic&) = delete;

  T load(std::memory_order o = std::memory_order_seq_cst) const noexcept { return v_.load(o); }
  void store(T v, std::memory_order o = std::memory_order_seq_cst) noexcept { v_.store(v, o); }
  operator T() const noexcept { return load(); }  // NOLINT
  T operator=(T v) noexcept {
    store(v);
    return v;
  }
  T exchange(T v, std::memory_order o = std::memory_order_seq_cst) noexcept {
    detail::count_rmw();
    return v_.exchange(v, o);
  }
  bool compare_exchange_strong(T& expected, T desired,
                               std::memory_order o = std::memory_order_seq_cst) noexcept {
    detail::count_rmw();
    return v_.compare_exchange_strong(expected, desired, o);
  }
  bool compare_exchange_strong(T& expected, T desired, std::memory_order success,
                               std::memory_order failure) noexcept {
    detail::count_rmw();
    return v_.compare_exchange_strong(expected, desired, success, failure);
  }
  bool compare_exchange_weak(T& expected, T desired,
                             std::memory_order o = std::memory_order_seq_cst) noexcept {
    detail::count_rmw();
    return v_.compare_exchange_weak(expected, desired, o);
  }
  bool compare_exchange_weak(T& expected, T desired, std::memory_order success,
                             std::memory_order failure) noexcept {
    detail::count_rmw();
    return v_.compare_exchange_weak(expected, desired, success, failure);
  }
  template <class U = T>
  requires(std::is_integral_v<U> || std::is_pointer_v<U>) T
      fetch_add(std::conditional_t<std::is_pointer_v<U>, std::ptrdiff_t, U> d,
                std::memory_order o = std::memory_order_seq_cst)
  noexcept {
    detail::count_rmw();
    return v_.fetch_add(d, o);
  }
  template <class U = T>
  requires(std::is_integral_v<U> || std::is_pointer_v<U>) T
      fetch_sub(std::conditional_t<std::is_pointer_v<U>, std::ptrdiff_t, U> d,
                std::memory_order o = std::memory_order_seq_cst)
  noexcept {
    detail::count_rmw();
    return v_.fetch_sub(d, o);
  }

  static constexpr bool is_always_lock_free = true;

 private:
  std::atomic<T> v_;
};

// Hardware and counting backends, 16-byte T: cmpxchg16b. Loads are a CAS of the word with
// itself (the only architecturally atomic 16-byte read on every x86-64), so they write the line.
template <PersistentWord T>
requires(sizeof(T) == 16) class alignas(16) atomic<T> {
 public:
  atomic() noexcept = default;
  constexpr atomic(T v) noexcept : v_(v) {}  // NOLINT
  atomic(const atomic&) = delete;
  atomic& operator=(const atomic&) = delete;

  T load(std::memory_order = std::memory_order_seq_cst) const noexcept {
    return detail::from_u128<T>(detail::cas16(raw(), 0, 0));
  }
  void store(T v, std::memory_order o = std::memory_order_seq_cst) noexcept { exchange(v, o); }
  operator T() const noexcept { return load(); }  // NOLINT
  T operator=(T v) noexcept {
    store(v);
    return v;
  }
  T exchange(T v, std::memory_order = std::memory_order_seq_cst) noexcept {
    detail::count_rmw();
    detail::u128 seen = detail::cas16(raw(), 0, 0);
    for (;;) {
      const detail::u128 prev = detail::cas16(raw(), seen, detail::to_u128(v));
      if (prev == seen) return detail::from_u128<T>(prev);
      seen = prev;
    }
  }
  bool compare_exchange_strong(T& expected, T desired,
                               std::memory_order = std::memory_order_seq_cst,
                               std::memory_order = std::memory_order_seq_cst) noexcept {
    detail::count_rmw();
    const detail::u128 exp = detail::to_u128(expected);
    const detail::u128 prev = detail::cas16(raw(), exp, detail::to_u128(desired));
    if (prev == exp) return true;
    expected = detail::from_u128<T>(prev);
    return false;
  }
  bool compare_exchange_weak(T& expected, T desired,
                             std::memory_order o = std::memory_order_seq_cst,
                             std::memory_order f = std::memory_order_seq_cst) noexcept {
    return compare_exchange_strong(expected, desired, o, f);
  }

  static constexpr bool is_always_lock_free = true;

 private:
  detail::u128* raw() const noexcept { return const_cast<detail::u128*>(&v_.raw); }
  union Storage {
    constexpr Storage() : raw(0) {}
    constexpr Storage(T v) : value(v) {}  // NOLINT
    T value;
    detail::u128 raw;
  } v_;
};

#else  // PMDS_BACKEND_SIMULATED

// Simulated backend: the value lives in plain memory and every access goes to the simulator,
// which performs it under its global lock and records it (docs/ARCHITECTURE.md §3).
template <PersistentWord T>
class alignas(sizeof(T)) atomic {
 public:
  atomic() noexcept = default;
  constexpr atomic(T v) noexcept : v_(v) {}  // NOLINT
  atomic(const atomic&) = delete;
  atomic& operator=(const atomic&) = delete;

  T load(std::memory_order = std::memory_order_seq_cst) const noexcept {
    T r;
    sim::load(&v_, &r, sizeof(T));
    return r;
  }
  void store(T v, std::memory_order = std::memory_order_seq_cst) noexcept {
    sim::store(&v_, &v, sizeof(T));
  }
  operator T() const noexcept { return load(); }  // NOLINT
  T operator=(T v) noexcept {
    store(v);
    return v;
  }
  T exchange(T v, std::memory_order = std::memory_order_seq_cst) noexcept {
    T old;
    sim::rmw(&v_, sizeof(T), [&](void* bytes) {
      std::memcpy(&old, bytes, sizeof(T));
      std::memcpy(bytes, &v, sizeof(T));
      return true;
    });
    return old;
  }
  bool compare_exchange_strong(T& expected, T desired,
                               std::memory_order = std::memory_order_seq_cst,
                               std::memory_order = std::memory_order_seq_cst) noexcept {
    bool ok = false;
    sim::rmw(&v_, sizeof(T), [&](void* bytes) {
      if (std::memcmp(bytes, &expected, sizeof(T)) == 0) {
        std::memcpy(bytes, &desired, sizeof(T));
        ok = true;
        return true;
      }
      std::memcpy(&expected, bytes, sizeof(T));
      return false;
    });
    return ok;
  }
  bool compare_exchange_weak(T& expected, T desired,
                             std::memory_order o = std::memory_order_seq_cst,
                             std::memory_order f = std::memory_order_seq_cst) noexcept {
    return compare_exchange_strong(expected, desired, o, f);
  }
  template <class U = T>
  requires(std::is_integral_v<U> || std::is_pointer_v<U>) T
      fetch_add(std::conditional_t<std::is_pointer_v<U>, std::ptrdiff_t, U> d,
                std::memory_order = std::memory_order_seq_cst)
  noexcept {
    T old;
    sim::rmw(&v_, sizeof(T), [&](void* bytes) {
      std::memcpy(&old, bytes, sizeof(T));
      T updated = old + d;
      std::memcpy(bytes, &updated, sizeof(T));
      return true;
    });
    return old;
  }
  template <class U = T>
  requires(std::is_integral_v<U> || std::is_pointer_v<U>) T
      fetch_sub(std::conditional_t<std::is_pointer_v<U>, std::ptrdiff_t, U> d,
                std::memory_order o = std::memory_order_seq_cst)
  noexcept { return fetch_add(-d, o); }

  static constexpr bool is_always_lock_free = false;

 private:
  T v_;
};

#endif

// ---------------------------------------------------------------------------------------------
// pm::atomic_pair: two adjacent 8-byte words, 16-byte aligned. Each is read on its own with an
// ordinary atomic load, and both change together through a double-word CAS (cmpxchg16b) — the
// shape of Mirror's value + sequence number (§4.1 of its paper, Fig. 4 reads sequence, value,
// sequence). A 16-byte atomic load exists only as a CAS, which writes the line; reading the
// halves keeps a load a load.

struct WordPair {
  std::uint64_t first;
  std::uint64_t second;
  friend bool operator==(const WordPair&, const WordPair&) = default;
};

class alignas(16) atomic_pair {
 public:
  atomic_pair() noexcept = default;
  atomic_pair(const atomic_pair&) = delete;
  atomic_pair& operator=(const atomic_pair&) = delete;

  std::uint64_t load_first() const noexcept { return load_word(0); }
  std::uint64_t load_second() const noexcept { return load_word(1); }

  // Strong double-word CAS; on failure `expected` receives both current words.
  bool compare_exchange(WordPair& expected, WordPair desired) noexcept {
#if defined(PMDS_BACKEND_SIMULATED)
    bool ok = false;
    sim::rmw(words_, 16, [&](void* bytes) {
      if (std::memcmp(bytes, &expected, 16) == 0) {
        std::memcpy(bytes, &desired, 16);
        ok = true;
        return true;
      }
      std::memcpy(&expected, bytes, 16);
      return false;
    });
    return ok;
#else
    detail::count_rmw();
    const detail::u128 exp = detail::to_u128(expected);
    const detail::u128 prev = detail::cas16(raw(), exp, detail::to_u128(desired));
    if (prev == exp) return true;
    expected = detail::from_u128<WordPair>(prev);
    return false;
#endif
  }

  // Both words of an object no other thread can reach yet: plain stores.
  void init(WordPair v) noexcept {
#if defined(PMDS_BACKEND_SIMULATED)
    sim::store(words_, &v, 16);
#else
    __atomic_store_n(&words_[0], v.first, __ATOMIC_RELAXED);
    __atomic_store_n(&words_[1], v.second, __ATOMIC_RELAXED);
#endif
  }

  // Both words while no other thread runs (recovery, tests).
  WordPair peek() const noexcept {
    return {load_word(0), load_word(1)};
  }

 private:
  std::uint64_t load_word(int i) const noexcept {
#if defined(PMDS_BACKEND_SIMULATED)
    std::uint64_t r;
    sim::load(&words_[i], &r, 8);
    return r;
#else
    return __atomic_load_n(&words_[i], __ATOMIC_SEQ_CST);
#endif
  }
#if !defined(PMDS_BACKEND_SIMULATED)
  detail::u128* raw() noexcept {
    return reinterpret_cast<detail::u128*>(words_);
  }
#endif
  std::uint64_t words_[2] = {0, 0};
};
static_assert(sizeof(atomic_pair) == 16 && alignof(atomic_pair) == 16);

// ---------------------------------------------------------------------------------------------
// A mutex for a critical section that makes persistent accesses (the pool's growth). Under the
// simulated backend the crash lab's scheduler runs one thread at a time and passes the turn only
// at access-layer operations: a std::mutex waiter would block outside its sight, with the turn,
// while the holder waits for it (crashlab/scheduler.hpp steals the turn after seconds, and the
// run no longer replays). There a waiter spins through sim::schedule_point() instead; every
// other backend is a std::mutex.
#if defined(PMDS_BACKEND_SIMULATED)
class Mutex {
 public:
  void lock() noexcept {
    while (locked_.exchange(true, std::memory_order_acquire)) sim::schedule_point();
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};
#else
using Mutex = std::mutex;
#endif

}  // namespace pmds::pm
