// Why: the C++ half of the PyTorch parity test of the GPT model. It runs one
// fp32 forward and backward of a small GPT-2 on fixed weights and batch,
// and writes everything the Python half (gpt_parity.py) needs to rebuild
// the model in torch and compare, into the directory given as argv[1]:
//   header.txt   "mixtrain-gpt-parity 1", then lines
//                "config <layers> <heads> <dim> <seq_len> <vocab>",
//                "batch <B> <T>", "loss <our mean loss, %.9g>", and per
//                parameter in layout order
//                "param <hf name> <offset> <numel> <transposed_in_hf> <dims...>"
//                (dims in OUR layout, linear weights (out, in))
//   weights.bin  the flat fp32 weights, little-endian
//   tokens.bin, targets.bin  B*T int32 each
//   grads.bin    the flat fp32 gradient of the mean loss (dloss = 1)
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/gpt.h"
#include "model/gpt_init.h"

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

template <class T>
void write_binary(const std::string& path, const std::vector<T>& values) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(T)));
  if (!out) throw std::runtime_error("cannot write " + path);
}

int run(const std::string& dir) {
  const GptConfig config{2, 4, 32, kSeq, 64};
  std::unique_ptr<Backend> backend = make_backend("cpu");
  Gpt gpt(*backend, config, DType::kF32, DType::kF32);
  const ParameterLayout& layout = gpt.layout();
  const std::vector<float> weights = parity_weights(layout, config);
  const std::vector<int32_t> tokens = random_ids(kBatch * kSeq, config.vocab, 5);
  const std::vector<int32_t> targets = random_ids(kBatch * kSeq, config.vocab, 6);

  Tensor params = backend->empty({layout.numel()}, DType::kF32, MemoryCategory::kParams);
  backend->copy_from_host(params, weights.data());
  Tensor grads = backend->zeros({layout.numel()}, DType::kF32, MemoryCategory::kGrads);
  Tensor token_tensor = backend->empty({kBatch, kSeq}, DType::kI32, MemoryCategory::kActivations);
  backend->copy_from_host(token_tensor, tokens.data());
  Tensor target_tensor = backend->empty({kBatch, kSeq}, DType::kI32, MemoryCategory::kActivations);
  backend->copy_from_host(target_tensor, targets.data());

  const float loss = gpt.forward(params, token_tensor, target_tensor);
  gpt.backward(params, grads, 1.0f);
  std::vector<float> grad_values(static_cast<size_t>(layout.numel()));
  backend->copy_to_host(grad_values.data(), grads);

  write_binary(dir + "/weights.bin", weights);
  write_binary(dir + "/tokens.bin", tokens);
  write_binary(dir + "/targets.bin", targets);
  write_binary(dir + "/grads.bin", grad_values);
  std::ofstream header(dir + "/header.txt");
  header << "mixtrain-gpt-parity 1\n";
  header << "config " << config.layers << ' ' << config.heads << ' ' << config.dim << ' '
         << config.seq_len << ' ' << config.vocab << '\n';
  header << "batch " << kBatch << ' ' << kSeq << '\n';
  char loss_text[32];
  std::snprintf(loss_text, sizeof loss_text, "%.9g", loss);
  header << "loss " << loss_text << '\n';
  for (const ParameterInfo& p : layout.parameters()) {
    header << "param " << p.name << ' ' << p.offset << ' ' << p.numel << ' '
           << (p.transposed_in_hf ? 1 : 0);
    for (int64_t d : p.shape) header << ' ' << d;
    header << '\n';
  }
  if (!header) throw std::runtime_error("cannot write " + dir + "/header.txt");
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
