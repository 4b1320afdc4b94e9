// defines: what the Checkpoint tab's files share (checkpoint_model.cpp: CheckpointModel;
// checkpoint_tab.cpp: the tab, its files and the analysis job; checkpoint_plots.cpp: the
// selected tensor's plots and caption): qs(), best_sqnr(), sqnr_of(), format_name(), the
// colours that mark the recommended and the selected recipe, this machine's FP8 formats,
// the format recommendations are made in and the criteria of both answers. Internal to
// views.
#pragma once

#include <QColor>
#include <QCoreApplication>
#include <QString>
#include <cmath>
#include <string>
#include <string_view>

#include "fp8wb/core/backend_info.h"
#include "fp8wb/core/checkpoint_analysis.h"
#include "fp8wb/core/default_formats.h"

namespace fp8wb::checkpoint_detail {

inline QString qs(const std::string& s) {
  return QString::fromStdString(s);
}

// A name read from a checkpoint as the tab shows it: control characters and the invisible
// ones that reorder or join text (bidi overrides, embeddings, isolates and marks, zero
// widths, line and paragraph separators) written as escapes, "\u202E", "\x01", so
// that a name cannot reverse or garble the text around it; an empty name (safetensors
// allows one) as "" so that it is seen.
inline QString shown_name(const std::string& s) {
  if (s.empty()) return QStringLiteral("\"\"");
  const QString name = QString::fromStdString(s);
  QString out;
  out.reserve(name.size());
  for (const char32_t c : name.toUcs4()) {
    const bool control = c < 0x20 || (c >= 0x7f && c < 0xa0);
    const bool invisible = c == 0x061c || (c >= 0x200b && c <= 0x200f) ||
                           (c >= 0x2028 && c <= 0x202e) || (c >= 0x2060 && c <= 0x206f) ||
                           c == 0xfeff;
    if (control)
      out += QStringLiteral("\\x%1").arg(static_cast<uint>(c), 2, 16, QLatin1Char('0'));
    else if (invisible)
      out +=
          QStringLiteral("\\u") +
          QString::number(static_cast<uint>(c), 16).toUpper().rightJustified(4, QLatin1Char('0'));
    else
      out += QString::fromUcs4(&c, 1);
  }
  return out;
}

// shown_name() cut in the middle to at most `max` characters ("layer.0.very…weight"): a
// name of hundreds of characters without a space would widen a caption, and the window
// with it, past the screen.
inline QString short_name(const std::string& s, int max = 80) {
  const QString name = shown_name(s);
  if (name.size() <= max) return name;
  const int keep = (max - 1) / 2;
  return name.left(keep) + QChar(0x2026) + name.right(max - 1 - keep);
}

inline double best_sqnr(const TensorAnalysis& a, const RecipeResult** which = nullptr) {
  double best = -INFINITY;
  for (const auto& r : a.recipes) {
    if (r.sqnr_db > best) {
      best = r.sqnr_db;
      if (which) *which = &r;
    }
  }
  return best;
}

inline double sqnr_of(const TensorAnalysis& a, ScalingKind k, Format f) {
  for (const auto& r : a.recipes) {
    if (r.recipe.kind == k && r.recipe.format == f) return r.sqnr_db;
  }
  return NAN;
}

// An SQNR in dB as `fp8wb inspect` writes it: "inf" where there is no error at all, "-"
// where there is no figure.
inline QString sqnr_text(double db) {
  if (std::isnan(db)) return QStringLiteral("-");
  if (std::isinf(db)) return db > 0 ? QStringLiteral("inf") : QStringLiteral("-inf");
  return QString::number(db, 'f', 1);
}

inline QString format_name(Format f) {
  const std::string_view n = format_info(f).name;
  return QString::fromLatin1(n.data(), static_cast<int>(n.size()));
}

// The marks of the recommended and the selected recipe, in the chart and the table.
inline const QColor kRecommendedColor(0x2c, 0xa0, 0x2c);
inline const QColor kSelectedColor(0xff, 0x7f, 0x0e);

// The FP8 formats of this machine: E4M3FNUZ and E5M2FNUZ on AMD GPUs, E4M3FN and E5M2
// elsewhere (default_formats.h). Recommendations are made in its E4M3.
inline const FormatPairingEntry& machine_formats() {
  static const FormatPairingEntry& e =
      table_entry(kFormatPairings, default_format_pairing(probe_backend()));
  return e;
}
inline Format recommend_format() {
  return machine_formats().input;
}

inline QString recommended_criterion() {
  const QString f = format_name(recommend_format());
  const bool fnuz = recommend_format() == Format::E4M3FNUZ;
  return QCoreApplication::translate("CheckpointTab",
                                     "the simplest %1 recipe within 1 dB of the best %1 SQNR, "
                                     "without saturation (%1: the format of weights and "
                                     "activations on %2)")
      .arg(f, fnuz ? QCoreApplication::translate("CheckpointTab", "AMD's FP8 hardware")
                   : QCoreApplication::translate("CheckpointTab", "OCP FP8 hardware"));
}
inline const char* const kBestCriterion =
    "the recipe x format with the highest SQNR, across every format analysed (the "
    "FNUZ formats and FP4 too)";

}  // namespace fp8wb::checkpoint_detail
