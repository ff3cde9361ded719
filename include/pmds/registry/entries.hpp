// pmds — the look-ups over the registry's table: entries(), find, select. Without the list of
// registered structures (pmds/registry.hpp), so a source file that only looks structures up by
// name does not parse every structure.
//
// Where entries() comes from:
//   - a program that links a registry table library (tools/registry_table: pmds's own tools and
//     the tests that use the whole table) defines PMDS_REGISTRY_TABLE_IN_ONE_FILE; entries() is
//     then an ordinary function, compiled once in that library;
//   - any other program compiles the table itself: this header then includes pmds/registry.hpp,
//     which defines entries() inline (minutes of compilation: every registered structure).
// Measured on a 2-core AMD EPYC host (g++ 12, -fsyntax-only): pmds/registry.hpp 9.0 s of CPU,
// registry/descriptor.hpp 0.9 s; the crash lab's sim_lab.hpp 18 s when it included them all.
#pragma once

#include <algorithm>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pmds/registry/descriptor.hpp"

#if defined(PMDS_REGISTRY_TABLE_IN_ONE_FILE)
namespace pmds::registry {
// Every registered structure, in the order of registry.hpp's Registered (the table library's).
std::span<const Entry> entries();
}  // namespace pmds::registry
#else
#include "pmds/registry.hpp"
#endif

namespace pmds::registry {

inline const Entry* find(std::string_view name) {
  for (const Entry& e : entries())
    if (e.name == name) return &e;
  return nullptr;
}

inline std::string known_names() {
  std::string s;
  for (const Entry& e : entries()) {
    if (!s.empty()) s += ", ";
    s += e.name;
  }
  return s.empty() ? "(none registered)" : s;
}

// Resolves a comma-separated selection: exact names, "all", or patterns with one '*' standing for
// the structure or the technique ("hash/*", "*/izraelevitz"). Keeps registry order within a
// pattern, drops repeats. Throws UnknownStructure naming the item that matched nothing.
inline std::vector<const Entry*> select(std::string_view spec) {
  std::vector<const Entry*> chosen;
  const auto add = [&](const Entry& e) {
    if (std::find(chosen.begin(), chosen.end(), &e) == chosen.end()) chosen.push_back(&e);
  };
  std::size_t start = 0;
  while (start <= spec.size()) {
    std::size_t end = spec.find(',', start);
    if (end == std::string_view::npos) end = spec.size();
    const std::string_view item = spec.substr(start, end - start);
    start = end + 1;
    if (item.empty())
      throw UnknownStructure("pmds: empty structure name in \"" + std::string(spec) + "\"");
    bool matched = false;
    const auto slash = item.find('/');
    for (const Entry& e : entries()) {
      bool match = item == "all" || item == e.name;
      if (!match && slash != std::string_view::npos) {
        const std::string_view s = item.substr(0, slash), t = item.substr(slash + 1);
        match = (s == "*" || s == e.structure) && (t == "*" || t == e.technique);
      }
      if (match) {
        add(e);
        matched = true;
      }
    }
    if (!matched)
      throw UnknownStructure("pmds: unknown structure \"" + std::string(item) +
                             "\"; registered: " + known_names() + " (see `pmds list`)");
    if (end == spec.size()) break;
  }
  return chosen;
}

}  // namespace pmds::registry
