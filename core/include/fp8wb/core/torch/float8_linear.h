// defines: Float8LinearImpl / Float8Linear, LinearLayerImpl / LinearLayer, float8_linear(),
// ConvertOptions, ConvertReport, convert_to_float8(): linear layers whose three GEMMs take
// FP8 operands. Torch-facing: include from torch
// translation units only (views never do).
#pragma once

#include <torch/torch.h>

#include <array>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fp8wb/core/config/float8_config.h"

namespace fp8wb {

// One role's delayed-scaling state: a host scaler for CPU tensors; for CUDA tensors a
// device tensor [window + 4] holding the history ring, scale, scale_inv, amax_h and the
// step's amax word, so that no step waits for the host.
struct Float8RoleHistory {
  std::optional<DelayedScaler> host;
  torch::Tensor device;
  int head = 0;  // the ring's newest entry (device)
  int64_t steps = 0;
  // The device history's ring of amaxes: [ring (window), scale, scale_inv, amax_h, amax
  // word] without its last four.
  torch::Tensor ring() const { return device.narrow(0, 0, device.numel() - 4); }
};

// Data-parallel runs: makes a float tensor of amaxes (on its own device) the maximum over
// every rank's, in place.
using AmaxReducer = std::function<void(torch::Tensor&)>;

// What a layer carries from step to step: its probe, the delayed-scaling history of each
// role (input, weight, grad_output), and statistics still on their way from a GPU.
struct Float8LinearState {
  Float8Probe probe;
  std::array<Float8RoleHistory, kRoleCount> delayed;  // by role_index()
  // Takes in statistics on their way from a GPU: with wait false only if they have
  // arrived; returns whether it took them in.
  std::function<bool(Float8Probe&, bool wait)> pending;
  // The GPU path's statistics buffer of the latest forward, which its backward completes.
  std::shared_ptr<void> in_flight;
  // Data-parallel runs: the tensorwise amax of each role (the one that sets the scale:
  // delayed scaling's history entry, current scaling's amax) becomes the maximum over
  // every rank's before it is used, so that every rank quantizes with the same scales.
  // Empty: this process alone. Every rank calls it in the same order.
  AmaxReducer reduce_amax;
  // The tensorwise amax each role's scale came from (current scaling) or that entered its
  // history (delayed) at the latest step, by role_index(): on the host for CPU tensors
  // (NaN until the role is quantized), else a one-element device tensor.
  std::array<float, kRoleCount> step_amax{NAN, NAN, NAN};
  std::array<torch::Tensor, kRoleCount> step_amax_device;

  // The probe, once statistics still in flight from the device have arrived.
  const Float8Probe& settled() {
    if (pending && pending(probe, true)) pending = nullptr;
    return probe;
  }
  // Takes in statistics that have arrived, without waiting.
  void poll() {
    if (pending && pending(probe, false)) pending = nullptr;
  }
  Float8RoleHistory& history(Role r) { return delayed.at(role_index(r)); }
  // The amax history of a role (newest first), from the host or the device.
  std::vector<float> amax_history(Role role) const;
  // The same as it will stand once the work queued so far has run. Without wait, a GPU's
  // ring is copied into page-locked host memory behind that work: read the copy
  // (AmaxHistoryCopy::history()) once the stream has passed this point.
  struct AmaxHistoryCopy {
    std::vector<float> host;  // a host scaler's history, at once
    torch::Tensor ring;       // the device ring, copied to host memory
    int head = 0;             // the ring's newest entry when copied
    std::vector<float> history() const;
  };
  AmaxHistoryCopy amax_history_copy(Role role, bool wait) const;
  // The same by the role's place in kRoles (0 input, 1 weight, 2 grad_output).
  std::vector<float> amax_history(int index) const;
};

class Float8LinearImpl : public torch::nn::Module {
 public:
  Float8LinearImpl(int64_t in_features, int64_t out_features, bool with_bias = true,
                   Float8LinearConfig config = {});
  // Shares the parameters (the same tensors) of an existing Linear.
  Float8LinearImpl(const torch::nn::LinearImpl& linear, Float8LinearConfig config);

  // x: [..., in_features], float32 or bfloat16 (computed in fp32; y has x's dtype).
  torch::Tensor forward(const torch::Tensor& x);

  const Float8Probe& probe() const { return state_->settled(); }
  Float8LinearState& state() { return *state_; }
  const Float8LinearConfig& config() const { return config_; }
  int64_t in_features() const { return weight.size(1); }
  int64_t out_features() const { return weight.size(0); }

  torch::Tensor weight;
  torch::Tensor bias;  // undefined without bias

 private:
  Float8LinearConfig config_;
  std::shared_ptr<Float8LinearState> state_;
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
  // Smooth-SwiGLU's product: in FP8, x's channels divided by s_k = 2^ceil(log2 amax_k)
  // (amax over x's rows, no gradient through it) and the weight's columns multiplied by
  // the same s_k before quantization, so that (x / s) (w s)^T = x w^T exactly in real
  // arithmetic while no outlier channel sets x's scale; in high precision forward(x).
  torch::Tensor forward_channel_smoothed(const torch::Tensor& x);

  void to_float8(const Float8LinearConfig& config);
  void to_high_precision();
  bool is_float8() const { return fp8_ != nullptr; }
  const Float8Probe& probe() const { return state_->settled(); }
  Float8LinearState& state() { return *state_; }
  const Float8LinearConfig* config() const { return fp8_.get(); }
  int64_t in_features() const { return weight.size(1); }
  int64_t out_features() const { return weight.size(0); }

  torch::Tensor weight;
  torch::Tensor bias;
  // An evaluation (a held-out loss between training steps): an FP8 layer quantizes with
  // its current scales but leaves its state as it was (amax histories, probe, step count)
  // and samples no statistics, so that the training steps around it run as without it.
  bool evaluating = false;

 private:
  // The FP8 product with the current scales, the layer's state left as it was.
  torch::Tensor float8_stateless(const torch::Tensor& x, const torch::Tensor& w);
  std::shared_ptr<Float8LinearConfig> fp8_;
  std::shared_ptr<Float8LinearState> state_;
};
TORCH_MODULE(LinearLayer);

// The FP8 linear function itself: y = x w^T + b with FP8 operands as the config says.
// CPU tensors: emulation. CUDA tensors: the project's kernels quantize and
// at::_scaled_mm multiplies (what it cannot take is emulated on the GPU, with a notice).
// state (may be null: no probe, and delayed scaling is refused) persists across steps.
// Throws std::invalid_argument for shapes, dtypes or devices it cannot take.
torch::Tensor float8_linear(const torch::Tensor& x, const torch::Tensor& weight,
                            const torch::Tensor& bias, const Float8LinearConfig& config,
                            Float8LinearState* state = nullptr);

// The latest step's amax of every role of the layers (role_index() order within a layer),
// as one float tensor on `device`: gathered there without waiting (NaN where a role was not
// quantized tensorwise), for one copy to the host with the step's other figures.
torch::Tensor gather_step_amax(const std::vector<Float8LinearState*>& layers,
                               const torch::Device& device);

struct ConvertOptions {
  // Convert only layers whose qualified name and sizes pass this (default: all).
  std::function<bool(const std::string& name, int64_t in_features, int64_t out_features)> filter;
  // Qualified names (or their last component) never converted, e.g. the output head.
  std::vector<std::string> skip_names;
  // FP8 GEMMs need both dimensions divisible by 16 (and by the block size for blocks).
  bool skip_indivisible = true;
  // Layers whose parameters are on a GPU and whose weight has fewer elements than this
  // stay in high precision: quantizing costs more than the FP8 GEMM saves (0: none).
  int64_t gpu_min_weight_elements = int64_t{1} << 20;
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
