// defines: QuantizationTab: a layer x step heatmap of a figure (underflow, saturation,
// SQNR) for a role, and for the chosen tensor's last sampled step its exponent histogram
// against the format's range and its block error map.
#include "fp8wb/views/run_tabs/run_tabs.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>

#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/common/name_choices.h"
#include "fp8wb/views/run_tabs/run_data.h"
#include "run_tabs/run_tab_helpers.h"

namespace fp8wb {

using namespace detail;  // the helpers the run tabs share (run_tab_helpers.h)

namespace {

// The heatmap's choices, in the metric box's order.
constexpr const TensorStatFigure* kHeatmapFigures[] = {&kUnderflowPct, &kSaturatedPct, &kSqnrDb};

}  // namespace

QuantizationTab::QuantizationTab(const RunData* run, QWidget* parent)
    : RunTabBase(run, parent),
      metric_(new QComboBox(this)),
      role_(new QComboBox(this)),
      tensor_(new QComboBox(this)),
      include_step0_(make_step0_box(this)),
      caption_(new QLabel(this)),
      heat_(make_plot(this, tr("step"), tr("layer"))),
      hist_(make_plot(this, tr("floor(log2 |x * scale|)"), tr("elements"))),
      blocks_(make_plot(this, tr("block column"), tr("block row"))) {
  for (const TensorStatFigure* f : kHeatmapFigures) metric_->addItem(label_of(*f));
  fill_choices(role_, kRoles);
  role_->setObjectName(QStringLiteral("heatmapRole"));
  tensor_->setObjectName(QStringLiteral("shownTensor"));
  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel(tr("Heatmap of"), this));
  controls->addWidget(metric_);
  range_ = make_colour_range_box(this);
  controls->addWidget(range_);
  controls->addWidget(new QLabel(tr("for role"), this));
  controls->addWidget(role_);
  controls->addSpacing(20);
  controls->addWidget(include_step0_);
  controls->addStretch(1);
  // The tensor picker on a line of its own: with the heatmap's choices on one line the tab
  // would be wider than a 1280-pixel screen leaves it.
  auto* tensor_row = new QHBoxLayout;
  tensor_row->addWidget(new QLabel(tr("Histogram and block errors of"), this));
  tensor_row->addWidget(tensor_, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(controls);
  layout->addLayout(tensor_row);
  caption_->setWordWrap(true);
  layout->addWidget(caption_);
  layout->addWidget(heat_, 1);
  auto* row = new QHBoxLayout;
  row->addWidget(hist_, 1);
  row->addWidget(blocks_, 1);
  layout->addLayout(row, 1);

  auto colour_map = [](ExportablePlot* p, const QString& name, const QString& label) {
    auto* m = new QCPColorMap(p->xAxis, p->yAxis);
    m->setName(name);
    auto* scale = new QCPColorScale(p);
    p->plotLayout()->addElement(0, 1, scale);
    scale->axis()->setLabel(label);
    m->setColorScale(scale);
    // A cell without data is left transparent over a grey hatch.
    m->setGradient(thermal_on_white());
    m->setInterpolate(false);
    p->axisRect()->setBackground(QBrush(QColor(0xbd, 0xbd, 0xbd), Qt::BDiagPattern));
    auto* group = new QCPMarginGroup(p);
    p->axisRect()->setMarginGroup(QCP::msBottom | QCP::msTop, group);
    scale->setMarginGroup(QCP::msBottom | QCP::msTop, group);
    return m;
  };
  heat_map_ = colour_map(heat_, tr("layer x step"), tr("value"));
  // The first layer on top, as the Scaling tab's tree and the tensors' list go down.
  heat_->yAxis->setRangeReversed(true);
  // Steps are whole numbers: ticks at whole steps only (1, 2, 5, 10, ... apart as the room
  // allows), also when the axis spans a single step.
  set_whole_number_ticks(heat_->xAxis);
  block_map_ = colour_map(blocks_, tr("block error"), tr("relative RMS error"));
  bars_ = new QCPBars(hist_->xAxis, hist_->yAxis);
  bars_->setName(tr("exponent histogram"));
  bars_->setWidth(0.9);
  hist_->yAxis->setLabel(tr("elements (log scale)"));
  use_log_count_axis(hist_->yAxis, bars_);
  bars_->setBrush(QColor(0x1f, 0x77, 0xb4, 160));
  band_ = new QCPItemRect(hist_);
  band_->setPen(Qt::NoPen);
  band_->setBrush(QColor(0x2c, 0xa0, 0x2c, 40));
  band_->topLeft->setTypeY(QCPItemPosition::ptAxisRectRatio);
  band_->bottomRight->setTypeY(QCPItemPosition::ptAxisRectRatio);
  auto redraw = [this] { refresh(true); };
  connect(metric_, &QComboBox::currentIndexChanged, this, redraw);
  connect(range_, &QComboBox::currentIndexChanged, this, redraw);
  connect(role_, &QComboBox::currentIndexChanged, this, [this] {
    // The histogram and block errors follow the heatmap to the new role, same layer.
    const QString shown = tensor_->currentText();
    const QString layer = shown.left(shown.lastIndexOf(QStringLiteral(" / ")));
    const int i =
        tensor_->findText(layer + QStringLiteral(" / ") + role_text(chosen(role_, kRoles)));
    if (i >= 0) {
      const QSignalBlocker block(tensor_);
      tensor_->setCurrentIndex(i);
    }
    refresh(true);
  });
  connect(tensor_, &QComboBox::currentIndexChanged, this, redraw);
  connect(include_step0_, &QCheckBox::toggled, this, redraw);
}

QString QuantizationTab::captionText() const {
  return caption_->text();
}

void QuantizationTab::refillChoices() {
  // Another run: its own tensors, from its first one.
  const bool other_run = choices_generation_ != data_->generation();
  choices_generation_ = data_->generation();
  if (!other_run && tensors_seen_ == data_->tensors().size()) return;
  tensors_seen_ = data_->tensors().size();
  const QString keep = other_run ? QString() : tensor_->currentText();
  const QSignalBlocker block(tensor_);
  tensor_->clear();
  // Layer by layer as the heatmap's rows, each layer's roles in their order; the item's
  // data is the series' index in the run.
  const std::vector<TensorSeries>& all = data_->tensors();
  for (const std::string& l : data_->layers()) {
    for (const RoleEntry& r : kRoles) {
      for (size_t k = 0; k < all.size(); ++k) {
        if (all[k].layer == l && all[k].role == r.value)
          tensor_->addItem(qs(l) + QStringLiteral(" / ") + role_text(r.value),
                           static_cast<qulonglong>(k));
      }
    }
  }
  int i = tensor_->findText(keep);
  // Another run: the heatmap's first row, its layer first in the model and its role the
  // heatmap's, not whichever tensor reported first.
  const Role role = chosen(role_, kRoles);
  for (const std::string& l : data_->layers()) {
    if (i >= 0) break;
    if (data_->tensor(l, role))
      i = tensor_->findText(qs(l) + QStringLiteral(" / ") + role_text(role));
  }
  tensor_->setCurrentIndex(i >= 0 ? i : 0);
}

void QuantizationTab::rebuild() {
  refillChoices();
  drawHeatmap();
  drawChosenTensor();
}

void QuantizationTab::drawHeatmap() {
  // Heatmap: layers (rows) x sampled steps (columns) for the chosen role.
  const Role role = chosen(role_, kRoles);
  std::vector<const TensorSeries*> rows;
  for (const std::string& l : data_->layers()) {
    if (const TensorSeries* t = data_->tensor(l, role)) rows.push_back(t);
  }
  // Without "Include step 0", step 0's column is not drawn (where later steps are): step 0
  // quantizes with the initial scale, and its figures would leave every later step one
  // colour.
  bool after_step0 = false;
  for (const TensorSeries* t : rows)
    after_step0 = after_step0 || (!t->points.empty() && t->points.back().step > 0);
  const bool skip0 = !include_step0_->isChecked() && after_step0;
  // The points drawn of a row: from its first after step 0 where step 0 is left out.
  auto drawn_from = [skip0](const TensorSeries* t) -> size_t {
    return skip0 && !t->points.empty() && t->points.front().step == 0 ? 1 : 0;
  };
  auto drawn_count = [&](const TensorSeries* t) { return t->points.size() - drawn_from(t); };
  size_t cols = 0;
  for (const TensorSeries* t : rows) cols = std::max(cols, drawn_count(t));
  heat_map_->data()->clear();
  heat_->setCsvTable(nullptr);
  const TensorStatFigure& figure =
      *kHeatmapFigures[static_cast<size_t>(std::clamp(metric_->currentIndex(), 0, 2))];
  // Column c is centred on its sampled step and row r on r; a cell is as wide as the steps
  // between samples (one step when there is one column) and one row high. The map's range
  // runs from the centre of its first cell to the centre of its last, and it draws half a
  // cell beyond each end, except along a side of one cell, which it draws over exactly its
  // range: there the range is the cell's own span. The axes span the whole cells.
  QCPRange steps_in_view, rows_in_view;
  const bool drawn = !rows.empty() && cols > 0;
  if (drawn) {
    const TensorSeries* longest = *std::max_element(
        rows.begin(), rows.end(), [&](const TensorSeries* a, const TensorSeries* b) {
          return drawn_count(a) < drawn_count(b);
        });
    const size_t from = drawn_from(longest);
    const double first = static_cast<double>(longest->points[from].step);
    const double last = static_cast<double>(longest->points.back().step);
    const double n = static_cast<double>(cols), n_rows = static_cast<double>(rows.size());
    const double width = cols > 1 && last > first ? (last - first) / (n - 1) : 1;
    const QCPRange centres(first, first + width * (n - 1));
    steps_in_view = QCPRange(centres.lower - width / 2, centres.upper + width / 2);
    rows_in_view = QCPRange(-0.5, n_rows - 0.5);
    heat_map_->data()->setSize(static_cast<int>(cols), static_cast<int>(rows.size()));
    heat_map_->data()->setRange(cols > 1 ? centres : steps_in_view,
                                rows.size() > 1 ? QCPRange(0, n_rows - 1) : rows_in_view);
    heat_map_->data()->fill(std::numeric_limits<double>::quiet_NaN());  // no data: hatched
    // The colours span the cells drawn.
    QCPRange span;
    bool any = false;
    for (size_t r = 0; r < rows.size(); ++r) {
      const size_t skip = drawn_from(rows[r]);
      for (size_t c = 0; c + skip < rows[r]->points.size(); ++c) {
        double v = figure.of(rows[r]->points[c + skip].raw);
        if (!std::isfinite(v)) v = 200;  // exact (no error): off the top
        heat_map_->data()->setCell(static_cast<int>(c), static_cast<int>(r), v);
        if (any) {
          span.expand(v);
        } else {
          span = QCPRange(v, v);
          any = true;
        }
      }
    }
    // A map of one value gets a band around it within what the figure can be (no
    // negative percentages); fixed: 0-100 % or 0-60 dB.
    const bool percent = std::string_view(figure.unit) == "%";
    const bool db = std::string_view(figure.unit) == "dB";
    if (!any) heat_map_->rescaleDataRange(true);
    apply_colour_range(heat_map_, metric_->currentText(), any ? span.lower : 1,
                       any ? span.upper : 0, percent ? kPercentDomain : kAnyValue,
                       percent ? std::optional<QCPRange>(kPercentRange)
                       : db    ? std::optional<QCPRange>(kSqnrDbRange)
                               : std::nullopt,
                       fixed_colour_range(range_));
    // Its CSV: a line a cell drawn, by its layer and its own sampled step, with the figure
    // as it is (an exact SQNR "inf", not the colour past the scale's top).
    CsvTable table{{QStringLiteral("map"), QStringLiteral("row"), QStringLiteral("column"),
                    QStringLiteral("value")},
                   {}};
    for (size_t r = 0; r < rows.size(); ++r) {
      for (size_t i = drawn_from(rows[r]); i < rows[r]->points.size(); ++i) {
        const TensorMetrics& p = rows[r]->points[i];
        table.rows << QStringList{metric_->currentText(), qs(rows[r]->layer),
                                  QString::number(p.step), csv_number(figure.of(p.raw))};
      }
    }
    heat_->setCsvTable([table] { return table; });
    // Layer names on the row axis.
    QSharedPointer<QCPAxisTickerText> ticks(new QCPAxisTickerText);
    for (size_t r = 0; r < rows.size(); ++r)
      ticks->addTick(static_cast<double>(r), qs(rows[r]->layer));
    heat_->yAxis->setTicker(ticks);
  }
  heat_->rescaleAxes();
  if (drawn) {
    heat_->xAxis->setRange(steps_in_view);
    heat_->yAxis->setRange(rows_in_view);
  }
}

void QuantizationTab::drawChosenTensor() {
  // The chosen tensor's last sampled step: exponent histogram and block errors.
  bool chosen_ok = false;
  const qulonglong ti = tensor_->currentData().toULongLong(&chosen_ok);
  if (!chosen_ok || ti >= data_->tensors().size() ||
      data_->tensors()[static_cast<size_t>(ti)].points.empty()) {
    // Nothing of another run stays under this caption.
    bars_->data()->clear();
    block_map_->data()->clear();
    caption_->setText(
        data_->runId() == 0
            ? tr("<i>Start a run from the run panel, or open one in the Runs tab.</i>")
            : tr("<i>%1 (run %2): no tensor statistics yet.</i>")
                  .arg(qs(data_->name()).toHtmlEscaped())
                  .arg(data_->runId()));
    return;
  }
  const TensorSeries& t = data_->tensors()[static_cast<size_t>(ti)];
  const TensorMetrics& p = t.points.back();
  QVector<double> keys, counts;
  for (int b = 0; b < kHistExpBins; ++b) {
    if (p.raw.hist[b] == 0) continue;
    keys << static_cast<double>(b + kHistMinExp);
    counts << static_cast<double>(p.raw.hist[b]);
  }
  bars_->setData(keys, counts);
  const Format f = p.recipe.format;  // what the statistics were measured under
  const FormatInfo& fi = format_info(f);
  const double lo = std::floor(std::log2(fi.min_subnormal > 0 ? fi.min_subnormal : fi.min_normal));
  const double hi = std::floor(std::log2(fi.max_finite));
  band_->topLeft->setCoords(lo - 0.5, 0);
  band_->bottomRight->setCoords(hi + 0.5, 1);
  hist_->rescaleAxes();
  // Every bar whole: a bin's bar spans its exponent +- 0.45.
  hist_->xAxis->setRange(std::min(lo - 2, keys.isEmpty() ? lo : keys.front() - 1),
                         std::max(hi + 2, keys.isEmpty() ? hi : keys.back() + 1));
  fit_log_counts(hist_->yAxis, counts);
  fill_block_map(block_map_, p.map_grid.rows, p.map_grid.cols, p.map_rel_error);
  apply_block_map_range(block_map_, tr("relative RMS error"), fixed_colour_range(range_));
  caption_->setText(
      tr("<b>%1 / %2</b>, step %3, %4: SQNR %5 dB, underflow %6 %, saturated %7 %, zeros %8 %. "
         "Green: the exponents %4 represents (%9 to %10).")
          .arg(qs(t.layer), role_text(t.role))
          .arg(p.step)
          .arg(QString::fromLatin1(fi.name.data()))
          .arg(kSqnrDb.of(p.raw), 0, 'f', 1)
          .arg(kUnderflowPct.of(p.raw), 0, 'g', 3)
          .arg(kSaturatedPct.of(p.raw), 0, 'g', 3)
          .arg(kZerosPct.of(p.raw), 0, 'g', 3)
          .arg(lo)
          .arg(hi));
}

}  // namespace fp8wb
