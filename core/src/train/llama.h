// defines: LlamaModel, make_llama(), load_hf_weights(), hf_tensors(): the Llama-family
// decoder (RMSNorm, rotary positions, SwiGLU, grouped-query attention) as Llama, Mistral
// and Qwen2 compute it, with Hugging Face's parameter names, so that a checkpoint's
// tensors load by name and the trained weights go back under the same names. Torch
// translation units only; internal to core.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "fp8wb/core/config/run_config.h"
#include "models.h"

namespace fp8wb::train {

class LlamaModel : public TrainModel {
 public:
  // vocab: the embedding's rows. qkv_bias: q, k and v with biases (Qwen2).
  LlamaModel(const RunConfig& c, int64_t vocab, bool qkv_bias);
  // Logits [B, T, vocab] (fp32) of token ids [B, T].
  torch::Tensor logits(const torch::Tensor& ids);
  torch::Tensor loss(const Batch& b) override;
  int64_t vocab() const { return vocab_; }

 private:
  struct Body;  // "model": embed_tokens, layers, norm (llama.cpp)
  // cos and sin [T, head size] (fp32) of the positions 0..T-1, kept for the last T and device.
  std::pair<torch::Tensor, torch::Tensor> rope(int64_t t, const torch::Device& device);
  int64_t vocab_, head_size_;
  double theta_;
  std::shared_ptr<Body> body_;
  std::shared_ptr<LinearLayerImpl> lm_head_;  // null where tied
  torch::Tensor rope_cos_, rope_sin_;
};

// The run's llama: from scratch (normal(0, 0.02) weights, the RMSNorms' ones), or with
// c.hf the checkpoint's config and weights (load_hf_weights()).
std::shared_ptr<TrainModel> make_llama(const RunConfig& c, int64_t data_vocab);

// Copies a checkpoint's tensors (F32, F16 or BF16, Hugging Face names) into the model's
// parameters of the same names. A tensor missing, of another shape or of another dtype is
// refused naming it; the checkpoint's other tensors are left alone.
void load_hf_weights(torch::nn::Module& model, const std::string& weights_path);

}  // namespace fp8wb::train
