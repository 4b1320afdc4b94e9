#include "commands/inspect_command.h"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "command_registry.h"
#include "fp8wb/core/checkpoint/checkpoint_analysis.h"
#include "fp8wb/core/counted.h"
#include "fp8wb/core/backend/default_formats.h"
#include "fp8wb/core/checkpoint/open_checkpoint.h"
#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/checkpoint/safetensors.h"
#include "fp8wb/core/formats/value_report.h"
#include "same_file.h"
#include "stat_figures_json.h"
#include "table_text.h"

namespace fp8wb::cli {

namespace {

// The histogram's first layout, for readers of older output: 64 bins for floor(log2 |x|)
// from -40 to 23 (values beyond them counted in the end bins), zeros, non-finite values.
std::vector<uint64_t> legacy_log2_histogram(const std::vector<uint64_t>& full) {
  constexpr int kLo = -40, kHi = 23, kBins = kHi - kLo + 1;
  std::vector<uint64_t> out(kBins + 2, 0);
  if (full.size() < static_cast<size_t>(kValueHistBins)) return out;
  for (int b = 0; b < kValueHistExpBins; ++b) {
    const int e = std::clamp(b + kValueHistMinExp, kLo, kHi);
    out[static_cast<size_t>(e - kLo)] += full[static_cast<size_t>(b)];
  }
  out[kBins] = full[kValueHistZeroBin];
  out[kBins + 1] = full[kValueHistNonfiniteBin];
  return out;
}

// Every nonempty bin over the whole fp32 range: {"exp": e, "count": n} holds the n values
// with 2^e <= |x| < 2^(e+1).
nlohmann::json log2_bins(const std::vector<uint64_t>& full) {
  nlohmann::json bins = nlohmann::json::array();
  for (int b = 0; b < kValueHistExpBins && b < static_cast<int>(full.size()); ++b) {
    const uint64_t c = full[static_cast<size_t>(b)];
    if (c > 0) bins.push_back({{"exp", b + kValueHistMinExp}, {"count", c}});
  }
  return bins;
}

// Why --export cannot write to `path`, said before any work (the analysis of a large
// checkpoint takes minutes): its folder is not there, not a folder or not writable, or the
// path is a folder. Empty where it can.
std::string export_path_refusal(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    return "--export " + path + " is a folder: give a file path, e.g. " +
           (fs::path(path) / "model-fp8.safetensors").string();
  }
  fs::path folder = fs::path(path).parent_path();
  if (folder.empty()) folder = ".";
  const auto st = fs::status(folder, ec);
  if (!fs::exists(st)) {
    return "--export " + path + ": the folder " + folder.string() +
           " does not exist (create it first, or give another path)";
  }
  if (!fs::is_directory(st))
    return "--export " + path + ": " + folder.string() + " is not a folder";
  if (::access(folder.c_str(), W_OK | X_OK) != 0) {
    return "--export " + path + ": the folder " + folder.string() + " is not writable (" +
           std::strerror(errno) + ")";
  }
  return {};
}

// Text kept aside in an unnamed scratch file (gone when closed, or when the process
// ends): what inspect shows of each tensor, until all are analysed and sorted.
class ScratchText {
 public:
  ScratchText() {
    std::string name = std::string(scratch_folder()) + "/fp8wb-inspect-XXXXXX";
    const int fd = ::mkstemp(name.data());
    if (fd >= 0) {
      ::unlink(name.c_str());  // nameless: gone with the process, however it ends
      file_ = ::fdopen(fd, "w+b");
      if (!file_) ::close(fd);
    }
    if (!file_) {
      throw std::runtime_error(std::string("cannot make a scratch file for the table in ") +
                               scratch_folder() + ": " + std::strerror(errno) +
                               "; set TMPDIR to a folder with room");
    }
  }
  ~ScratchText() { std::fclose(file_); }
  ScratchText(const ScratchText&) = delete;
  ScratchText& operator=(const ScratchText&) = delete;
  // Appends `text`; returns where it starts.
  uint64_t add(const std::string& text) {
    const uint64_t at = size_;
    if (std::fwrite(text.data(), 1, text.size(), file_) != text.size()) fail("written");
    size_ += text.size();
    return at;
  }
  // Writes `size` bytes from `at` to `out`.
  void copy(uint64_t at, uint64_t size, std::ostream& out) {
    if (!flushed_) {
      if (std::fflush(file_) != 0) fail("written");
      flushed_ = true;
    }
    if (fseeko(file_, static_cast<off_t>(at), SEEK_SET) != 0) fail("read");
    char buf[1 << 16];
    while (size > 0) {
      const size_t n = std::fread(buf, 1, std::min<uint64_t>(size, sizeof buf), file_);
      if (n == 0) fail("read");
      out.write(buf, static_cast<std::streamsize>(n));
      size -= n;
    }
  }

 private:
  static const char* scratch_folder() {
    const char* d = std::getenv("TMPDIR");
    return d && *d ? d : "/tmp";
  }
  [[noreturn]] void fail(const char* what) const {
    throw std::runtime_error(std::string("the scratch file for the table (in ") + scratch_folder() +
                             ") could not be " + what + ": " + std::strerror(errno) +
                             "; set TMPDIR to a folder with room");
  }
  std::FILE* file_ = nullptr;
  uint64_t size_ = 0;
  bool flushed_ = false;
};

// A tensor's object of --json's array, as nlohmann writes it inside the array (indented).
std::string tensor_json(const TensorAnalysis& a) {
  const uint64_t zeros =
      a.log2_hist.size() > kValueHistZeroBin ? a.log2_hist[kValueHistZeroBin] : 0;
  nlohmann::json t = {
      {"name", a.name},
      {"dtype", a.dtype},
      {"shape", a.shape},
      {"numel", a.numel},
      {"min", a.min},
      {"max", a.max},
      {"mean", a.mean},
      {"std", a.std},
      {"amax", a.amax},
      {"dynamic_range_bits", a.dynamic_range_bits},
      {"nan_count", a.nan_count},
      {"inf_count", a.inf_count},
      {"log2_histogram", legacy_log2_histogram(a.log2_hist)},
      {"log2_bins", log2_bins(a.log2_hist)},
      {"zero_count", zeros},
      {"recommended", a.recommended},
      {"reason", a.reason},
      // The share of the nonzero values the recommended recipe turns
      // into 0 (null without a recommendation).
      {"recommended_underflow_pct", a.recommended_result()
                                        ? nlohmann::json(a.recommended_result()->underflow_pct)
                                        : nlohmann::json()},
      {"warnings", a.warnings}};
  // Why the recipes ran but none is recommended (every one zeroes the tensor), null
  // otherwise.
  t["no_recipe"] = a.no_recipe.empty() ? nlohmann::json() : nlohmann::json(a.no_recipe);
  // Why there is no SQNR (no finite signal), null when the recipes ran.
  t["not_quantized"] = a.not_quantized.empty() ? nlohmann::json() : nlohmann::json(a.not_quantized);
  // Values that could not be read (not_quantized says why), or none finite (empty, all
  // NaN or Inf): no figure describes them.
  t["values_known"] = a.values_known;
  if (!a.has_figures()) {
    for (const char* k : {"min", "max", "mean", "std", "amax", "dynamic_range_bits"})
      t[k] = nullptr;
  }
  t["recipes"] = nlohmann::json::array();
  for (const auto& r : a.recipes) {
    nlohmann::json recipe = {{"recipe", r.name}};
    put_stat_figures(recipe, r.raw);  // sqnr_db, underflow_pct, ...: kTensorStatFigures
    t["recipes"].push_back(std::move(recipe));
  }
  // One level in: every line indented by 2 more (JSON strings hold no raw line breaks).
  const std::string text = t.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string indented = "  ";
  indented.reserve(text.size() + text.size() / 8);
  for (const char c : text) {
    indented += c;
    if (c == '\n') indented += "  ";
  }
  return indented;
}

// A tensor's rows of the table: the best SQNR's recipe and its figures, the share the
// recommended recipe (named under the row) turns into 0, then its notes.
// `name_width`: the tensor column's width (names longer are cut in the middle, where
// two layers' names differ least); `other_best`: the formats whose best SQNR a row showed
// beside another format's recommendation, for the footnote said once under the table.
std::string table_rows(const TensorAnalysis& a, size_t name_width, std::set<Format>& other_best) {
  std::string shape;
  for (int64_t d : a.shape) shape += (shape.empty() ? "" : "x") + std::to_string(d);
  if (a.shape.empty()) shape = "scalar";  // no dimension
  const RecipeResult* best = nullptr;
  for (const auto& r : a.recipes) {
    if (!best || r.sqnr_db > best->sqnr_db) best = &r;
  }
  const std::string sqnr = best ? fmt::format("{:.1f}", best->sqnr_db) : std::string("-");
  const std::string underflow =
      best ? underflow_pct_text(best->underflow_pct) + "%" : std::string("-");
  const RecipeResult* rec = a.recommended_result();
  const std::string rec_underflow =
      rec ? underflow_pct_text(rec->underflow_pct) + "%" : std::string("-");
  const std::string amax = a.has_figures() ? fmt::format("{:.4g}", a.amax) : std::string("-");
  const std::string range =
      a.has_figures() ? fmt::format("{:.1f}b", a.dynamic_range_bits) : std::string("-");
  // The best SQNR of another format than the recommendation's (E4M3FNUZ beside E4M3FN) is
  // marked "*": the footnote under the table says why, once.
  const bool other_format = best && rec && best->recipe.format != rec->recipe.format;
  const std::string name = shown_text(a.name);
  std::string out = fmt::format(
      "{} {:<8} {} {:>10} {:>7}  {:<26} {:>8} {:>9} {:>14}\n",
      fit_column(text_width(name) > name_width ? cut_middle(name, name_width) : name, name_width),
      a.dtype, fit_column(shape, 14), amax, range, best ? best->name : std::string("-"),
      other_format ? sqnr + "*" : sqnr, underflow, rec_underflow);
  if (!a.not_quantized.empty()) out += "    no SQNR: " + a.not_quantized + "\n";
  if (a.nan_count > 0 || a.inf_count > 0) {
    out += fmt::format("    non-finite: {} NaN, {} Inf (left out of every figure above)\n",
                       a.nan_count, a.inf_count);
  }
  for (const std::string& w : a.warnings) out += "    warning: " + w + "\n";
  if (!a.recommended.empty()) out += "    recommended: " + a.recommended + " (" + a.reason + ")\n";
  if (!a.no_recipe.empty()) out += "    recommended: none (" + a.no_recipe + ")\n";
  // The row's best recipe of the recommendation's format, so the two columns never seem to
  // disagree unexplained (the footnote says why once).
  if (other_format) {
    const Format f = rec->recipe.format;
    const RecipeResult* own = nullptr;
    for (const auto& r : a.recipes) {
      if (r.recipe.format == f && (!own || r.sqnr_db > own->sqnr_db)) own = &r;
    }
    other_best.insert(best->recipe.format);
    out +=
        fmt::format("    best {} recipe: {} ({:.1f} dB; the {:.1f} dB shown* is {}'s)\n",
                    format_info(f).name, own ? own->name : std::string("-"),
                    own ? own->sqnr_db : NAN, best->sqnr_db, format_info(best->recipe.format).name);
  }
  return out;
}

// The footnote of the rows marked "*", once per format: "* E4M3FNUZ: the best SQNR shown
// is of a format the recommendations are not made in: ...".
std::string other_format_note(const std::set<Format>& formats, Format recommend) {
  std::string out;
  for (const Format f : formats) {
    out += fmt::format(
        "* {}: the best SQNR marked * is of a format that recommendations are not made in; "
        "they are made among the {} recipes, the format this machine trains with{}\n",
        format_info(f).name, format_info(recommend).name,
        f == Format::E4M3FNUZ ? std::string("; E4M3FNUZ is AMD GPUs' and holds other values: "
                                            "max 240, not 448, and no negative zero")
        : f == Format::E5M2FNUZ
            ? std::string("; E5M2FNUZ is AMD GPUs' and holds other values: no Inf, no "
                          "negative zero")
            : std::string());
  }
  return out;
}

// Bytes as people read them: "512 bytes", "12.3 kB", "45.6 MB", "7.89 GB".
std::string byte_text(double bytes) {
  if (bytes < 1e3) return fmt::format("{:.0f} bytes", bytes);
  if (bytes < 1e6) return fmt::format("{:.1f} kB", bytes / 1e3);
  if (bytes < 1e9) return fmt::format("{:.1f} MB", bytes / 1e6);
  return fmt::format("{:.2f} GB", bytes / 1e9);
}

// The analysis' last line: what was analysed, in what time and, where the time is long
// enough to measure a rate (not the fixed costs of a small file), at what rate.
std::string analysis_line(double bytes, double seconds, size_t combos, bool on_gpu) {
  const std::string time = seconds >= 1      ? fmt::format("{:.2f} s", seconds)
                           : seconds >= 1e-3 ? fmt::format("{:.0f} ms", seconds * 1e3)
                                             : std::string("under 1 ms");
  std::string rate;
  if (seconds >= 0.1) {
    const double per_s = bytes / seconds;
    rate = per_s >= 1e9 ? fmt::format("{:.2f} GB/s, ", per_s / 1e9)
                        : fmt::format("{:.1f} MB/s, ", per_s / 1e6);
  }
  return fmt::format("analysed {} of tensors in {} ({}{} recipe x format each, {})\n",
                     byte_text(bytes), time, rate, combos, on_gpu ? "on the GPU" : "on the CPU");
}

// --recipe as the table names recipes: a scaling ("mx"), optionally after a format and,
// for MX, before its rounding ("E4M3FN mx floor": the analysis rounds MX scales down, as
// OCP's MX does). Fills kind and, where the text names one, format; else says why not.
std::string parse_recipe_filter(const std::string& text, ScalingKind& kind,
                                std::optional<Format>& format, std::string& note) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.push_back(w);
  if (words.size() >= 2) {
    if (const auto f = parse_format(words.front())) {
      format = f;
      words.erase(words.begin());
    }
  }
  auto k = words.empty() ? std::nullopt : parse_scaling_kind(words.front());
  // A training recipe's name (fp8wb train and eval: "blockwise") stands for the scaling it
  // gives weights, as a checkpoint's tensors are: blockwise's 128x128 tiles.
  if (!k && !words.empty()) {
    if (const auto r = parse_float8_recipe(words.front())) {
      for (const Float8RecipeEntry& e : kFloat8Recipes) {
        if (e.value == *r) k = e.weight;
      }
      note = "--recipe " + words.front() + ": a weight's scaling under that training recipe, " +
             std::string(scaling_kind_name(*k));
    }
  }
  const bool mx = k.has_value() && *k == ScalingKind::MX;
  const bool floor = words.size() == 2 && mx &&
                     (words[1] == "floor" || words[1] == "FLOOR" || words[1] == "Floor");
  if (!k || (words.size() > 1 && !floor)) {
    std::string why =
        "unknown recipe '" + text + "' (tensorwise, rowwise, 1x128, 128x128, mx, " +
        "nvfp4, or a training recipe: blockwise; or as the table names them: " + "E4M3FN mx floor)";
    if (mx && words.size() == 2)
      why =
          "the analysis runs MX with its scales rounded down ('mx floor'), not '" + words[1] + "'";
    return why;
  }
  kind = *k;
  return {};
}

}  // namespace

CLI::App* add_inspect_command(CLI::App& app, InspectOptions& opt) {
  auto* c = app.add_subcommand(
      "inspect",
      "What FP8 does to each tensor of a checkpoint (.safetensors, *.index.json, .pt/.pth, or "
      "a Hugging Face folder)");
  c->add_option("checkpoint", opt.path,
                "The checkpoint: a file, or a folder with model.safetensors, its "
                "model.safetensors.index.json or pytorch_model.bin")
      ->required();
  c->add_option("--format", opt.format, "Only this format (E4M3FN, E5M2, E4M3FNUZ, ...)");
  c->add_option("--recipe", opt.recipe,
                "Only this scaling (tensorwise, rowwise, 1x128, 128x128, mx, nvfp4), or a "
                "recipe as the table names it (\"E4M3FN mx floor\")");
  c->add_option("--device", opt.device,
                "Where the recipes run: auto (the GPU when there is one), cpu, gpu")
      ->check(CLI::IsMember({"auto", "cpu", "gpu"}));
  c->add_flag("--json", opt.json, "Every figure as JSON");
  c->add_flag("--wide", opt.wide,
              "Tensor names whole in the table, however long (else those over 72 columns are "
              "cut in the middle)");
  c->add_option("--export", opt.export_path,
                std::string("Also write an FP8 copy: ") + kFp8ExportRule +
                    ", as E4M3 in 128x128 blocks with <name>_scale_inv; the rest as they are")
      ->check(CLI::Validator(
          [](const std::string& v) { return v.empty() ? std::string("needs a file path") : ""; },
          "FILE"));
  return c;
}

int run_inspect(const InspectOptions& opt, std::ostream& out, std::ostream& err) {
  AnalysisOptions ao;
  ao.maps = false;
  ao.recommend_format = default_element_format(probe_backend());  // E4M3FNUZ on AMD GPUs
  if (!opt.format.empty()) {
    const auto f = parse_format(opt.format);
    if (!f) {
      err << "fp8wb inspect: unknown format '" << opt.format << "': known formats are "
          << format_names() << "\n";
      return 1;
    }
    ao.formats = {*f};
  }
  if (!opt.recipe.empty()) {
    ScalingKind k{};
    std::optional<Format> f;
    std::string note;
    if (const std::string why = parse_recipe_filter(opt.recipe, k, f, note); !why.empty()) {
      err << "fp8wb inspect: " << why << "\n";
      return 1;
    }
    if (!note.empty()) err << "note: " << note << "\n";
    if (f && !opt.format.empty() && ao.formats != std::vector<Format>{*f}) {
      err << "fp8wb inspect: --recipe '" << opt.recipe << "' names format " << format_info(*f).name
          << ", --format " << opt.format << "\n";
      return 1;
    }
    if (f) ao.formats = {*f};
    ao.kinds = {k};
  }
  if (!opt.format.empty() || !opt.recipe.empty()) {
    // Filters that leave no recipe x format pairing to run (NVFP4 in an FP8 format, E8M0
    // elements) would give a table of "-": said instead.
    std::string why;
    bool any = false;
    for (ScalingKind k : ao.kinds) {
      for (Format f : ao.formats) {
        QuantRecipe r;
        r.kind = k;
        r.format = f;
        try {
          validate_recipe(r);
          any = true;
        } catch (const std::invalid_argument& e) {
          if (why.empty()) why = e.what();
        }
      }
    }
    if (!any) {
      err << "fp8wb inspect: nothing to run"
          << (opt.recipe.empty() ? "" : " with --recipe " + opt.recipe)
          << (opt.format.empty() ? "" : " in --format " + opt.format) << ": " << why << "\n";
      return 1;
    }
  }
  ao.device = opt.device == "cpu"   ? AnalysisDevice::Cpu
              : opt.device == "gpu" ? AnalysisDevice::Gpu
                                    : AnalysisDevice::Auto;
  const bool on_gpu = analysis_uses_gpu(ao.device);  // a clear error before any work
  if (!opt.export_path.empty()) {
    if (const std::string no = export_path_refusal(opt.export_path); !no.empty()) {
      err << "fp8wb inspect: " << no << "\n";
      return 1;
    }
  }
  const auto ckpt = open_any_checkpoint(opt.path);
  // A folder: the file read in it, as it may hold others (a reference, an optimizer state).
  if (std::error_code ec; std::filesystem::is_directory(opt.path, ec))
    err << "note: " << opt.path << " is a folder: reading " << ckpt->path() << "\n";
  if (!opt.export_path.empty()) {
    // The FP8 copy is lossy: written over the checkpoint (or one of its shards) it would
    // replace the original for good.
    std::vector<std::string> inputs{opt.path};
    for (const auto& r : ckpt->tensors()) inputs.push_back(r.file->path());
    if (const std::string in = same_file_as(opt.export_path, inputs); !in.empty()) {
      err << "fp8wb inspect: --export " << opt.export_path << " is the same file as "
          << (in == opt.path ? "the checkpoint " : "the checkpoint's shard ") << in
          << ": the FP8 copy would replace it; give another path\n";
      return 1;
    }
    if (const std::string no = sqlite_refusal("--export", opt.export_path); !no.empty()) {
      err << "fp8wb inspect: " << no << "\n";
      return 1;
    }
    if (const std::string no = safetensors_replace_refusal(opt.export_path); !no.empty()) {
      err << "fp8wb inspect: --export " << no << "\n";
      return 1;
    }
    const ExportReport r = export_fp8_checkpoint(*ckpt, opt.export_path);
    err << "wrote " << opt.export_path << ": "
        << counted(static_cast<int64_t>(r.quantized.size()), "weight")
        << " in FP8 (E4M3, 128x128 blocks), "
        << counted(static_cast<int64_t>(r.kept.size()), "tensor")
        << (r.kept.size() == 1 ? " as it was\n" : " as they were\n");
    if (r.quantized.empty())
      err << "note: no tensor was written in FP8: --export converts " << kFp8ExportRule << "\n";
    // The filters choose what the table shows; the export's recipe is fixed.
    if (!r.quantized.empty() && (!opt.format.empty() || !opt.recipe.empty()))
      err << "note: --format and --recipe choose the figures shown; --export always writes "
             "E4M3 in 128x128 blocks\n";
    if (r.inf_values > 0)
      err << "warning: " << counted(r.inf_values, "Inf value") << " in "
          << counted(static_cast<int64_t>(r.with_inf.size()), "weight")
          << " (first: " << shown_text(r.with_inf.front())
          << ") written as the largest finite E4M3 value of their sign: E4M3 has no Inf\n";
    if (!r.zeroed.empty()) {
      // An outlier among small values, or values below FP8's range: the export keeps the
      // codes it was asked for, and says what they lose (the first five named).
      err << "warning: " << counted(static_cast<int64_t>(r.zeroed.size()), "weight") << " lost "
          << kNamedZeroedPct << "% or more of their nonzero values to 0 in "
          << "128x128 blocks: ";
      for (size_t i = 0; i < r.zeroed.size() && i < 5; ++i) {
        err << (i ? ", " : "") << shown_text(r.zeroed[i].first) << " ("
            << fmt::format("{:.3f}", r.zeroed[i].second) << "%)";
      }
      if (r.zeroed.size() > 5) err << " and " << r.zeroed.size() - 5 << " more";
      err << "; see the recipes recommended for them below\n";
    }
  }
  // A shard's tensors that the index does not name are no part of the checkpoint as
  // loaders read it: said, not analysed (on stderr, which leaves --json's array whole).
  if (const auto& extra = ckpt->unindexed(); !extra.empty()) {
    err << "note: " << counted(static_cast<int64_t>(extra.size()), "tensor") << " in the shards "
        << (extra.size() == 1 ? "is" : "are")
        << " not in the index's weight_map, so not analysed nor exported (first: "
        << shown_text(extra.front().first) << " in " << shown_text(extra.front().second) << ")\n";
  }
  if (ckpt->tensors().empty()) {
    // Nothing to analyse: said, not shown as an empty table (exit code 0, as `runs list`
    // of a database without runs).
    if (opt.json)
      out << "[]\n";
    else
      out << "no tensors in " << opt.path << "\n";
    return 0;
  }
  if (!opt.json && ckpt->tensors().size() > 20) {
    // Redrawn on a terminal; elsewhere (a log file) a plain line at each tenth.
    ao.progress = [&err, terminal = opt.terminal, tenth = size_t{0}](size_t done,
                                                                     size_t total) mutable {
      if (terminal) {
        err << "\ranalysed " << done << "/" << total << " tensors" << std::flush;
        if (done == total) err << "\n";
      } else if (done * 10 / total > tenth) {
        tenth = done * 10 / total;
        err << "analysed " << done << "/" << total << " tensors\n" << std::flush;
      }
      return true;
    };
  }
  // Each tensor's rows (or its JSON) go to a scratch file as it is analysed; only its
  // place there and its sort key stay in memory (some 24 bytes a tensor, not the kilobytes
  // of its figures): a checkpoint of a million tiny tensors is shown in bounded memory.
  ScratchText scratch;
  struct Shown {
    double key;  // worst_first_key()
    uint64_t at, size;
  };
  std::vector<Shown> shown;
  size_t combos = 0;
  int64_t with_nonfinite = 0, unknown = 0;
  bool analysed = false, recommended = false;
  // The tensor column as wide as the longest name (at least its header's), up to 72
  // columns unless --wide: long names stay readable, cut in the middle past that.
  constexpr size_t kNameWidth = 72;
  size_t name_width = 6;
  for (const auto& r : ckpt->tensors())
    name_width = std::max(name_width, text_width(shown_text(r.entry->name)));
  if (!opt.wide) name_width = std::min(name_width, kNameWidth);
  std::set<Format> other_best;
  const auto t0 = std::chrono::steady_clock::now();
  analyze_checkpoint(*ckpt, ao, [&](TensorAnalysis&& a) {
    combos = std::max(combos, a.recipes.size());
    with_nonfinite += a.nan_count > 0 || a.inf_count > 0;
    unknown += !a.values_known;
    analysed |= !a.recipes.empty();
    recommended |= !a.recommended.empty() || !a.no_recipe.empty();
    const std::string text = opt.json ? tensor_json(a) : table_rows(a, name_width, other_best);
    shown.push_back({worst_first_key(a), scratch.add(text), text.size()});
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The bytes analysed: not those a truncated file cut off. A file cut short ends the
  // command with status 1, after what could be read is shown.
  double bytes = 0;
  int64_t cut_off = 0;
  for (const auto& r : ckpt->tensors()) {
    if (r.entry->cut_off) {
      ++cut_off;
    } else {
      bytes += static_cast<double>(r.entry->end - r.entry->begin);
    }
  }
  const int status = cut_off > 0 ? 1 : 0;
  // Worst first: the lowest best SQNR among the results shown, exact ones after, tensors
  // without an SQNR last.
  std::stable_sort(shown.begin(), shown.end(),
                   [](const Shown& a, const Shown& b) { return a.key < b.key; });
  if (opt.json) {
    // As nlohmann writes the array of them with an indent of 2.
    if (shown.empty()) {
      out << "[]\n";
      return status;
    }
    out << "[\n";
    for (size_t i = 0; i < shown.size(); ++i) {
      if (i) out << ",\n";
      scratch.copy(shown[i].at, shown[i].size, out);
    }
    out << "\n]\n";
    return status;
  }
  // Names as text a terminal shows as it is (control characters escaped: shown_text());
  // the JSON above holds them as they are.
  // The best SQNR's recipe and its figures, then the share the recommended recipe (named
  // under the row) turns into 0.
  out << fmt::format("{} {:<8} {:<14} {:>10} {:>7}  {:<26} {:>8} {:>9} {:>14}\n",
                     fit_column("tensor", name_width), "dtype", "shape", "amax", "range",
                     "recipe (best SQNR shown)", "SQNR dB", "underflow", "rec. underflow");
  for (const Shown& s : shown) scratch.copy(s.at, s.size, out);
  out << other_format_note(other_best, ao.recommend_format);
  const auto total = static_cast<int64_t>(shown.size());
  if (with_nonfinite > 0)
    out << with_nonfinite << " of " << counted(total, "tensor")
        << (with_nonfinite == 1 ? " holds" : " hold") << " NaN or Inf values\n";
  if (unknown > 0) {
    out << unknown << " of " << counted(total, "tensor") << (unknown == 1 ? " has" : " have")
        << " values that could not be read (said above)";
    if (cut_off > 0) out << "; the file is truncated: " << counted(cut_off, "tensor") << " cut off";
    out << "\n";
  }
  // Filters that leave out the recommendation's format: said once, not by missing lines.
  if (analysed && !recommended) {
    out << "no recommendations: they are made among the " << format_info(ao.recommend_format).name
        << " recipes, which the filters leave out\n";
  }
  out << analysis_line(bytes, seconds, combos, on_gpu);
  return status;
}

namespace {
const CommandRegistrar kCommand{
    "inspect", 70,
    command_with<InspectOptions>(add_inspect_command, [](InspectOptions& opt, const CliContext& ctx,
                                                         std::ostream& out, std::ostream& err) {
      opt.terminal = ctx.err_terminal;
      return run_inspect(opt, out, err);
    })};
}  // namespace

}  // namespace fp8wb::cli
