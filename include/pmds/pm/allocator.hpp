// pmds — the persistent chunk allocator of a pool (Zuriel et al. §5 durable areas, nbMontage's heap
// scan, Fatourou et al.'s per-thread chunks).
//
// The pool after its header is carved into chunks (1 MiB by default; 1, 2 or 4 MiB). A persistent
// chunk directory holds one 8-byte word per chunk: free, or used with a slot size and the id of
// the thread that claimed it (pool_format.hpp). A chunk is claimed by ONE CAS of its word,
// persisted before any slot of it is handed out, so after any crash the directory names every
// chunk that may hold a durable slot: recovery can enumerate every slot that was ever allocated.
//
// What is persistent: only the directory. Slot liveness is NOT persisted by the allocator (that
// would cost a fence per allocation, and Zuriel et al. and nbMontage define liveness by the
// structure's own validity bits / epochs): after a crash, recover(is_live) scans every slot of
// every used chunk, asks the structure, and puts every non-live slot in the free lists.
//
// What is volatile: the free lists. Each thread (pmds::thread_id()) has, per slot size, a list of
// free runs (consecutive slots) and the rest of the chunk it claimed last; free() pushes to the
// calling thread's list. allocate() takes from that list, else from the rest of its chunk
// (consecutive addresses, Fatourou et al.'s principle 3), else a batch from a per-slot-size shared
// list, else it claims a new chunk. A thread whose list grows past two batches (a batch: 64
// slots or 64 KiB) keeps one batch and hands the rest to the shared list (under a mutex: the
// slow path). So slots freed by
// one thread (a queue's consumer) are reused by another (its producer) instead of leaking
// chunks; at most one partly used chunk per thread and slot size is not shared. Recovery puts
// every free slot on the shared lists, the recycled ones (a non-zero byte in their first line:
// once allocated) where they are taken first, the never-used ones after: a restarted structure
// stays compact, and the slots a crash left half-written are reused first, where a structure's
// rule for reusing them (Zuriel et al. §5's validity bits) is exercised — the crash lab's check
// after recovery relies on this order to reach them.
// The free lists hold pointers in DRAM; the allocator never writes a slot's bytes, so a freed
// slot keeps whatever validity bits the structure left in it.
//
// Chunks are never released: a chunk claimed for a slot size keeps that size for the pool's
// lifetime, and recovery returns its free slots to the free lists even when all are free. A pool
// holds one structure, whose node sizes do not change, so this loses little; and it keeps every
// chunk's bytes interpretable at its slot size: a stale node written at another slot size can
// never sit at a slot boundary where is_live() would mistake it for a live one. Never-allocated
// slots read as zero bytes (the pool file is zero-filled at create), so is_live() must return
// false for an all-zero slot.
//
// Threads: allocate() and free() from any number of threads at once; recover(), free_slots()
// only when no other thread uses the allocator (quiescent).
//
// Growth (a pool opened with a limit above its size, pool.hpp): when no chunk is free, the thread
// that finds none takes the growth mutex and asks the pool to grow the file (Pool::grow, which
// makes the new chunks durable and known in the header before it returns); only then does the
// chunk count, and with it every scan, reach the new chunks. A thread that needs a chunk during
// a growth waits on the mutex for that growth; threads that allocate from their free lists or
// their chunk do not stop. The directory has a word for every chunk up to the pool's capacity,
// zero (free) until the pool grows that far.
//
// Growth ahead of need (not on the simulated backend, whose runs must be a function of their
// seed): a claim that leaves at most an eighth of the chunks unclaimed starts the next growth on
// a thread of its own, so that the thread that would have found no chunk finds the growth done,
// or waits only for its rest. A growth's cost is mostly the file system's allocation of the
// step (tmpfs: about 0.3 s per GiB, paid by the insert that found the pool full: a 318 ms
// insert in a 4 GiB fill of hash-bytes/soft, results/growth/). An eighth is time enough here: a
// step (the pool's size, at most 1 GiB) took 0.3 s where one thread of hash-bytes/soft fills an
// eighth of a 2 GiB pool in about 3 s; and it grows the file only a little before it is needed. A
// failure there (a full disk, the limit) is left for the claim that finds no chunk, which reports
// it as before. close() waits for a growth under way.
//
// Planted bug for the crash lab (pm/planted_bugs.hpp, PlantedPoolBug::directory_not_persisted):
// the persist of a claimed chunk's directory word dropped, so a slot can be durably live in a
// chunk that a crash leaves free. Simulated backend only.
//
// allocate() returns a slot's bytes as they are: zero for a never-used slot, or whatever the
// structure left in it when it was freed (Zuriel et al. §5: the structure, not the allocator, puts
// a fresh node in its "invalid" state before initialising it).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "pmds/error.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/planted_bugs.hpp"
#include "pmds/pm/pool_format.hpp"
#include "pmds/thread_registry.hpp"

namespace pmds::pm {

class Pool;

// What recover() found.
struct AllocatorRecoveryStats {
  std::size_t used_chunks = 0;
  std::size_t live_slots = 0;
  std::size_t free_slots = 0;
};

class ChunkAllocator {
 public:
  static constexpr std::size_t slot_alignment = format::slot_alignment;
  static constexpr std::size_t max_slot_sizes = format::max_slot_sizes;

  // The slot size an allocation of n bytes gets: n rounded up to 16 (at least 16).
  static constexpr std::size_t slot_size_for(std::size_t n) {
    return n == 0 ? slot_alignment : (n + slot_alignment - 1) / slot_alignment * slot_alignment;
  }

  // The slot size for a block of n bytes among blocks of any mix of sizes (byte strings): whole
  // cache lines up to 512 bytes, then four sizes per doubling (640, 768, 896, 1024, 1280, ...).
  // Blocks up to 8 KiB then need at most 24 slot sizes, within max_slot_sizes, and a block
  // wastes at most a fifth of itself.
  static std::size_t block_size(std::size_t n) {
    n = (n + cache_line_size - 1) / cache_line_size * cache_line_size;
    if (n <= 512) return n;
    const std::size_t step = std::bit_floor(n - 1) / 4;
    return (n + step - 1) / step * step;
  }

  ChunkAllocator(const ChunkAllocator&) = delete;
  ChunkAllocator& operator=(const ChunkAllocator&) = delete;
  ~ChunkAllocator() { finish_growth(); }

  // Waits for a growth ahead of need under way (the header), if any. Pool::close() calls it
  // before it writes the pool back and marks it clean.
  void finish_growth() {
    std::lock_guard l(ahead_mutex_);
    if (ahead_thread_.joinable()) ahead_thread_.join();
  }

  // A slot of slot_size_for(n) bytes, from this thread's free list, else the rest of this
  // thread's current chunk of that size, else a batch from the shared list, else a newly claimed
  // chunk (one CAS + persist on the directory). Throws PoolFull when no chunk is free (the pool is
  // unchanged), PoolError bad_argument when n exceeds the chunk size or the pool already has 32
  // other slot sizes.
  void* allocate(std::size_t n) {
    const std::size_t size = slot_size_for(n);
    const std::size_t cls = class_of(size);
    ClassState& c = this_thread().classes[cls];
    if (c.free.empty()) {
      if (c.bump.remaining == 0 && !take_shared(c, cls, size))
        c.bump = Run{claim_chunk(cls, size), slots_per_chunk(size)};
      if (c.free.empty()) {  // consecutive slots of its chunk (Fatourou et al.'s principle 3)
        void* p = c.bump.next;
        c.bump.next += size;
        --c.bump.remaining;
        return p;
      }
    }
    Run& r = c.free.back();
    void* p = r.next;
    r.next += size;
    if (--r.remaining == 0) c.free.pop_back();
    --c.free_count;
    // The slot this thread's next allocation of this size will take, prefetched for writing: a
    // freed slot was reset and written back (a write-back may evict the line), so the caller's
    // first stores to it would each miss.
    if (!c.free.empty()) __builtin_prefetch(c.free.back().next, 1);
    return p;
  }

  // Returns a slot to the calling thread's free list: immediately reusable (callers defer with
  // reclamation). Throws PoolError bad_argument for a pointer that is not a slot of this pool.
  void free(void* slot) {
    const std::size_t cls = class_of_slot(slot);
    const std::size_t size = class_size_[cls].load(std::memory_order_relaxed);
    auto* p = static_cast<char*>(slot);
    ClassState& c = this_thread().classes[cls];
    // Merge with the newest run when adjacent: keeps runs (and later allocations) consecutive.
    if (!c.free.empty()) {
      Run& r = c.free.back();
      if (p + size == r.next) {
        r.next = p;
        ++r.remaining;
      } else if (p == r.next + r.remaining * size) {
        ++r.remaining;
      } else {
        c.free.push_back(Run{p, 1});
      }
    } else {
      c.free.push_back(Run{p, 1});
    }
    if (++c.free_count > 2 * batch_slots(size)) donate(c, cls, size);
  }

  // Quiescent (no other thread uses the allocator): rebuilds every free list from the pool.
  // Scans every slot of every used chunk and asks is_live(void* slot, std::size_t slot_size);
  // every slot it rejects is free afterwards, every slot it accepts is not on any free list.
  // Needs no flush (it writes nothing persistent); safe to run again after a crash during it.
  // Call it once after Pool::open before allocating, or the free slots of the chunks used
  // before stay unused (never handed out twice: only new chunks are claimed).
  template <class IsLive>
  AllocatorRecoveryStats recover(IsLive&& is_live) {
    reset_volatile_state();
    const AllocatorRecoveryStats stats = recover_chunks(used_chunk_indices(), is_live);
    used_chunks_.store(stats.used_chunks, std::memory_order_relaxed);
    return stats;
  }

  // The chunks in use now, by index: for recover_chunks().
  std::vector<std::size_t> used_chunk_indices() const {
    std::vector<std::size_t> used;
    for (std::size_t i = 0; i < chunk_count(); ++i)
      if (format::chunk_word::is_used(directory_[i].load())) used.push_back(i);
    return used;
  }

  // recover() in two steps, for a structure that learns which slots are live only while it
  // already runs (InCLL §4.3's lazy recovery of byte strings): after Pool::open it does not
  // call recover(), so allocate() hands out only slots of chunks claimed since and slots freed
  // since (the slots of the chunks used before are withheld, neither live nor free); once it
  // knows, it calls recover_chunks() with the chunks used at open (used_chunk_indices() then),
  // while other threads allocate and free: their slots is_live rejects join the shared lists.
  // A slot freed in between (so handed out again) must be one is_live accepts. Once per open.
  // It scans every slot of the used chunks `chunks` (ascending indices), asks is_live, and puts
  // the rest on the shared lists: the recycled ones (ever_used) where they are taken first,
  // lowest address first, the never-used ones after. Each list is extended under its mutex.
  template <class IsLive>
  AllocatorRecoveryStats recover_chunks(const std::vector<std::size_t>& chunks, IsLive&& is_live) {
    AllocatorRecoveryStats stats;
    std::vector<std::vector<Run>> never_used(max_slot_sizes), recycled(max_slot_sizes);
    for (const std::size_t i : chunks) {
      const std::uint64_t w = directory_[i].load();
      ++stats.used_chunks;
      const std::size_t size = format::chunk_word::slot_size(w);
      const std::size_t cls = class_of(size);
      chunk_class_[i].store(static_cast<std::uint8_t>(cls), std::memory_order_relaxed);
      char* chunk = chunk_begin(i);
      const std::size_t n = slots_per_chunk(size);
      FileData in_file(file_, chunks_offset_ + (i << chunk_shift_));
      for (std::size_t k = 0; k < n; ++k) {
        char* slot = chunk + k * size;
        if (is_live(static_cast<void*>(slot), size)) {
          ++stats.live_slots;
          continue;
        }
        ++stats.free_slots;
        const bool used =
            in_file.holds_data(k * size, std::min(size, ever_used_bytes)) && ever_used(slot, size);
        std::vector<Run>& runs = used ? recycled[cls] : never_used[cls];
        if (!runs.empty() && runs.back().next + runs.back().remaining * size == slot)
          ++runs.back().remaining;
        else
          runs.push_back(Run{slot, 1});
      }
    }
    // A shared list is taken from its back: the never-used runs go before what it holds, the
    // recycled ones after it, reversed.
    for (std::size_t cls = 0; cls < max_slot_sizes; ++cls) {
      if (never_used[cls].empty() && recycled[cls].empty()) continue;
      SharedList& s = shared_[cls];
      std::lock_guard g(s.mutex);
      s.runs.insert(s.runs.begin(), never_used[cls].begin(), never_used[cls].end());
      s.runs.insert(s.runs.end(), recycled[cls].rbegin(), recycled[cls].rend());
      std::size_t count = 0;
      for (const Run& r : s.runs) count += r.remaining;
      s.count.store(count, std::memory_order_relaxed);
    }
    return stats;
  }

  // f(void* slot, std::size_t slot_size) for every slot of every used chunk, in address order
  // (Zuriel et al. §5: recovery iterates over the durable areas). Reads only the directory.
  template <class F>
  void for_each_slot(F&& f) const {
    for (std::size_t i = 0, count = chunk_count(); i < count; ++i) {
      const std::uint64_t w = directory_[i].load();
      if (!format::chunk_word::is_used(w)) continue;
      const std::size_t size = format::chunk_word::slot_size(w);
      char* chunk = chunk_begin(i);
      const std::size_t n = slots_per_chunk(size);
      for (std::size_t k = 0; k < n; ++k) f(static_cast<void*>(chunk + k * size), size);
    }
  }

  // f(std::size_t index, void* chunk, std::size_t slot_size, std::size_t owner) for every used
  // chunk.
  template <class F>
  void for_each_used_chunk(F&& f) const {
    for (std::size_t i = 0, count = chunk_count(); i < count; ++i) {
      const std::uint64_t w = directory_[i].load();
      if (!format::chunk_word::is_used(w)) continue;
      f(i, static_cast<void*>(chunk_begin(i)), format::chunk_word::slot_size(w),
        format::chunk_word::owner(w));
    }
  }

  std::size_t chunk_size() const { return chunk_size_; }
  // The chunks the pool holds now (it may grow: pool.hpp).
  std::size_t chunk_count() const { return chunk_count_.load(std::memory_order_acquire); }
  std::size_t used_chunks() const { return used_chunks_.load(std::memory_order_relaxed); }
  std::size_t free_chunks() const { return chunk_count() - used_chunks(); }
  std::size_t slots_per_chunk(std::size_t slot_size) const { return chunk_size_ / slot_size; }

  // Free slots known to the allocator: every thread's lists, bump runs and the shared lists.
  // Quiescent only (reads other threads' lists).
  std::size_t free_slots() const {
    std::size_t n = 0;
    for (const auto& t : threads_)
      if (t)
        for (const ClassState& c : t->classes) n += c.free_count + c.bump.remaining;
    for (std::size_t k = 0; k < max_slot_sizes; ++k) {
      std::lock_guard g(shared_[k].mutex);
      n += shared_[k].count.load(std::memory_order_relaxed);
    }
    return n;
  }

  // Bytes in slots handed out and not freed: what the pool's structures hold, to the slot
  // (used_chunks() * chunk_size() counts in whole chunks). Quiescent only, as free_slots().
  std::size_t allocated_bytes() const {
    std::size_t slots[max_slot_sizes] = {};
    for (std::size_t i = 0, count = chunk_count(); i < count; ++i) {
      const std::uint8_t cls = chunk_class_[i].load(std::memory_order_relaxed);
      if (cls != no_class)
        slots[cls] += chunk_size_ / class_size_[cls].load(std::memory_order_relaxed);
    }
    for (const auto& t : threads_)
      if (t)
        for (std::size_t k = 0; k < max_slot_sizes; ++k)
          slots[k] -= t->classes[k].free_count + t->classes[k].bump.remaining;
    std::size_t bytes = 0;
    for (std::size_t k = 0; k < max_slot_sizes; ++k) {
      std::lock_guard g(shared_[k].mutex);
      slots[k] -= shared_[k].count.load(std::memory_order_relaxed);
      bytes += slots[k] * class_size_[k].load(std::memory_order_relaxed);
    }
    return bytes;
  }

  // One bit per slot of the chunks used when it is made (quiescent: recovery), for a recovery
  // trace's set of reached slots. A hash set of addresses made recovery of 1M nodes 2-3x slower
  // (hash/izraelevitz 458 ms, now 154; hash/mirror 653, now 307: Mirror asks <= 0.5 s), and a
  // bit per slot of the whole pool would cost DRAM in proportion to the file, not to what it
  // holds. set(p) and test(p) take a slot of a used chunk (is_slot).
  class SlotBits {
   public:
    explicit SlotBits(const ChunkAllocator& a) : allocator_(&a), first_(a.chunk_count(), none) {
      std::size_t n = 0;
      a.for_each_used_chunk([&](std::size_t i, void*, std::size_t slot_size, std::size_t) {
        first_[i] = n;
        n += a.slots_per_chunk(slot_size);
      });
      bits_.assign(n, false);
    }
    // Sets p's bit; false if it was set already, or if p's chunk was not used when this was
    // made (it has no bit: a structure that runs while its recovery still learns, and a
    // damaged link, may name one).
    bool set(const void* p) {
      const std::size_t i = index(p);
      if (i == none) return false;
      auto bit = bits_[i];
      if (bit) return false;
      bit = true;
      return true;
    }
    bool test(const void* p) const {
      const std::size_t i = index(p);
      return i != none && bits_[i];
    }

   private:
    static constexpr std::size_t none = ~std::size_t{0};
    std::size_t index(const void* p) const {
      const auto off = static_cast<std::size_t>(static_cast<const char*>(p) - allocator_->chunks_);
      const std::size_t first = first_[off >> allocator_->chunk_shift_];
      if (first == none) return none;
      return first + (off & (allocator_->chunk_size_ - 1)) / allocator_->slot_size_of(p);
    }
    const ChunkAllocator* allocator_;
    std::vector<std::size_t> first_;  // per chunk: the bit of its first slot (none: unused)
    std::vector<bool> bits_;
  };

  // True when p points into the chunk area of this pool.
  bool owns(const void* p) const {
    const auto* c = static_cast<const char*>(p);
    return c >= chunks_ && c < chunks_ + chunk_count_.load(std::memory_order_relaxed) * chunk_size_;
  }

  // The slot size of the used chunk holding p (0 when p is not in a used chunk).
  std::size_t slot_size_of(const void* p) const {
    if (!owns(p)) return 0;
    const std::size_t i =
        static_cast<std::size_t>(static_cast<const char*>(p) - chunks_) >> chunk_shift_;
    const std::uint8_t cls = chunk_class_[i].load(std::memory_order_relaxed);
    return cls == no_class ? 0 : class_size_[cls].load(std::memory_order_relaxed);
  }

  // ---- Checks for recovery: bad input inside the pool (docs/ARCHITECTURE.md §5) ---------------
  // A pool's body may be damaged (a stray write, a bad block, a foreign tool): every recovery
  // that follows a link read from the pool checks the target here BEFORE reading it, and bounds
  // its walks by slot_capacity(), so a damaged pool ends in PoolCorrupt, never in a wild read or
  // a loop. Recovery and open only: the hot paths follow links that recovery checked.

  // True when p starts a slot of a used chunk (at a multiple of that chunk's slot size) and the
  // slot holds at least `size` bytes: a node of `size` bytes there lies inside the pool and
  // inside one slot.
  bool is_slot(const void* p, std::size_t size) const {
    if (!owns(p)) return false;
    const std::size_t off = static_cast<std::size_t>(static_cast<const char*>(p) - chunks_);
    const std::uint8_t cls = chunk_class_[off >> chunk_shift_].load(std::memory_order_relaxed);
    if (cls == no_class) return false;
    const std::size_t slot = class_size_[cls].load(std::memory_order_relaxed);
    const std::size_t in_chunk = off & (chunk_size_ - 1);
    return in_chunk % slot == 0 && in_chunk / slot < chunk_size_ / slot && size <= slot;
  }

  // p as a T*, when is_slot(p, size); otherwise throws PoolCorrupt saying that `what` (the
  // link's name: "list node", "skip-list level 3 link") leads elsewhere.
  template <class T = void>
  T* checked_slot(const void* p, std::size_t size, std::string_view what) const {
    if (!is_slot(p, size)) corrupt(describe_bad_link(p, size, what));
    return static_cast<T*>(const_cast<void*>(p));
  }

  // Why p is not a slot of `size` bytes, for the messages of checked_slot and its callers.
  std::string describe_bad_link(const void* p, std::size_t size, std::string_view what) const {
    char address[32];
    std::snprintf(address, sizeof address, "%p", p);
    std::string why;
    if (p == nullptr)
      why = "is null";
    else if (!owns(p))
      why = "points outside the pool's chunks";
    else if (slot_size_of(p) == 0)
      why = "points into an unused chunk";
    else if (slot_size_of(p) < size)
      why = "points to a " + std::to_string(slot_size_of(p)) + "-byte slot, too small for " +
            std::to_string(size) + " bytes";
    else
      why = "points into the middle of a " + std::to_string(slot_size_of(p)) + "-byte slot";
    return std::string(what) + " " + address + " " + why;
  }

  // The slots of the used chunks: no walk of the structure can meet more distinct nodes, so a
  // walk longer than this goes round a cycle.
  std::size_t slot_capacity() const {
    std::size_t n = 0;
    for (std::size_t i = 0, count = chunk_count(); i < count; ++i) {
      const std::uint8_t cls = chunk_class_[i].load(std::memory_order_relaxed);
      if (cls != no_class) n += chunk_size_ / class_size_[cls].load(std::memory_order_relaxed);
    }
    return n;
  }

  // Throws PoolCorrupt: the structure in this pool is damaged, `what` says how.
  [[noreturn]] void corrupt(std::string_view what) const {
    throw PoolCorrupt("pmds pool '" + path_ + "': corrupt structure: " + std::string(what) +
                      " [corrupt_structure]");
  }

 private:
  friend class Pool;

  static constexpr std::uint8_t no_class = 0xff;

  // `count` consecutive slots starting at `next`.
  struct Run {
    char* next = nullptr;
    std::size_t remaining = 0;
  };
  struct ClassState {
    std::vector<Run> free;       // freed (or taken from the shared list) slots
    std::size_t free_count = 0;  // slots in `free`
    Run bump;                    // the rest of the chunk this thread claimed last
  };
  struct alignas(64) ThreadState {
    ClassState classes[max_slot_sizes];
  };
  struct SharedList {
    std::mutex mutex;
    std::vector<Run> runs;
    std::atomic<std::size_t> count{0};  // slots in runs; written under the mutex
  };

  // Pool calls this after it mapped and validated the pool: the chunks at `chunks`, at offset
  // `chunks_offset` of the file `path`, open as `file` (the pool's descriptor, not owned; -1 when
  // there is none to ask about holes); `chunk_count` chunks now, room in the directory (and in
  // the reserved address range) for `chunk_limit`; `grow(count)` grows the pool past `count`
  // chunks and returns the new count, or throws PoolFull (empty: never grows).
  ChunkAllocator(std::string path, int file, atomic<std::uint64_t>* directory, char* chunks,
                 std::size_t chunks_offset, std::size_t chunk_size, std::size_t chunk_count,
                 std::size_t chunk_limit, std::function<std::size_t(std::size_t)> grow)
      : path_(std::move(path)),
        file_(file),
        directory_(directory),
        chunks_(chunks),
        chunks_offset_(chunks_offset),
        chunk_size_(chunk_size),
        chunk_shift_(static_cast<unsigned>(__builtin_ctzll(chunk_size))),
        chunk_count_(chunk_count),
        chunk_limit_(chunk_limit),
        grow_(std::move(grow)),
        chunk_class_(new std::atomic<std::uint8_t>[chunk_limit]),
        shared_(new SharedList[max_slot_sizes]) {
    std::size_t used = 0;
    for (std::size_t i = 0; i < chunk_count; ++i) {
      const std::uint64_t w = directory_[i].load();
      std::uint8_t cls = no_class;
      if (format::chunk_word::is_used(w)) {
        ++used;
        cls = static_cast<std::uint8_t>(class_of(format::chunk_word::slot_size(w)));
      }
      chunk_class_[i].store(cls, std::memory_order_relaxed);
    }
    for (std::size_t i = chunk_count; i < chunk_limit_; ++i)
      chunk_class_[i].store(no_class, std::memory_order_relaxed);
    used_chunks_.store(used, std::memory_order_relaxed);
  }

  char* chunk_begin(std::size_t i) const { return chunks_ + (i << chunk_shift_); }

  // A batch: how many slots a thread keeps when it hands its excess to the shared list (which it
  // does past two batches, so that alternating frees and allocations do not bounce slots), and
  // how many it takes from it at once: about 64 slots, at most 64 KiB.
  static std::size_t batch_slots(std::size_t size) {
    return std::clamp<std::size_t>(65536 / size, 1, 64);
  }

  // The class index of a slot size, registering it on first use.
  std::size_t class_of(std::size_t size) {
    const std::size_t n = class_count_.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < n; ++i)
      if (class_size_[i].load(std::memory_order_relaxed) == size) return i;
    return register_class(size);
  }

  std::size_t register_class(std::size_t size) {
    if (size > chunk_size_)
      format::fail(PoolErrc::bad_argument, path_,
                   "allocation of " + std::to_string(size) + " bytes exceeds the chunk size " +
                       std::to_string(chunk_size_));
    std::lock_guard g(class_mutex_);
    const std::size_t n = class_count_.load(std::memory_order_relaxed);
    for (std::size_t i = 0; i < n; ++i)
      if (class_size_[i].load(std::memory_order_relaxed) == size) return i;
    if (n == max_slot_sizes)
      format::fail(PoolErrc::bad_argument, path_,
                   "more than " + std::to_string(max_slot_sizes) + " distinct slot sizes");
    class_size_[n].store(size, std::memory_order_relaxed);
    class_count_.store(n + 1, std::memory_order_release);
    return n;
  }

  std::size_t class_of_slot(const void* slot) const {
    if (owns(slot)) {
      const std::size_t off = static_cast<std::size_t>(static_cast<const char*>(slot) - chunks_);
      const std::uint8_t cls = chunk_class_[off >> chunk_shift_].load(std::memory_order_relaxed);
      if (cls != no_class) {
        const auto in_chunk = static_cast<std::uint32_t>(off & (chunk_size_ - 1));
        const auto size =
            static_cast<std::uint32_t>(class_size_[cls].load(std::memory_order_relaxed));
        if (in_chunk % size == 0 && in_chunk / size < chunk_size_ / size) return cls;
      }
    }
    format::fail(PoolErrc::bad_argument, path_,
                 "free() of a pointer that is not a slot of the pool");
  }

  // Claims a free chunk for `size`: one CAS of its directory word, then persist, so the chunk
  // is durably known to recovery before any of its slots can hold a durable node. When none is
  // free, grows the pool (one growth at a time; a thread that finds the count changed while it
  // waited for the growth mutex scans again instead of growing twice).
  char* claim_chunk(std::size_t cls, std::size_t size) {
    const std::size_t owner = pmds::thread_id();
    const std::uint64_t desired = format::chunk_word::used(owner, size);
    for (;;) {
      const std::size_t count = chunk_count();
      const std::size_t start = next_chunk_hint_.load(std::memory_order_relaxed);
      for (std::size_t k = 0; k < count; ++k) {
        const std::size_t i = (start + k) % count;
        if (chunk_class_[i].load(std::memory_order_relaxed) != no_class) continue;
        std::uint64_t expected = format::chunk_word::free_word;
        if (!directory_[i].compare_exchange_strong(expected, desired)) continue;
        if (!planted(PlantedPoolBug::directory_not_persisted))
          persist(&directory_[i], sizeof(std::uint64_t));
        chunk_class_[i].store(static_cast<std::uint8_t>(cls), std::memory_order_relaxed);
        used_chunks_.fetch_add(1, std::memory_order_relaxed);
        next_chunk_hint_.store(i + 1, std::memory_order_relaxed);
        maybe_grow_ahead(count);
        return chunk_begin(i);
      }
      if (!grow_)
        throw PoolFull("pmds pool '" + path_ + "': full: no free chunk for a " +
                       std::to_string(size) + "-byte slot (all " + std::to_string(count) +
                       " chunks of " + std::to_string(chunk_size_) + " bytes are used) [full]");
      std::lock_guard g(growth_mutex_);
      if (grow_past(count)) {
        next_chunk_hint_.store(count, std::memory_order_relaxed);  // the new chunks first
        ahead_failed_.store(false, std::memory_order_relaxed);
      }
    }
  }

  // Under growth_mutex_: grows the pool past `count` chunks unless a growth did since the caller
  // read `count` (then false). PoolFull at the limit or on a full disk.
  bool grow_past(std::size_t count) {
    if (chunk_count() != count) return false;
    chunk_count_.store(grow_(count), std::memory_order_release);
    return true;
  }

  // Growth ahead of need (the header): called after a claim with the count it scanned.
  void maybe_grow_ahead(std::size_t count) {
#if !defined(PMDS_BACKEND_SIMULATED)
    if (!grow_ || count >= chunk_limit_ || ahead_failed_.load(std::memory_order_relaxed)) return;
    const std::size_t used = used_chunks_.load(std::memory_order_relaxed);
    if (used < count && count - used > std::max<std::size_t>(1, count / 8)) return;
    std::unique_lock l(ahead_mutex_, std::try_to_lock);  // another claim is starting it
    if (!l || ahead_running_.load(std::memory_order_acquire)) return;
    if (ahead_thread_.joinable()) ahead_thread_.join();  // the last one, finished
    ahead_running_.store(true, std::memory_order_relaxed);
    try {
      ahead_thread_ = std::thread([this, count] {
        try {
          std::lock_guard g(growth_mutex_);
          grow_past(count);
        } catch (...) {  // left for the claim that finds no chunk (the header); no other
          ahead_failed_.store(true, std::memory_order_relaxed);  // try until a growth succeeds
        }
        ahead_running_.store(false, std::memory_order_release);
      });
    } catch (const std::system_error&) {  // no thread to be had: grow on demand, as before
      ahead_running_.store(false, std::memory_order_relaxed);
    }
#else
    (void)count;
#endif
  }

  // Moves all but one batch of this thread's free slots to the shared list (splitting a run
  // when needed: consecutive frees merge into long runs).
  void donate(ClassState& c, std::size_t cls, std::size_t size) {
    std::size_t excess = c.free_count - batch_slots(size);
    SharedList& s = shared_[cls];
    std::lock_guard g(s.mutex);
    std::size_t moved_runs = 0;
    for (; excess > 0 && moved_runs < c.free.size(); ++moved_runs) {
      Run& r = c.free[moved_runs];
      if (r.remaining > excess) {  // split: the front goes, the rest stays
        s.runs.push_back(Run{r.next, excess});
        r.next += excess * size;
        r.remaining -= excess;
        c.free_count -= excess;
        s.count.store(s.count.load(std::memory_order_relaxed) + excess, std::memory_order_relaxed);
        break;
      }
      s.runs.push_back(r);
      excess -= r.remaining;
      c.free_count -= r.remaining;
      s.count.store(s.count.load(std::memory_order_relaxed) + r.remaining,
                    std::memory_order_relaxed);
    }
    c.free.erase(c.free.begin(), c.free.begin() + static_cast<std::ptrdiff_t>(moved_runs));
  }

  // Takes about one batch of slots from the shared list; false when it is empty.
  bool take_shared(ClassState& c, std::size_t cls, std::size_t size) {
    SharedList& s = shared_[cls];
    if (s.count.load(std::memory_order_relaxed) == 0) return false;  // no lock when empty
    std::lock_guard g(s.mutex);
    std::size_t want = batch_slots(size);
    std::size_t taken = 0;
    while (want > 0 && !s.runs.empty()) {
      Run& r = s.runs.back();
      if (r.remaining <= want) {
        c.free.push_back(r);
        taken += r.remaining;
        want -= r.remaining;
        s.runs.pop_back();
      } else {
        c.free.push_back(Run{r.next, want});
        taken += want;
        r.next += want * size;
        r.remaining -= want;
        want = 0;
      }
    }
    c.free_count += taken;
    s.count.store(s.count.load(std::memory_order_relaxed) - taken, std::memory_order_relaxed);
    return taken > 0;
  }

  // A slot that was allocated once: a non-zero byte in its first cache line (the pool file is
  // zero-filled at create, and every structure's node starts with its header).
  static constexpr std::size_t ever_used_bytes = 64;
  static bool ever_used(const char* slot, std::size_t size) {
    const std::size_t n = std::min(size, ever_used_bytes);
    for (std::size_t b = 0; b < n; b += sizeof(std::uint64_t)) {
      std::uint64_t word;
      std::memcpy(&word, slot + b, sizeof word);
      if (word != 0) return true;
    }
    return false;
  }

  // Where the pool file holds data (lseek SEEK_DATA/SEEK_HOLE) from offset `base` on, asked in
  // increasing offsets, so that recovery need not read a slot in a hole to learn that it is zero:
  // on tmpfs (the crash lab's images, a /dev/shm pool) and any sparse file, reading a hole
  // through the shared mapping allocates a zeroed page for it. The never-used slots of a used
  // chunk are such holes in the crash lab's images (copies of a pool's data only), and
  // ever_used() read them all: in a crashlab_sim_test run of four structures, those page faults
  // in masstree/incll's recoveries were 6% of the CPU (perf, 2026-12-05, 2-core AMD EPYC). A
  // pool's own file has them where fallocate reserved pages that were never written (tmpfs,
  // ext4's unwritten extents), where reading costs a fault per page. A file that cannot say (no
  // descriptor, a device dax, a file system without holes: SEEK_DATA then finds data everywhere)
  // is data throughout. It asks the pool's own descriptor (lseek moves only its offset, which the
  // pool never uses: it maps, truncates and allocates by offset).
  class FileData {
   public:
    FileData(int fd, std::size_t base) : fd_(fd), base_(static_cast<off_t>(base)) {}

    // Whether [base + at, base + at + length) may hold a non-zero byte (it overlaps data).
    // `at` must not decrease from one call to the next.
    bool holds_data(std::size_t at, std::size_t length) {
      if (fd_ < 0) return true;
      if (data_ended_) return false;
      const off_t begin = base_ + static_cast<off_t>(at);
      if (begin >= hole_) {  // past the extent found last: where is the next data?
        const off_t data = ::lseek(fd_, begin, SEEK_DATA);
        if (data < 0) {
          if (errno != ENXIO) return give_up();
          data_ended_ = true;  // holes to the end of the file
          return false;
        }
        const off_t hole = ::lseek(fd_, data, SEEK_HOLE);
        if (hole < 0) return give_up();
        data_ = data;
        hole_ = hole;
      }
      // [begin, hole_) holds data from data_ on, and is a hole before it.
      return begin + static_cast<off_t>(length) > data_;
    }

   private:
    bool give_up() {
      fd_ = -1;
      return true;
    }
    int fd_;
    off_t base_;
    off_t data_ = 0, hole_ = 0;  // the data extent found last: [data_, hole_)
    bool data_ended_ = false;
  };

  // The calling thread's lists, made on its first allocation or free. A process that opens a
  // pool uses a few of the max_threads (a recovery, `pmds check`): zeroing all of them (192 KiB)
  // at every open was 2.7% of a crash-lab run's CPU, in page faults (perf, crashlab_sim_test's
  // list/linkfree case, 2026-12-05, 2-core AMD EPYC). Only this thread writes its entry; the
  // quiescent readers (free_slots, allocated_bytes) skip threads that never made one.
  ThreadState& this_thread() {
    std::unique_ptr<ThreadState>& t = threads_[pmds::thread_id()];
    if (!t) t = std::make_unique<ThreadState>();
    return *t;
  }

  void reset_volatile_state() {
    for (auto& t : threads_) t.reset();
    for (std::size_t k = 0; k < max_slot_sizes; ++k) {
      std::lock_guard g(shared_[k].mutex);
      shared_[k].runs.clear();
      shared_[k].count.store(0, std::memory_order_relaxed);
    }
  }

  std::string path_;
  int file_;  // the pool file's descriptor (Pool's; -1: none)
  atomic<std::uint64_t>* directory_;
  char* chunks_;
  std::size_t chunks_offset_;  // chunks_'s offset in the pool file
  std::size_t chunk_size_;
  unsigned chunk_shift_;
  std::atomic<std::size_t> chunk_count_;  // grows (claim_chunk) under growth_mutex_
  std::size_t chunk_limit_;               // chunk_class_'s length: the most the pool may hold
  std::function<std::size_t(std::size_t)> grow_;
  Mutex growth_mutex_;  // held across the growth's persists: pm::Mutex
  // Growth ahead of need (maybe_grow_ahead): one thread at a time, started under ahead_mutex_.
  std::mutex ahead_mutex_;
  std::thread ahead_thread_;
  std::atomic<bool> ahead_running_{false};
  std::atomic<bool> ahead_failed_{false};  // since the last growth that succeeded
  std::unique_ptr<std::atomic<std::uint8_t>[]> chunk_class_;  // volatile mirror of the directory
  // Indexed by pmds::thread_id(); each made by its thread on first use (this_thread()).
  std::unique_ptr<ThreadState> threads_[pmds::max_threads];
  std::unique_ptr<SharedList[]> shared_;  // indexed by class
  std::atomic<std::size_t> class_size_[max_slot_sizes] = {};
  std::atomic<std::size_t> class_count_{0};
  std::mutex class_mutex_;
  std::atomic<std::size_t> used_chunks_{0};
  std::atomic<std::size_t> next_chunk_hint_{0};
};

// One walk along links read from the pool, bounded: step() before each node it moves to; the
// step past the allocator's slot_capacity() throws PoolCorrupt (the walk goes round a cycle).
// For walks that may meet a node twice legitimately (a skip list's levels), where a set of
// visited nodes cannot tell a cycle.
class BoundedWalk {
 public:
  BoundedWalk(const ChunkAllocator& allocator, std::string_view what)
      : allocator_(&allocator), what_(what), left_(allocator.slot_capacity()) {}
  void step() {
    if (left_ == 0)
      allocator_->corrupt(std::string(what_) + " goes round a cycle (longer than the pool's " +
                          std::to_string(allocator_->slot_capacity()) + " slots)");
    --left_;
  }

 private:
  const ChunkAllocator* allocator_;
  std::string_view what_;
  std::size_t left_;
};

}  // namespace pmds::pm
