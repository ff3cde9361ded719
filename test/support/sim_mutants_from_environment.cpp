// Linked into every test program of the simulated backend (test/CMakeLists.txt): runs the
// program with the mutants PMDS_SIM_MUTANTS names ("skip@FILE:LINE[:COLUMN],..."; none when it is
// unset). `pmds crashtest --mutate` sets it to check a site's "Mutant killed by test" claim
// (crashlab/mutation.hpp, test_kills): the test must fail with the mutant.
#include <cstdio>
#include <cstdlib>

#include "pmds/crashlab/mutant_text.hpp"
#include "pmds/pm/simulator.hpp"

namespace {

[[maybe_unused]] const bool mutants_installed = [] {
  const char* text = std::getenv("PMDS_SIM_MUTANTS");
  if (text == nullptr || *text == '\0') return false;
  const auto mutants = pmds::crashlab::parse_mutants(text);
  if (!mutants) {
    std::fprintf(stderr, "PMDS_SIM_MUTANTS: unreadable mutants \"%s\"\n", text);
    std::exit(2);
  }
  pmds::pm::sim::set_mutants(*mutants);
  return true;
}();

}  // namespace
