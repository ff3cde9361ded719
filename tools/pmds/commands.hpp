// pmds command line — exit statuses, the command-line parse shared by `pmds` and the crash lab's
// programs, and the subcommands implemented in their own translation units.
// Exit status: 0 success, 1 failure while running, 2 bad usage (unknown option, bad value,
// unknown structure).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace pmds::bench {
struct ParsedBench;
}

namespace pmds::cli {

inline constexpr int exit_ok = 0;
inline constexpr int exit_failure = 1;
inline constexpr int exit_usage = 2;

// Parses argv with `app`. Returns the exit status when the program is done (help printed: 0;
// bad usage, its message on stderr: 2), nullopt when it goes on.
inline std::optional<int> parse_command_line(CLI::App& app, int argc, const char* const* argv) {
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    std::string who = a->get_name();
    for (const CLI::App* sub : a->get_subcommands()) who += " " + sub->get_name();
    return who + ": " + e.what() + " (see " + who + " --help)\n";
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? exit_ok : exit_usage;
  }
  return std::nullopt;
}

// `pmds bench`, its options parsed (bench_command.cpp).
int bench_command(const bench::ParsedBench& parsed, std::string_view command_line);

// `pmds check POOL` and `pmds dump POOL` (pool_commands.cpp).
struct PoolCommandOptions {
  std::string path;
  bool in_place = false;
};
CLI::App* add_check_command(CLI::App& app, PoolCommandOptions& options);
CLI::App* add_dump_command(CLI::App& app, PoolCommandOptions& options);
int check_command(const PoolCommandOptions& options);
int dump_command(const PoolCommandOptions& options);

}  // namespace pmds::cli
