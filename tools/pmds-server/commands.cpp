// pmds-server — the commands (commands.hpp). Replies and error texts are Redis 7's, so that
// clients written against Redis read them; where pmds-server differs the reply says why.
#include "commands.hpp"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdio>
#include <functional>
#include <unordered_map>

#include "pmds/backoff.hpp"
#include "pmds/error.hpp"

namespace pmds::server {

struct Commands::Context {
  Commands& c;
  Session& session;
  std::span<const std::string_view> args;
  Reply& reply;
};

namespace {

using Handler = After (*)(Commands::Context&);

struct CommandInfo {
  const char* name;
  int arity;          // Redis's: n exactly, -n at least n (the name counted)
  const char* flags;  // space-separated, as COMMAND INFO reports them
  int first_key, last_key, step;
  Handler handler;
  const char* group;    // COMMAND DOCS
  const char* summary;  // COMMAND DOCS (redis-cli shows it as a hint)
};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out)
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
  return out;
}
bool equals_nocase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && lower(a) == lower(b);
}

// Redis's string2ll: an optional '-', then digits without a leading zero (or "0" alone), no
// blanks, no '+', within int64.
bool parse_integer(std::string_view s, long long& out) {
  if (s.empty() || s.size() > 20) return false;
  if (s == "0") {
    out = 0;
    return true;
  }
  const std::size_t digits = s[0] == '-' ? 1 : 0;
  if (s.size() == digits || s[digits] < '1' || s[digits] > '9') return false;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && ptr == s.data() + s.size();
}

constexpr std::string_view not_integer = "ERR value is not an integer or out of range";
constexpr std::string_view syntax_error = "ERR syntax error";

}  // namespace

// The handlers, friends of Commands (they use its locks, counters and store).
struct Handlers {
  using Ctx = Commands::Context;

  // Exclusive or shared hold of the stripes of some keys, released at scope exit.
  class KeyGuard {
   public:
    KeyGuard(Commands& c, std::span<const std::string_view> keys, bool exclusive)
        : c_(c), stripes_(c.stripes_of(keys)), exclusive_(exclusive) {
      for (std::size_t s : stripes_)
        exclusive_ ? c_.stripes_[s].lock() : c_.stripes_[s].lock_shared();
    }
    KeyGuard(const KeyGuard&) = delete;
    KeyGuard& operator=(const KeyGuard&) = delete;
    ~KeyGuard() {
      for (std::size_t s : stripes_)
        exclusive_ ? c_.stripes_[s].unlock() : c_.stripes_[s].unlock_shared();
    }

   private:
    Commands& c_;
    std::vector<std::size_t> stripes_;
    bool exclusive_;
  };
  static KeyGuard write_lock(Ctx& x, std::string_view key) {
    return KeyGuard(x.c, {&key, 1}, true);
  }
  static KeyGuard read_lock(Ctx& x, std::string_view key) {
    return KeyGuard(x.c, {&key, 1}, false);
  }

  // Size checks before the store sees a key or value: Redis-style errors, not the structure's
  // exception text. False (and the error replied) when over.
  static bool storable(Ctx& x, std::string_view key) {
    return key.size() <= x.c.store_.max_key_size();
  }
  static bool key_fits(Ctx& x, std::string_view key) {
    if (storable(x, key)) return true;
    x.reply.error("ERR key is " + std::to_string(key.size()) + " bytes; " +
                  std::string(x.c.store_.structure()) + " takes keys of at most " +
                  std::to_string(x.c.store_.max_key_size()) + " bytes");
    return false;
  }
  // A read of a key longer than the structure takes: it cannot be present (Redis would answer
  // the same for a key never written), so the read answers "absent" without asking the store.
  static std::optional<std::string> get_value(Ctx& x, std::string_view key) {
    return storable(x, key) ? x.c.store_.get(key) : std::nullopt;
  }
  static bool contains(Ctx& x, std::string_view key) {
    return storable(x, key) && x.c.store_.contains(key);
  }
  static bool value_fits(Ctx& x, std::size_t size) {
    if (size <= x.c.store_.max_value_size()) return true;
    x.reply.error("ERR string value is " + std::to_string(size) + " bytes; " +
                  std::string(x.c.store_.structure()) + " takes values of at most " +
                  std::to_string(x.c.store_.max_value_size()) + " bytes");
    return false;
  }

  // Room for a write. A removal takes a pool block too (nbMontage's anti-payload; InCLL's log),
  // so a pool that writes filled to its limit could never be emptied: a write that may take a
  // block is refused with -OOM while fewer than write_reserve_chunks chunks are free or left to
  // grow into, and DEL, GETDEL and FLUSHALL run on the reserve. (Writes racing past the check
  // take a few blocks of it, not its chunks.)
  static constexpr std::size_t write_reserve_chunks = 4;
  static bool room_to_write(Ctx& x) {
    const pm::Pool& pool = x.c.store_.pool();
    const auto& a = pool.allocator();
    const std::size_t growth_chunks =
        (pool.max_size() - std::min(pool.max_size(), pool.size())) / a.chunk_size();
    if (a.free_chunks() + growth_chunks >= write_reserve_chunks) return true;
    x.reply.error(
        "OOM command not allowed: the pool is full (" + std::to_string(pool.size() >> 20) +
        " MiB, its limit; --max-pool-size raises it); DEL, GETDEL and FLUSHALL still run");
    return false;
  }

  // The store's put and remove, keeping the key count (under the key's exclusive stripe).
  static void put(Ctx& x, std::string_view key, std::string_view value) {
    if (x.c.store_.put(key, value)) x.c.keys_.fetch_add(1, std::memory_order_relaxed);
  }
  static bool remove(Ctx& x, std::string_view key) {
    if (!x.c.store_.remove(key)) return false;
    x.c.keys_.fetch_sub(1, std::memory_order_relaxed);
    return true;
  }

  // ---- connection ------------------------------------------------------------------------
  static After ping(Ctx& x) {
    if (x.args.size() > 2) return arity_error(x);
    if (x.args.size() == 2)
      x.reply.bulk(x.args[1]);
    else
      x.reply.simple("PONG");
    return After::next;
  }
  static After echo(Ctx& x) {
    x.reply.bulk(x.args[1]);
    return After::next;
  }
  static After quit(Ctx& x) {
    x.reply.ok();
    return After::close;
  }
  static After select(Ctx& x) {
    long long db = 0;
    if (!parse_integer(x.args[1], db)) {
      x.reply.error(not_integer);
    } else if (db != 0) {
      x.reply.error("ERR DB index is out of range");
    } else {
      x.reply.ok();
    }
    return After::next;
  }
  static After auth(Ctx& x) {
    if (x.args.size() > 3) return arity_error(x);
    const std::string_view password = x.args.back();
    const bool default_user = x.args.size() == 2 || x.args[1] == "default";
    if (x.c.config_.requirepass.empty()) {
      if (x.args.size() == 2) {
        x.reply.error(
            "ERR AUTH <password> called without any password configured for the default user. "
            "Are you sure your configuration is correct?");
        return After::next;
      }
    }
    if (default_user && (x.c.config_.requirepass.empty() || password == x.c.config_.requirepass)) {
      x.session.authenticated = true;
      x.reply.ok();
    } else {
      x.reply.error("WRONGPASS invalid username-password pair or user is disabled.");
    }
    return After::next;
  }
  // HELLO [protover [AUTH username password] [SETNAME name]]: RESP2 only.
  static After hello(Ctx& x) {
    std::size_t i = 1;
    if (x.args.size() > 1) {
      long long version = 0;
      if (!parse_integer(x.args[1], version)) {
        x.reply.error("ERR Protocol version is not an integer or out of range");
        return After::next;
      }
      if (version != 2) {
        x.reply.error("NOPROTO unsupported protocol version (pmds-server speaks RESP2)");
        return After::next;
      }
      i = 2;
    }
    std::string_view new_name;
    bool set_name = false;
    for (; i < x.args.size(); ++i) {
      if (equals_nocase(x.args[i], "auth") && i + 2 < x.args.size()) {
        const std::string_view user = x.args[i + 1], password = x.args[i + 2];
        if (user != "default" ||
            (!x.c.config_.requirepass.empty() && password != x.c.config_.requirepass)) {
          x.reply.error("WRONGPASS invalid username-password pair or user is disabled.");
          return After::next;
        }
        x.session.authenticated = true;
        i += 2;
      } else if (equals_nocase(x.args[i], "setname") && i + 1 < x.args.size()) {
        new_name = x.args[++i];
        set_name = true;
      } else {
        x.reply.error("ERR Syntax error in HELLO option '" + std::string(x.args[i]) + "'");
        return After::next;
      }
    }
    if (!x.session.authenticated) {
      x.reply.error(
          "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO "
          "<proto> AUTH <user> <pass> option can be used to authenticate the client and select the "
          "RESP protocol version at the same time");
      return After::next;
    }
    if (set_name) x.session.name = new_name;
    x.reply.array(14);
    x.reply.bulk("server");
    x.reply.bulk("redis");
    x.reply.bulk("version");
    x.reply.bulk(redis_version);
    x.reply.bulk("proto");
    x.reply.integer(2);
    x.reply.bulk("id");
    x.reply.integer(static_cast<long long>(x.session.id));
    x.reply.bulk("mode");
    x.reply.bulk("standalone");
    x.reply.bulk("role");
    x.reply.bulk("master");
    x.reply.bulk("modules");
    x.reply.array(0);
    return After::next;
  }
  static After client(Ctx& x) {
    const std::string sub = lower(x.args[1]);
    if (sub == "id" && x.args.size() == 2) {
      x.reply.integer(static_cast<long long>(x.session.id));
    } else if (sub == "getname" && x.args.size() == 2) {
      if (x.session.name.empty())
        x.reply.null_bulk();
      else
        x.reply.bulk(x.session.name);
    } else if (sub == "setname" && x.args.size() == 3) {
      const std::string_view name = x.args[2];
      if (std::any_of(name.begin(), name.end(), [](char ch) { return ch < '!' || ch > '~'; })) {
        x.reply.error("ERR Client names cannot contain spaces, newlines or special characters.");
      } else {
        x.session.name = name;
        x.reply.ok();
      }
    } else if (sub == "setinfo" && x.args.size() == 4) {
      x.reply.ok();  // library name and version (redis-py 5 sends them): nothing to keep
    } else if (sub == "id" || sub == "getname" || sub == "setname" || sub == "setinfo") {
      x.reply.error("ERR wrong number of arguments for 'client|" + sub + "' command");
    } else {
      x.reply.error("ERR unknown subcommand '" + std::string(x.args[1]).substr(0, 128) +
                    "'. Try CLIENT HELP.");
    }
    return After::next;
  }

  // ---- strings ---------------------------------------------------------------------------
  static After get(Ctx& x) {
    std::optional<std::string> v;
    {
      auto guard = read_lock(x, x.args[1]);
      v = get_value(x, x.args[1]);
    }
    v ? x.reply.bulk(*v) : x.reply.null_bulk();
    return After::next;
  }
  // SET key value [NX | XX] [GET] [KEEPTTL]; EX/PX/EXAT/PXAT refused (no expiry).
  static After set(Ctx& x) {
    bool nx = false, xx = false, get_old = false;
    for (std::size_t i = 3; i < x.args.size(); ++i) {
      const std::string opt = lower(x.args[i]);
      if (opt == "nx" && !xx) {
        nx = true;
      } else if (opt == "xx" && !nx) {
        xx = true;
      } else if (opt == "get") {
        get_old = true;
      } else if (opt == "keepttl") {
        // No key has a time to live here: keeping it changes nothing.
      } else if (opt == "ex" || opt == "px" || opt == "exat" || opt == "pxat") {
        x.reply.error("ERR pmds-server keeps keys until they are deleted: SET's " +
                      std::string(x.args[i]) + " (expiry) is not supported");
        return After::next;
      } else {
        x.reply.error(syntax_error);
        return After::next;
      }
    }
    return set_key(x, x.args[1], x.args[2], nx, xx, get_old);
  }
  static After set_key(Ctx& x, std::string_view key, std::string_view value, bool nx, bool xx,
                       bool get_old) {
    if (!key_fits(x, key) || !value_fits(x, value.size()) || !room_to_write(x)) return After::next;
    auto guard = write_lock(x, key);
    std::optional<std::string> old;
    bool present = false;
    if (get_old) {
      old = x.c.store_.get(key);
      present = old.has_value();
    } else if (nx || xx) {
      present = x.c.store_.contains(key);
    }
    const bool write = !(nx && present) && !(xx && !present);
    if (write) put(x, key, value);
    if (get_old)
      old ? x.reply.bulk(*old) : x.reply.null_bulk();
    else if (write)
      x.reply.ok();
    else
      x.reply.null_bulk();
    return After::next;
  }
  static After setnx(Ctx& x) {
    const std::string_view key = x.args[1], value = x.args[2];
    if (!key_fits(x, key) || !value_fits(x, value.size()) || !room_to_write(x)) return After::next;
    auto guard = write_lock(x, key);
    if (x.c.store_.contains(key)) {
      x.reply.integer(0);
    } else {
      put(x, key, value);
      x.reply.integer(1);
    }
    return After::next;
  }
  static After getset(Ctx& x) { return set_key(x, x.args[1], x.args[2], false, false, true); }
  static After getdel(Ctx& x) {
    const std::string_view key = x.args[1];
    auto guard = write_lock(x, key);
    std::optional<std::string> old = get_value(x, key);
    if (old) remove(x, key);
    old ? x.reply.bulk(*old) : x.reply.null_bulk();
    return After::next;
  }
  static After del(Ctx& x) {
    const auto keys = x.args.subspan(1);
    KeyGuard guard(x.c, keys, true);
    long long removed = 0;
    for (std::string_view k : keys) removed += storable(x, k) && remove(x, k) ? 1 : 0;
    x.reply.integer(removed);
    return After::next;
  }
  static After exists(Ctx& x) {
    const auto keys = x.args.subspan(1);
    KeyGuard guard(x.c, keys, false);
    long long found = 0;  // a key named twice counts twice, as in Redis
    for (std::string_view k : keys) found += contains(x, k) ? 1 : 0;
    x.reply.integer(found);
    return After::next;
  }
  static After mget(Ctx& x) {
    const auto keys = x.args.subspan(1);
    std::vector<std::optional<std::string>> values;
    values.reserve(keys.size());
    {
      KeyGuard guard(x.c, keys, false);
      for (std::string_view k : keys) values.push_back(get_value(x, k));
    }
    x.reply.array(values.size());
    for (const auto& v : values) v ? x.reply.bulk(*v) : x.reply.null_bulk();
    return After::next;
  }
  static After mset_or_msetnx(Ctx& x, bool only_if_none) {
    if (x.args.size() % 2 == 0) return arity_error(x);
    std::vector<std::string_view> keys;
    for (std::size_t i = 1; i < x.args.size(); i += 2) {
      keys.push_back(x.args[i]);
      if (!key_fits(x, x.args[i]) || !value_fits(x, x.args[i + 1].size())) return After::next;
    }
    if (!room_to_write(x)) return After::next;
    KeyGuard guard(x.c, keys, true);
    if (only_if_none) {
      for (std::string_view k : keys) {
        if (x.c.store_.contains(k)) {
          x.reply.integer(0);
          return After::next;
        }
      }
    }
    for (std::size_t i = 1; i < x.args.size(); i += 2) put(x, x.args[i], x.args[i + 1]);
    only_if_none ? x.reply.integer(1) : x.reply.ok();
    return After::next;
  }
  static After mset(Ctx& x) { return mset_or_msetnx(x, false); }
  static After msetnx(Ctx& x) { return mset_or_msetnx(x, true); }
  static After strlen(Ctx& x) {
    auto guard = read_lock(x, x.args[1]);
    const std::optional<std::string> v = get_value(x, x.args[1]);
    x.reply.integer(v ? static_cast<long long>(v->size()) : 0);
    return After::next;
  }
  static After append(Ctx& x) {
    const std::string_view key = x.args[1], tail = x.args[2];
    if (!key_fits(x, key) || !room_to_write(x)) return After::next;
    auto guard = write_lock(x, key);
    std::string value = x.c.store_.get(key).value_or(std::string());
    if (!value_fits(x, value.size() + tail.size())) return After::next;
    value += tail;
    put(x, key, value);
    x.reply.integer(static_cast<long long>(value.size()));
    return After::next;
  }
  static After add_to(Ctx& x, long long delta) {
    const std::string_view key = x.args[1];
    if (!key_fits(x, key) || !room_to_write(x)) return After::next;
    auto guard = write_lock(x, key);
    long long value = 0;
    if (const std::optional<std::string> old = x.c.store_.get(key)) {
      if (!parse_integer(*old, value)) {
        x.reply.error(not_integer);
        return After::next;
      }
    }
    if ((delta < 0 && value < 0 && delta < LLONG_MIN - value) ||
        (delta > 0 && value > 0 && delta > LLONG_MAX - value)) {
      x.reply.error("ERR increment or decrement would overflow");
      return After::next;
    }
    value += delta;
    put(x, key, std::to_string(value));
    x.reply.integer(value);
    return After::next;
  }
  static After incr(Ctx& x) { return add_to(x, 1); }
  static After decr(Ctx& x) { return add_to(x, -1); }
  static After incrby(Ctx& x) {
    long long delta = 0;
    if (!parse_integer(x.args[2], delta)) {
      x.reply.error(not_integer);
      return After::next;
    }
    return add_to(x, delta);
  }
  static After decrby(Ctx& x) {
    long long delta = 0;
    if (!parse_integer(x.args[2], delta)) {
      x.reply.error(not_integer);
      return After::next;
    }
    if (delta == LLONG_MIN) {
      x.reply.error("ERR decrement would overflow");
      return After::next;
    }
    return add_to(x, -delta);
  }
  static After type(Ctx& x) {
    auto guard = read_lock(x, x.args[1]);
    x.reply.simple(contains(x, x.args[1]) ? "string" : "none");
    return After::next;
  }
  // TTL and PTTL: -1 for a key (none expires), -2 for no key.
  static After ttl(Ctx& x) {
    auto guard = read_lock(x, x.args[1]);
    x.reply.integer(contains(x, x.args[1]) ? -1 : -2);
    return After::next;
  }

  // ---- keyspace --------------------------------------------------------------------------
  static After dbsize(Ctx& x) {
    x.reply.integer(static_cast<long long>(x.c.key_count()));
    return After::next;
  }
  static bool ordered_or_refuse(Ctx& x) {
    if (x.c.store_.ordered()) return true;
    x.reply.error("ERR " + lower(x.args[0]) + " needs an ordered map; this server serves " +
                  std::string(x.c.store_.structure()) +
                  " (serve skiplist-bytes/montage or masstree-bytes/incll to iterate keys)");
    return false;
  }
  // SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]: up to COUNT keys after the cursor's
  // position are read, those matching are returned; every key present for the whole iteration
  // is returned once (the keys come in byte order and the cursor names the last one read).
  static After scan(Ctx& x) {
    if (!ordered_or_refuse(x)) return After::next;
    unsigned long long cursor = 0;
    {
      const std::string_view c = x.args[1];
      const auto [ptr, ec] = std::from_chars(c.data(), c.data() + c.size(), cursor);
      if (c.empty() || ec != std::errc{} || ptr != c.data() + c.size()) {
        x.reply.error("ERR invalid cursor");
        return After::next;
      }
    }
    std::string_view pattern;
    bool match = false, strings_only = true;
    long long count = 10;
    for (std::size_t i = 2; i < x.args.size(); i += 2) {
      if (i + 1 >= x.args.size()) {
        x.reply.error(syntax_error);
        return After::next;
      }
      const std::string opt = lower(x.args[i]);
      if (opt == "match") {
        pattern = x.args[i + 1];
        match = !(pattern == "*");
      } else if (opt == "count") {
        if (!parse_integer(x.args[i + 1], count)) {
          x.reply.error(not_integer);
          return After::next;
        }
        if (count < 1) {
          x.reply.error(syntax_error);
          return After::next;
        }
      } else if (opt == "type") {
        strings_only = equals_nocase(x.args[i + 1], "string");
      } else {
        x.reply.error(syntax_error);
        return After::next;
      }
    }
    std::string from;  // the last key the cursor read ("" and not skipped when starting)
    bool resume = false;
    if (cursor != 0) {
      std::lock_guard lock(x.c.cursors_lock_);
      auto it = x.c.cursors_.find(cursor);
      if (it == x.c.cursors_.end()) {
        x.reply.error("ERR invalid cursor (pmds-server keeps the newest " +
                      std::to_string(Commands::max_cursors) + " SCAN cursors; start again from 0)");
        return After::next;
      }
      from = it->second;  // kept: a client may repeat a SCAN with the same cursor
      resume = true;
    }
    std::vector<std::string> keys;
    std::optional<std::string> last;  // the last key read: where the next call resumes
    const std::size_t want = static_cast<std::size_t>(count) + (resume ? 1 : 0);
    const std::size_t read = x.c.store_.scan(from, want, [&](std::string_view k, std::string_view) {
      if (resume && k == from) return;  // the cursor's own key, returned by the previous call
      last.emplace(k);
      if (strings_only && (!match || glob_match(pattern, k))) keys.emplace_back(k);
    });
    // Fewer read than asked: no keys follow (one inserted after the read may be missed, as
    // Redis allows for keys not present for the whole iteration). Cursor 0 ends the iteration.
    std::uint64_t next = 0;
    if (read == want && last) {
      std::lock_guard lock(x.c.cursors_lock_);
      next = x.c.next_cursor_++;
      x.c.cursors_.emplace(next, std::move(*last));
      if (x.c.cursors_.size() > Commands::max_cursors) x.c.cursors_.erase(x.c.cursors_.begin());
    }
    x.reply.array(2);
    x.reply.bulk(std::to_string(next));
    x.reply.array(keys.size());
    for (const std::string& k : keys) x.reply.bulk(k);
    return After::next;
  }
  static After keys(Ctx& x) {
    if (!ordered_or_refuse(x)) return After::next;
    const std::string_view pattern = x.args[1];
    std::vector<std::string> found;
    x.c.store_.scan({}, ~std::size_t{0}, [&](std::string_view k, std::string_view) {
      if (glob_match(pattern, k)) found.emplace_back(k);
    });
    x.reply.array(found.size());
    for (const std::string& k : found) x.reply.bulk(k);
    return After::next;
  }
  // FLUSHALL / FLUSHDB [ASYNC | SYNC]: every stripe held exclusive, so no command runs while the
  // keys are collected (the hash map lists its keys only when quiescent) and removed.
  static After flushall(Ctx& x) {
    if (x.args.size() > 2 || (x.args.size() == 2 && !equals_nocase(x.args[1], "sync") &&
                              !equals_nocase(x.args[1], "async"))) {
      x.reply.error(syntax_error);
      return After::next;
    }
    if (!x.c.config_.enable_flushall) {
      x.reply.error("ERR " + lower(x.args[0]) +
                    " is disabled: it deletes every key; start pmds-server with --enable-flushall "
                    "to allow it");
      return After::next;
    }
    for (auto& s : x.c.stripes_) s.lock();
    std::vector<std::string> all;
    x.c.store_.for_each_quiescent(
        [&](std::string_view k, std::string_view) { all.emplace_back(k); });
    for (const std::string& k : all) remove(x, k);
    for (auto& s : x.c.stripes_) s.unlock();
    x.reply.ok();
    return After::next;
  }

  // ---- durability ------------------------------------------------------------------------
  // WAITAOF numlocal numreplicas timeout (Redis 7.2): [1, 0] once every write acknowledged
  // before it is durable. There are no replicas; asking for some is an error rather than a wait
  // that could never end.
  static After waitaof(Ctx& x) {
    long long numlocal = 0, numreplicas = 0, timeout = 0;
    if (!parse_integer(x.args[1], numlocal) || !parse_integer(x.args[2], numreplicas) ||
        !parse_integer(x.args[3], timeout)) {
      x.reply.error(not_integer);
      return After::next;
    }
    if (timeout < 0) {
      x.reply.error("ERR timeout is negative");
      return After::next;
    }
    if (numlocal < 0 || numreplicas < 0) {
      x.reply.error("ERR numlocal and numreplicas must be 0 or more");
      return After::next;
    }
    if (numreplicas > 0) {
      x.reply.error("ERR WAITAOF cannot wait for replicas: pmds-server has none");
      return After::next;
    }
    if (x.c.store_.criterion() == Criterion::durable) {
      sync_reply(x.reply);  // every acknowledged write is already durable
      return After::next;
    }
    return After::sync;
  }
  static void sync_reply(Reply& reply) {
    reply.array(2);
    reply.integer(1);
    reply.integer(0);
  }

  // ---- introspection ---------------------------------------------------------------------
  static constexpr const char* redis_version = "7.2.0";  // the command set it follows (WAITAOF)

  static After dbinfo(Ctx& x) {  // INFO [section ...]
    std::vector<std::string> wanted;
    for (std::size_t i = 1; i < x.args.size(); ++i) wanted.push_back(lower(x.args[i]));
    auto want = [&](const char* section) {
      if (wanted.empty()) return true;
      for (const std::string& w : wanted)
        if (w == section || w == "all" || w == "default" || w == "everything") return true;
      return false;
    };
    Store& st = x.c.store_;
    std::string s;
    auto line = [&s](const std::string& k, const std::string& v) { s += k + ":" + v + "\r\n"; };
    if (want("server")) {
      s += "# Server\r\n";
      line("redis_version", redis_version);
      line("pmds_version", PMDS_VERSION);
      line("redis_mode", "standalone");
      line("process_id", std::to_string(getpid()));
      line("tcp_port", std::to_string(x.c.config_.port));
      const auto up = std::chrono::steady_clock::now() - x.c.started_;
      line("uptime_in_seconds",
           std::to_string(std::chrono::duration_cast<std::chrono::seconds>(up).count()));
      line("io_threads_active", std::to_string(x.c.config_.threads));
      s += "\r\n";
    }
    if (want("clients")) {
      s += "# Clients\r\n";
      line("connected_clients", std::to_string(x.c.clients_.load()));
      line("maxclients", std::to_string(x.c.config_.max_clients));
      s += "\r\n";
    }
    if (want("memory")) {
      // DRAM: the heap in use (the maps' volatile indexes); the pool: the slots the map holds
      // and the file's length.
      const struct mallinfo2 heap = mallinfo2();
      line("# Memory\r\nused_memory", std::to_string(heap.uordblks + heap.hblkhd));
      line("pmds_pool_allocated_bytes", std::to_string(st.pool().allocator().allocated_bytes()));
      line("pmds_pool_file_bytes", std::to_string(st.pool().size()));
      line("pmds_pool_max_bytes", std::to_string(st.pool().max_size()));
      s += "\r\n";
    }
    if (want("persistence")) {
      s += "# Persistence\r\n";
      line("loading", "0");
      line("aof_enabled", "0");
      line("rdb_bgsave_in_progress", "0");
      line("pmds_structure", std::string(st.structure()));
      line("pmds_criterion", to_string(st.criterion()));
      line("pmds_crash_loses", std::string(st.crash_loses()));
      line("pmds_pool", st.pool().path());
      line("pmds_recovered", st.recovered() ? "1" : "0");
      line("pmds_recovered_keys", std::to_string(x.c.recovered_keys_));
      char ms[32];
      std::snprintf(ms, sizeof ms, "%.1f", x.c.recovery_ms_);
      line("pmds_recovery_ms", ms);
      s += "\r\n";
    }
    if (want("stats")) {
      s += "# Stats\r\n";
      line("total_connections_received", std::to_string(x.c.connections_received_.load()));
      line("total_commands_processed", std::to_string(x.c.commands_processed_.load()));
      s += "\r\n";
    }
    if (want("keyspace")) {
      s += "# Keyspace\r\n";
      if (x.c.key_count() > 0)
        line("db0", "keys=" + std::to_string(x.c.key_count()) + ",expires=0,avg_ttl=0");
      s += "\r\n";
    }
    x.reply.bulk(s);
    return After::next;
  }
  static After config(Ctx& x) {
    const std::string sub = lower(x.args[1]);
    if (sub != "get") {
      if (sub == "set" || sub == "resetstat" || sub == "rewrite")
        x.reply.error("ERR pmds-server is configured on its command line; CONFIG " +
                      std::string(x.args[1]) + " is not supported");
      else
        x.reply.error("ERR unknown subcommand '" + std::string(x.args[1]).substr(0, 128) +
                      "'. Try CONFIG HELP.");
      return After::next;
    }
    if (x.args.size() < 3) {
      x.reply.error("ERR wrong number of arguments for 'config|get' command");
      return After::next;
    }
    const Config& cf = x.c.config_;
    const std::pair<std::string, std::string> table[] = {
        {"save", ""},
        {"appendonly", "no"},
        {"appendfsync", "no"},
        {"databases", "1"},
        {"port", std::to_string(cf.port)},
        {"bind", cf.bind},
        {"maxclients", std::to_string(cf.max_clients)},
        {"proto-max-bulk-len", std::to_string(cf.limits.max_bulk_length)},
        {"client-query-buffer-limit", std::to_string(cf.max_query_buffer)},
        {"requirepass", cf.requirepass},
        {"io-threads", std::to_string(cf.threads)},
    };
    std::vector<const std::pair<std::string, std::string>*> found;
    for (const auto& entry : table)
      for (std::size_t i = 2; i < x.args.size(); ++i)
        if (glob_match(x.args[i], entry.first, true)) {
          found.push_back(&entry);
          break;
        }
    x.reply.array(2 * found.size());
    for (const auto* e : found) {
      x.reply.bulk(e->first);
      x.reply.bulk(e->second);
    }
    return After::next;
  }
  static After command(Ctx& x);

  static After arity_error(Ctx& x) {
    x.reply.error("ERR wrong number of arguments for '" + lower(x.args[0]) + "' command");
    return After::next;
  }
};

namespace {

const std::vector<CommandInfo>& command_table() {
  using H = Handlers;
  static const std::vector<CommandInfo> table = {
      {"ping", -1, "fast", 0, 0, 0, H::ping, "connection",
       "Returns the server's liveliness response."},
      {"echo", 2, "fast", 0, 0, 0, H::echo, "connection", "Returns the given string."},
      {"quit", -1, "fast no_auth", 0, 0, 0, H::quit, "connection", "Closes the connection."},
      {"select", 2, "loading stale fast", 0, 0, 0, H::select, "connection",
       "Changes the selected database (only database 0 exists here)."},
      {"auth", -2, "noscript loading stale fast no_auth", 0, 0, 0, H::auth, "connection",
       "Authenticates the connection."},
      {"hello", -1, "noscript loading stale fast no_auth", 0, 0, 0, H::hello, "connection",
       "Handshakes with the server (RESP2 only)."},
      {"client", -2, "admin noscript loading stale", 0, 0, 0, H::client, "connection",
       "Client connection commands: ID, GETNAME, SETNAME."},
      {"get", 2, "readonly fast", 1, 1, 1, H::get, "string", "Returns the string value of a key."},
      {"set", -3, "write denyoom", 1, 1, 1, H::set, "string",
       "Sets the string value of a key (NX, XX, GET; no expiry)."},
      {"setnx", 3, "write denyoom fast", 1, 1, 1, H::setnx, "string",
       "Sets the string value of a key only when the key doesn't exist."},
      {"getset", 3, "write denyoom fast", 1, 1, 1, H::getset, "string",
       "Returns the previous string value of a key after setting it to a new value."},
      {"getdel", 2, "write fast", 1, 1, 1, H::getdel, "string",
       "Returns the string value of a key after deleting the key."},
      {"del", -2, "write", 1, -1, 1, H::del, "generic", "Deletes one or more keys."},
      {"unlink", -2, "write fast", 1, -1, 1, H::del, "generic",
       "Deletes one or more keys (as DEL)."},
      {"exists", -2, "readonly fast", 1, -1, 1, H::exists, "generic",
       "Determines whether one or more keys exist."},
      {"mget", -2, "readonly fast", 1, -1, 1, H::mget, "string",
       "Atomically returns the string values of one or more keys."},
      {"mset", -3, "write denyoom", 1, -1, 2, H::mset, "string",
       "Atomically creates or modifies the string values of one or more keys."},
      {"msetnx", -3, "write denyoom", 1, -1, 2, H::msetnx, "string",
       "Atomically sets the values of one or more keys only when none of them exist."},
      {"strlen", 2, "readonly fast", 1, 1, 1, H::strlen, "string",
       "Returns the length of a string value."},
      {"append", 3, "write denyoom fast", 1, 1, 1, H::append, "string",
       "Appends a string to the value of a key; creates the key if needed."},
      {"incr", 2, "write denyoom fast", 1, 1, 1, H::incr, "string",
       "Increments the integer value of a key by one."},
      {"decr", 2, "write denyoom fast", 1, 1, 1, H::decr, "string",
       "Decrements the integer value of a key by one."},
      {"incrby", 3, "write denyoom fast", 1, 1, 1, H::incrby, "string",
       "Increments the integer value of a key by a number."},
      {"decrby", 3, "write denyoom fast", 1, 1, 1, H::decrby, "string",
       "Decrements a number from the integer value of a key."},
      {"type", 2, "readonly fast", 1, 1, 1, H::type, "generic",
       "Determines the type of value stored at a key."},
      {"ttl", 2, "readonly fast", 1, 1, 1, H::ttl, "generic",
       "Returns the time to live of a key in seconds (-1: keys never expire here)."},
      {"pttl", 2, "readonly fast", 1, 1, 1, H::ttl, "generic",
       "Returns the time to live of a key in milliseconds (-1: keys never expire here)."},
      {"dbsize", 1, "readonly fast", 0, 0, 0, H::dbsize, "server", "Returns the number of keys."},
      {"scan", -2, "readonly", 0, 0, 0, H::scan, "generic",
       "Iterates over the key names (ordered maps, in key order)."},
      {"keys", 2, "readonly", 0, 0, 0, H::keys, "generic",
       "Returns all key names that match a pattern (ordered maps)."},
      {"flushall", -1, "write", 0, 0, 0, H::flushall, "server",
       "Removes all keys (only with --enable-flushall)."},
      {"flushdb", -1, "write", 0, 0, 0, H::flushall, "server",
       "Removes all keys (only with --enable-flushall)."},
      {"waitaof", 4, "noscript", 0, 0, 0, H::waitaof, "generic",
       "Blocks until every write acknowledged before it is durable."},
      {"info", -1, "loading stale", 0, 0, 0, H::dbinfo, "server",
       "Returns information and statistics about the server."},
      {"config", -2, "admin noscript loading stale", 0, 0, 0, H::config, "server",
       "CONFIG GET: returns the effective values of configuration parameters."},
      {"command", -1, "loading stale", 0, 0, 0, H::command, "server",
       "Returns detailed information about the commands."},
  };
  return table;
}

const std::unordered_map<std::string, const CommandInfo*>& command_index() {
  static const auto index = [] {
    std::unordered_map<std::string, const CommandInfo*> m;
    for (const CommandInfo& c : command_table()) m.emplace(c.name, &c);
    return m;
  }();
  return index;
}

void command_info_reply(Reply& reply, const CommandInfo& c) {
  std::vector<std::string_view> flags;
  for (std::string_view f = c.flags; !f.empty();) {
    const std::size_t sp = f.find(' ');
    flags.push_back(f.substr(0, sp));
    f = sp == std::string_view::npos ? std::string_view{} : f.substr(sp + 1);
  }
  reply.array(10);
  reply.bulk(c.name);
  reply.integer(c.arity);
  reply.array(flags.size());
  for (std::string_view f : flags) reply.simple(f);
  reply.integer(c.first_key);
  reply.integer(c.last_key);
  reply.integer(c.step);
  reply.array(0);  // ACL categories
  reply.array(0);  // tips
  reply.array(0);  // key specifications
  reply.array(0);  // subcommands
}

}  // namespace

// COMMAND, COMMAND COUNT, COMMAND INFO name..., COMMAND DOCS [name...] (summary and group),
// COMMAND LIST.
After Handlers::command(Ctx& x) {
  const auto& table = command_table();
  if (x.args.size() == 1) {
    x.reply.array(table.size());
    for (const CommandInfo& c : table) command_info_reply(x.reply, c);
    return After::next;
  }
  const std::string sub = lower(x.args[1]);
  if (sub == "count" && x.args.size() == 2) {
    x.reply.integer(static_cast<long long>(table.size()));
  } else if (sub == "info") {
    if (x.args.size() == 2) {
      x.reply.array(table.size());
      for (const CommandInfo& c : table) command_info_reply(x.reply, c);
    } else {
      x.reply.array(x.args.size() - 2);
      for (std::size_t i = 2; i < x.args.size(); ++i) {
        const auto it = command_index().find(lower(x.args[i]));
        if (it == command_index().end())
          x.reply.null_bulk();
        else
          command_info_reply(x.reply, *it->second);
      }
    }
  } else if (sub == "docs") {
    std::vector<const CommandInfo*> docs;
    if (x.args.size() == 2) {
      for (const CommandInfo& c : table) docs.push_back(&c);
    } else {
      for (std::size_t i = 2; i < x.args.size(); ++i)
        if (const auto it = command_index().find(lower(x.args[i])); it != command_index().end())
          docs.push_back(it->second);
    }
    x.reply.array(2 * docs.size());  // RESP2's form of Redis's map: name, then its fields
    for (const CommandInfo* c : docs) {
      x.reply.bulk(c->name);
      x.reply.array(4);
      x.reply.bulk("summary");
      x.reply.bulk(c->summary);
      x.reply.bulk("group");
      x.reply.bulk(c->group);
    }
  } else if (sub == "list" && x.args.size() == 2) {
    x.reply.array(table.size());
    for (const CommandInfo& c : table) x.reply.bulk(c.name);
  } else {
    x.reply.error("ERR unknown subcommand or wrong number of arguments for '" +
                  std::string(x.args[1]).substr(0, 128) + "'. Try COMMAND HELP.");
  }
  return After::next;
}

Commands::Commands(Store& store, const Config& config, std::size_t recovered_keys,
                   double recovery_ms)
    : store_(store),
      config_(config),
      recovered_keys_(recovered_keys),
      recovery_ms_(recovery_ms),
      stripes_(stripe_count),
      keys_(static_cast<std::int64_t>(recovered_keys)) {}

void Commands::Stripe::lock() {
  for (int spins = 0;;) {
    std::int32_t free = 0;
    if (state.compare_exchange_weak(free, -1, std::memory_order_acquire, std::memory_order_relaxed))
      return;
    backoff(spins);
  }
}

void Commands::Stripe::lock_shared() {
  for (int spins = 0;;) {
    std::int32_t readers = state.load(std::memory_order_relaxed);
    if (readers >= 0 && state.compare_exchange_weak(readers, readers + 1, std::memory_order_acquire,
                                                    std::memory_order_relaxed))
      return;
    backoff(spins);
  }
}

std::size_t Commands::stripe_of(std::string_view key) const {
  return std::hash<std::string_view>{}(key) % stripe_count;
}

std::vector<std::size_t> Commands::stripes_of(std::span<const std::string_view> keys) const {
  std::vector<std::size_t> s;
  s.reserve(keys.size());
  for (std::string_view k : keys) s.push_back(stripe_of(k));
  std::sort(s.begin(), s.end());  // one order for everyone: no deadlock between commands
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
}

bool Commands::client_connected() {
  connections_received_.fetch_add(1, std::memory_order_relaxed);
  if (clients_.fetch_add(1) >= config_.max_clients) {
    clients_.fetch_sub(1);
    return false;
  }
  return true;
}
void Commands::client_disconnected() {
  clients_.fetch_sub(1);
}

void Commands::sync_reply(Reply& reply) {
  Handlers::sync_reply(reply);
}

After Commands::execute(Session& session, std::span<const std::string_view> args, Reply& reply) {
  commands_processed_.fetch_add(1, std::memory_order_relaxed);
  Context x{*this, session, args, reply};
  const std::string name = lower(args[0]);
  const auto it = command_index().find(name);
  if (it == command_index().end()) {
    std::string message = "ERR unknown command '" + std::string(args[0]).substr(0, 128) +
                          "', with args beginning with: ";
    for (std::size_t i = 1; i < args.size() && message.size() < 1024; ++i)
      message += "'" + std::string(args[i]).substr(0, 128) + "' ";
    reply.error(message);
    return After::next;
  }
  const CommandInfo& c = *it->second;
  if (!session.authenticated && !config_.requirepass.empty() &&
      std::string_view(c.flags).find("no_auth") == std::string_view::npos) {
    reply.error("NOAUTH Authentication required.");
    return After::next;
  }
  const long long argc = static_cast<long long>(args.size());
  if ((c.arity > 0 && argc != c.arity) || (c.arity < 0 && argc < -c.arity))
    return Handlers::arity_error(x);
  try {
    return c.handler(x);
  } catch (const PoolFull& e) {
    reply.error(std::string("OOM command not allowed: the pool is full (") + e.what() + ")");
  } catch (const TooManyThreads& e) {
    reply.error(std::string("ERR ") + e.what());
  } catch (const Error& e) {
    reply.error(std::string("ERR ") + e.what());
  }
  return After::next;
}

}  // namespace pmds::server
