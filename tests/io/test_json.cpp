// The JSON reader and escaper (io/json.h) shared by the safetensors header and the metrics file:
// what each of them needs, read by the one parser, and errors that say where and what.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "io/json.h"
#include "tests/test_util.h"

namespace {

// The JsonError message for `text` ("" when it parses).
std::string json_error(const std::string& text, int max_depth = 16) {
  try {
    mg::parse_json(text, max_depth);
  } catch (const mg::JsonError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Json, ASafetensorsHeader) {
  const mg::JsonValue v = mg::parse_json(
      "{ \"b\" : {\"data_offsets\": [4, 18446744073709551615], \"shape\": [], \"dtype\": "
      "\"F32\"},\n"
      "  \"__metadata__\": {\"k\": \"\\u00fc\\ud83d\\ude00\\/\"},\r\n\t\"a\": {\"extra\": null, "
      "\"t\": true, \"f\": false} }  ");
  ASSERT_EQ(v.kind, mg::JsonValue::Object);
  ASSERT_EQ(v.members.size(), 3u);
  EXPECT_EQ(v.members[0].first, "b");  // file order, not sorted
  EXPECT_EQ(v.members[1].first, "__metadata__");
  const mg::JsonValue* offsets = v.members[0].second.find("data_offsets");
  ASSERT_NE(offsets, nullptr);
  ASSERT_EQ(offsets->kind, mg::JsonValue::Array);
  ASSERT_EQ(offsets->items.size(), 2u);
  EXPECT_TRUE(offsets->items[0].is_uint);
  EXPECT_EQ(offsets->items[0].uint, 4u);
  EXPECT_TRUE(offsets->items[1].is_uint);  // exact beyond a double's 53 bits
  EXPECT_EQ(offsets->items[1].uint, 18446744073709551615ull);
  EXPECT_TRUE(v.members[0].second.find("shape")->items.empty());
  EXPECT_EQ(v.members[1].second.find("k")->str, "\xC3\xBC\xF0\x9F\x98\x80/");  // a surrogate pair
  const mg::JsonValue& a = v.members[2].second;
  EXPECT_EQ(a.find("extra")->kind, mg::JsonValue::Null);
  EXPECT_EQ(a.find("t")->kind, mg::JsonValue::Bool);
  EXPECT_TRUE(a.find("t")->boolean);
  EXPECT_FALSE(a.find("f")->boolean);
  EXPECT_EQ(a.find("missing"), nullptr);
  EXPECT_STREQ(mg::json_kind_name(a.find("extra")->kind), "null");
  EXPECT_STREQ(mg::json_kind_name(v.kind), "an object");
}

TEST(Json, NumbersAsDoublesAndAsExactSizes) {
  const mg::JsonValue v = mg::parse_json(
      R"({"loss":5.12,"neg":-1.5e-3,"int":140000,"big":1e999,"zero":0,"over":18446744073709551616,"e":2E+2})");
  EXPECT_DOUBLE_EQ(v.find("loss")->number, 5.12);
  EXPECT_FALSE(v.find("loss")->is_uint);
  EXPECT_DOUBLE_EQ(v.find("neg")->number, -1.5e-3);
  EXPECT_FALSE(v.find("neg")->is_uint);
  EXPECT_EQ(v.find("int")->number, 140000);
  EXPECT_TRUE(v.find("int")->is_uint);
  EXPECT_EQ(v.find("int")->uint, 140000u);
  EXPECT_TRUE(std::isinf(v.find("big")->number));  // out of range: infinite, which the plot skips
  EXPECT_TRUE(v.find("zero")->is_uint);
  EXPECT_FALSE(v.find("over")->is_uint);  // one past uint64: a number, but not a size
  EXPECT_EQ(v.find("e")->number, 200);
  EXPECT_FALSE(v.find("e")->is_uint);
}

TEST(Json, ErrorsSayWhereAndWhat) {
  EXPECT_EQ(json_error(R"({"kind":"interval","ppl":})"),
            "at byte 25: missing or bad value for \"ppl\"");
  EXPECT_HAS(json_error(R"({"ppl":400)"), "expected ',' or '}' after the value of \"ppl\"");
  EXPECT_HAS(json_error(R"({"kind" "x"})"), "expected ':' after the key \"kind\"");
  EXPECT_HAS(json_error(R"({"a":1,})"), "expected a key in double quotes");
  EXPECT_HAS(json_error(R"({"a":1,"a":2})"), "the key \"a\" appears twice");
  EXPECT_HAS(json_error(R"({"a":1} x)"), "unexpected text after the JSON object");
  EXPECT_HAS(json_error("[1] 2"), "unexpected text after the JSON value");
  EXPECT_HAS(json_error(R"([1, 2)"), "expected ',' or ']'");
  EXPECT_HAS(json_error(""), "unexpected end");
  EXPECT_HAS(json_error("nope"), "unexpected character 'n'");
  EXPECT_HAS(json_error(R"({"a":"abc)"), "unterminated string");
  EXPECT_HAS(json_error("{\"a\":\"x\ny\"}"), "raw control character");
  EXPECT_HAS(json_error(R"({"a":"\q"})"), "unknown escape '\\q'");
  EXPECT_HAS(json_error(R"({"a":"\u12"})"), "4 hex digits");
  EXPECT_HAS(json_error(R"({"a":"\ud800"})"), "unpaired surrogate");
  EXPECT_HAS(json_error(R"({"a":"\ude00"})"), "unpaired surrogate");
  EXPECT_HAS(json_error(R"({"a":08})"), "leading zeros");
  EXPECT_HAS(json_error(R"({"a":-})"), "needs digits");
  EXPECT_HAS(json_error(R"({"a":1.})"), "decimal point");
  EXPECT_HAS(json_error(R"({"a":1e})"), "exponent");
  EXPECT_HAS(json_error(R"({"a":NaN})"), "missing or bad value for \"a\"");  // JSON has no NaN
  EXPECT_HAS(json_error("{\"a\":" + std::string(100, '[')), "nesting deeper than 16 levels");
  EXPECT_EQ(json_error("[[1]]", 2), "");  // the 1 is two levels below the top
  EXPECT_HAS(json_error("[[[1]]]", 2), "nesting deeper than 2 levels");
  try {
    mg::parse_json(R"({"a":1,"a":2})");
    FAIL() << "no error";
  } catch (const mg::JsonError& e) {
    EXPECT_EQ(e.byte(), 10u);  // just after the repeated key
    EXPECT_EQ(e.reason(), "the key \"a\" appears twice");
  }
}

TEST(Json, EscaperMatchesPythonAndRoundTrips) {
  // What Python's json.dumps(s, ensure_ascii=False) writes.
  const std::string s = std::string("a\"b\\c/\n\r\t\b\f\x01\x1f") + "\xC3\xBC";
  EXPECT_EQ(mg::json_string(s), "\"a\\\"b\\\\c/\\n\\r\\t\\b\\f\\u0001\\u001f\xC3\xBC\"");
  std::string out = "x";
  mg::append_json_string(out, "");
  EXPECT_EQ(out, "x\"\"");
  EXPECT_EQ(mg::parse_json(mg::json_string(s)).str, s);
}
