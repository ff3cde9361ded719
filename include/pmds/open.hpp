/// \file
/// pmds::open_or_create and pmds::Durable: one durable structure in one pool file, without the
/// structures themselves. A family header (pmds/linkfree_soft.hpp, pmds/montage.hpp,
/// pmds/incll.hpp, pmds/mirror.hpp, pmds/izraelevitz.hpp, pmds/combining.hpp) includes this one
/// with its structures and their layout names; pmds/pmds.hpp includes them all.
///
/// The pool grows: the size given is where a new pool starts, and it grows on demand (doubling,
/// at most 1 GiB a step) up to PoolGrowth::max_size, default_max_pool_size unless given:
/// ```cpp
/// auto big = pmds::open_or_create<pmds::MontageHashMap>("m.pool", 16 << 20,
///                                                       {.max_size = 1ull << 40});
/// ```
/// PoolFull comes at that limit, or when the file system has no room for the next step; nothing
/// is lost, and the next growth is tried when space returns. An existing pool keeps the limit it
/// was created with unless a larger one is passed (up to what its directory, sized at create for
/// its max_size, has room for).
///
/// A file whose creation itself crashed (before the structure's root was written) holds no
/// structure: open_or_create reports it as PoolError bad_argument rather than guessing; remove
/// the file to start afresh.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>

#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/pm/pool.hpp"

namespace pmds {

// The layout name a pool made by open_or_create<S> carries: S's name in `pmds list` (the
// registry checks that its entries agree, registry.hpp). Each family header specializes it for
// the structures it names; empty for any other type, which open_or_create refuses.
template <class S>
inline constexpr std::string_view pool_layout{};

// How far a pool made by open_or_create may grow (the top of this header). The default limit is
// a number rather than a share of the file system's free space, which changes while the pool
// lives: 64 GiB (8 GiB under ThreadSanitizer, whose address range holds only a few such
// reservations). A pool reserves the address range of its limit when it opens (address space
// only, not memory) and its chunk directory has a word per 1 MiB chunk of it (512 KiB for
// 64 GiB), so a far larger default would cost small pools.
#if defined(__SANITIZE_THREAD__)
inline constexpr std::uint64_t default_max_pool_size = std::uint64_t{8} << 30;
#else
inline constexpr std::uint64_t default_max_pool_size = std::uint64_t{64} << 30;
#endif
/// How far a pool made or opened by open_or_create may grow.
struct PoolGrowth {
  std::uint64_t max_size = default_max_pool_size;  ///< bytes; PoolFull beyond it
};

template <class S>
class Durable;
namespace detail {
template <class S, class... CreateArgs>
Durable<S> open_or_create(const std::filesystem::path& path, std::uint64_t pool_size,
                          std::uint64_t max_size, std::uint64_t open_max_size,
                          const CreateArgs&... create_args);
}  // namespace detail

/// A durable structure and the pool it lives in, owned together; movable, not copyable. The
/// destructor (or close()) destroys the structure and closes the pool cleanly; after a crash or
/// kill -9 the next open_or_create recovers it.
template <class S>
class Durable {
 public:
  Durable(Durable&&) noexcept = default;
  Durable& operator=(Durable&& o) noexcept {
    if (this != &o) {
      close();
      pool_ = std::move(o.pool_);
      structure_ = std::move(o.structure_);
      recovered_ = o.recovered_;
    }
    return *this;
  }
  ~Durable() { close(); }

  S& operator*() const { return *structure_; }
  S* operator->() const { return structure_.get(); }
  pm::Pool& pool() const { return *pool_; }
  /// True when the file existed and its structure was recovered (after a clean close or a crash).
  bool recovered() const { return recovered_; }
  /// Destroys the structure, then closes the pool cleanly, now (the destructor does it
  /// otherwise). Idempotent.
  void close() {
    structure_.reset();
    if (pool_) {
      pool_->close();
      pool_.reset();
    }
  }

 private:
  template <class T, class... A>
  friend Durable<T> detail::open_or_create(const std::filesystem::path&, std::uint64_t,
                                           std::uint64_t, std::uint64_t, const A&...);
  Durable(std::unique_ptr<pm::Pool> pool, std::unique_ptr<S> structure, bool recovered)
      : pool_(std::move(pool)), structure_(std::move(structure)), recovered_(recovered) {}

  std::unique_ptr<pm::Pool> pool_;
  std::unique_ptr<S> structure_;  // destroyed before the pool closes (close())
  bool recovered_;
};

namespace detail {

template <class First, class... Rest>
const auto& last_of(const First& first, const Rest&... rest) {
  if constexpr (sizeof...(Rest) == 0)
    return first;
  else
    return last_of(rest...);
}

// S(open_existing, pool, options) when S's recovery takes the last create argument (the options
// of a running nbMontage or InCLL structure: its epoch length, its background thread), else
// S(open_existing, pool): what S was created with (bucket counts, capacities) is in the pool.
template <class S, class... A>
std::unique_ptr<S> open_structure(pm::Pool& pool, const A&... create_args) {
  if constexpr (sizeof...(A) > 0) {
    using Last = std::remove_cvref_t<decltype(last_of(create_args...))>;
    if constexpr (std::is_constructible_v<S, OpenTag, pm::Pool&, const Last&>)
      return std::make_unique<S>(open_existing, pool, last_of(create_args...));
  }
  return std::make_unique<S>(open_existing, pool);
}

// max_size: the limit of a new pool; open_max_size: the limit passed to an existing pool's open
// (0: its own).
template <class S, class... CreateArgs>
Durable<S> open_or_create(const std::filesystem::path& path, std::uint64_t pool_size,
                          std::uint64_t max_size, std::uint64_t open_max_size,
                          const CreateArgs&... create_args) {
  static_assert(
      !pool_layout<S>.empty(),
      "open_or_create<S> takes the durable structures of the family headers (pmds/pmds.hpp "
      "includes them all); build "
      "any other with S(create_new, pool, ...) on a pm::Pool");
  pm::PoolOptions pool_options;
  if constexpr (requires { S::Policy::pool_options(); })
    pool_options = S::Policy::pool_options();  // Mirror: room for the DRAM twin
  pool_options.max_size = std::max<std::uint64_t>(max_size, pool_size);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    try {
      auto pool = std::make_unique<pm::Pool>(
          pm::Pool::create(path.string(), pool_size, pool_layout<S>, pool_options));
      auto structure = std::make_unique<S>(create_new, *pool, create_args...);
      return Durable<S>(std::move(pool), std::move(structure), false);
    } catch (const PoolError& e) {
      // Another process created the file between the check and the create: open it.
      if (e.code() != PoolErrc::already_exists) {
        std::filesystem::remove(path, ec);  // a pool whose structure could not be built
        throw;
      }
    } catch (...) {
      std::filesystem::remove(path, ec);
      throw;
    }
  }
  auto pool =
      std::make_unique<pm::Pool>(pm::Pool::open(path.string(), pool_layout<S>, open_max_size));
  std::unique_ptr<S> structure;
  try {
    structure = open_structure<S>(*pool, create_args...);
  } catch (...) {
    // Not close(): that would mark the pool clean, and the next open would trust it (InCLL
    // keeps its failed epoch only after an unclean shutdown).
    pool->abandon();
    throw;
  }
  return Durable<S>(std::move(pool), std::move(structure), true);
}

}  // namespace detail

/// Opens the pool file at `path` and recovers the S it holds, or, when there is no such file,
/// creates one starting at `initial_size` bytes (a multiple of 4096) holding a new, empty
/// S(create_new, pool, create_args...): S's own arguments and defaults (a hash set's bucket
/// count, nbMontage's montage::Options, InCLL's incll::Options, a heap's capacity). An existing
/// structure keeps what it was created with; an options object passed last also governs a
/// recovered nbMontage or InCLL structure.
/// `growth` says how far the pool may grow (see the top of this header); the overload without it
/// uses default_max_pool_size for a new pool and keeps an existing pool's own limit.
template <class S, class... CreateArgs>
Durable<S> open_or_create(const std::filesystem::path& path, std::uint64_t initial_size,
                          const PoolGrowth& growth, const CreateArgs&... create_args) {
  return detail::open_or_create<S>(path, initial_size, growth.max_size, growth.max_size,
                                   create_args...);
}
template <class S, class... CreateArgs>
Durable<S> open_or_create(const std::filesystem::path& path, std::uint64_t initial_size,
                          const CreateArgs&... create_args) {
  return detail::open_or_create<S>(path, initial_size, default_max_pool_size, 0, create_args...);
}

}  // namespace pmds
