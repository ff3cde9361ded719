// pmds — the command line: list, bench, inspect, plot, crashtest.
//
//   pmds list                 every registered structure × technique, its kind and criterion
//   pmds bench [options]      the benchmark harness (bench_command.cpp)
//   pmds inspect POOL         a pool file's header, layout, size, clean/dirty, chunk usage
//   pmds plot [options] JSON  PNG figures from `pmds bench --json` files (scripts/plot.py)
//   pmds crashtest [options]  the crash lab (the pmds-crashlab program next to this one)
// Exit status: 0 success, 1 failure, 2 bad usage.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "commands.hpp"
#include "pmds/bench/workload.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/registry.hpp"

namespace pmds::cli {
namespace {

constexpr const char* main_help = R"(usage: pmds COMMAND [options]

Durable concurrent data structures for persistent memory: tools.

commands:
  list        every registered structure x technique, its kind and criterion
  bench       run a benchmark workload (throughput, flushes/op, fences/op, bytes,
              recovery time); writes a table, JSON and CSV
  inspect     show a pool file: header, layout, size, clean or dirty shutdown,
              chunk usage
  plot        PNG figures from `pmds bench --json` files
  crashtest   the crash lab: crash structures at every persistence event and check
              the recovered state against their criterion

`pmds COMMAND --help` describes each command.
)";

constexpr const char* list_help = R"(usage: pmds list [--names] [--kind KIND]

Lists every registered structure x technique: name, kind, durability criterion
(none = transient), capabilities and description.

  --names       only the names, one per line (for scripts)
  --kind KIND   only this kind: set, map, queue, stack, priority-queue, register
  --help        this text
)";

constexpr const char* inspect_help = R"(usage: pmds inspect POOL

Reads a pool file without modifying it and shows its header (format version,
layout, size, base address), whether its last shutdown was clean (a dirty pool is
still open or crashed; recovery runs at the next open), the root slots, and chunk
usage by slot size.

  --help        this text
)";

constexpr const char* plot_help = R"(usage: pmds plot [--out DIR] FILE.json...

Draws PNG figures from `pmds bench --json` files: one figure per sweep found in
them (throughput against threads, against key range, against read percentage),
plus flushes/op and fences/op. Runs scripts/plot.py with /usr/bin/python3
(matplotlib).

  --out DIR     where to write the PNG files (default: the current directory)
  --help        this text
)";

bool is_help(std::string_view a) {
  return a == "--help" || a == "-h";
}

int usage_error(const std::string& message) {
  std::cerr << message << "\n";
  return exit_usage;
}

int list_command(std::span<const std::string_view> args) {
  bool names_only = false;
  std::string kind;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (is_help(args[i])) {
      std::cout << list_help;
      return exit_ok;
    } else if (args[i] == "--names") {
      names_only = true;
    } else if (args[i] == "--kind") {
      if (i + 1 >= args.size()) return usage_error("pmds list: --kind needs a value");
      kind = std::string(args[++i]);
      bool known = false;
      for (const auto k :
           {registry::Kind::set, registry::Kind::map, registry::Kind::queue, registry::Kind::stack,
            registry::Kind::priority_queue, registry::Kind::register_object})
        known = known || kind == registry::to_string(k);
      if (!known)
        return usage_error("pmds list: unknown kind \"" + kind +
                           "\"; choose set, map, queue, stack, priority-queue or register");
    } else {
      return usage_error("pmds list: unknown argument \"" + std::string(args[i]) +
                         "\" (see pmds list --help)");
    }
  }
  std::vector<const registry::Entry*> shown;
  for (const registry::Entry& e : registry::entries())
    if (kind.empty() || kind == registry::to_string(e.kind)) shown.push_back(&e);
  if (names_only) {
    for (const auto* e : shown) std::cout << e->name << "\n";
    return exit_ok;
  }
  if (shown.empty()) {
    std::cout << "(no structure registered" << (kind.empty() ? "" : " of that kind") << ")\n";
    return exit_ok;
  }
  std::size_t width = 9;
  for (const auto* e : shown) width = std::max(width, e->name.size());
  std::printf("%-*s %-15s %-11s %-12s %s\n", static_cast<int>(width), "structure", "kind",
              "criterion", "extras", "description");
  for (const auto* e : shown) {
    // Capabilities beyond the kind's interface (printf, not string concatenation: GCC 12 raises
    // a false -Wrestrict on short std::string appends here).
    char extras[32];
    std::snprintf(extras, sizeof extras, "%s%s%s", e->can_update ? "put " : "",
                  e->can_scan ? "scan " : "", e->can_sync ? "sync " : "");
    if (extras[0] == '\0')
      std::snprintf(extras, sizeof extras, "-");
    else
      extras[std::strlen(extras) - 1] = '\0';
    std::printf("%-*s %-15s %-11s %-12s %.*s\n", static_cast<int>(width),
                std::string(e->name).c_str(), registry::to_string(e->kind), to_string(e->criterion),
                extras, static_cast<int>(e->description.size()), e->description.data());
  }
  return exit_ok;
}

std::string human_bytes(std::size_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  std::size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(units)) {
    v /= 1024;
    ++u;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

int inspect_command(std::span<const std::string_view> args) {
  std::string path;
  for (const auto a : args) {
    if (is_help(a)) {
      std::cout << inspect_help;
      return exit_ok;
    }
    if (a.starts_with("-"))
      return usage_error("pmds inspect: unknown option " + std::string(a) +
                         " (see pmds inspect --help)");
    if (!path.empty()) return usage_error("pmds inspect: give exactly one pool file");
    path = std::string(a);
  }
  if (path.empty()) return usage_error("pmds inspect: which pool file? (pmds inspect POOL)");
  pm::PoolInfo info;
  try {
    info = pm::inspect_pool(path);
  } catch (const PoolError& e) {
    std::cerr << "pmds inspect: " << e.what() << "\n";
    return exit_failure;
  } catch (const std::exception& e) {
    std::cerr << "pmds inspect: " << e.what() << "\n";
    return exit_failure;
  }
  const registry::Entry* entry = registry::find(info.layout);
  std::printf("pool            %s\n", info.path.c_str());
  std::printf("layout          %s%s\n", info.layout.c_str(),
              entry != nullptr ? "" : "  (not a registered structure name)");
  if (entry != nullptr)
    std::printf("structure       %s, criterion %s: %.*s\n", registry::to_string(entry->kind),
                to_string(entry->criterion), static_cast<int>(entry->description.size()),
                entry->description.data());
  std::printf("format version  %u\n", static_cast<unsigned>(info.format_version));
  std::printf("size            %zu bytes (%s), header %zu bytes\n", info.size,
              human_bytes(info.size).c_str(), info.header_size);
  std::printf("base address    0x%zx\n", static_cast<std::size_t>(info.base));
  std::printf("shutdown        %s\n",
              info.clean_shutdown
                  ? "clean"
                  : "DIRTY (the pool is open now, or its process crashed: recovery runs at the "
                    "next open)");
  std::printf("chunks          %zu of %zu used (%s each), %zu free\n", info.used_chunks,
              info.chunk_count, human_bytes(info.chunk_size).c_str(), info.free_chunks);
  if (!info.slot_sizes.empty()) {
    std::printf("slot sizes      %-10s %-8s %s\n", "slot", "chunks", "slots (live or free)");
    for (const auto& s : info.slot_sizes)
      std::printf("                %-10zu %-8zu %zu\n", s.slot_size, s.chunks, s.slots);
  }
  std::string roots;
  for (std::size_t i = 0; i < info.roots.size(); ++i) {
    if (info.roots[i] == 0) continue;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s[%zu] 0x%llx", roots.empty() ? "" : "  ", i,
                  static_cast<unsigned long long>(info.roots[i]));
    roots += buf;
  }
  std::printf("roots           %s\n", roots.empty() ? "(all empty)" : roots.c_str());
  return exit_ok;
}

// The directory of this executable (/proc/self/exe), for programs installed beside it.
std::filesystem::path own_directory() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path(".") : exe.parent_path();
}

// Replaces this process with `program args...`; returns only on failure.
int exec_program(const std::string& program, const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(nullptr);
  ::execv(program.c_str(), argv.data());
  std::cerr << "pmds: cannot run " << program << ": " << std::strerror(errno) << "\n";
  return exit_failure;
}

std::filesystem::path plot_script() {
  if (const char* s = std::getenv("PMDS_PLOT_SCRIPT"); s != nullptr && *s != '\0') return s;
  // Installed next to the binary's share directory, or the source tree the binary was built from.
  const auto installed = own_directory().parent_path() / "share" / "pmds" / "plot.py";
  std::error_code ec;
  if (std::filesystem::exists(installed, ec)) return installed;
  return std::filesystem::path(PMDS_SOURCE_DIR) / "scripts" / "plot.py";
}

int plot_command(std::span<const std::string_view> args) {
  for (const auto a : args)
    if (is_help(a)) {
      std::cout << plot_help;
      return exit_ok;
    }
  if (args.empty()) return usage_error("pmds plot: give at least one JSON file (pmds plot --help)");
  const auto script = plot_script();
  std::error_code ec;
  if (!std::filesystem::exists(script, ec)) {
    std::cerr << "pmds plot: cannot find " << script.string() << " (set PMDS_PLOT_SCRIPT)\n";
    return exit_failure;
  }
  std::vector<std::string> rest{script.string()};
  for (const auto a : args) rest.emplace_back(a);
  return exec_program("/usr/bin/python3", rest);
}

int crashtest_command(std::span<const std::string_view> args) {
  const auto program = own_directory() / "pmds-crashlab";
  std::error_code ec;
  if (!std::filesystem::exists(program, ec)) {
    std::cerr << "pmds crashtest: the crash lab program " << program.string()
              << " is not built (build target pmds-crashlab)\n";
    return exit_failure;
  }
  std::vector<std::string> rest;
  for (const auto a : args) rest.emplace_back(a);
  return exec_program(program.string(), rest);
}

}  // namespace
}  // namespace pmds::cli

int main(int argc, char** argv) {
  using namespace pmds::cli;
  std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << main_help;
    return exit_usage;
  }
  const std::string_view command = args.front();
  const std::span<const std::string_view> rest(args.data() + 1, args.size() - 1);
  std::string command_line = "pmds";
  for (const auto a : args) {
    command_line += ' ';
    command_line += a;
  }
  try {
    if (is_help(command) || command == "help") {
      std::cout << main_help;
      return exit_ok;
    }
    if (command == "list") return list_command(rest);
    if (command == "bench") return bench_command(rest, command_line);
    if (command == "inspect") return inspect_command(rest);
    if (command == "plot") return plot_command(rest);
    if (command == "crashtest") return crashtest_command(rest);
  } catch (const std::exception& e) {
    std::cerr << "pmds " << command << ": error: " << e.what() << "\n";
    return exit_failure;
  }
  std::cerr << "pmds: unknown command \"" << command << "\"\n\n" << main_help;
  return exit_usage;
}
