// pmds crash lab — processes: running this program again in a role (a fresh process with nothing
// volatile surviving), the lincheck co-process, scratch files.
//
// A role is this same executable (/proc/self/exe) started with PMDS_CRASHLAB_ROLE=<role> and its
// arguments in PMDS_CRASHLAB_ARGS ("key=value" lines); crashlab/child.hpp dispatches on it
// before main() runs, so any program that includes the lab (pmds-crashlab, a GoogleTest binary)
// can be its own recovery process.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "pmds/error.hpp"

extern char** environ;

namespace pmds::crashlab {

using Args = std::map<std::string, std::string>;

inline constexpr const char* role_variable = "PMDS_CRASHLAB_ROLE";
inline constexpr const char* args_variable = "PMDS_CRASHLAB_ARGS";

inline std::string encode_args(const Args& a) {
  std::string s;
  for (const auto& [k, v] : a) s += k + "=" + v + "\n";
  return s;
}

inline Args decode_args(const char* text) {
  Args a;
  if (text == nullptr) return a;
  std::string_view s(text);
  while (!s.empty()) {
    const auto nl = s.find('\n');
    const std::string_view line = s.substr(0, nl);
    const auto eq = line.find('=');
    if (eq != std::string_view::npos) a[std::string(line.substr(0, eq))] = line.substr(eq + 1);
    if (nl == std::string_view::npos) break;
    s.remove_prefix(nl + 1);
  }
  return a;
}

// This program, to start it again: /proc/self/exe names the running file even after a rebuild
// replaced it on disk (a long lab run then keeps starting the program it is).
inline std::string self_exe() {
  return "/proc/self/exe";
}

// The directory this program was started from (to find programs installed beside it).
inline std::filesystem::path self_directory() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("pmds crashlab: cannot read /proc/self/exe: " + ec.message());
  return p.parent_path();
}

// Where scratch pools, images and histories go: $PMDS_CRASHLAB_DIR, else /dev/shm (memory, as
// persistent memory would be), else $TMPDIR or /tmp.
inline std::string work_directory() {
  if (const char* d = std::getenv("PMDS_CRASHLAB_DIR"); d != nullptr && *d) return d;
  if (::access("/dev/shm", W_OK) == 0) return "/dev/shm";
  if (const char* d = std::getenv("TMPDIR"); d != nullptr && *d) return d;
  return "/tmp";
}

// How a child process ended.
struct ExitStatus {
  bool exited = false;
  int code = 0;    // exit code when exited
  int signal = 0;  // the signal that killed it otherwise
  bool timed_out = false;
  std::string describe() const {
    if (timed_out) return "did not finish in time (killed)";
    if (exited) return "exited with status " + std::to_string(code);
    return std::string("killed by signal ") + std::to_string(signal) + " (" + ::strsignal(signal) +
           ")";
  }
};

inline ExitStatus exit_status_of(int st) {
  ExitStatus e;
  if (WIFEXITED(st)) {
    e.exited = true;
    e.code = WEXITSTATUS(st);
  } else if (WIFSIGNALED(st)) {
    e.signal = WTERMSIG(st);
  }
  return e;
}

inline ExitStatus wait_for(pid_t pid) {
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0) {
    if (errno != EINTR) throw Error(std::string("pmds crashlab: waitpid: ") + std::strerror(errno));
  }
  return exit_status_of(st);
}

// fork() with a pipe from the child to its parent. In the child (pid 0) `to_parent` is the write
// end; in the parent `from_child` is the read end. Each side's other end is closed, so the
// parent reads end-of-file once the child is gone. Buffered output is flushed first, so nothing
// is written twice.
struct ForkedChild {
  pid_t pid;
  int from_child;
  int to_parent;
};
inline ForkedChild fork_with_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw Error("pmds crashlab: pipe failed");
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw Error("pmds crashlab: fork failed");
  if (pid == 0) {
    ::close(fds[0]);
    return {0, -1, fds[1]};
  }
  ::close(fds[1]);
  return {pid, fds[0], -1};
}

// Starts `program` with argv and extra environment entries ("NAME=value"); stdin/stdout are
// redirected to the given descriptors when >= 0. posix_spawn: safe from a multithreaded process
// and from inside a crash handler (it runs no fork handlers).
inline pid_t spawn(const std::string& program, const std::vector<std::string>& argv,
                   const std::vector<std::string>& extra_env, int in_fd = -1, int out_fd = -1,
                   const std::vector<int>& close_fds = {}) {
  std::vector<char*> av;
  for (const auto& a : argv) av.push_back(const_cast<char*>(a.c_str()));
  av.push_back(nullptr);
  std::vector<std::string> env_store;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view kv(*e);
    bool replaced = false;
    for (const auto& x : extra_env)
      if (kv.substr(0, kv.find('=') + 1) == std::string_view(x).substr(0, x.find('=') + 1))
        replaced = true;
    if (!replaced) env_store.emplace_back(kv);
  }
  for (const auto& x : extra_env) env_store.push_back(x);
  std::vector<char*> ev;
  for (auto& x : env_store) ev.push_back(x.data());
  ev.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (in_fd >= 0) posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
  if (out_fd >= 0) posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  for (int fd : close_fds) posix_spawn_file_actions_addclose(&fa, fd);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, program.c_str(), &fa, nullptr, av.data(), ev.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw Error("pmds crashlab: cannot start " + program + ": " + std::strerror(rc));
  return pid;
}

// Waits for child `pid`, killing it after timeout_s seconds. A pidfd makes the wait a poll()
// with a timeout; kernels without pidfd_open (< 5.3) fall back to polling waitpid.
inline ExitStatus wait_with_timeout(pid_t pid, double timeout_s) {
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    int r;
    while ((r = ::poll(&p, 1, static_cast<int>(timeout_s * 1000))) < 0 && errno == EINTR) {
    }
    ::close(pidfd);
    if (r == 0) {
      ::kill(pid, SIGKILL);
      ExitStatus e = wait_for(pid);
      e.timed_out = true;
      return e;
    }
    return wait_for(pid);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (auto pause = std::chrono::microseconds(20);;
       pause = std::min(pause * 2, std::chrono::microseconds(2000))) {
    int st = 0;
    const pid_t r = ::waitpid(pid, &st, WNOHANG);
    if (r == pid) return exit_status_of(st);
    if (r < 0 && errno != EINTR)
      throw Error(std::string("pmds crashlab: waitpid: ") + std::strerror(errno));
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ExitStatus e = wait_for(pid);
      e.timed_out = true;
      return e;
    }
    std::this_thread::sleep_for(pause);
  }
}

// Keeps the calling thread, and the threads and processes it starts from now on, on the CPU it
// runs on. For a simulated workload run, whose threads, recovery processes and checker work one
// at a time, each waiting for the one before (the deterministic scheduler, run_in_turn, the
// lab's pipe to lincheck): a hand-over to a thread that sleeps on another CPU costs an
// inter-processor interrupt and that CPU's wake from idle, which in a virtual machine are exits
// to the host. Each run stays on the CPU the kernel gave its new process, so the runs of
// parallel tests still spread over the CPUs. Measured on a 2-core AMD EPYC KVM guest
// (2026-12-05, interleaved rounds): the default crash lab of list/linkfree, hash/montage,
// masstree/incll and queue/pbcomb alone took 0.78-0.81x the CPU and 0.75-0.78x the wall time
// (3 rounds); `ctest -j4` of the 16 list and hash crashlab_sim_test cases 0.89 and 0.94x the
// CPU, 0.85 and 0.91x the wall time (2 rounds). Not for the process lab's workload, whose
// threads must run at once. A failure (a CPU the kernel refuses) leaves the affinity as it was.
inline void stay_on_this_cpu() {
  const int cpu = ::sched_getcpu();
  if (cpu < 0 || cpu >= CPU_SETSIZE) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)::sched_setaffinity(0, sizeof set, &set);
}

// Runs this executable in `role` with `args` and waits for it (killing it after timeout_s).
inline ExitStatus run_role(const std::string& role, const Args& args, double timeout_s) {
  const pid_t pid = spawn(self_exe(), {self_exe()},
                          {std::string(role_variable) + "=" + role,
                           std::string(args_variable) + "=" + encode_args(args)});
  return wait_with_timeout(pid, timeout_s);
}

inline std::string read_file(const std::string& path) {
  std::string out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

inline void write_all(int fd, std::string_view s) {
  while (!s.empty()) {
    const ssize_t n = ::write(fd, s.data(), s.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(std::string("pmds crashlab: write: ") + std::strerror(errno));
    s.remove_prefix(static_cast<std::size_t>(n));
  }
}

inline void write_file(const std::string& path, std::string_view s) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw Error("pmds crashlab: cannot write " + path + ": " + std::strerror(errno));
  write_all(fd, s);
  ::close(fd);
}

// A file removed when this object dies.
class ScratchFile {
 public:
  ScratchFile() = default;
  explicit ScratchFile(std::string path) : path_(std::move(path)) { ::unlink(path_.c_str()); }
  ScratchFile(ScratchFile&& o) noexcept : path_(std::exchange(o.path_, {})) {}
  ScratchFile& operator=(ScratchFile&& o) noexcept {
    if (this != &o) {
      remove();
      path_ = std::exchange(o.path_, {});
    }
    return *this;
  }
  ~ScratchFile() { remove(); }
  const std::string& path() const { return path_; }
  void keep() { path_.clear(); }

 private:
  void remove() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  std::string path_;
};

// ---------------------------------------------------------------------------------------------
// The checker.

// The lincheck program: $PMDS_LINCHECK, the path CMake compiled in, or beside / near this
// executable in a build tree (<build>/bin, <build>/test, <build>/tools/lincheck/bin).
inline std::string find_lincheck() {
  std::vector<std::filesystem::path> candidates;
  if (const char* p = std::getenv("PMDS_LINCHECK"); p != nullptr && *p) candidates.emplace_back(p);
#if defined(PMDS_LINCHECK_PROGRAM)
  candidates.emplace_back(PMDS_LINCHECK_PROGRAM);
#endif
  std::error_code ec;
  const auto dir = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
  if (!ec) {
    for (auto d = dir; !d.empty(); d = d.parent_path()) {
      candidates.push_back(d / "lincheck");
      candidates.push_back(d / "tools" / "lincheck" / "bin" / "lincheck");
      candidates.push_back(d / "bin" / "lincheck");
      if (d == d.parent_path() || candidates.size() > 24) break;
    }
  }
  for (const auto& c : candidates)
    if (::access(c.c_str(), X_OK) == 0 && std::filesystem::is_regular_file(c, ec))
      return c.string();
  throw Error(
      "pmds crashlab: the history checker `lincheck` was not found (build the CMake target "
      "lincheck, which needs Go, or set PMDS_LINCHECK to its path)");
}

// What lincheck says of one history.
struct Verdict {
  std::string verdict;  // ok | violation | unknown | error
  std::string criterion, object, message;
  std::vector<std::string> excerpt;
  bool ok() const { return verdict == "ok"; }
};

// One lincheck process kept running: histories in through a pipe, one verdict line out each.
//
// A history judged before gets its verdict again without being sent. lincheck's verdict is a
// function of the history's text but for the header's "meta" (the structure, the replay point),
// which it only copies into the verdict line, where check() does not read it; so the memo's key
// is the text without it. A workload run's crash points and images repeat histories (the same
// operations done before the crash, the same contents recovered): 51-67% of those checked in
// each of four structures' runs, and lincheck was 30-55% of their crash lab's CPU (perf and
// PMDS_CRASHLAB_DUMP of `pmds crashtest --crashes 300` of list/linkfree, hash/montage,
// masstree/incll, queue/pwfcomb-durable; 2026-12-05, 2-core AMD EPYC). An "error" verdict is not
// remembered: its message names the line of lincheck's input it failed at. The memo forgets
// everything when its keys pass memo_limit_bytes (a soak's run checks thousands of histories).
class Lincheck {
 public:
  explicit Lincheck(const std::string& program, double timeout_s = 60) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0)
      throw Error(std::string("pmds crashlab: pipe: ") + std::strerror(errno));
    pid_ = spawn(program, {program, "-timeout", std::to_string(static_cast<long>(timeout_s)) + "s"},
                 {}, in[0], out[1]);
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  Lincheck(const Lincheck&) = delete;
  Lincheck& operator=(const Lincheck&) = delete;
  ~Lincheck() {
    if (to_ >= 0) ::close(to_);
    if (from_ >= 0) ::close(from_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      wait_for(pid_);
    }
  }

  Verdict check(const std::string& history) {
    std::string key = judged_text(history);
    if (const auto it = verdicts_.find(key); it != verdicts_.end()) {
      ++repeats_;
      return it->second;
    }
    Verdict r = ask(history);
    if (r.verdict != "error") {
      if (memo_bytes_ + key.size() > memo_limit_bytes) {
        verdicts_.clear();
        memo_bytes_ = 0;
      }
      memo_bytes_ += key.size();
      verdicts_.emplace(std::move(key), r);
    }
    return r;
  }

  // The histories check() answered from its memo, without asking lincheck.
  std::size_t repeats() const { return repeats_; }

 private:
  static constexpr std::size_t memo_limit_bytes = std::size_t{64} << 20;

  // The history as lincheck judges it: without the header's "meta" (the header is the first
  // line, "meta" its last field: history.hpp, to_json_lines).
  static std::string judged_text(const std::string& history) {
    const std::size_t end = std::min(history.find('\n'), history.size());
    const std::size_t meta = history.rfind(",\"meta\":", end);
    if (meta == std::string::npos) return history;
    return history.substr(0, meta) + history.substr(end);
  }

  Verdict ask(const std::string& history) {
    write_all(to_, history);
    std::string line;
    for (;;) {
      const auto nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        break;
      }
      char b[4096];
      const ssize_t n = ::read(from_, b, sizeof b);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw Error("pmds crashlab: lincheck stopped answering");
      buffer_.append(b, static_cast<std::size_t>(n));
    }
    // lincheck leaves out empty fields (Go's omitempty).
    const auto v = nlohmann::json::parse(line);
    Verdict r;
    r.verdict = v.value("verdict", "error");
    r.criterion = v.value("criterion", "");
    r.object = v.value("object", "");
    r.message = v.value("message", "");
    r.excerpt = v.value("excerpt", r.excerpt);
    return r;
  }

  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  std::string buffer_;
  std::unordered_map<std::string, Verdict> verdicts_;  // judged_text -> its verdict
  std::size_t memo_bytes_ = 0;                         // the keys' bytes
  std::size_t repeats_ = 0;
};

}  // namespace pmds::crashlab
