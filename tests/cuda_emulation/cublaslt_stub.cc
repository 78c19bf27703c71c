// Why: cuBLASLt for the host emulation: the descriptors the CUDA backend
// builds (matmul, matrix layouts, preference) and a reference
// cublasLtMatmul with the epilogues it uses: BIAS (a vector as long as D's
// rows added to every column), GELU_AUX and GELU_AUX_BIAS (D = GELU of the
// biased product, tanh approximation; the biased product itself stored to
// the auxiliary matrix). Attribute sizes, the bias and auxiliary pointers
// and types an epilogue needs, AUX_LD's documented rules (a multiple of 8,
// at least D's rows), the 16-byte alignment of every pointer and the
// workspace limit are checked as cuBLASLt documents them, and a pointer
// aligned less than the heuristic was told (256 bytes when untold); an unmet rule
// is CUBLAS_STATUS_INVALID_VALUE (or no algorithm from the heuristic).
// FP8 inputs (E4M3/E5M2, not both E5M2) are taken as Ada's and Hopper's
// kernels take them: the "TN" layout only, 16-byte leading dimensions,
// fp32/fp16/bf16 C, the A and B scale pointers (default 1) multiplying the
// product; bias and GELU epilogues as for 16-bit inputs. With the
// VEC32_UE8M0 scale mode (sm_100 only, both operands, k a multiple of 32)
// the scale pointers hold E8M0 scales per 32 elements along k in
// cuBLASLt's tiled layout (128 x 4 tiles of 512 bytes, entry (r, c) at
// (r % 32) * 16 + (r % 128 / 32) * 4 + c). The
// product runs when the stream gets there (stream_queues.h). It is not
// cuBLASLt: its kernels, its algorithm choice and speed are not modelled.
#include <cublasLt.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

#include "reference_gemm.h"
#include "runtime_calls.h"

struct cublasLtContext {};

namespace {

// What the stub keeps in cuBLASLt's opaque descriptors.
struct Desc {
  cublasComputeType_t compute;
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int32_t bias_type = -1;
  void* aux = nullptr;
  int64_t aux_ld = 0;
  int32_t aux_type = -1;
  const void* a_scale = nullptr;
  const void* b_scale = nullptr;
  int32_t a_scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  int32_t b_scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
};
struct Layout {
  cudaDataType type;
  uint64_t rows, cols;
  int64_t ld;
};
struct Preference {
  uint64_t max_workspace = 0;
  // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{A,B,C,D}_BYTES: what the caller
  // promises of its pointers (cuBLASLt's default 256).
  uint32_t min_alignment[4] = {256, 256, 256, 256};
};
static_assert(sizeof(Desc) <= sizeof(cublasLtMatmulDescOpaque_t));
static_assert(sizeof(Layout) <= sizeof(cublasLtMatrixLayoutOpaque_t));
static_assert(sizeof(Preference) <= sizeof(cublasLtMatmulPreferenceOpaque_t));

Desc& desc(cublasLtMatmulDesc_t d) { return *reinterpret_cast<Desc*>(d->data); }
const Layout& layout(cublasLtMatrixLayout_t l) { return *reinterpret_cast<const Layout*>(l->data); }

template <class T> cublasStatus_t read(T& field, const void* buf, size_t size) {
  if (buf == nullptr || size != sizeof(T)) return stub::invalid("attribute of the wrong size");
  std::memcpy(&field, buf, size);
  return CUBLAS_STATUS_SUCCESS;
}

bool has_bias(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool is_bias_grad(cublasLtEpilogue_t e) { return e == CUBLASLT_EPILOGUE_BGRADB; }
bool has_gelu(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool on_16_bytes(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Why an fp8 call cannot run, or nullptr.
const char* fp8_problem(const Desc& d, const Layout& a, const Layout& b, const Layout& c) {
  if (!stub::is_fp8(a.type) || !stub::is_fp8(b.type))
    return "fp8 A with a non-fp8 B, or the reverse";
  if (a.type == CUDA_R_8F_E5M2 && b.type == CUDA_R_8F_E5M2) return "fp8 E5M2 x E5M2";
  if (d.compute != CUBLAS_COMPUTE_32F) return "fp8 needs CUBLAS_COMPUTE_32F";
  if (c.type != CUDA_R_32F && c.type != CUDA_R_16F && c.type != CUDA_R_16BF)
    return "fp8 inputs with a C the stub does not model";
  if (d.trans_a != CUBLAS_OP_T || d.trans_b != CUBLAS_OP_N)
    return "fp8 kernels take A transposed and B not (TN) on sm_89/sm_90";
  const bool blocks = d.a_scale_mode == CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0;
  if (d.b_scale_mode != d.a_scale_mode ||
      (!blocks && d.a_scale_mode != CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F))
    return "a scale mode pair the stub does not model";
  if (blocks && emu::compute_capability() < 100) return "block scaling needs sm_100";
  if (blocks && (a.rows % 32 != 0 || d.a_scale == nullptr || d.b_scale == nullptr))
    return "VEC32_UE8M0 needs k a multiple of 32 and both scale pointers";
  if (a.ld % 16 != 0 || b.ld % 16 != 0) return "fp8 leading dimensions off 16 bytes";
  if (is_bias_grad(d.epilogue)) return "a bias gradient epilogue with fp8 inputs";
  // cuBLASLt's fp8 table: with an fp32 D the bias is bf16, not D's type
  // (PyTorch's _scaled_mm refuses a bias with fp32 output altogether).
  if (has_bias(d.epilogue) && c.type == CUDA_R_32F)
    return "a bias epilogue on an fp8 GEMM with an fp32 D";
  return nullptr;
}

// Why this call cannot run, or nullptr: the checks shared by the heuristic
// and the matmul.
const char* problem(const Desc& d, const Layout& a, const Layout& b, const Layout& c,
                    const Layout& dl) {
  if (d.epilogue != CUBLASLT_EPILOGUE_DEFAULT && !has_bias(d.epilogue) && !has_gelu(d.epilogue) &&
      !is_bias_grad(d.epilogue))
    return "an epilogue the stub does not model";
  const bool ta = d.trans_a != CUBLAS_OP_N, tb = d.trans_b != CUBLAS_OP_N;
  const uint64_t m = ta ? a.cols : a.rows, k = ta ? a.rows : a.cols;
  if ((tb ? b.cols : b.rows) != k || (tb ? b.rows : b.cols) != c.cols || c.rows != m)
    return "the layouts' sizes do not make a product";
  if (c.rows != dl.rows || c.cols != dl.cols || c.type != dl.type) return "C and D differ";
  for (const Layout* l : {&a, &b, &c})
    if (l->ld < static_cast<int64_t>(std::max<uint64_t>(l->rows, 1)))
      return "a leading dimension below the rows";
  if (stub::is_fp8(a.type) || stub::is_fp8(b.type)) {
    if (const char* why = fp8_problem(d, a, b, c)) return why;
  } else if (!stub::supported_types(d.compute, a.type, b.type, c.type)) {
    return "unsupported types";
  }
  if ((has_bias(d.epilogue) || is_bias_grad(d.epilogue)) &&
      (d.bias == nullptr || d.bias_type != c.type))
    return "a bias or bias gradient epilogue needs BIAS_POINTER of D's type";
  if (has_gelu(d.epilogue)) {
    if (d.aux == nullptr || d.aux_type != c.type) return "GELU_AUX needs an aux pointer of D's type";
    if (d.aux_ld % 8 != 0 || d.aux_ld < static_cast<int64_t>(c.rows))
      return "AUX_LD must be a multiple of 8 and at least D's rows";
  }
  if (!on_16_bytes(d.bias) || !on_16_bytes(d.aux)) return "an epilogue pointer off 16 bytes";
  return nullptr;
}

// A new opaque descriptor holding `content`, and its end.
template <class Opaque, class Content> cublasStatus_t create(Opaque** out, const Content& content) {
  *out = new Opaque{};
  new ((*out)->data) Content(content);
  return CUBLAS_STATUS_SUCCESS;
}
template <class Handle> cublasStatus_t destroy(Handle* handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

// The E8M0 scale of row r's block c (32 elements along k) in the tiled
// layout of a matrix with `blocks` blocks along k: 2^(code - 127).
float tiled_scale(const void* scales, int r, int c, int blocks) {
  const long long tile = (r / 128) * ((blocks + 3) / 4) + c / 4;
  const long long at = tile * 512 + (r % 32) * 16 + (r % 128 / 32) * 4 + c % 4;
  const uint8_t code = static_cast<const uint8_t*>(scales)[at];
  return code == 0xFF ? std::nanf("") : std::ldexp(1.0f, code - 127);
}

float gelu(float x) {
  const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + std::tanh(u));
}

}  // namespace

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) { return destroy(handle); }

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  if (scale != CUDA_R_32F) return stub::invalid("the stub models fp32 scales only");
  return create(d, Desc{compute});
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) { return destroy(d); }
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                                              cublasLtMatmulDescAttributes_t attribute,
                                              const void* buf, size_t size) {
  Desc& o = desc(d);
  switch (attribute) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return read(o.trans_a, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSB: return read(o.trans_b, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return read(o.epilogue, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return read(o.bias, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return read(o.bias_type, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return read(o.aux, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return read(o.aux_ld, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: return read(o.aux_type, buf, size);
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER:
      return read(o.a_scale, buf, size);
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER:
      return read(o.b_scale, buf, size);
    case CUBLASLT_MATMUL_DESC_A_SCALE_MODE:
      return read(o.a_scale_mode, buf, size);
    case CUBLASLT_MATMUL_DESC_B_SCALE_MODE:
      return read(o.b_scale_mode, buf, size);
    default: return stub::invalid("a matmul attribute the stub does not model");
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  return create(l, Layout{type, rows, cols, ld});
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) { return destroy(l); }

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) {
  return create(p, Preference{});
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) { return destroy(p); }
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attribute,
                                                    const void* buf, size_t size) {
  Preference& preference = *reinterpret_cast<Preference*>(p->data);
  switch (attribute) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return read(preference.max_workspace, buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      return read(preference.min_alignment[attribute - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES],
                  buf, size);
    default: return stub::invalid("a preference the stub does not model");
  }
}

// One "algorithm" (the reference loop), needing no workspace, for every
// call the stub can run. Like cuBLASLt's kernels it assumes its pointers
// aligned as the preference promised (data[0..3]: A, B, C, D), and
// cublasLtMatmul refuses pointers aligned less, as a real kernel would
// fault or refuse on them.
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t d,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dl,
                                              cublasLtMatmulPreference_t preference,
                                              int requested,
                                              cublasLtMatmulHeuristicResult_t results[],
                                              int* found) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (requested < 1) return stub::invalid("no algorithm requested");
  emu::count_lt_heuristic();
  *found = problem(desc(d), layout(a), layout(b), layout(c), layout(dl)) == nullptr ? 1 : 0;
  if (*found == 1) {
    results[0] = cublasLtMatmulHeuristicResult_t{};
    results[0].state = CUBLAS_STATUS_SUCCESS;
    const Preference promised = preference != nullptr
                                    ? *reinterpret_cast<const Preference*>(preference->data)
                                    : Preference{};
    for (int i = 0; i < 4; ++i) results[0].algo.data[i] = promised.min_alignment[i];
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t d, const void* alpha,
                              const void* a, cublasLtMatrixLayout_t a_layout, const void* b,
                              cublasLtMatrixLayout_t b_layout, const void* beta, const void* c,
                              cublasLtMatrixLayout_t c_layout, void* out,
                              cublasLtMatrixLayout_t d_layout, const cublasLtMatmulAlgo_t* algo,
                              void*, size_t, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  const Desc o = desc(d);
  const Layout al = layout(a_layout), bl = layout(b_layout), cl = layout(c_layout),
               dl = layout(d_layout);
  if (algo == nullptr) return stub::invalid("no algorithm");
  if (const char* why = problem(o, al, bl, cl, dl)) return stub::invalid(why);
  const void* matrices[] = {a, b, c, out};
  for (int i = 0; i < 4; ++i) {
    if (!on_16_bytes(matrices[i])) return stub::invalid("a matrix pointer off 16 bytes");
    if (reinterpret_cast<uintptr_t>(matrices[i]) % algo->data[i] != 0)
      return stub::invalid("a matrix pointer aligned less than its algorithm assumes");
  }
  const bool ta = o.trans_a != CUBLAS_OP_N, tb = o.trans_b != CUBLAS_OP_N;
  const int m = static_cast<int>(cl.rows), n = static_cast<int>(cl.cols);
  const int k = static_cast<int>(ta ? al.rows : al.cols);
  const stub::Matrix A{static_cast<const char*>(a), al.type, al.ld, 0, ta};
  const stub::Matrix B{static_cast<const char*>(b), bl.type, bl.ld, 0, tb};
  const stub::Matrix C{static_cast<const char*>(c), cl.type, cl.ld, 0, false};
  const stub::Matrix D{static_cast<const char*>(out), dl.type, dl.ld, 0, false};
  const stub::Matrix Aux{static_cast<const char*>(o.aux), cl.type, o.aux_ld, 0, false};
  const bool gelu_epilogue = has_gelu(o.epilogue);

  // D, and the aux matrix with GELU, are written once each, no input read
  // among them (C may be D itself, or the aux matrix).
  std::vector<const char*> outputs;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      outputs.push_back(D.at(0, i, j));
      if (gelu_epilogue) outputs.push_back(Aux.at(0, i, j));
    }
  if (const char* why = stub::overlap_problem(outputs, A, B, 1, m, n, k)) return stub::invalid(why);

  emu::count_lt_matmul(stub::is_fp8(al.type));
  // Run when the stream gets there; the descriptors (copied) may be gone
  // by then, alpha and beta are read now, the scales (device memory, as
  // an earlier kernel may write them) then.
  const float scale = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  const bool tf32 = o.compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  const bool blocks = o.a_scale_mode == CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0;
  emu::enqueue_on(stream, [=] {
    auto scalar = [](const void* p) { return p != nullptr ? *static_cast<const float*>(p) : 1.0f; };
    const float product_scale = blocks ? scale : scale * scalar(o.a_scale) * scalar(o.b_scale);
    // Element (i, j) of op(A) op(B); with block scaling each element of A
    // (i, l) and of B (l, j) times its block's scale, in fp32.
    auto product = [&](int i, int j) {
      if (!blocks) return stub::product(A, B, 0, i, j, k, tf32);
      float sum = 0.0f;
      for (int l = 0; l < k; ++l) {
        sum += stub::load(A.at(0, i, l), A.type) * tiled_scale(o.a_scale, i, l / 32, k / 32) *
               (stub::load(B.at(0, l, j), B.type) * tiled_scale(o.b_scale, j, l / 32, k / 32));
      }
      return sum;
    };
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        float x = product_scale * product(i, j);
        if (be != 0.0f) x += be * stub::load(C.at(0, i, j), cl.type);
        if (has_bias(o.epilogue))
          x += stub::load(static_cast<const char*>(o.bias) + i * stub::element_size(cl.type),
                          cl.type);
        if (gelu_epilogue) {
          stub::store(const_cast<char*>(Aux.at(0, i, j)), cl.type, x);
          x = gelu(x);
        }
        stub::store(const_cast<char*>(D.at(0, i, j)), dl.type, x);
      }
    if (is_bias_grad(o.epilogue)) {  // one sum per column of D, over k, in fp32
      char* sums = static_cast<char*>(const_cast<void*>(o.bias));
      for (int j = 0; j < n; ++j) {
        float sum = 0.0f;
        for (int l = 0; l < k; ++l) sum += stub::load(B.at(0, l, j), bl.type);
        stub::store(sums + j * stub::element_size(cl.type), cl.type, sum);
      }
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
