// pmds — pool files: a persistent-memory file mapped at a fixed address, with a header, a root
// table and a chunk allocator (allocator.hpp). Format: pool_format.hpp.
//
//   auto pool = pm::Pool::create("/mnt/pmem/set.pool", 256 << 20, "list/soft");
//   pool.root(0).store(reinterpret_cast<std::uint64_t>(head)); pm::persist(&pool.root(0), 8);
//   ...
//   auto pool = pm::Pool::open("/mnt/pmem/set.pool", "list/soft");   // another process
//   pool.allocator().recover(is_live);
//
// Mapping: through libpmem2, so a file on a DAX filesystem gets MAP_SYNC (stores are durable
// once flushed) and a regular file or a /dev/shm file works too (the crash model is then the
// simulator's or a process crash's, docs/ARCHITECTURE.md §3). Device DAX (a character device)
// is not supported: a pool is a file that create() makes.
//
// Pointers: ABSOLUTE. A pool is always mapped at the base address recorded in its header (a
// libpmem2 VM reservation at that address); open() fails with base_unavailable when that range
// is taken in this process. So a structure stores plain pointers and follows them with one load,
// as its transient twin does. The alternative, offsets from the base (base + offset), costs an
// add (or an indexed addressing mode) on every hop. bench/pointer_cost_bench.cpp measures it on
// a linked-list traversal of 64-byte nodes, offset time / raw-pointer time (this machine: AMD
// EPYC, 2 shared cores, 3 runs): 1.16-1.21x when the list is cache resident and walked in order
// (a dependent L1 load chain: the indexed address adds about a cycle per hop), 1.07x for 1 Ki
// shuffled nodes, and 0.98-1.04x once every hop misses to L3 or DRAM. So a small but real cost
// on the hot searches of small structures (the 256- and 1024-key lists of Zuriel et al.), paid on
// every pointer of every structure, and offsets would also make 16-byte pointer+counter words
// and every algorithm's code differ from the transient twin that benchmarks compare against
// (docs/ARCHITECTURE.md §6).
// The price of absolute pointers is that a process cannot open two pools recorded at
// overlapping bases; create() draws the base at random in [17 TiB, 64 TiB) (1 GiB aligned;
// [64 GiB, 512 GiB) under ThreadSanitizer) so two pools created independently collide with
// probability about (size in GiB + 1) / 48000; PoolOptions::base picks one explicitly.
//
// Crash safety of the header:
//   - create() writes the whole header, the root table, the clean flag and the (zero)
//     directory, persists them, and only then writes and persists the magic: a crash during
//     create leaves a file that open() rejects (bad_magic), never a half pool that opens.
//   - The clean-shutdown flag is set (persisted) by close() after everything else is durable,
//     and cleared (persisted) by open(); was_clean_shutdown() reports what open() found.
//   - A failed open never modifies the file: it reads and validates the header and the chunk
//     directory through a read-only descriptor, reserves the base address, and only then maps
//     the file read-write (and re-checks the mapped header against what it validated).
// A pool is locked (flock, exclusive) while open, so two processes cannot open it at once
// (in_use); a child forked while a pool is open shares its lock until the child exits or execs.
//
// Under the simulated backend the mapping is attached to the Px86 simulator right after it is
// mapped (after create's initial, persisted content), and detached by close().
#pragma once

#include <fcntl.h>
#include <libpmem2.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pmds/error.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/allocator.hpp"
#include "pmds/pm/pool_file.hpp"
#include "pmds/pm/pool_format.hpp"

#if defined(PMDS_BACKEND_SIMULATED)
#include "pmds/pm/simulator.hpp"
#endif

namespace pmds::pm {

struct PoolOptions {
  // A power of two from 64 KiB to 4 MiB; the largest slot a pool hands out is one chunk.
  std::size_t chunk_size = format::default_chunk_size;
  // 0: choose a free address; otherwise the base address to record (page aligned; a multiple
  // of 2 MiB keeps huge pages possible).
  std::uintptr_t base = 0;
  // Permission bits of the new file.
  unsigned mode = 0600;
  // The most the pool may grow to, in bytes (0: its size; it never grows). When larger than the
  // size, the pool starts with as many whole chunks as fit in the size beside a directory that
  // has room for max_size's, and grows on demand (Pool::grow) up to max_size.
  std::size_t max_size = 0;
  // Also keep [base + twin_offset, + size) free in this process when choosing the base: the
  // structure maps a volatile twin of the pool there (Mirror's DRAM replica, mirror/replica.hpp).
  // With an explicit base, that range must be free too (else base_unavailable).
  bool twin = false;
};

// What inspect_pool() reads from a pool file.
struct PoolInfo {
  struct SlotSizeUsage {
    std::size_t slot_size = 0;
    std::size_t chunks = 0;  // used chunks of this slot size
    std::size_t slots = 0;   // slots in those chunks (live or free: only the structure knows)
  };
  std::string path;
  std::string layout;
  std::uint32_t format_version = 0;
  std::size_t header_size = 0;
  std::size_t size = 0;          // now
  std::size_t created_size = 0;  // at create
  std::size_t max_size = 0;      // the most it may grow to (size: it never grows)
  std::size_t growths = 0;       // how many times it grew
  // A growth to this many chunks began and did not end (a crash in it: the next open trims
  // what it added, or keeps it when the header names it); 0: none.
  std::size_t growth_pending = 0;
  std::uintptr_t base = 0;
  bool clean_shutdown = false;  // false: open now, or it crashed (recovery will run)
  std::size_t chunk_size = 0;
  std::size_t chunk_count = 0;
  std::size_t used_chunks = 0;
  std::size_t free_chunks = 0;
  std::vector<SlotSizeUsage> slot_sizes;  // by increasing slot size
  std::array<std::uint64_t, format::root_count> roots{};
};

// Where a pool's volatile twin goes (PoolOptions::twin): base + twin_offset, a constant so that a
// word of the twin finds its pool word by one subtraction (Mirror §4.3.1's address
// translation, without a handle to the pool). The twins of pools in [17, 64) TiB fall in
// [37, 84) TiB, below the PIE binaries and their heap (~85 TiB); under ThreadSanitizer, whose
// application range ends at 512 GiB, twins need a base below 288 GiB.
#if defined(__SANITIZE_THREAD__)
inline constexpr std::uintptr_t twin_offset = std::uintptr_t{224} << 30;
inline constexpr std::uintptr_t twin_range_end = std::uintptr_t{512} << 30;
#else
inline constexpr std::uintptr_t twin_offset = std::uintptr_t{20} << 40;
inline constexpr std::uintptr_t twin_range_end = std::uintptr_t{84} << 40;
#endif

class Pool {
 public:
  static constexpr std::size_t root_count = format::root_count;
  static constexpr std::size_t max_layout_length = format::max_layout_length;
  static constexpr std::size_t header_size = format::header_size;

  // The smallest pool: the header, one directory page and one chunk.
  static constexpr std::size_t min_size(std::size_t chunk_size = format::default_chunk_size) {
    return format::header_size + format::page_size + chunk_size;
  }

  // Creates a new pool file of `size` bytes (a multiple of 4096, at least min_size()) holding
  // `layout` (1 to 63 bytes, no NUL), and opens it; with options.max_size above `size`, a pool
  // that grows up to max_size (its file then starts at the whole chunks that fit in `size`).
  // Throws PoolError: already_exists, bad_argument, not_found (missing directory), io; on
  // failure no file is left behind.
  static Pool create(const std::string& path, std::size_t size, std::string_view layout,
                     const PoolOptions& options = {}) {
    check_create_arguments(path, size, layout, options);
    format::Geometry g = format::geometry_for(size, options.chunk_size);
    std::size_t limit = g.chunk_count;
    if (options.max_size > size) {
      // The directory has room for max_size's chunks; the file holds those that fit beside it.
      const format::Geometry most = format::geometry_for(options.max_size, options.chunk_size);
      const std::size_t fit =
          size > most.chunks_offset ? (size - most.chunks_offset) / options.chunk_size : 0;
      if (fit == 0)
        format::fail(PoolErrc::bad_argument, path,
                     "size " + std::to_string(size) + " leaves no room for a chunk beside the " +
                         "chunk directory of a pool that grows to " +
                         std::to_string(options.max_size) + " bytes (at least " +
                         std::to_string(most.chunks_offset + options.chunk_size) + ")");
      if (fit < most.chunk_count) {
        g = {most.directory_offset, most.chunks_offset, fit};
        limit = most.chunk_count;
        size = most.chunks_offset + fit * options.chunk_size;
      }
    }

    detail::Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, options.mode));
    if (fd.get() < 0) {
      if (errno == EEXIST) format::fail(PoolErrc::already_exists, path, "already exists");
      if (errno == ENOENT || errno == ENOTDIR)
        format::fail(PoolErrc::not_found, path, "its directory does not exist");
      format::fail(PoolErrc::io, path, "cannot create: " + detail::errno_text(errno));
    }
    auto st = std::make_unique<State>();
    Pool pool;
    try {
      detail::lock_file(path, fd.get());
      // Allocate the blocks now, so a full filesystem is an error here and not a SIGBUS on
      // some later store into a sparse page.
      int rc = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(size));
      if (rc == EOPNOTSUPP || rc == EINVAL)
        rc = ::ftruncate(fd.get(), static_cast<off_t>(size)) == 0 ? 0 : errno;
      if (rc != 0)
        format::fail(PoolErrc::io, path, "cannot size the file: " + detail::errno_text(rc));

      st->path = path;
      st->layout = std::string(layout);
      st->size.store(size);
      st->chunk_size = options.chunk_size;
      st->chunks_offset = g.chunks_offset;
      st->chunk_count = g.chunk_count;
      st->limit = limit;
      st->was_clean = true;  // nothing to recover in a new pool
      const std::size_t span = st->max_size();
      if (options.base != 0) {
        if (options.twin && !twin_range_free(options.base, span))
          format::fail(PoolErrc::base_unavailable, path,
                       "the range of its volatile twin at " +
                           detail::hex(options.base + twin_offset) +
                           " is taken in this process, or beyond " + detail::hex(twin_range_end));
        detail::reserve_at(path, options.base, span, st->mapping);
      } else {
        reserve_free_range(path, span, options.twin, st->mapping);
      }
      st->base = static_cast<char*>(pmem2_vm_reservation_get_address(st->mapping.reservation));
      detail::map_into_reservation(path, fd.get(), size, st->mapping);
      st->fd = std::move(fd);

      format::Identity id{};
      id.magic = 0;  // written last, below
      id.format_version = format::current_version;
      id.header_size = format::header_size;
      id.pool_size = size;
      id.base_address = reinterpret_cast<std::uintptr_t>(st->base);
      id.chunk_size = options.chunk_size;
      id.chunk_count = g.chunk_count;
      id.directory_offset = g.directory_offset;
      id.chunks_offset = g.chunks_offset;
      std::memcpy(id.layout, layout.data(), layout.size());
      id.checksum = format::identity_checksum(id);
      const format::GrowthLine growth{g.chunk_count, limit, 0, 0};

      // Everything but the magic, persisted. A new file reads as zeros already; the header's
      // zero bytes and the directory are written anyway, so that everything the magic vouches
      // for went through the access layer (and the simulator's record of it).
      char* base = st->base;
      pm::write(base, &id, sizeof id);
      static constexpr std::array<unsigned char, format::header_size> zeros{};
      pm::write(base + sizeof id, zeros.data(), format::header_size - sizeof id);
      pm::write(base + format::growth_offset, &growth, sizeof growth);
      for (std::size_t off = g.directory_offset; off < g.chunks_offset; off += zeros.size())
        pm::write(base + off, zeros.data(), std::min(zeros.size(), g.chunks_offset - off));
      pm::persist(base, g.chunks_offset);
      st->persist_media(0, g.chunks_offset);
      // The magic, last: from here on the file is a pool.
      const std::uint64_t m = format::magic;
      pm::write(base, &m, sizeof m);
      pm::persist(base, sizeof m);
      st->persist_media(0, sizeof m);

      pool.state_ = std::move(st);
      pool.attach_and_start();
      return pool;
    } catch (...) {
      // No clean flag: this never became a pool. Release and remove the file.
      if (pool.state_) {
        pool.abandon();
      } else {
        st->mapping.release();
      }
      ::unlink(path.c_str());
      throw;
    }
  }

  // Opens an existing pool holding `layout`. Validates everything through a read-only
  // descriptor before it maps the file read-write: a failed open leaves the file untouched.
  // Throws PoolError: not_found, not_regular_file, bad_magic, version_too_new, corrupted,
  // layout_mismatch, truncated, size_mismatch, base_unavailable, in_use, io; bad_argument for an
  // empty or too long layout name.
  //
  // max_size (0: keep the pool's own limit) raises the limit of a pool created to grow, up to
  // the room its directory has (the max_size it was created with, rounded up to a whole page of
  // directory words); a smaller one is ignored. A file longer than its header says, within a
  // growth the header records as begun, is a growth that a crash interrupted: open trims it
  // back (its chunks were never handed out). Any other length is truncated / size_mismatch.
  static Pool open(const std::string& path, std::string_view layout, std::size_t max_size = 0) {
    if (layout.empty() || layout.size() > format::max_layout_length)
      format::fail(PoolErrc::bad_argument, path,
                   "open() needs the layout name the pool was created with (1 to " +
                       std::to_string(format::max_layout_length) + " bytes)");
    detail::ValidatedFile f = detail::read_and_validate(path, layout);
    auto st = std::make_unique<State>();
    st->path = path;
    st->layout = std::string(layout);
    st->size.store(f.h.size);
    st->chunk_size = f.id.chunk_size;
    st->chunks_offset = f.id.chunks_offset;
    st->chunk_count = f.h.chunk_count;
    st->limit = f.h.limit;
    st->growths.store(f.h.growths);
    if (max_size > st->max_size()) {
      const std::size_t wanted = (max_size - f.id.chunks_offset) / f.id.chunk_size;
      if (f.h.limit == f.id.chunk_count || wanted > format::directory_capacity(f.id))
        format::fail(
            PoolErrc::bad_argument, path,
            f.h.limit == f.id.chunk_count
                ? "was created with a fixed size; it cannot grow to " + std::to_string(max_size)
                : "has room in its chunk directory for " +
                      std::to_string(format::directory_capacity(f.id)) + " chunks (" +
                      std::to_string(f.id.chunks_offset +
                                     format::directory_capacity(f.id) * f.id.chunk_size) +
                      " bytes), not " + std::to_string(max_size) +
                      " bytes: create it with a larger max_size");
      st->limit = wanted;
    }
    try {
      detail::reserve_at(path, f.id.base_address, st->max_size(), st->mapping);
      detail::lock_file(path, f.fd.get());
      detail::Fd rw(::open(path.c_str(), O_RDWR | O_CLOEXEC));
      if (rw.get() < 0)
        format::fail(PoolErrc::io, path, "cannot open read-write: " + detail::errno_text(errno));
      struct stat a, b;
      if (::fstat(rw.get(), &a) != 0 || ::fstat(f.fd.get(), &b) != 0 || a.st_ino != b.st_ino ||
          a.st_dev != b.st_dev)
        format::fail(PoolErrc::io, path, "the file was replaced while it was being opened");
      if (f.h.interrupted_growth && ::ftruncate(rw.get(), static_cast<off_t>(f.h.size)) != 0)
        format::fail(PoolErrc::io, path,
                     "cannot trim the growth a crash interrupted: " + detail::errno_text(errno));
      detail::map_into_reservation(path, rw.get(), f.h.size, st->mapping);
      st->base = static_cast<char*>(pmem2_map_get_address(st->mapping.map));
      // The mapped header and directory must be what was validated (no change in between).
      if (std::memcmp(st->base, f.header.data(), format::header_size) != 0 ||
          std::memcmp(st->base + f.id.directory_offset, f.directory.data(),
                      f.directory.size() * sizeof(std::uint64_t)) != 0)
        format::fail(PoolErrc::corrupted, path, "the header changed while it was being opened");
      st->lock_fd = std::move(f.fd);
      st->fd = std::move(rw);
      st->was_clean = f.word_at(format::clean_flag_offset) == 1;
    } catch (...) {
      st->mapping.release();
      throw;
    }
    Pool pool;
    pool.state_ = std::move(st);
    try {
      pool.attach_and_start();
    } catch (...) {
      pool.abandon();  // not close(): that would mark the pool clean
      throw;
    }
    // The growth line says what open decided: the limit it raised, a growth it trimmed.
    if (f.id.format_version >= 2 && (f.h.pending != 0 || pool.state_->limit != f.h.limit)) {
      State& st = *pool.state_;
      growth_word(st, offsetof(format::GrowthLine, limit)).store(st.limit);
      growth_word(st, offsetof(format::GrowthLine, pending)).store(0);
      persist_growth_line(st);
    }
    // Open: the shutdown is no longer clean until close() says so.
    pool.clean_flag().store(0);
    persist(&pool.clean_flag(), sizeof(std::uint64_t));
    pool.state_->persist_media(format::clean_flag_offset, sizeof(std::uint64_t));
    return pool;
  }

  Pool() = default;
  Pool(Pool&&) noexcept = default;
  Pool& operator=(Pool&& o) noexcept {
    if (this != &o) {
      close();
      state_ = std::move(o.state_);
    }
    return *this;
  }
  ~Pool() { close(); }

  // Makes everything durable, sets the clean-shutdown flag (persisted), unmaps and unlocks.
  // The structure in the pool must be quiescent. Idempotent.
  void close() noexcept {
    if (!state_) return;
    State& st = *state_;
    if (st.allocator) st.allocator->finish_growth();  // its size is final from here on
    // On a non-DAX file the page cache holds the stores: write it back before the flag says
    // clean, so "clean" never names a pool whose contents are not all on the media.
    st.persist_media(0, st.size.load());
    clean_flag().store(1);
    persist(&clean_flag(), sizeof(std::uint64_t));
    st.persist_media(format::clean_flag_offset, sizeof(std::uint64_t));
#if defined(PMDS_BACKEND_SIMULATED)
    try {
      sim::detach(st.base);
    } catch (...) {  // cannot happen: attach_and_start attached exactly this base
    }
#endif
    st.allocator.reset();
    st.mapping.release();
    state_.reset();  // closes the descriptors, which releases the lock
  }

  bool is_open() const {
    return state_ != nullptr;
  }
  void* base() const {
    return state_->base;
  }
  // The pool's size now (it grows when created with a max_size above its size).
  std::size_t size() const {
    return state_->size.load(std::memory_order_acquire);
  }
  // The most it may grow to: the address range reserved for it (size() when it never grows).
  std::size_t max_size() const {
    return state_->max_size();
  }
  // How many times it grew since create.
  std::size_t growths() const {
    return state_->growths;
  }
  std::string_view layout() const {
    return state_->layout;
  }
  const std::string& path() const {
    return state_->path;
  }
  bool contains(const void* p) const {
    const auto* c = static_cast<const char*>(p);
    return c >= state_->base && c < state_->base + size();
  }

  // The clean-shutdown flag as open() found it: false after a crash (or a kill) while open.
  // True for a pool create() just made.
  bool was_clean_shutdown() const {
    return state_->was_clean;
  }

  // True when stores reach persistence only through the page cache (not a DAX file): then a
  // process crash loses nothing, but a power failure loses what was not written back.
  bool page_cache_backed() const {
    return state_->mapping.page_granularity;
  }

  // The persistent root table: root_count words in the header, zero in a new pool. Persist a
  // root after storing it (pm::persist(&pool.root(i), 8)).
  atomic<std::uint64_t>& root(std::size_t i) {
    if (i >= root_count)
      format::fail(
          PoolErrc::bad_argument, state_->path,
          "root index " + std::to_string(i) + " is not below " + std::to_string(root_count));
    return reinterpret_cast<atomic<std::uint64_t>*>(state_->base + format::roots_offset)[i];
  }

  ChunkAllocator& allocator() {
    return *state_->allocator;
  }
  const ChunkAllocator& allocator() const {
    return *state_->allocator;
  }

  // Unmaps without writing anything: an open that failed after mapping, or a structure whose
  // recovery failed (close() would mark the pool clean, and the next open would trust it).
  void abandon() noexcept {
    if (!state_) return;
#if defined(PMDS_BACKEND_SIMULATED)
    if (sim::attached(state_->base)) {
      try {
        sim::detach(state_->base);
      } catch (...) {
      }
    }
#endif
    state_->allocator.reset();
    state_->mapping.release();
    state_.reset();
  }

 private:
  struct State {
    std::string path;
    std::string layout;
    char* base = nullptr;
    std::atomic<std::size_t> size{0};  // grows (grow(), under the allocator's growth mutex)
    std::size_t chunk_size = 0;
    std::size_t chunks_offset = 0;
    std::size_t chunk_count = 0;  // at open (the allocator's count is the one that grows)
    std::size_t limit = 0;        // the most chunks it may grow to
    std::atomic<std::size_t> growths{0};
    bool was_clean = false;
    detail::Mapping mapping;
    detail::Fd fd;       // read-write, the mapping's source
    detail::Fd lock_fd;  // holds the flock when open() locked its read-only descriptor
    std::unique_ptr<ChunkAllocator> allocator;

    void persist_media(std::size_t offset, std::size_t n) const {
      if (mapping.page_granularity && mapping.persist_fn != nullptr)
        mapping.persist_fn(base + offset, n);
    }
    std::size_t max_size() const {
      return std::max(size.load(), chunks_offset + limit * chunk_size);
    }
  };

  // The most a growth adds: the pool doubles until then, so a fill from small to large costs a
  // logarithmic number of growths, and no single growth takes long (a growth that allocates
  // the blocks of 1 GiB on a disk takes well under a second).
  static constexpr std::size_t max_growth_step = std::size_t{1} << 30;

  // A word of the growth line (pool_format.hpp), by its offset in it.
  static atomic<std::uint64_t>& growth_word(State& st, std::size_t offset) {
    return *reinterpret_cast<atomic<std::uint64_t>*>(st.base + format::growth_offset + offset);
  }
  static void persist_growth_line(State& st) {
    persist(st.base + format::growth_offset, sizeof(format::GrowthLine));
    st.persist_media(format::growth_offset, sizeof(format::GrowthLine));
  }

  // Grows the pool past `count` chunks (the allocator's count; its growth mutex is held, so one
  // growth runs at a time) and returns the new count. Crash safety, in this order: the growth
  // line records the growth as pending (so open can tell a crash's longer file from a foreign
  // one), the file is extended (its blocks allocated: a full disk fails here, not with a SIGBUS
  // at a later store) and mapped in place into the reserved range (the base never moves, so
  // every pointer stays valid); only then does the header say the chunks exist, and only after
  // that does the allocator hand them out. Throws PoolFull at the limit or when the file system
  // has no room (ENOSPC, EDQUOT, EFBIG), with the pool as it was: open, and the next growth
  // tried again at the next claim.
  static std::size_t grow(State& st, std::size_t count) {
    const std::size_t old_size = st.size.load();
    if (count >= st.limit)
      throw PoolFull("pmds pool '" + st.path + "': full: it reached its limit of " +
                     std::to_string(st.max_size()) + " bytes (" + std::to_string(count) +
                     " chunks of " + std::to_string(st.chunk_size) +
                     " bytes, all used; open it with a larger max_size) [full]");
    const std::size_t step = std::clamp<std::size_t>(count, 1, max_growth_step / st.chunk_size);
    const std::size_t target = std::min(st.limit, count + step);
    const std::size_t new_size = st.chunks_offset + target * st.chunk_size;
    growth_word(st, offsetof(format::GrowthLine, pending)).store(target);
    persist_growth_line(st);
    auto undo = [&](int error, const std::string& what) {
      (void)!::ftruncate(st.fd.get(), static_cast<off_t>(old_size));
      growth_word(st, offsetof(format::GrowthLine, pending)).store(0);
      persist_growth_line(st);
      if (error == ENOSPC || error == EDQUOT || error == EFBIG)
        throw PoolFull("pmds pool '" + st.path + "': full: cannot grow from " +
                       std::to_string(old_size) + " to " + std::to_string(new_size) +
                       " bytes: " + what + " [full]");
      format::fail(PoolErrc::io, st.path,
                   "cannot grow to " + std::to_string(new_size) + " bytes: " + what);
    };
    if (planted(PlantedPoolBug::growth_size_before_extension)) {
      growth_word(st, offsetof(format::GrowthLine, chunk_count)).store(target);
      persist_growth_line(st);
    }
    int rc = ::posix_fallocate(st.fd.get(), static_cast<off_t>(old_size),
                               static_cast<off_t>(new_size - old_size));
    if (rc == EOPNOTSUPP || rc == EINVAL)
      rc = ::ftruncate(st.fd.get(), static_cast<off_t>(new_size)) == 0 ? 0 : errno;
    if (rc != 0) undo(rc, detail::errno_text(rc));
    // On a DAX file, the new length durable before the header names its chunks: after a power
    // failure, a file system that had not written the extension's metadata back would leave a
    // header that claims more than the file holds (refused at open). A page-cache file keeps
    // its length through a process crash, the only crash it survives (page_cache_backed()),
    // and there fdatasync writes back every page the pool dirtied: a 1 GiB fill of
    // hash-bytes/montage on a disk file ran at 0.85x the pre-sized pool's with it.
    if (!st.mapping.page_granularity && ::fdatasync(st.fd.get()) != 0)
      undo(errno, "cannot make the new length durable");
    rc = planted(PlantedPoolBug::growth_maps_elsewhere)
             ? map_extension_elsewhere(st, old_size, new_size)
             : detail::map_extension(old_size, new_size - old_size, st.mapping);
    if (rc != 0) undo(0, "cannot map the extension: " + detail::pmem2_text(rc));
#if defined(PMDS_BACKEND_SIMULATED)
    // The model records the stores into the extension from here on (its zero bytes are
    // durable: the file holds them).
    sim::extend(st.base, new_size);
#endif
    growth_word(st, offsetof(format::GrowthLine, chunk_count)).store(target);
    if (!planted(PlantedPoolBug::growth_chunks_before_header)) persist_growth_line(st);
    growth_word(st, offsetof(format::GrowthLine, growths)).store(st.growths.fetch_add(1) + 1);
    growth_word(st, offsetof(format::GrowthLine, pending)).store(0);
    if (!planted(PlantedPoolBug::growth_chunks_before_header)) persist_growth_line(st);
    st.size.store(new_size, std::memory_order_release);
    return target;
  }

  // PlantedPoolBug::growth_maps_elsewhere: the extension mapped where the kernel likes, not at
  // the pool's base + old_size (which stays reserved and inaccessible). Simulated backend only.
  static int map_extension_elsewhere(State& st, std::size_t old_size, std::size_t new_size) {
    void* p = ::mmap(nullptr, new_size - old_size, PROT_READ | PROT_WRITE, MAP_SHARED, st.fd.get(),
                     static_cast<off_t>(old_size));
    return p == MAP_FAILED ? -errno : 0;  // (libpmem2 reports errno so, negated)
  }

  atomic<std::uint64_t>& clean_flag() {
    return *reinterpret_cast<atomic<std::uint64_t>*>(state_->base + format::clean_flag_offset);
  }

  // After the mapping holds a valid pool: attach it to the simulator, build the allocator.
  void attach_and_start() {
    State& st = *state_;
#if defined(PMDS_BACKEND_SIMULATED)
    sim::attach(st.base, st.size);
#endif
    format::Identity id;
    std::memcpy(&id, st.base, sizeof id);
    std::function<std::size_t(std::size_t)> grow;
    // A pool made growable (its limit above its first chunk count) keeps its grow function even
    // once grown to the limit (st.chunk_count, from the growth line, is >= id.chunk_count).
    if (st.limit > id.chunk_count)
      grow = [state = &st](std::size_t count) { return Pool::grow(*state, count); };
    st.allocator.reset(
        new ChunkAllocator(st.path, st.fd.get(),
                           reinterpret_cast<atomic<std::uint64_t>*>(st.base + id.directory_offset),
                           st.base + id.chunks_offset, id.chunks_offset, st.chunk_size,
                           st.chunk_count, st.limit, std::move(grow)));
  }

  static void check_create_arguments(const std::string& path, std::size_t size,
                                     std::string_view layout, const PoolOptions& o) {
    if (layout.empty()) format::fail(PoolErrc::bad_argument, path, "empty layout name");
    if (layout.size() > format::max_layout_length)
      format::fail(PoolErrc::bad_argument, path,
                   "layout name of " + std::to_string(layout.size()) + " bytes (at most " +
                       std::to_string(format::max_layout_length) + ")");
    if (layout.find('\0') != std::string_view::npos)
      format::fail(PoolErrc::bad_argument, path, "layout name contains a NUL byte");
    if (o.chunk_size < format::min_chunk_size || o.chunk_size > format::max_chunk_size ||
        !std::has_single_bit(o.chunk_size))
      format::fail(
          PoolErrc::bad_argument, path,
          "chunk size " + std::to_string(o.chunk_size) + " (a power of two from 64 KiB to 4 MiB)");
    if (size % format::page_size != 0)
      format::fail(PoolErrc::bad_argument, path,
                   "size " + std::to_string(size) + " is not a multiple of " +
                       std::to_string(format::page_size));
    if (size < min_size(o.chunk_size))
      format::fail(PoolErrc::bad_argument, path,
                   "size " + std::to_string(size) + " is below the minimum " +
                       std::to_string(min_size(o.chunk_size)) + " (header, directory, one chunk)");
    if (size > detail::base_range_end - detail::base_range_begin)
      format::fail(PoolErrc::bad_argument, path, "size " + std::to_string(size) + " is too large");
    if (o.base % format::page_size != 0 ||
        (o.base != 0 && o.base + size > (std::uintptr_t{1} << 47)))
      format::fail(PoolErrc::bad_argument, path, "unusable base address");
  }

  // A random start in the base range, then steps of the pool's size (with libpmem2's tail,
  // rounded to 1 GiB): pools created in one process never overlap, and pools created in
  // different processes rarely do.
  // Whether a twin of a pool at [base, base + size) fits at base + twin_offset.
  static bool twin_range_free(std::uintptr_t base, std::size_t size) {
    return base + twin_offset + size <= twin_range_end &&
           detail::range_unmapped(base + twin_offset, size);
  }

  static void reserve_free_range(const std::string& path, std::size_t size, bool twin,
                                 detail::Mapping& m) {
    const std::uintptr_t stride =
        format::round_up(detail::reservation_extent(size), detail::base_alignment);
    const std::uintptr_t slots = (detail::base_range_end - detail::base_range_begin) / stride;
    std::random_device rd;
    const std::uintptr_t first = (std::uintptr_t{rd()} << 32 | rd()) % slots;
    for (std::uintptr_t k = 0; k < std::min<std::uintptr_t>(slots, 4096); ++k) {
      const std::uintptr_t base = detail::base_range_begin + ((first + k) % slots) * stride;
      if (twin && !twin_range_free(base, size)) continue;
      const int rc = detail::try_reserve(base, size, m);
      if (rc == 0) return;
      if (rc != PMEM2_E_MAPPING_EXISTS)
        format::fail(PoolErrc::io, path,
                     "cannot reserve an address range: " + detail::pmem2_text(rc));
    }
    format::fail(PoolErrc::io, path, "no free address range for the pool");
  }

  std::unique_ptr<State> state_;
};

// A read-only look at a pool file's header and chunk directory (plain reads, no mapping), for
// `pmds inspect`. Throws the PoolError open() would throw for a bad file (not base_unavailable
// or in_use: inspecting an open pool is fine).
inline PoolInfo inspect_pool(const std::string& path) {
  detail::ValidatedFile f = detail::read_and_validate(path, {});
  PoolInfo info;
  info.path = path;
  info.layout = std::string(format::layout_of(f.id));
  info.format_version = f.id.format_version;
  info.header_size = f.id.header_size;
  info.size = f.h.size;
  info.created_size = f.id.pool_size;
  info.max_size = std::max(f.h.size, f.id.chunks_offset + f.h.limit * f.id.chunk_size);
  info.growths = f.h.growths;
  info.growth_pending = f.h.pending;
  info.base = f.id.base_address;
  info.clean_shutdown = f.word_at(format::clean_flag_offset) == 1;
  info.chunk_size = f.id.chunk_size;
  info.chunk_count = f.h.chunk_count;
  std::map<std::size_t, PoolInfo::SlotSizeUsage> by_size;
  for (std::uint64_t w : f.directory) {
    if (!format::chunk_word::is_used(w)) continue;
    ++info.used_chunks;
    const std::size_t s = format::chunk_word::slot_size(w);
    auto& u = by_size[s];
    u.slot_size = s;
    ++u.chunks;
    u.slots += f.id.chunk_size / s;
  }
  info.free_chunks = info.chunk_count - info.used_chunks;
  for (auto& [s, u] : by_size) info.slot_sizes.push_back(u);
  for (std::size_t i = 0; i < format::root_count; ++i)
    info.roots[i] = f.word_at(format::roots_offset + i * sizeof(std::uint64_t));
  return info;
}

}  // namespace pmds::pm
