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

#include "fp8wb/core/backend/backend_info.h"
#include "fp8wb/core/backend/default_formats.h"
#include "fp8wb/core/checkpoint/checkpoint_analysis.h"
#include "fp8wb/core/name_text.h"

namespace fp8wb::checkpoint_detail {

inline QString qs(const std::string& s) {
  return QString::fromStdString(s);
}

// A name read from a checkpoint as the tab shows it: as `fp8wb inspect` shows it
// (shown_text(): control characters, invisible characters that reorder or join text, a
// backslash and a double quote escaped; an empty name as "").
inline QString shown_name(const std::string& s) {
  return QString::fromStdString(shown_text(s));
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
// A recommendation that still turns kNamedZeroedPct % or more of the nonzero values into 0
// (no E4M3 recipe keeps them; the reason names one of another format that does): not
// drawn in green as though the tensor were well served.
inline const QColor kLossyRecommendedColor(0xb0, 0x5a, 0x00);
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
                                     "among the %1 recipes within 1 dB of the best %1 SQNR "
                                     "and without saturation, the one that turns the fewest "
                                     "values into 0, then the simplest (%1: the format of "
                                     "weights and activations on %2)")
      .arg(f, fnuz ? QCoreApplication::translate("CheckpointTab", "AMD's FP8 hardware")
                   : QCoreApplication::translate("CheckpointTab", "OCP FP8 hardware"));
}
inline const char* const kBestCriterion =
    "the recipe x format with the highest SQNR, across every format analysed (the "
    "FNUZ formats and FP4 too)";

}  // namespace fp8wb::checkpoint_detail
