// pmds crash lab — writing a crash image as a pool file (simulated backend).
//
// At a crash point the pool file (a shared mapping of it is the simulated persistent memory)
// holds memory as it is: every store applied. A crash image differs from it only on the lines
// the simulator still has undetermined, so the image file is the pool file's data (its sparse
// extents only: most of a pool is never touched) with each undetermined line overwritten by its
// content under the chosen crash image (Snapshot::line_image). This costs what the pool holds
// plus what is undetermined, not the pool's size.
#pragma once

#if !defined(PMDS_BACKEND_SIMULATED)
#error "pmds/crashlab/image_file.hpp needs the simulated backend"
#endif

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "pmds/error.hpp"
#include "pmds/pm/simulator.hpp"

namespace pmds::crashlab {

namespace detail {

inline void pwrite_all(int fd, const void* p, std::size_t n, off_t at, const std::string& path) {
  const auto* b = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, b, n, at);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw Error("pmds crashlab: cannot write " + path + ": " + std::strerror(errno));
    b += w;
    at += w;
    n -= static_cast<std::size_t>(w);
  }
}

}  // namespace detail

// Writes the crash image `choice` of `snap`'s region 0 (whose memory is the shared mapping of
// `source`, still holding what it held at the snapshot) to a new file `out`.
inline void write_crash_image(const pm::sim::Snapshot& snap, const pm::sim::Choice& choice,
                              const std::string& source, const std::string& out) {
  const int in = ::open(source.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) throw Error("pmds crashlab: cannot open " + source + ": " + std::strerror(errno));
  const int fd = ::open(out.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    ::close(in);
    throw Error("pmds crashlab: cannot create " + out + ": " + std::strerror(errno));
  }
  try {
    const off_t size = ::lseek(in, 0, SEEK_END);
    if (size < 0 || ::ftruncate(fd, size) != 0)
      throw Error("pmds crashlab: cannot size " + out + ": " + std::strerror(errno));
    // The data extents of the source (holes stay holes). One buffer per thread for every image:
    // a fresh 1 MiB vector is an mmap, 256 zeroed pages and an munmap for each image.
    static thread_local std::vector<char> buffer(1 << 20);
    for (off_t at = 0; at < size;) {
      const off_t data = ::lseek(in, at, SEEK_DATA);
      if (data < 0) break;  // ENXIO: no data after `at`
      off_t hole = ::lseek(in, data, SEEK_HOLE);
      if (hole < 0) hole = size;
      for (off_t p = data; p < hole;) {
        const auto want =
            static_cast<std::size_t>(std::min<off_t>(hole - p, static_cast<off_t>(buffer.size())));
        const ssize_t r = ::pread(in, buffer.data(), want, p);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
          throw Error("pmds crashlab: cannot read " + source + ": " + std::strerror(errno));
        detail::pwrite_all(fd, buffer.data(), static_cast<std::size_t>(r), p, out);
        p += r;
      }
      at = hole;
    }
    // The undetermined lines, as the image chose them.
    if (snap.region_count() > 0) {
      const auto base = reinterpret_cast<std::uintptr_t>(snap.region_base(0));
      unsigned char line[pm::cache_line_size];
      for (std::size_t i = 0; i < snap.undetermined_lines(); ++i) {
        if (snap.line_region(i) != 0) continue;
        snap.line_image(i, choice.at(i), line);
        const auto offset = reinterpret_cast<std::uintptr_t>(snap.line_address(i)) - base;
        detail::pwrite_all(fd, line, sizeof line, static_cast<off_t>(offset), out);
      }
    }
  } catch (...) {
    ::close(in);
    ::close(fd);
    throw;
  }
  ::close(in);
  ::close(fd);
}

}  // namespace pmds::crashlab
