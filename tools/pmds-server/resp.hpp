// pmds-server — the Redis protocol (RESP2) on the wire: requests parsed from a connection's
// buffer, replies appended to its output.
//
// Requests come in the two forms Redis accepts: multibulk arrays of bulk strings (what client
// libraries send) and inline lines split on spaces with Redis's quoting (what a person types
// into telnet; redis-cli sends multibulk). The parser reads one request from the start of the
// unconsumed bytes, or says it needs more; a multibulk request that arrives over many reads is
// resumed where it stopped (Request keeps the place), so its bytes are parsed once: parsed
// again from its start at each read, a request of a million arguments sent slowly would cost
// time quadratic in its size.
//
// Limits and errors follow Redis 7 (networking.c): a multibulk count over 1,048,576 or a bulk
// length over proto_max_bulk_len (512 MB) or an inline request over 64 KiB is a protocol error,
// after which the connection is closed. A count of zero or less is an empty request, skipped.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pmds::server {

struct Limits {
  std::size_t max_bulk_length = std::size_t{512} << 20;   // Redis's proto-max-bulk-len
  std::size_t max_arguments = std::size_t{1} << 20;       // Redis's multibulk limit
  std::size_t max_inline_length = std::size_t{64} << 10;  // Redis's PROTO_INLINE_MAX_SIZE
};

// One parsed request. args view the connection's buffer (multibulk) or `owned` (inline, where
// quoting rewrites the bytes); both stay valid until the buffer is consumed or the request
// parsed again.
struct Request {
  std::vector<std::string_view> args;
  std::vector<std::string> owned;
  // A multibulk request read in part (offsets from its first byte: the buffer may move).
  std::size_t resume_at = 0;      // where the next argument's header starts
  long long arguments_left = -1;  // -1: its count is not read yet
  std::vector<std::pair<std::size_t, std::size_t>> spans;  // the arguments read: offset, length
};

enum class ParseStatus {
  complete,    // a request (possibly empty: skip it) of `consumed` bytes
  incomplete,  // the buffer holds part of a request: read more
  error,       // a protocol error: reply `error` and close the connection
};

struct ParseResult {
  ParseStatus status = ParseStatus::incomplete;
  std::size_t consumed = 0;
  std::string error;  // the message after "-ERR "
};

namespace detail {

// A decimal length after a type byte, up to CRLF. Redis rejects anything but optional '-' and
// digits; a number past int64 is malformed too.
inline bool parse_length(std::string_view digits, long long& out) {
  if (digits.empty() || digits.size() > 20) return false;
  const char* first = digits.data();
  const char* last = first + digits.size();
  if (*first == '+') return false;
  const auto [ptr, ec] = std::from_chars(first, last, out);
  return ec == std::errc{} && ptr == last;
}

inline int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Redis's sdssplitargs: words separated by blanks; "..." with \n \r \t \b \a \\ \" \xHH escapes
// and '...' with \' are one word each and must be followed by a blank or the end. False on
// unbalanced quotes.
inline bool split_inline(std::string_view line, std::vector<std::string>& words) {
  std::size_t i = 0;
  const std::size_t n = line.size();
  auto blank = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
  };
  for (;;) {
    while (i < n && blank(line[i])) ++i;
    if (i == n) return true;
    std::string word;
    bool in_double = false, in_single = false;
    for (;;) {
      if (in_double) {
        if (i == n) return false;
        if (line[i] == '\\' && i + 3 < n && line[i + 1] == 'x' && hex_digit(line[i + 2]) >= 0 &&
            hex_digit(line[i + 3]) >= 0) {
          word.push_back(static_cast<char>(hex_digit(line[i + 2]) * 16 + hex_digit(line[i + 3])));
          i += 4;
        } else if (line[i] == '\\' && i + 1 < n) {
          const char e = line[i + 1];
          word.push_back(e == 'n'   ? '\n'
                         : e == 'r' ? '\r'
                         : e == 't' ? '\t'
                         : e == 'b' ? '\b'
                         : e == 'a' ? '\a'
                                    : e);
          i += 2;
        } else if (line[i] == '"') {
          if (i + 1 < n && !blank(line[i + 1])) return false;  // closing quote must end the word
          ++i;
          break;
        } else {
          word.push_back(line[i++]);
        }
      } else if (in_single) {
        if (i == n) return false;
        if (line[i] == '\\' && i + 1 < n && line[i + 1] == '\'') {
          word.push_back('\'');
          i += 2;
        } else if (line[i] == '\'') {
          if (i + 1 < n && !blank(line[i + 1])) return false;
          ++i;
          break;
        } else {
          word.push_back(line[i++]);
        }
      } else {
        if (i == n || blank(line[i])) break;
        if (line[i] == '"') {
          in_double = true;
        } else if (line[i] == '\'') {
          in_single = true;
        } else {
          word.push_back(line[i]);
        }
        ++i;
      }
    }
    words.push_back(std::move(word));
  }
}

}  // namespace detail

// Parses the request at the start of `buffer` into `request`. After `incomplete`, call it again
// with the same bytes and more after them (the request's first byte still first).
inline ParseResult parse_request(std::string_view buffer, Request& request, const Limits& limits) {
  request.args.clear();
  request.owned.clear();
  ParseResult r;
  if (buffer.empty()) return r;

  if (buffer[0] != '*') {  // inline: one line ending in \n (an \r before it is dropped)
    const std::size_t eol = buffer.find('\n');
    if (eol == std::string_view::npos) {
      if (buffer.size() > limits.max_inline_length) {
        r.status = ParseStatus::error;
        r.error = "Protocol error: too big inline request";
      }
      return r;
    }
    std::string_view line = buffer.substr(0, eol);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!detail::split_inline(line, request.owned)) {
      r.status = ParseStatus::error;
      r.error = "Protocol error: unbalanced quotes in request";
      return r;
    }
    for (const std::string& w : request.owned) request.args.emplace_back(w);
    r.status = ParseStatus::complete;
    r.consumed = eol + 1;
    return r;
  }

  // *<count>\r\n then count times $<length>\r\n<bytes>\r\n
  auto reset = [&request] {
    request.resume_at = 0;
    request.arguments_left = -1;
    request.spans.clear();
  };
  auto fail = [&](std::string message) {
    reset();
    r.status = ParseStatus::error;
    r.error = std::move(message);
    return r;
  };
  // The line at `from` (without its CRLF) and where the next starts; false if it has not ended.
  auto read_line = [&buffer](std::size_t from, std::string_view& line, std::size_t& next) {
    const std::size_t eol = buffer.find("\r\n", from);
    if (eol == std::string_view::npos) return false;
    line = buffer.substr(from, eol - from);
    next = eol + 2;
    return true;
  };
  std::string_view line;
  std::size_t next = 0;
  if (request.arguments_left < 0) {
    if (!read_line(0, line, next)) {
      if (buffer.size() > limits.max_inline_length)
        return fail("Protocol error: too big mbulk count string");
      return r;
    }
    long long count = 0;
    if (!detail::parse_length(line.substr(1), count) ||
        count > static_cast<long long>(limits.max_arguments))
      return fail("Protocol error: invalid multibulk length");
    if (count <= 0) {  // Redis: an empty request, nothing to run
      reset();
      r.status = ParseStatus::complete;
      r.consumed = next;
      return r;
    }
    request.arguments_left = count;
    request.resume_at = next;
    request.spans.reserve(static_cast<std::size_t>(std::min<long long>(count, 1024)));
  }
  while (request.arguments_left > 0) {
    const std::size_t header = request.resume_at;
    if (!read_line(header, line, next)) {
      if (buffer.size() - header > limits.max_inline_length)
        return fail("Protocol error: too big bulk count string");
      return r;
    }
    if (line.empty() || line[0] != '$')
      return fail(std::string("Protocol error: expected '$', got '") +
                  (line.empty() ? '\r' : line[0]) + "'");
    long long length = 0;
    if (!detail::parse_length(line.substr(1), length) || length < 0 ||
        static_cast<unsigned long long>(length) > limits.max_bulk_length)
      return fail("Protocol error: invalid bulk length");
    const std::size_t len = static_cast<std::size_t>(length);
    if (buffer.size() - next < len + 2) return r;  // its bytes have not all arrived
    if (buffer[next + len] != '\r' || buffer[next + len + 1] != '\n')
      return fail("Protocol error: bulk string not terminated by CRLF");
    request.spans.emplace_back(next, len);
    request.resume_at = next + len + 2;
    --request.arguments_left;
  }
  request.args.reserve(request.spans.size());
  for (const auto& [offset, length] : request.spans)
    request.args.push_back(buffer.substr(offset, length));
  r.status = ParseStatus::complete;
  r.consumed = request.resume_at;
  reset();
  return r;
}

// Replies, appended to a connection's output.
class Reply {
 public:
  explicit Reply(std::string& out) : out_(out) {}
  void simple(std::string_view s) { line('+', s); }
  // `message` starts with the error's class (ERR, WRONGTYPE, NOAUTH, ...).
  void error(std::string_view message) { line('-', message); }
  void integer(long long n) {
    out_.push_back(':');
    out_ += std::to_string(n);
    out_ += "\r\n";
  }
  void bulk(std::string_view s) {
    out_.push_back('$');
    out_ += std::to_string(s.size());
    out_ += "\r\n";
    out_ += s;
    out_ += "\r\n";
  }
  void null_bulk() { out_ += "$-1\r\n"; }
  void array(std::size_t n) {
    out_.push_back('*');
    out_ += std::to_string(n);
    out_ += "\r\n";
  }
  void null_array() { out_ += "*-1\r\n"; }
  void ok() { out_ += "+OK\r\n"; }
  std::string& out() { return out_; }

 private:
  void line(char type, std::string_view s) {
    out_.push_back(type);
    // A simple string or error is one line: CR or LF inside would end the reply early.
    for (char c : s) out_.push_back(c == '\r' || c == '\n' ? ' ' : c);
    out_ += "\r\n";
  }
  std::string& out_;
};

// Redis's glob (stringmatchlen): * ? [abc] [^a-z] and \ escapes, byte by byte. Written as the
// classic greedy match that backtracks only to the last star: O(pattern × string) for any
// pattern (a recursive match is exponential on patterns like "*a*a*a*b", Redis's CVE-2022-36021).
inline bool glob_match(std::string_view pattern, std::string_view s, bool nocase = false) {
  auto lower = [nocase](char c) {
    return nocase && c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  };
  // Whether the token at pattern[p] (not a star) matches c; `next` is where the token ends.
  auto token_matches = [&](std::size_t p, char c, std::size_t& next) {
    c = lower(c);
    if (pattern[p] == '?') {
      next = p + 1;
      return true;
    }
    if (pattern[p] == '\\' && p + 1 < pattern.size()) {
      next = p + 2;
      return lower(pattern[p + 1]) == c;
    }
    if (pattern[p] != '[') {
      next = p + 1;
      return lower(pattern[p]) == c;
    }
    ++p;
    const bool negate = p < pattern.size() && pattern[p] == '^';
    if (negate) ++p;
    bool match = false;
    while (p < pattern.size() && pattern[p] != ']') {
      if (pattern[p] == '\\' && p + 1 < pattern.size()) {
        ++p;
        if (lower(pattern[p]) == c) match = true;
      } else if (p + 2 < pattern.size() && pattern[p + 1] == '-' && pattern[p + 2] != ']') {
        char lo = lower(pattern[p]), hi = lower(pattern[p + 2]);
        if (lo > hi) std::swap(lo, hi);
        if (c >= lo && c <= hi) match = true;
        p += 2;
      } else if (lower(pattern[p]) == c) {
        match = true;
      }
      ++p;
    }
    next = p < pattern.size() ? p + 1 : p;  // an unclosed class ends with the pattern, as in Redis
    return match != negate;
  };
  std::size_t p = 0, i = 0;
  std::size_t star_p = std::string_view::npos, star_i = 0;
  while (i < s.size()) {
    std::size_t next = 0;
    if (p < pattern.size() && pattern[p] == '*') {
      star_p = ++p;  // the star matches nothing for now; on a mismatch, one more byte
      star_i = i;
    } else if (p < pattern.size() && token_matches(p, s[i], next)) {
      p = next;
      ++i;
    } else if (star_p != std::string_view::npos) {
      p = star_p;
      i = ++star_i;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace pmds::server
