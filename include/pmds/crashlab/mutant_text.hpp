// pmds crash lab — mutants as text: "skip@FILE:LINE[:COLUMN]" or "drop-flushes@FILE:LINE[:COLUMN]"
// (a site of pm/sim/sites.hpp turned into a no-op, or a fence that drops its pending flushes),
// several joined by commas. `pmds crashtest --mutant` takes them, the mutation report and the
// replay commands print them, and the recovery process receives them (crashlab/child.hpp).
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pmds/pm/sim/sites.hpp"

namespace pmds::crashlab {

using pm::sim::Mutant;
using pm::sim::MutationMode;

inline std::string mutant_text(const Mutant& m) {
  // Appended piece by piece: GCC 12's -Wrestrict misfires on "literal" + std::string here.
  std::string t = m.mode == MutationMode::skip ? "skip@" : "drop-flushes@";
  t += m.file;
  t += ':';
  t += std::to_string(m.line);
  if (m.column != 0) {
    t += ':';
    t += std::to_string(m.column);
  }
  return t;
}

// nullopt when malformed.
inline std::optional<Mutant> parse_mutant(std::string_view text) {
  Mutant m;
  const auto at = text.find('@');
  if (at == std::string_view::npos) return std::nullopt;
  const std::string_view mode = text.substr(0, at);
  if (mode == "skip")
    m.mode = MutationMode::skip;
  else if (mode == "drop-flushes")
    m.mode = MutationMode::drop_flushes;
  else
    return std::nullopt;
  std::string_view rest = text.substr(at + 1);
  // FILE:LINE or FILE:LINE:COLUMN; a number is all digits, at most 9 of them.
  const auto number = [](std::string_view d) -> std::optional<std::uint32_t> {
    if (d.empty() || d.size() > 9 || d.find_first_not_of("0123456789") != std::string_view::npos)
      return std::nullopt;
    return static_cast<std::uint32_t>(std::stoul(std::string(d)));
  };
  std::vector<std::uint32_t> numbers;
  while (numbers.size() < 2) {
    const auto colon = rest.rfind(':');
    if (colon == std::string_view::npos) break;
    const auto n = number(rest.substr(colon + 1));
    if (!n) break;
    numbers.insert(numbers.begin(), *n);
    rest = rest.substr(0, colon);
  }
  if (numbers.empty() || rest.empty() || numbers[0] == 0) return std::nullopt;
  m.file = std::string(rest);
  m.line = numbers[0];
  if (numbers.size() == 2) m.column = numbers[1];
  return m;
}

// Several, comma separated (a pair removed together: is each one's survival the other's
// doing?); nullopt if any is malformed.
inline std::optional<std::vector<Mutant>> parse_mutants(std::string_view text) {
  std::vector<Mutant> out;
  std::size_t start = 0;
  for (;;) {
    const auto comma = std::min(text.find(',', start), text.size());
    const auto m = parse_mutant(text.substr(start, comma - start));
    if (!m) return std::nullopt;
    out.push_back(*m);
    if (comma == text.size()) return out;
    start = comma + 1;
  }
}

inline std::string mutants_text(const std::vector<Mutant>& mutants) {
  std::string t;
  for (const Mutant& m : mutants) {
    if (!t.empty()) t += ',';
    t += mutant_text(m);
  }
  return t;
}

}  // namespace pmds::crashlab
