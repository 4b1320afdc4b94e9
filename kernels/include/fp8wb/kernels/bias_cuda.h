// defines: add_bias_rows_bf16_cuda(), add_bias_rows_f32_cuda(): a linear layer's bias added
// in place to each row of its GEMM's output on the GPU. ATen adds a broadcast [N] bias to
// an [M, N] tensor through its strided (unvectorised) loop, at about a third of the
// memory's bandwidth; these read and write 16 bytes a thread. The sum is rounded as ATen's
// add rounds it on the GPU (fp32 sum, bf16 to nearest even), so the bits are the same.
// bias_grad_bf16_cuda(): the bias's gradient, the column sums of the output's gradient, at
// the memory's bandwidth (ATen's column reduction runs at about a third of it);
// layer_norm_affine_grad_bf16_cuda(): a layer norm's weight and bias gradients, the same
// way (ATen's kernel for them ran at a quarter of the bandwidth).
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

// The floats bias_grad_bf16_cuda() needs as its workspace for a rows x cols gradient.
int64_t bias_grad_workspace(int64_t rows, int64_t cols);

// out[c] = float(bf16(sum over r of float(dy[r, c]))) for a row-major rows x cols dy (device
// pointers, bf16 bits): the column sums in fp32, rounded to bf16 as ATen's sum of a bf16
// tensor returns them, then widened. Deterministic: each block sums its rows' share of 256
// columns in a fixed order into `workspace` (bias_grad_workspace() floats), and a second
// pass adds the shares in order. Requires bias_rows_vectorisable(dy, out, cols, 2) and
// cols a multiple of 8.
void bias_grad_bf16_cuda(const uint16_t* dy, int64_t rows, int64_t cols, float* workspace,
                         float* out, fp8wb_stream_t stream = nullptr);

// The floats layer_norm_affine_grad_bf16_cuda() needs as its workspace.
int64_t layer_norm_affine_grad_workspace(int64_t rows, int64_t cols);

// A layer norm y = (x - mean) * rstd * w + b over rows of a row-major rows x cols x: the
// gradients of w and b from dy (bf16 bits, as x), fp32 mean[rows] and rstd[rows]:
// dw[c] = sum over r of dy * (x - mean) * rstd, db[c] = sum over r of dy, each in fp32,
// rounded to bf16 (as ATen's gradients of a bf16 layer norm's weight and bias are) and
// widened. Deterministic, in a fixed order as bias_grad_bf16_cuda(). Requires dy and x
// 16-byte aligned and cols a multiple of 8.
void layer_norm_affine_grad_bf16_cuda(const uint16_t* dy, const uint16_t* x, const float* mean,
                                      const float* rstd, int64_t rows, int64_t cols,
                                      float* workspace, float* dw, float* db,
                                      fp8wb_stream_t stream = nullptr);

}  // namespace fp8wb
