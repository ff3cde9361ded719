// pmds crash lab — recording histories (docs/ARCHITECTURE.md §4) and writing them for
// tools/lincheck.
//
// A HistoryLog lives in a caller-provided memory block: an anonymous shared mapping in the
// simulated lab (the lab process reads what its workload child recorded), a file-backed shared
// mapping for real process crashes (so the history survives `kill -9` of the process that
// recorded it: every store reaches the page cache even when the process dies).
//
// Per thread, an array of records and a count. One global clock (a counter in the block) gives
// every timestamp: read (fetch_add) just before an operation is invoked and just after it returns.
// Recording is cheap (two atomic increments of one shared counter and a few plain stores), so
// it does not serialise the workload more than the operations themselves do.
//
// Order of writes, so that a reader after a crash at ANY instruction sees a consistent history:
//   1. the record's operation and arguments;  2. call = clock++ (release);
//   3. count = n+1 (release)                  -> the op is "invoked": pending until ret is set
//   4. the operation runs;                    5. the result fields;
//   6. ret = clock++ (release)                -> the op "returned".
// A crash before 6 leaves the op pending (it may or may not have taken effect: both are allowed),
// never completed with a half-written result.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/registry/descriptor.hpp"

namespace pmds::crashlab {

using registry::Item;
using registry::Kind;
using registry::OpCode;
using registry::Operation;
using registry::OpResult;

// What an operation was and what it returned: the fields a log record and its copy share.
struct RecordFields {
  std::uint8_t code = 0;  // registry::OpCode
  std::uint8_t ok = 0;    // OpResult::ok
  std::uint16_t thread = 0;
  std::uint32_t seq = 0;  // detectable entries: the low bits of the op's ticket (slot = thread)
  std::uint64_t key = 0;
  std::uint64_t value = 0;
  double factor = 0;
  std::uint64_t result_value = 0;
  double result_number = 0;
  // Structures with epochs (registry::BufferedOps::epoch): the epoch when the operation was invoked
  // and when it returned (it linearized in between).
  std::uint64_t call_epoch = 0, ret_epoch = 0;
};

// One recorded operation, as read back (a plain copy).
struct Record : RecordFields {
  std::uint64_t call = 0;  // 0: never invoked
  std::uint64_t ret = 0;   // 0: pending (no response)
};

// A thread's post-recovery report on its last operation (detectable recoverability): whether it
// took effect and, if so, its response.
struct Report {
  std::size_t thread = 0;
  bool taken = false;
  OpResult result;
};

class HistoryLog {
 public:
  static constexpr std::uint64_t magic = 0x706d64732e686973;  // "pmds.his"
  static constexpr std::size_t max_threads = 64;

  // Bytes a log of `threads` threads with `capacity` records each needs.
  static std::size_t bytes_for(std::size_t threads, std::size_t capacity) {
    return sizeof(Header) + threads * capacity * sizeof(LogRecord);
  }

  // Formats a new, empty log in [memory, memory + bytes). The block must be 64-byte aligned.
  static HistoryLog create(void* memory, std::size_t bytes, std::size_t threads,
                           std::size_t capacity) {
    if (threads == 0 || threads > max_threads)
      throw Error("pmds crashlab: a history log holds 1.." + std::to_string(max_threads) +
                  " threads, not " + std::to_string(threads));
    if (bytes < bytes_for(threads, capacity))
      throw Error("pmds crashlab: history log block of " + std::to_string(bytes) +
                  " bytes is too small");
    std::memset(memory, 0, bytes_for(threads, capacity));
    auto* h = new (memory) Header;
    h->threads = static_cast<std::uint32_t>(threads);
    h->capacity = static_cast<std::uint32_t>(capacity);
    h->clock.store(1);  // timestamps start at 1; 0 means "not set"
    // The magic goes last, so a reader in another process (after a kill -9, which keeps every
    // store in the page cache) never sees it on a half-formatted header. Only the compiler could
    // reorder these stores (x86 keeps store order), so a signal fence suffices; it is also the
    // one ThreadSanitizer builds accept (-Wtsan rejects atomic_thread_fence).
    std::atomic_signal_fence(std::memory_order_release);
    h->magic = magic;
    return HistoryLog(h);
  }

  // A log another process formatted in this block (after it crashed, or exited).
  static HistoryLog attach(void* memory, std::size_t bytes) {
    auto* h = static_cast<Header*>(memory);
    if (bytes < sizeof(Header) || h->magic != magic || bytes < bytes_for(h->threads, h->capacity))
      throw Error("pmds crashlab: the block holds no history log (or a truncated one)");
    return HistoryLog(h);
  }

  std::size_t threads() const { return h_->threads; }
  std::size_t capacity() const { return h_->capacity; }

  // The next timestamp (every recorded one is smaller): the crash time of a crash now.
  std::uint64_t now() const { return h_->clock.load(std::memory_order_acquire); }

  // Records one operation of thread t around perform() (which returns an OpResult); `seq` is its
  // ticket's sequence number when the entry is detectable. Throws when thread t's records are
  // full, before invoking anything.
  template <class Perform, class Epoch = std::uint64_t (*)()>
  OpResult record(
      std::size_t t, const Operation& op, Perform&& perform, std::uint64_t seq = 0,
      Epoch epoch = [] { return std::uint64_t{0}; }) {
    const std::uint32_t n = h_->count[t].load(std::memory_order_relaxed);
    if (n >= h_->capacity)
      throw Error("pmds crashlab: history of thread " + std::to_string(t) + " is full (" +
                  std::to_string(h_->capacity) + " records)");
    LogRecord& r = records(t)[n];
    r.code = static_cast<std::uint8_t>(op.code);
    r.thread = static_cast<std::uint16_t>(t);
    r.seq = static_cast<std::uint32_t>(seq);  // only its parity is used (interfaces.hpp, Ticket)
    r.key = op.key;
    r.value = op.value;
    r.factor = op.factor;
    r.ret.store(0, std::memory_order_relaxed);
    r.call_epoch = epoch();
    r.call.store(h_->clock.fetch_add(1), std::memory_order_release);
    h_->count[t].store(n + 1, std::memory_order_release);
    const OpResult res = perform();
    r.ok = res.ok ? 1 : 0;
    r.result_value = res.value;
    r.result_number = res.number;
    r.ret_epoch = epoch();
    r.ret.store(h_->clock.fetch_add(1), std::memory_order_release);
    return res;
  }

  // The records of every thread (a consistent copy: completed ones have their results).
  std::vector<Record> snapshot() const {
    std::vector<Record> out;
    for (std::size_t t = 0; t < h_->threads; ++t) {
      const std::uint32_t n = h_->count[t].load(std::memory_order_acquire);
      const LogRecord* rs = records(t);
      for (std::uint32_t i = 0; i < n && i < h_->capacity; ++i) {
        Record c;
        c.call = rs[i].call.load(std::memory_order_acquire);
        c.ret = rs[i].ret.load(std::memory_order_acquire);
        static_cast<RecordFields&>(c) = rs[i];
        out.push_back(c);
      }
    }
    return out;
  }

  std::size_t recorded() const {
    std::size_t n = 0;
    for (std::size_t t = 0; t < h_->threads; ++t) n += h_->count[t].load();
    return n;
  }

 private:
  // A record in the log: two cache lines, so two threads never write the same one.
  struct alignas(64) LogRecord : RecordFields {
    std::atomic<std::uint64_t> call{0};
    std::atomic<std::uint64_t> ret{0};
  };
  static_assert(sizeof(LogRecord) == 128);

  struct alignas(64) Header {
    std::uint64_t magic = 0;
    std::uint32_t threads = 0;
    std::uint32_t capacity = 0;
    alignas(64) std::atomic<std::uint64_t> clock{1};
    alignas(64) std::atomic<std::uint32_t> count[max_threads] = {};
  };

  explicit HistoryLog(Header* h) : h_(h) {}
  LogRecord* records(std::size_t t) const {
    return reinterpret_cast<LogRecord*>(reinterpret_cast<char*>(h_) + sizeof(Header)) +
           t * h_->capacity;
  }

  Header* h_;
};

// Records and applies one operation of workload thread t. A detectable entry's operation
// carries a ticket of slot t (the thread's index, which the recovery process knows too), taken
// and recorded before the operation is invoked, so a crash at any point leaves its ticket in the
// log for the recovery's report.
inline OpResult record_operation(HistoryLog& log, const registry::Instance& inst, std::size_t t,
                                 const Operation& op) {
  const auto epoch = [&] { return inst.epoch().value_or(0); };
  if (inst.entry().criterion != Criterion::detectable)
    return log.record(
        t, op, [&] { return inst.apply(op); }, 0, epoch);
  const Ticket ticket = inst.next_ticket(t, op.code);
  return log.record(
      t, op, [&] { return inst.apply(op, ticket); }, ticket.seq, epoch);
}

// ---------------------------------------------------------------------------------------------
// JSON lines for tools/lincheck (format: tools/lincheck/checker/history.go).

inline const char* model_name(Kind k) {
  return k == Kind::priority_queue ? "pq" : registry::to_string(k);
}

// JSON values keep their keys in the order written (nlohmann::ordered_json).
using Json = nlohmann::ordered_json;

// One JSON value on one line; bytes that are not UTF-8 (in a message) are replaced, not thrown on.
inline std::string json_line(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// Whether recovered sets/maps are compared with values (a set read back by contains() probing
// has no values: then presence only).
inline bool compares_values(const registry::Entry& e) {
  return e.kind == Kind::map || (e.kind == Kind::set && e.can_iterate);
}

// An operation's result as the checker reads it (format: tools/lincheck/checker/history.go).
inline Json result_json(OpCode code, bool ok, std::uint64_t value, double number) {
  switch (code) {
    case OpCode::insert:
    case OpCode::put:
    case OpCode::remove:
    case OpCode::contains:
      return ok;
    case OpCode::get:
    case OpCode::dequeue:
    case OpCode::pop:
    case OpCode::delete_min:
    case OpCode::get_min:
      return ok ? Json(value) : Json(nullptr);
    case OpCode::read:
    case OpCode::fetch_multiply:
      return number;
    case OpCode::enqueue:
    case OpCode::push:
    case OpCode::pq_insert:
    case OpCode::sync:
      break;
  }
  return nullptr;
}

// One "op" line (a pending op, not returned, has no "ret" and no "result").
inline Json op_json(const Record& r) {
  const auto code = static_cast<OpCode>(r.code);
  std::string name = code == OpCode::pq_insert ? "insert" : registry::to_string(code);
  Json args = Json::array();
  switch (code) {
    case OpCode::insert:
    case OpCode::put:
      args = {r.key, r.value};
      break;
    case OpCode::remove:
    case OpCode::contains:
    case OpCode::get:
    case OpCode::pq_insert:
      args.push_back(r.key);
      break;
    case OpCode::enqueue:
    case OpCode::push:
      args.push_back(r.value);
      break;
    case OpCode::fetch_multiply:
      args.push_back(r.factor);
      break;
    default:
      break;
  }
  Json line = {
      {"type", "op"}, {"thread", r.thread}, {"op", name}, {"args", args}, {"call", r.call}};
  if (r.ret != 0) {
    line["ret"] = r.ret;
    line["result"] = result_json(code, r.ok != 0, r.result_value, r.result_number);
  }
  return line;
}

// The "state" object of contents read back (registry::Entry::contents order: sets/maps by key;
// queues front to back; stacks top to bottom; priority queues in delete_min order; a register's
// one item is the bit pattern of its double).
inline Json state_json(const registry::Entry& e, const std::vector<Item>& items) {
  switch (e.kind) {
    case Kind::set:
    case Kind::map: {
      const bool values = compares_values(e);
      Json keys = Json::array();
      for (const Item& it : items)
        keys.push_back(values ? Json::array({it.key, it.value}) : Json::array({it.key}));
      return {{"keys", keys}};
    }
    case Kind::queue:
    case Kind::stack:
    case Kind::priority_queue: {
      Json out = Json::array();
      for (std::size_t i = 0; i < items.size(); ++i) {
        // A stack's contents come top first; the checker wants bottom first.
        const Item& it = e.kind == Kind::stack ? items[items.size() - 1 - i] : items[i];
        out.push_back(it.key);
      }
      return {{"items", out}};
    }
    case Kind::register_object:
      return {{"value", items.empty() ? 0.0 : std::bit_cast<double>(items.front().key)}};
  }
  return Json::object();
}

// What a checked history consists of.
struct HistoryText {
  const registry::Entry* entry = nullptr;
  Json meta = Json::object();               // copied into the verdict
  const std::vector<Item>* init = nullptr;  // contents before the first record (null: empty)
  std::vector<Record> records;
  bool crashed = false;
  std::uint64_t crash_time = 0;
  const std::vector<Item>* recovered = nullptr;  // null: no observation (no crash)
  // Detectable entries: each thread's report on its last operation, with the code of that
  // operation (null: none asked for).
  const std::vector<Report>* reports = nullptr;
  // The criterion checked, when not the entry's own (a clean close promises more than a crash:
  // durable linearizability for every entry, buffered ones included).
  std::optional<Criterion> criterion;
  // The epoch the crash happened in, as recovery found it (RecoveryStats::crash_epoch): with it,
  // a buffered history marks the operations the entry's EpochBound says the crash kept
  // ("durable") or undid ("lost"), from the records' epochs (epoch_marks).
  std::optional<std::uint64_t> crash_epoch;
};

// What the entry's epoch bound says of record r after a crash in epoch e: whether it must have
// survived ("durable") or must not ("lost"); nullptr when neither. A completed operation that
// returned by epoch e-2 (nbMontage), or before the failed epoch e (InCLL), survived; one that
// began in the failed epoch did not (InCLL). sync has its own rule in the checker.
inline const char* epoch_mark(EpochBound bound, const Record& r, std::uint64_t e) {
  if (static_cast<OpCode>(r.code) == OpCode::sync) return nullptr;
  const bool done = r.ret != 0;
  switch (bound) {
    case EpochBound::two_epochs:
      return done && r.ret_epoch + 2 <= e ? "durable" : nullptr;
    case EpochBound::failed_epoch:
      if (done && r.ret_epoch < e) return "durable";
      return r.call_epoch >= e ? "lost" : nullptr;
    case EpochBound::none:
      break;
  }
  return nullptr;
}

inline const char* criterion_name(Criterion c) {
  return c == Criterion::none ? "linearizable" : to_string(c);
}

// The criterion column of the lab's results.
inline std::string criterion_label(Criterion c) {
  return criterion_name(c);
}

// The ticket each thread's last operation carried (detectable entries; slot = thread), and that
// operation, as the recovery process's "tickets" argument (crashlab/child.hpp):
// "THREAD:SEQ:CODE:KEY:VALUE:FACTOR-BITS,...".
inline std::string last_tickets(const std::vector<Record>& records) {
  std::vector<const Record*> last;
  for (const Record& r : records) {
    if (last.size() <= r.thread) last.resize(r.thread + 1, nullptr);
    if (last[r.thread] == nullptr || last[r.thread]->call < r.call) last[r.thread] = &r;
  }
  std::string out;
  for (const Record* r : last) {
    if (r == nullptr) continue;
    if (!out.empty()) out += ",";
    out += std::to_string(r->thread) + ":" + std::to_string(r->seq) + ":" +
           std::to_string(r->code) + ":" + std::to_string(r->key) + ":" + std::to_string(r->value) +
           ":" + std::to_string(std::bit_cast<std::uint64_t>(r->factor));
  }
  return out;
}

// The whole history as JSON lines, header to end.
inline std::string to_json_lines(const HistoryText& h) {
  const registry::Entry& e = *h.entry;
  std::string out = json_line({{"type", "header"},
                               {"model", model_name(e.kind)},
                               {"criterion", criterion_name(h.criterion.value_or(e.criterion))},
                               {"meta", h.meta}}) +
                    "\n";
  if (h.init != nullptr)
    out += json_line({{"type", "init"}, {"state", state_json(e, *h.init)}}) + "\n";
  const bool marks = h.criterion.value_or(e.criterion) == Criterion::buffered && h.crash_epoch &&
                     h.recovered != nullptr && e.epoch_bound() != EpochBound::none;
  for (const Record& r : h.records) {
    Json line = op_json(r);
    if (marks)
      if (const char* mark = epoch_mark(e.epoch_bound(), r, *h.crash_epoch)) line[mark] = true;
    out += json_line(line) + "\n";
  }
  if (h.crashed) out += json_line({{"type", "crash"}, {"time", h.crash_time}}) + "\n";
  if (h.recovered != nullptr)
    out += json_line({{"type", "recovered"}, {"state", state_json(e, *h.recovered)}}) + "\n";
  if (h.reports != nullptr)
    for (const Report& r : *h.reports) {
      OpCode code = OpCode::contains;
      for (const Record& op : h.records)  // the report is about the thread's last operation
        if (op.thread == r.thread) code = static_cast<OpCode>(op.code);
      out += json_line({{"type", "report"},
                        {"thread", r.thread},
                        {"taken", r.taken},
                        {"result",
                         r.taken ? result_json(code, r.result.ok, r.result.value, r.result.number)
                                 : Json(nullptr)}}) +
             "\n";
    }
  return out + json_line({{"type", "end"}}) + "\n";
}

}  // namespace pmds::crashlab
