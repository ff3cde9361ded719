// Parameterized tests over registry entries: the names of the durable ones, and a test-name
// generator that turns an entry's name ("hash-bytes/montage") into a GoogleTest name
// ("hash_bytes_montage"). One test per entry lets ctest run them in parallel and name the one
// that fails. And TempPool, a pool path in the temporary pool directory.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "pmds/bench/temporary_pool.hpp"
#include "pmds/registry/entries.hpp"

namespace pmds::test {

inline std::vector<std::string> durable_entry_names() {
  std::vector<std::string> names;
  for (const registry::Entry& e : registry::entries())
    if (e.durable) names.emplace_back(e.name);
  return names;
}

inline std::string entry_test_name(const testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

// A pool path in the temporary pool directory, removed when the test ends.
class TempPool {
 public:
  explicit TempPool(std::string_view tag) {
    std::string safe(tag);
    std::replace(safe.begin(), safe.end(), '/', '-');
    path_ = (pmds::bench::temporary_pool_dir() /
             ("registry-test-" + std::to_string(::getpid()) + "-" + safe + ".pool"))
                .string();
    std::filesystem::remove(path_);
  }
  ~TempPool() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace pmds::test
