// Torch translation unit (CUDA builds): gelu() on CUDA bf16 tensors by the table kernels
// of fp8wb/kernels/gelu_cuda.h, with its own autograd node; the tables are made once per
// device by PyTorch's GELU and GELU backward themselves, over every bf16 bit pattern.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/torch.h>

#include <mutex>
#include <numeric>
#include <vector>

#include "fp8wb/core/torch/layers.h"
#include "fp8wb/kernels/gelu_cuda.h"

namespace fp8wb {
namespace {

struct GeluTables {
  at::Tensor forward;   // bf16 [65536]: gelu(x) for x = each bit pattern
  at::Tensor backward;  // fp32 [65536]: the factor gelu_backward multiplies dy by
};

// The tables of x's device, made on first use. They live as long as the process (kept
// out of static destruction, which would run after the CUDA runtime's teardown).
const GeluTables& tables(const at::Device& device) {
  static std::mutex mu;
  static auto* by_device = new std::vector<GeluTables>();
  const std::lock_guard<std::mutex> lock(mu);
  const size_t i = static_cast<size_t>(device.index());
  if (by_device->size() <= i) by_device->resize(i + 1);
  GeluTables& t = (*by_device)[i];
  if (!t.forward.defined()) {
    std::vector<int16_t> bits(static_cast<size_t>(kGeluTableSize));
    std::iota(bits.begin(), bits.end(), int16_t{0});  // wraps through the negative halves
    const at::Tensor x =
        torch::from_blob(bits.data(), {kGeluTableSize}, at::kShort).view(at::kBFloat16).to(device);
    const at::NoGradGuard no_grad;
    t.forward = at::gelu(x).contiguous();
    // dy = 1 in fp32: the bf16 kernel computes float(dy) * factor(float(x)) in fp32, and
    // 1 * factor is the factor itself.
    const at::Tensor xf = x.to(at::kFloat);
    t.backward = at::gelu_backward(at::ones_like(xf), xf).contiguous();
    // Made on this thread's current stream; later calls may run on another.
    at::cuda::getCurrentCUDAStream(device.index()).synchronize();
  }
  return t;
}

fp8wb_stream_t current_stream() {
  return reinterpret_cast<fp8wb_stream_t>(at::cuda::getCurrentCUDAStream().stream());
}

const uint16_t* bits(const at::Tensor& t) {
  return reinterpret_cast<const uint16_t*>(t.data_ptr<at::BFloat16>());
}

at::Tensor gelu_forward_cuda(const at::Tensor& x) {
  const c10::cuda::CUDAGuard guard(x.device());
  const GeluTables& t = tables(x.device());
  at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
  gelu_lookup_bf16_cuda(bits(x), reinterpret_cast<uint16_t*>(y.data_ptr<at::BFloat16>()), x.numel(),
                        bits(t.forward), current_stream());
  return y;
}

at::Tensor gelu_backward_cuda(const at::Tensor& dy_in, const at::Tensor& x) {
  const at::Tensor dy = dy_in.contiguous();
  if (dy.scalar_type() != at::kBFloat16 || dy.sizes() != x.sizes() || dy.device() != x.device() ||
      reinterpret_cast<uintptr_t>(dy.data_ptr()) % 16 != 0) {
    return at::gelu_backward(dy_in, x);
  }
  const c10::cuda::CUDAGuard guard(x.device());
  const GeluTables& t = tables(x.device());
  at::Tensor dx = at::empty_like(x, at::MemoryFormat::Contiguous);
  gelu_backward_lookup_bf16_cuda(bits(dy), bits(x),
                                 reinterpret_cast<uint16_t*>(dx.data_ptr<at::BFloat16>()),
                                 x.numel(), t.backward.data_ptr<float>(), current_stream());
  return dx;
}

struct GeluFunction : torch::autograd::Function<GeluFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x) {
    ctx->save_for_backward({x});
    return gelu_forward_cuda(x);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const at::Tensor x = ctx->get_saved_variables()[0];
    return {gelu_backward_cuda(grad[0], x)};
  }
};

}  // namespace

namespace detail {
at::Tensor gelu_tables_cuda(const at::Tensor& x) {
  return GeluFunction::apply(x);
}
}  // namespace detail

}  // namespace fp8wb
