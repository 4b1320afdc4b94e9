// defines: EncodeOptions, encode_f32(), encode_bf16(), decode_f32(), decode_table():
// bulk, multi-threaded CPU codecs over raw buffers.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "fp8wb/kernels/format.h"

namespace fp8wb {

struct EncodeOptions {
  Format format = Format::E4M3FN;
  Overflow overflow = Overflow::Saturate;
  Rounding rounding = Rounding::NearestEven;
  uint64_t seed = 0;  // stochastic rounding: element i draws sr_bits(seed, i)
};

// threads <= 0: one per hardware thread. Results do not depend on the thread count.
void encode_f32(const float* in, uint8_t* out, size_t n, const EncodeOptions& opt, int threads = 0);
// bf16 given as its 16-bit patterns; the same codes as encoding the widened fp32 values.
void encode_bf16(const uint16_t* in, uint8_t* out, size_t n, const EncodeOptions& opt,
                 int threads = 0);
void decode_f32(const uint8_t* in, float* out, size_t n, Format format, int threads = 0);

// The fp32 value of every code (codes past 2^bits repeat the low bits' values).
const std::array<float, 256>& decode_table(Format format);

int hardware_threads();

}  // namespace fp8wb
