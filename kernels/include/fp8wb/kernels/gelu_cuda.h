// defines: gelu_lookup_bf16_cuda(), gelu_backward_lookup_bf16_cuda(): GELU and its input
// gradient on bf16 tensors by table lookup on the GPU. A bf16 input has 65536 bit
// patterns, so a table made once by the reference implementation itself (PyTorch's GELU
// on every pattern) gives its bits for every input; the backward's table holds the fp32
// factor that multiplies the incoming gradient.
#pragma once

#include <cstdint>

#include "fp8wb/kernels/codec_cuda.h"

namespace fp8wb {

// Entries of a GELU table: one per bf16 bit pattern.
inline constexpr int64_t kGeluTableSize = 65536;

// y[i] = table[x[i]] for n bf16 bit patterns (device pointers; table: kGeluTableSize
// entries, GELU of each pattern as bf16 bits).
void gelu_lookup_bf16_cuda(const uint16_t* x, uint16_t* y, int64_t n, const uint16_t* table,
                           fp8wb_stream_t stream = nullptr);

// dx[i] = bf16(float(dy[i]) * dtable[x[i]]), rounded to nearest even (device pointers;
// dtable: kGeluTableSize fp32 entries, GELU's derivative at each pattern as the reference
// computes it).
void gelu_backward_lookup_bf16_cuda(const uint16_t* dy, const uint16_t* x, uint16_t* dx, int64_t n,
                                    const float* dtable, fp8wb_stream_t stream = nullptr);

}  // namespace fp8wb
