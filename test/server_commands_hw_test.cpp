// labels: memory concurrent server
// pmds-server's protocol parser and commands (tools/pmds-server), without the network: requests
// parsed from bytes as they arrive in pieces, malformed ones refused, and each command's reply
// over real durable maps, atomicity under concurrent clients included. The network and real
// clients are test/server/'s.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "commands.hpp"
#include "resp.hpp"
#include "store.hpp"

namespace pmds::server {
namespace {

std::string multibulk(const std::vector<std::string>& args) {
  std::string s = "*" + std::to_string(args.size()) + "\r\n";
  for (const auto& a : args) s += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  return s;
}

TEST(ServerResp, AMultibulkRequestParsesOnlyOnceAllOfItArrived) {
  const std::string wire = multibulk({"SET", "key", std::string("v\0\r\n", 4)});
  Request req;
  for (std::size_t cut = 0; cut < wire.size(); ++cut) {
    const ParseResult r = parse_request(std::string_view(wire).substr(0, cut), req, Limits{});
    EXPECT_EQ(r.status, ParseStatus::incomplete) << "cut at " << cut;
  }
  const std::string more = wire + "*1\r\n";  // args view it: it must outlive them
  const ParseResult r = parse_request(more, req, Limits{});
  ASSERT_EQ(r.status, ParseStatus::complete);
  EXPECT_EQ(r.consumed, wire.size());
  ASSERT_EQ(req.args.size(), 3u);
  EXPECT_EQ(req.args[2], std::string_view("v\0\r\n", 4));  // binary-safe
}

TEST(ServerResp, InlineRequestsSplitAndUnquoteAsRedisDoes) {
  Request req;
  const ParseResult r = parse_request("SET  \"a b\\x41\\n\" 'it\\'s'\r\nPING\r\n", req, Limits{});
  ASSERT_EQ(r.status, ParseStatus::complete);
  ASSERT_EQ(req.args.size(), 3u);
  EXPECT_EQ(req.args[1], "a bA\n");
  EXPECT_EQ(req.args[2], "it's");
  EXPECT_EQ(r.consumed, std::string("SET  \"a b\\x41\\n\" 'it\\'s'\r\n").size());
  EXPECT_EQ(parse_request("GET \"open\r\n", req, Limits{}).status, ParseStatus::error);
  EXPECT_EQ(parse_request("GET \"a\"b\r\n", req, Limits{}).status, ParseStatus::error);
  const ParseResult empty = parse_request("\r\n", req, Limits{});
  EXPECT_EQ(empty.status, ParseStatus::complete);
  EXPECT_TRUE(req.args.empty());
}

TEST(ServerResp, MalformedAndOversizedRequestsAreProtocolErrors) {
  Request req;
  Limits small;
  small.max_bulk_length = 100;
  small.max_arguments = 4;
  small.max_inline_length = 32;
  for (const char* bad :
       {"*1\r\n$abc\r\n", "*x\r\n", "*1\r\n+PING\r\n", "*1\r\n$-5\r\n", "*1\r\n$101\r\n", "*5\r\n",
        "*1\r\n$3\r\nGETxx", "*+1\r\n", "*1\r\n$99999999999999999999999\r\n"}) {
    const ParseResult r = parse_request(bad, req, small);
    EXPECT_EQ(r.status, ParseStatus::error) << bad;
    EXPECT_TRUE(r.error.starts_with("Protocol error")) << r.error;
  }
  // An inline line or a header without its end, past the limit, is refused rather than buffered.
  EXPECT_EQ(parse_request(std::string(40, 'a'), req, small).status, ParseStatus::error);
  EXPECT_EQ(parse_request(std::string(20, 'a'), req, small).status, ParseStatus::incomplete);
  // Redis skips an empty or negative multibulk.
  const ParseResult none = parse_request("*0\r\n*-1\r\n", req, small);
  EXPECT_EQ(none.status, ParseStatus::complete);
  EXPECT_EQ(none.consumed, 4u);
}

TEST(ServerResp, GlobMatchesAsRedisKeys) {
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("h?llo", "hello"));
  EXPECT_FALSE(glob_match("h?llo", "hllo"));
  EXPECT_TRUE(glob_match("h*llo", "heeeello"));
  EXPECT_TRUE(glob_match("h[ae]llo", "hallo"));
  EXPECT_FALSE(glob_match("h[^e]llo", "hello"));
  EXPECT_TRUE(glob_match("h[a-b]llo", "hbllo"));
  EXPECT_TRUE(glob_match("h\\*llo", "h*llo"));
  EXPECT_FALSE(glob_match("h\\*llo", "hello"));
  EXPECT_TRUE(glob_match("key:*:x", "key:12:x"));
  EXPECT_FALSE(glob_match("key:*:x", "key:12:y"));
  // Linear, not exponential: a pathological pattern against a long string answers at once.
  EXPECT_FALSE(glob_match("*a*a*a*a*a*a*a*a*a*a*a*b", std::string(5000, 'a')));
}

// A server's commands over a fresh pool of `structure`.
class ServerCommands : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() /
            ("pmds-server-commands-" + std::to_string(::getpid()) + ".pool");
    std::filesystem::remove(path_);
    store_ = open_store(GetParam(), path_.string(), 16 << 20, std::uint64_t{64} << 20);
    commands_ = std::make_unique<Commands>(*store_, config_, 0, 0.0);
    session_.authenticated = true;
  }
  void TearDown() override {
    commands_.reset();
    store_.reset();
    std::filesystem::remove(path_);
  }
  // The raw reply to one command.
  std::string run(const std::vector<std::string>& args, Session* session = nullptr) {
    std::vector<std::string_view> views(args.begin(), args.end());
    std::string out;
    Reply reply(out);
    const After after = commands_->execute(session ? *session : session_, views, reply);
    if (after == After::sync) {
      commands_->sync();
      Commands::sync_reply(reply);
    }
    return out;
  }

  std::filesystem::path path_;
  Config config_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Commands> commands_;
  Session session_;
};

TEST_P(ServerCommands, StringCommandsReplyAsRedis) {
  EXPECT_EQ(run({"GET", "k"}), "$-1\r\n");
  EXPECT_EQ(run({"SET", "k", "v1"}), "+OK\r\n");
  EXPECT_EQ(run({"set", "k", "v2", "NX"}), "$-1\r\n");
  EXPECT_EQ(run({"SET", "k", "v3", "XX", "GET"}), "$2\r\nv1\r\n");  // NX did not set v2
  EXPECT_EQ(run({"SET", "new", "x", "XX"}), "$-1\r\n");
  EXPECT_EQ(run({"SET", "k", "v", "NX", "XX"}), "-ERR syntax error\r\n");
  EXPECT_TRUE(run({"SET", "k", "v", "EX", "10"}).starts_with("-ERR"));
  EXPECT_EQ(run({"GET", "k"}), "$2\r\nv3\r\n");
  EXPECT_EQ(run({"SETNX", "k", "x"}), ":0\r\n");
  EXPECT_EQ(run({"APPEND", "k", "!!"}), ":4\r\n");
  EXPECT_EQ(run({"STRLEN", "k"}), ":4\r\n");
  EXPECT_EQ(run({"STRLEN", "none"}), ":0\r\n");
  EXPECT_EQ(run({"GETDEL", "k"}), "$4\r\nv3!!\r\n");
  EXPECT_EQ(run({"GETDEL", "k"}), "$-1\r\n");
  EXPECT_EQ(run({"MSET", "a", "1", "b", "2"}), "+OK\r\n");
  EXPECT_EQ(run({"MSET", "a", "1", "b"}), "-ERR wrong number of arguments for 'mset' command\r\n");
  EXPECT_EQ(run({"MGET", "a", "zz", "b"}), "*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n2\r\n");
  EXPECT_EQ(run({"EXISTS", "a", "a", "zz"}), ":2\r\n");
  EXPECT_EQ(run({"DEL", "a", "a", "zz"}), ":1\r\n");
  EXPECT_EQ(run({"DBSIZE"}), ":1\r\n");
  EXPECT_EQ(run({"GET"}), "-ERR wrong number of arguments for 'get' command\r\n");
  EXPECT_EQ(run({"NOPE", "x"}), "-ERR unknown command 'NOPE', with args beginning with: 'x' \r\n");
  EXPECT_EQ(run({"SET", "", ""}), "+OK\r\n");  // the empty key and value are ones like any other
  EXPECT_EQ(run({"GET", ""}), "$0\r\n\r\n");
}

TEST_P(ServerCommands, CountersAreIntegersAndOverflowIsRefused) {
  EXPECT_EQ(run({"INCR", "n"}), ":1\r\n");
  EXPECT_EQ(run({"INCRBY", "n", "41"}), ":42\r\n");
  EXPECT_EQ(run({"DECRBY", "n", "50"}), ":-8\r\n");
  EXPECT_EQ(run({"DECR", "n"}), ":-9\r\n");
  EXPECT_EQ(run({"INCRBY", "n", "1.5"}), "-ERR value is not an integer or out of range\r\n");
  EXPECT_EQ(run({"SET", "n", "9223372036854775807"}), "+OK\r\n");
  EXPECT_EQ(run({"INCR", "n"}), "-ERR increment or decrement would overflow\r\n");
  EXPECT_EQ(run({"GET", "n"}), "$19\r\n9223372036854775807\r\n");  // unchanged
  EXPECT_EQ(run({"SET", "s", " 1"}), "+OK\r\n");
  EXPECT_EQ(run({"INCR", "s"}), "-ERR value is not an integer or out of range\r\n");
  EXPECT_EQ(run({"SET", "s", "01"}), "+OK\r\n");
  EXPECT_EQ(run({"INCR", "s"}), "-ERR value is not an integer or out of range\r\n");
  EXPECT_EQ(run({"DECRBY", "s", "-9223372036854775808"}), "-ERR decrement would overflow\r\n");
}

TEST_P(ServerCommands, SizesOverTheStructuresLimitsAreErrorsThatChangeNothing) {
  const std::string long_key(store_->max_key_size() + 1, 'k');
  EXPECT_TRUE(run({"SET", long_key, "v"}).starts_with("-ERR key is"));
  EXPECT_EQ(run({"MGET", long_key}), "*1\r\n$-1\r\n");
  EXPECT_EQ(run({"SET", "k", "v"}), "+OK\r\n");
  if (store_->max_value_size() < (std::size_t{8} << 20)) {
    const std::string big(store_->max_value_size(), 'v');
    EXPECT_EQ(run({"SET", "k", big + "v"}).substr(0, 17), "-ERR string value");
    EXPECT_EQ(run({"SET", "k", big}), "+OK\r\n");
    EXPECT_TRUE(run({"APPEND", "k", "v"}).starts_with("-ERR string value"));
    EXPECT_EQ(run({"STRLEN", "k"}), ":" + std::to_string(big.size()) + "\r\n");
  }
  EXPECT_EQ(run({"DBSIZE"}), ":1\r\n");
}

TEST_P(ServerCommands, ScanVisitsEveryKeyOnceInOrderedMapsAndIsRefusedOtherwise) {
  for (int i = 0; i < 100; ++i) run({"SET", "key:" + std::to_string(i), "v"});
  run({"SET", "other", "v"});
  if (!store_->ordered()) {
    EXPECT_TRUE(run({"SCAN", "0"}).starts_with("-ERR scan needs an ordered map"));
    EXPECT_TRUE(run({"KEYS", "*"}).starts_with("-ERR keys needs an ordered map"));
    return;
  }
  std::vector<std::string> seen;
  std::string cursor = "0";
  int calls = 0;
  do {
    std::vector<std::string_view> args = {"SCAN", cursor, "MATCH", "key:*", "COUNT", "7"};
    std::string out;
    Reply reply(out);
    commands_->execute(session_, args, reply);
    // *2\r\n$N\r\nCURSOR\r\n*M\r\n then M bulks
    std::size_t p = out.find("\r\n", 4) + 2;
    const std::size_t e = out.find("\r\n", p);
    cursor = out.substr(p, e - p);
    p = out.find("\r\n", e + 2) + 2;
    while (p < out.size()) {
      const std::size_t len_end = out.find("\r\n", p);
      const std::size_t len = std::stoul(out.substr(p + 1, len_end - p - 1));
      seen.push_back(out.substr(len_end + 2, len));
      p = len_end + 2 + len + 2;
    }
    ++calls;
  } while (cursor != "0" && calls < 100);
  EXPECT_EQ(cursor, "0");
  EXPECT_GE(calls, 100 / 7);
  std::sort(seen.begin(), seen.end());
  ASSERT_EQ(seen.size(), 100u);
  EXPECT_EQ(std::unique(seen.begin(), seen.end()), seen.end());
  EXPECT_EQ(run({"KEYS", "key:9?"}).substr(0, 5), "*10\r\n");
  EXPECT_TRUE(run({"SCAN", "123456789"}).starts_with("-ERR invalid cursor"));
  EXPECT_EQ(run({"SCAN", "x"}), "-ERR invalid cursor\r\n");
}

TEST_P(ServerCommands, AuthAndFlushallAreRefusedUnlessConfigured) {
  config_.requirepass = "secret";
  Session guest;
  EXPECT_EQ(run({"GET", "k"}, &guest), "-NOAUTH Authentication required.\r\n");
  EXPECT_EQ(run({"AUTH", "wrong"}, &guest),
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
  EXPECT_EQ(run({"AUTH", "secret"}, &guest), "+OK\r\n");
  EXPECT_EQ(run({"GET", "k"}, &guest), "$-1\r\n");
  run({"SET", "k", "v"});
  EXPECT_TRUE(run({"FLUSHALL"}).starts_with("-ERR flushall is disabled"));
  config_.enable_flushall = true;
  EXPECT_EQ(run({"FLUSHALL"}), "+OK\r\n");
  EXPECT_EQ(run({"DBSIZE"}), ":0\r\n");
  EXPECT_EQ(run({"GET", "k"}), "$-1\r\n");
}

TEST_P(ServerCommands, WaitaofAnswersOnceDurableAndRefusesReplicas) {
  run({"SET", "k", "v"});
  EXPECT_EQ(run({"WAITAOF", "1", "0", "0"}), "*2\r\n:1\r\n:0\r\n");
  EXPECT_EQ(run({"WAITAOF", "1", "1", "0"}),
            "-ERR WAITAOF cannot wait for replicas: pmds-server has none\r\n");
  EXPECT_EQ(run({"WAITAOF", "1", "0", "-1"}), "-ERR timeout is negative\r\n");
}

// INCR from several threads loses no increment, and no reader sees half an MSET.
TEST_P(ServerCommands, ReadModifyWriteAndMsetAreAtomicUnderConcurrentClients) {
  constexpr int threads = 4, per_thread = 2000;
  std::atomic<bool> torn{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      Session s;
      s.authenticated = true;
      for (int i = 0; i < per_thread; ++i) {
        run({"INCR", "counter"}, &s);
        const std::string v = std::to_string(t * per_thread + i);
        run({"MSET", "pair:a", v, "pair:b", v}, &s);
        const std::string got = run({"MGET", "pair:a", "pair:b"}, &s);
        // *2\r\n$L\r\nX\r\n$L\r\nY\r\n: the two values must be equal.
        const std::size_t first = got.find("\r\n", 4) + 2;
        const std::size_t first_end = got.find("\r\n", first);
        const std::size_t second = got.find("\r\n", first_end + 2) + 2;
        if (got.substr(first, first_end - first) != got.substr(second, got.size() - 2 - second))
          torn = true;
      }
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_FALSE(torn.load());
  EXPECT_EQ(run({"GET", "counter"}), "$4\r\n8000\r\n");
  EXPECT_EQ(run({"DBSIZE"}), ":3\r\n");
}

TEST_P(ServerCommands, AFullPoolIsAnOomReplyAndTheStoreStillServes) {
  TearDown();
  path_ = std::filesystem::temp_directory_path() /
          ("pmds-server-full-" + std::to_string(::getpid()) + ".pool");
  std::filesystem::remove(path_);
  store_ = open_store(GetParam(), path_.string(), 16 << 20, 16 << 20);  // no room to grow
  commands_ = std::make_unique<Commands>(*store_, config_, 0, 0.0);
  const std::string value(1000, 'v');
  std::string reply;
  int stored = 0;
  for (; stored < 100000; ++stored) {
    reply = run({"SET", "key:" + std::to_string(stored), value});
    if (reply != "+OK\r\n") break;
  }
  EXPECT_TRUE(reply.starts_with("-OOM")) << reply;
  ASSERT_GE(stored, 3);
  SCOPED_TRACE("stored " + std::to_string(stored) + "; " + run({"INFO", "memory"}));
  EXPECT_EQ(run({"DBSIZE"}), ":" + std::to_string(stored) + "\r\n");
  EXPECT_EQ(run({"GET", "key:0"}), "$1000\r\n" + value + "\r\n");
  // A removal takes a block too (nbMontage's anti-payload): the server keeps a reserve for it.
  EXPECT_EQ(run({"DEL", "key:0", "key:1"}), ":2\r\n");
  EXPECT_EQ(run({"GETDEL", "key:2"}), "$1000\r\n" + value + "\r\n");
  EXPECT_EQ(run({"DBSIZE"}), ":" + std::to_string(stored - 3) + "\r\n");
}

INSTANTIATE_TEST_SUITE_P(Servable, ServerCommands,
                         ::testing::Values("hash-bytes/montage", "skiplist-bytes/montage",
                                           "masstree-bytes/incll"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '/' || c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace pmds::server
