// pmds command line — the subcommands implemented in their own translation units.
// Each takes the arguments after its name and returns the process exit status:
// 0 success, 1 failure while running, 2 bad usage (unknown option, bad value, unknown structure).
#pragma once

#include <span>
#include <string_view>

namespace pmds::cli {

inline constexpr int exit_ok = 0;
inline constexpr int exit_failure = 1;
inline constexpr int exit_usage = 2;

int bench_command(std::span<const std::string_view> args, std::string_view command_line);

}  // namespace pmds::cli
