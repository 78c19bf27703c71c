// Why: safetensors files cross the boundary to other tools, so the writer
// must produce exactly the format (aligned header, tiled data) and the
// reader must refuse every malformed file with a message naming it.
#include "engine/checkpoint/safetensors.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/backend/backend.h"
#include "engine/common/error.h"
#include "test_support/temp_dir.h"

namespace mixtrain {
namespace {

using ::testing::HasSubstr;
using test_support::TempDir;

std::vector<std::byte> pattern_bytes(size_t count, uint32_t seed) {
  std::vector<std::byte> bytes(count);
  uint32_t state = seed;
  for (std::byte& b : bytes) {
    state = state * 1664525u + 1013904223u;
    b = static_cast<std::byte>(state >> 24);
  }
  return bytes;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Writes a file by hand: `declared_length` (default: header.size()) as the
// 8-byte little-endian length, then `header`, then `data`.
void write_raw(const std::filesystem::path& path, const std::string& header,
               const std::string& data, int64_t declared_length = -1) {
  const uint64_t length = declared_length < 0 ? header.size() : uint64_t(declared_length);
  std::ofstream out(path, std::ios::binary);
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>(length >> (8 * i)));
  out << header << data;
}

// The message with which opening `path` is refused ("" if it is accepted).
std::string open_error(const std::filesystem::path& path) {
  try {
    SafetensorsFile::open(path);
  } catch (const EngineError& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
    return error.what();
  }
  return "";
}

TEST(SafetensorsTest, EveryDtypeRoundTripsBitExactly) {
  TempDir dir;
  const std::vector<TensorLayout> layouts = {
      {"weights.f32", DType::kF32, {3, 5}},     {"half", DType::kF16, {7}},
      {"brain", DType::kBF16, {2, 2, 3}},       {"e4m3", DType::kFP8E4M3, {9}},
      {"e5m2", DType::kFP8E5M2, {3, 1}},        {"tokens", DType::kI32, {4}},
      {"scalar", DType::kF32, {}},              {"empty", DType::kBF16, {0, 3}},
  };
  std::vector<std::vector<std::byte>> contents;
  std::vector<HostTensor> tensors;
  for (size_t i = 0; i < layouts.size(); ++i) {
    contents.push_back(pattern_bytes(shape_numel(layouts[i].shape) * dtype_size(layouts[i].dtype),
                                     static_cast<uint32_t>(i + 1)));
    tensors.push_back(HostTensor{layouts[i], contents.back().data()});
  }
  const SafetensorsMetadata metadata = {{"format", "pt"}, {"note", "quote \" and \xC3\xA9"}};
  const auto path = dir.path() / "all.safetensors";
  const WrittenFile written = write_safetensors(path, tensors, metadata);
  EXPECT_EQ(written.bytes, std::filesystem::file_size(path));

  const SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.metadata(), metadata);
  ASSERT_EQ(file.tensors().size(), layouts.size());
  for (size_t i = 0; i < layouts.size(); ++i) {
    const SafetensorsEntry* entry = file.find(layouts[i].name);
    ASSERT_NE(entry, nullptr) << layouts[i].name;
    EXPECT_EQ(entry->layout.dtype, layouts[i].dtype);
    EXPECT_EQ(entry->layout.shape, layouts[i].shape);
    const auto bytes = file.bytes(layouts[i].name);
    ASSERT_EQ(bytes.size(), contents[i].size());
    EXPECT_EQ(std::memcmp(bytes.data(), contents[i].data(), bytes.size()), 0) << layouts[i].name;
  }
}

TEST(SafetensorsTest, HeaderIsExactAndPaddedWithSpacesToEightBytes) {
  TempDir dir;
  const float values[2] = {1.0f, -2.0f};
  const auto path = dir.path() / "one.safetensors";
  const HostTensor tensor{{"w", DType::kF32, {2}}, values};
  write_safetensors(path, {&tensor, 1}, {{"k", "v"}});
  const std::string content = read_file(path);
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= uint64_t(uint8_t(content[i])) << (8 * i);
  const std::string json =
      R"({"__metadata__":{"k":"v"},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_EQ((8 + length) % 8, 0u);
  ASSERT_GE(length, json.size());
  EXPECT_EQ(content.substr(8, json.size()), json);
  EXPECT_EQ(content.substr(8 + json.size(), length - json.size()),
            std::string(length - json.size(), ' '));
  EXPECT_EQ(content.size(), 8 + length + sizeof(values));
  EXPECT_EQ(std::memcmp(content.data() + 8 + length, values, sizeof(values)), 0);

  // Every name length lands the data section on an 8-byte boundary.
  for (int name_length = 1; name_length <= 9; ++name_length) {
    const auto padded_path = dir.path() / ("n" + std::to_string(name_length) + ".safetensors");
    const HostTensor named{{std::string(name_length, 'x'), DType::kF32, {2}}, values};
    write_safetensors(padded_path, {&named, 1});
    const std::string padded = read_file(padded_path);
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(padded[i])) << (8 * i);
    EXPECT_EQ((8 + n) % 8, 0u) << name_length;
  }
}

TEST(SafetensorsTest, AcceptsKeysOutOfDataOrderAndUnalignedHeaders) {
  TempDir dir;
  const auto path = dir.path() / "foreign.safetensors";
  // Key order differs from data order, metadata comes last, header length
  // is not a multiple of 8: all allowed by the format.
  const std::string header =
      R"({"b":{"dtype":"I32","shape":[1],"data_offsets":[2,6]},)"
      R"("a":{"dtype":"F16","shape":[1],"data_offsets":[0,2]},"__metadata__":{}})";
  write_raw(path, header, std::string("\x00\x3c\x2a\x00\x00\x00", 6));
  const SafetensorsFile file = SafetensorsFile::open(path);
  ASSERT_EQ(file.tensors().size(), 2u);
  EXPECT_EQ(file.tensors()[0].layout.name, "a");  // data order
  int32_t b = 0;
  std::memcpy(&b, file.bytes("b").data(), sizeof(b));
  EXPECT_EQ(b, 42);
}

struct MalformedCase {
  const char* label;
  std::string header;
  std::string data;
  int64_t declared_length;
  const char* expected;
};

TEST(SafetensorsTest, EveryMalformedFileIsRefusedWithItsProblem) {
  const std::string f32x2 = R"("dtype":"F32","shape":[2])";
  const std::vector<MalformedCase> cases = {
      {"header length past end", "{}", "", 100,
       "header length 100 runs past the end of the 10-byte file"},
      {"header length over limit", "{}", "", int64_t{1} << 40, "exceeds the limit"},
      {"not an object start", " {}", "", -1, "header does not start with '{'"},
      {"invalid json", R"({"a":)", "", -1, "header is not valid JSON: JSON parse error at byte 5"},
      {"duplicate names",
       R"({"a":{)" + f32x2 + R"(,"data_offsets":[0,8]},"a":{)" + f32x2 +
           R"(,"data_offsets":[8,16]}})",
       std::string(16, 'x'), -1, "duplicate key \"a\""},
      {"unknown dtype", R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})",
       std::string(8, 'x'), -1, "tensor \"a\": unsupported dtype \"F64\""},
      {"negative dimension", R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", "", -1,
       "shape has a dimension that is not a non-negative integer"},
      {"span mismatch", R"({"a":{)" + f32x2 + R"(,"data_offsets":[0,4]}})", std::string(4, 'x'), -1,
       "tensor \"a\": data_offsets span 4 bytes but F32(2) needs 8"},
      {"reversed offsets", R"({"a":{)" + f32x2 + R"(,"data_offsets":[8,0]}})", "", -1,
       "data_offsets is not [begin, end]"},
      {"past the data", R"({"a":{)" + f32x2 + R"(,"data_offsets":[0,8]}})", std::string(6, 'x'), -1,
       "run past the 6-byte data section (truncated file?)"},
      {"overlap",
       R"({"a":{)" + f32x2 + R"(,"data_offsets":[0,8]},"b":{)" + f32x2 +
           R"(,"data_offsets":[4,12]}})",
       std::string(12, 'x'), -1, "tensor \"b\" overlaps"},
      {"hole", R"({"a":{)" + f32x2 + R"(,"data_offsets":[4,12]}})", std::string(12, 'x'), -1,
       "bytes [0, 4) before tensor \"a\" belong to no tensor"},
      {"trailing bytes", R"({"a":{)" + f32x2 + R"(,"data_offsets":[0,8]}})", std::string(9, 'x'),
       -1, "1 bytes after the last tensor belong to no tensor"},
      {"unknown field", R"({"a":{)" + f32x2 + R"(,"data_offsets":[0,8],"extra":1}})",
       std::string(8, 'x'), -1, "tensor \"a\" has unknown field \"extra\""},
      {"missing field", R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", std::string(8, 'x'), -1,
       "lacks one of"},
      {"metadata not string", R"({"__metadata__":{"k":1}})", "", -1,
       "metadata \"k\" is not a string"},
      {"entry not object", R"({"a":[1]})", "", -1, "tensor \"a\" is not an object"},
  };
  TempDir dir;
  for (const MalformedCase& c : cases) {
    const auto path = dir.path() / "bad.safetensors";
    std::filesystem::remove(path);
    write_raw(path, c.header, c.data, c.declared_length);
    const std::string message = open_error(path);
    EXPECT_THAT(message, HasSubstr("safetensors " + path.string() + ": ")) << c.label;
    EXPECT_THAT(message, HasSubstr(c.expected)) << c.label;
  }
  const auto tiny = dir.path() / "tiny.safetensors";
  std::ofstream(tiny, std::ios::binary) << "abc";
  EXPECT_THAT(open_error(tiny), HasSubstr("file is 3 bytes, shorter than the 8-byte header length"));
  EXPECT_THAT(open_error(dir.path() / "absent.safetensors"), HasSubstr("cannot open"));
}

TEST(SafetensorsTest, WriterRefusesInconsistentInput) {
  TempDir dir;
  const float values[4] = {};
  auto expect_refused = [&](std::vector<HostTensor> tensors, const char* expected) {
    static int counter = 0;
    const auto path = dir.path() / ("w" + std::to_string(counter++) + ".safetensors");
    try {
      write_safetensors(path, tensors);
      ADD_FAILURE() << "accepted, expected: " << expected;
    } catch (const EngineError& error) {
      EXPECT_THAT(error.what(), HasSubstr(expected));
    }
  };
  expect_refused({{{"a", DType::kF32, {1}}, values}, {{"a", DType::kF32, {1}}, values}},
                 "tensor name \"a\" appears twice");
  expect_refused({{{"__metadata__", DType::kF32, {1}}, values}}, "cannot name a tensor");
  expect_refused({{{"", DType::kF32, {1}}, values}}, "empty name");
  expect_refused({{{"neg", DType::kF32, {-2}}, values}}, "invalid shape (-2)");
  expect_refused({{{"null", DType::kF32, {2}}, nullptr}}, "tensor \"null\" has no data");

  FileWriter out(dir.path() / "stream.safetensors");
  SafetensorsWriter writer(out, {{"x", DType::kF32, {2}}, {"y", DType::kI32, {1}}}, {});
  EXPECT_THROW(writer.write_next(std::as_bytes(std::span(values, 1))), EngineError);
  writer.write_next(std::as_bytes(std::span(values, 2)));
  EXPECT_THAT([&] { writer.finish(); }, ::testing::ThrowsMessage<EngineError>(
                                            HasSubstr("tensor \"y\" was never written")));
  writer.write_next(std::as_bytes(std::span(values, 1)));
  writer.finish();
  EXPECT_THROW(writer.write_next(std::as_bytes(std::span(values, 1))), EngineError);
}

TEST(SafetensorsTest, ReadIntoCopiesIntoAMatchingHostTensorOnly) {
  TempDir dir;
  const std::vector<float> values = {1.5f, -2.0f, 3.25f, 0.0f, 8.0f, -1.0f};
  const auto path = dir.path() / "m.safetensors";
  const HostTensor tensor{{"m", DType::kF32, {2, 3}}, values.data()};
  write_safetensors(path, {&tensor, 1});
  const SafetensorsFile file = SafetensorsFile::open(path);

  const std::unique_ptr<Backend> cpu = make_backend("cpu");
  const Tensor destination = cpu->zeros({2, 3}, DType::kF32, MemoryCategory::kMasterParams);
  file.read_into("m", destination);
  EXPECT_EQ(std::vector<float>(destination.data_as<float>(), destination.data_as<float>() + 6), values);

  const Tensor wrong_shape = cpu->zeros({3, 2}, DType::kF32, MemoryCategory::kMasterParams);
  EXPECT_THAT([&] { file.read_into("m", wrong_shape); },
              ::testing::ThrowsMessage<EngineError>(HasSubstr("does not match destination")));
  EXPECT_THAT([&] { file.read_into("absent", destination); },
              ::testing::ThrowsMessage<EngineError>(HasSubstr("no tensor named \"absent\"")));
  EXPECT_EQ(host_tensor("m", destination).data, destination.data());
}

}  // namespace
}  // namespace mixtrain
