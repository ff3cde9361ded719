// pmds crash lab — the look-ups over the lab's subjects: the registry's durable entries and the
// planted-bug fixtures (crashlab/fixtures.hpp), by name. Without the fixtures' list, as
// registry/entries.hpp is without the registry's: a program that links a table library
// (PMDS_FIXTURE_TABLE_IN_ONE_FILE, tools/registry_table) gets fixture_entries() from it; any other
// program compiles the fixtures here, through crashlab/fixtures.hpp.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "pmds/registry/entries.hpp"

#if defined(PMDS_FIXTURE_TABLE_IN_ONE_FILE)
namespace pmds::crashlab {
// The fixtures as registry entries (their own table: registry::entries() does not list them).
std::span<const registry::Entry> fixture_entries();
}  // namespace pmds::crashlab
#else
#include "pmds/crashlab/fixtures.hpp"
#endif

namespace pmds::crashlab {

// Planted-bug fixtures only (the controls excluded).
inline std::vector<const registry::Entry*> planted_bugs() {
  std::vector<const registry::Entry*> out;
  for (const auto& e : fixture_entries())
    if (e.name.find("-bug-") != std::string_view::npos) out.push_back(&e);
  return out;
}

// The bug-free controls among the fixtures.
inline std::vector<const registry::Entry*> fixture_controls() {
  std::vector<const registry::Entry*> out;
  for (const auto& e : fixture_entries())
    if (e.name.find("-bug-") == std::string_view::npos) out.push_back(&e);
  return out;
}

// A registered structure or a fixture, by name (nullptr when neither).
inline const registry::Entry* find_entry(std::string_view name) {
  if (const registry::Entry* e = registry::find(name)) return e;
  for (const auto& e : fixture_entries())
    if (e.name == name) return &e;
  return nullptr;
}

// Every registered durable structure (the default suite's subjects).
inline std::vector<const registry::Entry*> durable_entries() {
  std::vector<const registry::Entry*> out;
  for (const auto& e : registry::entries())
    if (e.durable) out.push_back(&e);
  return out;
}

}  // namespace pmds::crashlab
