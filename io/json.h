// A small JSON reader and the string escaper, for the two places mosgrad reads and writes JSON:
// the safetensors header (io/safetensors.h) and the metrics file (lm/metrics.h).
//
// The reader takes RFC 8259 JSON and nothing else (no comments, no NaN, no trailing commas), since
// its input may be a damaged or hostile file: every error is a JsonError saying at which byte and
// what is wrong, never a crash, and nesting is bounded so a deep file cannot overflow the stack.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace mg {

struct JsonValue {
  enum Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Null;
  bool boolean = false;
  double number = 0;     // a Number as a double (±inf when out of a double's range)
  bool is_uint = false;  // a Number that is a non-negative integer fitting in uint64, kept exactly
  uint64_t uint = 0;     // in `uint`: sizes and offsets can exceed a double's 53 exact bits
  std::string str;       // String, UTF-8
  std::vector<JsonValue> items;                            // Array
  std::vector<std::pair<std::string, JsonValue>> members;  // Object: file order, keys unique

  // The member named `key` of an Object; nullptr when there is none.
  const JsonValue* find(const std::string& key) const;
};

// "null", "a boolean", "a number", "a string", "an array", "an object": for error messages.
const char* json_kind_name(JsonValue::Kind kind);

class JsonError : public std::runtime_error {
 public:
  JsonError(size_t byte, const std::string& reason);
  size_t byte() const { return byte_; }                  // offset of the problem in the text
  const std::string& reason() const { return reason_; }  // what() is "at byte N: <reason>"

 private:
  size_t byte_;
  std::string reason_;
};

// Parses a whole text holding one JSON value (surrounding whitespace allowed). Objects keep their
// key order and reject a repeated key; \u escapes, surrogate pairs included, become UTF-8.
// Throws JsonError.
JsonValue parse_json(const std::string& text, int max_depth = 16);

// Appends s as a JSON string literal, escaping exactly what Python's json.dumps and Rust's
// serde_json escape (quote, backslash, control characters; UTF-8 passes through), so what mosgrad
// writes matches their output byte for byte.
void append_json_string(std::string& out, const std::string& s);
std::string json_string(const std::string& s);

}  // namespace mg
