// The models and data the trainer runs (torch translation units only): a character-level
// decoder-only transformer on the bundled corpus, and an MLP on synthetic data with
// outlier channels and heavy-tailed targets. Every linear layer is a LinearLayer, so
// convert_to_float8() switches it to FP8 in place.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/data/token_file.h"
#include "fp8wb/core/torch/float8_linear.h"

namespace fp8wb::train {

struct Batch {
  torch::Tensor x;  // GPT: token ids [B, T]; MLP: features [B, F]
  torch::Tensor y;  // GPT: next ids [B, T]; MLP: targets [B, F]
  int64_t tokens = 0;
};

// A deterministic stream of batches for a seed; the FP8 model and its reference see the
// same stream.
class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual Batch next(const torch::Device& device) = 0;
  virtual int64_t vocab() const { return 0; }
  // Throws std::invalid_argument where the data holds a token >= vocab (naming it).
  virtual void check_vocab(int64_t vocab) const { (void)vocab; }
  // Held-out windows for the evaluation loss (0: none), and batch i of them (i < eval_batches()).
  virtual int64_t eval_batches() const { return 0; }
  virtual Batch eval_batch(int64_t i, const torch::Device& device) const {
    (void)i;
    (void)device;
    return {};
  }
  // What the run's "started" event says of the data (empty: nothing).
  virtual std::string describe() const { return {}; }
};

// A token file (fp8wb/core/data/token_file.h): training windows drawn at random from its first
// nine tenths, the evaluation's non-overlapping windows in order from the last tenth (at
// most 4 batches of them).
class TokenData : public DataSource {
 public:
  TokenData(const std::string& path, int batch, int context, uint64_t seed);
  ~TokenData() override;
  Batch next(const torch::Device& device) override;
  int64_t vocab() const override;
  void check_vocab(int64_t vocab) const override;
  int64_t eval_batches() const override { return eval_batches_; }
  Batch eval_batch(int64_t i, const torch::Device& device) const override;
  std::string describe() const override;

 private:
  Batch windows(const std::vector<int64_t>& starts, const torch::Device& device) const;
  std::unique_ptr<TokenFile> file_;
  int batch_, context_;
  int64_t split_ = 0, eval_batches_ = 0;
  std::mt19937_64 rng_;
};

class CharCorpus : public DataSource {
 public:
  CharCorpus(int batch, int context, uint64_t seed);
  Batch next(const torch::Device& device) override;
  int64_t vocab() const override { return static_cast<int64_t>(chars_.size()); }

 private:
  std::string chars_;  // the vocabulary, sorted
  torch::Tensor ids_;  // the corpus as ids (int64)
  int batch_, context_;
  std::mt19937_64 rng_;
};

class SyntheticRegression : public DataSource {
 public:
  SyntheticRegression(const RunConfig& c);
  Batch next(const torch::Device& device) override;

 private:
  int batch_, features_, outliers_;
  double outlier_scale_, tail_, drift_;
  int period_;
  int64_t step_ = 0;
  torch::Tensor teacher1_, teacher2_;  // fixed random maps: y = tanh(x A) B + noise
  std::mt19937_64 rng_;
};

// Causal self-attention of q, k, v [B, H, T, dh] (the compute dtype), y [B, H, T, dh]:
// with `fused`, at::scaled_dot_product_attention (flash, cuDNN or memory-efficient
// kernels on a GPU; softmax statistics in fp32), else softmax(q k^T / sqrt(dh) + causal
// mask) v with the scores in fp32.
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, bool fused);
// Whether this LibTorch has at::scaled_dot_product_attention (2.0 and later).
bool fused_attention_available();

// Layer norm over the last dimension. With in_compute_dtype, a bf16 x on a GPU is
// normalised in bf16 (LibTorch's kernel keeps the mean and variance in fp32; the fp32
// weight and bias rounded to bf16 as autocast rounds a linear's weight): no fp32 copy of
// the activations, forward or backward. Otherwise, and always on the CPU, in fp32 whatever
// x's dtype, the result in x's dtype.
torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& weight,
                         const torch::Tensor& bias, double eps, bool in_compute_dtype);

// A model: its loss on a batch, in the compute dtype.
class TrainModel : public torch::nn::Module {
 public:
  virtual torch::Tensor loss(const Batch& b) = 0;
  torch::ScalarType compute_dtype = torch::kFloat;
  // Attention through LibTorch's fused kernel where it has one (fused_attention_available());
  // false: two matmuls and an fp32 softmax over a masked score matrix (the older path, kept
  // as the reference the fused one is tested against).
  bool fused_attention = fused_attention_available();
};

// AdamW as torch::optim::AdamW computes it (betas 0.9 and 0.999, eps 1e-8, decoupled
// weight decay), over every parameter at once. On CUDA (LibTorch 2.1 and later) one fused
// kernel updates them all (at::_fused_adamw_) and skips the update on the device where
// found_inf is nonzero, so that the host never waits for a step's loss; elsewhere
// torch::optim::AdamW.
class AdamW {
 public:
  AdamW(std::vector<torch::Tensor> params, double lr, double weight_decay);
  // found_inf: a float tensor [1] on the parameters' device, nonzero to skip this update
  // (the step count stays); undefined: update.
  void step(const torch::Tensor& found_inf = {});
  void set_lr(double lr);
  void zero_grad();
  bool fused() const { return fused_; }
  // Bytes of optimizer state (the moments).
  int64_t state_bytes() const;

 private:
  std::vector<torch::Tensor> params_;
  double lr_, weight_decay_;
  bool fused_ = false;
  std::unique_ptr<torch::optim::AdamW> opt_;         // not fused
  std::vector<torch::Tensor> exp_avg_, exp_avg_sq_;  // fused
  torch::Tensor step_;                               // fused: float [] on the device
};
// Whether AdamW fuses its update on this device (a CUDA LibTorch >= 2.1, a CUDA device).
bool fused_adamw_available(const torch::Device& device);

// The gradients' global 2-norm, their gradients scaled by max_norm / (norm + 1e-6) where
// that is below 1 (max_norm <= 0 or infinite: not clipped), as
// torch::nn::utils::clip_grad_norm_; on a GPU without the host waiting: the norm comes back
// as a 0-d float tensor on the parameters' device (on the CPU a 0-d double).
torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm);

// Builds the run's model (seeded: two calls give identical weights); vocab: the data's
// (the llama takes c.vocab where it is set, and a Hugging Face checkpoint's weights).
std::shared_ptr<TrainModel> make_model(const RunConfig& c, int64_t vocab);
std::unique_ptr<DataSource> make_data(const RunConfig& c);

// The model's LinearLayers by qualified name.
std::vector<std::pair<std::string, LinearLayerImpl*>> linear_layers(torch::nn::Module& m);

}  // namespace fp8wb::train
