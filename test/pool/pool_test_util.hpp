// Helpers shared by the pool and allocator tests: unique pool paths, file snapshots (to check
// that a failed open leaves a file untouched), forked children that report through exit codes.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

namespace pool_test {

// A directory for pool files: /dev/shm when present (fast, tmpfs), else /tmp.
inline std::string scratch_dir() {
  struct stat st;
  if (::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && ::access("/dev/shm", W_OK) == 0)
    return "/dev/shm";
  return "/tmp";
}

// A path unique to this process and call; the file is removed when the object dies.
class TempPath {
 public:
  explicit TempPath(const std::string& name, const std::string& dir = scratch_dir()) {
    static std::atomic<int> counter{0};
    path_ = dir + "/pmds_" + name + "_" + std::to_string(::getpid()) + "_" +
            std::to_string(counter.fetch_add(1)) + ".pool";
    ::unlink(path_.c_str());
  }
  ~TempPath() {
    ::unlink(path_.c_str());
    ::rmdir(path_.c_str());
  }
  TempPath(const TempPath&) = delete;
  TempPath& operator=(const TempPath&) = delete;
  const std::string& str() const { return path_; }
  operator const std::string&() const { return path_; }  // NOLINT

 private:
  std::string path_;
};

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

// Runs body() in a forked child and returns its exit status (the child's return value of body,
// 100 + n for an exception, 200 for an abnormal end). The child never returns into the test.
inline int run_in_child(const std::function<int()>& body) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int code = 0;
    try {
      code = body();
    } catch (...) {
      code = 100;
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200;
}

// Runs `body` in a child process, which must end it by calling ::_exit(0) with the structure
// and pool still open (as kill -9 would: no destructor runs, so no clean close syncs; the pool
// file keeps every store, and recovery must not trust what came after the last sync). A body
// that returns instead fails the test.
template <class F>
void in_killed_child(F&& body) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    body();
    ::_exit(4);  // too late: the body's destructors have closed the structure cleanly
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
}

// Runs `body` in a child process that then dies of SIGKILL with whatever the body left open
// (what `kill -9` does to a real writer: no destructor runs). The child exits without the
// signal, failing the test, when the body throws or records a test failure.
template <class F>
void in_child_killed_by_sigkill(F&& body) {
  std::fflush(nullptr);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = 3;
    try {
      body();
      if (!::testing::Test::HasFailure()) ::raise(SIGKILL);
    } catch (...) {
      code = 4;
    }
    ::_exit(code);  // reached only when the child could not do its part
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "the child ended otherwise (status " << status << ")";
}

}  // namespace pool_test
