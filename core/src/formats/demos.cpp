#include "fp8wb/core/formats/demos.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

#include "fp8wb/core/formats/value_report.h"
#include "fp8wb/kernels/codec.h"
#include "fp8wb/kernels/float16.h"

namespace fp8wb {
namespace {

double error_pct_outside_first_block(const std::vector<float>& x, const std::vector<float>& back,
                                     int64_t rows, int64_t cols) {
  double err = 0, sum = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 128; c < cols; ++c) {
      const auto i = static_cast<size_t>(r * cols + c);
      const double d = static_cast<double>(x[i]) - back[i];
      err += d * d;
      sum += static_cast<double>(x[i]) * x[i];
    }
  }
  return sum == 0 ? 0.0 : 100.0 * std::sqrt(err / sum);
}

}  // namespace

namespace {

// The factors, from and to, that keep outlier values from `smallest` (nonzero; Inf for
// none) to `largest` finite and normal in fp32, as the demo scales them (in fp32).
std::pair<double, double> outlier_factor_range(float largest, float smallest) {
  // Four digits, rounded inwards, so that the figures said are taken.
  auto four = [](double v, bool up) {
    const double unit = std::pow(10.0, std::floor(std::log10(v)) - 3);
    return (up ? std::ceil(v / unit) : std::floor(v / unit)) * unit;
  };
  const double most = largest > 0 ? FLT_MAX / static_cast<double>(largest) : DBL_MAX;
  const double least = std::isfinite(smallest) ? FLT_MIN / static_cast<double>(smallest) : 0;
  double lo = least > 0 ? four(least, true) : 0;
  double hi = most < DBL_MAX ? four(most, false) : DBL_MAX;
  // The rounded figures, checked in fp32 as the demo scales: nudged inwards where a
  // rounding of the product would still leave the range.
  while (largest > 0 && !std::isfinite(largest * static_cast<float>(hi)))
    hi = four(hi * 0.9999, false);
  while (std::isfinite(smallest) && std::fabs(smallest * static_cast<float>(lo)) < FLT_MIN)
    lo = four(lo * 1.0001, true);
  return {lo, hi};
}

}  // namespace

OutlierDemoResult run_outlier_demo(const OutlierDemoConfig& cfg) {
  if (cfg.rows < 1 || cfg.cols < 256 || cfg.cols % 128 != 0) {
    throw std::invalid_argument(
        "the outlier demo needs at least 1 row and a multiple of 128 columns (>= 256), not " +
        std::to_string(cfg.rows) + "x" + std::to_string(cfg.cols));
  }
  if (cfg.outlier_channels < 0 || cfg.outlier_channels > 128) {
    throw std::invalid_argument("outlier channels must lie in the first 128-block (0..128), not " +
                                std::to_string(cfg.outlier_channels));
  }
  OutlierDemoResult res;
  res.config = cfg;
  std::mt19937 rng(cfg.seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> base(static_cast<size_t>(cfg.rows * cfg.cols));
  for (float& v : base) v = nd(rng);
  std::vector<uint8_t> codes(base.size());
  std::vector<float> back(base.size());
  // The factors that keep every scaled outlier value finite and normal in fp32 (zeros
  // aside): past them the outliers would be Inf, or zeros and subnormals, before any FP8
  // cast, and the errors would describe fp32's overflow instead of FP8's scaling.
  float big = 0.f, small = INFINITY;
  for (int64_t r = 0; r < cfg.rows; ++r) {
    for (int c = 0; c < cfg.outlier_channels; ++c) {
      const float a = std::fabs(base[static_cast<size_t>(r * cfg.cols + c)]);
      big = std::max(big, a);
      if (a > 0) small = std::min(small, a);
    }
  }
  const auto [least, most] = outlier_factor_range(big, small);
  for (double k : cfg.factors) {
    if (!(k > 0) || !std::isfinite(k))
      throw std::invalid_argument("outlier factors must be positive and finite");
    if (cfg.outlier_channels > 0 && (k < least || k > most)) {
      char text[256];
      std::snprintf(text, sizeof text,
                    " takes the outlier values out of fp32's finite normal range (%.8g to "
                    "%.8g): factors from %.4g to %.4g are taken (with seed %llu)",
                    static_cast<double>(FLT_MIN), static_cast<double>(FLT_MAX), least, most,
                    static_cast<unsigned long long>(cfg.seed));
      throw std::invalid_argument("outlier factor " + format_number(k) + text);
    }
    std::vector<float> x = base;
    for (int64_t r = 0; r < cfg.rows; ++r) {
      for (int c = 0; c < cfg.outlier_channels; ++c)
        x[static_cast<size_t>(r * cfg.cols + c)] *= static_cast<float>(k);
    }
    OutlierDemoRow row;
    row.factor = k;
    for (ScalingKind kind : {ScalingKind::Tensorwise, ScalingKind::Block1x128}) {
      QuantRecipe recipe;
      recipe.kind = kind;
      recipe.format = cfg.format;
      const auto q =
          quantize_current(TensorRef::of(x.data(), cfg.rows, cfg.cols), recipe, {codes.data()});
      dequantize(codes.data(), recipe, q.scales, back.data());
      const double err = error_pct_outside_first_block(x, back, cfg.rows, cfg.cols);
      if (kind == ScalingKind::Tensorwise) {
        row.tensorwise_error_pct = err;
        row.tensorwise_underflow_pct = q.result.stats.underflow_pct();
        row.tensorwise = q.result.stats;
      } else {
        row.block_error_pct = err;
        row.block_underflow_pct = q.result.stats.underflow_pct();
        row.block = q.result.stats;
      }
    }
    res.rows.push_back(std::move(row));
  }
  return res;
}

GradientDemoResult run_gradient_demo(const GradientDemoConfig& cfg) {
  if (cfg.n < 1 || cfg.n > (int64_t{1} << 28)) {
    throw std::invalid_argument("the gradient demo takes 1 to 268435456 values, not " +
                                std::to_string(cfg.n));
  }
  if (!(cfg.lo > 0) || !(cfg.hi > cfg.lo) || !std::isfinite(cfg.hi)) {
    throw std::invalid_argument("gradient magnitudes need 0 < lo < hi");
  }
  if (!(cfg.gradient_scale > 0) || !std::isfinite(cfg.gradient_scale)) {
    throw std::invalid_argument("the gradient scale must be positive and finite");
  }
  // Values past fp32's range would be infinities: nothing left for FP8 to show.
  if (!std::isfinite(static_cast<float>(cfg.hi * cfg.gradient_scale))) {
    // The largest scale, rounded down to four digits so that the figure given is taken.
    const double most = FLT_MAX / cfg.hi;
    const double unit = std::pow(10.0, std::floor(std::log10(most)) - 3);
    char text[96];
    std::snprintf(text, sizeof text, "not finite in fp32 (largest %.8g): the largest scale is %.4g",
                  static_cast<double>(FLT_MAX), std::floor(most / unit) * unit);
    throw std::invalid_argument("the gradient scale " + format_number(cfg.gradient_scale) +
                                " makes gradients up to " +
                                format_number(cfg.hi * cfg.gradient_scale) + ", " + text);
  }
  // Values below fp32's normal range would be zeros and subnormals before any cast: the
  // demo would show fp32's underflow, not FP8's.
  if (static_cast<float>(cfg.lo * cfg.gradient_scale) < FLT_MIN) {
    // The smallest scale, rounded up to four digits so that the figure given is taken.
    const double least = FLT_MIN / cfg.lo;
    const double unit = std::pow(10.0, std::floor(std::log10(least)) - 3);
    char text[128];
    std::snprintf(text, sizeof text,
                  "below fp32's smallest normal value (%.8g): the smallest scale is %.4g",
                  static_cast<double>(FLT_MIN), std::ceil(least / unit) * unit);
    throw std::invalid_argument("the gradient scale " + format_number(cfg.gradient_scale) +
                                " takes the smallest gradients (" + format_number(cfg.lo) + " x " +
                                format_number(cfg.gradient_scale) + ") " + text);
  }
  GradientDemoResult res;
  res.config = cfg;
  std::mt19937 rng(cfg.seed);
  std::uniform_real_distribution<double> u(std::log(cfg.lo), std::log(cfg.hi));
  std::bernoulli_distribution sign(0.5);
  std::vector<float> g(static_cast<size_t>(cfg.n));
  for (float& v : g)
    v = static_cast<float>((sign(rng) ? -1.0 : 1.0) * std::exp(u(rng)) * cfg.gradient_scale);
  for (Format f : cfg.formats) {
    QuantRecipe recipe;
    recipe.format = f;
    const GroupLayout layout = make_layout(recipe, 1, cfg.n);
    // Unscaled: a plain cast, as if gradients went to FP8 without any scaling.
    ScaleSet unit;
    unit.layout = layout;
    unit.scale = {1.0f};
    unit.scale_inv = {1.0f};
    GradientDemoCase plain{f, false, 1.0f,
                           quantize(TensorRef::of(g.data(), 1, cfg.n), recipe, unit, {}).stats};
    res.cases.push_back(std::move(plain));
    const auto cq = quantize_current(TensorRef::of(g.data(), 1, cfg.n), recipe);
    res.cases.push_back({f, true, cq.scales.scale[0], cq.result.stats});
  }
  return res;
}

std::string gradient_clamp_note(const GradientDemoCase& c) {
  const uint64_t clamped = c.stats.raw.saturated;
  if (clamped == 0) return {};
  const FormatInfo& info = format_info(c.format);
  char share[48];
  std::snprintf(share, sizeof share, "%.2f%%", c.stats.saturated_pct());
  std::string note = std::string(share) + " of the values (" + std::to_string(clamped) +
                     ") lie beyond " + std::string(info.name) + "'s largest value, ±" +
                     format_number(info.max_finite) + ", and are clamped to it";
  // The clamped values are the largest: where they hold most of the signal's energy, the
  // error of clamping them is about as large as the signal.
  const double sqnr = c.stats.sqnr_db();
  if (sqnr < 10) {
    char db[32];
    std::snprintf(db, sizeof db, "%.1f", sqnr);
    note +=
        ": they are the largest values and hold most of the signal, and clamping loses "
        "most of each, so the error is about as large as the signal (SQNR " +
        std::string(db) + " dB)";
  }
  return note;
}

}  // namespace fp8wb

namespace fp8wb {

float round_to(StorageFormat f, float x, Rounding rounding, uint32_t rnd) {
  switch (f) {
    case StorageFormat::FP32: return x;
    case StorageFormat::BF16: return round_bf16(x, rounding, rnd);
    case StorageFormat::FP16: return round_fp16(x, rounding, rnd);
    case StorageFormat::E4M3: {
      constexpr CodecSpec s = codec_spec(Format::E4M3FN);
      return decode(encode(x, s, Overflow::Saturate, rounding, rnd), s);
    }
    case StorageFormat::E5M2: {
      constexpr CodecSpec s = codec_spec(Format::E5M2);
      return decode(encode(x, s, Overflow::Ieee, rounding, rnd), s);
    }
  }
  throw std::out_of_range("no storage format " + std::to_string(static_cast<int>(f)));
}

double spacing_above(StorageFormat f, double x) {
  const auto& e = table_entry(kStorageFormats, f);
  const double a = std::fabs(x);
  const int exp = a > 0 ? std::ilogb(a) : e.min_normal_exp;
  return std::ldexp(1.0, std::max(exp, e.min_normal_exp) - e.mantissa_bits);
}

MasterWeightsResult run_master_weights_demo(const MasterWeightsConfig& cfg) {
  if (cfg.steps < 1 || cfg.steps > 1000000) {
    throw std::invalid_argument("the master-weights demo takes 1 to 1000000 steps, not " +
                                std::to_string(cfg.steps));
  }
  if (cfg.seeds < 1 || cfg.seeds > 4096) {
    throw std::invalid_argument("the master-weights demo takes 1 to 4096 seeds, not " +
                                std::to_string(cfg.seeds));
  }
  if (!std::isfinite(cfg.initial) || !std::isfinite(cfg.update) || cfg.update == 0 ||
      std::fabs(cfg.initial) > 1e4 || std::fabs(cfg.update) > 1e3) {
    throw std::invalid_argument(
        "the master-weights demo needs a finite weight (|w| <= 1e4) and a finite nonzero "
        "update (|u| <= 1e3)");
  }
  MasterWeightsResult res;
  res.config = cfg;
  const std::pair<StorageFormat, Rounding> kinds[] = {
      {StorageFormat::FP32, Rounding::NearestEven}, {StorageFormat::BF16, Rounding::NearestEven},
      {StorageFormat::FP16, Rounding::NearestEven}, {StorageFormat::E4M3, Rounding::NearestEven},
      {StorageFormat::E5M2, Rounding::NearestEven}, {StorageFormat::BF16, Rounding::Stochastic}};
  const auto n = static_cast<size_t>(cfg.steps) + 1;
  const auto u = static_cast<float>(cfg.update);
  for (const auto& [f, rounding] : kinds) {
    MasterWeightsTrack t;
    t.format = f;
    t.rounding = rounding;
    t.mean.assign(n, 0.0);
    t.low.assign(n, INFINITY);
    t.high.assign(n, -INFINITY);
    const int runs = rounding == Rounding::Stochastic ? cfg.seeds : 1;
    const float w0 = round_to(f, static_cast<float>(cfg.initial));
    t.spacing_at_start = spacing_above(f, w0);
    std::vector<double> finals;
    for (int r = 0; r < runs; ++r) {
      const uint64_t seed = uint64_t{cfg.seed} + static_cast<uint64_t>(r);
      float w = w0;
      for (size_t k = 0; k < n; ++k) {
        if (k > 0) w = round_to(f, w + u, rounding, sr_bits(seed, k - 1));
        t.mean[k] += w;
        t.low[k] = std::min(t.low[k], static_cast<double>(w));
        t.high[k] = std::max(t.high[k], static_cast<double>(w));
      }
      finals.push_back(w);
    }
    for (double& m : t.mean) m /= runs;
    t.final_mean = t.mean.back();
    double var = 0;
    for (double v : finals) var += (v - t.final_mean) * (v - t.final_mean);
    t.final_std = std::sqrt(var / runs);
    res.tracks.push_back(std::move(t));
  }
  return res;
}

DynamicLossScaler::DynamicLossScaler(double init_scale, int growth_interval, double growth,
                                     double backoff)
    : scale_(init_scale), growth_interval_(growth_interval), growth_(growth), backoff_(backoff) {
  if (!(init_scale > 0) || !std::isfinite(init_scale) || growth_interval < 1 || !(growth >= 1) ||
      !(backoff > 0 && backoff < 1)) {
    throw std::invalid_argument(
        "a loss scaler needs a positive initial scale, a growth interval of at least 1 step, "
        "growth >= 1 and 0 < backoff < 1");
  }
}

bool DynamicLossScaler::update(bool found_nonfinite) {
  if (found_nonfinite) {
    scale_ *= backoff_;
    good_steps_ = 0;
    return false;
  }
  if (++good_steps_ == growth_interval_) {
    scale_ *= growth_;
    good_steps_ = 0;
  }
  return true;
}

namespace {

// The tiny regression MLP of the loss-scaling demo: y = w2 . tanh(W1 x + b1) + b2.
struct TinyMlp {
  int in = 0, hidden = 0;
  std::vector<float> p;  // W1 (hidden x in), b1 (hidden), w2 (hidden), b2 (1)
  size_t w1() const { return 0; }
  size_t b1() const { return static_cast<size_t>(hidden * in); }
  size_t w2() const { return b1() + static_cast<size_t>(hidden); }
  size_t b2() const { return w2() + static_cast<size_t>(hidden); }

  TinyMlp(int inputs, int hid, std::mt19937& rng, float out_scale) : in(inputs), hidden(hid) {
    p.resize(b2() + 1);
    std::normal_distribution<float> nd(0.f, 1.f);
    const float s1 = 1.0f / std::sqrt(static_cast<float>(in));
    const float s2 = out_scale / std::sqrt(static_cast<float>(hidden));
    for (size_t i = w1(); i < b1(); ++i) p[i] = nd(rng) * s1;
    for (size_t i = b1(); i < w2(); ++i) p[i] = 0.1f * nd(rng);
    for (size_t i = w2(); i < b2(); ++i) p[i] = nd(rng) * s2;
    p[b2()] = 0.f;
  }

  float forward(const float* x, float* h) const {
    float y = p[b2()];
    for (int j = 0; j < hidden; ++j) {
      float a = p[b1() + static_cast<size_t>(j)];
      for (int i = 0; i < in; ++i) a += p[w1() + static_cast<size_t>(j * in + i)] * x[i];
      h[j] = std::tanh(a);
      y += p[w2() + static_cast<size_t>(j)] * h[j];
    }
    return y;
  }
};

}  // namespace

LossScalingResult run_loss_scaling_demo(const LossScalingConfig& cfg) {
  if (cfg.steps < 1 || cfg.steps > 100000) {
    throw std::invalid_argument("the loss-scaling demo takes 1 to 100000 steps, not " +
                                std::to_string(cfg.steps));
  }
  if (cfg.inputs < 1 || cfg.inputs > 256 || cfg.hidden < 1 || cfg.hidden > 256 ||
      cfg.examples < 1 || cfg.examples > 4096) {
    throw std::invalid_argument(
        "the loss-scaling demo's model takes 1 to 256 inputs and "
        "hidden units and 1 to 4096 examples");
  }
  if (!(cfg.learning_rate > 0) || !std::isfinite(cfg.learning_rate)) {
    throw std::invalid_argument("the learning rate must be positive and finite");
  }
  DynamicLossScaler(cfg.init_scale, cfg.growth_interval);  // validates the scaler's settings
  LossScalingResult res;
  res.config = cfg;
  // One data set and one teacher; every run starts from the same student.
  std::mt19937 rng(cfg.seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  const auto amp = static_cast<float>(cfg.target_scale);
  const TinyMlp teacher(cfg.inputs, cfg.hidden, rng, amp);
  // The student has the teacher's hidden layer and its own output layer: it can fit the
  // targets exactly, so the loss falls as far as its gradients let it (flushed gradients
  // stop it early), not to a floor that every run reaches alike.
  TinyMlp student0(cfg.inputs, cfg.hidden, rng, 0.1f * amp);
  std::copy(teacher.p.begin() + static_cast<std::ptrdiff_t>(teacher.w1()),
            teacher.p.begin() + static_cast<std::ptrdiff_t>(teacher.w2()),
            student0.p.begin() + static_cast<std::ptrdiff_t>(student0.w1()));
  const auto in = static_cast<size_t>(cfg.inputs);
  const auto hid = static_cast<size_t>(cfg.hidden);
  const auto m = static_cast<size_t>(cfg.examples);
  std::vector<float> xs(m * in), ys(m);
  std::vector<float> h(hid);
  for (float& v : xs) v = nd(rng);
  for (size_t e = 0; e < m; ++e) ys[e] = teacher.forward(&xs[e * in], h.data());

  const float lr = static_cast<float>(cfg.learning_rate);
  std::vector<float> grad(student0.p.size()), hs(m * hid), err(m);
  for (StorageFormat f : cfg.formats) {
    for (bool scaled : {false, true}) {
      LossScalingRun run;
      run.format = f;
      run.scaled = scaled;
      TinyMlp s = student0;
      DynamicLossScaler scaler(cfg.init_scale, cfg.growth_interval);
      double underflow_sum = 0;
      for (int step = 0; step < cfg.steps; ++step) {
        LossScalingStep st;
        st.scale = scaled ? scaler.scale() : 1.0;
        double loss = 0;
        for (size_t e = 0; e < m; ++e) {
          const float y = s.forward(&xs[e * in], &hs[e * hid]);
          err[e] = y - ys[e];
          loss += 0.5 * static_cast<double>(err[e]) * err[e];
        }
        st.loss = loss / static_cast<double>(m);
        // Backward of scale * mean(0.5 err^2), in fp32.
        std::fill(grad.begin(), grad.end(), 0.f);
        const float k = static_cast<float>(st.scale) / static_cast<float>(m);
        for (size_t e = 0; e < m; ++e) {
          const float dy = k * err[e];
          const float* x = &xs[e * in];
          grad[s.b2()] += dy;
          for (size_t j = 0; j < hid; ++j) {
            const float hj = hs[e * hid + j];
            grad[s.w2() + j] += dy * hj;
            const float da = dy * s.p[s.w2() + j] * (1.f - hj * hj);
            grad[s.b1() + j] += da;
            for (size_t i = 0; i < in; ++i) grad[s.w1() + j * in + i] += da * x[i];
          }
        }
        // The gradients as the format holds them.
        size_t nonzero = 0, lost = 0;
        bool nonfinite = false;
        for (float& g : grad) {
          const float c = round_to(f, g);
          nonzero += g != 0;
          lost += g != 0 && c == 0;
          nonfinite = nonfinite || !std::isfinite(c);
          g = c;
        }
        st.underflow_pct =
            nonzero == 0 ? 0.0 : 100.0 * static_cast<double>(lost) / static_cast<double>(nonzero);
        underflow_sum += st.underflow_pct;
        const bool take = scaled ? scaler.update(nonfinite) : !nonfinite;
        st.skipped = !take;
        if (take) {
          const float inv = 1.0f / static_cast<float>(st.scale);
          for (size_t i = 0; i < grad.size(); ++i) s.p[i] -= lr * (grad[i] * inv);
        } else {
          ++run.skipped_steps;
        }
        run.steps.push_back(st);
      }
      run.mean_underflow_pct = underflow_sum / cfg.steps;
      run.final_loss = run.steps.back().loss;
      res.runs.push_back(std::move(run));
    }
  }
  return res;
}

}  // namespace fp8wb
