// Why: the C++ half of the PyTorch parity test of the GPT model. It runs one
// fp32 forward and backward and one bf16 forward of a small GPT-2 on fixed
// weights and batch, and hands the Python half (gpt_parity.py) everything
// through our real Hugging Face export, so the torch model is built from the
// same file and name mapping a user gets. Into the directory argv[1]:
//   model.safetensors  the fp32 weights (export_hf_safetensors; its
//                      "mixtrain_config" metadata is the model config)
//   grads.safetensors  the fp32 gradient of the mean loss (dloss = 1),
//                      exported the same way: it has the weights' layout
//   parity.json        {"batch": [B, T], "tokens": [B*T ids],
//                       "targets": [B*T ids], "loss_fp32": our fp32 loss,
//                       "loss_bf16": our loss computing in bf16}
#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/common/json.h"
#include "engine/model/gpt.h"
#include "engine/model/gpt_init.h"
#include "engine/model/hf_safetensors.h"

namespace mixtrain {
namespace {

constexpr int64_t kBatch = 3;
constexpr int64_t kSeq = 16;

// GPT-2's init with the LayerNorm parameters and biases moved off their
// constant init values and the matrices 5x larger, so that every gradient
// the comparison sees is non-trivial.
std::vector<float> parity_weights(const ParameterLayout& layout, const GptConfig& config) {
  std::vector<float> w = gpt2_init(layout, config, 2024);
  std::mt19937 rng(99);
  std::uniform_real_distribution<float> jitter(-0.2f, 0.2f);
  for (const ParameterInfo& p : layout.parameters()) {
    for (int64_t i = p.offset; i < p.offset + p.numel; ++i) {
      w[i] = p.decay ? 5.0f * w[i] : w[i] + jitter(rng);
    }
  }
  return w;
}

std::vector<int32_t> random_ids(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& id : ids) id = dist(rng);
  return ids;
}

// A (kBatch, kSeq) int32 tensor holding `ids`.
Tensor id_tensor(Backend& backend, const std::vector<int32_t>& ids) {
  Tensor t = backend.empty({kBatch, kSeq}, DType::kI32, MemoryCategory::kActivations);
  backend.copy_from_host(t, ids.data());
  return t;
}

Json json_ids(const std::vector<int32_t>& ids) {
  Json out = Json::array();
  for (int32_t id : ids) out.push_back(id);
  return out;
}

int run(const std::string& dir) {
  const GptConfig config{2, 4, 32, kSeq, 64};
  std::unique_ptr<Backend> backend = make_backend("cpu");
  Gpt gpt(*backend, config, DType::kF32, DType::kF32);
  const ParameterLayout& layout = gpt.layout();
  const std::vector<float> weights = parity_weights(layout, config);
  const std::vector<int32_t> tokens = random_ids(kBatch * kSeq, config.vocab, 5);
  const std::vector<int32_t> targets = random_ids(kBatch * kSeq, config.vocab, 6);
  const Tensor token_tensor = id_tensor(*backend, tokens);
  const Tensor target_tensor = id_tensor(*backend, targets);

  Tensor params = backend->empty({layout.numel()}, DType::kF32, MemoryCategory::kParams);
  backend->copy_from_host(params, weights.data());
  Tensor grads = backend->zeros({layout.numel()}, DType::kF32, MemoryCategory::kGrads);
  const float loss = gpt.forward(params, token_tensor, target_tensor);
  gpt.backward(params, grads, 1.0f);
  std::vector<float> grad_values(static_cast<size_t>(layout.numel()));
  backend->copy_to_host(grad_values.data(), grads);

  // The same weights rounded to bf16, the model computing in bf16.
  Gpt bf16_gpt(*backend, config, DType::kBF16, DType::kBF16);
  Tensor bf16_params = backend->empty({layout.numel()}, DType::kBF16, MemoryCategory::kParams);
  backend->cast(bf16_params, params);
  const float bf16_loss = bf16_gpt.forward(bf16_params, token_tensor, target_tensor);

  export_hf_safetensors(dir + "/model.safetensors", config, weights, DType::kF32);
  export_hf_safetensors(dir + "/grads.safetensors", config, grad_values, DType::kF32);
  Json result = Json::object();
  result["batch"] = {kBatch, kSeq};
  result["tokens"] = json_ids(tokens);
  result["targets"] = json_ids(targets);
  result["loss_fp32"] = static_cast<double>(loss);
  result["loss_bf16"] = static_cast<double>(bf16_loss);
  std::ofstream out(dir + "/parity.json");
  out << dump_json(result) << '\n';
  if (!out) throw std::runtime_error("cannot write " + dir + "/parity.json");
  return 0;
}

}  // namespace
}  // namespace mixtrain

// Usage: gpt_parity_dump OUTPUT_DIR
int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: gpt_parity_dump OUTPUT_DIR\n";
    return 2;
  }
  try {
    return mixtrain::run(argv[1]);
  } catch (const std::exception& e) {
    std::cerr << "gpt_parity_dump: " << e.what() << '\n';
    return 1;
  }
}
