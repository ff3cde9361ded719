// pmds bench — a one-line progress display on stderr for anything longer than a second.
//
// Shown only when stderr is a terminal, or when forced (--progress); at most ten updates a
// second; the line is rewritten in place with '\r' and cleared at the end, so the results on
// stdout (and files) never contain it.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace pmds::bench {

inline std::string format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s < 0 ? 0.0 : s);
  return buf;
}

class Progress {
 public:
  explicit Progress(bool force = false) : enabled_(force || ::isatty(STDERR_FILENO) == 1) {}
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress() { clear(); }

  bool enabled() const { return enabled_; }

  void update(const std::string& text) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (shown_ > 0 && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    std::string line = "\r" + text;
    if (text.size() < shown_) line.append(shown_ - text.size(), ' ');
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
    shown_ = text.size();
  }

  // Erases the line (before printing anything else to the terminal, and at the end).
  void clear() {
    if (!enabled_ || shown_ == 0) return;
    std::string line = "\r" + std::string(shown_, ' ') + "\r";
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
    shown_ = 0;
  }

 private:
  bool enabled_;
  std::size_t shown_ = 0;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace pmds::bench
