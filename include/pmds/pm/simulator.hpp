// pmds — the Px86 crash simulator (DESIGN.md §3). STUB: performs the operations under one
// lock without recording them; the full model replaces this file.
#pragma once

#include <cstddef>
#include <cstring>
#include <mutex>

#include "pmds/pm/instructions.hpp"

namespace pmds::pm::sim {

namespace detail {
inline std::mutex lock;
}

inline void load(const void* addr, void* out, std::size_t n) {
  std::lock_guard g(detail::lock);
  std::memcpy(out, addr, n);
}
inline void store(void* addr, const void* src, std::size_t n) {
  std::lock_guard g(detail::lock);
  std::memcpy(addr, src, n);
}
inline void store_nontemporal(void* addr, const void* src, std::size_t n) {
  store(addr, src, n);
}
template <class F>
void rmw(void* addr, std::size_t n, F&& update) {
  std::lock_guard g(detail::lock);
  unsigned char buf[16];
  std::memcpy(buf, addr, n);
  if (update(static_cast<void*>(buf))) std::memcpy(addr, buf, n);
}
inline void flush(const void*, FlushInstruction) {}
inline void fence() {}

}  // namespace pmds::pm::sim
