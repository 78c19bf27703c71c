// Why: headers and manifests are only as trustworthy as the JSON reader, so
// every value kind must round-trip exactly and every class of malformed
// input must be refused with the offset and what was expected.
#include "engine/common/json.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/common/error.h"

namespace mixtrain {
namespace {

using ::testing::HasSubstr;

// The message of the EngineError parse() throws for `text` ("" if none).
std::string parse_error(std::string_view text) {
  try {
    Json::parse(text);
  } catch (const EngineError& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
    return error.what();
  }
  return "";
}

TEST(JsonTest, ScalarsRoundTrip) {
  for (const char* text : {"null", "true", "false", "0", "-7", "\"\"", "\"abc\"", "1.5", "-0.25",
                           "1e+300", "[]", "{}"}) {
    EXPECT_EQ(Json::parse(text).dump(), text) << text;
  }
}

TEST(JsonTest, IntegersAreExactInt64) {
  const Json max = Json::parse("9223372036854775807");
  ASSERT_TRUE(max.is_int());
  EXPECT_EQ(max.as_int(), std::numeric_limits<int64_t>::max());
  const Json min = Json::parse("-9223372036854775808");
  EXPECT_EQ(min.as_int(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(Json(min.as_int()).dump(), "-9223372036854775808");
  EXPECT_THAT(parse_error("9223372036854775808"), HasSubstr("an integer within int64 range"));
  EXPECT_THROW(Json(uint64_t{1} << 63), EngineError);
  EXPECT_EQ(Json(uint64_t{42}).as_int(), 42);
}

TEST(JsonTest, DoublesRoundTripBitExactly) {
  for (double value : {0.1, 1.0 / 3.0, 6.0e-4, 2.0, -1e-320, 1.7976931348623157e308,
                       std::numeric_limits<double>::denorm_min()}) {
    const Json parsed = Json::parse(Json(value).dump());
    ASSERT_TRUE(parsed.is_double()) << Json(value).dump();
    EXPECT_EQ(std::bit_cast<uint64_t>(parsed.as_double()), std::bit_cast<uint64_t>(value));
  }
  EXPECT_EQ(Json(2.0).dump(), "2.0");  // stays a double, not an int
  EXPECT_TRUE(Json::parse("1E2").is_double());
  EXPECT_DOUBLE_EQ(Json::parse("1E2").as_double(), 100.0);
  EXPECT_THROW(Json(std::nan("")).dump(), EngineError);
  EXPECT_THROW(Json(std::numeric_limits<double>::infinity()).dump(), EngineError);
  EXPECT_THAT(parse_error("1e999"), HasSubstr("a number within double range"));
}

TEST(JsonTest, ObjectsKeepKeyOrder) {
  const std::string text = R"({"zeta":1,"alpha":[true,null,{"x":"y"}],"mid":{}})";
  const Json value = Json::parse(text);
  EXPECT_EQ(value.dump(), text);
  EXPECT_EQ(value.as_object().front().first, "zeta");
  EXPECT_EQ(value.at("alpha").as_array().size(), 3u);
  EXPECT_EQ(value.find("missing"), nullptr);
  EXPECT_THROW(value.at("missing"), EngineError);
}

TEST(JsonTest, SetReplacesInPlaceAndAppendsNewKeys) {
  Json value = Json::object();
  value.set("a", Json(1));
  value.set("b", Json(2));
  value.set("a", Json("one"));
  EXPECT_EQ(value.dump(), R"({"a":"one","b":2})");
  Json list = Json::array();
  list.push_back(Json(1.5));
  EXPECT_EQ(list.dump(), "[1.5]");
}

TEST(JsonTest, WhitespaceAroundTokensIsAccepted) {
  const Json value = Json::parse(" \t\r\n{ \"a\" : [ 1 , 2 ] }\n  ");
  EXPECT_EQ(value.dump(), R"({"a":[1,2]})");
}

TEST(JsonTest, StringEscapesDecodeAndReencode) {
  const Json value = Json::parse(R"("q\" b\\ s\/ \b\f\n\r\t \u0041 \u00e9 \u20ac \ud83d\ude00 \u0001")");
  EXPECT_EQ(value.as_string(),
            "q\" b\\ s/ \b\f\n\r\t A \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \x01");
  EXPECT_EQ(value.dump(),
            "\"q\\\" b\\\\ s/ \\b\\f\\n\\r\\t A \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \\u0001\"");
  EXPECT_EQ(Json::parse(value.dump()), value);
}

TEST(JsonTest, TypeMismatchNamesBothTypes) {
  try {
    Json::parse("[1]").as_object();
    FAIL() << "expected a type error";
  } catch (const EngineError& error) {
    EXPECT_THAT(error.what(), HasSubstr("expected object, found array"));
  }
  EXPECT_DOUBLE_EQ(Json(3).as_double(), 3.0);
  EXPECT_THROW(Json(3.5).as_int(), EngineError);
}

TEST(JsonTest, TruncatedInputIsRefused) {
  EXPECT_THAT(parse_error(""), HasSubstr("at byte 0: expected a value, found end of input"));
  EXPECT_THAT(parse_error("{\"a\":1"), HasSubstr("at byte 6: expected ',' or '}'"));
  EXPECT_THAT(parse_error("[1,"), HasSubstr("at byte 3: expected a value"));
  EXPECT_THAT(parse_error("\"abc"), HasSubstr("closing the string"));
  EXPECT_THAT(parse_error("tru"), HasSubstr("expected 'true'"));
  EXPECT_THAT(parse_error("{\"a\""), HasSubstr("expected ':'"));
}

TEST(JsonTest, TrailingGarbageIsRefused) {
  EXPECT_THAT(parse_error("{} x"), HasSubstr("at byte 3: expected end of input after the value"));
  EXPECT_THAT(parse_error("1 2"), HasSubstr("at byte 2"));
  EXPECT_THAT(parse_error("[1,]"), HasSubstr("at byte 3: expected a value"));
}

TEST(JsonTest, BadEscapesAreRefused) {
  EXPECT_THAT(parse_error(R"("\x")"), HasSubstr("at byte 2: expected one of"));
  EXPECT_THAT(parse_error(R"("\u12G4")"), HasSubstr("4 hex digits"));
  EXPECT_THAT(parse_error(R"("\ud800")"), HasSubstr("a low surrogate"));
  EXPECT_THAT(parse_error(R"("\ud800\u0041")"), HasSubstr("a low surrogate"));
  EXPECT_THAT(parse_error(R"("\udc00")"), HasSubstr("a high surrogate"));
  EXPECT_THAT(parse_error("\"a\nb\""), HasSubstr("at byte 2: expected an escaped control"));
}

TEST(JsonTest, InvalidUtf8IsRefusedBothWays) {
  EXPECT_THAT(parse_error("\"\xC3\""), HasSubstr("valid UTF-8"));
  EXPECT_THAT(parse_error("\"\xC0\xAF\""), HasSubstr("valid UTF-8"));          // overlong '/'
  EXPECT_THAT(parse_error("\"\xED\xA0\x80\""), HasSubstr("valid UTF-8"));      // a surrogate
  EXPECT_THROW(Json(std::string("\xFF")).dump(), EngineError);
}

TEST(JsonTest, BadNumbersAreRefused) {
  EXPECT_THAT(parse_error("01"), HasSubstr("no leading zero"));
  EXPECT_THAT(parse_error("-"), HasSubstr("a digit"));
  EXPECT_THAT(parse_error("1."), HasSubstr("a digit after '.'"));
  EXPECT_THAT(parse_error("1e"), HasSubstr("a digit in the exponent"));
  EXPECT_THAT(parse_error("+1"), HasSubstr("expected a value"));
  EXPECT_THAT(parse_error(".5"), HasSubstr("expected a value"));
}

TEST(JsonTest, NestingDeeperThanTheLimitIsRefused) {
  const int limit = Json::kMaxDepth;
  const std::string ok = std::string(limit, '[') + std::string(limit, ']');
  EXPECT_EQ(Json::parse(ok).dump(), ok);
  const std::string deep = std::string(limit + 1, '[') + std::string(limit + 1, ']');
  EXPECT_THAT(parse_error(deep), HasSubstr("at byte 64: expected nesting no deeper than 64"));
  // Far deeper input must fail the same way instead of exhausting the stack.
  EXPECT_THAT(parse_error(std::string(1'000'000, '[')), HasSubstr("nesting no deeper"));
  std::string deep_objects;
  for (int i = 0; i <= limit; ++i) deep_objects += "{\"a\":";
  EXPECT_THAT(parse_error(deep_objects), HasSubstr("nesting no deeper than 64"));
}

TEST(JsonTest, DuplicateKeysAreRefused) {
  EXPECT_THAT(parse_error(R"({"a":1,"b":2,"a":3})"),
              HasSubstr("at byte 13: expected a key not already in this object"));
  EXPECT_NO_THROW(Json::parse(R"({"a":{"a":1}})"));  // the same key at another level is fine
}

}  // namespace
}  // namespace mixtrain
