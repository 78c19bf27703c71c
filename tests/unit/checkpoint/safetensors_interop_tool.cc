// Why: the other half of safetensors_interop.py. "write PATH" writes the
// reference tensors with our writer for Python to check; "check PATH"
// reads a file Python wrote and verifies every tensor decodes to the same
// reference values. Exit status 0 on success, 1 with a message otherwise.
#include <cstdint>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "engine/checkpoint/safetensors.h"
#include "engine/common/error.h"
#include "engine/numerics/float16.h"
#include "engine/numerics/fp8.h"

namespace mixtrain {
namespace {

// The reference tensors; safetensors_interop.py holds the same table.
struct Reference {
  const char* name;
  DType dtype;
  Shape shape;
  std::vector<double> values;
};

const std::vector<Reference>& references() {
  static const std::vector<Reference> table = {
      {"f32", DType::kF32, {2, 3}, {-1.0, -0.5, 0.0, 0.5, 1.0, 1.5}},
      {"f16", DType::kF16, {4}, {0.0, 1.0, -2.5, 65504.0}},
      {"bf16", DType::kBF16, {2, 2}, {1.0, -0.5, 3.0, 256.0}},
      {"e4m3", DType::kFP8E4M3, {4}, {0.0, 1.0, -1.75, 448.0}},
      {"e5m2", DType::kFP8E5M2, {4}, {0.0, 1.0, -1.5, 57344.0}},
      {"i32", DType::kI32, {3}, {-7.0, 0.0, 2147483647.0}},
      {"scalar", DType::kF32, {}, {3.25}},
  };
  return table;
}

std::vector<std::byte> encode(const Reference& ref) {
  std::vector<std::byte> bytes(ref.values.size() * dtype_size(ref.dtype));
  for (size_t i = 0; i < ref.values.size(); ++i) {
    const float x = static_cast<float>(ref.values[i]);
    std::byte* out = bytes.data() + i * dtype_size(ref.dtype);
    switch (ref.dtype) {
      case DType::kF32: std::memcpy(out, &x, 4); break;
      case DType::kF16: { const uint16_t h = float_to_half_bits(x); std::memcpy(out, &h, 2); break; }
      case DType::kBF16: { const uint16_t b = float_to_bf16_bits(x); std::memcpy(out, &b, 2); break; }
      case DType::kFP8E4M3: *out = std::byte{float_to_fp8(x, Fp8Format::kE4M3)}; break;
      case DType::kFP8E5M2: *out = std::byte{float_to_fp8(x, Fp8Format::kE5M2)}; break;
      case DType::kI32: { const int32_t v = static_cast<int32_t>(ref.values[i]); std::memcpy(out, &v, 4); break; }
      case DType::kE8M0:
        *out = std::byte{static_cast<uint8_t>(ref.values[i])};
        break;
    }
  }
  return bytes;
}

void write_reference_file(const std::string& path) {
  std::vector<std::vector<std::byte>> contents;
  std::vector<HostTensor> tensors;
  contents.reserve(references().size());
  for (const Reference& ref : references()) {
    contents.push_back(encode(ref));
    tensors.push_back(HostTensor{{ref.name, ref.dtype, ref.shape}, contents.back().data()});
  }
  write_safetensors(path, tensors, {{"origin", "mixtrain"}});
}

// Returns an empty string if `path` holds exactly the reference tensors.
std::string check_reference_file(const std::string& path) {
  const SafetensorsFile file = SafetensorsFile::open(path);
  if (file.metadata() != SafetensorsMetadata{{"origin", "python"}}) return "metadata differs";
  if (file.tensors().size() != references().size()) return "tensor count differs";
  for (const Reference& ref : references()) {
    const SafetensorsEntry* entry = file.find(ref.name);
    if (entry == nullptr) return std::string("missing tensor ") + ref.name;
    if (entry->layout.dtype != ref.dtype || entry->layout.shape != ref.shape) {
      return std::string("dtype or shape of ") + ref.name + " differs";
    }
    const std::vector<std::byte> expected = encode(ref);
    const auto actual = file.bytes(*entry);
    if (actual.size() != expected.size() ||
        std::memcmp(actual.data(), expected.data(), expected.size()) != 0) {
      return std::string("bytes of ") + ref.name + " differ";
    }
  }
  return "";
}

}  // namespace
}  // namespace mixtrain

int main(int argc, char** argv) {
  const std::string usage = "usage: safetensors_interop_tool write|check PATH";
  if (argc != 3) {
    std::cerr << usage << "\n";
    return 1;
  }
  const std::string mode = argv[1];
  try {
    if (mode == "write") {
      mixtrain::write_reference_file(argv[2]);
      return 0;
    }
    if (mode == "check") {
      const std::string problem = mixtrain::check_reference_file(argv[2]);
      if (problem.empty()) return 0;
      std::cerr << argv[2] << ": " << problem << "\n";
      return 1;
    }
  } catch (const mixtrain::EngineError& error) {
    std::cerr << error.what() << "\n";
    return 1;
  }
  std::cerr << usage << "\n";
  return 1;
}
