// pmds-server — the servable maps behind server::Store (store.hpp).
#include "store.hpp"

#include <stdexcept>
#include <string>

#include "pmds/pmds.hpp"

namespace pmds::server {
namespace {

template <class S>
class StoreOf final : public Store {
 public:
  StoreOf(Durable<S> durable, std::string_view crash_loses)
      : durable_(std::move(durable)), crash_loses_(crash_loses) {}

  std::string_view structure() const override { return pool_layout<S>; }
  Criterion criterion() const override { return S::criterion; }
  std::string_view crash_loses() const override { return crash_loses_; }
  bool ordered() const override {
    return requires(S & s) {
      s.scan(std::string_view{}, 0, [](auto, auto) {});
    };
  }
  std::size_t max_key_size() const override { return S::max_key_size; }
  std::size_t max_value_size() const override { return S::max_value_size; }

  std::optional<std::string> get(std::string_view key) override { return durable_->get(key); }
  bool put(std::string_view key, std::string_view value) override {
    return durable_->put(key, value);
  }
  bool remove(std::string_view key) override { return durable_->remove(key); }
  bool contains(std::string_view key) override { return durable_->contains(key); }
  std::size_t scan(std::string_view from, std::size_t max_count, const Visit& visit) override {
    if constexpr (requires(S & s) { s.scan(from, max_count, visit); })
      return durable_->scan(from, max_count,
                            [&](std::string_view k, std::string_view v) { visit(k, v); });
    else
      throw std::logic_error("pmds-server: scan on an unordered store");
  }
  void for_each_quiescent(const Visit& visit) override {
    durable_->for_each([&](std::string_view k, std::string_view v) { visit(k, v); });
  }
  void sync() override {
    if constexpr (Syncable<S>) durable_->sync();  // else every completed write is durable already
  }
  pm::Pool& pool() override { return durable_.pool(); }
  bool recovered() const override { return durable_.recovered(); }

 private:
  Durable<S> durable_;
  std::string_view crash_loses_;
};

template <class S>
std::unique_ptr<Store> open_as(const std::string& path, std::uint64_t pool_size,
                               std::uint64_t max_pool_size, std::string_view crash_loses) {
  return std::make_unique<StoreOf<S>>(
      open_or_create<S>(path, pool_size, PoolGrowth{.max_size = max_pool_size}), crash_loses);
}

// nbMontage §3: a crash loses at most the last two epochs (10 ms each by default); InCLL §4
// (InCLL and its LOGGING mode alike): the epoch the crash hit (64 ms by default). WAITAOF (sync)
// makes everything before it durable.
// SOFT (Zuriel et al.): durable linearizability, every write durable before its reply.
constexpr std::string_view soft_loss = "nothing that was acknowledged";
constexpr std::string_view montage_loss =
    "the writes of the last two epochs (about 20 ms) not covered by a completed WAITAOF";
constexpr std::string_view incll_loss =
    "the writes of the epoch the crash hit (about 64 ms) not covered by a completed WAITAOF";

}  // namespace

std::vector<std::string_view> servable_structures() {
  return {pool_layout<SoftStringHashMap>,        pool_layout<SoftStringSkipList>,
          pool_layout<MontageByteStringHashMap>, pool_layout<MontageByteStringSkipList>,
          pool_layout<InCLLStringMasstree>,      pool_layout<LoggingStringMasstree>};
}

std::unique_ptr<Store> open_store(std::string_view structure, const std::string& path,
                                  std::uint64_t pool_size, std::uint64_t max_pool_size) {
  if (structure == pool_layout<SoftStringHashMap>)
    return open_as<SoftStringHashMap>(path, pool_size, max_pool_size, soft_loss);
  if (structure == pool_layout<SoftStringSkipList>)
    return open_as<SoftStringSkipList>(path, pool_size, max_pool_size, soft_loss);
  if (structure == pool_layout<MontageByteStringHashMap>)
    return open_as<MontageByteStringHashMap>(path, pool_size, max_pool_size, montage_loss);
  if (structure == pool_layout<MontageByteStringSkipList>)
    return open_as<MontageByteStringSkipList>(path, pool_size, max_pool_size, montage_loss);
  if (structure == pool_layout<InCLLStringMasstree>)
    return open_as<InCLLStringMasstree>(path, pool_size, max_pool_size, incll_loss);
  if (structure == pool_layout<LoggingStringMasstree>)
    return open_as<LoggingStringMasstree>(path, pool_size, max_pool_size, incll_loss);
  std::string names;
  for (std::string_view s : servable_structures())
    names += (names.empty() ? "" : ", ") + std::string(s);
  throw std::invalid_argument(
      "pmds-server: cannot serve '" + std::string(structure) +
      "': it is not a map with byte-string keys and values (servable: " + names + ")");
}

}  // namespace pmds::server
