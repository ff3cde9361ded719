// The registry's and the crash lab's fixtures' tables, compiled once per backend for pmds's own
// programs (tools/registry_table/CMakeLists.txt says why), with the benchmark's loops for the
// counting backend (`pmds`). PMDS_REGISTRY_TABLE_ONLY (the sanitizer builds): the registry's
// table alone.
#include "pmds/registry.hpp"

PMDS_REGISTRY_TABLE_HERE();

#if !defined(PMDS_REGISTRY_TABLE_ONLY)
#include "pmds/crashlab/fixtures.hpp"

PMDS_FIXTURE_TABLE_HERE();

#if defined(PMDS_BACKEND_COUNTING)
#include "pmds/bench/target.hpp"

PMDS_BENCH_LOOPS_HERE();
#endif
#endif
