// Detectable recovery (Fatourou et al.'s PBstack): after a crash, learn whether the operation that
// was running took effect, and finish it exactly once.
//
//   detectable_stack POOL [PUSHES]
//
// The program pushes 1, 2, 3, ... on a durable stack, one push per sequence number, and keeps
// the sequence number of the push it is about to make in a small file next to the pool (POOL.seq,
// written before the push starts: the "system support" Fatourou et al. §2 assumes — a persistent
// per-thread sequence number). Killed at any moment (kill -9), the next run reads that number and
// asks the stack what became of that push:
//   "pending N took effect"   the push was applied before the crash; it is not applied again
//   "pending N not taken"     it was not; it is applied now, under the same ticket
// and then goes on pushing. Either way the stack holds exactly one value per sequence number:
// the run checks that the stack holds 1..N, top first, and prints "stack holds N, in order".
// Exit 0; 1 on a broken invariant or an error.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "pmds/combining.hpp"

namespace {

// The slot's sequence number, kept in a file: a store survives kill -9 (the page cache keeps it).
class SequenceFile {
 public:
  explicit SequenceFile(const std::string& path)
      : fd_(::open(path.c_str(), O_RDWR | O_CREAT, 0644)) {
    if (fd_ < 0) throw std::runtime_error("cannot open " + path);
  }
  ~SequenceFile() { ::close(fd_); }
  std::uint64_t read() const {
    std::uint64_t seq = 0;
    return ::pread(fd_, &seq, sizeof seq, 0) == sizeof seq ? seq : 0;
  }
  void write(std::uint64_t seq) {
    if (::pwrite(fd_, &seq, sizeof seq, 0) != sizeof seq) throw std::runtime_error("pwrite failed");
  }

 private:
  int fd_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s POOL [PUSHES]\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const std::uint64_t pushes = argc == 3 ? std::strtoull(argv[2], nullptr, 10) : 1000;
  constexpr std::size_t slot = 0;  // the pusher's slot, the same in every run
  try {
    auto stack = pmds::open_or_create<pmds::PBCombStack>(path, std::uint64_t{64} << 20);
    SequenceFile seq_file(path + ".seq");
    std::uint64_t seq = seq_file.read();
    if (seq > 0) {  // a push with this number was started by an earlier run
      const pmds::Ticket pending{slot, seq};
      const bool took = stack->recover_pending(pending).took_effect;
      std::printf("pending %llu %s\n", static_cast<unsigned long long>(seq),
                  took ? "took effect" : "not taken");
      stack->push(seq, pending);  // applies it only if it did not take effect
    }
    for (std::uint64_t i = 0; i < pushes; ++i) {
      ++seq;
      seq_file.write(seq);  // before the operation starts
      stack->push(seq, pmds::Ticket{slot, seq});
      if (seq % 100 == 0) {
        std::printf("pushed %llu\n", static_cast<unsigned long long>(seq));
        std::fflush(stdout);
      }
    }
    // Check the invariant: values seq..1, top first. Popped and pushed back by another thread,
    // with plain operations: they use that thread's own slot (its pmds::thread_id(), not 0), so
    // they do not disturb slot 0's sequence. A slot's operations carry tickets always or never:
    // every operation of a slot advances its parity, so the pusher's file counts only its own.
    bool in_order = false;
    std::size_t held = 0;
    std::thread checker([&] {
      if (pmds::thread_id() == slot) return;  // would share the pusher's slot: report failure
      std::vector<pmds::Value> values;
      while (const auto v = stack->pop()) values.push_back(*v);
      held = values.size();
      in_order = held == seq;
      for (std::size_t i = 0; in_order && i < held; ++i) in_order = values[i] == seq - i;
      for (auto it = values.rbegin(); it != values.rend(); ++it) stack->push(*it);
    });
    checker.join();
    if (!in_order) {
      std::fprintf(stderr, "detectable_stack: the stack holds %zu values, not 1..%llu in order\n",
                   held, static_cast<unsigned long long>(seq));
      return 1;
    }
    std::printf("stack holds %llu, in order\n", static_cast<unsigned long long>(seq));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "detectable_stack: %s\n", e.what());
    return 1;
  }
}
