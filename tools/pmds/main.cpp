// pmds — the command line: list, bench, inspect, check, dump, plot, crashtest.
//
//   pmds list                 every registered structure × technique, its kind and criterion
//   pmds bench [options]      the benchmark harness (bench_command.cpp)
//   pmds inspect POOL         a pool file's header, layout, size, clean/dirty, chunk usage
//   pmds check POOL           recover its structure (on a copy), verify it, count, time it
//   pmds dump POOL            its structure's contents as JSON lines (pool_commands.cpp)
//   pmds plot [options] JSON  PNG figures from `pmds bench --json` files (scripts/plot.py)
//   pmds crashtest [options]  the crash lab (the pmds-crashlab program next to this one)
// One CLI11 parser declares every command and its options (`pmds COMMAND --help`).
// Exit status: 0 success, 1 failure, 2 bad usage.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "crashtest_options.hpp"
#include "pmds/bench/options.hpp"
#include "pmds/bench/workload.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/registry/entries.hpp"

namespace pmds::cli {
namespace {

struct ListOptions {
  bool names_only = false;
  std::string kind;
};

CLI::App* add_list_command(CLI::App& app, ListOptions& o) {
  CLI::App* list =
      app.add_subcommand("list", "every registered structure x technique, its kind and criterion");
  list->footer(
      "Lists every registered structure x technique: name, kind, durability criterion\n"
      "(none = transient), capabilities and description.");
  std::vector<std::string> kinds;
  for (const auto k :
       {registry::Kind::set, registry::Kind::map, registry::Kind::queue, registry::Kind::stack,
        registry::Kind::priority_queue, registry::Kind::register_object})
    kinds.emplace_back(registry::to_string(k));
  list->add_flag("--names", o.names_only, "only the names, one per line (for scripts)");
  list->add_option("--kind", o.kind,
                   "only this kind: set, map, queue, stack, priority-queue, register")
      ->type_name("KIND")
      ->check(CLI::IsMember(kinds).description(""));
  return list;
}

int list_command(const ListOptions& o) {
  const std::string& kind = o.kind;
  const bool names_only = o.names_only;
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
    std::snprintf(extras, sizeof extras, "%s%s%s", e->can_update() ? "put " : "",
                  e->can_scan ? "scan " : "", e->can_sync() ? "sync " : "");
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

CLI::App* add_inspect_command(CLI::App& app, std::string& path) {
  CLI::App* inspect = app.add_subcommand(
      "inspect", "show a pool file: header, layout, size, clean or dirty shutdown,\nchunk usage");
  inspect->footer(
      "Reads a pool file without modifying it and shows its header (format version,\n"
      "layout, size, base address), whether its last shutdown was clean (a dirty pool is\n"
      "still open or crashed; recovery runs at the next open), the root slots, and chunk\n"
      "usage by slot size.");
  inspect->add_option("POOL", path, "the pool file")->type_name("")->required();
  return inspect;
}

int inspect_command(const std::string& path) {
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
  if (info.max_size > info.size || info.growths > 0)
    std::printf("growth          created at %s, grew %zu times, may grow to %s\n",
                human_bytes(info.created_size).c_str(), info.growths,
                human_bytes(info.max_size).c_str());
  else
    std::printf("growth          none: the pool keeps its size\n");
  if (info.growth_pending != 0)
    std::printf("                a growth to %zu chunks was interrupted: the next open ends it\n",
                info.growth_pending);
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

struct PlotOptions {
  std::string out;
  std::vector<std::string> files;
};

CLI::App* add_plot_command(CLI::App& app, PlotOptions& o) {
  CLI::App* plot = app.add_subcommand("plot", "PNG figures from `pmds bench --json` files");
  plot->footer(
      "Draws PNG figures from `pmds bench --json` files: one figure per sweep found in\n"
      "them (throughput against threads, against key range, against read percentage),\n"
      "plus flushes/op and fences/op. Runs scripts/plot.py with /usr/bin/python3\n"
      "(matplotlib).");
  plot->add_option("--out", o.out, "where to write the PNG files (default: the current directory)")
      ->type_name("DIR");
  plot->add_option("FILE.json", o.files, "`pmds bench --json` files")->type_name("")->required();
  return plot;
}

int plot_command(const PlotOptions& o) {
  const auto script = plot_script();
  std::error_code ec;
  if (!std::filesystem::exists(script, ec)) {
    std::cerr << "pmds plot: cannot find " << script.string() << " (set PMDS_PLOT_SCRIPT)\n";
    return exit_failure;
  }
  std::vector<std::string> rest{script.string()};
  if (!o.out.empty()) rest.insert(rest.end(), {"--out", o.out});
  rest.emplace_back("--");
  rest.insert(rest.end(), o.files.begin(), o.files.end());
  return exec_program("/usr/bin/python3", rest);
}

// `args`: the arguments after "crashtest", already checked by the same declarations
// (crashtest_options.hpp) that pmds-crashlab parses them with.
int crashtest_command(const std::vector<std::string>& args) {
  const auto program = own_directory() / "pmds-crashlab";
  std::error_code ec;
  if (!std::filesystem::exists(program, ec)) {
    std::cerr << "pmds crashtest: the crash lab program " << program.string()
              << " is not built (build target pmds-crashlab)\n";
    return exit_failure;
  }
  return exec_program(program.string(), args);
}

}  // namespace
}  // namespace pmds::cli

int main(int argc, char** argv) {
  using namespace pmds;
  using namespace pmds::cli;
  CLI::App app{"Durable concurrent data structures for persistent memory: tools.", "pmds"};
  app.require_subcommand(0, 1);                 // none: the help, on stderr (exit 2)
  app.set_help_flag("-h,--help", "this text");  // inherited by the commands

  ListOptions list_options;
  CLI::App* list = add_list_command(app, list_options);
  bench::ParsedBench bench_options;
  CLI::App* bench =
      app.add_subcommand("bench",
                         "run a benchmark workload (throughput, flushes/op, fences/op, bytes,\n"
                         "recovery time); writes a table, JSON and CSV");
  bench::add_bench_options(*bench, bench_options);
  std::string pool;
  CLI::App* inspect = add_inspect_command(app, pool);
  PoolCommandOptions check_options, dump_options;
  CLI::App* check = add_check_command(app, check_options);
  CLI::App* dump = add_dump_command(app, dump_options);
  PlotOptions plot_options;
  CLI::App* plot = add_plot_command(app, plot_options);
  crashtest::Options crashtest_options;
  crashtest::add_options(*app.add_subcommand("crashtest", crashtest::description),
                         crashtest_options);
  app.footer("`pmds COMMAND --help` describes each command.");

  if (const auto done = parse_command_line(app, argc, argv)) return *done;
  if (app.get_subcommands().empty()) {
    std::cerr << app.help();
    return exit_usage;
  }
  std::string command_line = "pmds";
  for (int i = 1; i < argc; ++i) command_line += std::string(" ") + argv[i];
  try {
    if (list->parsed()) return list_command(list_options);
    if (bench->parsed()) return bench_command(bench_options, command_line);
    if (inspect->parsed()) return inspect_command(pool);
    if (check->parsed()) return check_command(check_options);
    if (dump->parsed()) return dump_command(dump_options);
    if (plot->parsed()) return plot_command(plot_options);
    // The one command left; pmds has no option of its own, so argv[1] is "crashtest".
    return crashtest_command(std::vector<std::string>(argv + 2, argv + argc));
  } catch (const std::exception& e) {
    std::cerr << "pmds " << argv[1] << ": error: " << e.what() << "\n";
    return exit_failure;
  }
}
