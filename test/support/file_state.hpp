// Whole-file snapshots for the tests: read, write and patch a file, and compare everything a
// failed open must leave as it was (bytes, size, times).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <fstream>
#include <string>
#include <vector>

namespace pmds::test {

// Everything a failed open must leave as it was.
struct FileState {
  std::vector<char> bytes;
  off_t size = 0;
  timespec mtime{};
  timespec ctime{};
  bool operator==(const FileState& o) const {
    return bytes == o.bytes && size == o.size && mtime.tv_sec == o.mtime.tv_sec &&
           mtime.tv_nsec == o.mtime.tv_nsec && ctime.tv_sec == o.ctime.tv_sec &&
           ctime.tv_nsec == o.ctime.tv_nsec;
  }
};

inline std::vector<char> read_file(const std::string& path) {
  std::vector<char> bytes;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return bytes;
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    bytes.resize(static_cast<std::size_t>(st.st_size));
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t r = ::read(fd, bytes.data() + done, bytes.size() - done);
      if (r <= 0) break;
      done += static_cast<std::size_t>(r);
    }
    bytes.resize(done);
  }
  ::close(fd);
  return bytes;
}

inline FileState file_state(const std::string& path) {
  FileState s;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return s;
  s.size = st.st_size;
  s.mtime = st.st_mtim;
  s.ctime = st.st_ctim;
  if (S_ISREG(st.st_mode)) s.bytes = read_file(path);
  return s;
}

inline void write_file(const std::string& path, const std::vector<char>& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t r = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (r <= 0) break;
    done += static_cast<std::size_t>(r);
  }
  ::close(fd);
}

// Overwrites n bytes at offset of an existing file.
inline void patch_file(const std::string& path, std::size_t offset, const void* data,
                       std::size_t n) {
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
}

}  // namespace pmds::test
