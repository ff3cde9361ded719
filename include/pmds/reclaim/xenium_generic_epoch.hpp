// pmds — xenium's generic_epoch_based reclaimer (Debian libxenium-dev), included in one place:
// reclaim/xenium_epoch.hpp's domain and comparators/xenium.hpp's structures both use it.
#pragma once

// xenium orders a relaxed flag store before its epoch load with a seq_cst fence; GCC warns that
// ThreadSanitizer does not model fences (-Wtsan). xenium compensates under TSan with stronger
// orders on the loads (TSAN_MEMORY_ORDER), so the warning is silenced here.
#if defined(__SANITIZE_THREAD__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtsan"
#endif
#include <xenium/reclamation/generic_epoch_based.hpp>
#if defined(__SANITIZE_THREAD__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
