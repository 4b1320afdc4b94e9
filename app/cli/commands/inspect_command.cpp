// defines: `fp8wb inspect CKPT`: its options, the filters and --export checked before any
// work, the FP8 copy, the analysis in bounded memory, and the table or JSON
// (inspect_output.cpp writes a tensor's rows and object).
#include "commands/inspect_command.h"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "command_registry.h"
#include "fp8wb/core/backend/default_formats.h"
#include "fp8wb/core/checkpoint/checkpoint_analysis.h"
#include "fp8wb/core/checkpoint/open_checkpoint.h"
#include "fp8wb/core/checkpoint/safetensors.h"
#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/counted.h"
#include "fp8wb/core/formats/value_report.h"
#include "inspect_output.h"
#include "same_file.h"
#include "table_text.h"

namespace fp8wb::cli {

namespace {

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

namespace {

// --format and --recipe into `ao`: false, after saying why on `err`, where one is unknown,
// they disagree, or they leave no recipe x format pairing to run.
bool choose_filters(const InspectOptions& opt, AnalysisOptions& ao, std::ostream& err) {
  if (!opt.format.empty()) {
    const auto f = parse_format(opt.format);
    if (!f) {
      err << "fp8wb inspect: unknown format '" << opt.format << "': known formats are "
          << format_names() << "\n";
      return false;
    }
    ao.formats = {*f};
  }
  if (!opt.recipe.empty()) {
    ScalingKind k{};
    std::optional<Format> f;
    std::string note;
    if (const std::string why = parse_recipe_filter(opt.recipe, k, f, note); !why.empty()) {
      err << "fp8wb inspect: " << why << "\n";
      return false;
    }
    if (!note.empty()) err << "note: " << note << "\n";
    if (f && !opt.format.empty() && ao.formats != std::vector<Format>{*f}) {
      err << "fp8wb inspect: --recipe '" << opt.recipe << "' names format " << format_info(*f).name
          << ", --format " << opt.format << "\n";
      return false;
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
      return false;
    }
  }
  return true;
}

// --export: the FP8 copy written and what it did said on `err`; false, after saying why,
// where the path is the checkpoint itself, one of its shards, or a file not to replace.
bool write_fp8_copy(const InspectOptions& opt, const Checkpoint& ckpt, std::ostream& err) {
  // The FP8 copy is lossy: written over the checkpoint (or one of its shards) it would
  // replace the original for good.
  std::vector<std::string> inputs{opt.path};
  for (const auto& r : ckpt.tensors()) inputs.push_back(r.file->path());
  if (const std::string in = same_file_as(opt.export_path, inputs); !in.empty()) {
    err << "fp8wb inspect: --export " << opt.export_path << " is the same file as "
        << (in == opt.path ? "the checkpoint " : "the checkpoint's shard ") << in
        << ": the FP8 copy would replace it; give another path\n";
    return false;
  }
  if (const std::string no = sqlite_refusal("--export", opt.export_path); !no.empty()) {
    err << "fp8wb inspect: " << no << "\n";
    return false;
  }
  if (const std::string no = safetensors_replace_refusal(opt.export_path); !no.empty()) {
    err << "fp8wb inspect: --export " << no << "\n";
    return false;
  }
  const ExportReport r = export_fp8_checkpoint(ckpt, opt.export_path);
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
  return true;
}

// The analysis' progress on `err`: redrawn on a terminal; elsewhere (a log file) a plain
// line at each tenth.
std::function<bool(size_t, size_t)> progress_lines(std::ostream& err, bool terminal) {
  return [&err, terminal, tenth = size_t{0}](size_t done, size_t total) mutable {
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

// The analysis of every tensor, as inspect shows it. Each tensor's rows (or its JSON) go
// to a scratch file as it is analysed; only its place there and its sort key stay in
// memory (some 24 bytes a tensor, not the kilobytes of its figures): a checkpoint of a
// million tiny tensors is shown in bounded memory.
struct Analysed {
  struct Shown {
    double key;  // worst_first_key()
    uint64_t at, size;
  };
  inspect_detail::ScratchText scratch;
  std::vector<Shown> shown;  // worst first, once sorted
  size_t combos = 0;
  int64_t with_nonfinite = 0, unknown = 0;
  bool analysed = false, recommended = false;
  size_t name_width = 6;  // the table's tensor column
  std::set<Format> other_best;
  double seconds = 0;
  double bytes = 0;  // those analysed: not those a truncated file cut off
  int64_t cut_off = 0;
};

void analyse_tensors(const Checkpoint& ckpt, const AnalysisOptions& ao, const InspectOptions& opt,
                     Analysed& a) {
  // The tensor column as wide as the longest name (at least its header's), up to 72
  // columns unless --wide: long names stay readable, cut in the middle past that.
  constexpr size_t kNameWidth = 72;
  for (const auto& r : ckpt.tensors())
    a.name_width = std::max(a.name_width, text_width(shown_text(r.entry->name)));
  if (!opt.wide) a.name_width = std::min(a.name_width, kNameWidth);
  const auto t0 = std::chrono::steady_clock::now();
  analyze_checkpoint(ckpt, ao, [&](TensorAnalysis&& t) {
    a.combos = std::max(a.combos, t.recipes.size());
    a.with_nonfinite += t.nan_count > 0 || t.inf_count > 0;
    a.unknown += !t.values_known;
    a.analysed |= !t.recipes.empty();
    a.recommended |= !t.recommended.empty() || !t.no_recipe.empty();
    const std::string text = opt.json ? inspect_detail::tensor_json(t)
                                      : inspect_detail::table_rows(t, a.name_width, a.other_best);
    a.shown.push_back({worst_first_key(t), a.scratch.add(text), text.size()});
  });
  a.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const auto& r : ckpt.tensors()) {
    if (r.entry->cut_off) {
      ++a.cut_off;
    } else {
      a.bytes += static_cast<double>(r.entry->end - r.entry->begin);
    }
  }
  // Worst first: the lowest best SQNR among the results shown, exact ones after, tensors
  // without an SQNR last.
  std::stable_sort(
      a.shown.begin(), a.shown.end(),
      [](const Analysed::Shown& x, const Analysed::Shown& y) { return x.key < y.key; });
}

// --json: the tensors' objects as nlohmann writes the array of them, with an indent of 2.
void write_json(Analysed& a, std::ostream& out) {
  if (a.shown.empty()) {
    out << "[]\n";
    return;
  }
  out << "[\n";
  for (size_t i = 0; i < a.shown.size(); ++i) {
    if (i) out << ",\n";
    a.scratch.copy(a.shown[i].at, a.shown[i].size, out);
  }
  out << "\n]\n";
}

// The table: names as text a terminal shows as it is (control characters escaped:
// shown_text(); the JSON holds them as they are); the best SQNR's recipe and its figures,
// then the share the recommended recipe (named under the row) turns into 0; the notes
// under it and the analysis' last line.
void write_table(Analysed& a, const AnalysisOptions& ao, bool on_gpu, std::ostream& out) {
  out << fmt::format("{} {:<8} {:<14} {:>10} {:>7}  {:<26} {:>8} {:>9} {:>14}\n",
                     fit_column("tensor", a.name_width), "dtype", "shape", "amax", "range",
                     "recipe (best SQNR shown)", "SQNR dB", "underflow", "rec. underflow");
  for (const Analysed::Shown& s : a.shown) a.scratch.copy(s.at, s.size, out);
  out << inspect_detail::other_format_note(a.other_best, ao.recommend_format);
  const auto total = static_cast<int64_t>(a.shown.size());
  if (a.with_nonfinite > 0)
    out << a.with_nonfinite << " of " << counted(total, "tensor")
        << (a.with_nonfinite == 1 ? " holds" : " hold") << " NaN or Inf values\n";
  if (a.unknown > 0) {
    out << a.unknown << " of " << counted(total, "tensor") << (a.unknown == 1 ? " has" : " have")
        << " values that could not be read (said above)";
    if (a.cut_off > 0)
      out << "; the file is truncated: " << counted(a.cut_off, "tensor") << " cut off";
    out << "\n";
  }
  // Filters that leave out the recommendation's format: said once, not by missing lines.
  if (a.analysed && !a.recommended) {
    out << "no recommendations: they are made among the " << format_info(ao.recommend_format).name
        << " recipes, which the filters leave out\n";
  }
  out << inspect_detail::analysis_line(a.bytes, a.seconds, a.combos, on_gpu);
}

}  // namespace

int run_inspect(const InspectOptions& opt, std::ostream& out, std::ostream& err) {
  AnalysisOptions ao;
  ao.maps = false;
  ao.recommend_format = default_element_format(probe_backend());  // E4M3FNUZ on AMD GPUs
  if (!choose_filters(opt, ao, err)) return 1;
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
  if (!opt.export_path.empty() && !write_fp8_copy(opt, *ckpt, err)) return 1;
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
  if (!opt.json && ckpt->tensors().size() > 20) ao.progress = progress_lines(err, opt.terminal);
  Analysed a;
  analyse_tensors(*ckpt, ao, opt, a);
  // A file cut short ends the command with status 1, after what could be read is shown.
  const int status = a.cut_off > 0 ? 1 : 0;
  if (opt.json)
    write_json(a, out);
  else
    write_table(a, ao, on_gpu, out);
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
