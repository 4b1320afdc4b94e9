#include "commands/demo_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "command_registry.h"
#include "fp8wb/core/formats/demos.h"
#include "fp8wb/core/formats/value_report.h"
#include "stat_figures_json.h"

namespace fp8wb::cli {
namespace {

using nlohmann::json;

json number(double v) {
  return std::isfinite(v) ? json(v) : json(format_number(v));
}

json hist_json(const TensorStats& s) {
  json bins = json::array();
  for (int b = 0; b < kHistExpBins; ++b) {
    if (s.raw.hist[b] != 0) bins.push_back({{"log2", kHistMinExp + b}, {"count", s.raw.hist[b]}});
  }
  return {{"bins", bins},
          {"zero", s.raw.hist[kHistZeroBin]},
          {"nonfinite", s.raw.hist[kHistNonfiniteBin]}};
}

// One line of block characters: the exponent histogram from 2^-30 to 2^17, widened to
// take in every nonempty bin, and a line under it marking the format's representable band
// [min subnormal, max].
void print_histogram(std::ostream& out, const TensorStats& s, Format f) {
  static const char* kLevels[] = {" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  int lo = -30, hi = 17;
  for (int b = 0; b < kHistExpBins; ++b) {
    if (s.raw.hist[b] == 0) continue;
    lo = std::min(lo, kHistMinExp + b);
    hi = std::max(hi, kHistMinExp + b);
  }
  uint64_t peak = 1;
  for (int e = lo; e <= hi; ++e) peak = std::max(peak, s.raw.hist[e - kHistMinExp]);
  std::string bars, band;
  const auto& info = format_info(f);
  const int band_lo = static_cast<int>(std::floor(std::log2(info.min_subnormal)));
  const int band_hi = static_cast<int>(std::floor(std::log2(info.max_finite)));
  for (int e = lo; e <= hi; ++e) {
    const uint64_t c = s.raw.hist[e - kHistMinExp];
    const int level =
        c == 0 ? 0 : 1 + static_cast<int>(7.0 * static_cast<double>(c) / static_cast<double>(peak));
    bars += kLevels[std::min(level, 8)];
    band += (e >= band_lo && e <= band_hi)
                ? (e < static_cast<int>(std::log2(info.min_normal)) ? "s" : "=")
                : " ";
  }
  // The band starts under the bars: after a label as wide as the one before them.
  const std::string first = fmt::format("2^{}", lo);
  out << fmt::format("    log2|x*scale| {} {} 2^{}\n", first, bars, hi);
  out << fmt::format("    {:<13} {:>{}} {}\n", std::string(info.name) + " range", "", first.size(),
                     band);
}

// `text` in lines of at most `width` bytes, broken at spaces, the lines after the first
// indented by `indent`; each line ends in a newline.
std::string wrapped(const std::string& text, size_t width, const std::string& indent) {
  std::string out, line;
  size_t at = 0;
  while (at < text.size()) {
    const size_t space = text.find(' ', at);
    const std::string word =
        text.substr(at, space == std::string::npos ? std::string::npos : space - at);
    at = space == std::string::npos ? text.size() : space + 1;
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line = indent;
    }
    line += (line.empty() || line == indent ? "" : " ") + word;
  }
  return out + line + "\n";
}

int outliers(const DemoOptions& opt, Format f, std::ostream& out) {
  OutlierDemoConfig cfg;
  cfg.format = f;
  cfg.seed = opt.seed;
  if (!opt.factors.empty()) cfg.factors = opt.factors;
  const OutlierDemoResult r = run_outlier_demo(cfg);
  if (opt.json) {
    json rows = json::array();
    for (const auto& row : r.rows) {
      json o = {{"factor", row.factor},
                {"tensorwise_error_pct", row.tensorwise_error_pct},
                {"block_1x128_error_pct", row.block_error_pct}};
      // tensorwise_underflow_pct, block_1x128_sqnr_db, ...: kTensorStatFigures
      put_stat_figures(o, row.tensorwise.raw, "tensorwise_");
      put_stat_figures(o, row.block.raw, "block_1x128_");
      rows.push_back(std::move(o));
    }
    out << json({{"demo", "outliers"},
                 {"format", std::string(format_info(f).name)},
                 {"shape", {cfg.rows, cfg.cols}},
                 {"outlier_channels", cfg.outlier_channels},
                 {"rows", rows}})
               .dump(2)
        << "\n";
    return 0;
  }
  out << fmt::format(
      "Outlier channels: a {}x{} normal tensor, channels 0-{} scaled by k, {} per tensor vs 1x128 "
      "blocks.\n"
      "Error = sqrt(sum err^2 / sum x^2) on the channels outside the first 128-block.\n\n",
      cfg.rows, cfg.cols, cfg.outlier_channels - 1, format_info(f).name);
  out << fmt::format("{:>10}  {:>14}  {:>11}  {:>20}  {:>16}\n", "k", "per-tensor err", "1x128 err",
                     "per-tensor underflow", "1x128 underflow");
  for (const auto& row : r.rows) {
    out << fmt::format("{:>10}  {:>13.2f}%  {:>10.2f}%  {:>19.2f}%  {:>15.2f}%\n",
                       format_number(row.factor), row.tensorwise_error_pct, row.block_error_pct,
                       row.tensorwise_underflow_pct, row.block_underflow_pct);
  }
  out << "\nA reference result from the mixed-precision / FP8 training literature, for this "
         "setup in E4M3:\nper tensor 2.6% / 4.9% / 14.1% at k = 1e2 / 1e4 / 3e4, 1x128 blocks "
         "2.6% throughout:\none outlier channel costs the whole tensor its precision.\n";
  return 0;
}

int gradients(const DemoOptions& opt, std::ostream& out) {
  GradientDemoConfig cfg;
  cfg.gradient_scale = opt.gradient_scale;
  cfg.seed = opt.seed;
  const GradientDemoResult r = run_gradient_demo(cfg);
  if (opt.json) {
    json cases = json::array();
    for (const auto& c : r.cases) {
      const std::string note = gradient_clamp_note(c);
      json o = {{"format", std::string(format_info(c.format).name)},
                {"scaling", c.scaled ? "per-tensor" : "none"},
                {"scale", c.scale},
                {"saturated", c.stats.raw.saturated},
                {"note", note.empty() ? json() : json(note)},
                {"histogram", hist_json(c.stats)}};
      put_stat_figures(o, c.stats.raw);  // underflow_pct, sqnr_db, ...: kTensorStatFigures
      cases.push_back(std::move(o));
    }
    out << json({{"demo", "gradients"},
                 {"n", cfg.n},
                 {"magnitude_range", {cfg.lo, cfg.hi}},
                 {"gradient_scale", cfg.gradient_scale},
                 {"cases", cases}})
               .dump(2)
        << "\n";
    return 0;
  }
  out << fmt::format(
      "Gradients: {} values, |g| log-uniform in [{}, {}], times a gradient scale of {}.\n\n", cfg.n,
      format_number(cfg.lo), format_number(cfg.hi), format_number(cfg.gradient_scale));
  out << fmt::format("{:<8} {:<12} {:>12} {:>10} {:>10} {:>20} {:>9}\n", "format", "scaling",
                     "scale", "underflow", "subnormal", "saturated", "SQNR dB");
  std::vector<std::string> notes;
  for (const auto& c : r.cases) {
    const char* scaling = c.scaled ? "per-tensor" : "none (cast)";
    const std::string saturated =
        fmt::format("{:.2f}% ({})", c.stats.saturated_pct(), c.stats.raw.saturated);
    out << fmt::format("{:<8} {:<12} {:>12} {:>9.2f}% {:>9.2f}% {:>20} {:>9.2f}\n",
                       format_info(c.format).name, scaling, format_short(c.scale),
                       c.stats.underflow_pct(), c.stats.subnormal_pct(), saturated,
                       c.stats.sqnr_db());
    print_histogram(out, c.stats, c.format);
    if (const std::string note = gradient_clamp_note(c); !note.empty())
      notes.push_back(fmt::format("{}, {}: {}.", format_info(c.format).name, scaling, note));
  }
  out << "\n'=' marks the normal range, 's' the subnormals: what falls left of them flushes to "
         "zero.\nSaturated: values beyond the format's largest value, clamped to it.\n";
  for (const std::string& n : notes) out << wrapped("Note: " + n, 92, "      ");
  return 0;
}

std::string track_name(const MasterWeightsTrack& t) {
  std::string name(storage_format_name(t.format));
  if (t.format == StorageFormat::FP32) name += " (master weights)";
  if (t.rounding == Rounding::Stochastic) name += ", stochastic rounding";
  return name;
}

int master_weights(const DemoOptions& opt, std::ostream& out) {
  MasterWeightsConfig cfg;
  cfg.update = opt.update;
  cfg.steps = opt.steps;
  cfg.seeds = opt.seeds;
  cfg.seed = opt.seed;
  const MasterWeightsResult r = run_master_weights_demo(cfg);
  if (opt.json) {
    json tracks = json::array();
    for (const auto& t : r.tracks) {
      json j = {{"format", std::string(storage_format_name(t.format))},
                {"rounding", t.rounding == Rounding::Stochastic ? "stochastic" : "nearest-even"},
                {"spacing_near_initial", t.spacing_at_start},
                {"final", number(t.final_mean)}};
      if (t.rounding == Rounding::Stochastic) {
        j["seeds"] = cfg.seeds;
        j["final_std"] = t.final_std;
        j["final_low"] = t.low.back();
        j["final_high"] = t.high.back();
      }
      tracks.push_back(j);
    }
    out << json({{"demo", "master-weights"},
                 {"initial", cfg.initial},
                 {"update", cfg.update},
                 {"steps", cfg.steps},
                 {"tracks", tracks}})
               .dump(2)
        << "\n";
    return 0;
  }
  out << fmt::format(
      "Master weights: a weight of {} updated {} times by {}, each add rounded to the format.\n"
      "Exact: {:.4f}.\n\n",
      format_number(cfg.initial), cfg.steps, format_number(cfg.update),
      cfg.initial + cfg.steps * cfg.update);
  out << fmt::format("{:<36} {:>13}  {}\n", "format", "spacing at w0", "final weight");
  for (const auto& t : r.tracks) {
    std::string fin = fmt::format("{:.4f}", t.final_mean);
    if (t.rounding == Rounding::Stochastic)
      fin += fmt::format(" (mean of {} seeds, std {:.4f}, {:.4f} .. {:.4f})", cfg.seeds,
                         t.final_std, t.low.back(), t.high.back());
    out << fmt::format("{:<36} {:>13}  {}\n", track_name(t),
                       fmt::format("2^{}", std::ilogb(t.spacing_at_start)), fin);
  }
  out << "\nEach add rounds to nearest even on the format's grid: an update below half the "
         "spacing is lost,\none above it moves the weight by a whole spacing. Stochastic "
         "rounding is right on average.\n";
  return 0;
}

int loss_scaling(const DemoOptions& opt, std::ostream& out) {
  LossScalingConfig cfg;
  cfg.steps = opt.steps;
  cfg.init_scale = opt.init_scale;
  cfg.growth_interval = opt.growth_interval;
  cfg.seed = opt.seed;
  const LossScalingResult r = run_loss_scaling_demo(cfg);
  if (opt.json) {
    json runs = json::array();
    for (const auto& run : r.runs) {
      json scales = json::array();
      json skipped = json::array();
      for (size_t i = 0; i < run.steps.size(); ++i) {
        scales.push_back(run.steps[i].scale);
        if (run.steps[i].skipped) skipped.push_back(i);
      }
      runs.push_back({{"format", std::string(storage_format_name(run.format))},
                      {"loss_scaling", run.scaled ? "dynamic" : "none"},
                      {"mean_underflow_pct", run.mean_underflow_pct},
                      {"skipped_steps", run.skipped_steps},
                      {"final_scale", run.steps.back().scale},
                      {"final_loss", number(run.final_loss)},
                      {"scale", scales},
                      {"skipped", skipped}});
    }
    out << json({{"demo", "loss-scaling"},
                 {"steps", cfg.steps},
                 {"init_scale", cfg.init_scale},
                 {"growth_interval", cfg.growth_interval},
                 {"runs", runs}})
               .dump(2)
        << "\n";
    return 0;
  }
  out << fmt::format(
      "Loss scaling: an MLP ({}-{}-1) fitting a teacher ({} examples, {} steps); its fp32 "
      "gradients are cast\nto each format before the update. Dynamic scale: start {}, halve "
      "and skip the step on Inf/NaN,\ndouble after {} good steps.\n\n",
      cfg.inputs, cfg.hidden, cfg.examples, cfg.steps, format_number(cfg.init_scale),
      cfg.growth_interval);
  out << fmt::format("{:<6} {:<12} {:>10} {:>8} {:>14} {:>12}\n", "format", "loss scale",
                     "underflow", "skipped", "final scale", "final loss");
  for (const auto& run : r.runs) {
    out << fmt::format("{:<6} {:<12} {:>9.4f}% {:>8} {:>14} {:>12.4e}\n",
                       storage_format_name(run.format), run.scaled ? "dynamic" : "none",
                       run.mean_underflow_pct, run.skipped_steps,
                       format_number(run.steps.back().scale), run.final_loss);
  }
  out << "\nUnderflow: nonzero fp32 gradient values that the cast turns into zero, averaged over "
         "steps.\n";
  return 0;
}

}  // namespace

void add_demo_command(CLI::App& app, DemoOptions& opt) {
  auto* cmd =
      app.add_subcommand("demo",
                         "Classroom demos: outlier channels, E4M3 vs E5M2 gradients, master "
                         "weights, loss scaling");
  cmd->add_option("which", opt.which, "outliers, gradients, master-weights or loss-scaling")
      ->required()
      ->check(CLI::IsMember({"outliers", "gradients", "master-weights", "loss-scaling"}));
  cmd->add_option("-f,--format", opt.format,
                  "Element format for the outlier demo (default E4M3FN)");
  cmd->add_option("-k,--factor", opt.factors, "Outlier factors (repeatable; default 1e2 1e4 3e4)");
  cmd->add_option("-s,--scale", opt.gradient_scale,
                  "Gradient demo: multiply every gradient by this (a loss scale)");
  cmd->add_option("-u,--update", opt.update, "Master weights: the update added every step");
  cmd->add_option("--steps", opt.steps, "Master weights, loss scaling: steps (default 1000)");
  cmd->add_option("--seeds", opt.seeds,
                  "Master weights: runs with stochastic rounding (default 32)");
  cmd->add_option("--init-scale", opt.init_scale,
                  "Loss scaling: the initial scale (default 65536)");
  cmd->add_option("--growth-interval", opt.growth_interval,
                  "Loss scaling: good steps before the scale doubles (default 50)");
  cmd->add_option("--seed", opt.seed, "Random seed");
  cmd->add_flag("--json", opt.json, "Machine-readable output");
}

int run_demo(const DemoOptions& opt, std::ostream& out, std::ostream& err) {
  try {
    const auto f = parse_format(opt.format);
    if (!f)
      throw std::invalid_argument("unknown format '" + opt.format + "': known formats are " +
                                  format_names());
    if (opt.which == "master-weights") return master_weights(opt, out);
    if (opt.which == "loss-scaling") return loss_scaling(opt, out);
    return opt.which == "outliers" ? outliers(opt, *f, out) : gradients(opt, out);
  } catch (const std::invalid_argument& e) {
    err << "fp8wb demo: " << e.what() << "\n";
    return 2;
  }
}

namespace {
const CommandRegistrar kCommand{"demo", 20, command_with<DemoOptions>(add_demo_command, run_demo)};
}  // namespace

}  // namespace fp8wb::cli
