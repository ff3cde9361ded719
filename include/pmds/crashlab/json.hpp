// pmds crash lab — a minimal JSON reader for the lines the lab itself exchanges (lincheck's
// verdicts, a workload process's results). Strings, numbers (kept as text), true/false/null,
// arrays and objects; throws pmds::Error on malformed input.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pmds/error.hpp"

namespace pmds::crashlab::json {

struct Value {
  enum class Type { null, boolean, number, string, array, object } type = Type::null;
  bool boolean = false;
  std::string text;  // number (as written) or string
  std::vector<Value> items;
  std::map<std::string, Value, std::less<>> fields;

  const Value& operator[](std::string_view key) const {
    static const Value none;
    auto it = fields.find(key);
    return it == fields.end() ? none : it->second;
  }
  bool is_null() const { return type == Type::null; }
  std::string str(std::string fallback = {}) const {
    return type == Type::string || type == Type::number ? text : fallback;
  }
  std::uint64_t u64(std::uint64_t fallback = 0) const {
    return type == Type::number ? std::strtoull(text.c_str(), nullptr, 10) : fallback;
  }
  double number(double fallback = 0) const {
    return type == Type::number ? std::strtod(text.c_str(), nullptr) : fallback;
  }
};

namespace detail {

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Value document() {
    Value v = value();
    skip();
    if (i_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw Error("pmds crashlab: bad JSON at offset " + std::to_string(i_) + ": " + what);
  }
  void skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  bool literal(std::string_view w) {
    if (s_.substr(i_, w.size()) == w) {
      i_ += w.size();
      return true;
    }
    return false;
  }

  Value value() {
    skip();
    if (i_ >= s_.size()) fail("unexpected end");
    Value v;
    const char c = s_[i_];
    if (c == '{') {
      ++i_;
      v.type = Value::Type::object;
      if (eat('}')) return v;
      do {
        skip();
        std::string k = string();
        expect(':');
        v.fields[k] = value();
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      ++i_;
      v.type = Value::Type::array;
      if (eat(']')) return v;
      do v.items.push_back(value());
      while (eat(','));
      expect(']');
    } else if (c == '"') {
      v.type = Value::Type::string;
      v.text = string();
    } else if (literal("true")) {
      v.type = Value::Type::boolean;
      v.boolean = true;
    } else if (literal("false")) {
      v.type = Value::Type::boolean;
    } else if (literal("null")) {
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.type = Value::Type::number;
      const std::size_t start = i_;
      while (i_ < s_.size() &&
             std::string_view("+-.eE0123456789").find(s_[i_]) != std::string_view::npos)
        ++i_;
      v.text = std::string(s_.substr(start, i_ - start));
    } else {
      fail("unexpected character");
    }
    return v;
  }

  std::string string() {
    if (i_ >= s_.size() || s_[i_] != '"') fail("expected a string");
    ++i_;
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unfinished escape");
      c = s_[i_++];
      switch (c) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'u': {
          if (i_ + 4 > s_.size()) fail("short \\u escape");
          const unsigned cp =
              static_cast<unsigned>(std::stoul(std::string(s_.substr(i_, 4)), nullptr, 16));
          i_ += 4;
          // UTF-8 of a BMP code point (surrogate pairs are not produced by the lab's writers).
          if (cp < 0x80) {
            out += static_cast<char>(cp);
          } else if (cp < 0x800) {
            out += static_cast<char>(0xc0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3f));
          } else {
            out += static_cast<char>(0xe0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
            out += static_cast<char>(0x80 | (cp & 0x3f));
          }
          break;
        }
        default:
          out += c;  // \" \\ \/
      }
    }
    if (i_ >= s_.size()) fail("unterminated string");
    ++i_;
    return out;
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

}  // namespace detail

inline Value parse(std::string_view s) {
  return detail::Parser(s).document();
}

}  // namespace pmds::crashlab::json
