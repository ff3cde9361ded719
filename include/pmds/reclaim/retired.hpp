// pmds — a retired pointer and its deleter, type-erased without allocation.
//
// Both epoch domains (reclaim/minimal_epoch.hpp, reclaim/xenium_epoch.hpp) keep, for every
// retired pointer, the deleter to run once the pointer's epoch is safe. The structures pass a
// lambda capturing a pointer or two (the pool allocator, the structure), so such deleters are
// stored inline in 16 bytes and a Retired is trivially copyable: retire lists are plain vectors
// that grow without running constructors. A larger or non-trivially-copyable deleter is moved
// into one heap box, freed when it has run. (Hand-written rather than std::function or
// std::move_only_function: those are not trivially copyable and may allocate per retire.)
#pragma once

#include <concepts>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

namespace pmds::reclaim {

// A deleter for a T* (T may be void): callable as deleter(p). It runs exactly once, on
// whichever thread finds the pointer's epoch safe; it must not throw (a throw terminates) and
// must not pin or retire in the domain that runs it.
template <class D, class T>
concept DeleterFor = std::invocable < std::decay_t<D>
&, T* > ;

class Retired {
 public:
  static constexpr std::size_t inline_size = 2 * sizeof(void*);

  Retired() = default;

  template <class T, class D>
  requires DeleterFor<D, T> Retired(T* p, D&& deleter)
      : pointer_(const_cast<void*>(static_cast<const void*>(p))) {
    using Fn = std::decay_t<D>;
    if constexpr (sizeof(Fn) <= inline_size && alignof(Fn) <= alignof(void*) &&
                  std::is_trivially_copyable_v<Fn>) {
      ::new (static_cast<void*>(storage_)) Fn(std::forward<D>(deleter));
      run_ = [](void* pointer, void* storage) noexcept {
        (*std::launder(static_cast<Fn*>(storage)))(static_cast<T*>(pointer));
      };
    } else {
      Fn* box = new Fn(std::forward<D>(deleter));
      std::memcpy(storage_, &box, sizeof box);
      run_ = [](void* pointer, void* storage) noexcept {
        Fn* boxed;
        std::memcpy(&boxed, storage, sizeof boxed);
        (*boxed)(static_cast<T*>(pointer));
        delete boxed;
      };
    }
  }

  void* pointer() const noexcept { return pointer_; }

  // Runs the deleter on the pointer. Call exactly once per retired pointer.
  void run() noexcept { run_(pointer_, storage_); }

 private:
  void* pointer_ = nullptr;
  void (*run_)(void* pointer, void* storage) noexcept = nullptr;
  alignas(void*) unsigned char storage_[inline_size] = {};
};

static_assert(std::is_trivially_copyable_v<Retired>);

}  // namespace pmds::reclaim
