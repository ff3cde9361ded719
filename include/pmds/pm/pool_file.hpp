// pmds — the pool file under pm::Pool (pool.hpp): reading and validating a pool file through a
// read-only descriptor (a failed open never modifies the file), the address ranges pools are
// placed in, and the libpmem2 reservation and mappings at a pool's fixed base, including the
// extension a growth maps in place. Format: pool_format.hpp.
#pragma once

#include <fcntl.h>
#include <libpmem2.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pmds/error.hpp"
#include "pmds/pm/pool_format.hpp"

namespace pmds::pm::detail {

inline std::string errno_text(int e) {
  return std::string(std::strerror(e)) + " (errno " + std::to_string(e) + ")";
}

inline std::string hex(std::uintptr_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%lx", static_cast<unsigned long>(v));
  return b;
}

inline std::string pmem2_text(int rc) {
  return std::string(pmem2_errormsg()) + " (libpmem2 " + std::to_string(rc) + ")";
}

// A file descriptor closed on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~Fd() { reset(); }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

inline void read_exact(const std::string& path, int fd, void* out, std::size_t n, off_t offset) {
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, offset);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) format::fail(PoolErrc::io, path, "read failed: " + errno_text(errno));
    if (r == 0) format::fail(PoolErrc::truncated, path, "file ended while reading");
    p += r;
    n -= static_cast<std::size_t>(r);
    offset += r;
  }
}

// Stats `path` and opens it read-only; only regular files are pools.
inline std::pair<Fd, std::size_t> open_for_reading(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      format::fail(PoolErrc::not_found, path, "no such file");
    format::fail(PoolErrc::io, path, "stat failed: " + errno_text(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    const char* what = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device (device DAX is not supported)"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    format::fail(PoolErrc::not_regular_file, path, std::string("is ") + what);
  }
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) format::fail(PoolErrc::io, path, "open failed: " + errno_text(errno));
  // Size again through the descriptor: the path may have been replaced after stat.
  if (::fstat(fd.get(), &st) != 0)
    format::fail(PoolErrc::io, path, "fstat failed: " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) format::fail(PoolErrc::not_regular_file, path, "is not a regular file");
  return {std::move(fd), static_cast<std::size_t>(st.st_size)};
}

// The header and directory of a pool file, read and validated through a read-only descriptor.
struct ValidatedFile {
  Fd fd;
  std::size_t file_size = 0;
  std::array<unsigned char, format::header_size> header{};
  format::Header h;
  format::Identity id{};
  std::vector<std::uint64_t> directory;

  std::uint64_t word_at(std::size_t offset) const {
    std::uint64_t w;
    std::memcpy(&w, header.data() + offset, sizeof w);
    return w;
  }
};

inline ValidatedFile read_and_validate(const std::string& path, std::string_view layout) {
  ValidatedFile f;
  auto [fd, size] = open_for_reading(path);
  f.fd = std::move(fd);
  f.file_size = size;
  read_exact(path, f.fd.get(), f.header.data(), std::min(size, format::header_size), 0);
  f.h = format::validate_header(path, f.header.data(), size, layout);
  f.id = f.h.id;
  f.directory.resize(f.h.chunk_count);
  read_exact(path, f.fd.get(), f.directory.data(), f.h.chunk_count * sizeof(std::uint64_t),
             static_cast<off_t>(f.id.directory_offset));
  format::validate_directory(path, f.id, f.h.chunk_count, f.directory.data());
  return f;
}

// True when no page of [addr, addr+n) is mapped in this process.
inline bool range_unmapped(std::uintptr_t addr, std::size_t n) {
  void* p = ::mmap(reinterpret_cast<void*>(addr), n, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  if (p == MAP_FAILED) return false;
  ::munmap(p, n);
  return p == reinterpret_cast<void*>(addr);  // a kernel without the flag may place it elsewhere
}

// libpmem2 (1.12, vm_reservation_posix.c) reserves ALIGN_UP(size, a) + a bytes at a requested
// address, a = 2 MiB (1 GiB from 2 GiB on), for the alignment it needs when it picks the
// address itself, and its delete unmaps only `size` bytes: the tail stays mapped (PROT_NONE)
// and the same base could never be reserved again in this process. We note whether the
// reservation took a tail that was free before, and unmap it after libpmem2's delete.
inline std::size_t reservation_extent(std::size_t size) {
  const std::size_t a =
      size >= (std::size_t{2} << 30) ? std::size_t{1} << 30 : std::size_t{2} << 20;
  return (size + a - 1) / a * a + a;
}

// The libpmem2 objects of one mapping, released in reverse order.
struct Mapping {
  pmem2_vm_reservation* reservation = nullptr;
  std::uintptr_t leaked_tail = 0;  // see reservation_extent; 0: none
  std::size_t leaked_tail_size = 0;
  pmem2_source* source = nullptr;
  pmem2_map* map = nullptr;
  std::vector<pmem2_map*> extensions;  // one per growth (Pool::grow), after `map`
  pmem2_persist_fn persist_fn = nullptr;
  bool page_granularity = false;  // not DAX: the page cache stands between stores and media

  void release() {
    for (pmem2_map*& e : extensions) pmem2_map_delete(&e);
    extensions.clear();
    if (map != nullptr) pmem2_map_delete(&map);
    if (source != nullptr) pmem2_source_delete(&source);
    if (reservation != nullptr) pmem2_vm_reservation_delete(&reservation);
    // The tail was ours from the reservation until now (nothing else could map there); if
    // libpmem2 left it mapped, unmap it.
    if (leaked_tail != 0 && !range_unmapped(leaked_tail, page_size_bytes))
      ::munmap(reinterpret_cast<void*>(leaked_tail), leaked_tail_size);
    leaked_tail = 0;
  }
  static constexpr std::size_t page_size_bytes = format::page_size;
};

// Where create() puts pools: [17 TiB, 64 TiB), far from the kernel's mmap area (top-down from
// 128 TiB), the PIE binaries and their heap (~85 TiB), and above AddressSanitizer's shadow
// (which ends just past 16 TiB). ThreadSanitizer allows application mappings only below 512 GiB
// in that range, so a TSan build uses [64 GiB, 512 GiB) (its pools open in normal builds too).
#if defined(__SANITIZE_THREAD__)
inline constexpr std::uintptr_t base_range_begin = std::uintptr_t{64} << 30;
inline constexpr std::uintptr_t base_range_end = std::uintptr_t{512} << 30;
#else
inline constexpr std::uintptr_t base_range_begin = std::uintptr_t{17} << 40;
inline constexpr std::uintptr_t base_range_end = std::uintptr_t{64} << 40;
#endif
inline constexpr std::uintptr_t base_alignment = std::uintptr_t{1} << 30;

// Reserves [base, base+size) into m.reservation. Returns a libpmem2 error code: 0, or
// PMEM2_E_MAPPING_EXISTS when the range (or libpmem2's tail after it) is taken, or another.
inline int try_reserve(std::uintptr_t base, std::size_t size, Mapping& m) {
  const std::uintptr_t tail = base + size;
  const std::size_t tail_size = reservation_extent(size) - size;
  const bool tail_was_free = range_unmapped(tail, tail_size);
  const int rc = pmem2_vm_reservation_new(&m.reservation, reinterpret_cast<void*>(base), size);
  if (rc != 0) {
    m.reservation = nullptr;
    return rc;
  }
  if (tail_was_free && !range_unmapped(tail, format::page_size)) {
    m.leaked_tail = tail;
    m.leaked_tail_size = tail_size;
  }
  return 0;
}

// Reserves [base, base+size) or throws base_unavailable / io.
inline void reserve_at(const std::string& path, std::uintptr_t base, std::size_t size, Mapping& m) {
  const int rc = try_reserve(base, size, m);
  if (rc == PMEM2_E_MAPPING_EXISTS)
    format::fail(PoolErrc::base_unavailable, path,
                 "its base address " + hex(base) + " (+" + std::to_string(size) +
                     " bytes, and the " + std::to_string((reservation_extent(size) - size) >> 20) +
                     " MiB after it that libpmem2 reserves too) is already in use in this "
                     "process (is the pool already open?)");
  if (rc != 0)
    format::fail(PoolErrc::io, path, "cannot reserve its address range: " + pmem2_text(rc));
}

// Maps the read-write descriptor `fd` into the reservation `m.reservation` (offset 0).
inline void map_into_reservation(const std::string& path, int fd, std::size_t size, Mapping& m) {
  int rc = pmem2_source_from_fd(&m.source, fd);
  if (rc != 0) format::fail(PoolErrc::io, path, "libpmem2 rejects the file: " + pmem2_text(rc));
  pmem2_config* cfg = nullptr;
  rc = pmem2_config_new(&cfg);
  if (rc != 0) format::fail(PoolErrc::io, path, "libpmem2 config: " + pmem2_text(rc));
  // PAGE: accept every file; libpmem2 still picks MAP_SYNC (cache-line granularity) on DAX.
  rc = pmem2_config_set_required_store_granularity(cfg, PMEM2_GRANULARITY_PAGE);
  if (rc == 0) rc = pmem2_config_set_length(cfg, size);
  if (rc == 0) rc = pmem2_config_set_vm_reservation(cfg, m.reservation, 0);
  if (rc == 0) rc = pmem2_map_new(&m.map, cfg, m.source);
  pmem2_config_delete(&cfg);
  if (rc != 0) format::fail(PoolErrc::io, path, "cannot map the file: " + pmem2_text(rc));
  m.persist_fn = pmem2_get_persist_fn(m.map);
  m.page_granularity = pmem2_map_get_store_granularity(m.map) == PMEM2_GRANULARITY_PAGE;
}

// Maps [offset, offset + size) of the file into the reservation at the same offset: the part a
// growth added (Pool::grow). Returns a libpmem2 error code.
inline int map_extension(std::size_t offset, std::size_t size, Mapping& m) {
  pmem2_config* cfg = nullptr;
  int rc = pmem2_config_new(&cfg);
  if (rc != 0) return rc;
  rc = pmem2_config_set_required_store_granularity(cfg, PMEM2_GRANULARITY_PAGE);
  if (rc == 0) rc = pmem2_config_set_offset(cfg, offset);
  if (rc == 0) rc = pmem2_config_set_length(cfg, size);
  if (rc == 0) rc = pmem2_config_set_vm_reservation(cfg, m.reservation, offset);
  pmem2_map* map = nullptr;
  if (rc == 0) rc = pmem2_map_new(&map, cfg, m.source);
  pmem2_config_delete(&cfg);
  if (rc == 0) m.extensions.push_back(map);
  return rc;
}

inline void lock_file(const std::string& path, int fd) {
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return;
  if (errno == EWOULDBLOCK)
    format::fail(PoolErrc::in_use, path, "is open in another process (locked)");
  format::fail(PoolErrc::io, path, "flock failed: " + errno_text(errno));
}

}  // namespace pmds::pm::detail
