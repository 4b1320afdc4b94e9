#include "fp8wb/kernels/delayed_scaling.h"

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "fp8wb/kernels/recipe.h"

namespace fp8wb {

void validate_delayed_config(const DelayedScalingConfig& c) {
  if (c.window < 1) {
    throw std::invalid_argument("window " + std::to_string(c.window) +
                                " is invalid: the amax history needs at least 1 entry");
  }
  if (c.window > (1 << 24)) {
    throw std::invalid_argument("window " + std::to_string(c.window) +
                                " is too large (at most 16777216)");
  }
  if (c.margin < -64 || c.margin > 64) {
    throw std::invalid_argument("margin " + std::to_string(c.margin) +
                                " is out of range [-64, 64]");
  }
}

DelayedScaler::DelayedScaler(Format format, const DelayedScalingConfig& config)
    : format_(format), config_(config) {
  validate_delayed_config(config);
  ring_.assign(static_cast<size_t>(config.window), 0.0f);
}

float DelayedScaler::scale_for_step(float current_amax) const {
  if (steps_ == 0 && config_.initial == InitialScale::BootstrapCurrent) {
    return scale_for_amax(current_amax, format_info(format_).max_finite, config_.margin);
  }
  return scale_;
}

void DelayedScaler::update(float amax) {
  const int w = config_.window;
  head_ = (head_ + w - 1) % w;  // roll: the newest entry goes in front
  ring_[static_cast<size_t>(head_)] = amax;
  ++steps_;
  float amax_h = 0;
  if (config_.algo == AmaxAlgo::MostRecent) {
    amax_h = amax;
  } else {
    amax_h = *std::max_element(ring_.begin(), ring_.end());
  }
  amax_h_ = amax_h;
  if (!(amax_h > 0) || !std::isfinite(amax_h)) return;  // keep the previous scale
  // In fp32, as Transformer Engine computes it: (fmax / amax_h) / 2^margin.
  const float s =
      std::ldexp(static_cast<float>(format_info(format_).max_finite) / amax_h, -config_.margin);
  scale_ = std::isinf(s) ? FLT_MAX : s;
}

std::vector<float> DelayedScaler::history() const {
  std::vector<float> h(ring_.size());
  for (size_t i = 0; i < ring_.size(); ++i)
    h[i] = ring_[(static_cast<size_t>(head_) + i) % ring_.size()];
  return h;
}

float DelayedScaler::history_amax() const {
  return amax_h_;
}

}  // namespace fp8wb
