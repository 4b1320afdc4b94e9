// The Formats tab's classroom demos, offscreen: sliders moved by key presses and
// setValue, the plotted data checked against figures worked out here and against the
// core's demo functions.
#include <QAbstractTextDocumentLayout>
#include <QApplication>
#include <QComboBox>
#include <QLabel>
#include <QSlider>
#include <QTextBlock>
#include <QTextDocument>
#include <QTextFrame>
#include <QTextLayout>
#include <QTextTable>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <limits>

#include "fp8wb/core/formats/demos.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/formats/demo_views.h"
#include "fp8wb/views/formats/formats_tab.h"

using namespace fp8wb;

namespace {

QCPGraph* graph_named(QCustomPlot* plot, const QString& name) {
  for (int i = 0; i < plot->graphCount(); ++i) {
    if (plot->graph(i)->name() == name) return plot->graph(i);
  }
  return nullptr;
}

double last_value(QCPGraph* g) {
  return (g->data()->constEnd() - 1)->value;
}

std::vector<double> values(QCPGraph* g) {
  std::vector<double> v;
  for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it) v.push_back(it->value);
  return v;
}

// The smallest gap, in px, between the text of a rich-text table's neighbouring header
// cells (its first row), laid out in `font` as a label lays it out; -1 without a table.
double smallest_header_gap(const QString& html, const QFont& font) {
  QTextDocument doc;
  doc.setDefaultFont(font);
  doc.setHtml(html);
  QTextTable* table = nullptr;
  for (QTextFrame* f : doc.rootFrame()->childFrames())
    if ((table = qobject_cast<QTextTable*>(f))) break;
  if (!table) return -1;
  double gap = std::numeric_limits<double>::infinity();
  double last_right = 0;
  for (int c = 0; c < table->columns(); ++c) {
    const QTextTableCell cell = table->cellAt(0, c);
    double left = std::numeric_limits<double>::infinity(), right = -left;
    for (QTextBlock b = cell.firstCursorPosition().block();
         b.isValid() && b.position() <= cell.lastCursorPosition().position(); b = b.next()) {
      const QRectF box = doc.documentLayout()->blockBoundingRect(b);
      for (int i = 0; i < b.layout()->lineCount(); ++i) {
        const QRectF r = b.layout()->lineAt(i).naturalTextRect();
        if (r.width() <= 0) continue;
        left = std::min(left, box.left() + r.left());
        right = std::max(right, box.left() + r.right());
      }
    }
    if (c > 0) gap = std::min(gap, left - last_right);
    last_right = right;
  }
  return gap;
}

}  // namespace

class DemosTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void masterWeightsFollowTheSliders();
  void lossScalingFollowsTheSliders();
  void gradientHistogramsStayapart();
  void gradientDemoSaysWhatIsClamped();
  void gradientAxisTakesInEveryBin();
  void gradientRangeLabelsLieOnNoOtherBand();
  void gradientLegendCoversNoBar();
  void outlierFooterCitesAndComputes();
  void masterWeightsFooterFollowsTheSliders();
  void lossScalingLegendsBelowThePlots();
  void outlierTickLabelsApart();
  void outlierMapColoursFixedOverEveryK();
  void demoTableHeadersStandApart();
};

void DemosTest::masterWeightsFollowTheSliders() {
  FormatsTab tab;
  QVERIFY(tab.showPage(QStringLiteral("master-weights")));
  MasterWeightsDemoView* view = tab.masterWeightsDemo();
  QCustomPlot* plot = view->trajectoryPlot();
  QCPGraph* fp32 = graph_named(plot, QStringLiteral("fp32 (master weights)"));
  QCPGraph* bf16 = graph_named(plot, QStringLiteral("bf16"));
  QCPGraph* fp16 = graph_named(plot, QStringLiteral("fp16"));
  QCPGraph* e4m3 = graph_named(plot, QStringLiteral("E4M3"));
  QCPGraph* e5m2 = graph_named(plot, QStringLiteral("E5M2"));
  QVERIFY(fp32 && bf16 && fp16 && e4m3 && e5m2);
  // 1000 updates of 1e-3: fp32 adds them, bf16 (spacing 2^-7), E4M3 (2^-3) and E5M2 (2^-2)
  // lose every one, fp16 (spacing 2^-10) moves by 2^-10 each time.
  float w = 1.0f;
  for (int k = 0; k < 1000; ++k) w += 1e-3f;
  QCOMPARE(fp32->data()->size(), 1001);
  QCOMPARE(last_value(fp32), static_cast<double>(w));
  QCOMPARE(QString::number(last_value(fp32), 'f', 4), QStringLiteral("2.0000"));
  QCOMPARE(last_value(bf16), 1.0);
  QCOMPARE(last_value(e4m3), 1.0);
  QCOMPARE(last_value(e5m2), 1.0);
  QCOMPARE(last_value(fp16), 1.0 + 1000 * std::ldexp(1.0, -10));
  QVERIFY(view->summaryText().contains(QStringLiteral("1.9766")));
  QVERIFY(view->footerText().contains(QStringLiteral("half")));

  // One key press to the right: the update becomes 10^(-11/4) = 0.00178. In fp16 that is
  // 1.8 spacings of 2^-10 below 2 (a move of 2^-9) and 0.9 of 2^-9 above (again 2^-9).
  auto* update = view->findChild<QSlider*>(QStringLiteral("updateSlider"));
  QVERIFY(update);
  update->setFocus();
  QTest::keyClick(update, Qt::Key_Right);
  QCOMPARE(update->value(), -11);
  fp16 = graph_named(plot, QStringLiteral("fp16"));
  QCOMPARE(last_value(fp16), 1.0 + 1000 * std::ldexp(1.0, -9));
  MasterWeightsConfig cfg;
  cfg.update = std::pow(10.0, -11 / 4.0);
  const MasterWeightsResult core = run_master_weights_demo(cfg);
  for (size_t t = 0; t < core.tracks.size(); ++t)
    QCOMPARE(values(plot->graph(static_cast<int>(t))), core.tracks[t].mean);

  // The step slider, in hundreds.
  auto* steps = view->findChild<QSlider*>(QStringLiteral("stepsSlider"));
  QVERIFY(steps);
  steps->setValue(20);
  fp32 = graph_named(plot, QStringLiteral("fp32 (master weights)"));
  QCOMPARE(fp32->data()->size(), 2001);
  w = 1.0f;
  for (int k = 0; k < 2000; ++k) w += static_cast<float>(cfg.update);
  QCOMPARE(last_value(fp32), static_cast<double>(w));
  const QCPGraph* sr = graph_named(plot, QStringLiteral("bf16, stochastic rounding"));
  QVERIFY(sr);
  QVERIFY(std::fabs(last_value(const_cast<QCPGraph*>(sr)) - (1 + 2000 * cfg.update)) < 0.1);
}

void DemosTest::lossScalingFollowsTheSliders() {
  FormatsTab tab;
  QVERIFY(tab.showPage(QStringLiteral("loss-scaling")));
  LossScalingDemoView* view = tab.lossScalingDemo();
  auto* init = view->findChild<QSlider*>(QStringLiteral("initScaleSlider"));
  auto* growth = view->findChild<QSlider*>(QStringLiteral("growthIntervalSlider"));
  QVERIFY(init && growth);
  QCOMPARE(init->value(), 16);
  QCOMPARE(growth->value(), 50);
  init->setValue(24);
  growth->setFocus();
  QTest::keyClick(growth, Qt::Key_Left);  // 49 good steps before the scale grows
  QCOMPARE(growth->value(), 49);

  LossScalingConfig cfg;
  cfg.init_scale = std::ldexp(1.0, 24);
  cfg.growth_interval = 49;
  const LossScalingResult core = run_loss_scaling_demo(cfg);
  QCustomPlot* scale = view->scalePlot();
  QCustomPlot* underflow = view->underflowPlot();
  for (const LossScalingRun& run : core.runs) {
    const QString name = QString::fromLatin1(storage_format_name(run.format).data());
    QCPGraph* u =
        graph_named(underflow, run.scaled ? name + QStringLiteral(", dynamic loss scaling")
                                          : name + QStringLiteral(", no loss scaling"));
    QVERIFY(u);
    std::vector<double> expected;
    for (const auto& st : run.steps) expected.push_back(st.underflow_pct);
    QCOMPARE(values(u), expected);
    if (!run.scaled) continue;
    QCPGraph* s = graph_named(scale, name + QStringLiteral(" loss scale"));
    QVERIFY(s);
    const std::vector<double> drawn = values(s);
    QCOMPARE(drawn.front(), std::ldexp(1.0, 24));
    // The drawn scale obeys the rules: halve after a skipped step, double after 49 good ones.
    QCPGraph* skipped = graph_named(scale, name + QStringLiteral(": step skipped (overflow)"));
    QVERIFY(skipped);
    std::vector<double> skipped_steps;
    for (auto it = skipped->data()->constBegin(); it != skipped->data()->constEnd(); ++it)
      skipped_steps.push_back(it->key);
    QVERIFY(!skipped_steps.empty());
    double expect = std::ldexp(1.0, 24);
    int good = 0;
    for (size_t i = 0; i < drawn.size(); ++i) {
      QCOMPARE(drawn[i], expect);
      if (std::find(skipped_steps.begin(), skipped_steps.end(), static_cast<double>(i)) !=
          skipped_steps.end()) {
        expect /= 2;
        good = 0;
      } else if (++good == 49) {
        expect *= 2;
        good = 0;
      }
    }
  }
  QVERIFY(view->summaryText().contains(QStringLiteral("dynamic")));
}

void DemosTest::gradientHistogramsStayapart() {
  GradientDemoView view;  // unscaled: both formats see the same values
  QCustomPlot* hist = view.histogramPlot();
  QCOMPARE(hist->graphCount(), 2);
  QCPGraph* e4 = hist->graph(0);
  QCPGraph* e5 = hist->graph(1);
  QCOMPARE(e4->name(), QStringLiteral("E4M3FN"));
  QCOMPARE(e5->name(), QStringLiteral("E5M2"));
  QCOMPARE(values(e4), values(e5));  // the same histogram twice
  // So they must not be two translucent fills on top of each other (which blend into a
  // colour of neither legend entry): one fill at most, the other told apart by its line.
  const int fills = (e4->brush().style() != Qt::NoBrush) + (e5->brush().style() != Qt::NoBrush);
  QVERIFY(fills <= 1);
  QVERIFY(e4->pen().style() != e5->pen().style());
  // Each draws in its own format's colour, as its legend entry does.
  QCOMPARE(e4->pen().color().rgb(), format_color(Format::E4M3FN).rgb());
  QCOMPARE(e5->pen().color().rgb(), format_color(Format::E5M2).rgb());
  if (e4->brush().style() != Qt::NoBrush)
    QCOMPARE(e4->brush().color().rgb(), format_color(Format::E4M3FN).rgb());
  if (e5->brush().style() != Qt::NoBrush)
    QCOMPARE(e5->brush().color().rgb(), format_color(Format::E5M2).rgb());
}

// At a gradient scale of 2^24 about half the values lie beyond E4M3's 448 and are clamped:
// the table shows each case's saturated share and count, and a note says why E4M3's SQNR
// is near 0 dB.
void DemosTest::gradientDemoSaysWhatIsClamped() {
  GradientDemoView view;
  view.setScaleExponent(24);
  const GradientDemoCase& cast = view.result().cases[0];
  QCOMPARE(cast.format, Format::E4M3FN);
  QVERIFY(!cast.scaled);
  QVERIFY(cast.stats.saturated_pct() > 40 && cast.stats.saturated_pct() < 60);
  QVERIFY(cast.stats.sqnr_db() < 1);
  const QString text = view.summaryText();
  QVERIFY2(text.contains(QStringLiteral("saturated")), qPrintable(text));
  QVERIFY2(text.contains(QStringLiteral("%1% (%2)")
                             .arg(cast.stats.saturated_pct(), 0, 'f', 1)
                             .arg(cast.stats.raw.saturated)),
           qPrintable(text));
  const QString note = QString::fromStdString(gradient_clamp_note(cast));
  QVERIFY(note.contains(QStringLiteral("clamped")));
  QVERIFY2(text.contains(note.toHtmlEscaped()), qPrintable(text));
  QVERIFY2(text.contains(QStringLiteral("(SQNR %1 dB)").arg(cast.stats.sqnr_db(), 0, 'f', 1)),
           qPrintable(text));
  // Per-tensor scaling never clamps: its rows say 0, and no note is given below 2^0.
  view.setScaleExponent(0);
  QVERIFY2(!view.summaryText().contains(QStringLiteral("clamped to it")),
           qPrintable(view.summaryText()));
}

// The histogram's axis takes in every nonempty bin (each drawn as a step of width 1 about
// its exponent) at the slider's ends, scaled or not.
void DemosTest::gradientAxisTakesInEveryBin() {
  GradientDemoView view;
  for (const bool scaled : {false, true}) {
    view.setPerTensorScaling(scaled);
    for (const int k : {-8, 0, 24}) {
      view.setScaleExponent(k);
      QCustomPlot* hist = view.histogramPlot();
      const QCPRange x = hist->xAxis->range();
      QVERIFY(hist->graphCount() > 0);
      for (int i = 0; i < hist->graphCount(); ++i) {
        QCPGraph* g = hist->graph(i);
        for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it) {
          if (it->value <= 0) continue;
          QVERIFY2(it->key - 0.5 >= x.lower && it->key + 0.5 <= x.upper,
                   qPrintable(QStringLiteral("2^%1, scaled %2: bin %3 outside %4..%5")
                                  .arg(k)
                                  .arg(scaled)
                                  .arg(it->key)
                                  .arg(x.lower)
                                  .arg(x.upper)));
        }
      }
    }
  }
}

// Each format's "... range" label, as drawn, lies on no band of another format (the E4M3FN
// label sat on the E5M2 band, which reaches further left) and on no other label.
void DemosTest::gradientRangeLabelsLieOnNoOtherBand() {
  GradientDemoView view;
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  QCustomPlot* hist = view.histogramPlot();
  // Large, and short as in a small window (the plot 240 px high).
  for (const QSize size : {QSize(1000, 900), QSize(900, 0)}) {
    view.resize(size.width(),
                size.height() > 0 ? size.height() : view.height() - hist->height() + 240);
    QCoreApplication::processEvents();
    hist->replot();
    std::vector<std::pair<QRgb, QRectF>> labels, bands;
    for (int i = 0; i < hist->itemCount(); ++i) {
      if (auto* t = qobject_cast<QCPItemText*>(hist->item(i));
          t && t->text().endsWith(QStringLiteral(" range"))) {
        labels.emplace_back(
            t->color().rgb(),
            QRectF(t->topLeft->pixelPosition(), t->bottomRight->pixelPosition()).normalized());
      } else if (auto* r = qobject_cast<QCPItemRect*>(hist->item(i))) {
        bands.emplace_back(
            r->brush().color().rgb(),
            QRectF(r->topLeft->pixelPosition(), r->bottomRight->pixelPosition()).normalized());
      }
    }
    QCOMPARE(labels.size(), size_t{2});
    QCOMPARE(bands.size(), size_t{4});  // subnormal and normal part of each format
    for (const auto& [colour, rect] : labels) {
      for (const auto& [band_colour, band] : bands) {
        if (band_colour == colour) continue;
        QVERIFY2(!rect.intersects(band),
                 qPrintable(QStringLiteral("label %1 at %2,%3 %4x%5 over a band at %6,%7 %8x%9")
                                .arg(QColor(colour).name())
                                .arg(rect.x())
                                .arg(rect.y())
                                .arg(rect.width())
                                .arg(rect.height())
                                .arg(band.x())
                                .arg(band.y())
                                .arg(band.width())
                                .arg(band.height())));
      }
    }
    QVERIFY(!labels[0].second.intersects(labels[1].second));
  }
}

// The histogram's legend covers none of its bars (each bin a step one wide about its
// exponent, from 0 to its count) nor the ranges' rows, at any slider value, scaled or not,
// in a large plot and a short one.
void DemosTest::gradientLegendCoversNoBar() {
  GradientDemoView view;
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  QCustomPlot* hist = view.histogramPlot();
  for (const QSize size : {QSize(1000, 900), QSize(900, 0)}) {
    view.resize(size.width(),
                size.height() > 0 ? size.height() : view.height() - hist->height() + 240);
    for (bool scaled : {false, true}) {
      for (int k : {-8, 0, 8, 24}) {
        view.setPerTensorScaling(scaled);
        view.setScaleExponent(k);
        QCoreApplication::processEvents();
        hist->replot();
        QVERIFY(hist->legend->visible());
        const QRectF legend = hist->legend->outerRect();
        const QRectF area = hist->axisRect()->rect();
        if (!legend.intersects(area)) continue;  // outside the data area
        for (int g = 0; g < hist->graphCount(); ++g) {
          QCPGraph* graph = hist->graph(g);
          for (auto it = graph->data()->constBegin(); it != graph->data()->constEnd(); ++it) {
            if (it->value <= 0) continue;
            const QRectF bar = QRectF(QPointF(hist->xAxis->coordToPixel(it->key - 0.5),
                                              hist->yAxis->coordToPixel(it->value)),
                                      QPointF(hist->xAxis->coordToPixel(it->key + 0.5),
                                              hist->yAxis->coordToPixel(0)))
                                   .normalized()
                                   .intersected(area);
            QVERIFY2(bar.isEmpty() || !legend.intersects(bar),
                     qPrintable(QStringLiteral("scale 2^%1%2: the legend covers the bar at %3")
                                    .arg(k)
                                    .arg(scaled ? QStringLiteral(", scaled") : QString())
                                    .arg(it->key)));
          }
        }
        for (int i = 0; i < hist->itemCount(); ++i) {
          if (auto* r = qobject_cast<QCPItemRect*>(hist->item(i)))
            QVERIFY(!legend.intersects(
                QRectF(r->topLeft->pixelPosition(), r->bottomRight->pixelPosition()).normalized()));
        }
      }
    }
  }
}

void DemosTest::outlierFooterCitesAndComputes() {
  OutlierDemoView view;
  auto* slider = view.findChild<QSlider*>();
  QVERIFY(slider);
  slider->setValue(8);  // k = 100: the figures for the slider's k are another matter
  // The reference result's 4.9% at k = 1e4 and this tensor's own figure beside it.
  const OutlierDemoResult core = run_outlier_demo({});
  const QString computed = QString::number(core.rows[1].tensorwise_error_pct, 'f', 2);
  QCOMPARE(computed, QStringLiteral("4.48"));
  const QString text = view.summaryText();
  QVERIFY2(text.contains(QStringLiteral("4.9")), qPrintable(text));
  QVERIFY2(text.contains(computed), qPrintable(text));
  QVERIFY2(text.contains(QStringLiteral("amax")), qPrintable(text));  // and why they differ
  // Named for what it is, a reference result from the literature.
  QVERIFY2(!text.contains(QStringLiteral("chapter")), qPrintable(text));
  QVERIFY2(text.contains(QStringLiteral(
               "A reference result from the mixed-precision / FP8 training literature")),
           qPrintable(text));
}

// The footer's reasons follow the sliders: which formats lose the update, which move by
// whole spacings, and where each stops (the spacing there more than twice the update).
void DemosTest::masterWeightsFooterFollowsTheSliders() {
  FormatsTab tab;
  QVERIFY(tab.showPage(QStringLiteral("master-weights")));
  MasterWeightsDemoView* view = tab.masterWeightsDemo();
  // 1e-3 per step for 1000 steps: below half of 2^-7 (bf16), 2^-3 (E4M3) and 2^-2 (E5M2);
  // fp16 moves by 2^-10 = 0.000977 each time: 1 + 1000 * 2^-10 = 1.9766.
  QString text = view->footerText();
  QVERIFY2(text.contains(QStringLiteral("0.001 is below half a spacing in bf16, E4M3, E5M2")),
           qPrintable(text));
  QVERIFY2(text.contains(QStringLiteral("fp16 moves by a whole spacing, 0.000977 per step")),
           qPrintable(text));
  QVERIFY2(text.contains(QStringLiteral("1.9766 after 1000 steps")), qPrintable(text));
  QVERIFY2(!text.contains(QStringLiteral("stops at")), qPrintable(text));

  // 0.1 per step for 5000 steps: bf16 (spacing 2^-7 below 2) moves until 32, where its
  // spacing is 2^-2 = 0.25 > 0.2; fp16 until 256 (256 * 2^-10 = 0.25), E4M3 until 2
  // (2 * 2^-3 = 0.25); E5M2 (2^-2 at 1, half of it 0.125 > 0.1) never moves.
  auto* update = view->findChild<QSlider*>(QStringLiteral("updateSlider"));
  auto* steps = view->findChild<QSlider*>(QStringLiteral("stepsSlider"));
  QVERIFY(update && steps);
  update->setFocus();
  QTest::keyClick(update, Qt::Key_End);
  steps->setFocus();
  QTest::keyClick(steps, Qt::Key_End);
  QCOMPARE(update->value(), -4);
  QCOMPARE(steps->value(), 50);
  text = view->footerText();
  QVERIFY2(text.contains(QStringLiteral("0.1 is below half a spacing in E5M2:")), qPrintable(text));
  QVERIFY2(text.contains(QStringLiteral("bf16 stops at 32, where the spacing is 2^-2 = 0.25")),
           qPrintable(text));
  QVERIFY2(text.contains(QStringLiteral("fp16 stops at 256, where the spacing is 2^-2 = 0.25")),
           qPrintable(text));
  QVERIFY2(text.contains(QStringLiteral("E4M3 stops at 2, where the spacing is 2^-2 = 0.25")),
           qPrintable(text));
  QVERIFY2(!text.contains(QStringLiteral("1.9766")) && !text.contains(QStringLiteral("1e-3")) &&
               !text.contains(QStringLiteral("0.001")),
           qPrintable(text));
}

// The loss-scaling plots' legends sit below the plots, not over the curves' first steps.
void DemosTest::lossScalingLegendsBelowThePlots() {
  FormatsTab tab;
  QVERIFY(tab.showPage(QStringLiteral("loss-scaling")));
  LossScalingDemoView* view = tab.lossScalingDemo();
  for (QCustomPlot* p : {static_cast<QCustomPlot*>(view->scalePlot()),
                         static_cast<QCustomPlot*>(view->underflowPlot())}) {
    p->resize(700, 500);
    p->replot();
    QVERIFY(p->legend->visible());
    QCOMPARE(p->legend->layout(), static_cast<QCPLayout*>(p->plotLayout()));
    QVERIFY(p->legend->outerRect().top() >= p->axisRect()->outerRect().bottom());
  }
}

// The outlier curve's k axis: no two tick labels overlap.
void DemosTest::outlierTickLabelsApart() {
  OutlierDemoView view;
  QCustomPlot* p = view.errorPlot();
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  for (int width : {600, 1000}) {
    view.resize(width, 700);
    QCoreApplication::processEvents();
    p->replot();
    QCPAxis* x = p->xAxis;
    const QVector<double> ticks = x->tickVector();
    const QVector<QString> labels = x->tickVectorLabels();
    QVERIFY(ticks.size() >= 2);
    const QFontMetrics fm(x->tickLabelFont());
    double last_right = -1e9;
    for (int i = 0; i < ticks.size(); ++i) {
      const double px = x->coordToPixel(ticks[i]);
      if (px < x->axisRect()->left() - 1 || px > x->axisRect()->right() + 1) continue;
      const int w = fm.boundingRect(QRect(0, 0, 1000, 1000), Qt::AlignLeft, labels[i]).width();
      QVERIFY2(px - w / 2.0 > last_right + 4,
               qPrintable(QStringLiteral("%1 at %2 px wide %3").arg(labels[i]).arg(px).arg(w)));
      last_right = px + w / 2.0;
    }
  }
}

// The outlier maps' colours: auto follows this k's errors (the range moves with k); fixed
// is one range for every k of the slider, holding each k's cells, so that a colour is the
// same error as the slider moves. The colour bar says which.
void DemosTest::outlierMapColoursFixedOverEveryK() {
  OutlierDemoView view;
  QComboBox* box = view.colourRangeBox();
  QVERIFY(box);
  QCOMPARE(box->objectName(), QStringLiteral("colourRange"));
  QVERIFY(!fixed_colour_range(box));  // auto at first, as the other heatmaps
  view.setFactorStep(0);
  const QCPRange auto1 = view.colourRange();
  view.setFactorStep(16);
  const QCPRange auto4 = view.colourRange();
  QVERIFY2(auto1.lower != auto4.lower || auto1.upper != auto4.upper,
           "the auto range does not follow k");
  box->setCurrentIndex(1);
  QVERIFY(fixed_colour_range(box));
  QList<QCPRange> fixed;
  for (int step : {0, 7, 16, 20}) {
    view.setFactorStep(step);
    const QCPRange r = view.colourRange();
    fixed << r;
    // Every cell of both maps at this k within the range.
    for (const TensorStats* stats :
         {&view.result().rows.front().tensorwise, &view.result().rows.front().block}) {
      for (const float e : stats->map_rel_error()) {
        const double v = e > 0 ? std::log10(e) : -6.0;
        QVERIFY2(v >= r.lower - 1e-9 && v <= r.upper + 1e-9,
                 qPrintable(QStringLiteral("k step %1: %2 outside %3..%4")
                                .arg(step)
                                .arg(v)
                                .arg(r.lower)
                                .arg(r.upper)));
      }
    }
  }
  for (const QCPRange& r : fixed) {
    QCOMPARE(r.lower, fixed.front().lower);
    QCOMPARE(r.upper, fixed.front().upper);
  }
  QVERIFY(fixed.front().lower <= std::min(auto1.lower, auto4.lower));
  QVERIFY(fixed.front().upper >= std::max(auto1.upper, auto4.upper));
  QCPColorScale* scale = nullptr;
  for (int i = 0; i < view.mapPlot()->plotLayout()->elementCount(); ++i)
    if (auto* s = qobject_cast<QCPColorScale*>(view.mapPlot()->plotLayout()->elementAt(i)))
      scale = s;
  QVERIFY(scale);
  QVERIFY2(scale->axis()->label().contains(QStringLiteral("fixed range")),
           qPrintable(scale->axis()->label()));
  box->setCurrentIndex(0);
  QVERIFY2(scale->axis()->label().contains(QStringLiteral("auto range")),
           qPrintable(scale->axis()->label()));
}

// The master-weights and loss-scaling tables: no header runs into the next ("E5M2 bf16,
// stochastic rounding" read as one); long headers on two lines keep the columns narrow.
void DemosTest::demoTableHeadersStandApart() {
  MasterWeightsDemoView master;
  LossScalingDemoView loss;
  for (const auto& [what, html] :
       {std::pair{QStringLiteral("master weights"), master.summaryText()},
        std::pair{QStringLiteral("loss scaling"), loss.summaryText()}}) {
    QFont big = QApplication::font();
    big.setPixelSize(20);  // presentation mode's smallest text, and a desktop's
    for (const QFont& font : {QApplication::font(), big}) {
      const double gap = smallest_header_gap(html, font);
      QVERIFY2(gap >= 8, qPrintable(QStringLiteral("%1: headers %2 px apart").arg(what).arg(gap)));
    }
  }
  QVERIFY(master.summaryText().contains(QStringLiteral("bf16,<br>stochastic rounding")));
}

QTEST_MAIN(DemosTest)
#include "demos_test.moc"
