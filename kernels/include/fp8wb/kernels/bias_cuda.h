// defines: add_bias_rows_bf16_cuda(), add_bias_rows_f32_cuda(): a linear layer's bias added
// in place to each row of its GEMM's output on the GPU. ATen adds a broadcast [N] bias to
// an [M, N] tensor through its strided (unvectorised) loop, at about a third of the
// memory's bandwidth; these read and write 16 bytes a thread. The sum is rounded as ATen's
// add rounds it on the GPU (fp32 sum, bf16 to nearest even), so the bits are the same.
#pragma once

#include <cstdint>

#include "fp8wb/kernels/codec_cuda.h"

namespace fp8wb {

// Whether the 16-byte kernels take this problem: cols a multiple of 8 (bf16) or 4 (fp32),
// y and bias 16-byte aligned. Where not, the caller adds the bias another way.
bool bias_rows_vectorisable(const void* y, const void* bias, int64_t cols, int element_bytes);

// y[r, c] = bf16(float(y[r, c]) + float(bias[c])) for a row-major rows x cols y (device
// pointers, bf16 bits). Requires bias_rows_vectorisable().
void add_bias_rows_bf16_cuda(uint16_t* y, const uint16_t* bias, int64_t rows, int64_t cols,
                             fp8wb_stream_t stream = nullptr);

// y[r, c] += bias[c] in fp32. Requires bias_rows_vectorisable().
void add_bias_rows_f32_cuda(float* y, const float* bias, int64_t rows, int64_t cols,
                            fp8wb_stream_t stream = nullptr);

}  // namespace fp8wb
