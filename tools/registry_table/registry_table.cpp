// The registry's table of every structure, compiled once per backend for pmds's own programs
// (tools/registry_table/CMakeLists.txt says why), with what each backend's programs add to it:
// the benchmark's loops (counting: `pmds`), the crash lab's fixtures (simulated and hardware).
#include "pmds/registry.hpp"

PMDS_REGISTRY_TABLE_HERE();

#if defined(PMDS_BACKEND_COUNTING)
#include "pmds/bench/target.hpp"

PMDS_BENCH_LOOPS_HERE();
#else
#include "pmds/crashlab/fixtures.hpp"

PMDS_FIXTURE_TABLE_HERE();
#endif
