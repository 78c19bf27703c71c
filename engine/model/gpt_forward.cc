// Why: the GPT-2 forward pass, one Backend op per line as in llm.c's
// gpt2_forward. Shapes are (B,T,C); linear layers compute x W^T + b with W
// (out,in), so every matmul runs on (B*T, .) row views with trans_b.
#include "engine/model/gpt.h"
#include "engine/model/row_view.h"

namespace mixtrain {

void Gpt::run_forward(GptWeights& weights) {
  GptActivations& a = *acts_;
  Backend& be = backend_;
  auto param = [&](const ParameterInfo& info) { return weights.param(info); };
  // out = in W^T + b for the linear layer (weight, bias) of `layer`, the
  // block's `index`-th GEMM, and gelu_out = gelu(out) when given (fused
  // into the GEMM on CUDA); in fp8 when the model has an Fp8Linear.
  auto linear = [&](const Tensor& out, const Tensor& in, int64_t layer, int64_t index,
                    BlockParameter weight, BlockParameter bias, const Tensor* gelu_out = nullptr) {
    const Tensor b = param(layout_.block(layer, bias));
    const Tensor w = param(layout_.block(layer, weight));
    const Tensor gelu_rows = gelu_out != nullptr ? rows(*gelu_out) : Tensor();
    const Tensor* gelu = gelu_out != nullptr ? &gelu_rows : nullptr;
    if (fp8_ != nullptr) {
      fp8_->forward(4 * layer + index, rows(out), rows(in), w, &b, gelu);
      return;
    }
    MatmulOptions options;
    options.trans_b = true;
    options.bias = &b;
    options.gelu_out = gelu;
    be.matmul(rows(out), rows(in), w, options);
  };

  // encoded = wte[tokens] + wpe[t]; the embeddings stay acquired for the head.
  weights.acquire(ParameterLayout::kEmbeddingsUnit, GptPass::kForward);
  be.embedding_forward(rows(a.encoded), a.tokens, param(layout_.wte()), /*accumulate=*/false);
  be.embedding_forward(rows(a.encoded), a.positions, param(layout_.wpe()), /*accumulate=*/true);

  for (int64_t l = 0; l < config_.layers; ++l) {
    BlockActivations& blk = a.blocks[static_cast<size_t>(l)];
    const Tensor& x = l == 0 ? a.encoded : a.blocks[static_cast<size_t>(l - 1)].residual3;
    weights.acquire(layout_.block_unit(l), GptPass::kForward);
    // attention sub-block: residual2 = x + c_proj(attn(c_attn(ln_1(x))))
    be.layernorm_forward(blk.ln1, blk.ln1_mean, blk.ln1_rstd, x,
                         param(layout_.block(l, BlockParameter::kLn1Weight)),
                         param(layout_.block(l, BlockParameter::kLn1Bias)));
    linear(blk.qkv, blk.ln1, l, 0, BlockParameter::kAttnQkvWeight, BlockParameter::kAttnQkvBias);
    be.attention_forward(blk.atty, blk.att, blk.qkv, static_cast<int>(config_.heads));
    linear(a.projection, blk.atty, l, 1, BlockParameter::kAttnProjWeight,
           BlockParameter::kAttnProjBias);
    be.add(blk.residual2, x, a.projection);
    // MLP sub-block: residual3 = residual2 + c_proj(gelu(c_fc(ln_2(residual2))))
    be.layernorm_forward(blk.ln2, blk.ln2_mean, blk.ln2_rstd, blk.residual2,
                         param(layout_.block(l, BlockParameter::kLn2Weight)),
                         param(layout_.block(l, BlockParameter::kLn2Bias)));
    linear(blk.fch, blk.ln2, l, 2, BlockParameter::kMlpFcWeight, BlockParameter::kMlpFcBias,
           &blk.fch_gelu);
    linear(a.projection, blk.fch_gelu, l, 3, BlockParameter::kMlpProjWeight,
           BlockParameter::kMlpProjBias);
    be.add(blk.residual3, blk.residual2, a.projection);
    weights.release(layout_.block_unit(l), GptPass::kForward);
  }

  // logits = ln_f(residual) wte^T (the head is tied to the token embedding;
  // wte's zero padding rows give the padded vocabulary's zero logits)
  weights.acquire(layout_.lnf_unit(), GptPass::kForward);
  be.layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, a.blocks.back().residual3,
                       param(layout_.lnf_weight()), param(layout_.lnf_bias()));
  weights.release(layout_.lnf_unit(), GptPass::kForward);
  if (fp8_head_) {
    fp8_->forward(4 * config_.layers, rows(a.logits), rows(a.lnf), param(layout_.output_head()),
                  nullptr, nullptr);
  } else {
    MatmulOptions head;
    head.trans_b = true;
    be.matmul(rows(a.logits), rows(a.lnf), param(layout_.output_head()), head);
  }
  weights.release(ParameterLayout::kEmbeddingsUnit, GptPass::kForward);
}

}  // namespace mixtrain
