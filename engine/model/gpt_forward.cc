// Why: the GPT-2 forward pass, one Backend op per line as in llm.c's
// gpt2_forward, and the recompute of a block's dropped tensors that
// activation checkpointing runs before the block's backward. Shapes are
// (B,T,C); linear layers compute x W^T + b with W (out,in), so every
// matmul runs on (B*T, .) row views with trans_b.
#include "engine/model/gpt.h"
#include "engine/model/row_view.h"

namespace mixtrain {

using config::ActivationCheckpointing;

void Gpt::linear_forward(ModelWeights& weights, const Tensor& out, const Tensor& in, int64_t layer,
                         int64_t index, BlockParameter weight, BlockParameter bias,
                         const Tensor* gelu_out, bool again) {
  const Tensor b = weights.param(layout_.block(layer, bias));
  const Tensor w = weights.param(layout_.block(layer, weight));
  const Tensor gelu_rows = gelu_out != nullptr ? rows(*gelu_out) : Tensor();
  const Tensor* gelu = gelu_out != nullptr ? &gelu_rows : nullptr;
  if (fp8_ != nullptr) {
    if (again) {
      fp8_->forward_again(4 * layer + index, rows(out), rows(in), w, &b, gelu);
    } else {
      fp8_->forward(4 * layer + index, rows(out), rows(in), w, &b, gelu);
    }
    return;
  }
  MatmulOptions options;
  options.trans_b = true;
  options.bias = &b;
  options.gelu_out = gelu;
  backend_.matmul(rows(out), rows(in), w, options);
}

const Tensor& Gpt::block_input(int64_t l) const {
  return l == 0 ? acts_->encoded : acts_->blocks[static_cast<size_t>(l - 1)].residual3;
}

void Gpt::block_forward(ModelWeights& weights, int64_t l, bool again) {
  GptActivations& a = *acts_;
  Backend& be = backend_;
  BlockActivations& blk = a.blocks[static_cast<size_t>(l)];
  const Tensor& x = block_input(l);
  auto param = [&](BlockParameter parameter) { return weights.param(layout_.block(l, parameter)); };
  // attention sub-block: residual2 = x + c_proj(attn(c_attn(ln_1(x))))
  be.layernorm_forward(blk.ln1, blk.ln1_mean, blk.ln1_rstd, x, param(BlockParameter::kLn1Weight),
                       param(BlockParameter::kLn1Bias));
  linear_forward(weights, blk.qkv, blk.ln1, l, 0, BlockParameter::kAttnQkvWeight,
                 BlockParameter::kAttnQkvBias, nullptr, again);
  be.attention_forward(blk.atty, blk.att, blk.qkv, static_cast<int>(config_.heads));
  linear_forward(weights, a.projection, blk.atty, l, 1, BlockParameter::kAttnProjWeight,
                 BlockParameter::kAttnProjBias, nullptr, again);
  be.add(blk.residual2, x, a.projection);
  // MLP sub-block: residual3 = residual2 + c_proj(gelu(c_fc(ln_2(residual2))))
  be.layernorm_forward(blk.ln2, blk.ln2_mean, blk.ln2_rstd, blk.residual2,
                       param(BlockParameter::kLn2Weight), param(BlockParameter::kLn2Bias));
  // Selective checkpointing recomputes the GELU alone, so the forward runs
  // it alone too: the backward then reads the values the forward used even
  // where the fused epilogue would round differently (CUDA).
  const bool separate_gelu = checkpointing_ == ActivationCheckpointing::kSelective;
  linear_forward(weights, blk.fch, blk.ln2, l, 2, BlockParameter::kMlpFcWeight,
                 BlockParameter::kMlpFcBias, separate_gelu ? nullptr : &blk.fch_gelu, again);
  if (separate_gelu) be.gelu_forward(blk.fch_gelu, blk.fch);
  if (again) return;
  linear_forward(weights, a.projection, blk.fch_gelu, l, 3, BlockParameter::kMlpProjWeight,
                 BlockParameter::kMlpProjBias, nullptr, again);
  be.add(blk.residual3, blk.residual2, a.projection);
}

void Gpt::recompute_block(ModelWeights& weights, int64_t l) {
  switch (checkpointing_) {
    case ActivationCheckpointing::kNone:
      return;
    case ActivationCheckpointing::kBlocks:
      block_forward(weights, l, /*again=*/true);
      return;
    case ActivationCheckpointing::kSelective:
      break;
  }
  // Selective keeps the GEMM outputs and LayerNorm statistics; rewriting
  // the statistics writes the values they hold.
  Backend& be = backend_;
  BlockActivations& blk = acts_->blocks[static_cast<size_t>(l)];
  auto param = [&](BlockParameter parameter) { return weights.param(layout_.block(l, parameter)); };
  be.layernorm_forward(blk.ln1, blk.ln1_mean, blk.ln1_rstd, block_input(l),
                       param(BlockParameter::kLn1Weight), param(BlockParameter::kLn1Bias));
  be.attention_forward(blk.atty, blk.att, blk.qkv, static_cast<int>(config_.heads));
  be.layernorm_forward(blk.ln2, blk.ln2_mean, blk.ln2_rstd, blk.residual2,
                       param(BlockParameter::kLn2Weight), param(BlockParameter::kLn2Bias));
  be.gelu_forward(blk.fch_gelu, blk.fch);
}

void Gpt::run_forward(ModelWeights& weights) {
  GptActivations& a = *acts_;
  Backend& be = backend_;
  auto param = [&](const ParameterInfo& info) { return weights.param(info); };

  // encoded = wte[tokens] + wpe[t]; the embeddings stay acquired for the head.
  weights.acquire(ParameterLayout::kEmbeddingsUnit, ModelPass::kForward);
  be.embedding_forward(rows(a.encoded), a.tokens, param(layout_.wte()), /*accumulate=*/false);
  be.embedding_forward(rows(a.encoded), a.positions, param(layout_.wpe()), /*accumulate=*/true);

  for (int64_t l = 0; l < config_.layers; ++l) {
    weights.acquire(layout_.block_unit(l), ModelPass::kForward);
    block_forward(weights, l, /*again=*/false);
    weights.release(layout_.block_unit(l), ModelPass::kForward);
  }

  // logits = ln_f(residual) wte^T (the head is tied to the token embedding;
  // wte's zero padding rows give the padded vocabulary's zero logits)
  weights.acquire(layout_.lnf_unit(), ModelPass::kForward);
  be.layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, a.blocks.back().residual3,
                       param(layout_.lnf_weight()), param(layout_.lnf_bias()));
  weights.release(layout_.lnf_unit(), ModelPass::kForward);
  if (fp8_head_) {
    fp8_->forward(4 * config_.layers, rows(a.logits), rows(a.lnf), param(layout_.output_head()),
                  nullptr, nullptr);
  } else {
    MatmulOptions head;
    head.trans_b = true;
    be.matmul(rows(a.logits), rows(a.lnf), param(layout_.output_head()), head);
  }
  weights.release(ParameterLayout::kEmbeddingsUnit, ModelPass::kForward);
}

}  // namespace mixtrain
