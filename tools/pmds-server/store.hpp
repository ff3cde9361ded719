// pmds-server — the map a server serves: any durable pmds map with byte-string keys and values,
// opened (recovered) or created through pmds::open_or_create, behind one small interface.
//
// The interface is virtual because the structure is chosen on the command line; a call through
// it costs a few nanoseconds against the microseconds of a request's round trip.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pmds/interfaces.hpp"
#include "pmds/pm/pool.hpp"

namespace pmds::server {

using Visit = std::function<void(std::string_view key, std::string_view value)>;

class Store {
 public:
  virtual ~Store() = default;

  virtual std::string_view structure() const = 0;  // its name in `pmds list`
  virtual Criterion criterion() const = 0;
  // What a crash can lose, in words (INFO persistence, the ready line's documentation).
  virtual std::string_view crash_loses() const = 0;
  virtual bool ordered() const = 0;  // keys in byte order: SCAN and KEYS are served
  virtual std::size_t max_key_size() const = 0;
  virtual std::size_t max_value_size() const = 0;

  virtual std::optional<std::string> get(std::string_view key) = 0;
  virtual bool put(std::string_view key, std::string_view value) = 0;  // true if it was absent
  virtual bool remove(std::string_view key) = 0;                       // true if it was present
  virtual bool contains(std::string_view key) = 0;
  // Ordered stores: up to max_count keys >= from in byte order, each visited was in the map when
  // it was read (weakly consistent under concurrent writes). Returns how many.
  virtual std::size_t scan(std::string_view from, std::size_t max_count, const Visit& visit) = 0;
  // Every element; only while no other thread uses the store.
  virtual void for_each_quiescent(const Visit& visit) = 0;
  // Everything completed before the call is durable when it returns.
  virtual void sync() = 0;

  virtual pm::Pool& pool() = 0;
  virtual bool recovered() const = 0;
};

// The structures a server can serve, by their names in `pmds list`.
std::vector<std::string_view> servable_structures();

// Opens the store in `path` (recovering it) or creates it with `pool_size` bytes, growing up to
// `max_pool_size`. Throws pmds::Error (PoolError and its kinds) for a bad file or size, and
// std::invalid_argument for a structure that cannot be served.
std::unique_ptr<Store> open_store(std::string_view structure, const std::string& path,
                                  std::uint64_t pool_size, std::uint64_t max_pool_size);

}  // namespace pmds::server
