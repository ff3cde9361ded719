// pmds — THE list of registered structures × techniques (included by registry.hpp).
//
// To register a new structure or technique: include its header and add ONE line to Registered
// below (a Describe<name, kind, criterion, factory, description>). Every tool — `pmds list`,
// `pmds bench`, `pmds crashtest`, the default suite — picks it up from here. Factories say how
// to build the concrete type (registry.hpp, concept Factory).
#pragma once

#include "pmds/registry.hpp"

namespace pmds::registry {

using Registered = TypeList<>;

}  // namespace pmds::registry
