// The C ABI of libfp8wb_watch.so (watch_abi.h) over Watch and the quantize kernels: every
// exception stops here and becomes this thread's fp8wb_last_error().
#include "fp8wb/core/watch/watch_abi.h"

#include <cstring>
#include <deque>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "fp8wb/core/watch/watch.h"
#include "fp8wb/kernels/quantize_cpu.h"
#if FP8WB_WATCH_CUDA
#include "fp8wb/kernels/watch_cuda.h"
#endif

struct fp8wb_watch {
  std::unique_ptr<fp8wb::Watch> watch;
#if FP8WB_WATCH_CUDA
  // CUDA tensors: between samples their amaxes gather on the GPU, a batch a step, and come
  // back to the Watch in step order once the GPU has got there; a sampled step's tensors
  // are quantized there too, and only their statistics come back.
  struct Key {
    std::string layer;
    fp8wb::Role role;
    int64_t step;
  };
  fp8wb::DeviceAmaxQueue queue;
  std::vector<Key> open_keys;
  std::deque<std::vector<Key>> closed_keys;
  fp8wb::DeviceStatsWorkspace workspace;
  fp8wb_stream_t stream = nullptr;  // the stream of the last tensor observed
  int device_index = -1;
#endif
};

namespace {

using namespace fp8wb;

thread_local std::string last_error;
thread_local int last_code = 0;

static_assert(FP8WB_HIST_BINS == kHistBins, "fp8wb_stats.hist must hold StatsBuffer::hist");

template <class Fn>
int guarded(Fn&& fn) {
  last_error.clear();
  last_code = 0;
  try {
    fn();
    return 0;
  } catch (const StoreError& e) {
    last_error = e.what();
    last_code = FP8WB_ERROR_STORE;
  } catch (const std::invalid_argument& e) {
    last_error = e.what();
    last_code = FP8WB_ERROR_ARGUMENT;
  } catch (const std::exception& e) {
    last_error = e.what();
    last_code = FP8WB_ERROR_OTHER;
  } catch (...) {
    last_error = "unknown error";
    last_code = FP8WB_ERROR_OTHER;
  }
  return last_code;
}

std::string text(const char* s) {
  return s ? s : "";
}

Role role_of(int32_t code) {
  switch (code) {
    case FP8WB_ROLE_INPUT: return Role::Input;
    case FP8WB_ROLE_WEIGHT: return Role::Weight;
    case FP8WB_ROLE_GRAD_OUTPUT: return Role::GradOutput;
    default: break;
  }
  throw std::invalid_argument("role code " + std::to_string(code) + " is not one of " +
                              role_names());
}

// The tensor as the CPU kernels take it; a tensor elsewhere is refused by name.
TensorRef host_ref(const fp8wb_tensor* x) {
  if (!x) throw std::invalid_argument("no tensor given");
  if (x->device != FP8WB_DEVICE_CPU) {
    throw std::invalid_argument("a tensor on " +
                                std::string(x->device == FP8WB_DEVICE_CUDA
                                                ? "cuda"
                                                : "device code " + std::to_string(x->device)) +
                                ": this library's kernels take host tensors (fp8wb_devices())");
  }
  if (x->rows < 0 || x->cols < 0) {
    throw std::invalid_argument("a tensor of shape " + std::to_string(x->rows) + " x " +
                                std::to_string(x->cols));
  }
  if (!x->data && x->rows * x->cols > 0) throw std::invalid_argument("a tensor with no data");
  switch (x->dtype) {
    case FP8WB_DTYPE_FLOAT32:
      return TensorRef::of(static_cast<const float*>(x->data), x->rows, x->cols);
    case FP8WB_DTYPE_BFLOAT16:
      return TensorRef::of(static_cast<const uint16_t*>(x->data), x->rows, x->cols);
    default: break;
  }
  throw std::invalid_argument("dtype code " + std::to_string(x->dtype) +
                              ": the kernels take float32 (0) or bfloat16 (1)");
}

#if FP8WB_WATCH_CUDA
// A CUDA tensor as the GPU kernels take it.
DeviceTensor device_ref(const fp8wb_tensor* x) {
  if (x->rows < 0 || x->cols < 0) {
    throw std::invalid_argument("a tensor of shape " + std::to_string(x->rows) + " x " +
                                std::to_string(x->cols));
  }
  if (!x->data && x->rows * x->cols > 0) throw std::invalid_argument("a tensor with no data");
  DeviceTensor d;
  d.rows = x->rows;
  d.cols = x->cols;
  switch (x->dtype) {
    case FP8WB_DTYPE_FLOAT32: d.f32 = static_cast<const float*>(x->data); return d;
    case FP8WB_DTYPE_BFLOAT16: d.bf16 = static_cast<const uint16_t*>(x->data); return d;
    default: break;
  }
  throw std::invalid_argument("dtype code " + std::to_string(x->dtype) +
                              ": the kernels take float32 (0) or bfloat16 (1)");
}

// The recipes the GPU's statistics pass takes for any shape; others (blocks that need not
// divide a user's tensor) are quantized from a host copy.
bool on_device(const QuantRecipe& r) {
  return r.kind == ScalingKind::Tensorwise || r.kind == ScalingKind::Rowwise;
}

// The closed batches' amaxes into the Watch, oldest first: those the GPU has finished, or
// (wait) all of them, the open batch closed first.
void take_in_amaxes(fp8wb_watch& w, bool wait) {
  w.queue.close(w.stream);
  if (!w.open_keys.empty()) w.closed_keys.push_back(std::move(w.open_keys));
  w.open_keys.clear();
  std::vector<float> amax;
  while (!w.closed_keys.empty() && w.queue.pop(amax, wait)) {
    const std::vector<fp8wb_watch::Key> keys = std::move(w.closed_keys.front());
    w.closed_keys.pop_front();
    for (size_t i = 0; i < keys.size() && i < amax.size(); ++i)
      w.watch->observe_amax(keys[i].layer, keys[i].role, keys[i].step, amax[i]);
  }
}

void observe_cuda(fp8wb_watch& w, const std::string& layer, Role role, const fp8wb_tensor* x) {
  const DeviceTensor d = device_ref(x);
  if (w.device_index < 0) w.device_index = x->device_index;
  if (x->device_index != w.device_index) {
    throw std::invalid_argument("a tensor on cuda:" + std::to_string(x->device_index) +
                                " after tensors on cuda:" + std::to_string(w.device_index) +
                                ": a watch follows one GPU");
  }
  w.stream = static_cast<fp8wb_stream_t>(x->stream);
  Watch& W = *w.watch;
  if (W.takes_stats(layer, role)) {
    take_in_amaxes(w, true);  // delayed scaling's history up to this step
    const QuantRecipe& r = W.recipe(role);
    if (!on_device(r)) {
      const auto n = static_cast<size_t>(d.rows * d.cols);
      if (d.f32) {
        std::vector<float> host(n);
        copy_to_host_cuda(d, host.data(), w.stream);
        W.observe(layer, role, TensorRef::of(host.data(), d.rows, d.cols));
      } else {
        std::vector<uint16_t> host(n);
        copy_to_host_cuda(d, host.data(), w.stream);
        W.observe(layer, role, TensorRef::of(host.data(), d.rows, d.cols));
      }
      return;
    }
    StatsOptions so;
    so.enabled = so.histogram = so.error_map = true;
    const float scale = W.delayed_scale(layer, role);
    float used = 0;
    const TensorStats taken = quantize_stats_cuda(d, r, scale, so, w.stream, w.workspace, &used);
    W.observe_stats(layer, role, taken, scale > 0 ? scale : used);
    return;
  }
  if (!W.records_amax(role)) return;
  w.queue.push(d, w.stream);
  w.open_keys.push_back({layer, role, W.step()});
}
#endif

void fill(const TensorStats& s, float scale, fp8wb_stats* out) {
  out->amax = s.amax();
  out->scale = scale;
  out->numel = s.raw.numel;
  out->zeros = s.raw.zeros;
  out->nonfinite = s.raw.nonfinite;
  out->underflow = s.raw.underflow;
  out->subnormal = s.raw.subnormal;
  out->saturated = s.raw.saturated;
  out->sq_err = s.raw.sq_err;
  out->sq_sum = s.raw.sq_sum;
  std::memcpy(out->hist, s.raw.hist, sizeof out->hist);
}

}  // namespace

extern "C" {

int fp8wb_abi_version(void) {
  return FP8WB_WATCH_ABI_VERSION;
}

const char* fp8wb_last_error(void) {
  return last_error.c_str();
}

int fp8wb_last_error_code(void) {
  return last_code;
}

const char* fp8wb_default_database(void) {
  static const std::string path = default_database_path();
  return path.c_str();
}

int fp8wb_devices(void) {
#if FP8WB_WATCH_CUDA
  return 1 | (gpu_device_count() > 0 ? 2 : 0);
#else
  return 1;  // the CPU kernels; CUDA tensors are copied to the host by the caller
#endif
}

fp8wb_watch* fp8wb_watch_open(const char* db_path, const char* name, const char* settings_json,
                              const char* config_json, const char* model, const char* device) {
  fp8wb_watch* w = nullptr;
  guarded([&] {
    if (!db_path || !*db_path) throw std::invalid_argument("no run database given");
    WatchSettings s;
    if (name && *name) s.name = name;
    if (settings_json) s.settings_json = settings_json;
    if (config_json) s.config_json = config_json;
    s.model = text(model);
    s.device = text(device);
    auto owned = std::make_unique<fp8wb_watch>();
    owned->watch = std::make_unique<Watch>(db_path, s);
    w = owned.release();
  });
  return w;
}

int64_t fp8wb_watch_run_id(const fp8wb_watch* w) {
  return w ? w->watch->run_id() : -1;
}

int64_t fp8wb_watch_step(const fp8wb_watch* w) {
  return w ? w->watch->step() : -1;
}

int fp8wb_watch_sampling(const fp8wb_watch* w) {
  return w && w->watch->sampling() ? 1 : 0;
}

int fp8wb_watch_records_amax(const fp8wb_watch* w) {
  return w && w->watch->records_amax() ? 1 : 0;
}

namespace {

void observe_one(fp8wb_watch& w, const char* layer, int32_t role, const fp8wb_tensor* x) {
  if (!layer || !*layer) throw std::invalid_argument("a layer with no name");
#if FP8WB_WATCH_CUDA
  if (x && x->device == FP8WB_DEVICE_CUDA) {
    observe_cuda(w, layer, role_of(role), x);
    return;
  }
#endif
  w.watch->observe(layer, role_of(role), host_ref(x));
}

}  // namespace

int fp8wb_watch_observe(fp8wb_watch* w, const char* layer, int32_t role, const fp8wb_tensor* x) {
  return guarded([&] {
    if (!w) throw std::invalid_argument("no watch");
    observe_one(*w, layer, role, x);
  });
}

int fp8wb_watch_observe_many(fp8wb_watch* w, int32_t n, const char* const* layers,
                             const int32_t* roles, const fp8wb_tensor* xs) {
  return guarded([&] {
    if (!w) throw std::invalid_argument("no watch");
    if (n < 0 || (n > 0 && (!layers || !roles || !xs)))
      throw std::invalid_argument("observe_many: " + std::to_string(n) +
                                  " tensors without layers, roles or tensors");
    for (int32_t i = 0; i < n; ++i) observe_one(*w, layers[i], roles[i], &xs[i]);
  });
}

int fp8wb_watch_scalars(fp8wb_watch* w, int64_t step, const char* const* names,
                        const double* values, int32_t count) {
  return guarded([&] {
    if (!w) throw std::invalid_argument("no watch");
    if (count < 0 || (count > 0 && (!names || !values)))
      throw std::invalid_argument("scalars: " + std::to_string(count) + " without names or values");
    std::vector<std::pair<std::string, double>> named;
    for (int32_t i = 0; i < count; ++i) {
      if (!names[i] || !*names[i]) throw std::invalid_argument("a scalar with no name");
      named.emplace_back(names[i], values[i]);
    }
    w->watch->scalars(step, named);
  });
}

int fp8wb_watch_next_step(fp8wb_watch* w) {
  return guarded([&] {
    if (!w) throw std::invalid_argument("no watch");
#if FP8WB_WATCH_CUDA
    take_in_amaxes(*w, false);
#endif
    w->watch->next_step();
  });
}

int fp8wb_watch_event(fp8wb_watch* w, const char* kind, const char* message) {
  return guarded([&] {
    if (!w) throw std::invalid_argument("no watch");
    if (!kind || !*kind) throw std::invalid_argument("an event with no kind");
    w->watch->event(kind, text(message));
  });
}

int fp8wb_watch_end(fp8wb_watch* w, int32_t how, const char* message) {
  return guarded([&] {
    if (!w) throw std::invalid_argument("no watch");
    RunStatus s = RunStatus::Finished;
    switch (how) {
      case FP8WB_END_FINISHED: s = RunStatus::Finished; break;
      case FP8WB_END_STOPPED: s = RunStatus::Stopped; break;
      case FP8WB_END_FAILED: s = RunStatus::Failed; break;
      case FP8WB_END_INTERRUPTED: s = RunStatus::Interrupted; break;
      default:
        throw std::invalid_argument("end code " + std::to_string(how) + " is not one of 0..3");
    }
#if FP8WB_WATCH_CUDA
    if (s != RunStatus::Interrupted && !w->watch->ended()) {
      try {
        take_in_amaxes(*w, true);  // every step's amax stored before the run ends
      } catch (const std::exception&) {
        // The GPU's error is the script's to report; the run still ends as asked.
      }
    }
#endif
    w->watch->end(s, text(message));
  });
}

void fp8wb_watch_close(fp8wb_watch* w) {
  delete w;
}

int fp8wb_quantize_stats(const fp8wb_tensor* x, const char* scaling, const char* format,
                         int32_t margin, float scale, fp8wb_stats* out) {
  return guarded([&] {
    if (!out) throw std::invalid_argument("nowhere to put the statistics");
    QuantRecipe r;
    const auto kind = parse_scaling_kind(text(scaling));
    if (!kind) throw std::invalid_argument("unknown scaling '" + text(scaling) + "'");
    r.kind = *kind;
    const auto f = parse_format(text(format));
    if (!f) {
      throw std::invalid_argument("unknown format '" + text(format) +
                                  "' (known: " + format_names() + ")");
    }
    r.format = *f;
    r.margin = margin;
    r.partial_blocks = r.kind != ScalingKind::Tensorwise && r.kind != ScalingKind::Rowwise;
    validate_recipe(r);
    if (scale > 0 && r.kind != ScalingKind::Tensorwise)
      throw std::invalid_argument("a given scale is tensorwise: scaling must be tensorwise");
#if FP8WB_WATCH_CUDA
    if (x && x->device == FP8WB_DEVICE_CUDA && on_device(r)) {
      thread_local DeviceStatsWorkspace workspace;
      StatsOptions so;
      so.error_map = false;
      float used = 0;
      const TensorStats t = quantize_stats_cuda(
          device_ref(x), r, scale, so, static_cast<fp8wb_stream_t>(x->stream), workspace, &used);
      fill(t, scale > 0 ? scale : used, out);
      return;
    }
#endif
    const TensorRef ref = host_ref(x);
    if (scale > 0) {
      if (r.kind != ScalingKind::Tensorwise)
        throw std::invalid_argument("a given scale is tensorwise: scaling must be tensorwise");
      ScaleSet scales;
      scales.layout = make_layout(r, ref.rows, ref.cols);
      scales.scale = {scale};
      scales.scale_inv = {1.0f / scale};
      fill(quantize(ref, r, scales, {}).stats, scale, out);
      return;
    }
    const CurrentQuantization cq = quantize_current(ref, r);
    fill(cq.result.stats, cq.scales.scale.empty() ? 0.0f : cq.scales.scale[0], out);
  });
}

}  // extern "C"
