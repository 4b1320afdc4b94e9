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

#include "fp8wb/core/run_config.h"
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

// A model: its loss on a batch, in the compute dtype.
class TrainModel : public torch::nn::Module {
 public:
  virtual torch::Tensor loss(const Batch& b) = 0;
  torch::ScalarType compute_dtype = torch::kFloat;
};

// Builds the run's model (seeded: two calls give identical weights).
std::shared_ptr<TrainModel> make_model(const RunConfig& c, int64_t vocab);
std::unique_ptr<DataSource> make_data(const RunConfig& c);

// The model's LinearLayers by qualified name.
std::vector<std::pair<std::string, LinearLayerImpl*>> linear_layers(torch::nn::Module& m);

}  // namespace fp8wb::train
