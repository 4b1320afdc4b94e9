// defines: EvalOptions, EvalResult, evaluate_checkpoint(): what FP8 does to a Hugging
// Face checkpoint's loss (`fp8wb eval`): its mean cross-entropy over a token file's
// non-overlapping windows in high precision and with FP8 linears under each chosen
// recipe, with each FP8 layer's output SQNR. Plain structs, no torch.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fp8wb/core/config/run_config.h"

namespace fp8wb {

struct EvalOptions {
  std::string hf;    // the checkpoint's folder
  std::string data;  // a token file (token_file.h)
  // Window length T: window k predicts tokens kT+1..kT+T from kT..kT+T-1. 0: the config's
  // max_position_embeddings, at most 1024.
  int64_t context = 0;
  int64_t windows = 0;  // the first N windows; 0: all of them
  std::string dtype;    // "fp32", or empty: the checkpoint's (bf16 stays bf16)
  std::string device = "cpu";
  int batch = 8;  // windows per forward
  // One config per FP8 evaluation: recipe, formats, margin, the GEMMs in FP8 (scaling is
  // always current: an evaluation has no history).
  std::vector<RunConfig> fp8;
  // Called after each batch of each pass (pass 0 high precision, then one per config).
  std::function<void(int pass, int64_t done, int64_t total)> progress;
};

struct EvalLayer {
  std::string layer;
  double sqnr_db =
      0;  // the FP8 GEMM's output against its high-precision product, mean over batches
};

struct EvalFp8 {
  std::string recipe, formats;
  double loss = 0;
  std::vector<EvalLayer> layers;  // the FP8 layers in the model's order
  std::vector<std::string> kept;  // "layer: why" for those left in high precision
};

struct EvalResult {
  std::string architecture, dtype;
  int64_t context = 0, windows = 0, tokens = 0;  // tokens predicted
  double loss_high_precision = 0;
  std::vector<EvalFp8> fp8;
};

// Throws std::invalid_argument for a checkpoint or token file it cannot take (naming it),
// a token at or past the vocabulary, too few tokens for one window.
EvalResult evaluate_checkpoint(const EvalOptions& o);

}  // namespace fp8wb
