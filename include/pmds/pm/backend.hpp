// pmds — the compile-time choice of persistence backend (docs/ARCHITECTURE.md §2).
//
// One backend per program: define at most one of PMDS_BACKEND_COUNTING or
// PMDS_BACKEND_SIMULATED before including any pmds header (the CMake targets
// pmds::pmds_counting and pmds::pmds_simulated do it); the default is the hardware backend.
// Mixing backends in one program gives one class two definitions (an ODR violation): build
// one executable per backend, as the project's own tests and tools do.
#pragma once

#include <cstddef>

#if defined(PMDS_BACKEND_COUNTING) && defined(PMDS_BACKEND_SIMULATED)
#error "pmds: define at most one of PMDS_BACKEND_COUNTING and PMDS_BACKEND_SIMULATED"
#endif

namespace pmds::pm {

enum class Backend { hardware, counting, simulated };

#if defined(PMDS_BACKEND_SIMULATED)
inline constexpr Backend backend = Backend::simulated;
#elif defined(PMDS_BACKEND_COUNTING)
inline constexpr Backend backend = Backend::counting;
#else
inline constexpr Backend backend = Backend::hardware;
#endif

constexpr const char* to_string(Backend b) {
  return b == Backend::hardware ? "hardware" : b == Backend::counting ? "counting" : "simulated";
}

inline constexpr std::size_t cache_line_size = 64;

}  // namespace pmds::pm
