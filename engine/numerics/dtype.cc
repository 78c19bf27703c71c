// Why: dtype names as the job spec and logs spell them.
#include "engine/numerics/dtype.h"

namespace mixtrain {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "fp32";
    case DType::kF16: return "fp16";
    case DType::kBF16: return "bf16";
    case DType::kFP8E4M3: return "fp8_e4m3";
    case DType::kFP8E5M2: return "fp8_e5m2";
    case DType::kI32: return "int32";
    case DType::kE8M0:
      return "e8m0";
  }
  return "unknown";
}

DType parse_dtype(std::string_view name) {
  if (name == "fp32" || name == "float32") return DType::kF32;
  if (name == "fp16" || name == "float16") return DType::kF16;
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  if (name == "fp8_e4m3") return DType::kFP8E4M3;
  if (name == "fp8_e5m2") return DType::kFP8E5M2;
  if (name == "int32") return DType::kI32;
  if (name == "e8m0") return DType::kE8M0;
  throw EngineError(ErrorCode::kInvalidArgument,
                    "unknown dtype \"" + std::string(name) +
                        "\" (expected fp32, fp16, bf16, fp8_e4m3, fp8_e5m2, int32, e8m0)");
}

}  // namespace mixtrain
