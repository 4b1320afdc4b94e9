// Torch translation unit: `fp8wb bench --comm` (comm_bench.h). Each rank's weight matrix
// comes from its rank alone (a counter-based generator), so every rank can rebuild what
// the others sent and check what the process group handed back, byte for byte.
#include "fp8wb/core/train/comm_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "distributed_group.h"
#include "fp8wb/core/median.h"
#include "fp8wb/kernels/codec_cpu.h"
#include "fp8wb/kernels/float16.h"
#include "fp8wb/kernels/format.h"

namespace fp8wb {
namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// What rank `rank` sends: its weights (normal values, a spread that differs by row), the
// FP8 codes and row scales of them, and their bf16 bit patterns.
struct Payload {
  std::vector<float> weights;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  std::vector<uint16_t> bf16;
};

Payload payload(int rank, int64_t rows, int64_t cols) {
  Payload p;
  const size_t n = static_cast<size_t>(rows * cols);
  p.weights.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t a = splitmix((static_cast<uint64_t>(rank) << 40) ^ (2 * i));
    const uint64_t b = splitmix((static_cast<uint64_t>(rank) << 40) ^ (2 * i + 1));
    const double u1 = (static_cast<double>(a >> 11) + 1.0) / 9007199254740993.0;
    const double u2 = static_cast<double>(b >> 11) / 9007199254740992.0;
    const double row_spread = std::ldexp(1.0, static_cast<int>((i / cols) % 16) - 8);
    p.weights[i] = static_cast<float>(row_spread * std::sqrt(-2.0 * std::log(u1)) *
                                      std::cos(6.283185307179586 * u2));
  }
  const double max_finite = format_info(Format::E4M3FN).max_finite;
  p.scales.resize(static_cast<size_t>(rows));
  std::vector<float> scaled(n);
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 0;
    for (int64_t c = 0; c < cols; ++c)
      amax = std::max(amax, std::fabs(p.weights[static_cast<size_t>(r * cols + c)]));
    const float scale = amax > 0 ? static_cast<float>(max_finite / amax) : 1.0f;
    p.scales[static_cast<size_t>(r)] = scale;
    for (int64_t c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r * cols + c);
      scaled[i] = p.weights[i] * scale;
    }
  }
  p.codes.resize(n);
  encode_f32(scaled.data(), p.codes.data(), n, EncodeOptions{});
  p.bf16.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const float b = round_bf16(p.weights[i]);
    uint32_t bits = 0;
    std::memcpy(&bits, &b, sizeof bits);
    p.bf16[i] = static_cast<uint16_t>(bits >> 16);
  }
  return p;
}

template <class T>
at::Tensor tensor_of(const std::vector<T>& v, std::vector<int64_t> shape, at::ScalarType type,
                     const torch::Device& device) {
  // from_blob does not own the memory: clone, then move to the device.
  return at::from_blob(const_cast<T*>(v.data()), shape, at::TensorOptions().dtype(type))
      .clone()
      .to(device);
}

bool same_bytes(const at::Tensor& t, const void* want, size_t bytes) {
  const at::Tensor c = t.to(torch::kCPU).contiguous();
  return static_cast<size_t>(c.numel() * c.element_size()) == bytes &&
         std::memcmp(c.data_ptr(), want, bytes) == 0;
}

class Timer {
 public:
  explicit Timer(const torch::Device& d) : cuda_(d.is_cuda()) {}
  template <class F>
  double ms(F&& f) const {
    sync();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    sync();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }

 private:
  void sync() const {
    if (cuda_) torch::cuda::synchronize();
  }
  bool cuda_;
};

}  // namespace

void check_comm_bench_options(const CommBenchOptions& opt) {
  // rows x cols is compared by division: rows and cols may each be large.
  if (opt.rows < 1 || opt.cols < 1 || opt.rows > kCommBenchMaxElements / opt.cols) {
    throw std::invalid_argument(
        "--rows " + std::to_string(opt.rows) + " x --cols " + std::to_string(opt.cols) +
        ": the weight matrix must have at least one element and at most 2^30 (1073741824)");
  }
  if (opt.iters < 1 || opt.warmup < 0) throw std::invalid_argument("at least one timed exchange");
  if (opt.device != "cpu" && opt.device != "cuda")
    throw std::invalid_argument("device \"" + opt.device + "\": cpu (Gloo) or cuda (NCCL)");
}

CommBenchMemory estimate_comm_bench_memory(const CommBenchOptions& opt, int world) {
  const double n = static_cast<double>(opt.rows) * static_cast<double>(opt.cols);
  const double w = std::max(1, world);
  // A payload: fp32 weights, codes, bf16 (7 bytes an element) and a scale a row; while
  // one is built, its fp32 scaled copy (4 more).
  const double payload = 7 * n + 4 * static_cast<double>(opt.rows);
  const double building = 4 * n;
  // The all-reduce: the source, the sum kept, the next copy and the process group's
  // working copy (rank 0 compares with a sum of its own after); the bf16 gather: the
  // source (and its bytes where bf16 goes as uint8), the process group's flat result, the
  // slots it fills and the previous exchange's.
  const double all_reduce = 16 * n;
  const double gather = 4 * n + 3 * (w * 2 * n);
  const double exchanges = std::max(all_reduce, gather);
  // Freed buffers the allocator keeps and the process group's own: 40% more (two ranks
  // of 2^24 elements measured 32.7 to 35.7 bytes an element on rank 0, from one run to
  // the next, against the 30 counted here; tests/cli/cli_ranks_test.cpp measures it).
  constexpr double kSlack = 1.4;
  CommBenchMemory m;
  if (opt.device == "cuda") {
    // The exchanged tensors live on the GPU; the host keeps the payloads, rank 0's sum to
    // compare and one slot copied back at a time.
    m.device = kSlack * exchanges;
    m.rank0_host = kSlack * (w * payload + building + 4 * n + 4 * n);
    m.other_host = kSlack * (payload + building);
  } else {
    m.rank0_host = kSlack * std::max(w * payload + building, w * payload + exchanges);
    m.other_host = kSlack * (payload + std::max(building, exchanges));
  }
  return m;
}

CommBenchResult run_comm_bench(const RankInfo& info, const CommBenchOptions& opt) {
  check_comm_bench_options(opt);
  const torch::Device device = opt.device == "cpu" ? torch::Device(torch::kCPU)
                                                   : torch::Device(torch::kCUDA, info.local_rank);
  auto group = dist::RankGroup::connect(info, device, std::chrono::seconds(opt.timeout_s));
  const int world = info.world;
  const int64_t rows = opt.rows, cols = opt.cols;

  // This rank's payload; rank 0, which checks and reports, rebuilds every rank's as the
  // reference for what comes back.
  const bool checks = info.rank == 0;
  auto progress = [&](const std::string& what, int done, int total) {
    if (checks && opt.progress) opt.progress(what, done, total);
  };
  std::vector<Payload> all(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    if (checks || r == info.rank) all[static_cast<size_t>(r)] = payload(r, rows, cols);
    progress("building every rank's payload to check against", r + 1, world);
  }
  const Payload& mine = all[static_cast<size_t>(info.rank)];
  const Timer timer(device);
  at::Tensor token = at::zeros({1}, at::TensorOptions().dtype(at::kFloat).device(device));
  auto line_up = [&] {  // every rank starts each timed exchange together
    std::vector<at::Tensor> t{token};
    group->sum(t, "a barrier");
  };

  CommBenchResult res;
  res.backend = group->backend();
  res.device = device.str();
  res.world = world;

  // The all-reduce: each rank's fp32 weights, summed in place (a fresh copy each time).
  {
    const at::Tensor src = tensor_of(mine.weights, {rows, cols}, at::kFloat, device);
    std::vector<double> times;
    at::Tensor sum;
    for (int k = 0; k < opt.warmup + opt.iters; ++k) {
      std::vector<at::Tensor> t{src.clone()};
      line_up();
      const double ms = timer.ms([&] { group->sum(t, "fp32 values"); });
      if (k >= opt.warmup) times.push_back(ms);
      sum = t[0];
      progress("all_reduce fp32", k + 1, opt.warmup + opt.iters);
    }
    CommFigure f;
    f.op = "all_reduce";
    f.payload = "fp32";
    f.dtype = "float32";
    f.shape = {rows, cols};
    f.bytes_per_rank = f.bytes_result = rows * cols * 4;
    f.ms = median(times);
    if (checks) {
      std::vector<float> want(all[0].weights);
      for (int r = 1; r < world; ++r)
        for (size_t i = 0; i < want.size(); ++i) want[i] += all[static_cast<size_t>(r)].weights[i];
      const at::Tensor got = sum.to(torch::kCPU).contiguous();
      const float* g = got.data_ptr<float>();
      f.identical = std::memcmp(g, want.data(), want.size() * sizeof(float)) == 0;
      for (size_t i = 0; i < want.size(); ++i)
        f.max_abs_error = std::max(f.max_abs_error, std::fabs(static_cast<double>(g[i]) - want[i]));
    }
    res.figures.push_back(f);
  }

  // The all-gathers: FP8 codes, their scales, and bf16; each slot checked against what its
  // rank sent.
  auto gather = [&](const std::string& name, const at::Tensor& src, const std::string& dtype,
                    const std::string& note, auto reference) {
    std::vector<double> times;
    std::vector<at::Tensor> out;
    for (int k = 0; k < opt.warmup + opt.iters; ++k) {
      line_up();
      const double ms = timer.ms([&] { group->all_gather(src, out, name.c_str()); });
      if (k >= opt.warmup) times.push_back(ms);
      progress("all_gather " + name, k + 1, opt.warmup + opt.iters);
    }
    CommFigure f;
    f.op = "all_gather";
    f.payload = name;
    f.dtype = dtype;
    f.note = note;
    f.shape = std::vector<int64_t>(src.sizes().begin(), src.sizes().end());
    f.bytes_per_rank = src.numel() * static_cast<int64_t>(src.element_size());
    f.bytes_result = f.bytes_per_rank * world;
    f.ms = median(times);
    f.identical = checks && static_cast<int>(out.size()) == world;
    for (int r = 0; r < world && f.identical; ++r) {
      const auto [data, bytes] = reference(all[static_cast<size_t>(r)]);
      f.identical = same_bytes(out[static_cast<size_t>(r)], data, bytes) &&
                    out[static_cast<size_t>(r)].scalar_type() == src.scalar_type();
    }
    res.figures.push_back(f);
  };
  gather("fp8 codes", tensor_of(mine.codes, {rows, cols}, at::kByte, device), "uint8", "",
         [](const Payload& p) {
           return std::pair{p.codes.data(), p.codes.size()};
         });
  gather("fp8 scales", tensor_of(mine.scales, {rows}, at::kFloat, device), "float32", "",
         [](const Payload& p) {
           return std::pair{p.scales.data(), p.scales.size() * 4};
         });
  {
    auto bf16_bytes = [](const Payload& p) {
      return std::pair{static_cast<const void*>(p.bf16.data()), p.bf16.size() * 2};
    };
    bool native = true;
    std::string why;
    try {
      // One exchange to learn whether the backend takes bfloat16 at all.
      std::vector<at::Tensor> probe;
      line_up();
      group->all_gather(tensor_of(mine.bf16, {1, 1}, at::kBFloat16, device), probe, "bf16 values");
    } catch (const std::exception& e) {
      native = false;
      why = std::string("this ") + res.backend +
            " has no bfloat16 exchange; its bytes were sent as uint8";
    }
    if (native) {
      gather("bf16", tensor_of(mine.bf16, {rows, cols}, at::kBFloat16, device), "bfloat16", "",
             bf16_bytes);
    } else {
      // Every rank fails the probe alike (the dtype is checked before anything is sent).
      std::vector<uint8_t> bytes(mine.bf16.size() * 2);
      std::memcpy(bytes.data(), mine.bf16.data(), bytes.size());
      gather("bf16", tensor_of(bytes, {rows, cols * 2}, at::kByte, device), "uint8", why,
             bf16_bytes);
    }
  }
  const CommFigure& codes = res.figures[1];
  const CommFigure& scales = res.figures[2];
  const CommFigure& bf16 = res.figures[3];
  res.fp8_bytes_vs_bf16 = static_cast<double>(codes.bytes_per_rank + scales.bytes_per_rank) /
                          static_cast<double>(bf16.bytes_per_rank);
  res.fp8_ms_vs_bf16 = (codes.ms + scales.ms) / bf16.ms;
  for (CommFigure& f : res.figures) {
    const double n = world;
    if (f.op == "all_reduce") {
      f.algbw_gbs = static_cast<double>(f.bytes_per_rank) / (f.ms * 1e6);
      f.busbw_gbs = f.algbw_gbs * 2.0 * (n - 1) / n;
    } else {
      f.algbw_gbs = static_cast<double>(f.bytes_result) / (f.ms * 1e6);
      f.busbw_gbs = f.algbw_gbs * (n - 1) / n;
    }
  }
  line_up();  // nobody leaves while another still gathers
  return res;
}

}  // namespace fp8wb
