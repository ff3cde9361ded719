// pmds bench — running one repetition in a forked child process, its result sent back through a
// pipe (and an error with its message).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>
#include <type_traits>

#include "pmds/error.hpp"

namespace pmds::bench {

// Runs body() in a forked child and returns what it returned. Why: structures measured one
// after another in one process share its heap, and a structure's throughput at this scale
// depends on where its nodes land (a transient table filled into a fresh heap ran up to a
// third faster than one filled into the holes another structure's nodes left). A child per
// repetition gives every structure the same fresh start. Call with no other thread running.
template <class Body>
auto in_child_process(const Body& body, std::string_view name) {
  using Result = decltype(body());
  static_assert(std::is_trivially_copyable_v<Result>, "the result crosses a pipe as bytes");
  int fds[2];
  if (::pipe(fds) != 0) throw Error("pmds: pipe failed for an isolated repetition");
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error("pmds: fork failed for an isolated repetition");
  }
  if (child == 0) {
    ::close(fds[0]);
    int code = 0;
    std::string message;
    Result out;
    try {
      out = body();
    } catch (const std::exception& ex) {
      message = ex.what();
      code = 2;
    }
    // The message (on failure) or the outcome, prefixed by one status byte.
    const char status = code == 0 ? 'o' : 'e';
    bool written = ::write(fds[1], &status, 1) == 1;
    if (code == 0)
      written = written && ::write(fds[1], &out, sizeof out) == static_cast<ssize_t>(sizeof out);
    else
      written = written && ::write(fds[1], message.data(), message.size()) ==
                               static_cast<ssize_t>(message.size());
    std::fflush(nullptr);
    ::_exit(written ? code : 3);  // no destructors: the parent owns every shared resource
  }
  ::close(fds[1]);
  std::string bytes;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n > 0) {
      bytes.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!bytes.empty() && bytes[0] == 'e') throw Error(bytes.substr(1));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || bytes.size() != 1 + sizeof(Result))
    throw Error("pmds: the isolated repetition of " + std::string(name) + " failed (wait status " +
                std::to_string(status) + ")");
  Result out;
  std::memcpy(&out, bytes.data() + 1, sizeof out);
  return out;
}

}  // namespace pmds::bench
