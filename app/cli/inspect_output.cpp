// defines: what `fp8wb inspect` writes (inspect_output.h): a tensor's table rows and its
// JSON object (the histogram in both its layouts), the footnote of the rows marked "*",
// the analysis' last line, and the scratch file that holds them until all are sorted.
#include "inspect_output.h"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "fp8wb/core/name_text.h"
#include "stat_figures_json.h"
#include "table_text.h"

namespace fp8wb::cli::inspect_detail {

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

// Bytes as people read them: "512 bytes", "12.3 kB", "45.6 MB", "7.89 GB".
std::string byte_text(double bytes) {
  if (bytes < 1e3) return fmt::format("{:.0f} bytes", bytes);
  if (bytes < 1e6) return fmt::format("{:.1f} kB", bytes / 1e3);
  if (bytes < 1e9) return fmt::format("{:.1f} MB", bytes / 1e6);
  return fmt::format("{:.2f} GB", bytes / 1e9);
}

}  // namespace

ScratchText::ScratchText() {
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

ScratchText::~ScratchText() {
  std::fclose(file_);
}

uint64_t ScratchText::add(const std::string& text) {
  const uint64_t at = size_;
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size()) fail("written");
  size_ += text.size();
  return at;
}

void ScratchText::copy(uint64_t at, uint64_t size, std::ostream& out) {
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

const char* ScratchText::scratch_folder() {
  const char* d = std::getenv("TMPDIR");
  return d && *d ? d : "/tmp";
}

void ScratchText::fail(const char* what) const {
  throw std::runtime_error(std::string("the scratch file for the table (in ") + scratch_folder() +
                           ") could not be " + what + ": " + std::strerror(errno) +
                           "; set TMPDIR to a folder with room");
}

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

}  // namespace fp8wb::cli::inspect_detail
