// defines: Float8LinearImpl / Float8Linear, LinearLayerImpl / LinearLayer, float8_linear(),
// ConvertOptions, ConvertReport, convert_to_float8(): linear layers whose three GEMMs take
// FP8 operands. Torch-facing: include from torch
// translation units only (views never do).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fp8wb/core/float8_config.h"

namespace fp8wb {

class Float8LinearImpl : public torch::nn::Module {
 public:
  Float8LinearImpl(int64_t in_features, int64_t out_features, bool with_bias = true,
                   Float8LinearConfig config = {});
  // Shares the parameters (the same tensors) of an existing Linear.
  Float8LinearImpl(const torch::nn::LinearImpl& linear, Float8LinearConfig config);

  // x: [..., in_features], float32 or bfloat16 (computed in fp32; y has x's dtype).
  torch::Tensor forward(const torch::Tensor& x);

  const Float8Probe& probe() const { return *probe_; }
  const Float8LinearConfig& config() const { return config_; }
  int64_t in_features() const { return weight.size(1); }
  int64_t out_features() const { return weight.size(0); }

  torch::Tensor weight;
  torch::Tensor bias;  // undefined without bias

 private:
  Float8LinearConfig config_;
  std::shared_ptr<Float8Probe> probe_;
};
TORCH_MODULE(Float8Linear);

// A linear layer that runs in high precision or, once converted, with FP8 GEMMs, keeping
// its parameters. LibTorch's modules call their children through their own member
// handles (and Sequential through its own list), so a layer cannot be swapped from
// outside the way a Python model's attribute can: the workbench's models use LinearLayer
// and convert_to_float8() switches it in place.
class LinearLayerImpl : public torch::nn::Module {
 public:
  LinearLayerImpl(int64_t in_features, int64_t out_features, bool with_bias = true);
  torch::Tensor forward(const torch::Tensor& x);

  void to_float8(const Float8LinearConfig& config);
  void to_high_precision();
  bool is_float8() const { return fp8_ != nullptr; }
  const Float8Probe& probe() const { return *probe_; }
  const Float8LinearConfig* config() const { return fp8_.get(); }
  int64_t in_features() const { return weight.size(1); }
  int64_t out_features() const { return weight.size(0); }

  torch::Tensor weight;
  torch::Tensor bias;

 private:
  std::shared_ptr<Float8LinearConfig> fp8_;
  std::shared_ptr<Float8Probe> probe_;
};
TORCH_MODULE(LinearLayer);

// The FP8 linear function itself: y = x w^T + b with FP8 operands as the config says.
torch::Tensor float8_linear(const torch::Tensor& x, const torch::Tensor& weight,
                            const torch::Tensor& bias, const Float8LinearConfig& config,
                            Float8Probe* probe = nullptr);

struct ConvertOptions {
  // Convert only layers whose qualified name and sizes pass this (default: all).
  std::function<bool(const std::string& name, int64_t in_features, int64_t out_features)> filter;
  // Qualified names (or their last component) never converted, e.g. the output head.
  std::vector<std::string> skip_names;
  // FP8 GEMMs need both dimensions divisible by 16 (and by the block size for blocks).
  bool skip_indivisible = true;
};

struct ConvertReport {
  std::vector<std::string> converted;
  std::vector<std::string> skipped;          // "name: reason"
  std::vector<std::string> not_convertible;  // plain torch::nn::Linear layers (see LinearLayer)
};

// Switches every LinearLayer below `root` that passes the options to FP8, in place.
ConvertReport convert_to_float8(torch::nn::Module& root, const Float8LinearConfig& config,
                                const ConvertOptions& options = {});

}  // namespace fp8wb
