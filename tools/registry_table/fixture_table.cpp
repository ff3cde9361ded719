// The crash lab's fixtures' table, compiled once per backend for pmds's own programs
// (CMakeLists.txt says why).
#include "pmds/crashlab/fixtures.hpp"

PMDS_FIXTURE_TABLE_HERE();
