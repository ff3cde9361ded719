// pmds bench — where the runner's temporary pool files go, and their removal when a run is
// interrupted (a signal handler may call remove_temporary_pool_now).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

namespace pmds::bench {

// Where temporary pool files go: $PMDS_POOL_DIR, else /dev/shm (memory, like the page cache a
// DAX-less machine gives anyway), else the system temporary directory.
inline std::filesystem::path temporary_pool_dir() {
  if (const char* d = std::getenv("PMDS_POOL_DIR"); d != nullptr && *d != '\0') return d;
  std::error_code ec;
  if (std::filesystem::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0)
    return "/dev/shm";
  return std::filesystem::temp_directory_path();
}

namespace detail {
// The temporary pool file in use, so that an interrupted run can remove it from a signal
// handler (remove_temporary_pool_now: unlink is async-signal-safe). One at a time: the runner
// uses one pool at a time.
inline char temporary_pool_in_use[4096] = {};
inline std::atomic<bool> temporary_pool_noted{false};
}  // namespace detail

inline std::string temporary_pool_path(std::string_view name) {
  static std::atomic<unsigned> counter{0};
  std::string safe(name);
  std::replace(safe.begin(), safe.end(), '/', '-');
  std::string path =
      (temporary_pool_dir() / ("pmds-bench-" + std::to_string(::getpid()) + "-" +
                               std::to_string(counter.fetch_add(1)) + "-" + safe + ".pool"))
          .string();
  detail::temporary_pool_noted.store(false);
  if (path.size() < sizeof detail::temporary_pool_in_use) {
    std::memcpy(detail::temporary_pool_in_use, path.c_str(), path.size() + 1);
    detail::temporary_pool_noted.store(true);
  }
  return path;
}

// For a SIGINT/SIGTERM handler: removes the temporary pool file of the run in progress.
inline void remove_temporary_pool_now() noexcept {
  if (detail::temporary_pool_noted.load()) ::unlink(detail::temporary_pool_in_use);
}

}  // namespace pmds::bench
