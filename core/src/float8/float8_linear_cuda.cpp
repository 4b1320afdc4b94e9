// Torch translation unit: Float8Linear on CUDA tensors. The project's kernels quantize
// (statistics in the same pass, transposed codes for the backward GEMMs), and the GEMMs
// of fp8_gemm_cuda.cpp multiply the FP8 operands.
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/record_function.h>
#include <c10/cuda/CUDAGuard.h>

#include <array>
#include <cstring>
#include <optional>

#include "float8_linear_internal.h"
#include "fp8_gemm_cuda.h"
#include "fp8wb/kernels/bias_cuda.h"
#include "fp8wb/kernels/quantize_cuda.h"

namespace fp8wb::detail {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int kMapCells = 64;  // as StatsOptions::map_max_cells

// Recipes whose transposed codes come out of the same quantize pass.
bool transposable(const QuantRecipe& r) {
  return r.kind == ScalingKind::Tensorwise || r.kind == ScalingKind::Block128x128;
}

// A role quantized on the device: row-major codes and/or their transpose.
struct DevQ {
  Operand rows;
  Operand cols;
  at::Tensor amax;  // tensorwise: [1], the amax behind the scale (the history's newest entry)
};

// Where one role's statistics sit in a step's device buffer.
struct StatsSlot {
  int64_t offset = 0;  // bytes
  MapGrid grid;
  int64_t bytes() const {
    return static_cast<int64_t>(sizeof(StatsBuffer)) + 16 * grid.cell_count();
  }
};

DeviceStatsTargets targets(const at::Tensor& buf, const StatsSlot& slot) {
  DeviceStatsTargets t;
  uint8_t* base = buf.data_ptr<uint8_t>() + slot.offset;
  t.stats = reinterpret_cast<StatsBuffer*>(base);
  t.map =
      slot.grid.cell_count() > 0 ? reinterpret_cast<double*>(base + sizeof(StatsBuffer)) : nullptr;
  t.grid = slot.grid;
  t.histogram = true;
  return t;
}

// The role's statistics, and the scale it used (its first group's scale_inv travels in
// the StatsBuffer's scale_inv_bits).
RoleStats read_stats(const uint8_t* host, const StatsSlot& slot) {
  RoleStats rs;
  rs.valid = true;
  TensorStats& s = rs.stats;
  std::memcpy(&s.raw, host + slot.offset, sizeof(StatsBuffer));
  float scale_inv = 0;
  std::memcpy(&scale_inv, &s.raw.scale_inv_bits, 4);
  s.raw.scale_inv_bits = 0;
  rs.scale = scale_inv != 0 ? 1.0f / scale_inv : 0.0f;
  s.map_grid = slot.grid;
  const size_t c = static_cast<size_t>(slot.grid.cell_count());
  s.map_sq_err.resize(c);
  s.map_sq_sum.resize(c);
  if (c > 0) {
    const uint8_t* m = host + slot.offset + sizeof(StatsBuffer);
    std::memcpy(s.map_sq_err.data(), m, c * sizeof(double));
    std::memcpy(s.map_sq_sum.data(), m + c * sizeof(double), c * sizeof(double));
  }
  return rs;
}

// A step's statistics on their way to the host: one device buffer for the three roles,
// copied once (non-blocking, into pinned memory) when the backward has filled it, or on
// demand when no backward comes.
struct StatsInFlight {
  at::Tensor device;
  at::Tensor host;
  std::shared_ptr<at::cuda::CUDAEvent> done;
  std::array<StatsSlot, kRoleCount> slots;  // by role_index()
  std::array<bool, kRoleCount> roles{};
  bool consumed = false;

  void start() {
    if (host.defined()) return;
    host = at::empty(device.sizes(), device.options().device(at::kCPU).pinned_memory(true));
    host.copy_(device, /*non_blocking=*/true);
    done = std::make_shared<at::cuda::CUDAEvent>();
    done->record(at::cuda::getCurrentCUDAStream());
  }
  void restart() {
    host = at::Tensor();
    start();
  }
  bool finish(Float8Probe& p, bool wait) {
    start();
    if (!wait && !done->query()) return false;
    done->synchronize();
    const uint8_t* h = host.data_ptr<uint8_t>();
    for (const RoleEntry& r : kRoles) {
      const size_t i = role_index(r.value);
      if (roles[i]) p.stats(r.value) = read_stats(h, slots[i]);
    }
    consumed = true;
    return true;
  }
};

// Queues a flight behind whatever the state still waits for.
void post(Float8LinearState& state, std::shared_ptr<StatsInFlight> f) {
  state.pending = [prev = std::move(state.pending), f](Float8Probe& p, bool wait) mutable {
    if (prev) {
      if (!prev(p, wait)) return false;
      prev = nullptr;
    }
    return f->finish(p, wait);
  };
}

DeviceTensor device_tensor(const at::Tensor& t) {
  DeviceTensor d;
  d.rows = t.size(0);
  d.cols = t.size(1);
  if (t.scalar_type() == at::kBFloat16) {
    d.bf16 = reinterpret_cast<const uint16_t*>(t.data_ptr<at::BFloat16>());
  } else {
    d.f32 = t.data_ptr<float>();
  }
  return d;
}

// The role's device history under delayed scaling: [ring (window), scale, scale_inv,
// amax_h, amax word], made on first use or when the window or device changed.
at::Tensor& device_history(Float8RoleHistory& h, const DelayedScalingConfig& d,
                           const at::Device& dev) {
  const int64_t n = int64_t{d.window} + 4;
  if (!h.device.defined() || h.device.numel() != n || h.device.device() != dev) {
    h.device = at::zeros({n}, at::TensorOptions().dtype(at::kFloat).device(dev));
    h.device.narrow(0, d.window, 2).fill_(1.0f);  // InitialScale::One
    h.head = 0;
    h.steps = 0;
    h.host.reset();
  }
  return h.device;
}

// Quantizes t ([rows, cols], fp32 or bf16, contiguous, on the device) along its rows:
// current scaling, or delayed scaling from `hist` (which then records this step's amax
// and moves to the next step's scale, all on the device).
// `reduce` (data-parallel runs) makes a tensorwise amax the maximum over every rank's.
DevQ quantize_role(const at::Tensor& t, const QuantRecipe& recipe, Float8RoleHistory* hist,
                   const DelayedScalingConfig& dcfg, bool want_rows, bool want_cols,
                   const at::Tensor* sbuf = nullptr, const StatsSlot* slot = nullptr,
                   const AmaxReducer* reduce = nullptr) {
  if (reduce && !*reduce) reduce = nullptr;
  const int64_t rows = t.size(0), cols = t.size(1);
  const GroupLayout L = make_layout(recipe, rows, cols);
  const int64_t groups = L.group_count();
  const auto fopt = t.options().dtype(at::kFloat);
  const auto bopt = t.options().dtype(at::kByte);
  DevQ q;
  q.rows.recipe = q.cols.recipe = recipe;
  q.rows.layout = L;
  if (want_rows) q.rows.codes = at::empty({rows, cols}, bopt);
  if (want_cols) {
    q.cols.codes = at::empty({cols, rows}, bopt);
    q.cols.layout = make_layout(recipe, cols, rows);
  }
  DeviceStatsTargets tg;
  if (slot) tg = targets(*sbuf, *slot);
  const DeviceTensor x = device_tensor(t);
  // Few ATen calls here: each costs the host microseconds, and at a step's start, after a
  // synchronisation, the GPU waits for them (pointers into buffers rather than views).
  const float* scale = nullptr;
  uint32_t* amax_word = nullptr;
  at::Tensor* hd = hist ? &device_history(*hist, dcfg, t.device()) : nullptr;
  const bool bootstrap = hist && hist->steps == 0 && dcfg.initial == InitialScale::BootstrapCurrent;
  // Under delayed scaling the quantize pass reads the history's scale (the update below
  // comes after it in stream order); the update writes the scale_inv the codes were made
  // with into their own allocation (16-byte aligned, as cuBLAS wants its scales) and into
  // the statistics, and zeroes the amax word for the next step: no small copies between.
  DelayedUpdateExtras after;
  const bool from_history = hd && !bootstrap;
  if (from_history) {
    scale = hd->data_ptr<float>() + dcfg.window;
    q.rows.scale_inv = at::empty({L.group_rows, L.group_cols}, fopt);
    after.used_scale_inv = q.rows.scale_inv.data_ptr<float>();
    if (slot) after.used_scale_inv_2 = reinterpret_cast<float*>(&tg.stats->scale_inv_bits);
    if (!slot) {
      // Zero since the history was made, and zeroed again by every update.
      tg.amax_bits = reinterpret_cast<uint32_t*>(hd->data_ptr<float>() + dcfg.window + 3);
      after.amax_reset = tg.amax_bits;
    }
  } else {
    // amax per group and of the tensor, scale, scale_inv, global scale (NVFP4); each
    // part 16-byte aligned, as cuBLAS wants its scale pointers.
    const auto up4 = [](int64_t v) { return (v + 3) / 4 * 4; };
    const int64_t s_off = up4(groups + 1), si_off = s_off + up4(groups),
                  g_off = si_off + up4(groups);
    const at::Tensor buf = at::empty({g_off + 4}, fopt);
    float* b = buf.data_ptr<float>();
    QuantRecipe rr = recipe;
    if (bootstrap) {
      rr.margin = dcfg.margin;
      rr.pow2_scales = false;
    }
    const bool coded = recipe.kind == ScalingKind::MX || recipe.kind == ScalingKind::NVFP4;
    const at::Tensor scodes = coded ? at::empty({groups}, bopt) : at::Tensor();
    group_amax_cuda(x, L, b, b + groups, stream());
    if (reduce && recipe.kind == ScalingKind::Tensorwise) {
      at::Tensor amaxes = buf.narrow(0, 0, groups + 1);
      (*reduce)(amaxes);
    }
    compute_scales_cuda(rr, L, b, b + groups, b + s_off, b + si_off,
                        coded ? scodes.data_ptr<uint8_t>() : nullptr, b + g_off, stream());
    scale = b + s_off;
    q.rows.scale_inv = buf.as_strided({L.group_rows, L.group_cols}, {L.group_cols, 1}, si_off);
    if (bootstrap) amax_word = reinterpret_cast<uint32_t*>(b + groups);
    if (recipe.kind == ScalingKind::Tensorwise) q.amax = buf.narrow(0, groups, 1);
  }
  // From a history, the codes' scale_inv is the history's own (the update copies it into
  // q.rows.scale_inv only after this pass): the statistics' errors are measured with it.
  const float* used_si =
      from_history ? hd->data_ptr<float>() + dcfg.window + 1 : q.rows.scale_inv.data_ptr<float>();
  quantize_cuda(x, recipe, L, scale, used_si,
                want_rows ? q.rows.codes.data_ptr<uint8_t>() : nullptr,
                want_cols ? q.cols.codes.data_ptr<uint8_t>() : nullptr, tg, stream());
  if (hd) {
    if (!amax_word) amax_word = slot ? &tg.stats->amax_bits : tg.amax_bits;
    // Every rank records the same amax (a copy: the statistics keep this rank's own).
    at::Tensor reduced;
    if (reduce) {
      reduced = at::from_blob(amax_word, {1}, fopt).clone();
      (*reduce)(reduced);
      amax_word = reinterpret_cast<uint32_t*>(reduced.data_ptr<float>());
    }
    hist->head = (hist->head + dcfg.window - 1) % dcfg.window;
    float* h = hd->data_ptr<float>();
    const int w = dcfg.window;
    delayed_update_cuda(amax_word, h, w, hist->head, recipe.format, dcfg, h + w, h + w + 1,
                        h + w + 2, stream(), after);
    hist->steps++;
    q.amax = hd->narrow(0, hist->head, 1);  // read in stream order, before it is overwritten
  }
  if (slot && !from_history) {
    C10_CUDA_CHECK(cudaMemcpyAsync(&tg.stats->scale_inv_bits, q.rows.scale_inv.data_ptr<float>(), 4,
                                   cudaMemcpyDeviceToDevice,
                                   reinterpret_cast<cudaStream_t>(stream())));
  }
  if (want_cols) {
    // One scale (tensorwise) is its own transpose.
    q.cols.scale_inv = groups == 1 ? q.rows.scale_inv : q.rows.scale_inv.t().contiguous();
  }
  return q;
}

// The rowwise codes of t's transpose, made without forming the transpose: from t itself
// (fp32 or bf16), or from rowwise codes and their scales (their values quantized again).
// None where the kernels cannot take the shape, so the caller transposes instead.
Operand transposed_operand(const at::Tensor& codes_t, const at::Tensor& buf, int64_t si_off,
                           const QuantRecipe& r) {
  const int64_t n = codes_t.size(0);
  return {codes_t, buf.narrow(0, si_off, n).view({n, 1}), r, make_layout(r, n, codes_t.size(1))};
}

template <class Source>
std::optional<Operand> rowwise_of_transpose(const Source& src, int64_t rows, int64_t cols,
                                            const QuantRecipe& r, const at::TensorOptions& opt) {
  if (r.kind != ScalingKind::Rowwise) return std::nullopt;
  const int64_t up = (cols + 3) / 4 * 4;  // 16-byte aligned parts: amax, scale, scale_inv
  const at::Tensor buf = at::empty({3 * up}, opt.dtype(at::kFloat));
  const at::Tensor codes_t = at::empty({cols, rows}, opt.dtype(at::kByte));
  float* b = buf.data_ptr<float>();
  if (!rowwise_transposed_cuda(src, r, b, b + up, b + 2 * up, codes_t.data_ptr<uint8_t>(),
                               stream())) {
    return std::nullopt;
  }
  return transposed_operand(codes_t, buf, 2 * up, r);
}

std::optional<Operand> rowwise_of_transpose(const at::Tensor& t, const QuantRecipe& r) {
  const at::Tensor c = t.contiguous();
  return rowwise_of_transpose(device_tensor(c), c.size(0), c.size(1), r, c.options());
}

std::optional<Operand> rowwise_of_transpose(const Operand& o, const QuantRecipe& r) {
  if (o.recipe.kind != ScalingKind::Rowwise) return std::nullopt;
  const at::Tensor si = o.scale_inv.contiguous();
  DeviceCodes d;
  d.codes = o.codes.data_ptr<uint8_t>();
  d.row_scale_inv = si.data_ptr<float>();
  d.format = o.recipe.format;
  d.rows = o.codes.size(0);
  d.cols = o.codes.size(1);
  return rowwise_of_transpose(d, d.rows, d.cols, r, o.codes.options());
}

// y + bias for the GEMM's [M, N] output y, in place where bias_cuda.h's kernels take it:
// ATen adds a broadcast bias through its strided loop, at a third of the memory's
// bandwidth (49 such adds cost 2 ms of a GPT-2-small step on an H100); the bits are the same.
at::Tensor add_bias(at::Tensor y, const at::Tensor& bias) {
  const at::Tensor b = bias.to(y.scalar_type()).contiguous();
  const auto t = y.scalar_type();
  if (y.dim() != 2 || !y.is_contiguous() || (t != at::kBFloat16 && t != at::kFloat) ||
      b.numel() != y.size(1) ||
      !bias_rows_vectorisable(y.data_ptr(), b.data_ptr(), y.size(1),
                              static_cast<int>(y.element_size())))
    return y + b;
  if (t == at::kBFloat16) {
    add_bias_rows_bf16_cuda(static_cast<uint16_t*>(y.data_ptr()),
                            static_cast<const uint16_t*>(b.data_ptr()), y.size(0), y.size(1),
                            stream());
  } else {
    add_bias_rows_f32_cuda(y.data_ptr<float>(), b.data_ptr<float>(), y.size(0), y.size(1),
                           stream());
  }
  return y;
}

at::Tensor as_operand_dtype(const at::Tensor& t) {
  at::Tensor c = t.is_contiguous() ? t : t.contiguous();
  return c.scalar_type() == at::kFloat || c.scalar_type() == at::kBFloat16 ? c : c.to(at::kFloat);
}

struct Float8LinearCudaFunction : public torch::autograd::Function<Float8LinearCudaFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, const Float8LinearConfig& cfg,
                            Float8LinearState* state, bool stats, bool sqnr) {
    const c10::cuda::CUDAGuard on_device(x.device());
    Float8Probe* probe = state ? &state->probe : nullptr;
    stats = stats && state;
    const int64_t k = weight.size(1), n = weight.size(0);
    const at::Tensor x2 = as_operand_dtype(x.dim() == 2 ? x : x.reshape({-1, k}));
    const at::Tensor w2 = as_operand_dtype(weight);
    const int64_t m = x2.size(0);
    const at::ScalarType out_t = x.scalar_type();
    const DelayedScalingConfig& dcfg = cfg.delayed_scaling;
    auto history = [&](Role role) -> Float8RoleHistory* {
      return cfg.delayed && state ? &state->history(role) : nullptr;
    };

    // The step's statistics: one zeroed device buffer for the three roles.
    std::shared_ptr<StatsInFlight> flight;
    if (stats) {
      RECORD_USER_SCOPE("fp8wb_stats_buffer");
      flight = std::make_shared<StatsInFlight>();
      auto shape = [&](Role r) -> std::pair<int64_t, int64_t> {  // the role's [rows, cols]
        switch (r) {
          case Role::Input: return {m, k};
          case Role::Weight: return {n, k};
          case Role::GradOutput: return {m, n};
        }
        throw std::invalid_argument("unknown role " + std::to_string(role_index(r)));
      };
      int64_t off = 0;
      for (const RoleEntry& r : kRoles) {
        const auto [rows, cols] = shape(r.value);
        StatsSlot& s = flight->slots[role_index(r.value)];
        s.offset = off;
        s.grid = make_map_grid(make_layout(cfg.recipe(r.value), rows, cols), kMapCells);
        off += s.bytes();
      }
      // Zeroed by one memset (at::zeros goes through a fill kernel and several ATen calls).
      flight->device = at::empty({off}, x.options().dtype(at::kByte));
      C10_CUDA_CHECK(cudaMemsetAsync(flight->device.data_ptr(), 0, static_cast<size_t>(off),
                                     at::cuda::getCurrentCUDAStream().stream()));
    }
    const at::Tensor* sbuf = flight ? &flight->device : nullptr;
    auto slot = [&](Role r) { return flight ? &flight->slots[role_index(r)] : nullptr; };
    const AmaxReducer* reducer = state && state->reduce_amax ? &state->reduce_amax : nullptr;

    at::Tensor y, x_codes, x_scale_inv, w_codes_t, w_scale_inv_t;
    at::Tensor saved_x = x2;  // high precision only where a GEMM needs it (or for SQNR)
    bool x_transposed = false;
    if (cfg.fprop_fp8 || cfg.wgrad_fp8) {
      x_transposed = cfg.wgrad_fp8 && transposable(cfg.input);
      const bool x_rows = cfg.fprop_fp8 || (cfg.wgrad_fp8 && !x_transposed);
      DevQ qx = quantize_role(x2, cfg.input, history(Role::Input), dcfg, x_rows, x_transposed, sbuf,
                              slot(Role::Input), reducer);
      if (flight) flight->roles[role_index(Role::Input)] = true;
      if (state) state->step_amax_device[role_index(Role::Input)] = qx.amax;
      if (cfg.fprop_fp8) {
        const bool w_t = cfg.dgrad_fp8 && transposable(cfg.weight);
        DevQ qw = quantize_role(w2, cfg.weight, history(Role::Weight), dcfg, true, w_t, sbuf,
                                slot(Role::Weight), reducer);
        if (flight) flight->roles[role_index(Role::Weight)] = true;
        if (state) state->step_amax_device[role_index(Role::Weight)] = qw.amax;
        y = fp8_gemm(qx.rows, qw.rows, out_t, cfg.fprop_fast_accum, cfg.tune_gemms, probe);
        if (w_t) {
          w_codes_t = qw.cols.codes;
          w_scale_inv_t = qw.cols.scale_inv;
        }
      } else {
        y = at::matmul(x2, w2.to(x2.scalar_type()).t()).to(out_t);
      }
      if (sqnr && probe && cfg.fprop_fp8)
        probe->fprop_sqnr_db = sqnr_db(at::matmul(x2.to(at::kFloat), w2.to(at::kFloat).t()), y);
      const Operand& keep = x_transposed ? qx.cols : qx.rows;
      x_codes = keep.codes;
      x_scale_inv = keep.scale_inv;
      if (cfg.wgrad_fp8 && !sqnr) saved_x = at::Tensor();
    } else {
      y = at::matmul(x2, w2.to(x2.scalar_type()).t()).to(out_t);
    }
    // Earlier steps' statistics that have arrived, taken in now that this forward's kernels
    // are queued: before them, at a step's start, the GPU would wait for this host work.
    // Before this step's own flight joins the queue, whose copy its backward starts.
    if (state) {
      RECORD_USER_SCOPE("fp8wb_poll");
      state->poll();
    }
    if (flight) {
      state->in_flight = flight;
      post(*state, flight);
    }
    const bool has_bias = bias.defined() && bias.numel() > 0;
    if (has_bias) y = add_bias(y, bias);
    ctx->save_for_backward({weight, x_codes, x_scale_inv, saved_x, w_codes_t, w_scale_inv_t,
                            flight ? flight->device : at::Tensor()});
    auto plan = c10::make_intrusive<Float8Backward>();
    plan->config = cfg;
    plan->state = state;
    plan->stats = stats;
    plan->sqnr = sqnr;
    plan->has_bias = has_bias;
    plan->x_transposed = x_transposed;
    save_for_backward(ctx, std::move(plan));
    if (x.dim() == 2) return y;
    std::vector<int64_t> out_shape = x.sizes().vec();
    out_shape.back() = n;
    return y.reshape(out_shape);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& weight = saved[0];
    const c10::cuda::CUDAGuard on_device(weight.device());
    const c10::intrusive_ptr<Float8Backward> plan = saved_for_backward(ctx);
    const Float8LinearConfig& cfg = plan->config;
    const QuantRecipe& rin = cfg.input;
    const QuantRecipe& rw = cfg.weight;
    const QuantRecipe& rdy = cfg.grad_output;
    const bool dgrad_fp8 = cfg.dgrad_fp8, wgrad_fp8 = cfg.wgrad_fp8, stats = plan->stats,
               sqnr = plan->sqnr, delayed = cfg.delayed, dgrad_fast = cfg.dgrad_fast_accum,
               wgrad_fast = cfg.wgrad_fast_accum, x_transposed = plan->x_transposed;
    const DelayedScalingConfig& dcfg = cfg.delayed_scaling;
    Float8LinearState* state = plan->state;
    Float8Probe* probe = state ? &state->probe : nullptr;
    const int64_t k = weight.size(1), n = weight.size(0);
    const at::Tensor& g = grads[0];
    const at::Tensor dy = as_operand_dtype(g.dim() == 2 ? g : g.reshape({-1, n}));
    const at::Tensor w2 = as_operand_dtype(weight);
    const at::ScalarType dx_t = g.scalar_type(), dw_t = weight.scalar_type();

    // The grad_output statistics join the forward's buffer (a new one if the forward's
    // was already taken in).
    std::shared_ptr<StatsInFlight> flight;
    if (stats && state) {
      auto last = std::static_pointer_cast<StatsInFlight>(state->in_flight);
      if (last && last->device.is_same(saved[6])) flight = last;
    }

    DevQ qdy;
    const bool dy_t = wgrad_fp8 && transposable(rdy);
    if (dgrad_fp8 || dy_t) {
      Float8RoleHistory* h = delayed && state ? &state->history(Role::GradOutput) : nullptr;
      qdy = quantize_role(dy, rdy, h, dcfg, dgrad_fp8, dy_t, flight ? &flight->device : nullptr,
                          flight ? &flight->slots[role_index(Role::GradOutput)] : nullptr,
                          state && state->reduce_amax ? &state->reduce_amax : nullptr);
      if (state) state->step_amax_device[role_index(Role::GradOutput)] = qdy.amax;
      if (flight) {
        // The forward's roles once more only if their statistics were not taken in yet.
        const bool was_consumed = flight->consumed;
        for (bool& taken : flight->roles) taken = taken && !was_consumed;
        flight->roles[role_index(Role::GradOutput)] = true;
        flight->consumed = false;
        RECORD_USER_SCOPE("fp8wb_stats_copy");
        flight->restart();
        if (was_consumed) post(*state, flight);
      }
    }

    at::Tensor dx;
    if (dgrad_fp8) {
      std::optional<Operand> wt;
      if (saved[4].defined()) wt = operand(saved[4], saved[5], rw);
      if (!wt) wt = rowwise_of_transpose(w2, rw);
      if (!wt) wt = quantize_role(w2.t().contiguous(), rw, nullptr, dcfg, true, false).rows;
      dx = fp8_gemm(qdy.rows, *wt, dx_t, dgrad_fast, cfg.tune_gemms, probe);
    } else {
      dx = at::matmul(dy, w2.to(dy.scalar_type())).to(dx_t);
    }

    at::Tensor dw;
    const at::Tensor& x_hp = saved[3];
    if (wgrad_fp8) {
      std::optional<Operand> a;
      if (dy_t) a = qdy.cols;
      if (!a) a = rowwise_of_transpose(dy, rdy);
      if (!a) a = quantize_role(dy.t().contiguous(), rdy, nullptr, dcfg, true, false).rows;
      // x along M: its transposed codes, or its FP8 values quantized again along M.
      std::optional<Operand> b;
      if (x_transposed) b = operand(saved[1], saved[2], rin);
      if (!b) b = rowwise_of_transpose(operand(saved[1], saved[2], rin), rin);
      if (!b) {
        b = quantize_role(dequant(operand(saved[1], saved[2], rin)).t().contiguous(), rin, nullptr,
                          dcfg, true, false)
                .rows;
      }
      dw = fp8_gemm(*a, *b, dw_t, wgrad_fast, cfg.tune_gemms, probe);
    } else {
      dw = at::matmul(dy.t(), x_hp.to(dy.scalar_type())).to(dw_t);
    }
    if (sqnr && probe) {
      const at::Tensor dyf = dy.to(at::kFloat);
      if (dgrad_fp8) probe->dgrad_sqnr_db = sqnr_db(at::matmul(dyf, w2.to(at::kFloat)), dx);
      if (wgrad_fp8 && x_hp.defined())
        probe->wgrad_sqnr_db = sqnr_db(at::matmul(dyf.t(), x_hp.to(at::kFloat)), dw);
    }
    at::Tensor db;
    if (plan->has_bias) db = bias_grad_cuda(dy, weight.scalar_type());
    if (g.dim() != 2) {
      std::vector<int64_t> x_shape = g.sizes().vec();
      x_shape.back() = k;
      dx = dx.reshape(x_shape);
    }
    return {dx, dw, db, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor float8_linear_cuda(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                              const Float8LinearConfig& config, Float8LinearState* state,
                              bool stats, bool sqnr) {
  // Custom functions take no undefined tensors: no bias travels as an empty one (made once:
  // the forward reads only its size).
  static const at::Tensor no_bias = at::empty({0});
  return Float8LinearCudaFunction::apply(x, weight, bias.defined() ? bias : no_bias, config, state,
                                         stats, sqnr);
}

}  // namespace fp8wb::detail
