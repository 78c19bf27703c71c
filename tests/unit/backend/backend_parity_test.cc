// Why: ggml's test-backend-ops for mixtrain. Every Backend op runs on every
// backend this process can make, on the same seeded random inputs, and its
// results are compared with the CPU backend's. The CPU ops are checked
// against double-precision references in their own tests, so agreement here
// carries that correctness over to the CUDA backend (and to any later one).
// A backend that is not present (always "cuda" on a machine without a GPU)
// has its cases skipped with a message; "cpu" against a second CPU backend
// always runs and checks the plumbing and determinism.
//
// Both sides get bit-identical inputs (rounded to their dtype on the host
// first), so what differs is each implementation's own arithmetic: fp32
// accumulation order, exp/tanh implementations, and where results are
// rounded to 16 bits. Tolerances, by the narrowest dtype a case computes
// in, with scale = max |want| over the tensor:
//
//   |got - want| <= rtol * |want| + atol * scale
//
//   dtype | rtol    | atol    | why
//   ------+---------+---------+-----------------------------------------------
//   fp32  | 1e-4    | 1e-5    | sums in different orders (cuBLAS vs oneDNN
//         |         |         | blocking), exp/expf ~2e-7 apart; chained ops
//         |         |         | (attention backward) compound a few of these
//   bf16  | 2^-6    | 2^-7    | 8-bit significand: two results rounded
//         |         |         | independently can be an ulp (2^-7) apart, and
//         |         |         | ops that round intermediates (attention
//         |         |         | probabilities, GEMM C before bias) add ~1 more
//   fp16  | 2^-9    | 2^-10   | the same for an 11-bit significand
//
// Exact comparisons: cast (both sides claim CUDA's conversions bit for bit;
// any two NaNs match), fill, set_zero, copies, unscale_and_check (one
// multiply and one rounding), and the fp8 quantizers with their amax and
// counts (one multiply, one conversion). sum_squares accumulates in fp64:
// 1e-12. matmul_fp8 is a bf16 GEMM on exact values: the bf16 tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "backend_test_util.h"

namespace mixtrain::backend_test {
namespace {

struct Tolerance {
  double rtol;
  double atol;
};

Tolerance parity_tolerance(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return {std::ldexp(1.0, -6), std::ldexp(1.0, -7)};
    case DType::kF16: return {std::ldexp(1.0, -9), std::ldexp(1.0, -10)};
    default: return {1e-4, 1e-5};
  }
}

// The loosest tolerance among the dtypes a case computes in.
Tolerance loosest(std::initializer_list<DType> dtypes) {
  Tolerance t{0.0, 0.0};
  for (DType d : dtypes) {
    const Tolerance u = parity_tolerance(d);
    t = {std::max(t.rtol, u.rtol), std::max(t.atol, u.atol)};
  }
  return t;
}

// ---- host-side values ------------------------------------------------------

std::vector<int32_t> random_ids(size_t n, uint32_t seed, int32_t limit) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, limit - 1);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = dist(rng);
  return v;
}

// Whether the element at `at` of a float-format byte array is a NaN.
bool is_nan_at(const std::vector<uint8_t>& bytes, size_t at, DType dtype) {
  switch (dtype) {
    case DType::kFP8E4M3: return (bytes[at] & 0x7fu) == 0x7fu;
    case DType::kFP8E5M2: return (bytes[at] & 0x7fu) > 0x7cu;
    case DType::kE8M0:
      return bytes[at] == 0xffu;
    case DType::kF16:
    case DType::kBF16: {
      uint16_t bits;
      std::memcpy(&bits, &bytes[at * 2], 2);
      return (bits & 0x7fffu) > (dtype == DType::kF16 ? 0x7c00u : 0x7f80u);
    }
    default: {
      float f;
      std::memcpy(&f, &bytes[at * 4], 4);
      return std::isnan(f);
    }
  }
}

// Source elements covering a float format: every code of the 8- and 16-bit
// formats; for fp32, random values across the range the narrow formats
// round in (exponents 2^-30 .. 2^33, both signs) plus the edge cases.
std::vector<uint8_t> cast_source(DType dtype) {
  if (dtype_size(dtype) == 1) {
    std::vector<uint8_t> bytes(256);
    for (int i = 0; i < 256; ++i) bytes[i] = static_cast<uint8_t>(i);
    return bytes;
  }
  if (dtype_size(dtype) == 2) {
    std::vector<uint8_t> bytes(2 * 65536);
    for (uint32_t i = 0; i < 65536; ++i) {
      const uint16_t bits = static_cast<uint16_t>(i);
      std::memcpy(&bytes[2 * i], &bits, 2);
    }
    return bytes;
  }
  std::vector<float> values = {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(), 448.0f, 464.0f,
                               464.0001f, 480.0f, -500.0f, 57344.0f, 61440.0f, 61439.996f,
                               65504.0f, 65520.0f, 65519.996f, 1e-10f, -1e-10f,
                               std::ldexp(1.0f, -9), std::ldexp(1.0f, -10),
                               std::ldexp(1.0f, -16), std::ldexp(1.0f, -17),
                               std::ldexp(1.0f, -24), std::ldexp(1.0f, -25),
                               std::ldexp(1.5f, -25), std::numeric_limits<float>::denorm_min(),
                               std::numeric_limits<float>::max()};
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> exponent(127 - 30, 127 + 33);
  std::uniform_int_distribution<uint32_t> mantissa(0, (1u << 23) - 1);
  std::uniform_int_distribution<uint32_t> sign(0, 1);
  while (values.size() < 65536) {
    const uint32_t bits = (sign(rng) << 31) | (exponent(rng) << 23) | mantissa(rng);
    float f;
    std::memcpy(&f, &bits, 4);
    values.push_back(f);
  }
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  // A signalling NaN with a payload and a negative quiet NaN, as raw bits.
  const uint32_t nans[] = {0x7f800001u, 0xffc01234u};
  std::memcpy(&bytes[bytes.size() - 8], nans, 8);
  return bytes;
}

std::vector<std::string> parity_backends() {
  std::vector<std::string> names = {"cpu", "cuda"};
  for (const std::string& name : available_backends()) {
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

// ---- the fixture -------------------------------------------------------------

// The same tensor on the backend under test and on the CPU reference.
struct Twin {
  Tensor test;
  Tensor ref;
};
using Side = Tensor Twin::*;

class BackendParityTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::vector<std::string> present = available_backends();
    if (std::find(present.begin(), present.end(), GetParam()) == present.end()) {
      GTEST_SKIP() << "backend \"" << GetParam()
                   << "\" is not available in this process (not compiled in, or no device): "
                      "its parity cases are skipped";
    }
    backend_ = make_backend(GetParam());
    reference_ = make_backend("cpu");
  }

  // Runs op(backend, side) on the backend under test with the Twins' test
  // tensors, then on the CPU reference with their ref tensors.
  void run_both(const std::function<void(Backend&, Side)>& op) {
    op(*backend_, &Twin::test);
    op(*reference_, &Twin::ref);
  }

  Twin make_raw(const Shape& shape, DType dtype, const std::vector<uint8_t>& bytes) {
    Twin t{backend_->empty(shape, dtype, MemoryCategory::kActivations),
           reference_->empty(shape, dtype, MemoryCategory::kActivations)};
    EXPECT_EQ(bytes.size(), t.test.nbytes());
    backend_->copy_from_host(t.test, bytes.data());
    reference_->copy_from_host(t.ref, bytes.data());
    return t;
  }
  Twin make(const Shape& shape, DType dtype, const std::vector<double>& values) {
    return {make_tensor(*backend_, shape, dtype, values),
            make_tensor(*reference_, shape, dtype, values)};
  }
  Twin make_random(const Shape& shape, DType dtype, uint32_t seed, float lo = -1.0f,
                   float hi = 1.0f) {
    return make(shape, dtype, random_values(shape_numel(shape), seed, lo, hi));
  }
  Twin make_ids(const Shape& shape, const std::vector<int32_t>& ids) {
    std::vector<uint8_t> bytes(ids.size() * 4);
    std::memcpy(bytes.data(), ids.data(), bytes.size());
    return make_raw(shape, DType::kI32, bytes);
  }

  static std::vector<uint8_t> read_raw(Backend& backend, const Tensor& t) {
    std::vector<uint8_t> bytes(t.nbytes());
    backend.copy_to_host(bytes.data(), t);
    return bytes;
  }

  // Checks the backend's tensor against the reference's within `tol`
  // (see the table at the top); NaN must meet NaN.
  void expect_close(const Twin& t, Tolerance tol, const std::string& what) {
    const std::vector<double> got = values_of(*backend_, t.test);
    const std::vector<double> want = values_of(*reference_, t.ref);
    ASSERT_EQ(got.size(), want.size()) << what;
    double scale = 0.0;
    for (double w : want) {
      if (std::isfinite(w)) scale = std::max(scale, std::fabs(w));
    }
    int failures = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      const double g = got[i], w = want[i];
      bool ok;
      if (std::isnan(w) || std::isnan(g)) {
        ok = std::isnan(w) && std::isnan(g);
      } else if (std::isinf(w) || std::isinf(g)) {
        ok = g == w;
      } else {
        ok = std::fabs(g - w) <= tol.rtol * std::fabs(w) + tol.atol * scale;
      }
      if (!ok && ++failures <= 5) {
        ADD_FAILURE() << what << " " << t.test.describe() << "[" << i << "]: " << GetParam()
                      << " gives " << g << ", cpu gives " << w << " (rtol " << tol.rtol
                      << ", atol " << tol.atol << " x scale " << scale << ")";
      }
    }
    EXPECT_EQ(failures, 0) << what << ": " << failures << " of " << want.size()
                           << " elements differ";
  }

  // Checks the two tensors hold the same bytes (any two NaNs match).
  void expect_bit_equal(const Twin& t, const std::string& what) {
    const std::vector<uint8_t> got = read_raw(*backend_, t.test);
    const std::vector<uint8_t> want = read_raw(*reference_, t.ref);
    ASSERT_EQ(got.size(), want.size()) << what;
    const size_t width = dtype_size(t.test.dtype());
    int failures = 0;
    for (size_t i = 0; i < got.size() / width; ++i) {
      if (std::memcmp(&got[i * width], &want[i * width], width) == 0) continue;
      if (is_nan_at(got, i, t.test.dtype()) && is_nan_at(want, i, t.test.dtype())) continue;
      if (++failures <= 5) {
        std::ostringstream g, w;
        for (size_t b = width; b-- > 0;) {
          g << std::hex << static_cast<int>(got[i * width + b]) << ' ';
          w << std::hex << static_cast<int>(want[i * width + b]) << ' ';
        }
        ADD_FAILURE() << what << " element " << i << ": " << GetParam() << " gives bytes "
                      << g.str() << "but cpu gives " << w.str();
      }
    }
    EXPECT_EQ(failures, 0) << what << ": " << failures << " elements differ";
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Backend> reference_;
};

// ---- memory, copies and streams ---------------------------------------------

TEST_P(BackendParityTest, CopiesMoveBytesBetweenPoolsAndStreams) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Twin device = make_random({1000}, dtype, 1);
    // The bytes as encoded on the host: the CPU reference holds them as given.
    const std::vector<uint8_t> bytes = read_raw(*reference_, device.ref);
    Backend& b = *backend_;
    const Tensor host = b.empty({1000}, dtype, MemoryCategory::kMasterParams, MemoryPool::kHost);
    const Tensor back = b.empty({10, 100}, dtype, MemoryCategory::kParams);
    // device -> host on the transfer stream after the compute stream's work,
    // then host -> device on the compute stream after the transfer.
    const std::unique_ptr<Event> produced = b.record_event(StreamKind::kCompute);
    b.wait_event(StreamKind::kTransfer, *produced);
    b.copy(host, device.test, StreamKind::kTransfer);
    const std::unique_ptr<Event> offloaded = b.record_event(StreamKind::kTransfer);
    b.wait_event(StreamKind::kCompute, *offloaded);
    b.copy(back.reshape({1000}), host, StreamKind::kCompute);
    b.synchronize();
    EXPECT_EQ(read_raw(b, back), bytes);
    EXPECT_EQ(read_raw(b, host), bytes);
  }
}

TEST_P(BackendParityTest, CastIsBitExactForEveryFormatPair) {
  for (DType from : kAllFloatFormats) {
    const std::vector<uint8_t> bytes = cast_source(from);
    const int64_t n = static_cast<int64_t>(bytes.size() / dtype_size(from));
    const Twin src = make_raw({n}, from, bytes);
    for (DType to : kAllFloatFormats) {
      const std::string what = std::string("cast ") + dtype_name(from) + " -> " + dtype_name(to);
      SCOPED_TRACE(what);
      const Twin dst{backend_->empty({n}, to, MemoryCategory::kActivations),
                     reference_->empty({n}, to, MemoryCategory::kActivations)};
      run_both([&](Backend& b, Side s) { b.cast(dst.*s, src.*s); });
      expect_bit_equal(dst, what);
    }
  }
}

TEST_P(BackendParityTest, FillAndSetZeroWriteEveryElement) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Twin t = make_random({3, 77}, dtype, 2);
    run_both([&](Backend& b, Side s) { b.fill(t.*s, 0.3f); });
    expect_bit_equal(t, "fill");
    run_both([&](Backend& b, Side s) { b.set_zero(t.*s); });
    expect_bit_equal(t, "set_zero");
    EXPECT_EQ(values_of(*backend_, t.test), std::vector<double>(3 * 77, 0.0));
  }
  const Twin ids = make_ids({5}, {1, 2, 3, 4, 5});
  run_both([&](Backend& b, Side s) { b.set_zero(ids.*s); });
  expect_bit_equal(ids, "set_zero int32");
}

// zeros() on the host pool is what offload's CPU optimizer reads next, with
// no synchronize in between: it must be done on return even while the
// compute stream is busy (GEMMs queued just before; on a GPU the memset
// alone, 4 MiB over PCIe, takes longer than the host needs to read it).
TEST_P(BackendParityTest, ZerosOnTheHostPoolAreDoneOnReturn) {
  const Tensor a = make_tensor(*backend_, {256, 256}, DType::kF32, random_values(256 * 256, 9));
  const Tensor c = backend_->empty({256, 256}, DType::kF32, MemoryCategory::kActivations);
  const std::vector<float> ones(1 << 20, 1.0f);
  for (int round = 0; round < 3; ++round) {
    const Tensor host = backend_->empty({1 << 20}, DType::kF32, MemoryCategory::kOptimizerState,
                                        MemoryPool::kHost);
    std::memcpy(host.data(), ones.data(), host.nbytes());
    for (int i = 0; i < 4; ++i) backend_->matmul(c, a, a);
    backend_->set_zero(host);
    const float* read = host.data_as<float>();
    EXPECT_EQ(std::count(read, read + (1 << 20), 0.0f), 1 << 20) << "round " << round;
  }
  backend_->synchronize();
}

TEST_P(BackendParityTest, AddSameAndMixedDtypesAndInPlace) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Twin a = make_random({4, 33}, dtype, 3);
    const Twin b = make_random({4, 33}, dtype, 4);
    const Twin out = make_random({4, 33}, dtype, 5);
    run_both([&](Backend& be, Side s) { be.add(out.*s, a.*s, b.*s); });
    expect_close(out, parity_tolerance(dtype), "add");
    run_both([&](Backend& be, Side s) { be.add(a.*s, a.*s, b.*s); });
    expect_close(a, parity_tolerance(dtype), "add in place");
  }
  const Twin a = make_random({132}, DType::kF32, 6);
  const Twin b = make_random({132}, DType::kF16, 7);
  const Twin out = make_random({132}, DType::kBF16, 8);
  run_both([&](Backend& be, Side s) { be.add(out.*s, a.*s, b.*s); });
  expect_close(out, parity_tolerance(DType::kBF16), "add fp32 + fp16 -> bf16");
}

// ---- GEMM -------------------------------------------------------------------

struct MatmulCase {
  DType ab;
  DType c;
};

TEST_P(BackendParityTest, MatmulEveryLayoutBiasBetaGeluAndDtype) {
  const MatmulCase cases[] = {{DType::kF32, DType::kF32},  {DType::kBF16, DType::kBF16},
                              {DType::kF16, DType::kF16},  {DType::kBF16, DType::kF32},
                              {DType::kF16, DType::kF32},  {DType::kBF16, DType::kF16},
                              {DType::kF32, DType::kBF16}, {DType::kF16, DType::kBF16}};
  const int64_t m = 13, k = 37, n = 19;
  uint32_t seed = 100;
  for (const MatmulCase& mc : cases) {
    for (int layout = 0; layout < 4; ++layout) {
      for (int variant = 0; variant < 3; ++variant) {  // plain, bias, bias + beta=1
        const bool trans_a = layout & 1, trans_b = layout & 2;
        std::ostringstream what;
        what << "matmul " << dtype_name(mc.ab) << "->" << dtype_name(mc.c) << " trans_a "
             << trans_a << " trans_b " << trans_b << " variant " << variant;
        SCOPED_TRACE(what.str());
        const Twin a = make_random(trans_a ? Shape{k, m} : Shape{m, k}, mc.ab, ++seed);
        const Twin b = make_random(trans_b ? Shape{n, k} : Shape{k, n}, mc.ab, ++seed);
        const Twin c = make_random({m, n}, mc.c, ++seed);
        const Twin bias = make_random({n}, mc.c, ++seed);
        run_both([&](Backend& be, Side s) {
          MatmulOptions options;
          options.trans_a = trans_a;
          options.trans_b = trans_b;
          options.alpha = 0.75f;
          if (variant >= 1) options.bias = &(bias.*s);
          if (variant == 2) options.beta = 1.0f;
          be.matmul(c.*s, a.*s, b.*s, options);
        });
        expect_close(c, loosest({mc.ab, mc.c}), what.str());
      }
    }
  }
  // A linear layer of 16-byte rows: its bias and GELU, and its bias
  // gradient, fused into cuBLASLt's epilogue on CUDA (C keeps the
  // pre-activation).
  const int64_t rows = 24, in = 40, out = 32;
  for (DType dtype : kFloatTypes) {
    for (int layout = 0; layout < 4; ++layout) {
      for (int variant = 0; variant < 4; ++variant) {  // bias, bias + GELU, GELU, bias + beta
        const bool trans_a = layout & 1, trans_b = layout & 2;
        std::ostringstream what;
        what << "linear " << dtype_name(dtype) << " trans_a " << trans_a << " trans_b "
             << trans_b << " variant " << variant;
        SCOPED_TRACE(what.str());
        const Twin a = make_random(trans_a ? Shape{in, rows} : Shape{rows, in}, dtype, ++seed);
        const Twin b = make_random(trans_b ? Shape{out, in} : Shape{in, out}, dtype, ++seed);
        const Twin c = make_random({rows, out}, dtype, ++seed);
        const Twin gelu = make_random({rows, out}, dtype, ++seed);
        const Twin bias = make_random({out}, dtype, ++seed);
        run_both([&](Backend& be, Side s) {
          MatmulOptions options;
          options.trans_a = trans_a;
          options.trans_b = trans_b;
          if (variant != 2) options.bias = &(bias.*s);
          if (variant == 1 || variant == 2) options.gelu_out = &(gelu.*s);
          if (variant == 3) options.beta = 1.0f;
          be.matmul(c.*s, a.*s, b.*s, options);
        });
        expect_close(c, parity_tolerance(dtype), what.str());
        if (variant == 1 || variant == 2) expect_close(gelu, parity_tolerance(dtype), what.str());
      }
    }
    // Its weight gradient, accumulated, with the bias gradient beside it.
    SCOPED_TRACE(std::string("linear backward ") + dtype_name(dtype));
    const Twin dout = make_random({rows, out}, dtype, ++seed);
    const Twin x = make_random({rows, in}, dtype, ++seed);
    const Twin dw = make_random({out, in}, dtype, ++seed);
    const Twin db = make_random({out}, dtype, ++seed);
    run_both([&](Backend& be, Side s) {
      MatmulOptions options;
      options.trans_a = true;
      options.beta = 1.0f;
      options.bias_grad = &(db.*s);
      be.matmul(dw.*s, dout.*s, x.*s, options);
    });
    expect_close(dw, parity_tolerance(dtype), "dW");
    // On CUDA the sums are rounded to the dtype once before the addition.
    const Tolerance once = parity_tolerance(dtype);
    expect_close(db, {2 * once.rtol, 2 * once.atol}, "db");
  }
  // Weights are views into a flat parameter buffer at multiples of their
  // row length: with GPT-2 XL's 1600 columns in bf16 every other one is
  // only 128-byte aligned, which cuBLASLt must be told (issue 31).
  {
    const int64_t xl_rows = 8, xl_in = 1600, xl_out = 16;
    const Twin x = make_random({xl_rows, xl_in}, DType::kBF16, ++seed);
    const Twin flat = make_random({xl_out * xl_in + xl_in}, DType::kBF16, ++seed);
    const Twin bias = make_random({xl_out}, DType::kBF16, ++seed);
    for (const int64_t offset : {int64_t{0}, xl_in}) {
      SCOPED_TRACE("linear on a weight view at element " + std::to_string(offset));
      const Twin y = make_random({xl_rows, xl_out}, DType::kBF16, ++seed);
      run_both([&](Backend& be, Side s) {
        MatmulOptions options;
        options.trans_b = true;
        options.bias = &(bias.*s);
        be.matmul(y.*s, x.*s, (flat.*s).view(offset, {xl_out, xl_in}), options);
      });
      expect_close(y, parity_tolerance(DType::kBF16), "weight view");
    }
  }
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(std::string("batched ") + dtype_name(dtype));
    const Twin a = make_random({3, k, m}, dtype, ++seed);
    const Twin b = make_random({3, k, n}, dtype, ++seed);
    const Twin c = make_random({3, m, n}, dtype, ++seed);
    run_both([&](Backend& be, Side s) {
      MatmulOptions options;
      options.trans_a = true;
      options.beta = 0.5f;
      be.matmul(c.*s, a.*s, b.*s, options);
    });
    expect_close(c, parity_tolerance(dtype), "batched matmul");
  }
}

TEST_P(BackendParityTest, BiasBackwardAddsColumnSums) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Twin dout = make_random({2, 150, 19}, dtype, 11);
    const Twin dbias = make_random({19}, dtype, 12);
    run_both([&](Backend& b, Side s) { b.bias_backward(dbias.*s, dout.*s); });
    expect_close(dbias, parity_tolerance(dtype), "bias_backward");
  }
}

// ---- GPT layers ---------------------------------------------------------------

TEST_P(BackendParityTest, EmbeddingForwardAndDeterministicBackward) {
  const int64_t vocab = 11, channels = 40, rows = 64;
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Twin ids = make_ids({2, rows / 2}, random_ids(rows, 21, vocab));
    const Twin table = make_random({vocab, channels}, dtype, 22);
    const Twin out = make_random({2, rows / 2, channels}, dtype, 23);
    run_both([&](Backend& b, Side s) { b.embedding_forward(out.*s, ids.*s, table.*s, false); });
    expect_close(out, parity_tolerance(dtype), "embedding_forward");
    run_both([&](Backend& b, Side s) { b.embedding_forward(out.*s, ids.*s, table.*s, true); });
    expect_close(out, parity_tolerance(dtype), "embedding_forward accumulate");

    const std::vector<double> initial = random_values(vocab * channels, 24);
    const Twin dtable = make({vocab, channels}, dtype, initial);
    const Twin dout = make_random({rows, channels}, dtype, 25);
    run_both([&](Backend& b, Side s) { b.embedding_backward(dtable.*s, dout.*s, ids.*s); });
    expect_close(dtable, parity_tolerance(dtype), "embedding_backward");
    // The same inputs again give the same bits (no atomics order).
    const Twin again = make({vocab, channels}, dtype, initial);
    backend_->embedding_backward(again.test, dout.test, ids.test);
    EXPECT_EQ(read_raw(*backend_, again.test), read_raw(*backend_, dtable.test))
        << "embedding_backward is not deterministic";
  }
}

TEST_P(BackendParityTest, LayerNormForwardAndBackward) {
  const int64_t rows = 10, channels = 70;
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Twin inp = make_random({2, rows / 2, channels}, dtype, 31, -2.0f, 3.0f);
    const Twin weight = make_random({channels}, dtype, 32, 0.5f, 1.5f);
    const Twin bias = make_random({channels}, dtype, 33);
    const Twin out = make_random({2, rows / 2, channels}, dtype, 34);
    const Twin mean = make_random({rows}, DType::kF32, 35);
    const Twin rstd = make_random({rows}, DType::kF32, 36);
    run_both([&](Backend& b, Side s) {
      b.layernorm_forward(out.*s, mean.*s, rstd.*s, inp.*s, weight.*s, bias.*s, 1e-5f);
    });
    expect_close(out, parity_tolerance(dtype), "layernorm_forward out");
    expect_close(mean, parity_tolerance(DType::kF32), "layernorm_forward mean");
    expect_close(rstd, parity_tolerance(DType::kF32), "layernorm_forward rstd");

    const Twin dout = make_random({2, rows / 2, channels}, dtype, 37);
    const Twin dinp = make_random({2, rows / 2, channels}, dtype, 38);
    const Twin dweight = make_random({channels}, dtype, 39);
    const Twin dbias = make_random({channels}, dtype, 40);
    run_both([&](Backend& b, Side s) {
      b.layernorm_backward(dinp.*s, dweight.*s, dbias.*s, dout.*s, inp.*s, weight.*s, mean.*s,
                           rstd.*s);
    });
    expect_close(dinp, parity_tolerance(dtype), "layernorm_backward dinp");
    expect_close(dweight, parity_tolerance(dtype), "layernorm_backward dweight");
    expect_close(dbias, parity_tolerance(dtype), "layernorm_backward dbias");
  }
}

TEST_P(BackendParityTest, RmsNormForwardAndBackward) {
  const int64_t rows = 10, channels = 70;
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Twin inp = make_random({2, rows / 2, channels}, dtype, 131, -2.0f, 3.0f);
    const Twin weight = make_random({channels}, dtype, 132, 0.5f, 1.5f);
    const Twin out = make_random({2, rows / 2, channels}, dtype, 134);
    const Twin rstd = make_random({rows}, DType::kF32, 136);
    run_both([&](Backend& b, Side s) { b.rmsnorm_forward(out.*s, rstd.*s, inp.*s, weight.*s); });
    expect_close(out, parity_tolerance(dtype), "rmsnorm_forward out");
    expect_close(rstd, parity_tolerance(DType::kF32), "rmsnorm_forward rstd");

    const Twin dout = make_random({2, rows / 2, channels}, dtype, 137);
    const Twin dinp = make_random({2, rows / 2, channels}, dtype, 138);
    const Twin dweight = make_random({channels}, dtype, 139);
    run_both([&](Backend& b, Side s) {
      b.rmsnorm_backward(dinp.*s, dweight.*s, dout.*s, inp.*s, weight.*s, rstd.*s);
    });
    expect_close(dinp, parity_tolerance(dtype), "rmsnorm_backward dinp");
    expect_close(dweight, parity_tolerance(dtype), "rmsnorm_backward dweight");
  }
}

TEST_P(BackendParityTest, RopeForwardInPlaceAndBackward) {
  const Shape shape{2, 7, 3, 10};
  std::vector<double> freqs;
  for (int t = 0; t < 9; ++t)
    for (int i = 0; i < 5; ++i) {
      const double angle = t * std::pow(10000.0, -2.0 * i / 10);
      freqs.push_back(std::cos(angle));
      freqs.push_back(std::sin(angle));
    }
  const Twin table = make({9, 5, 2}, DType::kF32, freqs);
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Twin inp = make_random(shape, dtype, 141, -2.0f, 2.0f);
    const Twin out = make_random(shape, dtype, 142);
    run_both([&](Backend& b, Side s) { b.rope_forward(out.*s, inp.*s, table.*s); });
    expect_close(out, parity_tolerance(dtype), "rope_forward out");
    run_both([&](Backend& b, Side s) { b.rope_forward(inp.*s, inp.*s, table.*s); });
    expect_close(inp, parity_tolerance(dtype), "rope_forward in place");
    const Twin dinp = make_random(shape, dtype, 143);
    run_both([&](Backend& b, Side s) { b.rope_backward(dinp.*s, out.*s, table.*s); });
    expect_close(dinp, parity_tolerance(dtype), "rope_backward dinp");
  }
}

TEST_P(BackendParityTest, GeluForwardAndBackward) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Twin inp = make_random({5, 61}, dtype, 41, -6.0f, 6.0f);
    const Twin out = make_random({5, 61}, dtype, 42);
    run_both([&](Backend& b, Side s) { b.gelu_forward(out.*s, inp.*s); });
    expect_close(out, parity_tolerance(dtype), "gelu_forward");
    const Twin dout = make_random({5, 61}, dtype, 43);
    const Twin dinp = make_random({5, 61}, dtype, 44);
    run_both([&](Backend& b, Side s) { b.gelu_backward(dinp.*s, dout.*s, inp.*s); });
    expect_close(dinp, parity_tolerance(dtype), "gelu_backward");
  }
}

struct AttentionCase {
  int64_t batch, seq, channels;
  int heads;
  DType qkv, att;
};

TEST_P(BackendParityTest, AttentionForwardAndBackward) {
  // seq 40 spans more than one warp's 32 lanes per row on the GPU.
  const AttentionCase cases[] = {{2, 7, 12, 3, DType::kF32, DType::kF32},
                                 {2, 40, 16, 2, DType::kF32, DType::kF32},
                                 {2, 40, 16, 2, DType::kBF16, DType::kBF16},
                                 {2, 40, 16, 2, DType::kF16, DType::kF16},
                                 {1, 9, 8, 2, DType::kBF16, DType::kF32}};
  uint32_t seed = 50;
  for (const AttentionCase& ac : cases) {
    std::ostringstream what;
    what << "attention B " << ac.batch << " T " << ac.seq << " C " << ac.channels << " NH "
         << ac.heads << " qkv " << dtype_name(ac.qkv) << " att " << dtype_name(ac.att);
    SCOPED_TRACE(what.str());
    const int64_t B = ac.batch, T = ac.seq, C = ac.channels, NH = ac.heads;
    const Tolerance tol = loosest({ac.qkv, ac.att});
    const Twin qkv = make_random({B, T, 3 * C}, ac.qkv, ++seed);
    const Twin out = make_random({B, T, C}, ac.qkv, ++seed);
    const Twin att = make_random({B, NH, T, T}, ac.att, ++seed);
    run_both([&](Backend& b, Side s) { b.attention_forward(out.*s, att.*s, qkv.*s, ac.heads); });
    expect_close(att, tol, what.str() + " att");
    expect_close(out, tol, what.str() + " out");
    const Twin dout = make_random({B, T, C}, ac.qkv, ++seed);
    const Twin dqkv = make_random({B, T, 3 * C}, ac.qkv, ++seed);
    run_both([&](Backend& b, Side s) {
      b.attention_backward(dqkv.*s, dout.*s, qkv.*s, att.*s, ac.heads);
    });
    expect_close(dqkv, tol, what.str() + " dqkv");
  }
}

// Unscaled fp16 gradients: dout ~1e-5 makes the score gradient dS ~1e-6,
// where fp16 has only subnormals 6e-8 apart. The CPU keeps dS in fp32; a
// backend rounding it to fp16 is ~5% off in dq (q is small and k large, so
// dq lands in fp16's normal range and is written to fp32 dqkv, which
// leaves dS as the only rounding that differs).
TEST_P(BackendParityTest, AttentionBackwardKeepsTinyFp16ScoreGradients) {
  const int64_t B = 1, T = 40, C = 16;
  const int heads = 2;
  std::vector<double> qkv_values = random_values(B * T * 3 * C, 71, -1.0f, 1.0f);
  for (int64_t i = 0; i < B * T * 3 * C; ++i) {
    const int64_t part = (i % (3 * C)) / C;  // 0 q, 1 k, 2 v
    qkv_values[i] *= part == 0 ? 1e-2 : part == 1 ? 30.0 : 1.0;
  }
  const Twin qkv = make({B, T, 3 * C}, DType::kF16, qkv_values);
  const Twin out = make_random({B, T, C}, DType::kF16, 72);
  const Twin att = make_random({B, heads, T, T}, DType::kF16, 73);
  run_both([&](Backend& b, Side s) { b.attention_forward(out.*s, att.*s, qkv.*s, heads); });
  const Twin dout = make_random({B, T, C}, DType::kF16, 74, -1e-5f, 1e-5f);
  const Twin dqkv = make({B, T, 3 * C}, DType::kF32, std::vector<double>(B * T * 3 * C, 0.0));
  run_both([&](Backend& b, Side s) {
    b.attention_backward(dqkv.*s, dout.*s, qkv.*s, att.*s, heads);
  });
  expect_close(dqkv, parity_tolerance(DType::kF16), "dqkv");
}

TEST_P(BackendParityTest, SoftmaxCrossEntropyLossAndGradient) {
  const int64_t rows = 6, vocab = 100;
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Twin logits = make_random({2, rows / 2, vocab}, dtype, 61, -4.0f, 4.0f);
    const Twin targets = make_ids({rows}, random_ids(rows, 62, vocab));
    const Twin losses = make_random({rows}, DType::kF32, 63);
    const Twin dlogits = make_random({rows, vocab}, dtype, 64);
    run_both([&](Backend& b, Side s) {
      b.softmax_cross_entropy(losses.*s, nullptr, logits.*s, targets.*s, 1.0f);
    });
    expect_close(losses, parity_tolerance(dtype), "losses without gradient");
    run_both([&](Backend& b, Side s) {
      const Tensor d = dlogits.*s;
      b.softmax_cross_entropy(losses.*s, &d, logits.*s, targets.*s, 0.25f);
    });
    expect_close(losses, parity_tolerance(dtype), "losses");
    expect_close(dlogits, parity_tolerance(dtype), "dlogits");
    // In place: the gradient overwrites the logits it is computed from.
    run_both([&](Backend& b, Side s) {
      const Tensor l = logits.*s;
      b.softmax_cross_entropy(losses.*s, &l, l, targets.*s, 0.25f);
    });
    expect_close(logits, parity_tolerance(dtype), "dlogits in place");
  }
}

// A vocabulary padded to 128 columns with 100 real classes: the padding
// is left out of the softmax (the losses are those of the 100 columns
// alone) and its gradient is zero.
TEST_P(BackendParityTest, SoftmaxCrossEntropyLeavesOutAPaddedVocabulary) {
  const int64_t rows = 5, padded = 128, classes = 100;
  const std::vector<double> values = random_values(rows * padded, 65, -4.0f, 4.0f);
  std::vector<double> unpadded;
  for (int64_t r = 0; r < rows; ++r)
    unpadded.insert(unpadded.end(), values.begin() + r * padded,
                    values.begin() + r * padded + classes);
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Twin logits = make({rows, padded}, dtype, values);
    const Twin alone = make({rows, classes}, dtype, unpadded);
    const Twin targets = make_ids({rows}, random_ids(rows, 66, classes));
    const Twin losses = make_random({rows}, DType::kF32, 67);
    const Twin losses_alone = make_random({rows}, DType::kF32, 68);
    run_both([&](Backend& b, Side s) {
      const Tensor l = logits.*s;
      b.softmax_cross_entropy(losses.*s, &l, l, targets.*s, 0.5f, classes);
      const Tensor a = alone.*s;
      b.softmax_cross_entropy(losses_alone.*s, &a, a, targets.*s, 0.5f);
    });
    expect_close(losses, parity_tolerance(dtype), "losses");
    expect_close(logits, parity_tolerance(dtype), "dlogits");
    const std::vector<double> padded_loss = values_of(*backend_, losses.test);
    const std::vector<double> alone_loss = values_of(*backend_, losses_alone.test);
    const std::vector<double> gradient = values_of(*backend_, logits.test);
    const std::vector<double> alone_gradient = values_of(*backend_, alone.test);
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_NEAR(padded_loss[r], alone_loss[r], 1e-6 * std::fabs(alone_loss[r])) << r;
      for (int64_t j = 0; j < padded; ++j) {
        const double g = gradient[r * padded + j];
        if (j >= classes) {
          EXPECT_EQ(g, 0.0) << r << ", " << j;
        } else {
          EXPECT_NEAR(g, alone_gradient[r * classes + j], 1e-6) << r << ", " << j;
        }
      }
    }
  }
  Tensor losses = backend_->empty({1}, DType::kF32, MemoryCategory::kActivations);
  const Twin logits = make_random({1, 8}, DType::kF32, 69);
  const Twin target = make_ids({1}, {6});
  EXPECT_TRUE(throws_invalid_argument(
      [&] { backend_->softmax_cross_entropy(losses, nullptr, logits.test, target.test, 1.0f, 9); },
      {"classes 9", "8 columns"}));
}

// ---- optimizer and mixed precision --------------------------------------------

TEST_P(BackendParityTest, AdamWUpdatesMasterMomentsAndParams) {
  const int64_t n = 1000;
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Twin master = make_random({n}, DType::kF32, 71);
    const Twin m = make_random({n}, DType::kF32, 72, -0.1f, 0.1f);
    const Twin v = make_random({n}, DType::kF32, 73, 0.0f, 0.01f);
    const Twin grad = make_random({n}, dtype, 74);
    const Twin param = make_random({n}, dtype, 75);
    AdamWConfig config;
    config.lr = 1e-2f;
    config.beta1 = 0.9f;
    config.beta2 = 0.95f;
    config.weight_decay = 0.1f;
    config.step = 3;
    config.grad_scale = 0.5f;
    run_both([&](Backend& b, Side s) {
      const Tensor p = param.*s;
      b.adamw_update(master.*s, m.*s, v.*s, grad.*s, config, &p);
    });
    expect_close(master, parity_tolerance(DType::kF32), "master");
    expect_close(m, parity_tolerance(DType::kF32), "m");
    expect_close(v, parity_tolerance(DType::kF32), "v");
    expect_close(param, parity_tolerance(dtype), "param_out");
    config.step = 4;
    run_both([&](Backend& b, Side s) {
      b.adamw_update(master.*s, m.*s, v.*s, grad.*s, config, nullptr);
    });
    expect_close(master, parity_tolerance(DType::kF32), "master without param_out");
  }
}

TEST_P(BackendParityTest, SumSquaresAccumulatesInDouble) {
  const Twin a = make_random({1000}, DType::kF32, 81, -3.0f, 3.0f);
  const Twin b = make_random({333}, DType::kBF16, 82);
  const Twin c = make_random({7, 11}, DType::kF16, 83);
  const Twin empty = make({0}, DType::kF32, {});
  const std::vector<Tensor> test = {a.test, b.test, empty.test, c.test};
  const std::vector<Tensor> ref = {a.ref, b.ref, empty.ref, c.ref};
  const double got = backend_->sum_squares(test);
  const double want = reference_->sum_squares(ref);
  double exact = 0.0;
  for (const Twin* t : {&a, &b, &c}) {
    for (double x : values_of(*reference_, t->ref)) exact += x * x;
  }
  EXPECT_NEAR(got, want, 1e-12 * want);
  EXPECT_NEAR(want, exact, 1e-12 * exact);
  EXPECT_EQ(backend_->sum_squares(test), got) << "sum_squares is not deterministic";
  EXPECT_EQ(backend_->sum_squares({}), 0.0);
}

TEST_P(BackendParityTest, UnscaleAndCheckFindsTheFirstNonFiniteTensor) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    const char* name;
    float inv_scale;
    int bad_tensor;     // -1: all finite
    int64_t first_at;   // index of the first non-finite element there
    float first_value;  // inf or NaN
    int64_t second_at;  // a later one of the other kind
  };
  const Case cases[] = {{"all finite", 0.5f, -1, 0, 0.0f, 0},
                        {"inf before nan", 0.5f, 1, 5, inf, 9},
                        {"nan before inf", 0.25f, 1, 3, nan, 7},
                        {"nan in the last tensor", 1.0f, 2, 0, nan, 4}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<Twin> twins;
    const DType dtypes[] = {DType::kF32, DType::kBF16, DType::kF16};
    for (int t = 0; t < 3; ++t) {
      std::vector<double> values = random_values(100 + t, 90 + t, -4.0f, 4.0f);
      if (t == c.bad_tensor) {
        values[c.first_at] = c.first_value;
        values[c.second_at] = std::isnan(c.first_value) ? -inf : nan;
      }
      // A later tensor with a NaN must not change the answer.
      if (c.bad_tensor >= 0 && t > c.bad_tensor) values[1] = nan;
      twins.push_back(make({static_cast<int64_t>(values.size())}, dtypes[t], values));
    }
    std::vector<Tensor> test, ref;
    for (const Twin& t : twins) {
      test.push_back(t.test);
      ref.push_back(t.ref);
    }
    const NonFiniteCheck got = backend_->unscale_and_check(test, c.inv_scale);
    const NonFiniteCheck want = reference_->unscale_and_check(ref, c.inv_scale);
    EXPECT_EQ(want.found, c.bad_tensor >= 0);
    EXPECT_EQ(want.tensor_index, c.bad_tensor);
    EXPECT_EQ(want.is_nan, c.bad_tensor >= 0 && std::isnan(c.first_value));
    EXPECT_EQ(got.found, want.found);
    EXPECT_EQ(got.tensor_index, want.tensor_index);
    EXPECT_EQ(got.is_nan, want.is_nan);
    for (const Twin& t : twins) expect_bit_equal(t, "unscaled values");
  }
  // Scaling up can overflow fp16: the check looks at the stored result.
  const Twin big = make({4}, DType::kF16, {1.0f, 60000.0f, 2.0f, 3.0f});
  const NonFiniteCheck got = backend_->unscale_and_check({&big.test, 1}, 2.0f);
  EXPECT_TRUE(got.found);
  EXPECT_EQ(got.tensor_index, 0);
  EXPECT_FALSE(got.is_nan);
}

// ---- fp8 ----------------------------------------------------------------------

// Values over many binades, with outliers past E4M3's range at the scale
// used, a NaN and an infinity: what the quantizers must count and skip.
std::vector<double> fp8_source(size_t n, uint32_t seed) {
  std::vector<double> values = random_values(n, seed, -1.0f, 1.0f);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> exponent(-30, 6);
  for (size_t i = 0; i < n; ++i) values[i] = std::ldexp(values[i], exponent(rng));
  values[3] = 200.0;
  values[n / 2] = -75.0;
  return values;
}

TEST_P(BackendParityTest, QuantizeFp8IsBitExactWithAmaxAndSaturations) {
  for (DType src_dtype : kFloatTypes) {
    std::vector<double> values = fp8_source(70001, 101);
    values[17] = std::numeric_limits<double>::quiet_NaN();
    values[18] = -std::numeric_limits<double>::infinity();
    const Twin src = make({70001}, src_dtype, values);
    for (DType fp8 : {DType::kFP8E4M3, DType::kFP8E5M2}) {
      const std::string what =
          std::string("quantize_fp8 ") + dtype_name(src_dtype) + " -> " + dtype_name(fp8);
      SCOPED_TRACE(what);
      const Twin codes{backend_->empty({70001}, fp8, MemoryCategory::kWorkspace),
                       reference_->empty({70001}, fp8, MemoryCategory::kWorkspace)};
      const Fp8QuantizeStats got = backend_->quantize_fp8(codes.test, src.test, 3.0f);
      const Fp8QuantizeStats want = reference_->quantize_fp8(codes.ref, src.ref, 3.0f);
      expect_bit_equal(codes, what);
      EXPECT_EQ(got.amax, want.amax);
      EXPECT_EQ(got.saturated, want.saturated);
      EXPECT_EQ(want.amax, std::numeric_limits<float>::infinity());
      EXPECT_EQ(want.saturated, fp8 == DType::kFP8E4M3 ? 2 : 1);  // 600 and -inf; -inf
    }
    // Folded into a slot without waiting: two quantizations into slot 1
    // of three read back as their amaxes' max and saturations' sum.
    const Twin codes{backend_->empty({70001}, DType::kFP8E4M3, MemoryCategory::kWorkspace),
                     reference_->empty({70001}, DType::kFP8E4M3, MemoryCategory::kWorkspace)};
    const Tensor stats = backend_->fp8_stats_tensor(3);
    backend_->quantize_fp8_into(codes.test, src.test, 3.0f, stats, 1);
    const Fp8QuantizeStats first = reference_->quantize_fp8(codes.ref, src.ref, 3.0f);
    backend_->quantize_fp8_into(codes.test, src.test, 100.0f, stats, 1);
    const Fp8QuantizeStats second = reference_->quantize_fp8(codes.ref, src.ref, 100.0f);
    expect_bit_equal(codes, "quantize_fp8_into");
    const std::vector<Fp8QuantizeStats> slots = backend_->read_fp8_stats(stats);
    ASSERT_EQ(slots.size(), 3u);
    EXPECT_EQ(slots[1].amax, std::max(first.amax, second.amax));
    EXPECT_EQ(slots[1].saturated, first.saturated + second.saturated);
    EXPECT_GT(second.saturated, first.saturated);
    for (size_t i : {size_t{0}, size_t{2}}) {
      EXPECT_EQ(slots[i].amax, 0.0f);
      EXPECT_EQ(slots[i].saturated, 0);
    }
    EXPECT_THROW(backend_->quantize_fp8_into(codes.test, src.test, 1.0f, stats, 3), EngineError);
    values[18] = 0.0;
    const Twin finite = make({70001}, src_dtype, values);
    EXPECT_EQ(backend_->amax(finite.test), reference_->amax(finite.ref));
    EXPECT_EQ(reference_->amax(finite.ref), 200.0f);
  }
}

TEST_P(BackendParityTest, MxQuantizeAndDequantizeAreBitExactAlongBothAxes) {
  // 70 x 45: both axes end in a short block.
  std::vector<double> values = fp8_source(70 * 45, 102);
  values[100] = std::numeric_limits<double>::quiet_NaN();
  for (DType src_dtype : {DType::kF32, DType::kBF16}) {
    const Twin src = make({70, 45}, src_dtype, values);
    for (DType fp8 : {DType::kFP8E4M3, DType::kFP8E5M2}) {
      for (MxAxis axis : {MxAxis::kAlongRows, MxAxis::kAlongColumns}) {
        const std::string what = std::string("mx_quantize ") + dtype_name(src_dtype) + " -> " +
                                 dtype_name(fp8) +
                                 (axis == MxAxis::kAlongRows ? " along rows" : " along columns");
        SCOPED_TRACE(what);
        const int64_t blocks = mx_scale_count(70, 45, axis);
        const Twin codes{backend_->empty({70, 45}, fp8, MemoryCategory::kWorkspace),
                         reference_->empty({70, 45}, fp8, MemoryCategory::kWorkspace)};
        const Twin scales{backend_->empty({blocks}, DType::kE8M0, MemoryCategory::kWorkspace),
                          reference_->empty({blocks}, DType::kE8M0, MemoryCategory::kWorkspace)};
        int64_t got = 0, want = 0;
        run_both([&](Backend& b, Side s) {
          (s == &Twin::test ? got : want) = b.mx_quantize(codes.*s, scales.*s, src.*s, axis);
        });
        expect_bit_equal(codes, what + " codes");
        expect_bit_equal(scales, what + " scales");
        EXPECT_EQ(got, want);
        for (DType out : kFloatTypes) {
          const Twin back{backend_->empty({70, 45}, out, MemoryCategory::kWorkspace),
                          reference_->empty({70, 45}, out, MemoryCategory::kWorkspace)};
          run_both([&](Backend& b, Side s) {
            b.dequantize_fp8(back.*s, {codes.*s, 1.0f, scales.*s, axis});
          });
          expect_bit_equal(back, what + " dequantized");
          run_both([&](Backend& b, Side s) { b.dequantize_fp8(back.*s, {codes.*s, 6.5f}); });
          expect_bit_equal(back, what + " dequantized per tensor");
        }
      }
    }
  }
}

TEST_P(BackendParityTest, MatmulFp8PerTensorAndMxEveryLayout) {
  const int64_t m = 48, k = 96, n = 40;
  for (bool mx : {false, true}) {
    for (bool trans_a : {false, true}) {
      for (bool trans_b : {false, true}) {
        const std::string what = std::string(mx ? "mx" : "per tensor") + (trans_a ? " A^T" : " A") +
                                 (trans_b ? " B^T" : " B");
        SCOPED_TRACE(what);
        const Shape a_shape = trans_a ? Shape{k, m} : Shape{m, k};
        const Shape b_shape = trans_b ? Shape{n, k} : Shape{k, n};
        const Twin a_src = make_random(a_shape, DType::kBF16, 103, -4.0f, 4.0f);
        const Twin b_src = make_random(b_shape, DType::kBF16, 104, -0.5f, 0.5f);
        const MxAxis a_axis = trans_a ? MxAxis::kAlongColumns : MxAxis::kAlongRows;
        const MxAxis b_axis = trans_b ? MxAxis::kAlongRows : MxAxis::kAlongColumns;
        const Twin bias = make_random({n}, DType::kBF16, 105);
        const Twin c = make_random({m, n}, DType::kBF16, 106);
        run_both([&](Backend& be, Side s) {
          auto operand = [&](const Tensor& src, DType fp8, MxAxis axis, float scale) {
            Fp8Operand op{be.empty(src.shape(), fp8, MemoryCategory::kWorkspace), scale};
            if (mx) {
              op.block_scales = be.empty({mx_scale_count(src.dim(0), src.dim(1), axis)},
                                         DType::kE8M0, MemoryCategory::kWorkspace);
              op.block_axis = axis;
              be.mx_quantize(op.codes, op.block_scales, src, axis);
            } else {
              be.quantize_fp8(op.codes, src, scale);
            }
            return op;
          };
          const Fp8Operand a = operand(a_src.*s, DType::kFP8E4M3, a_axis, 100.0f);
          const Fp8Operand b = operand(b_src.*s, DType::kFP8E5M2, b_axis, 1000.0f);
          MatmulOptions options;
          options.trans_a = trans_a;
          options.trans_b = trans_b;
          options.bias = &(bias.*s);
          options.beta = 0.5f;
          be.matmul_fp8(c.*s, a, b, options);
        });
        expect_close(c, parity_tolerance(DType::kBF16), what);
      }
    }
  }
}

TEST_P(BackendParityTest, MagnitudeHistogramCountsExactly) {
  std::vector<Twin> twins;
  for (DType dtype : kFloatTypes) {
    std::vector<double> values = fp8_source(50000, 110);
    for (size_t i = 0; i < values.size(); i += 97) values[i] *= 1e-9;  // fp16 subnormals
    values[10] = 0.0;
    values[11] = std::numeric_limits<double>::infinity();
    values[12] = std::numeric_limits<double>::quiet_NaN();
    twins.push_back(make({50000}, dtype, values));
  }
  // fp8 codes, counted by their values (E4M3 subnormals below 2^-6, E5M2's
  // below 2^-14).
  for (DType fp8 : {DType::kFP8E4M3, DType::kFP8E5M2}) {
    const Twin codes{backend_->empty({50000}, fp8, MemoryCategory::kWorkspace),
                     reference_->empty({50000}, fp8, MemoryCategory::kWorkspace)};
    backend_->quantize_fp8(codes.test, twins[0].test, 100.0f);
    reference_->quantize_fp8(codes.ref, twins[0].ref, 100.0f);
    twins.push_back(codes);
  }
  std::vector<Tensor> test, ref;
  for (const Twin& t : twins) {
    test.push_back(t.test);
    ref.push_back(t.ref);
  }
  const MagnitudeHistogram got = backend_->magnitude_histogram(test);
  const MagnitudeHistogram want = reference_->magnitude_histogram(ref);
  EXPECT_EQ(got.buckets, want.buckets);
  EXPECT_EQ(got.zeros, want.zeros);
  EXPECT_EQ(got.subnormals, want.subnormals);
  EXPECT_EQ(got.nonfinite, want.nonfinite);
  EXPECT_EQ(got.amax, want.amax);
  EXPECT_EQ(want.total(), 250000);
  EXPECT_GT(want.subnormals, 0);
  EXPECT_EQ(backend_->magnitude_histogram({}).total(), 0);
  const MagnitudeHistogram e4m3 = reference_->magnitude_histogram({&twins[3].ref, 1});
  EXPECT_EQ(backend_->magnitude_histogram({&twins[3].test, 1}), e4m3);
  EXPECT_EQ(e4m3.total(), 50000);
  EXPECT_GT(e4m3.subnormals, 0);
}

// ---- argument checks -----------------------------------------------------------

// One call with a bad argument: what is wrong, and the call on a backend.
struct BadCall {
  const char* what;
  std::function<void(Backend&)> call;
};

// Zeros of `shape` on `b` (valid ids, finite values).
Tensor z(Backend& b, const Shape& shape, DType dtype) {
  return b.zeros(shape, dtype, MemoryCategory::kWorkspace);
}

// At least one bad call for every op, several where an op checks several
// things. Ids are zeros: their values are read only on the host (the CPU
// backend), so an out-of-range id is a CPU-only case of the CPU's own tests.
std::vector<BadCall> bad_calls() {
  constexpr DType f32 = DType::kF32, bf16 = DType::kBF16, i32 = DType::kI32;
  constexpr DType e4m3 = DType::kFP8E4M3;
  std::vector<BadCall> calls = {
      {"copy between dtypes", [](Backend& b) { b.copy(z(b, {4}, f32), z(b, {4}, bf16)); }},
      {"copy between sizes", [](Backend& b) { b.copy(z(b, {4}, f32), z(b, {5}, f32)); }},
      {"cast from int32", [](Backend& b) { b.cast(z(b, {4}, f32), z(b, {4}, i32)); }},
      {"cast between sizes", [](Backend& b) { b.cast(z(b, {4}, bf16), z(b, {3}, f32)); }},
      {"fill int32", [](Backend& b) { b.fill(z(b, {4}, i32), 1.0f); }},
      {"add of other sizes",
       [](Backend& b) { b.add(z(b, {4}, f32), z(b, {4}, f32), z(b, {5}, f32)); }},
      {"add into a shifted view",
       [](Backend& b) {
         const Tensor t = z(b, {8}, f32);
         b.add(t.view(0, {6}), t.view(2, {6}), z(b, {6}, f32));
       }},
      {"matmul inner dimensions",
       [](Backend& b) {
         b.matmul(z(b, {2, 3}, f32), z(b, {2, 4}, f32), z(b, {5, 3}, f32));
       }},
      {"matmul of two dtypes",
       [](Backend& b) {
         b.matmul(z(b, {2, 3}, f32), z(b, {2, 4}, f32), z(b, {4, 3}, bf16));
       }},
      {"matmul 2-D into 3-D",
       [](Backend& b) {
         b.matmul(z(b, {1, 2, 3}, f32), z(b, {2, 4}, f32), z(b, {4, 3}, f32));
       }},
      {"matmul into its input",
       [](Backend& b) {
         const Tensor a = z(b, {3, 3}, f32);
         b.matmul(a, a, z(b, {3, 3}, f32));
       }},
      {"matmul bf16 bias into fp32",
       [](Backend& b) {
         const Tensor bias = z(b, {3}, bf16);
         MatmulOptions o;
         o.bias = &bias;
         b.matmul(z(b, {2, 3}, f32), z(b, {2, 4}, f32), z(b, {4, 3}, f32), o);
       }},
      {"matmul GELU into C",
       [](Backend& b) {
         const Tensor c = z(b, {2, 3}, f32);
         MatmulOptions o;
         o.gelu_out = &c;
         b.matmul(c, z(b, {2, 4}, f32), z(b, {4, 3}, f32), o);
       }},
      {"matmul bias gradient without trans_a",
       [](Backend& b) {
         const Tensor db = z(b, {4}, f32);
         MatmulOptions o;
         o.bias_grad = &db;
         b.matmul(z(b, {2, 3}, f32), z(b, {2, 4}, f32), z(b, {4, 3}, f32), o);
       }},
      {"bias_backward size",
       [](Backend& b) {
         b.bias_backward(z(b, {4}, f32), z(b, {2, 3}, f32));
       }},
      {"amax of int32", [](Backend& b) { (void)b.amax(z(b, {4}, i32)); }},
      {"quantize into fp32 codes",
       [](Backend& b) { (void)b.quantize_fp8(z(b, {4}, f32), z(b, {4}, f32), 1.0f); }},
      {"quantize into a missing slot",
       [](Backend& b) {
         b.quantize_fp8_into(z(b, {4}, e4m3), z(b, {4}, f32), 1.0f, b.fp8_stats_tensor(1), 1);
       }},
      {"mx_quantize scale count",
       [](Backend& b) {
         (void)b.mx_quantize(z(b, {4, 32}, e4m3), z(b, {3}, DType::kE8M0), z(b, {4, 32}, f32),
                             MxAxis::kAlongColumns);
       }},
      {"dequantize with scale 0",
       [](Backend& b) {
         b.dequantize_fp8(z(b, {4, 4}, f32), {z(b, {4, 4}, e4m3), 0.0f, {}});
       }},
      {"matmul_fp8 inner dimensions",
       [](Backend& b) {
         b.matmul_fp8(z(b, {2, 3}, f32), {z(b, {2, 4}, e4m3), 1.0f, {}},
                      {z(b, {5, 3}, e4m3), 1.0f, {}});
       }},
      {"matmul_fp8 bias gradient",
       [](Backend& b) {
         const Tensor db = z(b, {2}, f32);
         MatmulOptions o;
         o.trans_a = true;
         o.bias_grad = &db;
         b.matmul_fp8(z(b, {2, 3}, f32), {z(b, {4, 2}, e4m3), 1.0f, {}},
                      {z(b, {4, 3}, e4m3), 1.0f, {}}, o);
       }},
      {"embedding of a 1-D table",
       [](Backend& b) {
         b.embedding_forward(z(b, {2, 4}, f32), z(b, {2}, i32), z(b, {8}, f32), false);
       }},
      {"embedding into the wrong rows",
       [](Backend& b) {
         b.embedding_forward(z(b, {3, 4}, f32), z(b, {2}, i32), z(b, {8, 4}, f32), false);
       }},
      {"embedding with fp32 ids",
       [](Backend& b) {
         b.embedding_forward(z(b, {2, 4}, f32), z(b, {2}, f32), z(b, {8, 4}, f32), true);
       }},
      {"embedding_backward rows",
       [](Backend& b) {
         b.embedding_backward(z(b, {8, 4}, f32), z(b, {2, 5}, f32), z(b, {2}, i32));
       }},
      {"layernorm weight size",
       [](Backend& b) {
         b.layernorm_forward(z(b, {2, 4}, f32), z(b, {2}, f32), z(b, {2}, f32), z(b, {2, 4}, f32),
                             z(b, {3}, f32), z(b, {4}, f32));
       }},
      {"layernorm bf16 mean",
       [](Backend& b) {
         b.layernorm_forward(z(b, {2, 4}, bf16), z(b, {2}, bf16), z(b, {2}, f32),
                             z(b, {2, 4}, bf16), z(b, {4}, bf16), z(b, {4}, bf16));
       }},
      {"layernorm_backward dbias size",
       [](Backend& b) {
         b.layernorm_backward(z(b, {2, 4}, f32), z(b, {4}, f32), z(b, {5}, f32), z(b, {2, 4}, f32),
                              z(b, {2, 4}, f32), z(b, {4}, f32), z(b, {2}, f32), z(b, {2}, f32));
       }},
      {"rmsnorm weight size",
       [](Backend& b) {
         b.rmsnorm_forward(z(b, {2, 4}, f32), z(b, {2}, f32), z(b, {2, 4}, f32), z(b, {3}, f32));
       }},
      {"rmsnorm bf16 rstd",
       [](Backend& b) {
         b.rmsnorm_forward(z(b, {2, 4}, bf16), z(b, {2}, bf16), z(b, {2, 4}, bf16),
                           z(b, {4}, bf16));
       }},
      {"rmsnorm_backward dout rows",
       [](Backend& b) {
         b.rmsnorm_backward(z(b, {2, 4}, f32), z(b, {4}, f32), z(b, {3, 4}, f32), z(b, {2, 4}, f32),
                            z(b, {4}, f32), z(b, {2}, f32));
       }},
      {"rope of an odd head size",
       [](Backend& b) {
         b.rope_forward(z(b, {1, 2, 2, 3}, f32), z(b, {1, 2, 2, 3}, f32), z(b, {2, 1, 2}, f32));
       }},
      {"rope with a short frequency table",
       [](Backend& b) {
         b.rope_forward(z(b, {1, 4, 2, 4}, f32), z(b, {1, 4, 2, 4}, f32), z(b, {3, 2, 2}, f32));
       }},
      {"rope_backward of other shapes",
       [](Backend& b) {
         b.rope_backward(z(b, {1, 4, 2, 4}, f32), z(b, {1, 4, 4, 2}, f32), z(b, {4, 2, 2}, f32));
       }},
      {"gelu of other sizes", [](Backend& b) { b.gelu_forward(z(b, {4}, f32), z(b, {5}, f32)); }},
      {"gelu_backward of int32",
       [](Backend& b) { b.gelu_backward(z(b, {4}, f32), z(b, {4}, f32), z(b, {4}, i32)); }},
      {"attention heads that do not divide C",
       [](Backend& b) {
         b.attention_forward(z(b, {1, 2, 6}, f32), z(b, {1, 4, 2, 2}, f32), z(b, {1, 2, 18}, f32),
                             4);
       }},
      {"attention qkv not 3C",
       [](Backend& b) {
         b.attention_forward(z(b, {1, 2, 6}, f32), z(b, {1, 2, 2, 2}, f32), z(b, {1, 2, 17}, f32),
                             2);
       }},
      {"attention probabilities shape",
       [](Backend& b) {
         b.attention_forward(z(b, {1, 2, 6}, f32), z(b, {1, 2, 2, 3}, f32), z(b, {1, 2, 18}, f32),
                             2);
       }},
      {"attention_backward dout shape",
       [](Backend& b) {
         b.attention_backward(z(b, {1, 2, 18}, f32), z(b, {1, 2, 5}, f32), z(b, {1, 2, 18}, f32),
                              z(b, {1, 2, 2, 2}, f32), 2);
       }},
      {"cross entropy classes past the vocabulary",
       [](Backend& b) {
         b.softmax_cross_entropy(z(b, {2}, f32), nullptr, z(b, {2, 5}, f32), z(b, {2}, i32), 1.0f,
                                 6);
       }},
      {"cross entropy bf16 losses",
       [](Backend& b) {
         b.softmax_cross_entropy(z(b, {2}, bf16), nullptr, z(b, {2, 5}, f32), z(b, {2}, i32), 1.0f);
       }},
      {"cross entropy targets count",
       [](Backend& b) {
         b.softmax_cross_entropy(z(b, {2}, f32), nullptr, z(b, {2, 5}, f32), z(b, {3}, i32), 1.0f);
       }},
      {"adamw step 0",
       [](Backend& b) {
         AdamWConfig config;
         config.step = 0;
         b.adamw_update(z(b, {4}, f32), z(b, {4}, f32), z(b, {4}, f32), z(b, {4}, f32), config,
                        nullptr);
       }},
      {"adamw bf16 moments",
       [](Backend& b) {
         b.adamw_update(z(b, {4}, f32), z(b, {4}, bf16), z(b, {4}, f32), z(b, {4}, f32), {},
                        nullptr);
       }},
      {"sum_squares of int32",
       [](Backend& b) {
         const Tensor t[] = {z(b, {4}, f32), z(b, {4}, i32)};
         (void)b.sum_squares(t);
       }},
      {"unscale_and_check of int32",
       [](Backend& b) {
         const Tensor t[] = {z(b, {4}, i32)};
         (void)b.unscale_and_check(t, 1.0f);
       }},
      {"magnitude_histogram of int32",
       [](Backend& b) {
         const Tensor t[] = {z(b, {4}, i32)};
         (void)b.magnitude_histogram(t);
       }},
  };
  return calls;
}

// The message of the EngineError(kInvalidArgument) that `call` throws, or
// a failure.
::testing::AssertionResult refusal(const BadCall& call, Backend& backend, std::string& message) {
  try {
    call.call(backend);
  } catch (const EngineError& e) {
    if (e.code() != ErrorCode::kInvalidArgument) {
      return ::testing::AssertionFailure() << backend.name() << " threw another code: " << e.what();
    }
    message = e.what();
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << backend.name() << " accepted it";
}

TEST_P(BackendParityTest, BadArgumentsAreRefusedInTheSameWords) {
  for (const BadCall& call : bad_calls()) {
    SCOPED_TRACE(call.what);
    std::string got, want;
    ASSERT_TRUE(refusal(call, *backend_, got));
    ASSERT_TRUE(refusal(call, *reference_, want));
    EXPECT_EQ(got, want);
    backend_->synchronize();
  }
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BackendParityTest, ::testing::ValuesIn(parity_backends()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), ':', '_');
                           return name;
                         });

}  // namespace
}  // namespace mixtrain::backend_test
