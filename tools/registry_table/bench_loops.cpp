// The benchmark's loops (every registered structure's prefill and timed run, bench::target_of),
// compiled once, on the counting backend, for `pmds` and the harness's tests (CMakeLists.txt says
// why).
#include "pmds/registry.hpp"  // registry::instantiate; bench/target.hpp leaves it to us here
#include "pmds/bench/target.hpp"

PMDS_BENCH_LOOPS_HERE();
