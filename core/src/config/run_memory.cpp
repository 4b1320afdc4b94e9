// What a run holds in memory, estimated from its config, and the check that refuses a run
// that would not fit (run_config.h: estimate_run_memory(), check_run_memory()). Plain C++.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>

#include "fp8wb/core/config/run_config.h"

namespace fp8wb {

void check_run_memory(const RunConfig& c, uint64_t limit) {
  if (limit == 0) limit = run_memory_limit();
  const MemoryEstimate m = estimate_run_memory(c);
  if (m.total <= static_cast<double>(limit)) return;
  const bool decoder = c.model != ModelKind::Mlp;
  struct Part {
    double bytes;
    const char* field;  // the field that weighs most in it
    const char* with;   // the fields it is weighed with
  };
  const Part parts[] = {
      {m.parameters, decoder ? "d_model" : "width", decoder ? "layers" : "depth, features"},
      {m.activations, "batch", decoder ? "context, d_model, layers" : "width, depth, features"},
      {m.histories, "window", "the number of FP8 layers"},
      {m.metrics, "steps", "log_interval"}};
  const auto* worst = &parts[0];
  for (const auto& p : parts) {
    if (p.bytes > worst->bytes) worst = &p;
  }
  auto gb = [](double b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g GB", b / 1e9);
    return std::string(buf);
  };
  const std::string need =
      "the run would need about " + gb(m.total) + " of memory (parameters and optimizer state " +
      gb(m.parameters) + ", activations " + gb(m.activations) + ", amax histories " +
      gb(m.histories) + ", metric history " + gb(m.metrics) + "), over the limit of " +
      gb(static_cast<double>(limit)) + " (this machine's memory)";
  const std::string field = worst->field, with = worst->with;
  throw ConfigError(field, "with " + with + ", " + need,
                    "config field '" + field + "' (with " + with + "): " + need);
}

MemoryEstimate estimate_run_memory(const RunConfig& c) {
  MemoryEstimate m;
  const double f4 = 4;  // fp32 bytes
  const double batch = c.batch;
  double params = 0, acts = 0, fp8_layers = 0;
  if (c.model == ModelKind::Gpt) {
    const double d = c.d_model, T = c.context, V = 256;  // the corpus's characters: < 256
    params = V * d + T * d + c.layers * (12 * d * d + 13 * d) + d * V;
    // Per block: the residual stream, norms, qkv, attention scores and weights, the MLP.
    acts = c.layers * batch * T * (16 * d + 3.0 * c.heads * T) + 4 * batch * T * V;
    fp8_layers = 4.0 * c.layers;
  } else if (c.model == ModelKind::Llama) {
    const double d = c.d_model, T = c.context, I = c.intermediate;
    const double V = c.vocab > 0 ? c.vocab : 256;  // 0: the corpus's characters, < 256
    const double kv = d * c.kv_heads / std::max(1, c.heads);
    params = V * d * (c.tie_embeddings ? 1 : 2) + d +
             c.layers * (2 * d * d + 2 * d * kv + 3 * d * I + 2 * d + 2 * kv);
    // Per layer: the residual stream, norms, q, k, v (repeated), rotary copies, attention
    // scores and weights, gate, up, their product.
    acts = c.layers * batch * T * (14 * d + 4 * I + 3.0 * c.heads * T) + 4 * batch * T * V;
    fp8_layers = 7.0 * c.layers;
  } else {
    const double w = c.width, f = c.features;
    params = c.depth <= 1 ? f * f : 2 * f * w + (c.depth - 2.0) * w * w;
    acts = batch * (4 * f + 4.0 * c.depth * w);
    fp8_layers = c.depth;
  }
  const double models = c.reference && c.fp8 ? 2 : 1;
  // Weights, gradients and AdamW's two moments in fp32, and an FP8 copy of each weight.
  m.parameters = models * params * (4 * f4 + 2);
  // Kept for the backward pass, plus the FP8 copies and temporaries of the quantization.
  m.activations = models * acts * f4 * 2;
  m.histories = c.fp8 ? fp8_layers * 3 * c.window * f4 * 2 : 0;
  // What a viewer holds of a run: 8 scalars a logged step.
  m.metrics = static_cast<double>(c.steps) / c.log_interval * 8 * 8;
  m.total = m.parameters + m.activations + m.histories + m.metrics;
  return m;
}

uint64_t run_memory_limit() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return uint64_t{1} << 40;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}
}  // namespace fp8wb
