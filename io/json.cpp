#include "io/json.h"

#include <cstdlib>
#include <set>

namespace mg {

const JsonValue* JsonValue::find(const std::string& key) const {
  for (const auto& [k, v] : members)
    if (k == key) return &v;
  return nullptr;
}

const char* json_kind_name(JsonValue::Kind kind) {
  static const char* names[] = {"null",     "a boolean", "a number",
                                "a string", "an array",  "an object"};
  return names[kind];
}

JsonError::JsonError(size_t byte, const std::string& reason)
    : std::runtime_error("at byte " + std::to_string(byte) + ": " + reason),
      byte_(byte),
      reason_(reason) {}

namespace {

// JSON's two-character escapes, written once for the reader and the escaper: the letter after the
// backslash and the byte it stands for.
constexpr char kShortEscapes[][2] = {{'"', '"'},  {'\\', '\\'}, {'b', '\b'}, {'f', '\f'},
                                     {'n', '\n'}, {'r', '\r'},  {'t', '\t'}};

const char* short_escape_byte(char letter) {
  for (const auto& e : kShortEscapes)
    if (e[0] == letter) return &e[1];
  return nullptr;
}

const char* short_escape_letter(char byte) {
  for (const auto& e : kShortEscapes)
    if (e[1] == byte) return &e[0];
  return nullptr;
}

class Parser {
 public:
  Parser(const std::string& text, int max_depth) : s_(text), max_depth_(max_depth) {}

  JsonValue document() {
    JsonValue v = value(0, nullptr);
    skip_space();
    if (pos_ != s_.size())
      fail(std::string("unexpected text after the JSON ") +
           (v.kind == JsonValue::Object ? "object" : "value"));
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw JsonError(pos_, what); }
  void skip_space() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  bool consume(char c) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool consume_word(const char* w, size_t n) {
    if (s_.compare(pos_, n, w) != 0) return false;
    pos_ += n;
    return true;
  }

  // `key`: the object member this value belongs to, named in errors ("missing or bad value for
  // \"ppl\"" says more in a metrics line than "unexpected character").
  JsonValue value(int depth, const std::string* key) {
    // A deep nesting is a hostile or broken file, not a reason to overflow the stack.
    if (depth > max_depth_) fail("nesting deeper than " + std::to_string(max_depth_) + " levels");
    skip_space();
    JsonValue v;
    const char c = pos_ < s_.size() ? s_[pos_] : '\0';
    if (c == '{') {
      v.kind = JsonValue::Object;
      ++pos_;
      if (consume('}')) return v;
      std::set<std::string> keys;
      do {
        skip_space();
        if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a key in double quotes");
        std::string k = string_literal();
        if (!keys.insert(k).second) fail("the key \"" + k + "\" appears twice");
        if (!consume(':')) fail("expected ':' after the key \"" + k + "\"");
        JsonValue member = value(depth + 1, &k);
        v.members.emplace_back(std::move(k), std::move(member));
      } while (consume(','));
      if (!consume('}'))
        fail("expected ',' or '}' after the value of \"" + v.members.back().first + "\"");
    } else if (c == '[') {
      v.kind = JsonValue::Array;
      ++pos_;
      if (consume(']')) return v;
      do v.items.push_back(value(depth + 1, nullptr));
      while (consume(','));
      if (!consume(']')) fail("expected ',' or ']' in an array");
    } else if (c == '"') {
      v.kind = JsonValue::String;
      v.str = string_literal();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      number(v);
    } else if (consume_word("true", 4)) {
      v.kind = JsonValue::Bool;
      v.boolean = true;
    } else if (consume_word("false", 5)) {
      v.kind = JsonValue::Bool;
    } else if (!consume_word("null", 4)) {
      if (key) fail("missing or bad value for \"" + *key + "\"");
      fail(pos_ >= s_.size() ? std::string("unexpected end of the text")
                             : std::string("unexpected character '") + c + "'");
    }
    return v;
  }

  void number(JsonValue& v) {
    v.kind = JsonValue::Number;
    const size_t start = pos_;
    const bool negative = s_[pos_] == '-';
    if (negative) ++pos_;
    const auto digits = [&]() {
      const size_t from = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ - from;
    };
    const size_t int_start = pos_;
    const size_t n_int = digits();
    if (n_int == 0) fail("a number needs digits");
    if (n_int > 1 && s_[int_start] == '0') fail("numbers cannot have leading zeros");
    bool integral = true;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) fail("a digit must follow the decimal point");
      integral = false;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (digits() == 0) fail("a digit must follow the exponent");
      integral = false;
    }
    // The grammar above is a subset of strtod's, so strtod reads exactly this span.
    v.number = std::strtod(s_.substr(start, pos_ - start).c_str(), nullptr);
    if (!integral || negative) return;
    uint64_t u = 0;
    for (size_t i = int_start; i < pos_; ++i) {
      const uint64_t d = static_cast<uint64_t>(s_[i] - '0');
      if (u > (UINT64_MAX - d) / 10) return;  // too large for uint64
      u = u * 10 + d;
    }
    v.is_uint = true;
    v.uint = u;
  }

  // Appends code point cp as UTF-8.
  static void put_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  uint32_t hex4() {
    if (pos_ + 4 > s_.size()) fail("a \\u escape needs 4 hex digits");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[pos_++];
      v <<= 4;
      if (h >= '0' && h <= '9')
        v |= static_cast<uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f')
        v |= static_cast<uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        v |= static_cast<uint32_t>(h - 'A' + 10);
      else
        fail("a \\u escape needs 4 hex digits");
    }
    return v;
  }

  std::string string_literal() {
    ++pos_;  // the opening quote
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      const unsigned char c = static_cast<unsigned char>(s_[pos_++]);
      if (c == '"') return out;
      if (c < 0x20) fail("raw control character in a string (must be escaped)");
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated string");
      const char e = s_[pos_++];
      if (e == '/') {  // allowed, though writers leave '/' as it is
        out += '/';
      } else if (const char* unescaped = short_escape_byte(e)) {
        out += *unescaped;
      } else if (e == 'u') {
        uint32_t cp = hex4();
        if (cp >= 0xD800 && cp <= 0xDBFF) {  // a surrogate pair encodes one code point above U+FFFF
          if (s_.compare(pos_, 2, "\\u") != 0) fail("unpaired surrogate in a \\u escape");
          pos_ += 2;
          const uint32_t low = hex4();
          if (low < 0xDC00 || low > 0xDFFF) fail("unpaired surrogate in a \\u escape");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          fail("unpaired surrogate in a \\u escape");
        }
        put_utf8(out, cp);
      } else {
        fail(std::string("unknown escape '\\") + e + "'");
      }
    }
  }

  const std::string& s_;
  int max_depth_;
  size_t pos_ = 0;
};

}  // namespace

JsonValue parse_json(const std::string& text, int max_depth) {
  return Parser(text, max_depth).document();
}

void append_json_string(std::string& out, const std::string& s) {
  out += '"';
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (const char* letter = short_escape_letter(ch)) {
      out += '\\';
      out += *letter;
    } else if (c < 0x20) {
      const char* hex = "0123456789abcdef";
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += ch;
    }
  }
  out += '"';
}

std::string json_string(const std::string& s) {
  std::string out;
  append_json_string(out, s);
  return out;
}

}  // namespace mg
