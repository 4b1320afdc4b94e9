// defines: RangeTensor, range_tensors(), f32_bytes(), to_write(): four fp32 tensors whose
// values lie far outside the 2^-40..2^23 of the first histogram layout (w.big from 2^10 to
// 2^30, w.small from 2^-60 to 2^-45, w.huge near fp32's largest value, w.denorm fp32's
// smallest subnormal), for the tests of the checkpoint histogram in the CLI and the GUI.
// No torch and no Qt: both kinds of test include it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "fp8wb/core/checkpoint/safetensors.h"

namespace fp8wb::test {

struct RangeTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

inline std::vector<RangeTensor> range_tensors() {
  const int n = 4096;
  std::vector<float> big(n), small(n);
  for (int i = 0; i < n; ++i) {
    big[static_cast<size_t>(i)] = std::exp2f(10.0f + 20.0f * (static_cast<float>(i) + 0.5f) / n);
    small[static_cast<size_t>(i)] = std::exp2f(-60.0f + 15.0f * (static_cast<float>(i) + 0.5f) / n);
  }
  return {{"w.big", {64, 64}, big},
          {"w.small", {64, 64}, small},
          {"w.huge", {4}, std::vector<float>(4, 3e38f)},
          {"w.denorm", {4}, std::vector<float>(4, std::numeric_limits<float>::denorm_min())}};
}

// fp32 values as a safetensors F32 tensor's bytes (little-endian, as on the hosts tested).
inline std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

inline std::vector<TensorToWrite> to_write(const std::vector<RangeTensor>& tensors) {
  std::vector<TensorToWrite> out;
  for (const auto& t : tensors) out.push_back({t.name, StDtype::F32, t.shape, f32_bytes(t.values)});
  return out;
}

}  // namespace fp8wb::test
