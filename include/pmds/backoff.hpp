// pmds::backoff — how a thread waits for another in the lock-based and blocking parts (Masstree's
// node locks, InCLL's epoch barrier): pause, then yield, since the machine may run more threads
// than cores.
#pragma once

#include <thread>

namespace pmds {

inline void backoff(int& spins) {
  if (++spins < 64)
    __builtin_ia32_pause();
  else
    std::this_thread::yield();
}

}  // namespace pmds
