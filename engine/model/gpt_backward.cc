// Why: the GPT-2 backward pass, the forward's ops in reverse as in llm.c's
// gpt2_backward. Every Backend backward op ADDS into its outputs, which is
// what the parameter gradients want (grad accumulation, and the tied wte
// collecting from the head and the embedding). The reused activation-
// gradient buffers are therefore either fully overwritten (matmul with
// beta 0) or zeroed right before an op adds into them.
#include "engine/model/gpt.h"
#include "engine/model/row_view.h"

namespace mixtrain {

void Gpt::run_backward(ModelWeights& weights, float dloss_per_position) {
  GptActivations& a = *acts_;
  GptActivationGrads& d = *grad_acts_;
  Backend& be = backend_;
  auto param = [&](const ParameterInfo& info) { return weights.param(info); };
  auto grad = [&](const ParameterInfo& info) { return weights.grad(info); };

  // Backward of out = in W^T + b, given dout: din = dout W (overwritten),
  // dW += dout^T in, and db += column sums of dout with it (the GEMM's
  // epilogue on CUDA).
  auto linear_backward = [&](const Tensor& din, const Tensor& dout, const Tensor& in, int64_t layer,
                             int64_t index, BlockParameter weight, BlockParameter bias) {
    const Tensor db = grad(layout_.block(layer, bias));
    if (fp8_ != nullptr) {
      fp8_->backward(4 * layer + index, rows(din), grad(layout_.block(layer, weight)), &db,
                     rows(dout), rows(in), param(layout_.block(layer, weight)));
      return;
    }
    be.matmul(rows(din), rows(dout), param(layout_.block(layer, weight)));
    MatmulOptions accumulate_dw;
    accumulate_dw.trans_a = true;
    accumulate_dw.beta = 1.0f;
    accumulate_dw.bias_grad = &db;
    be.matmul(grad(layout_.block(layer, weight)), rows(dout), rows(in), accumulate_dw);
  };

  // dlogits, written over the logits: dloss/(B*T) * (softmax - onehot), and
  // zero in the padded vocabulary's columns.
  be.softmax_cross_entropy(a.losses, &a.logits, a.logits, a.targets, dloss_per_position,
                           config_.vocab);
  // Tied head: dlnf = dlogits wte, dwte += dlogits^T lnf (zero in the
  // padding rows). The embeddings stay acquired until the embedding
  // backward completes wte's gradient.
  weights.acquire(ParameterLayout::kEmbeddingsUnit, ModelPass::kBackward);
  if (fp8_head_) {
    fp8_->backward(4 * config_.layers, rows(d.btc), grad(layout_.output_head()), nullptr,
                   rows(a.logits), rows(a.lnf), param(layout_.output_head()));
  } else {
    be.matmul(rows(d.btc), rows(a.logits), param(layout_.output_head()));
    MatmulOptions accumulate_dwte;
    accumulate_dwte.trans_a = true;
    accumulate_dwte.beta = 1.0f;
    be.matmul(grad(layout_.output_head()), rows(a.logits), rows(a.lnf), accumulate_dwte);
  }
  be.set_zero(d.residual);
  weights.acquire(layout_.lnf_unit(), ModelPass::kBackward);
  be.layernorm_backward(d.residual, grad(layout_.lnf_weight()), grad(layout_.lnf_bias()), d.btc,
                        a.blocks.back().residual3, param(layout_.lnf_weight()), a.lnf_mean,
                        a.lnf_rstd);
  weights.release(layout_.lnf_unit(), ModelPass::kBackward);

  // d.residual holds the gradient of block l's residual3 on entry and of its
  // input x on exit; the residual adds pass it through unchanged.
  // With checkpointing, the last block's recomputed tensors still hold what
  // the forward wrote there; every earlier block's are recomputed first.
  for (int64_t l = config_.layers - 1; l >= 0; --l) {
    BlockActivations& blk = a.blocks[static_cast<size_t>(l)];
    const Tensor& x = block_input(l);
    weights.acquire(layout_.block_unit(l), ModelPass::kBackward);
    if (l < config_.layers - 1) recompute_block(weights, l);
    // MLP sub-block.
    linear_backward(d.fch_gelu, d.residual, blk.fch_gelu, l, 3, BlockParameter::kMlpProjWeight,
                    BlockParameter::kMlpProjBias);
    be.set_zero(d.fch);
    be.gelu_backward(d.fch, d.fch_gelu, blk.fch);
    linear_backward(d.btc, d.fch, blk.ln2, l, 2, BlockParameter::kMlpFcWeight,
                    BlockParameter::kMlpFcBias);
    be.layernorm_backward(d.residual, grad(layout_.block(l, BlockParameter::kLn2Weight)),
                          grad(layout_.block(l, BlockParameter::kLn2Bias)), d.btc, blk.residual2,
                          param(layout_.block(l, BlockParameter::kLn2Weight)), blk.ln2_mean,
                          blk.ln2_rstd);
    // Attention sub-block (d.btc becomes datty, then dln1).
    linear_backward(d.btc, d.residual, blk.atty, l, 1, BlockParameter::kAttnProjWeight,
                    BlockParameter::kAttnProjBias);
    be.set_zero(d.qkv);
    be.attention_backward(d.qkv, d.btc, blk.qkv, blk.att, static_cast<int>(config_.heads));
    linear_backward(d.btc, d.qkv, blk.ln1, l, 0, BlockParameter::kAttnQkvWeight,
                    BlockParameter::kAttnQkvBias);
    be.layernorm_backward(d.residual, grad(layout_.block(l, BlockParameter::kLn1Weight)),
                          grad(layout_.block(l, BlockParameter::kLn1Bias)), d.btc, x,
                          param(layout_.block(l, BlockParameter::kLn1Weight)), blk.ln1_mean,
                          blk.ln1_rstd);
    weights.release(layout_.block_unit(l), ModelPass::kBackward);
  }

  // encoded = wte[tokens] + wpe[t]: scatter-add into both tables.
  be.embedding_backward(grad(layout_.wte()), rows(d.residual), a.tokens);
  be.embedding_backward(grad(layout_.wpe()), rows(d.residual), a.positions);
  weights.release(ParameterLayout::kEmbeddingsUnit, ModelPass::kBackward);
}

}  // namespace mixtrain
