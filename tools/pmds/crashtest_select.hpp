// pmds crashtest — which structures a command line selects (registered ones and fixtures).
#pragma once

#include <algorithm>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "crashtest_options.hpp"
#include "pmds/crashlab/entries.hpp"
#include "pmds/crashlab/workload.hpp"

namespace pmds::crashtest {

// The durable entries the options name, in order, without repeats; nullopt (after printing
// why) when a name is unknown or transient.
inline std::optional<std::vector<const registry::Entry*>> select(const Options& o) {
  std::vector<const registry::Entry*> out;
  const auto add = [&](const registry::Entry* e) {
    for (const auto* x : out)
      if (x == e) return;
    out.push_back(e);
  };
  if (o.all)
    for (const auto* e : crashlab::durable_entries()) add(e);
  if (o.fixtures)
    for (const auto& e : crashlab::fixture_entries()) add(&e);
  for (const std::string& item : o.structures) {
    if (const registry::Entry* f = crashlab::find_entry(item);
        f != nullptr && registry::find(item) == nullptr) {
      add(f);  // a fixture, by its exact name
      continue;
    }
    try {
      for (const auto* e : registry::select(item)) {
        if (!e->durable) {
          if (item.find('*') == std::string::npos && item != "all") {
            std::cerr << "pmds crashtest: " << e->name
                      << " is transient: nothing survives a crash to check\n";
            return std::nullopt;
          }
          continue;  // patterns skip transient entries
        }
        add(e);
      }
    } catch (const std::exception& ex) {
      std::cerr << ex.what() << "\n";
      return std::nullopt;
    }
  }
  if (out.empty()) {
    std::cerr << "pmds crashtest: no durable structure selected (registered: "
              << registry::known_names() << ")\n";
    return std::nullopt;
  }
  if ((o.key_size != 8 || o.value_size != 8) &&
      std::none_of(out.begin(), out.end(),
                   [](const registry::Entry* e) { return e->byte_strings; })) {
    std::cerr << "pmds crashtest: --key-size and --value-size apply to the byte-string maps (the "
                 "-bytes entries), and none is selected\n";
    return std::nullopt;
  }
  if (o.lazy_recovery) {
    const auto other = std::find_if(out.begin(), out.end(), [](const registry::Entry* e) {
      return !crashlab::recovers_lazily_on_request(*e);
    });
    if (other != out.end()) {
      std::cerr << "pmds crashtest: --lazy-recovery applies to the InCLL Masstrees "
                   "(masstree/*, masstree-bytes/*) only, and "
                << (*other)->name << " is selected\n";
      return std::nullopt;
    }
  }
  return out;
}

}  // namespace pmds::crashtest
