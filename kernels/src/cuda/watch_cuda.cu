// The GPU side of a watcher of another program's training (watch_cuda.h): a queue of
// tensor amaxes read back without waiting, and a sampled tensor's statistics, on the
// caller's stream, built on quantize_cuda.cu's API.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "fp8wb/kernels/watch_cuda.h"
#include "gpu_runtime.h"

namespace fp8wb {
namespace {

cudaStream_t as_stream(fp8wb_stream_t s) {
  return reinterpret_cast<cudaStream_t>(s);
}

void check_device_tensor(const DeviceTensor& x) {
  if (x.rows < 0 || x.cols < 0) {
    throw std::invalid_argument("tensor shape " + std::to_string(x.rows) + "x" +
                                std::to_string(x.cols) + " is negative");
  }
  if (x.f32 && x.bf16) throw std::invalid_argument("the tensor has both fp32 and bf16 data");
  if (x.rows * x.cols > 0 && !x.f32 && !x.bf16)
    throw std::invalid_argument("a tensor with no data");
}

// Page-locked host memory, freed with its owner.
struct PinnedFloats {
  float* p = nullptr;
  explicit PinnedFloats(size_t n) {
    FP8WB_GPU_CHECK(cudaMallocHost(reinterpret_cast<void**>(&p), n * sizeof(float)));
  }
  ~PinnedFloats() {
    if (p) (void)cudaFreeHost(p);
  }
  PinnedFloats(const PinnedFloats&) = delete;
  PinnedFloats& operator=(const PinnedFloats&) = delete;
};

// A tensorwise layout's group amax and tensor amax: two floats an entry.
constexpr size_t kChunk = 512;  // entries a chunk

}  // namespace

struct DeviceAmaxQueue::Batch {
  struct Chunk {
    DeviceArray<float> dev{2 * kChunk};
    PinnedFloats host{2 * kChunk};
  };
  std::vector<std::unique_ptr<Chunk>> chunks;
  size_t count = 0;
  cudaEvent_t done = nullptr;
  Batch() { FP8WB_GPU_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming)); }
  ~Batch() {
    if (done) (void)cudaEventDestroy(done);
  }
};

DeviceAmaxQueue::DeviceAmaxQueue() = default;
DeviceAmaxQueue::~DeviceAmaxQueue() = default;

std::unique_ptr<DeviceAmaxQueue::Batch> DeviceAmaxQueue::take_free() {
  if (free_.empty()) return std::make_unique<Batch>();
  std::unique_ptr<Batch> b = std::move(free_.back());
  free_.pop_back();
  b->count = 0;
  return b;
}

size_t DeviceAmaxQueue::push(const DeviceTensor& x, fp8wb_stream_t stream) {
  check_device_tensor(x);
  if (!open_) open_ = take_free();
  Batch& b = *open_;
  const size_t i = b.count;
  if (i / kChunk >= b.chunks.size()) b.chunks.push_back(std::make_unique<Batch::Chunk>());
  float* slot = b.chunks[i / kChunk]->dev.p + 2 * (i % kChunk);
  QuantRecipe tensorwise;  // the default recipe: tensorwise
  const GroupLayout L = make_layout(tensorwise, x.rows, x.cols);
  group_amax_cuda(x, L, slot, slot + 1, stream);
  b.count = i + 1;
  return i;
}

void DeviceAmaxQueue::close(fp8wb_stream_t stream) {
  if (!open_ || open_->count == 0) return;
  Batch& b = *open_;
  for (size_t c = 0; c * kChunk < b.count; ++c) {
    const size_t n = std::min(kChunk, b.count - c * kChunk);
    FP8WB_GPU_CHECK(cudaMemcpyAsync(b.chunks[c]->host.p, b.chunks[c]->dev.p, 2 * n * sizeof(float),
                                    cudaMemcpyDeviceToHost, as_stream(stream)));
  }
  FP8WB_GPU_CHECK(cudaEventRecord(b.done, as_stream(stream)));
  closed_.push_back(std::move(open_));
}

bool DeviceAmaxQueue::pop(std::vector<float>& amax, bool wait) {
  if (closed_.empty()) return false;
  Batch& b = *closed_.front();
  if (wait) {
    FP8WB_GPU_CHECK(cudaEventSynchronize(b.done));
  } else {
    const cudaError_t e = cudaEventQuery(b.done);
    if (e == cudaErrorNotReady) {
      (void)cudaGetLastError();  // not an error: clear it
      return false;
    }
    FP8WB_GPU_CHECK(e);
  }
  amax.resize(b.count);
  for (size_t i = 0; i < b.count; ++i) amax[i] = b.chunks[i / kChunk]->host.p[2 * (i % kChunk) + 1];
  free_.push_back(std::move(closed_.front()));
  closed_.pop_front();
  return true;
}

struct DeviceStatsWorkspace::Buffers {
  template <class T>
  struct Grown {
    std::unique_ptr<DeviceArray<T>> a;
    size_t n = 0;
    T* at_least(size_t want) {
      want = std::max<size_t>(want, 1);
      if (want > n) {
        a.reset();
        a = std::make_unique<DeviceArray<T>>(want);
        n = want;
      }
      return a->p;
    }
  };
  Grown<float> amax, scale, scale_inv, global;
  Grown<uint8_t> scale_codes;
  Grown<StatsBuffer> stats;
  Grown<double> map;
};

DeviceStatsWorkspace::DeviceStatsWorkspace() : b(std::make_unique<Buffers>()) {}
DeviceStatsWorkspace::~DeviceStatsWorkspace() = default;

TensorStats quantize_stats_cuda(const DeviceTensor& x, const QuantRecipe& recipe, float scale,
                                const StatsOptions& so, fp8wb_stream_t stream,
                                DeviceStatsWorkspace& ws, float* scale_used) {
  check_device_tensor(x);
  validate_recipe(recipe);
  if (scale > 0 && recipe.kind != ScalingKind::Tensorwise) {
    throw std::invalid_argument("a given scale is tensorwise: the recipe is not");
  }
  const GroupLayout L = make_layout(recipe, x.rows, x.cols);
  const auto groups = static_cast<size_t>(L.group_count());
  const MapGrid grid = make_map_grid(L, so.map_max_cells);
  const auto cells = static_cast<size_t>(grid.cell_count());
  DeviceStatsWorkspace::Buffers& b = *ws.b;
  float* d_amax = b.amax.at_least(groups + 1);
  float* d_scale = b.scale.at_least(groups);
  float* d_scale_inv = b.scale_inv.at_least(groups);
  uint8_t* d_codes = b.scale_codes.at_least(groups);
  float* d_global = b.global.at_least(1);
  StatsBuffer* d_stats = b.stats.at_least(1);
  double* d_map = so.error_map ? b.map.at_least(2 * cells) : nullptr;
  const cudaStream_t s = as_stream(stream);
  const float given[2] = {scale, scale > 0 ? 1.0f / scale : 0.0f};
  if (scale > 0) {
    FP8WB_GPU_CHECK(cudaMemcpyAsync(d_scale, &given[0], sizeof(float), cudaMemcpyHostToDevice, s));
    FP8WB_GPU_CHECK(
        cudaMemcpyAsync(d_scale_inv, &given[1], sizeof(float), cudaMemcpyHostToDevice, s));
  } else {
    group_amax_cuda(x, L, d_amax, d_amax + groups, stream);
    compute_scales_cuda(recipe, L, d_amax, d_amax + groups, d_scale, d_scale_inv, d_codes, d_global,
                        stream);
  }
  DeviceStatsTargets targets{so.enabled ? d_stats : nullptr, d_map, grid, so.histogram};
  targets.fresh = true;
  quantize_cuda(x, recipe, L, d_scale, d_scale_inv, nullptr, nullptr, targets, stream);
  TensorStats out;
  float first_scale = 0;
  FP8WB_GPU_CHECK(cudaMemcpyAsync(&first_scale, d_scale, sizeof(float), cudaMemcpyDeviceToHost, s));
  if (so.enabled) {
    FP8WB_GPU_CHECK(
        cudaMemcpyAsync(&out.raw, d_stats, sizeof(StatsBuffer), cudaMemcpyDeviceToHost, s));
  }
  std::vector<double> m(d_map ? 2 * cells : 0);
  if (!m.empty()) {
    FP8WB_GPU_CHECK(
        cudaMemcpyAsync(m.data(), d_map, m.size() * sizeof(double), cudaMemcpyDeviceToHost, s));
  }
  FP8WB_GPU_CHECK(cudaStreamSynchronize(s));
  out.map_grid = grid;
  if (!m.empty()) {
    out.map_sq_err.assign(m.begin(), m.begin() + static_cast<std::ptrdiff_t>(cells));
    out.map_sq_sum.assign(m.begin() + static_cast<std::ptrdiff_t>(cells), m.end());
  }
  if (scale_used) *scale_used = first_scale;
  return out;
}

void copy_to_host_cuda(const DeviceTensor& x, void* out, fp8wb_stream_t stream) {
  check_device_tensor(x);
  const auto n = static_cast<size_t>(x.rows * x.cols);
  if (n == 0) return;
  const void* src = x.f32 ? static_cast<const void*>(x.f32) : static_cast<const void*>(x.bf16);
  const size_t bytes = n * (x.f32 ? sizeof(float) : sizeof(uint16_t));
  FP8WB_GPU_CHECK(cudaMemcpyAsync(out, src, bytes, cudaMemcpyDeviceToHost, as_stream(stream)));
  FP8WB_GPU_CHECK(cudaStreamSynchronize(as_stream(stream)));
}

}  // namespace fp8wb
