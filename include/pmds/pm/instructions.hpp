// pmds — the x86 persistence instructions, and the choice among them made once at start-up.
//
// Hand-written rather than taken from libpmem2's pmem2_get_flush_fn(): libpmem2 hands out the
// flush as a function pointer, and a durable structure flushes on its hot path, where an
// inlined instruction selected by a well-predicted branch is cheaper than an indirect call.
// libpmem is still asked the one question it answers best: whether the platform flushes CPU
// caches on power loss (eADR), in which case flushes are unnecessary.
#pragma once

#include <cpuid.h>
#include <libpmem.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace pmds::pm {

// clflush is 0 so that a flush issued before the dynamic initialiser below has run (from
// another static initialiser) still uses the one instruction every x86-64 CPU has.
enum class FlushInstruction : std::uint8_t { clflush = 0, clflushopt, clwb, none };

constexpr const char* to_string(FlushInstruction f) {
  switch (f) {
    case FlushInstruction::clflush:
      return "clflush";
    case FlushInstruction::clflushopt:
      return "clflushopt";
    case FlushInstruction::clwb:
      return "clwb";
    case FlushInstruction::none:
      return "none (eADR)";
  }
  return "?";
}

namespace detail {

inline bool env_flag(const char* name, bool& value) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return false;
  value = !(std::strcmp(v, "0") == 0 || std::strcmp(v, "false") == 0 || std::strcmp(v, "no") == 0);
  return true;
}

// PMDS_EADR=1 forces eADR mode (no flushes), PMDS_EADR=0 forbids it; unset asks libpmem.
inline bool detect_eadr() {
  bool forced = false;
  if (env_flag("PMDS_EADR", forced)) return forced;
  return pmem_has_auto_flush() == 1;
}

// CPUID leaf 7, EBX bit 24 = CLWB, bit 23 = CLFLUSHOPT. PMDS_FLUSH=clwb|clflushopt|clflush
// overrides (to measure or test one instruction); an override the CPU lacks is ignored.
inline FlushInstruction detect_flush_instruction() {
  if (detect_eadr()) return FlushInstruction::none;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  bool has_clwb = false, has_clflushopt = false;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) {
    has_clwb = (ebx >> 24) & 1;
    has_clflushopt = (ebx >> 23) & 1;
  }
  if (const char* v = std::getenv("PMDS_FLUSH")) {
    if (std::strcmp(v, "clflush") == 0) return FlushInstruction::clflush;
    if (std::strcmp(v, "clflushopt") == 0 && has_clflushopt) return FlushInstruction::clflushopt;
    if (std::strcmp(v, "clwb") == 0 && has_clwb) return FlushInstruction::clwb;
  }
  if (has_clwb) return FlushInstruction::clwb;
  if (has_clflushopt) return FlushInstruction::clflushopt;
  return FlushInstruction::clflush;
}

inline FlushInstruction flush_instruction = detect_flush_instruction();

// Emulated extra latency after each fence (InCLL §6 adds 100–1000 ns), hardware backend.
inline std::atomic<std::uint32_t> fence_latency_ns{0};

inline void spin_for_ns(std::uint32_t ns) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (std::chrono::steady_clock::now() < until) __builtin_ia32_pause();
}

}  // namespace detail

// The instruction pm::flush uses in this process.
inline FlushInstruction flush_instruction() {
  return detail::flush_instruction;
}

// True when the platform (or PMDS_EADR=1) makes flushes unnecessary.
inline bool eadr() {
  return detail::flush_instruction == FlushInstruction::none;
}

// Sets the emulated latency added after every fence by the hardware and counting backends.
inline void set_fence_latency_ns(std::uint32_t ns) {
  detail::fence_latency_ns.store(ns, std::memory_order_relaxed);
}
inline std::uint32_t fence_latency_ns() {
  return detail::fence_latency_ns.load(std::memory_order_relaxed);
}

namespace hw {

// Writes back one cache line (the one holding p) with the given instruction.
inline void flush_line(const void* p, FlushInstruction how) {
  auto* line = const_cast<char*>(static_cast<const char*>(p));
  switch (how) {
    case FlushInstruction::clwb:
      asm volatile("clwb %0" : "+m"(*line));
      break;
    case FlushInstruction::clflushopt:
      asm volatile("clflushopt %0" : "+m"(*line));
      break;
    case FlushInstruction::clflush:
      asm volatile("clflush %0" : "+m"(*line));
      break;
    case FlushInstruction::none:
      break;
  }
}

inline void sfence() {
  asm volatile("sfence" ::: "memory");
  if (const std::uint32_t ns = fence_latency_ns(); ns != 0) [[unlikely]]
    detail::spin_for_ns(ns);
}

}  // namespace hw
}  // namespace pmds::pm
