// Why: headers, manifests and summaries are only as trustworthy as the
// strict JSON reader in front of nlohmann-json, so every value kind must
// round-trip exactly and every class of input it refuses beyond nlohmann's
// own (duplicate keys, integers outside int64, nesting, too many keys,
// non-finite numbers) must be refused with a message that says what was
// wrong.
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

// The message of the EngineError parse_json() throws for `text` ("" if none).
std::string parse_error(std::string_view text, JsonLimits limits = {}) {
  try {
    parse_json(text, limits);
  } catch (const EngineError& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
    return error.what();
  }
  return "";
}

TEST(JsonTest, ScalarsRoundTrip) {
  for (const char* text : {"null", "true", "false", "0", "-7", "\"\"", "\"abc\"", "1.5", "-0.25",
                           "1e+300", "[]", "{}"}) {
    EXPECT_EQ(dump_json(parse_json(text)), text) << text;
  }
}

TEST(JsonTest, IntegersAreExactInt64) {
  const Json max = parse_json("9223372036854775807");
  ASSERT_TRUE(max.is_number_integer());
  EXPECT_EQ(max.get<int64_t>(), std::numeric_limits<int64_t>::max());
  const Json min = parse_json("-9223372036854775808");
  EXPECT_EQ(min.get<int64_t>(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(dump_json(min), "-9223372036854775808");
  // nlohmann would read the first as uint64 and the second as a double.
  EXPECT_THAT(parse_error("9223372036854775808"),
              HasSubstr("integer 9223372036854775808 is outside int64"));
  EXPECT_THAT(parse_error("[-99999999999999999999]"),
              HasSubstr("integer -99999999999999999999 is outside int64"));
  EXPECT_FALSE(parse_json("5").is_number_unsigned());  // every integer is an int64
}

TEST(JsonTest, DoublesRoundTripBitExactly) {
  for (double value : {0.1, 1.0 / 3.0, 6.0e-4, 2.0, -1e-320, 1.7976931348623157e308,
                       std::numeric_limits<double>::denorm_min()}) {
    const Json parsed = parse_json(dump_json(Json(value)));
    ASSERT_TRUE(parsed.is_number_float()) << dump_json(Json(value));
    EXPECT_EQ(std::bit_cast<uint64_t>(parsed.get<double>()), std::bit_cast<uint64_t>(value));
  }
  EXPECT_EQ(dump_json(Json(2.0)), "2.0");  // stays a double, not an int
  EXPECT_TRUE(parse_json("1E2").is_number_float());
  EXPECT_THAT(parse_error("1e999"), HasSubstr("number overflow"));
}

TEST(JsonTest, NonFiniteNumbersAreNotWrittenAsNull) {
  Json nested = {{"loss", {1.0, std::nan("")}}};
  EXPECT_THROW(dump_json(nested), EngineError);
  EXPECT_THROW(dump_json(Json(std::numeric_limits<double>::infinity())), EngineError);
  EXPECT_EQ(nested.dump(), R"({"loss":[1.0,null]})");  // what nlohmann alone would write
}

TEST(JsonTest, ObjectsKeepKeyOrder) {
  const std::string text = R"({"zeta":1,"alpha":[true,null,{"x":"y"}],"mid":{}})";
  const Json value = parse_json(text);
  EXPECT_EQ(dump_json(value), text);
  EXPECT_EQ(value.begin().key(), "zeta");
}

TEST(JsonTest, IndentedDumpIsNlohmanns) {
  EXPECT_EQ(dump_json(parse_json(R"({"a":[1]})"), 2), "{\n  \"a\": [\n    1\n  ]\n}");
}

TEST(JsonTest, StringEscapesDecodeAndReencode) {
  const Json value =
      parse_json(R"("q\" b\\ s\/ \b\f\n\r\t \u0041 \u00e9 \u20ac \ud83d\ude00 \u0001")");
  EXPECT_EQ(value.get<std::string>(),
            "q\" b\\ s/ \b\f\n\r\t A \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \x01");
  EXPECT_EQ(parse_json(dump_json(value)), value);
}

TEST(JsonTest, MalformedInputNamesTheByte) {
  EXPECT_THAT(parse_error(""), HasSubstr("JSON parse error at byte 0:"));
  EXPECT_THAT(parse_error("{\"a\":1"), HasSubstr("at byte 6:"));
  EXPECT_THAT(parse_error("{} x"), HasSubstr("at byte 3:"));
  EXPECT_THAT(parse_error("[1,]"), HasSubstr("at byte 3:"));
  EXPECT_THAT(parse_error("01"), HasSubstr("at byte 1:"));
  EXPECT_THAT(parse_error(R"("\ud800")"), HasSubstr("surrogate"));
  EXPECT_THAT(parse_error("\"a\nb\""), HasSubstr("control character"));
  EXPECT_EQ(parse_error("{}").find("json.exception"), std::string::npos);
}

TEST(JsonTest, InvalidUtf8IsRefusedBothWays) {
  EXPECT_THAT(parse_error("\"\xC3\""), HasSubstr("UTF-8"));
  EXPECT_THAT(parse_error("\"\xC0\xAF\""), HasSubstr("UTF-8"));      // overlong '/'
  EXPECT_THAT(parse_error("\"\xED\xA0\x80\""), HasSubstr("UTF-8"));  // a surrogate
  try {
    dump_json(Json(std::string("\xFF")));
    FAIL() << "expected invalid UTF-8 to be refused";
  } catch (const EngineError& error) {
    EXPECT_THAT(error.what(), HasSubstr("UTF-8"));
  }
}

TEST(JsonTest, NestingDeeperThanTheLimitIsRefused) {
  const int limit = kMaxJsonDepth;
  const std::string ok = std::string(limit, '[') + std::string(limit, ']');
  EXPECT_EQ(dump_json(parse_json(ok)), ok);
  const std::string deep = std::string(limit + 1, '[') + std::string(limit + 1, ']');
  EXPECT_THAT(parse_error(deep), HasSubstr("nesting deeper than 64"));
  // Far deeper input must fail the same way instead of exhausting the stack.
  EXPECT_THAT(parse_error(std::string(1'000'000, '[')), HasSubstr("nesting deeper than 64"));
  std::string deep_objects;
  for (int i = 0; i <= limit; ++i) deep_objects += "{\"a\":";
  EXPECT_THAT(parse_error(deep_objects), HasSubstr("nesting deeper than 64"));
  EXPECT_THAT(parse_error("[[[]]]", {.max_depth = 2}), HasSubstr("nesting deeper than 2"));
  EXPECT_EQ(parse_error("[[]]", {.max_depth = 2}), "");
}

TEST(JsonTest, DuplicateKeysAreRefused) {
  EXPECT_THAT(parse_error(R"({"a":1,"b":2,"a":3})"), HasSubstr("duplicate key \"a\""));
  EXPECT_EQ(parse_error(R"({"a":{"a":1},"b":[{"a":1},{"a":2}]})"), "");  // other objects
}

TEST(JsonTest, ObjectsWithMoreKeysThanTheLimitAreRefused) {
  const JsonLimits two_keys{.max_object_keys = 2};
  EXPECT_THAT(parse_error(R"({"a":1,"b":2,"c":3})", two_keys),
              HasSubstr("an object with more than 2 keys"));
  // Each object counts its own keys; arrays have none.
  EXPECT_EQ(parse_error(R"({"a":{"x":1,"y":2},"b":[1,2,3,{"z":[]}]})", two_keys), "");
  EXPECT_THAT(parse_error(R"([{"a":1},{"a":1,"b":2,"c":3}])", two_keys),
              HasSubstr("an object with more than 2 keys"));
}

// A flat object of as many keys as a 1 MB summary holds (issue 29) reads
// back whole and in document order; the duplicate among them is found.
TEST(JsonTest, AFlatObjectOfManyKeysKeepsEveryKeyInOrder) {
  const int keys = 95'000;
  std::string text = "{";
  for (int i = 0; i < keys; ++i) {
    text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  }
  const Json flat = parse_json(text + "}");
  ASSERT_EQ(flat.size(), static_cast<size_t>(keys));
  int expected = 0;
  for (const auto& [name, value] : flat.items()) {
    ASSERT_EQ(name, "k" + std::to_string(expected));
    ASSERT_EQ(value.get<int64_t>(), expected++);
  }
  EXPECT_EQ(flat.at("k94999").get<int64_t>(), 94'999);
  EXPECT_THAT(parse_error(text + ",\"k123\":0}"), HasSubstr("duplicate key \"k123\""));
}

TEST(JsonFieldsTest, ReadsTypedMembersAndNamesTheMissingOrMistyped) {
  const Json document =
      parse_json(R"({"n":3,"x":2.5,"s":"t","none":null,"o":{"deep":1.5},"l":[]})");
  const JsonFields fields(document, "test doc");
  EXPECT_EQ(fields.integer("n"), 3);
  EXPECT_EQ(fields.number("n"), 3.0);
  EXPECT_EQ(fields.number("x"), 2.5);
  EXPECT_EQ(fields.string("s"), "t");
  EXPECT_FALSE(fields.optional_number("none").has_value());
  EXPECT_EQ(fields.optional_number("x"), 2.5);
  EXPECT_TRUE(fields.array("l").empty());
  const auto message = [&](auto read) {
    try {
      read();
    } catch (const EngineError& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  EXPECT_EQ(message([&] { fields.integer("x"); }),
            "test doc: \"x\" must be an integer, not number");
  EXPECT_EQ(message([&] { fields.object("o").integer("deep"); }),
            "test doc: \"o.deep\" must be an integer, not number");
  EXPECT_EQ(message([&] { fields.object("o").get("gone"); }), "test doc: missing \"o.gone\"");
  EXPECT_EQ(message([&] { fields.string("n"); }), "test doc: \"n\" must be a string, not number");
  EXPECT_EQ(message([&] { fields.object("l"); }), "test doc: \"l\" must be an object, not array");
  EXPECT_EQ(message([&] { JsonFields(Json::array(), "test doc"); }),
            "test doc: the document must be an object, not array");
}

TEST(JsonFieldsTest, AnUnsignedBeyondInt64IsNotAnInteger) {
  const Json document = {{"big", std::numeric_limits<uint64_t>::max()}};
  EXPECT_THROW(JsonFields(document, "doc").integer("big"), EngineError);
}

}  // namespace
}  // namespace mixtrain
