// Parameterized tests over registry entries: the names of the durable ones, and a test-name
// generator that turns an entry's name ("hash-bytes/montage") into a GoogleTest name
// ("hash_bytes_montage"). One test per entry lets ctest run them in parallel and name the one
// that fails.
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

#include "pmds/registry.hpp"

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

}  // namespace pmds::test
