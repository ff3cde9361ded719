// The registry's table (registry::entries(): every registered structure), compiled once per
// backend for pmds's own programs (CMakeLists.txt says why).
#include "pmds/registry.hpp"

PMDS_REGISTRY_TABLE_HERE();
