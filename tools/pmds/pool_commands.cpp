// pmds check and pmds dump: what a PMDK user expects of `pmempool check` and `pmempool info`,
// for a pool file holding one registered structure (its layout name is the registry name).
//
//   pmds check POOL [--in-place]   recovers the structure, verifies what can be verified without
//                                  its history, prints the element count and the recovery time
//   pmds dump POOL [--in-place]    recovers it and prints its contents as JSON lines
//
// Recovery writes to the pool (it finishes what a crash interrupted and marks the file in use),
// so both work on a copy of the file unless --in-place is given; with --in-place, recovery runs
// on the file itself, which is then closed cleanly. The contents are always read from a copy:
// reading a queue, stack or priority queue takes its elements out.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/pmds.hpp"
#include "pmds/registry/entries.hpp"

namespace pmds::cli {

namespace {

// A copy of a pool file in the temporary directory, removed on destruction.
class PoolCopy {
 public:
  explicit PoolCopy(const std::string& from) {
    path_ = (std::filesystem::temp_directory_path() /
             ("pmds-check-" + std::to_string(::getpid()) + ".pool"))
                .string();
    std::filesystem::remove(path_);
    std::filesystem::copy_file(from, path_);
  }
  PoolCopy(const PoolCopy&) = delete;
  PoolCopy& operator=(const PoolCopy&) = delete;
  ~PoolCopy() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// What recovering a pool found.
struct Recovered {
  const registry::Entry* entry = nullptr;
  double milliseconds = 0;  // open + recovery of the structure
  std::vector<registry::Item> items;
  // A byte-string map's elements as they are (when by_strings): any bytes, as pmds-server
  // writes them, not the registry's fixed-size encoding of 8-byte keys, in key byte order.
  bool by_strings = false;
  std::vector<std::pair<std::string, std::string>> strings;
  std::size_t slots = 0, free_slots = 0;  // every slot of the used chunks; those free after it
};

// Opens the byte-string map S a pool holds and reads its elements.
template <class S>
void read_strings(pm::Pool& pool, Recovered& r) {
  S map(open_existing, pool);
  r.strings.clear();
  map.for_each([&](std::string_view k, std::string_view v) { r.strings.emplace_back(k, v); });
  std::sort(r.strings.begin(), r.strings.end());
}

// The byte-string maps by layout: read_strings<S> for each, or null.
void (*string_reader(std::string_view layout))(pm::Pool&, Recovered&) {
  if (layout == pool_layout<SoftStringHashMap>) return read_strings<SoftStringHashMap>;
  if (layout == pool_layout<SoftStringSkipList>) return read_strings<SoftStringSkipList>;
  if (layout == pool_layout<MontageByteStringHashMap>)
    return read_strings<MontageByteStringHashMap>;
  if (layout == pool_layout<MontageByteStringSkipList>)
    return read_strings<MontageByteStringSkipList>;
  if (layout == pool_layout<InCLLStringMasstree>) return read_strings<InCLLStringMasstree>;
  if (layout == pool_layout<LoggingStringMasstree>) return read_strings<LoggingStringMasstree>;
  return nullptr;
}

// recover() for a byte-string map: the same steps on the map's own type.
Recovered recover_strings(const PoolCommandOptions& o, Recovered r,
                          void (*read)(pm::Pool&, Recovered&)) {
  r.by_strings = true;
  std::optional<PoolCopy> recovered_copy;
  if (!o.in_place) recovered_copy.emplace(o.path);
  const std::string& target = o.in_place ? o.path : recovered_copy->path();
  const auto t0 = std::chrono::steady_clock::now();
  pm::Pool pool = pm::Pool::open(target, r.entry->name, 0);
  read(pool, r);  // opens (recovers) the map, reads it, closes it
  r.milliseconds =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  pool.allocator().for_each_slot([&](void*, std::size_t) { ++r.slots; });
  r.free_slots = pool.allocator().free_slots();
  pool.close();
  return r;
}

// Recovers the structure POOL holds (on a copy unless in_place) and reads its contents.
Recovered recover(const PoolCommandOptions& o) {
  const pm::PoolInfo info = pm::inspect_pool(o.path);
  Recovered r;
  r.entry = registry::find(info.layout);
  if (r.entry == nullptr || !r.entry->durable)
    throw PoolError(PoolErrc::layout_mismatch,
                    "pmds: " + o.path + " holds layout \"" + info.layout +
                        "\", which is not a registered durable structure (pmds list)");
  if (auto read = string_reader(info.layout)) return recover_strings(o, std::move(r), read);
  std::optional<PoolCopy> recovered_copy;
  if (!o.in_place) recovered_copy.emplace(o.path);
  const std::string& target = o.in_place ? o.path : recovered_copy->path();
  const auto t0 = std::chrono::steady_clock::now();
  auto instance = registry::Instance::open(*r.entry, target);
  r.milliseconds =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  // Quiescent now: every slot of every used chunk is either held by the structure or free.
  instance.pool()->allocator().for_each_slot([&](void*, std::size_t) { ++r.slots; });
  r.free_slots = instance.pool()->allocator().free_slots();
  if (o.in_place) {
    instance.close();  // a clean shutdown of the recovered file
    const PoolCopy copy(o.path);
    r.items = registry::Instance::open(*r.entry, copy.path()).contents();
  } else {
    r.items = instance.contents();
  }
  return r;
}

bool is_keyed(const registry::Entry& e) {
  return e.kind == registry::Kind::set || e.kind == registry::Kind::map;
}

}  // namespace

CLI::App* add_check_command(CLI::App& app, PoolCommandOptions& o) {
  CLI::App* check = app.add_subcommand(
      "check", "recover a pool's structure, verify it, print its size and recovery time");
  check->footer(
      "Opens the pool file, recovers the registered structure it holds (on a copy of the file\n"
      "unless --in-place), and verifies what can be verified without its history: sets and\n"
      "maps hold no key twice and no reserved key, and every slot of the pool's used chunks is\n"
      "either the structure's or free. Prints the element count and the recovery time. Exit 0\n"
      "when the pool is sound, 1 when it is not (or cannot be opened), 2 for bad usage.");
  check->add_option("POOL", o.path, "the pool file")->type_name("")->required();
  check->add_flag("--in-place", o.in_place,
                  "recover the file itself (then close it cleanly), not a copy");
  return check;
}

CLI::App* add_dump_command(CLI::App& app, PoolCommandOptions& o) {
  CLI::App* dump =
      app.add_subcommand("dump", "print the contents of a pool's structure as JSON lines");
  dump->footer(
      "Recovers the registered structure a pool file holds (on a copy unless --in-place) and\n"
      "prints one JSON object per element: {\"key\": K, \"value\": V} for sets and maps in key\n"
      "order; {\"value\": V} for queues, stacks and priority queues in the order they would come\n"
      "out; {\"value\": X} (a number) for a register. A byte-string map's keys and values\n"
      "print as JSON strings (bytes that are not UTF-8 as U+FFFD).");
  dump->add_option("POOL", o.path, "the pool file")->type_name("")->required();
  dump->add_flag("--in-place", o.in_place,
                 "recover the file itself (then close it cleanly), not a copy");
  return dump;
}

int check_command(const PoolCommandOptions& o) {
  const Recovered r = recover(o);
  std::vector<std::string> problems;
  if (r.by_strings) {
    for (std::size_t i = 1; i < r.strings.size(); ++i)
      if (r.strings[i].first == r.strings[i - 1].first)
        problems.push_back("key \"" + r.strings[i].first + "\" is present twice");
  } else if (is_keyed(*r.entry)) {
    for (std::size_t i = 0; i < r.items.size(); ++i) {
      if (is_reserved_key(r.items[i].key))
        problems.push_back("reserved key " + std::to_string(r.items[i].key) + " is present");
      if (i > 0 && r.items[i].key == r.items[i - 1].key)
        problems.push_back("key " + std::to_string(r.items[i].key) + " is present twice");
    }
  }
  if (r.free_slots > r.slots)
    problems.push_back("the allocator counts " + std::to_string(r.free_slots) +
                       " free slots of only " + std::to_string(r.slots));
  std::printf("pool        %s\n", o.path.c_str());
  std::printf("structure   %s (%s, criterion %s)\n", std::string(r.entry->name).c_str(),
              registry::to_string(r.entry->kind), to_string(r.entry->criterion));
  std::printf("elements    %zu\n", r.by_strings ? r.strings.size() : r.items.size());
  std::printf("recovery    %.2f ms (%s)\n", r.milliseconds, o.in_place ? "in place" : "on a copy");
  std::printf("slots       %zu held by the structure, %zu free, of %zu\n",
              r.slots - std::min(r.slots, r.free_slots), r.free_slots, r.slots);
  for (const auto& p : problems) std::printf("PROBLEM     %s\n", p.c_str());
  std::printf("%s\n", problems.empty() ? "OK" : "NOT SOUND");
  return problems.empty() ? exit_ok : exit_failure;
}

int dump_command(const PoolCommandOptions& o) {
  const Recovered r = recover(o);
  for (const auto& [key, value] : r.strings) {  // bytes that are not UTF-8 print as U+FFFD
    nlohmann::ordered_json line;
    line["key"] = key;
    line["value"] = value;
    std::cout << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  for (const registry::Item& item : r.items) {
    nlohmann::ordered_json line;
    if (is_keyed(*r.entry)) {
      line["key"] = item.key;
      line["value"] = item.value;
    } else if (r.entry->kind == registry::Kind::register_object) {
      line["value"] = std::bit_cast<double>(item.key);
    } else {
      line["value"] = item.key;
    }
    std::cout << line.dump() << "\n";
  }
  return exit_ok;
}

}  // namespace pmds::cli
