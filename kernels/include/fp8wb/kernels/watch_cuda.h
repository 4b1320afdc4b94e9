// defines: DeviceAmaxQueue, DeviceStatsWorkspace, quantize_stats_cuda(),
// copy_to_host_cuda(): what a watcher of another program's training (libfp8wb_watch.so)
// needs on the GPU, on that program's stream: every step's amax of its tensors, read back
// without waiting for the GPU, and a sampled step's statistics, of which only the
// statistics come back to the host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "fp8wb/kernels/quantize_cpu.h"
#include "fp8wb/kernels/quantize_cuda.h"

namespace fp8wb {

// Tensor amaxes (over finite values, as group_amax_cuda() gives them) gathered on the GPU
// a batch at a time. push() queues a tensor's amax into the open batch behind the stream's
// work; close() sends the batch to page-locked host memory behind it and records an event;
// pop() hands the oldest closed batch back once its event has passed (or waits for it).
// Buffers are kept for reuse: after the first steps a batch allocates nothing.
class DeviceAmaxQueue {
 public:
  DeviceAmaxQueue();
  ~DeviceAmaxQueue();
  DeviceAmaxQueue(const DeviceAmaxQueue&) = delete;
  DeviceAmaxQueue& operator=(const DeviceAmaxQueue&) = delete;

  // The amax of x (fp32 or bf16 device data) into the open batch; returns its index there.
  size_t push(const DeviceTensor& x, fp8wb_stream_t stream);
  // Closes the open batch (nothing happens when it is empty).
  void close(fp8wb_stream_t stream);
  // The oldest closed batch's amaxes, in push order; false when there is none, or (without
  // wait) when the GPU has not finished it yet.
  bool pop(std::vector<float>& amax, bool wait);
  size_t closed() const { return closed_.size(); }

 private:
  struct Batch;
  std::unique_ptr<Batch> take_free();
  std::unique_ptr<Batch> open_;
  std::deque<std::unique_ptr<Batch>> closed_;
  std::vector<std::unique_ptr<Batch>> free_;
};

// Device scratch for quantize_stats_cuda(), grown as needed and kept between calls.
class DeviceStatsWorkspace {
 public:
  DeviceStatsWorkspace();
  ~DeviceStatsWorkspace();
  DeviceStatsWorkspace(const DeviceStatsWorkspace&) = delete;
  DeviceStatsWorkspace& operator=(const DeviceStatsWorkspace&) = delete;

  struct Buffers;
  std::unique_ptr<Buffers> b;
};

// One quantization of device tensor x with statistics on `stream` (no codes kept): with
// scale > 0 tensorwise with that scale (delayed scaling's; the recipe must be tensorwise),
// else the recipe's current scaling. Waits for the stream, then returns the statistics
// (and the error map where asked for) and, in *scale_used, the tensorwise or first group's
// scale. The same figures as quantize()/quantize_current() on the host tensor (sums may
// differ in the last bits: the order of addition differs).
TensorStats quantize_stats_cuda(const DeviceTensor& x, const QuantRecipe& recipe, float scale,
                                const StatsOptions& so, fp8wb_stream_t stream,
                                DeviceStatsWorkspace& ws, float* scale_used);

// Copies device tensor x (rows x cols, fp32 or bf16) into host memory `out` (rows * cols
// elements of its type), after the stream's work; waits for it.
void copy_to_host_cuda(const DeviceTensor& x, void* out, fp8wb_stream_t stream);

}  // namespace fp8wb
