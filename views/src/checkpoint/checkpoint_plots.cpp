// CheckpointTab::showTensor() and drawChart() (checkpoint_tab.h): the selected tensor's
// figures: its log2 histogram against each FP8 format's range, the recipe x format SQNR
// chart (scalings down the side, a bar per format, the recommended and the selected recipe
// outlined), the block error map of the chosen recipe, their export titles and the caption
// with both answers and their criteria; a tensor without signal says why instead.
#include "fp8wb/views/checkpoint/checkpoint_tab.h"

#include <QComboBox>
#include <QFileInfo>
#include <QLabel>
#include <algorithm>
#include <cmath>

#include "checkpoint/checkpoint_tab_internal.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "run_tabs/run_tab_helpers.h"

namespace fp8wb {

using namespace checkpoint_detail;  // qs(), best_sqnr(), ... (checkpoint_tab_internal.h)

namespace {

// A plot's note in lines of at most `width` characters, broken at spaces: a note is one
// QCPItemText, which does not wrap (a long reason ran off both sides of the plot).
QString wrapped(const QString& text, qsizetype width = 44) {
  QString out;
  qsizetype line = 0;
  for (const QString& word : text.split(QLatin1Char(' '))) {
    if (line > 0 && line + 1 + word.size() > width) {
      out += QLatin1Char('\n');
      line = 0;
    } else if (line > 0) {
      out += QLatin1Char(' ');
      ++line;
    }
    out += word;
    line += word.size();
  }
  return out;
}

// A recipe's scaling without its format: "1x128", "mx floor" (the name less its format).
QString scaling_of(const RecipeResult& r) {
  const QString name = qs(r.name), f = format_name(r.recipe.format);
  return name.startsWith(f + QLatin1Char(' ')) ? name.mid(f.size() + 1) : name;
}

}  // namespace

void CheckpointTab::showTensor(const TensorAnalysis* t) {
  if (t != shown_) {
    shown_ = t;
    const QSignalBlocker b(recipe_);
    recipe_->clear();
    if (t) {
      for (const auto& r : t->recipes) recipe_->addItem(qs(r.name));
      const int rec = recipe_->findText(qs(t->recommended));
      recipe_->setCurrentIndex(rec >= 0 ? rec : 0);
    }
    model_->setSelectedRecipe(recipe_->currentText());
  }
  if (!t) {
    clearFigures();
    return;
  }
  drawHistogram(*t);
  drawChart(*t);
  drawBlockMap(*t);
  showCaption(*t);
  for (ExportablePlot* p : plots()) p->replot(QCustomPlot::rpQueuedReplot);
}

// Nothing chosen (no file, or one that could not be read): no figures of another.
void CheckpointTab::clearFigures() {
  hist_bars_->data()->clear();
  hist_->clearItems();
  for (QCPBars* b : chart_bars_) chart_->removePlottable(b);
  chart_bars_.clear();
  chart_->clearItems();
  chart_->setCsvTable(nullptr);
  block_map_->data()->clear();
  blocks_->clearItems();
  caption_->clear();
  // No axes of another tensor's ranges (the next tensor shown sets each plot's own).
  for (ExportablePlot* p : plots()) {
    for (QCPAxis* a : {p->xAxis, p->yAxis}) a->setVisible(false);
  }
  block_scale_->setVisible(false);
  chart_->legend->setVisible(false);
  for (ExportablePlot* p : plots()) p->replot(QCustomPlot::rpQueuedReplot);
}

// The log2 histogram, with each FP8 format's range as a tensorwise scale places it (its
// largest exponent at the tensor's amax).
void CheckpointTab::drawHistogram(const TensorAnalysis& t) {
  QVector<double> keys, counts;
  // A bin for every fp32 exponent (kValueHistMinExp..kValueHistMaxExp): each value where it is.
  for (int b = 0; b < kValueHistExpBins && b < static_cast<int>(t.log2_hist.size()); ++b) {
    if (t.log2_hist[static_cast<size_t>(b)] == 0) continue;
    keys << static_cast<double>(b + kValueHistMinExp);
    counts << static_cast<double>(t.log2_hist[static_cast<size_t>(b)]);
  }
  hist_bars_->setData(keys, counts);
  hist_->clearItems();
  // Nothing to place on a log2 axis (empty, all zero, no finite values): say why, no axes.
  const bool has_hist = !keys.isEmpty();
  for (QCPAxis* a : {hist_->xAxis, hist_->yAxis}) a->setVisible(has_hist);
  if (!has_hist) {
    auto* none = new QCPItemText(hist_);
    none->setObjectName(QStringLiteral("noHistogram"));
    none->setClipToAxisRect(false);  // the whole sentence, whatever the plot's margins
    none->position->setType(QCPItemPosition::ptViewportRatio);
    none->position->setCoords(0.5, 0.5);
    none->setText(wrapped(!t.not_quantized.empty() ? qs(t.not_quantized)
                          : t.numel == 0           ? tr("empty tensor (0 elements)")
                                                   : tr("no finite nonzero values")));
    none->setColor(palette().color(QPalette::Disabled, QPalette::WindowText));
  }
  const double top = t.amax > 0 ? std::floor(std::log2(t.amax)) : 0;
  int lane = 0;
  for (Format f : {machine_formats().input, machine_formats().grad_output}) {
    if (!has_hist) break;
    const FormatInfo& fi = format_info(f);
    const double span =
        std::floor(std::log2(fi.max_finite)) - std::floor(std::log2(fi.min_subnormal));
    auto* band = new QCPItemRect(hist_);
    band->setPen(Qt::NoPen);
    QColor c = format_color(f);
    c.setAlpha(35);
    band->setBrush(c);
    band->topLeft->setTypeY(QCPItemPosition::ptAxisRectRatio);
    band->bottomRight->setTypeY(QCPItemPosition::ptAxisRectRatio);
    band->topLeft->setCoords(top - span - 0.5, lane == 0 ? 0.0 : 0.5);
    band->bottomRight->setCoords(top + 0.5, lane == 0 ? 0.5 : 1.0);
    auto* label = new QCPItemText(hist_);
    label->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
    // At the band's right end, running left: the axis reaches 32 binades below the top,
    // so the label is never cut off where the band is narrow.
    label->position->setCoords(top + 0.3, lane == 0 ? 0.05 : 0.55);
    label->setPositionAlignment(Qt::AlignRight | Qt::AlignTop);
    // The range one tensorwise scale gives the tensor, whichever recipe is chosen below.
    label->setText(tr("%1 (tensorwise)").arg(QString::fromLatin1(fi.name.data())));
    label->setColor(format_color(f));
    label->setBrush(QColor(255, 255, 255, 210));  // readable over the bars
    label->setPadding(QMargins(2, 1, 2, 1));
    ++lane;
  }
  if (has_hist) {
    // Every bar whole (a bin's bar spans its exponent +- 0.45), and at least 32 binades
    // below the largest exponent: the formats' bands.
    hist_->xAxis->setRange(std::min(keys.front() - 1, top - 32), std::max(keys.back(), top) + 2);
    detail::fit_log_counts(hist_->yAxis, counts);
  }
}

// The block errors of the chosen recipe, or why there are none.
void CheckpointTab::drawBlockMap(const TensorAnalysis& t) {
  const int ri = recipe_->currentIndex();
  const RecipeResult* chosen = ri >= 0 && ri < static_cast<int>(t.recipes.size())
                                   ? &t.recipes[static_cast<size_t>(ri)]
                                   : nullptr;
  if (chosen) {
    fill_block_map(block_map_, chosen->map_grid.rows, chosen->map_grid.cols, chosen->map_rel_error);
  } else {
    fill_block_map(block_map_, 0, 0, {});
  }
  apply_block_map_range(block_map_, tr("relative RMS error"), fixed_colour_range(range_));
  // No map (an integer tensor, no recipe): say so instead of empty axes and a scale.
  blocks_->clearItems();
  const bool has_map = !block_map_->data()->isEmpty();
  block_map_->setVisible(has_map);
  block_scale_->setVisible(has_map);
  for (QCPAxis* a : {blocks_->xAxis, blocks_->yAxis}) a->setVisible(has_map);
  // What a block is: the recipe's own blocks where the map has room for them, else an even
  // tiling (at most 64 x 64 blocks).
  // Grey blocks hold no finite nonzero value (all zero, NaN or Inf): no relative error. Said
  // on a line of the axis label, under the map, never over its top row.
  const bool grey =
      has_map && std::any_of(chosen->map_rel_error.begin(), chosen->map_rel_error.end(),
                             [](float e) { return std::isnan(e); });
  blocks_->xAxis->setLabel((has_map ? tr("block column (blocks of %1 x %2)")
                                          .arg(chosen->map_grid.cell_rows)
                                          .arg(chosen->map_grid.cell_cols)
                                    : tr("block column")) +
                           (grey ? tr("\ngrey: no finite nonzero value") : QString()));
  if (!has_map) {
    auto* none = new QCPItemText(blocks_);
    none->setObjectName(QStringLiteral("noBlockMap"));
    none->setClipToAxisRect(false);  // the whole sentence, whatever the plot's margins
    none->position->setType(QCPItemPosition::ptViewportRatio);
    none->position->setCoords(0.5, 0.5);
    none->setText(
        wrapped(!t.not_quantized.empty() ? tr("no block errors: %1").arg(qs(t.not_quantized))
                : t.recipes.empty() ? tr("no block errors: %1 is not quantized").arg(qs(t.dtype))
                                    : tr("no block error map for this recipe")));
    none->setColor(palette().color(QPalette::Disabled, QPalette::WindowText));
  }
}

// The plots' export titles and the caption: the tensor's figures, the highest SQNR and the
// recommendation with their criteria.
void CheckpointTab::showCaption(const TensorAnalysis& t) {
  const QString file = QFileInfo(path_).fileName();
  const QString name = short_name(t.name);
  hist_->setExportTitle(tr("log2 histogram of %1 (%2)").arg(name, file));
  chart_->setExportTitle(tr("SQNR of every recipe x format: %1 (%2)").arg(name, file));
  blocks_->setExportTitle(
      tr("Block errors of %1: %2 (%3)").arg(recipe_->currentText(), name, file));
  const RecipeResult* best = nullptr;
  best_sqnr(t, &best);
  // No figures where no value is known and finite (an amax of 0 would be made up).
  QString caption = t.has_figures()
                        ? tr("<b>%1</b> %2: amax %3, mean %4, std %5, dynamic range %6 bits.")
                              .arg(name.toHtmlEscaped(), qs(t.dtype))
                              .arg(t.amax, 0, 'g', 5)
                              .arg(t.mean, 0, 'g', 4)
                              .arg(t.std, 0, 'g', 4)
                              .arg(t.dynamic_range_bits, 0, 'f', 1)
                        : tr("<b>%1</b> %2.").arg(name.toHtmlEscaped(), qs(t.dtype));
  if (t.nan_count + t.inf_count > 0) {
    caption += tr(" <span style='color:#d62728'><b>%1 NaN, %2 Inf</b></span> (left out of "
                  "every figure).")
                   .arg(t.nan_count)
                   .arg(t.inf_count);
  }
  for (const std::string& w : t.warnings) {
    caption +=
        tr(" <span style='color:#d62728'><b>Warning:</b> %1.</span>").arg(qs(w).toHtmlEscaped());
  }
  // Two answers to two questions, each with its criterion.
  if (best) {
    caption += tr(" Highest SQNR of any format: %1 (%2 dB).")
                   .arg(qs(best->name))
                   .arg(best->sqnr_db, 0, 'f', 1);
  }
  // The blocks of the recipe chosen under "Block errors of": the tensor's SQNR is carried by
  // its largest values, so an outlier can hide what most blocks get, or the reverse.
  for (const RecipeResult& r : t.recipes) {
    if (qs(r.name) != recipe_->currentText()) continue;
    if (const BlockSqnr b = median_block_sqnr(r); b.blocks > 1) {
      caption += tr(" %1: the block map's median cell has an SQNR of %2 dB (of %3 cells with "
                    "values), against %4 dB for the whole tensor.")
                     .arg(qs(r.name), sqnr_text(b.median_db))
                     .arg(b.blocks)
                     .arg(sqnr_text(r.sqnr_db));
    }
  }
  if (!t.not_quantized.empty()) {
    caption += tr(" No SQNR and no recommendation: %1.").arg(qs(t.not_quantized).toHtmlEscaped());
  }
  if (!t.no_recipe.empty()) {
    caption += tr(" <span style='color:#d62728'><b>No recommendation:</b> %1.</span>")
                   .arg(qs(t.no_recipe).toHtmlEscaped());
  }
  if (!t.recommended.empty()) {
    caption += tr(" <span style='color:%1'>Recommended for %4 (within 1 dB of its best, no "
                  "saturation: the fewest values turned into 0, then the simplest): "
                  "<b>%2</b></span>: %3.")
                   .arg(kRecommendedColor.darker(140).name(), qs(t.recommended),
                        qs(t.reason).toHtmlEscaped(), format_name(recommend_format()));
  }
  caption_->setText(caption);
  // The whole name first where the caption shows it cut.
  caption_->setToolTip(
      (name != shown_name(t.name) ? shown_name(t.name) + QStringLiteral("\n\n") : QString()) +
      tr("Highest SQNR: %1.\nRecommended: %2.").arg(tr(kBestCriterion), recommended_criterion()));
}

void CheckpointTab::drawChart(const TensorAnalysis& t) {
  for (QCPBars* b : chart_bars_) chart_->removePlottable(b);
  chart_bars_.clear();
  chart_->clearItems();
  // The scalings in the order the analysis ran them, the formats likewise.
  QStringList scalings;
  std::vector<Format> formats;
  for (const auto& r : t.recipes) {
    if (!scalings.contains(scaling_of(r))) scalings << scaling_of(r);
    if (std::find(formats.begin(), formats.end(), r.recipe.format) == formats.end())
      formats.push_back(r.recipe.format);
  }
  double top = 0;
  for (const auto& r : t.recipes) {
    if (std::isfinite(r.sqnr_db)) top = std::max(top, r.sqnr_db);
  }
  const double exact = top > 0 ? top * 1.1 : 100;  // where an exact (+inf dB) bar ends
  const double width = 0.8 / std::max<double>(1, static_cast<double>(formats.size()));
  auto key_of = [&](const RecipeResult& r) {
    const auto fi = std::find(formats.begin(), formats.end(), r.recipe.format) - formats.begin();
    return static_cast<double>(scalings.indexOf(scaling_of(r))) - 0.4 + width * 0.5 +
           width * static_cast<double>(fi);
  };
  auto is_exact = [](const RecipeResult& r) { return std::isinf(r.sqnr_db) && r.sqnr_db > 0; };
  auto value_of = [&](const RecipeResult& r) {
    return is_exact(r) ? exact : (std::isfinite(r.sqnr_db) ? std::max(0.0, r.sqnr_db) : 0.0);
  };
  for (Format f : formats) {
    auto* bars = new QCPBars(chart_->yAxis, chart_->xAxis);
    bars->setName(format_name(f));
    bars->setWidth(width * 0.95);
    QColor c = format_color(f);
    bars->setPen(QPen(c.darker(120), 0.5));
    c.setAlpha(190);
    bars->setBrush(c);
    for (const auto& r : t.recipes) {
      if (r.recipe.format == f) bars->addData(key_of(r), value_of(r));
    }
    chart_bars_.push_back(bars);
  }
  // Its CSV: each recipe's SQNR as it is, not as drawn (an exact recipe "inf", not the
  // dashed line's length; a negative SQNR below 0), a line a bar, format by format.
  CsvTable table{{QStringLiteral("series"), QStringLiteral("label"), QStringLiteral("value")}, {}};
  for (Format f : formats) {
    for (const auto& r : t.recipes) {
      if (r.recipe.format == f)
        table.rows << QStringList{format_name(f), scaling_of(r), csv_number(r.sqnr_db)};
    }
  }
  chart_->setCsvTable([table] { return table; });
  for (QCPAxis* a : {chart_->xAxis, chart_->yAxis}) a->setVisible(!t.recipes.empty());
  chart_->legend->setVisible(!t.recipes.empty());
  if (t.recipes.empty()) {
    auto* none = new QCPItemText(chart_);
    none->setObjectName(QStringLiteral("noChart"));
    none->setClipToAxisRect(false);  // the whole sentence, whatever the plot's margins
    none->position->setType(QCPItemPosition::ptViewportRatio);
    none->position->setCoords(0.5, 0.5);
    none->setText(wrapped(!t.not_quantized.empty()
                              ? tr("no SQNR: %1").arg(qs(t.not_quantized))
                              : tr("no SQNR: %1 is not quantized").arg(qs(t.dtype))));
    none->setColor(palette().color(QPalette::Disabled, QPalette::WindowText));
    return;
  }
  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  for (int i = 0; i < scalings.size(); ++i) ticker->addTick(i, scalings[i]);
  chart_->yAxis->setTicker(ticker);
  // Room above the first group (the axis is reversed) and below the last for the outlines
  // of the recommended and the selected bar, which reach past a group's bars: drawn at the
  // plot's edge they were cut, and the top bar looked clipped.
  chart_->yAxis->setRange(-0.85, static_cast<double>(scalings.size()) - 0.15);
  // An exact recipe's bar (+inf dB) ends past the largest finite one, at a dashed line
  // marked "inf": its length is no figure.
  const bool any_exact = std::any_of(t.recipes.begin(), t.recipes.end(), is_exact);
  chart_->xAxis->setRange(0, std::max(1.0, exact) * (any_exact ? 1.15 : 1.05));
  if (any_exact) {
    const QColor ink = palette().color(QPalette::WindowText);
    auto* line = new QCPItemStraightLine(chart_);
    line->setObjectName(QStringLiteral("exactLine"));
    line->point1->setCoords(exact, 0);
    line->point2->setCoords(exact, 1);
    line->setPen(QPen(ink, 1, Qt::DashLine));
    auto* label = new QCPItemText(chart_);
    label->setObjectName(QStringLiteral("exactLabel"));
    label->position->setTypeX(QCPItemPosition::ptPlotCoords);
    label->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
    label->position->setCoords(exact, 0);
    label->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
    label->setPadding(QMargins(3, 1, 0, 0));
    label->setText(sqnr_text(INFINITY));
    label->setColor(ink);
  }
  // The recommended and the selected recipe: an outline around their bar, explained by
  // two entries of the legend.
  const QString selected = recipe_->currentText();
  const QPen rec_pen(kRecommendedColor.darker(130), 2.5);
  const QPen sel_pen(kSelectedColor, 2.5, Qt::DashLine);
  for (const auto& r : t.recipes) {
    const bool rec = r.name == t.recommended, sel = qs(r.name) == selected;
    if (!rec && !sel) continue;
    const double k = key_of(r), v = value_of(r);
    for (bool mark_rec : {true, false}) {
      if (mark_rec ? !rec : !sel) continue;
      auto* box = new QCPItemRect(chart_);
      box->setObjectName(mark_rec ? QStringLiteral("recommendedMark")
                                  : QStringLiteral("selectedMark"));
      // Both visible on one bar: the selected outline around the recommended one, a few
      // pixels past its end too.
      const double grow = mark_rec ? 0.65 : 0.9;
      const double past = mark_rec ? 0 : chart_->xAxis->range().size() * 0.015;
      box->topLeft->setCoords(0, k - width * grow);
      box->bottomRight->setCoords(v + past, k + width * grow);
      box->setPen(mark_rec ? rec_pen : sel_pen);
      box->setBrush(Qt::NoBrush);
    }
  }
  for (bool mark_rec : {true, false}) {
    auto* entry = new QCPBars(chart_->yAxis, chart_->xAxis);  // no bars: a legend entry
    entry->setName(mark_rec ? tr("recommended") : tr("selected"));
    entry->setPen(mark_rec ? rec_pen : sel_pen);
    entry->setBrush(Qt::NoBrush);
    chart_bars_.push_back(entry);
  }
}

}  // namespace fp8wb
