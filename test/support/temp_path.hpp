// Temporary pool paths for the tests: unique per process and call, removed when the object dies,
// in /dev/shm when present (tmpfs) or /tmp.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <string>

namespace pmds::test {

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

}  // namespace pmds::test
