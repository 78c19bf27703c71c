// Why: the C++ half of the AdamW parity test against PyTorch. The Python
// half (adamw_torch_parity.py) writes the parameters, gradients and
// hyperparameters, runs this tool, and compares what it prints with
// torch.optim.AdamW run on the same inputs. Floats travel as C99 hex
// literals (Python's float.hex / float.fromhex) so no value is rounded on
// the way.
//
// Input (whitespace-separated tokens):
//   adamw-parity-v1
//   steps K
//   hyper LR BETA1 BETA2 EPS WEIGHT_DECAY GRAD_SCALE
//   params P
//   then P times:
//     param NUMEL DECAY(0|1) GRAD_DTYPE OUT_DTYPE(or none)
//     master NUMEL values
//     grads K*NUMEL values (step 1's first), each exact in GRAD_DTYPE
// Output, per parameter after K calls of adamw_step (steps 1..K):
//   master NUMEL values / m NUMEL values / v NUMEL values
//   out NUMEL values (param_out read back as fp32), when OUT_DTYPE isn't none
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/optim/adamw.h"

namespace mixtrain {
namespace {

class TokenReader {
 public:
  explicit TokenReader(const char* path) : in_(path) {
    if (!in_) throw std::runtime_error(std::string("cannot open ") + path);
  }
  std::string word() {
    std::string token;
    if (!(in_ >> token)) throw std::runtime_error("input ends early");
    return token;
  }
  void expect(const std::string& keyword) {
    const std::string token = word();
    if (token != keyword) throw std::runtime_error("expected " + keyword + ", got " + token);
  }
  int64_t integer() { return std::stoll(word()); }
  float number() { return static_cast<float>(std::strtod(word().c_str(), nullptr)); }
  std::vector<float> numbers(int64_t count) {
    std::vector<float> values(static_cast<size_t>(count));
    for (float& x : values) x = number();
    return values;
  }

 private:
  std::ifstream in_;
};

struct ParityParam {
  AdamWParam tensors;
  std::vector<Tensor> grads;  // one per step
};

Tensor tensor_from(Backend& backend, const std::vector<float>& values, DType dtype,
                   MemoryCategory category) {
  const int64_t n = static_cast<int64_t>(values.size());
  Tensor fp32 = backend.empty({n}, DType::kF32, category);
  backend.copy_from_host(fp32, values.data());
  if (dtype == DType::kF32) return fp32;
  Tensor converted = backend.empty({n}, dtype, category);
  backend.cast(converted, fp32);
  return converted;
}

void print_values(Backend& backend, const char* label, const Tensor& t) {
  Tensor fp32 = t;
  if (t.dtype() != DType::kF32) {
    fp32 = backend.empty({t.numel()}, DType::kF32, MemoryCategory::kWorkspace);
    backend.cast(fp32, t);
  }
  std::vector<float> values(static_cast<size_t>(t.numel()));
  backend.copy_to_host(values.data(), fp32);
  std::printf("%s", label);
  for (float x : values) std::printf(" %a", static_cast<double>(x));
  std::printf("\n");
}

int run(const char* input_path) {
  auto backend = make_backend("cpu");
  TokenReader in(input_path);
  in.expect("adamw-parity-v1");
  in.expect("steps");
  const int64_t steps = in.integer();
  in.expect("hyper");
  AdamWConfig hyper;
  hyper.lr = in.number();
  hyper.beta1 = in.number();
  hyper.beta2 = in.number();
  hyper.eps = in.number();
  hyper.weight_decay = in.number();
  hyper.grad_scale = in.number();
  in.expect("params");
  const int64_t count = in.integer();
  std::vector<ParityParam> params(static_cast<size_t>(count));
  for (ParityParam& p : params) {
    in.expect("param");
    const int64_t numel = in.integer();
    p.tensors.decay = in.integer() != 0;
    const DType grad_dtype = parse_dtype(in.word());
    const std::string out_dtype = in.word();
    in.expect("master");
    p.tensors.master =
        tensor_from(*backend, in.numbers(numel), DType::kF32, MemoryCategory::kMasterParams);
    p.tensors.m = backend->zeros({numel}, DType::kF32, MemoryCategory::kOptimizerState);
    p.tensors.v = backend->zeros({numel}, DType::kF32, MemoryCategory::kOptimizerState);
    if (out_dtype != "none") {
      p.tensors.param_out = backend->empty({numel}, parse_dtype(out_dtype), MemoryCategory::kParams);
    }
    in.expect("grads");
    for (int64_t s = 0; s < steps; ++s) {
      p.grads.push_back(
          tensor_from(*backend, in.numbers(numel), grad_dtype, MemoryCategory::kGrads));
    }
  }
  std::vector<AdamWParam> step_params;
  for (const ParityParam& p : params) step_params.push_back(p.tensors);
  for (int64_t s = 0; s < steps; ++s) {
    for (size_t i = 0; i < params.size(); ++i) step_params[i].grad = params[i].grads[s];
    hyper.step = s + 1;
    adamw_step(*backend, step_params, hyper);
  }
  for (const AdamWParam& p : step_params) {
    print_values(*backend, "master", p.master);
    print_values(*backend, "m", p.m);
    print_values(*backend, "v", p.v);
    if (p.param_out.defined()) print_values(*backend, "out", p.param_out);
  }
  return 0;
}

}  // namespace
}  // namespace mixtrain

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: adamw_parity_tool INPUT\n";
    return 2;
  }
  try {
    return mixtrain::run(argv[1]);
  } catch (const std::exception& error) {
    std::cerr << "adamw_parity_tool: " << error.what() << "\n";
    return 1;
  }
}
