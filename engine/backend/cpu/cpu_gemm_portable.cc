// Why: see cpu_gemm_portable.h. The loops are BLIS's: for each kNc-wide
// column block of C and each kKc-deep slice of K, the threads together
// pack op(B)'s block once into fp32 micro-panels, then share out kMc-row
// blocks of op(A), each packed by its thread and multiplied into an fp32
// accumulator for the whole column block by a register-tiled kernel; after
// the last slice the accumulator is written as alpha * acc + beta * C +
// bias in C's dtype, so C is read and rounded once.
#include "engine/backend/cpu/cpu_gemm_portable.h"

#include <omp.h>

#include <algorithm>

#include "engine/common/cpu_features.h"

namespace mixtrain {
namespace {

constexpr int64_t kMr = 6;    // rows of the register tile
constexpr int64_t kNr = 16;   // columns of the register tile
constexpr int64_t kMc = 96;   // rows of a block of A (a multiple of kMr)
constexpr int64_t kNc = 256;  // columns of a block of B (a multiple of kNr)
constexpr int64_t kKc = 256;  // depth of one packed panel

// Packed A (per thread) and packed B (shared) blocks.
constexpr size_t kPackedAFloats = kMc * kKc;
constexpr size_t kPackedBFloats = kKc * kNc;

int64_t round_up(int64_t x, int64_t multiple) { return (x + multiple - 1) / multiple * multiple; }

// Eight floats in one register on AVX2 (two SSE registers on baseline
// x86-64); the GCC/Clang vector extension keeps the tile in registers
// where auto-vectorization would leave it in memory.
typedef float Vec8 __attribute__((vector_size(32)));
constexpr int64_t kVecsPerRow = kNr / 8;

// acc (rows x cols, row stride kNc) += packed_a * packed_b over depth.
// packed_a: rows / kMr panels, element (r, p) of a panel at p * kMr + r.
// packed_b: cols / kNr panels, element (p, j) of a panel at p * kNr + j.
MIXTRAIN_MULTIVERSION
void multiply_panels(const float* packed_a, const float* packed_b, float* acc, int64_t rows,
                     int64_t cols, int64_t depth) {
  for (int64_t i0 = 0; i0 < rows; i0 += kMr) {
    const float* a_panel = packed_a + i0 * depth;
    for (int64_t j0 = 0; j0 < cols; j0 += kNr) {
      const float* b_panel = packed_b + j0 * depth;
      Vec8 tile[kMr][kVecsPerRow];
#pragma GCC unroll 16
      for (int64_t r = 0; r < kMr; ++r) {
#pragma GCC unroll 4
        for (int64_t v = 0; v < kVecsPerRow; ++v) {
          __builtin_memcpy(&tile[r][v], acc + (i0 + r) * kNc + j0 + 8 * v, sizeof(Vec8));
        }
      }
      for (int64_t p = 0; p < depth; ++p) {
        const float* a_col = a_panel + p * kMr;
        Vec8 b[kVecsPerRow];
#pragma GCC unroll 4
        for (int64_t v = 0; v < kVecsPerRow; ++v) {
          __builtin_memcpy(&b[v], b_panel + p * kNr + 8 * v, sizeof(Vec8));
        }
#pragma GCC unroll 16
        for (int64_t r = 0; r < kMr; ++r) {
          const float x = a_col[r];
          const Vec8 a = {x, x, x, x, x, x, x, x};
#pragma GCC unroll 4
          for (int64_t v = 0; v < kVecsPerRow; ++v) tile[r][v] += a * b[v];
        }
      }
#pragma GCC unroll 16
      for (int64_t r = 0; r < kMr; ++r) {
#pragma GCC unroll 4
        for (int64_t v = 0; v < kVecsPerRow; ++v) {
          __builtin_memcpy(acc + (i0 + r) * kNc + j0 + 8 * v, &tile[r][v], sizeof(Vec8));
        }
      }
    }
  }
}

template <class TAB, class TC>
class PortableGemm {
 public:
  PortableGemm(const GemmSpec& spec, const GemmOperands& operands, const float* bias)
      : s_(spec),
        a_(static_cast<const TAB*>(operands.a)),
        b_(static_cast<const TAB*>(operands.b)),
        c_(static_cast<TC*>(operands.c)),
        bias_(bias) {}

  // The whole product. Every thread of one OpenMP parallel region calls
  // this; the work is shared out by the orphaned `omp for` loops, whose
  // barriers order the steps. `shared` holds the packed B block and the
  // accumulator; `packed_a` is this thread's own.
  void run(float* shared, float* packed_a) const {
    float* packed_b = shared;
    float* acc = shared + kPackedBFloats;  // (m rounded up to kMr, kNc)
    const int64_t row_blocks = (s_.m + kMc - 1) / kMc;
    const int64_t rows_padded = round_up(s_.m, kMr);
    for (int64_t batch = 0; batch < s_.batch; ++batch) {
      const TAB* a = a_ + batch * s_.m * s_.k;
      const TAB* b = b_ + batch * s_.k * s_.n;
      for (int64_t j_begin = 0; j_begin < s_.n; j_begin += kNc) {
        const int64_t cols = std::min(kNc, s_.n - j_begin);
        const int64_t cols_padded = round_up(cols, kNr);
#pragma omp for schedule(static)
        for (int64_t i = 0; i < rows_padded; ++i) std::fill_n(acc + i * kNc, cols_padded, 0.0f);
        for (int64_t p_begin = 0; p_begin < s_.k; p_begin += kKc) {
          const int64_t depth = std::min(kKc, s_.k - p_begin);
#pragma omp for schedule(static)
          for (int64_t j0 = 0; j0 < cols_padded; j0 += kNr) {
            pack_b_panel(b, j_begin + j0, std::min(kNr, cols - j0), p_begin, depth,
                         packed_b + j0 * depth);
          }
#pragma omp for schedule(dynamic)
          for (int64_t block = 0; block < row_blocks; ++block) {
            const int64_t i_begin = block * kMc;
            const int64_t rows = std::min(kMc, s_.m - i_begin);
            pack_a(a, i_begin, rows, p_begin, depth, packed_a);
            multiply_panels(packed_a, packed_b, acc + i_begin * kNc, round_up(rows, kMr),
                            cols_padded, depth);
          }
        }
#pragma omp for schedule(static)
        for (int64_t i = 0; i < s_.m; ++i) write_c_row(acc + i * kNc, batch, i, j_begin, cols);
      }
    }
  }

 private:
  // op(A)[i_begin + i][p_begin + p] into micro-panels of kMr rows, element
  // (i, p) at (i / kMr) * kMr * depth + p * kMr + i % kMr; rows past `rows`
  // are zero.
  void pack_a(const TAB* a, int64_t i_begin, int64_t rows, int64_t p_begin, int64_t depth,
              float* out) const {
    const int64_t rows_padded = round_up(rows, kMr);
    for (int64_t panel = 0; panel < rows_padded; panel += kMr) {
      float* dst = out + panel * depth;
      for (int64_t r = 0; r < kMr; ++r) {
        const int64_t i = panel + r;
        if (i >= rows) {
          for (int64_t p = 0; p < depth; ++p) dst[p * kMr + r] = 0.0f;
        } else if (s_.trans_a) {  // A stored (k, m)
          const TAB* src = a + p_begin * s_.m + i_begin + i;
          for (int64_t p = 0; p < depth; ++p) dst[p * kMr + r] = to_float(src[p * s_.m]);
        } else {  // A stored (m, k)
          const TAB* src = a + (i_begin + i) * s_.k + p_begin;
          for (int64_t p = 0; p < depth; ++p) dst[p * kMr + r] = to_float(src[p]);
        }
      }
    }
  }

  // op(B)[p_begin + p][j_begin + j] for j < kNr into one micro-panel,
  // element (p, j) at p * kNr + j; columns past `cols` are zero.
  void pack_b_panel(const TAB* b, int64_t j_begin, int64_t cols, int64_t p_begin, int64_t depth,
                    float* out) const {
    if (s_.trans_b) {  // B stored (n, k)
      for (int64_t j = 0; j < kNr; ++j) {
        if (j >= cols) {
          for (int64_t p = 0; p < depth; ++p) out[p * kNr + j] = 0.0f;
          continue;
        }
        const TAB* src = b + (j_begin + j) * s_.k + p_begin;
        for (int64_t p = 0; p < depth; ++p) out[p * kNr + j] = to_float(src[p]);
      }
    } else {  // B stored (k, n)
      for (int64_t p = 0; p < depth; ++p) {
        const TAB* src = b + (p_begin + p) * s_.n + j_begin;
        for (int64_t j = 0; j < kNr; ++j) out[p * kNr + j] = j < cols ? to_float(src[j]) : 0.0f;
      }
    }
  }

  void write_c_row(const float* acc_row, int64_t batch, int64_t i, int64_t j_begin,
                   int64_t cols) const {
    TC* c_row = c_ + (batch * s_.m + i) * s_.n + j_begin;
    for (int64_t j = 0; j < cols; ++j) {
      float value = s_.alpha * acc_row[j];
      if (s_.beta != 0.0f) value += s_.beta * to_float(c_row[j]);
      if (bias_ != nullptr) value += bias_[j_begin + j];
      c_row[j] = from_float<TC>(value);
    }
  }

  const GemmSpec& s_;
  const TAB* a_;
  const TAB* b_;
  TC* c_;
  const float* bias_;  // (n) fp32, or null
};

}  // namespace

size_t portable_gemm_workspace_floats(const GemmSpec& spec, int threads) {
  return static_cast<size_t>(round_up(spec.n, kNr)) + kPackedBFloats +
         static_cast<size_t>(round_up(spec.m, kMr) * kNc) +
         static_cast<size_t>(threads) * kPackedAFloats;
}

void portable_gemm(const GemmSpec& spec, const GemmOperands& operands, float* workspace,
                   int threads) {
  // Layout: bias (n, padded) | packed B | accumulator | packed A per thread.
  float* bias = nullptr;
  float* shared = workspace + round_up(spec.n, kNr);
  float* packed_a = shared + kPackedBFloats + round_up(spec.m, kMr) * kNc;
  if (spec.has_bias) {
    bias = workspace;
    dispatch_float(spec.bias_type, "matmul bias", [&](auto tag) {
      using TBias = decltype(tag);
      const TBias* src = static_cast<const TBias*>(operands.bias);
      for (int64_t j = 0; j < spec.n; ++j) bias[j] = to_float(src[j]);
    });
  }
  dispatch_float(spec.ab_type, "matmul a", [&](auto ab_tag) {
    dispatch_float(spec.c_type, "matmul c", [&](auto c_tag) {
      const PortableGemm<decltype(ab_tag), decltype(c_tag)> gemm(spec, operands, bias);
#pragma omp parallel num_threads(threads)
      gemm.run(shared, packed_a + omp_get_thread_num() * kPackedAFloats);
    });
  });
}

}  // namespace mixtrain
