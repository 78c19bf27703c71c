// Why: cast, fill, set_zero and add move every activation and weight copy
// of a training step, so each is checked in every dtype pair against the
// scalar conversion rules (bit for bit) or a double reference, across
// chunk boundaries, in place where the contract allows it, and on bad input.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/backend/backend.h"
#include "backend_test_util.h"
#include "engine/numerics/fp8.h"

namespace mixtrain::backend_test {
namespace {

// Crosses several 4096-element chunks and ends in a partial one.
constexpr int64_t kLong = 3 * 4096 + 123;

// The scalar rules: encode an fp32 value in `dtype` (fp8 saturating), and
// decode a code back to fp32.
uint32_t encode(float x, DType dtype) {
  switch (dtype) {
    case DType::kF32: return std::bit_cast<uint32_t>(x);
    case DType::kF16: return float_to_half_bits(x);
    case DType::kBF16: return float_to_bf16_bits(x);
    case DType::kFP8E4M3: return float_to_fp8(x, Fp8Format::kE4M3, true);
    case DType::kFP8E5M2: return float_to_fp8(x, Fp8Format::kE5M2, true);
    default: break;
  }
  ADD_FAILURE() << "encode " << dtype_name(dtype);
  return 0;
}

float decode(uint32_t code, DType dtype) {
  switch (dtype) {
    case DType::kF32: return std::bit_cast<float>(code);
    case DType::kF16: return half_bits_to_float(static_cast<uint16_t>(code));
    case DType::kBF16: return bf16_bits_to_float(static_cast<uint16_t>(code));
    case DType::kFP8E4M3: return fp8_to_float(static_cast<uint8_t>(code), Fp8Format::kE4M3);
    case DType::kFP8E5M2: return fp8_to_float(static_cast<uint8_t>(code), Fp8Format::kE5M2);
    default: break;
  }
  ADD_FAILURE() << "decode " << dtype_name(dtype);
  return 0.0f;
}

// A tensor of `dtype` holding the given codes (little-endian, dtype_size bytes each).
Tensor tensor_of_codes(Backend& backend, DType dtype, const std::vector<uint32_t>& codes) {
  Tensor t =
      backend.empty({static_cast<int64_t>(codes.size())}, dtype, MemoryCategory::kActivations);
  std::vector<unsigned char> bytes(t.nbytes());
  for (size_t i = 0; i < codes.size(); ++i) {
    std::memcpy(bytes.data() + i * dtype_size(dtype), &codes[i], dtype_size(dtype));
  }
  backend.copy_from_host(t, bytes.data());
  return t;
}

std::vector<uint32_t> codes_of(Backend& backend, const Tensor& t) {
  std::vector<unsigned char> bytes(t.nbytes());
  backend.copy_to_host(bytes.data(), t);
  std::vector<uint32_t> codes(static_cast<size_t>(t.numel()), 0);
  for (size_t i = 0; i < codes.size(); ++i) {
    std::memcpy(&codes[i], bytes.data() + i * dtype_size(t.dtype()), dtype_size(t.dtype()));
  }
  return codes;
}

// Values that exercise rounding, saturation, signed zero, subnormals and
// non-finite inputs, followed by random values over a wide range.
std::vector<float> cast_inputs() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f,       -0.0f, 1.0f,   -1.5f,
                          3.1415926f, 1e-8f, -3e-6f, 448.0f,
                          500.0f,     -6e4f, 7e4f,   57344.0f,
                          1e30f,      inf,   -inf,   std::numeric_limits<float>::quiet_NaN()};
  for (double x : random_values(kLong, 7, -300.0, 300.0)) v.push_back(static_cast<float>(x));
  return v;
}

TEST(CpuCast, EveryFloatPairMatchesTheScalarConversionsBitForBit) {
  auto backend = make_backend("cpu");
  const std::vector<float> inputs = cast_inputs();
  for (DType src_type : kAllFloatFormats) {
    std::vector<uint32_t> src_codes;
    for (float x : inputs) src_codes.push_back(encode(x, src_type));
    Tensor src = tensor_of_codes(*backend, src_type, src_codes);
    for (DType dst_type : kAllFloatFormats) {
      SCOPED_TRACE(std::string(dtype_name(src_type)) + " -> " + dtype_name(dst_type));
      Tensor dst = backend->empty(src.shape(), dst_type, MemoryCategory::kActivations);
      backend->cast(dst, src);
      const std::vector<uint32_t> got = codes_of(*backend, dst);
      size_t mismatches = 0;
      for (size_t i = 0; i < src_codes.size(); ++i) {
        const uint32_t want =
            src_type == dst_type ? src_codes[i] : encode(decode(src_codes[i], src_type), dst_type);
        if (got[i] != want && mismatches++ == 0) {
          ADD_FAILURE() << "element " << i << " (" << inputs[i] << "): got 0x" << std::hex << got[i]
                        << ", expected 0x" << want;
        }
      }
      EXPECT_EQ(mismatches, 0u);
    }
  }
}

TEST(CpuCast, SameTensorIsANoOpAndMismatchesThrow) {
  auto backend = make_backend("cpu");
  Tensor t = make_tensor(*backend, {4}, DType::kBF16, {1.0, -2.0, 3.5, 0.25});
  backend->cast(t, t);
  EXPECT_EQ(values_of(*backend, t), (std::vector<double>{1.0, -2.0, 3.5, 0.25}));

  Tensor five = backend->empty({5}, DType::kF32, MemoryCategory::kActivations);
  EXPECT_TRUE(throws_invalid_argument([&] { backend->cast(five, t); }, {"cast", "src", "bf16(4)"}));
  Tensor ids = backend->empty({4}, DType::kI32, MemoryCategory::kActivations);
  EXPECT_TRUE(throws_invalid_argument([&] { backend->cast(ids, t); }, {"cast", "dst", "int32"}));
  Tensor wide = backend->empty({8}, DType::kF32, MemoryCategory::kActivations);
  EXPECT_TRUE(throws_invalid_argument([&] { backend->cast(wide.view(1, {4}), wide.view(0, {4})); },
                                      {"cast", "overlaps"}));
}

TEST(CpuFill, StoresTheValueRoundedToEachDtype) {
  auto backend = make_backend("cpu");
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor t = backend->empty({kLong}, dtype, MemoryCategory::kActivations);
    backend->fill(t, 0.1f);
    const double want = values_of(*backend, make_tensor(*backend, {1}, dtype, {0.1}))[0];
    EXPECT_EQ(values_of(*backend, t), std::vector<double>(kLong, want));
  }
  Tensor ids = backend->empty({3}, DType::kI32, MemoryCategory::kActivations);
  EXPECT_TRUE(throws_invalid_argument([&] { backend->fill(ids, 1.0f); }, {"fill", "int32(3)"}));
}

TEST(CpuSetZero, ClearsEveryByteOfAnyDtype) {
  auto backend = make_backend("cpu");
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kFP8E4M3, DType::kI32}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor t = backend->empty({300000}, dtype, MemoryCategory::kActivations);
    std::vector<unsigned char> bytes(t.nbytes(), 0xAB);
    backend->copy_from_host(t, bytes.data());
    backend->set_zero(t);
    backend->copy_to_host(bytes.data(), t);
    EXPECT_EQ(bytes, std::vector<unsigned char>(t.nbytes(), 0));
  }
}

std::vector<double> sum_of(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> s(a.size());
  for (size_t i = 0; i < a.size(); ++i) s[i] = a[i] + b[i];
  return s;
}

TEST(CpuAdd, MatchesDoubleReferenceForEveryDtypeCombination) {
  auto backend = make_backend("cpu");
  for (DType out_type : kFloatTypes) {
    for (DType a_type : kFloatTypes) {
      for (DType b_type : kFloatTypes) {
        SCOPED_TRACE(std::string("out ") + dtype_name(out_type) + ", a " + dtype_name(a_type) +
                     ", b " + dtype_name(b_type));
        Tensor a = make_tensor(*backend, {3, kLong / 3}, a_type, random_values(kLong, 1, -4, 4));
        Tensor b = make_tensor(*backend, {kLong}, b_type, random_values(kLong, 2, -4, 4));
        Tensor out = backend->empty({kLong}, out_type, MemoryCategory::kActivations);
        backend->add(out, a, b);
        EXPECT_TRUE(all_close(values_of(*backend, out),
                              sum_of(values_of(*backend, a), values_of(*backend, b)),
                              tolerance(out_type)));
      }
    }
  }
}

TEST(CpuAdd, OutMayBeEitherInput) {
  auto backend = make_backend("cpu");
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor a = make_tensor(*backend, {kLong}, dtype, random_values(kLong, 3));
    Tensor b = make_tensor(*backend, {kLong}, dtype, random_values(kLong, 4));
    const std::vector<double> a0 = values_of(*backend, a);
    const std::vector<double> b0 = values_of(*backend, b);
    backend->add(a, a, b);  // a += b
    EXPECT_TRUE(all_close(values_of(*backend, a), sum_of(a0, b0), tolerance(dtype)));
    const std::vector<double> a1 = values_of(*backend, a);
    backend->add(b, a, b);  // b += a
    EXPECT_TRUE(all_close(values_of(*backend, b), sum_of(a1, b0), tolerance(dtype)));
  }
}

TEST(CpuAdd, BadArgumentsThrowNamingTheTensor) {
  auto backend = make_backend("cpu");
  Tensor a = backend->zeros({4, 8}, DType::kF32, MemoryCategory::kActivations);
  Tensor b = backend->zeros({4, 7}, DType::kBF16, MemoryCategory::kActivations);
  Tensor ids = backend->zeros({32}, DType::kI32, MemoryCategory::kActivations);
  EXPECT_TRUE(throws_invalid_argument([&] { backend->add(a, a, b); }, {"add", "b", "bf16(4, 7)"}));
  EXPECT_TRUE(throws_invalid_argument([&] { backend->add(a, ids, a); }, {"add", "a", "int32"}));
  Tensor wide = backend->zeros({64}, DType::kF32, MemoryCategory::kActivations);
  EXPECT_TRUE(throws_invalid_argument(
      [&] { backend->add(wide.view(1, {32}), wide.view(0, {32}), a); }, {"add", "overlaps"}));
}

}  // namespace
}  // namespace mixtrain::backend_test
