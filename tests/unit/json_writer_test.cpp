#include "json_writer.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

namespace roofbench {
namespace {

TEST(JsonEscape, QuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(json_escape(R"(say "hi")"), R"(say \"hi\")");
  EXPECT_EQ(json_escape(R"(C:\dir)"), R"(C:\\dir)");
  EXPECT_EQ(json_escape("a\nb\rc\td"), R"(a\nb\rc\td)");
  EXPECT_EQ(json_escape(std::string("\x01\x1f", 2)), R"(\u0001\u001f)");
  EXPECT_EQ(json_escape(std::string("nul\0byte", 8)), R"(nul\u0000byte)");
}

TEST(JsonEscape, Utf8PassesThrough) { EXPECT_EQ(json_escape("µs → 90°"), "µs → 90°"); }

TEST(JsonWriter, NestingAndCommas) {
  JsonWriter j;
  j.begin_object();
  j.field("a", 1);
  j.key("b").begin_array().value(1.5).value("two").begin_object().end_object().begin_array().end_array().end_array();
  j.key("c").begin_object().field("d", true).field("e", false).end_object();
  j.end_object();
  EXPECT_EQ(j.str(), R"({
  "a": 1,
  "b": [
    1.5,
    "two",
    {},
    []
  ],
  "c": {
    "d": true,
    "e": false
  }
})");
}

TEST(JsonWriter, NonFiniteNumbersBecomeNull) {
  JsonWriter j;
  j.begin_array();
  j.value(std::numeric_limits<double>::quiet_NaN());
  j.value(std::numeric_limits<double>::infinity());
  j.value(-std::numeric_limits<double>::infinity());
  j.null();
  j.end_array();
  EXPECT_EQ(j.str(), "[\n  null,\n  null,\n  null,\n  null\n]");
}

TEST(JsonWriter, NumbersKeepNineSignificantDigitsAndIntegersAllOfThem) {
  JsonWriter j;
  j.begin_array().value(1.0 / 3.0).value(1e-7).value(std::int64_t{1} << 53).value(-0.0).end_array();
  EXPECT_EQ(j.str(), "[\n  0.333333333,\n  1e-07,\n  9007199254740992,\n  -0\n]");
}

TEST(JsonWriter, KeysAndStringsAreEscaped) {
  JsonWriter j;
  j.begin_object().field("FLOP/s \"x\"", "line\nbreak").end_object();
  EXPECT_EQ(j.str(), "{\n  \"FLOP/s \\\"x\\\"\": \"line\\nbreak\"\n}");
}

TEST(JsonWriter, EmptyTopLevelContainers) {
  EXPECT_EQ(JsonWriter().begin_object().end_object().str(), "{}");
  EXPECT_EQ(JsonWriter().begin_array().end_array().str(), "[]");
}

}  // namespace
}  // namespace roofbench
