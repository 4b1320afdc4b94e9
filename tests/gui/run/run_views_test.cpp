// The Scaling, Quantization and Overview tabs, the Runs tab and the File menu, offscreen:
// axes that follow the steps after step 0 (and a box to bring step 0 back), readable log
// labels; every tab showing the run just opened or started; delete, refresh and rename
// in the Runs tab; distinct names for runs of one preset; File > Open checkpoint, Open
// database, Recent files and Export; a database given at start-up that cannot be opened.
#include <QCheckBox>
#include <QComboBox>
#include <QFile>
#include <QInputDialog>
#include <QMenu>
#include <QMessageBox>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableView>
#include <QTemporaryDir>
#include <QTimer>
#include <QToolTip>
#include <QTreeWidget>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "fp8wb/core/checkpoint/safetensors.h"
#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/views/checkpoint/checkpoint_tab.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/run_tabs/run_data.h"
#include "fp8wb/views/run_tabs/run_tabs.h"
#include "fp8wb/views/runs/runs_tab.h"
#include "heatmap_cells.h"
#include "main_window.h"
#include "screenshot.h"

using namespace fp8wb;

class RunViewsTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase();
  void axesFollowTheStepsAfterStepZero();
  void stepZeroIsDrawnOnlyWhenIncluded();
  void aLoneSampleIsDrawnAsAPoint();
  void heatmapTooltipNamesLayerAndStep();
  void logAxisLabelsAreReadable();
  void heatmapCellsWholeAndTopNotWhite();
  void everyLayerCellFillsItsShareOfThePlot();
  void aConstantMapKeepsItsScaleWithinThePercentages();
  void anEndedRunsSummaryGivesItsFinalLoss();
  void aShortRunsFinalLossNamesItsOneStep();
  void currentScalingCaptionSaysSo();
  void everyTabShowsTheRunOpenedOrStarted();
  void theQuantizationTabsTensorFollowsTheHeatmapsRole();
  void anEmptyPlotSaysWhyAndShowsNoNumbers();
  void layersKeepOneOrderLiveAndStored();
  void runsTabDeleteRefreshAndRename();
  void fileMenuOpensAndExports();
  void aDatabaseThatCannotBeOpenedIsSaidAtStartUp();
  void aDatabaseInAMissingFolderIsSaid();

 private:
  QString path(const QString& name) const { return dir_.filePath(name); }
  QTemporaryDir dir_;
};

namespace {

// A sampled step of one tensor: its amax, scale and underflow (of 100 nonzero elements).
TensorMetrics tensor_at(int64_t step, const std::string& layer, Role role, float amax, float scale,
                        uint64_t underflow) {
  TensorMetrics t;
  t.step = step;
  t.layer = layer;
  t.role = role;
  t.amax = amax;
  t.scale = scale;
  t.raw.numel = 100;
  t.raw.underflow = underflow;
  t.raw.hist[40] = 100;
  return t;
}

std::string delayed_config(const std::string& name) {
  RunConfig c;
  c.name = name;
  c.scaling = ScalingMode::Delayed;
  c.window = 16;
  return run_config_json(c);
}

// A delayed-scaling run as it starts: step 0 quantized with scale 1 (the amax the scale
// maps to 448 is 448, half the elements underflow), the steps after with scales from the
// amaxes seen.
void fill_delayed(RunData& d, int samples = 4) {
  d.setRun(1, "delayed", delayed_config("delayed"));
  const float amax[] = {3.0f, 3.1f, 3.2f, 3.3f};
  for (int i = 0; i < samples; ++i) {
    MetricBatch b;
    StepMetrics m;
    m.step = i * 10;
    m.loss = 4.0 - 0.1 * i;
    b.steps.push_back(m);
    for (const char* layer : {"fc1", "fc2"}) {
      const float scale = i == 0 ? 1.0f : 448.0f / amax[i - 1];
      b.tensors.push_back(tensor_at(m.step, layer, Role::Input, amax[i], scale, i == 0 ? 50 : 0));
      b.tensors.back().scaling = ScalingMode::Delayed;  // as the statistics say it
    }
    d.append(b);
  }
}

// A stored run: `steps` steps of loss, and the tensors' statistics every 10 steps.
int64_t store_run(RunStore& s, const std::string& name, const std::vector<std::string>& layers,
                  int steps, std::vector<Role> roles = {Role::Input}) {
  RunConfig c;
  c.name = name;
  c.model = ModelKind::Mlp;
  const int64_t id = s.create_run(name, fp8wb::RunKind::Train, run_config_json(c), "cpu");
  MetricBatch b;
  b.run_id = id;
  for (int i = 0; i < steps; ++i) {
    StepMetrics m;
    m.step = i;
    m.loss = 5.0 - 0.01 * i;
    b.steps.push_back(m);
    if (i % 10 != 0) continue;
    for (size_t l = 0; l < layers.size(); ++l) {
      for (Role r : roles) {
        b.tensors.push_back(tensor_at(
            i, layers[l], r, static_cast<float>(l + 1) + 0.01f * static_cast<float>(i), 100.0f, 0));
      }
    }
  }
  b.final = true;
  b.status = RunStatus::Finished;
  s.write(b);
  s.flush();
  return id;
}

QVector<double> values_of(const QCPGraph* g) {
  QVector<double> out;
  for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it) out << it->value;
  return out;
}

// Answers the next modal dialog with Escape, so that a dialog that blocks fails the test
// instead of hanging it.
void escape_modal_dialogs_after(int ms) {
  QTimer::singleShot(ms, [] {
    if (QWidget* w = QApplication::activeModalWidget()) {
      if (auto* d = qobject_cast<QDialog*>(w)) d->reject();
    }
  });
}

bool open_run(MainWindow& w, int64_t id) {
  QSignalSpy opened(w.engine(), &EngineController::opened);
  Q_EMIT w.runsTab()->openRequested(id);
  return opened.count() > 0 || opened.wait(30000);
}

// The tab shown at 1000 x 800 and refreshed: its layer x step heatmap's plot (null where
// the window never showed).
QCustomPlot* shown_heatmap(QuantizationTab& quantization) {
  quantization.resize(1000, 800);
  quantization.show();
  if (!QTest::qWaitForWindowExposed(&quantization)) return nullptr;
  quantization.refresh(true);
  return quantization.plots()[0];
}

// Run `id` of an MLP named `name` with `steps` steps, the loss 2 - 0.01 x step against a
// reference loss of 1.5; 1000 + 10 x step tokens/s, but 50 at the first step (a warm-up)
// and 200 at the last (a short step).
void fill_falling_loss(RunData& data, int64_t id, const char* name, int64_t steps) {
  RunConfig c;
  c.name = name;
  c.model = ModelKind::Mlp;
  data.setRun(id, c.name, run_config_json(c));
  MetricBatch b;
  for (int64_t i = 0; i < steps; ++i) {
    StepMetrics m;
    m.step = i;
    m.loss = 2.0 - 0.01 * static_cast<double>(i);
    m.ref_loss = 1.5;
    m.loss_gap = m.loss - m.ref_loss;
    m.tokens_per_s = i == 0 ? 50 : i == steps - 1 ? 200 : 1000 + 10 * static_cast<double>(i);
    b.steps.push_back(m);
  }
  data.append(b);
}

}  // namespace

void RunViewsTest::initTestCase() {
  QVERIFY(dir_.isValid());
  // Never the user's own database or settings.
  qputenv("XDG_DATA_HOME", dir_.path().toUtf8());
  qputenv("XDG_CONFIG_HOME", dir_.path().toUtf8());
}

// Step 0 of a delayed-scaling run maps amax 448 and underflows half of its elements; the
// axes and the heatmap's colours follow the later steps unless "Include step 0" is ticked.
void RunViewsTest::axesFollowTheStepsAfterStepZero() {
  RunData data;
  fill_delayed(data);
  ScalingTab scaling(&data);
  scaling.resize(1000, 800);
  scaling.show();
  QVERIFY(QTest::qWaitForWindowExposed(&scaling));
  scaling.refresh(true);
  auto* box = scaling.findChild<QCheckBox*>(QStringLiteral("include-step-0"));
  QVERIFY(box);
  QVERIFY(box->isVisible());
  QCOMPARE(box->text(), QStringLiteral("Include step 0"));
  QVERIFY(!box->isChecked());
  const QCPRange amax = scaling.plots()[0]->yAxis->range();
  // Every amax after step 0 (3.1 to 3.3) and the amaxes their scales map (the amaxes of
  // the step before, 3.0 to 3.2) in view; step 0's 448 is not.
  QVERIFY2(amax.lower <= 3.0 && amax.upper >= 3.3 && amax.upper < 100,
           qPrintable(QStringLiteral("%1 .. %2").arg(amax.lower).arg(amax.upper)));
  const QCPRange counts = scaling.plots()[2]->yAxis->range();
  QVERIFY2(counts.upper < 10, qPrintable(QString::number(counts.upper)));  // not step 0's 50 %
  QVERIFY(counts.lower <= 0 && counts.upper >= 0);
  QTest::mouseClick(box, Qt::LeftButton, {}, QPoint(5, box->height() / 2));
  QVERIFY(box->isChecked());
  QVERIFY(scaling.plots()[0]->yAxis->range().upper >= 448);
  QVERIFY(scaling.plots()[2]->yAxis->range().upper >= 50);

  // The underflow heatmap: its colours span the later steps (all 0 %), not step 0's 50 %.
  QuantizationTab quantization(&data);
  QCustomPlot* const heat_plot = shown_heatmap(quantization);
  QVERIFY(heat_plot);
  auto* heat = static_cast<QCPColorMap*>(heat_plot->plottable(0));
  QVERIFY2(heat->dataRange().upper < 50, qPrintable(QString::number(heat->dataRange().upper)));
  auto* qbox = quantization.findChild<QCheckBox*>(QStringLiteral("include-step-0"));
  QVERIFY(qbox && qbox->isVisible() && !qbox->isChecked());
  QTest::mouseClick(qbox, Qt::LeftButton, {}, QPoint(5, qbox->height() / 2));
  QVERIFY(heat->dataRange().upper >= 50);
}

// "Include step 0" unticked: neither the Scaling tab's curves nor the Quantization tab's
// heatmap draw step 0, nor do their step axes reach it; ticked, both draw it.
void RunViewsTest::stepZeroIsDrawnOnlyWhenIncluded() {
  RunData data;
  fill_delayed(data);  // steps 0, 10, 20, 30
  auto keys_of = [](const QCPGraph* g) {
    QVector<double> out;
    for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it) out << it->key;
    return out;
  };
  ScalingTab scaling(&data);
  scaling.resize(1000, 800);
  scaling.show();
  QVERIFY(QTest::qWaitForWindowExposed(&scaling));
  scaling.refresh(true);
  auto* box = scaling.findChild<QCheckBox*>(QStringLiteral("include-step-0"));
  QVERIFY(box && !box->isChecked());
  const QVector<double> later{10, 20, 30}, all{0, 10, 20, 30};
  // The orange steps (the amax plot's second curve) end one interval past the newest. The
  // amax plot's what-if curve and every step's amax stay empty: no what-if is asked for,
  // and this run stored no amax of every step.
  auto keys = [&](ExportablePlot* p, int g, QVector<double> k) {
    if (p == scaling.plots().front() && g == 1) k << 40;
    if (p == scaling.plots().front() && g >= 2) k.clear();
    return k;
  };
  for (ExportablePlot* p : scaling.plots()) {
    for (int g = 0; g < p->graphCount(); ++g) QCOMPARE(keys_of(p->graph(g)), keys(p, g, later));
    QVERIFY2(p->xAxis->range().lower > 0, qPrintable(QString::number(p->xAxis->range().lower)));
  }
  QTest::mouseClick(box, Qt::LeftButton, {}, QPoint(5, box->height() / 2));
  QVERIFY(box->isChecked());
  for (ExportablePlot* p : scaling.plots()) {
    for (int g = 0; g < p->graphCount(); ++g) QCOMPARE(keys_of(p->graph(g)), keys(p, g, all));
    QVERIFY(p->xAxis->range().lower <= 0);
  }
  QTest::mouseClick(box, Qt::LeftButton, {}, QPoint(5, box->height() / 2));
  for (ExportablePlot* p : scaling.plots()) {
    for (int g = 0; g < p->graphCount(); ++g) QCOMPARE(keys_of(p->graph(g)), keys(p, g, later));
  }

  QuantizationTab quantization(&data);
  QCustomPlot* plot = shown_heatmap(quantization);
  QVERIFY(plot);
  auto* heat = static_cast<QCPColorMap*>(plot->plottable(0));
  auto* qbox = quantization.findChild<QCheckBox*>(QStringLiteral("include-step-0"));
  QVERIFY(qbox && !qbox->isChecked());
  QCOMPARE(heat->data()->keySize(), 3);  // steps 10, 20, 30
  QVERIFY2(plot->xAxis->range().lower > 0, qPrintable(QString::number(plot->xAxis->range().lower)));
  QTest::mouseClick(qbox, Qt::LeftButton, {}, QPoint(5, qbox->height() / 2));
  QCOMPARE(heat->data()->keySize(), 4);
  QCOMPARE(plot->xAxis->range().lower, -5.0);
  QCOMPARE(plot->xAxis->range().upper, 35.0);
}

// A run sampled at steps 0 and 10, step 0 left out: each curve of the Scaling tab has one
// point, which a line alone would not draw; it is drawn as a dot.
void RunViewsTest::aLoneSampleIsDrawnAsAPoint() {
  RunData data;
  fill_delayed(data, 2);  // steps 0 and 10
  ScalingTab scaling(&data);
  scaling.resize(1000, 800);
  scaling.show();
  QVERIFY(QTest::qWaitForWindowExposed(&scaling));
  scaling.refresh(true);
  int lone = 0;
  for (QCustomPlot* p : scaling.plots()) {
    for (int g = 0; g < p->graphCount(); ++g) {
      QCPGraph* graph = p->graph(g);
      if (graph->dataCount() != 1 || graph->lineStyle() == QCPGraph::lsNone) continue;
      ++lone;
      QVERIFY2(graph->scatterStyle().shape() != QCPScatterStyle::ssNone, qPrintable(graph->name()));
    }
  }
  QVERIFY(lone > 0);
  // With step 0 back, two points: lines again, without dots.
  auto* box = scaling.findChild<QCheckBox*>(QStringLiteral("include-step-0"));
  QVERIFY(box);
  box->setChecked(true);
  scaling.refresh(true);
  for (QCustomPlot* p : scaling.plots()) {
    for (int g = 0; g < p->graphCount(); ++g) {
      QCPGraph* graph = p->graph(g);
      if (graph->dataCount() == 2 && graph->lineStyle() != QCPGraph::lsNone)
        QCOMPARE(graph->scatterStyle().shape(), QCPScatterStyle::ssNone);
    }
  }
}

// The pointer over a cell of the layer x step heatmap: its tooltip names the cell's layer
// and step and gives its figure, not the cell's place in the grid.
void RunViewsTest::heatmapTooltipNamesLayerAndStep() {
  RunData data;
  fill_delayed(data);  // steps 0, 10, 20, 30; fc1 and fc2
  QuantizationTab quantization(&data);
  QCustomPlot* plot = shown_heatmap(quantization);
  QVERIFY(plot);
  auto* heat = static_cast<QCPColorMap*>(plot->plottable(0));
  plot->replot(QCustomPlot::rpImmediateRefresh);
  QToolTip::hideText();
  QTest::mouseMove(plot, heat->coordsToPixels(21, 1.2).toPoint());
  QVERIFY(QTest::qWaitFor([] { return QToolTip::isVisible(); }, 5000));
  QCOMPARE(QToolTip::text(), QStringLiteral("layer fc2, step 20: underflow % (of nonzero) 0"));
}

// The layer x step heatmap: its first and last columns and rows are whole cells (the axis
// reaches half a step past the centres), a cell without data is NaN (drawn over the hatch,
// not in the lowest colour), and the top of the colour scale stands out from white.
void RunViewsTest::heatmapCellsWholeAndTopNotWhite() {
  RunData data;
  fill_delayed(data);  // steps 0, 10, 20, 30; fc1 and fc2
  QuantizationTab quantization(&data);
  QCustomPlot* plot = shown_heatmap(quantization);
  QVERIFY(plot);
  auto* heat = static_cast<QCPColorMap*>(plot->plottable(0));
  QCOMPARE(plot->xAxis->range().lower, 5.0);  // step 0 left out: steps 10, 20 and 30
  QCOMPARE(plot->xAxis->range().upper, 35.0);
  QCOMPARE(plot->yAxis->range().lower, -0.5);
  QCOMPARE(plot->yAxis->range().upper, 1.5);
  QCPColorGradient g = heat->gradient();
  const QColor top = QColor::fromRgb(g.color(1.0, QCPRange(0, 1)));
  QVERIFY2(top.lightness() < 200, qPrintable(top.name()));
  QCOMPARE(g.nanHandling(), QCPColorGradient::nhTransparent);
  QVERIFY(plot->axisRect()->backgroundBrush().style() != Qt::NoBrush);
}

// The layer x step heatmap of one layer, of one sampled step, or of both (a one-layer MLP
// stopped before its second sample), and of several of each: every cell covers its own
// share of the plot, centred on its layer's tick and its step, in the colour of its
// figure; the axes span exactly the cells, with ticks only at whole steps.
void RunViewsTest::everyLayerCellFillsItsShareOfThePlot() {
  QStringList wrong;  // every shape's problem, so that one failing shape hides no other
  int64_t run = 0;
  auto check = [&](const QString& shape, const std::vector<std::string>& layers,
                   const std::vector<int64_t>& steps) {
    // Each cell an underflow of its own.
    auto underflow = [&](size_t c, size_t l) { return static_cast<uint64_t>(5 + 7 * c + 23 * l); };
    RunConfig c;
    c.name = shape.toStdString();
    c.model = ModelKind::Mlp;
    c.depth = static_cast<int>(layers.size());
    RunData data;
    data.setRun(++run, c.name, run_config_json(c));
    for (size_t i = 0; i < steps.size(); ++i) {
      MetricBatch b;
      StepMetrics m;
      m.step = steps[i];
      m.loss = 1;
      b.steps.push_back(m);
      for (size_t l = 0; l < layers.size(); ++l)
        b.tensors.push_back(tensor_at(steps[i], layers[l], Role::Input, 3, 100, underflow(i, l)));
      data.append(b);
    }
    QuantizationTab tab(&data);
    tab.resize(1000, 800);
    tab.show();
    if (!QTest::qWaitForWindowExposed(&tab)) {
      wrong << shape + QStringLiteral(": never shown");
      return;
    }
    tab.refresh(true);
    QCustomPlot* plot = tab.plots()[0];
    QStringList names;
    for (const std::string& l : layers) names << QString::fromStdString(l);
    const double width = steps.size() > 1 ? static_cast<double>(steps[1] - steps[0]) : 1;
    const QString problem = cells_fill_the_plot(
        plot, qobject_cast<QCPColorMap*>(plot->plottable(0)),
        {static_cast<int>(steps.size()), static_cast<double>(steps.front()), width},
        {static_cast<int>(layers.size()), 0, 1, names}, [&](int col, int row) {
          const uint64_t u = underflow(static_cast<size_t>(col), static_cast<size_t>(row));
          return kUnderflowPct.of(tensor_at(0, "", Role::Input, 3, 100, u).raw);
        });
    if (!problem.isEmpty()) wrong << shape + QStringLiteral(": ") + problem;
    for (const double t : plot->xAxis->tickVector()) {
      if (t != std::round(t)) wrong << shape + QStringLiteral(": a tick at step %1").arg(t);
    }
  };
  check(QStringLiteral("1 layer x 1 step"), {"layers.0"}, {0});
  check(QStringLiteral("1 layer x 3 steps"), {"layers.0"}, {10, 20, 30});
  check(QStringLiteral("3 layers x 1 step"), {"layers.0", "layers.1", "layers.2"}, {40});
  check(QStringLiteral("3 layers x 4 steps"), {"layers.0", "layers.1", "layers.2"},
        {10, 20, 30, 40});
  QVERIFY2(wrong.isEmpty(), qPrintable(wrong.join(QLatin1Char('\n'))));
}

// An ended run's summary gives its final loss and gap as the Sweeps and Runs tabs do (the
// mean over the last 10% of the steps), beside the last step's loss; a running one not, a
// diverged one none.
void RunViewsTest::anEndedRunsSummaryGivesItsFinalLoss() {
  RunData data;
  fill_falling_loss(data, 7, "ended", 40);  // the last 10%: steps 36..39
  OverviewTab tab(&data);
  tab.resize(1000, 700);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  data.setStatus(RunStatus::Running, "");
  tab.refresh(true);
  QVERIFY2(!tab.summaryText().contains(QStringLiteral("final loss")),
           qPrintable(tab.summaryText()));
  // While it trains, its loss is said to be the latest, with its step.
  QVERIFY2(tab.summaryText().contains(QStringLiteral("running): latest loss 1.6100 (step 39)")),
           qPrintable(tab.summaryText()));
  data.setStatus(RunStatus::Paused, "");
  tab.refresh(true);
  QVERIFY2(tab.summaryText().contains(QStringLiteral("latest loss 1.6100 (step 39)")),
           qPrintable(tab.summaryText()));
  data.setStatus(RunStatus::Running, "");
  tab.refresh(true);
  // A running run's speed is its last step's.
  QVERIFY2(tab.summaryText().contains(QStringLiteral(", 200 tokens/s per model step")),
           qPrintable(tab.summaryText()));
  data.setStatus(RunStatus::Finished, "");
  tab.refresh(true);
  // Mean of 1.64, 1.63, 1.62, 1.61: 1.625, 0.125 above the reference's 1.5.
  const QString t = tab.summaryText();
  // The last step's, numbered as the plots number it (the last point is at step 39).
  QVERIFY2(t.contains(QStringLiteral("step 39, loss 1.6100")), qPrintable(t));
  QVERIFY2(t.contains(QStringLiteral("final loss 1.6250, gap 0.125 (mean over steps 36-39)")),
           qPrintable(t));
  // An ended run's speed as `fp8wb runs list` and `runs show` give it (final_loss.h): the
  // median of its forty steps' tokens/s, those of steps 18 and 19 (1180 and 1190) the
  // middle two, not the last short step's 200.
  QVERIFY2(t.contains(QStringLiteral("; 1185 tokens/s per model step (median over 40 steps)")),
           qPrintable(t));
  QVERIFY2(!t.contains(QStringLiteral("200 tokens/s")), qPrintable(t));
  // Every curve's points lie inside its plot's frame, not on its edge.
  for (int k = 0; k < 3; ++k) {
    ExportablePlot* p = tab.plots()[static_cast<size_t>(k)];
    const QCPRange y = p->yAxis->range();
    for (int g = 0; g < p->graphCount(); ++g) {
      bool found = false;
      const QCPRange v = p->graph(g)->getValueRange(found);
      if (!found) continue;
      QVERIFY2(v.lower > y.lower && v.upper < y.upper,
               qPrintable(QStringLiteral("plot %1: values %2..%3, axis %4..%5")
                              .arg(k)
                              .arg(v.lower)
                              .arg(v.upper)
                              .arg(y.lower)
                              .arg(y.upper)));
    }
  }
  // A diverged run has none, as `fp8wb runs show` and the Runs tab say (final_loss.h).
  data.setStatus(RunStatus::Diverged, "loss blew up");
  tab.refresh(true);
  const QString d = tab.summaryText();
  QVERIFY2(d.contains(QStringLiteral("; final loss none (the run diverged)")), qPrintable(d));
  QVERIFY2(!d.contains(QStringLiteral("1.6250")), qPrintable(d));
}

// A run so short that its last 10% is one step: the summary names that step alone, not
// as a range of one ("steps 11-11").
void RunViewsTest::aShortRunsFinalLossNamesItsOneStep() {
  RunData data;
  fill_falling_loss(data, 8, "short", 12);  // the last 10%: step 11
  OverviewTab tab(&data);
  data.setStatus(RunStatus::Finished, "");
  tab.refresh(true);
  const QString t = tab.summaryText();
  QVERIFY2(t.contains(QStringLiteral("final loss 1.8900, gap 0.39 (of step 11 alone)")),
           qPrintable(t));
  QVERIFY2(!t.contains(QStringLiteral("11-11")), qPrintable(t));
}

// A layer x step heatmap whose every cell has the same underflow (none, or all of it): the
// colour scale spans a band around that value, never below 0 % nor above 100 %.
void RunViewsTest::aConstantMapKeepsItsScaleWithinThePercentages() {
  QStringList wrong;
  int64_t run = 100;
  for (const uint64_t underflow : {uint64_t{0}, uint64_t{30}, uint64_t{100}}) {
    RunConfig c;
    c.name = "constant " + std::to_string(underflow);
    c.model = ModelKind::Mlp;
    c.depth = 2;
    RunData data;
    data.setRun(++run, c.name, run_config_json(c));
    for (int64_t step : {0, 10, 20}) {
      MetricBatch b;
      StepMetrics m;
      m.step = step;
      m.loss = 1;
      b.steps.push_back(m);
      for (const char* layer : {"layers.0", "layers.1"})
        b.tensors.push_back(tensor_at(step, layer, Role::Input, 3, 100, underflow));
      data.append(b);
    }
    QuantizationTab tab(&data);
    tab.resize(1000, 800);
    tab.show();
    QVERIFY(QTest::qWaitForWindowExposed(&tab));
    tab.refresh(true);
    auto* map = qobject_cast<QCPColorMap*>(tab.plots()[0]->plottable(0));
    QVERIFY(map && map->colorScale());
    const QCPRange r = map->colorScale()->dataRange();
    const double v = static_cast<double>(underflow);  // of 100 nonzero elements: a %
    if (!(r.lower >= 0 && r.upper <= 100 && r.lower <= v && v <= r.upper && r.lower < r.upper))
      wrong << QStringLiteral("every cell %1 %: the scale runs %2 .. %3")
                   .arg(v)
                   .arg(r.lower)
                   .arg(r.upper);
  }
  QVERIFY2(wrong.isEmpty(), qPrintable(wrong.join(QLatin1Char('\n'))));
}

// With current scaling there is no delayed-scaling window: the Scaling tab's caption says
// how the scale is chosen, and a headroom of zero reads 2^0.00, not 2^-0.00.
void RunViewsTest::currentScalingCaptionSaysSo() {
  RunData data;
  RunConfig c;
  c.name = "current";
  c.scaling = ScalingMode::Current;
  data.setRun(1, "current", run_config_json(c));
  MetricBatch b;
  StepMetrics m;
  m.step = 10;
  b.steps.push_back(m);
  // amax * scale a hair above 448: log2 of the headroom is a tiny negative number.
  b.tensors.push_back(tensor_at(10, "fc1", Role::Input, 3.0f, 448.0f / 3.0f * 1.0000001f, 0));
  data.append(b);
  ScalingTab scaling(&data);
  scaling.resize(1000, 800);
  scaling.show();
  QVERIFY(QTest::qWaitForWindowExposed(&scaling));
  scaling.refresh(true);
  const QString caption = scaling.captionText();
  QVERIFY2(!caption.contains(QStringLiteral("delayed-scaling window")), qPrintable(caption));
  QVERIFY2(caption.contains(QStringLiteral("current scaling")), qPrintable(caption));
  QVERIFY2(!caption.contains(QStringLiteral("2^-0.00")), qPrintable(caption));
  // The caption says what the headroom means; a hair above max is no saturation.
  QVERIFY2(caption.contains(QStringLiteral("Below 2^0 the largest values saturate")),
           qPrintable(caption));
  QVERIFY2(!caption.contains(QStringLiteral("Saturating")), qPrintable(caption));
  // An amax a quarter above what the scale maps to 448: said in red.
  MetricBatch over;
  over.tensors.push_back(tensor_at(20, "fc1", Role::Input, 3.75f, 448.0f / 3.0f, 0));
  data.append(over);
  scaling.refresh(true);
  QVERIFY2(scaling.captionText().contains(QStringLiteral("headroom 2^-0.32")),
           qPrintable(scaling.captionText()));
  QVERIFY2(scaling.captionText().contains(
               QStringLiteral("<b>Saturating:</b> this step's amax is above what its scale "
                              "maps to 448.")),
           qPrintable(scaling.captionText()));
}

// Every labelled tick of the log axes says its own value, and below 0.1 in scientific form
// (drawn as a power of ten), not as a row of zeros: scales below 0.1 over less than a
// decade, over several decades, flat, and amaxes below 0.1.
void RunViewsTest::logAxisLabelsAreReadable() {
  // In a locale whose exponent sign is 'E' too (en_US: "2E-02", which the plot would not
  // draw as a power of ten).
  QLocale::setDefault(QLocale(QLocale::English, QLocale::UnitedStates));
  struct Restore {
    ~Restore() { QLocale::setDefault(QLocale::c()); }
  } restore;
  const std::pair<double, double> cases[] = {{0.02, 0.07}, {1e-4, 3e-2}, {0.004, 0.006},
                                             {0.05, 0.05}, {1e-7, 1e-6}, {0.03, 0.3}};
  for (const auto& [lo, hi] : cases) {
    RunData data;
    RunConfig c;
    c.name = "outliers";
    data.setRun(1, "outliers", run_config_json(c));
    for (int i = 0; i < 5; ++i) {
      MetricBatch b;
      const double scale = lo * std::pow(hi / lo, i / 4.0);
      // amax from 448 / scale, and a gradient-sized amax for the second tensor.
      b.tensors.push_back(tensor_at(i + 1, "fc1", Role::Input, static_cast<float>(448.0 / scale),
                                    static_cast<float>(scale), 0));
      b.tensors.push_back(tensor_at(i + 1, "fc1", Role::GradOutput, static_cast<float>(scale),
                                    static_cast<float>(448.0 / scale), 0));
      data.append(b);
    }
    ScalingTab tab(&data);
    tab.resize(1000, 800);
    tab.show();
    QVERIFY(QTest::qWaitForWindowExposed(&tab));
    for (const char* role : {"input", "grad_output"}) {
      QVERIFY(tab.select(QStringLiteral("fc1"), QLatin1String(role)));
      tab.refresh(true);
      // The scale axis (input) and the amax axis (grad_output) hold values below 0.1.
      ExportablePlot* p = tab.plots()[QLatin1String(role) == QLatin1String("input") ? 1 : 0];
      p->replot();
      QCPAxis* y = p->yAxis;
      const QVector<double> ticks = y->tickVector();
      const QVector<QString> labels = y->tickVectorLabels();
      QCOMPARE(ticks.size(), labels.size());
      int shown = 0;
      for (int i = 0; i < ticks.size(); ++i) {
        if (!y->range().contains(ticks[i])) continue;
        ++shown;
        bool ok = false;
        const double v = labels[i].toDouble(&ok);
        const bool scientific = std::abs(ticks[i]) >= 0.1 || labels[i].contains(QLatin1Char('e'));
        QVERIFY2(ok && scientific && std::abs(v - ticks[i]) <= 1e-6 * std::abs(ticks[i]),
                 qPrintable(QStringLiteral("%1..%2: tick %3 labelled '%4'")
                                .arg(lo)
                                .arg(hi)
                                .arg(ticks[i])
                                .arg(labels[i])));
      }
      QVERIFY2(shown >= 2, qPrintable(QStringLiteral("%1..%2 (%3): %4 labelled ticks in %5..%6")
                                          .arg(lo)
                                          .arg(hi)
                                          .arg(QLatin1String(role))
                                          .arg(shown)
                                          .arg(y->range().lower)
                                          .arg(y->range().upper)));
    }
  }
}

// The Quantization tab's histogram and block errors show, for a run opened, the heatmap's
// first row (its first layer, the heatmap's role), not the first tensor stored (here a
// weight); another role for the heatmap takes them to that role, same layer.
void RunViewsTest::theQuantizationTabsTensorFollowsTheHeatmapsRole() {
  RunData data;
  RunConfig c;
  c.name = "roles";
  c.model = ModelKind::Mlp;
  data.setRun(9, c.name, run_config_json(c));
  MetricBatch b;
  for (int i = 0; i < 20; i += 10) {
    StepMetrics m;
    m.step = i;
    m.loss = 2.0;
    b.steps.push_back(m);
    // A live run's tensors come as its passes report them: a weight first.
    for (const char* layer : {"fc1", "fc2"}) {
      for (Role r : {Role::Weight, Role::Input})
        b.tensors.push_back(tensor_at(i, layer, r, 1.0f, 100.0f, 0));
    }
  }
  data.append(b);
  QuantizationTab tab(&data);
  tab.resize(1200, 800);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  tab.refresh(true);
  auto* role = tab.findChild<QComboBox*>(QStringLiteral("heatmapRole"));
  auto* tensor = tab.findChild<QComboBox*>(QStringLiteral("shownTensor"));
  QVERIFY(role && tensor);
  QCOMPARE(role->currentText(), QStringLiteral("input"));
  // Listed layer by layer, roles in their order, whichever reported first (a weight).
  QStringList items;
  for (int i = 0; i < tensor->count(); ++i) items << tensor->itemText(i);
  QCOMPARE(items, QStringList({QStringLiteral("fc1 / input"), QStringLiteral("fc1 / weight"),
                               QStringLiteral("fc2 / input"), QStringLiteral("fc2 / weight")}));
  QCOMPARE(tensor->currentText(), QStringLiteral("fc1 / input"));
  // A tensor chosen by hand, then another role: the same layer in that role.
  tensor->setCurrentIndex(tensor->findText(QStringLiteral("fc2 / input")));
  role->setCurrentIndex(role->findText(QStringLiteral("weight")));
  QCOMPARE(tensor->currentText(), QStringLiteral("fc2 / weight"));
  QVERIFY2(tab.captionText().contains(QStringLiteral("fc2 / weight")),
           qPrintable(tab.captionText()));
}

// A run's layers come in one order whether it is followed live (its tensors as the passes
// report them: a model's order) or read from the store (by name): by name, numbers as
// numbers, so "blocks.2" before "blocks.10". The heatmap's rows and the tensors' list
// follow it, and each list item shows its own tensor.
void RunViewsTest::layersKeepOneOrderLiveAndStored() {
  std::vector<std::string> model_order;
  for (int b : {0, 1, 2, 10})
    for (const char* l : {"qkv", "proj", "fc1", "fc2"})
      model_order.push_back("blocks." + std::to_string(b) + "." + l);
  std::vector<std::string> by_name = model_order;
  std::sort(by_name.begin(), by_name.end());
  const auto layers_of = [](const std::vector<std::string>& order) {
    RunData d;
    d.setRun(1, "r", "{}");
    MetricBatch b;
    for (size_t i = 0; i < order.size(); ++i)
      b.tensors.push_back(tensor_at(0, order[i], Role::Input, static_cast<float>(i + 1), 1, 0));
    d.append(b);
    return d.layers();
  };
  const std::vector<std::string> live = layers_of(model_order), stored = layers_of(by_name);
  QCOMPARE(live, stored);
  // A run that said its layers' order (its "layers" event): the model's, live and stored.
  std::string said;
  for (const std::string& l : model_order) said += (said.empty() ? "" : ", ") + l;
  for (const auto& order : {model_order, by_name}) {
    RunData d;
    d.setRun(3, "r", "{}");
    MetricBatch b;
    b.events.push_back({0, fp8wb::RunEventKind::Layers, said, {}});
    for (const std::string& l : order) b.tensors.push_back(tensor_at(0, l, Role::Input, 1, 1, 0));
    b.tensors.push_back(tensor_at(0, "head", Role::Input, 1, 1, 0));  // not said: after them
    d.append(b);
    std::vector<std::string> expected = model_order;
    expected.push_back("head");
    QCOMPARE(d.layers(), expected);
  }
  QCOMPARE(live[4], std::string("blocks.1.fc1"));
  QCOMPARE(live[8], std::string("blocks.2.fc1"));
  QCOMPARE(live[12], std::string("blocks.10.fc1"));
  // The tensors' list: in that order, each item the tensor it names (its amax in the caption).
  RunData d;
  d.setRun(2, "r", "{}");
  MetricBatch b;
  StepMetrics m;
  b.steps.push_back(m);
  for (size_t i = 0; i < model_order.size(); ++i)
    b.tensors.push_back(tensor_at(0, model_order[i], Role::Input, 1, 1, i));
  d.append(b);
  QuantizationTab tab(&d);
  tab.resize(1000, 800);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  tab.refresh(true);
  auto* tensor = tab.findChild<QComboBox*>(QStringLiteral("shownTensor"));
  QVERIFY(tensor);
  QCOMPARE(tensor->count(), static_cast<int>(live.size()));
  for (int i = 0; i < tensor->count(); ++i) {
    QCOMPARE(tensor->itemText(i),
             QString::fromStdString(live[static_cast<size_t>(i)]) + QStringLiteral(" / input"));
  }
  // The heatmap's first row (the first layer) on top, as the lists go down.
  ExportablePlot* heat = tab.plots()[0];
  heat->replot();
  QVERIFY(heat->yAxis->coordToPixel(0) < heat->yAxis->coordToPixel(15));
  tensor->setCurrentIndex(12);  // blocks.10.fc1, reported 15th: 14 of 100 underflow
  QVERIFY2(tab.captionText().contains(QStringLiteral("blocks.10.fc1 / input")) &&
               tab.captionText().contains(QStringLiteral("underflow 14 %")),
           qPrintable(tab.captionText()));
}

// A plot with nothing to draw says why (no run, nothing yet, nothing stored) in place of
// tick labels, colour scales and hatched cells, which would read as data; they come back
// with the data.
void RunViewsTest::anEmptyPlotSaysWhyAndShowsNoNumbers() {
  RunData data;
  QuantizationTab quantization(&data);
  OverviewTab overview(&data);
  for (QWidget* tab : {static_cast<QWidget*>(&quantization), static_cast<QWidget*>(&overview)}) {
    tab->resize(1000, 800);
    tab->show();
    QVERIFY(QTest::qWaitForWindowExposed(tab));
  }
  const auto looks_empty = [](ExportablePlot* p, const QString& hint) {
    p->replot();
    if (p->emptyHint() != hint) return QStringLiteral("hint \"%1\"").arg(p->emptyHint());
    for (QCPAxis* a : p->axisRect()->axes())
      if (a->tickLabels()) return QStringLiteral("tick labels shown");
    if (p->axisRect()->backgroundBrush().style() != Qt::NoBrush)
      return QStringLiteral("a background");
    for (int i = 0; i < p->plottableCount(); ++i) {
      auto* map = qobject_cast<QCPColorMap*>(p->plottable(i));
      if (map && map->colorScale()->visible()) return QStringLiteral("a colour scale");
    }
    return QString();
  };
  quantization.refresh(true);
  overview.refresh(true);
  for (ExportablePlot* p : quantization.plots())
    QCOMPARE(looks_empty(p, QStringLiteral("No run open")), QString());
  for (ExportablePlot* p : overview.plots())
    QCOMPARE(looks_empty(p, QStringLiteral("No run open")), QString());

  // A running MLP without a reference: steps, no tensor statistics yet, and no loss gap ever.
  RunConfig c;
  c.name = "plain";
  c.model = ModelKind::Mlp;
  c.reference = false;
  data.setRun(4, c.name, run_config_json(c));
  MetricBatch b;
  StepMetrics m;
  m.step = 0;
  m.loss = 2.0;
  m.ref_loss = m.loss_gap = std::nan("");  // as the trainer stores a run without one
  m.tokens_per_s = 100;
  b.steps.push_back(m);
  data.append(b);
  quantization.refresh(true);
  overview.refresh(true);
  for (ExportablePlot* p : quantization.plots())
    QCOMPARE(looks_empty(p, QStringLiteral("No tensor statistics yet")), QString());
  QVERIFY(overview.plots()[0]->emptyHint().isEmpty());  // the loss
  // Its loss plot's legend names no reference loss.
  const auto legend_names = [](QCustomPlot* p) {
    QStringList names;
    for (int i = 0; i < p->legend->itemCount(); ++i) {
      if (auto* item = qobject_cast<QCPPlottableLegendItem*>(p->legend->item(i)))
        names << item->plottable()->name();
    }
    return names;
  };
  QVERIFY2(!legend_names(overview.plots()[0]).contains(QStringLiteral("reference loss")),
           qPrintable(legend_names(overview.plots()[0]).join(QLatin1Char(','))));
  QVERIFY2(overview.plots()[1]->emptyHint().contains(QStringLiteral("No loss gap")),
           qPrintable(overview.plots()[1]->emptyHint()));
  QVERIFY(overview.plots()[2]->emptyHint().isEmpty());  // tokens/s

  // Its statistics arrive: the heatmap is drawn with its numbers, colour scale and hatch.
  MetricBatch t;
  t.tensors.push_back(tensor_at(0, "fc1", Role::Input, 1.0f, 100.0f, 3));
  data.append(t);
  quantization.refresh(true);
  ExportablePlot* heat = quantization.plots()[0];
  heat->replot();
  QCOMPARE(heat->emptyHint(), QString());
  QVERIFY(heat->xAxis->tickLabels() && heat->yAxis->tickLabels());
  QCOMPARE(heat->axisRect()->backgroundBrush().style(), Qt::BDiagPattern);
  auto* map = qobject_cast<QCPColorMap*>(heat->plottable(0));
  QVERIFY(map && map->colorScale()->visible());

  // Another run that ended without statistics says it stored none; it trained a reference.
  c.reference = true;
  data.setRun(5, c.name, run_config_json(c));
  MetricBatch end;
  end.steps.push_back(m);
  end.final = true;
  end.status = RunStatus::Finished;
  data.append(end);
  quantization.refresh(true);
  overview.refresh(true);
  for (ExportablePlot* p : quantization.plots())
    QCOMPARE(looks_empty(p, QStringLiteral("This run stored no tensor statistics")), QString());
  QVERIFY(legend_names(overview.plots()[0]).contains(QStringLiteral("reference loss")));
}

// Opening another run shows it on every tab at once (its first tensor, or nothing), and
// the Overview names a run as soon as it starts; two runs of one preset get two names.
void RunViewsTest::everyTabShowsTheRunOpenedOrStarted() {
  const QString db = path(QStringLiteral("open.sqlite"));
  int64_t first = 0, second = 0, bare = 0;
  {
    auto s = RunStore::open(db.toStdString());
    first = store_run(*s, "first run", {"fc1", "fc2"}, 30);
    second = store_run(*s, "second run", {"blocks.0.attn", "blocks.0.mlp"}, 20,
                       {Role::Input, Role::Weight});
    bare = store_run(*s, "bare run", {}, 5);
  }
  MainWindow w(false);
  w.engine()->setDatabasePath(db);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  QVERIFY(open_run(w, first));
  QVERIFY(w.selectTab(QStringLiteral("Scaling")));
  QVERIFY(w.scalingTab()->select(QStringLiteral("fc2"), QStringLiteral("input")));
  QVERIFY(w.scalingTab()->captionText().contains(QStringLiteral("fc2")));
  w.selectTab(QStringLiteral("Quantization"));
  auto* tensor_box = w.quantizationTab()->findChildren<QComboBox*>().at(2);
  QCOMPARE(tensor_box->itemText(0), QStringLiteral("fc1 / input"));

  // The second run: its first tensor is drawn on Scaling, without a click.
  QVERIFY(open_run(w, second));
  QVERIFY(w.selectTab(QStringLiteral("Scaling")));
  w.refreshRunTabs();
  QCOMPARE(w.scalingTab()->selectedTensor(), QStringLiteral("blocks.0.attn / input"));
  QVERIFY2(w.scalingTab()->captionText().contains(QStringLiteral("blocks.0.attn")),
           qPrintable(w.scalingTab()->captionText()));
  // Its amaxes as stored: layer 1 of 2, step 10 (step 0 is drawn only when included).
  QCOMPARE(values_of(w.scalingTab()->plots()[0]->graph(0)), (QVector<double>{1.0f + 0.1f}));
  auto* tree = w.scalingTab()->findChild<QTreeWidget*>();
  QVERIFY(tree && tree->currentItem());
  QCOMPARE(tree->currentItem()->text(0), QStringLiteral("input"));
  QCOMPARE(tree->currentItem()->parent()->text(0), QStringLiteral("blocks.0.attn"));
  w.selectTab(QStringLiteral("Quantization"));
  QCOMPARE(tensor_box->currentText(), QStringLiteral("blocks.0.attn / input"));
  QVERIFY2(w.quantizationTab()->captionText().contains(QStringLiteral("blocks.0.attn")),
           qPrintable(w.quantizationTab()->captionText()));
  w.selectTab(QStringLiteral("Overview"));
  QVERIFY(w.overviewTab()->summaryText().contains(QStringLiteral("second run")));

  // A run without statistics: nothing of the one before on Scaling or Quantization.
  QVERIFY(open_run(w, bare));
  w.selectTab(QStringLiteral("Scaling"));
  w.refreshRunTabs();
  for (ExportablePlot* p : w.scalingTab()->plots()) {
    for (int g = 0; g < p->graphCount(); ++g) QCOMPARE(p->graph(g)->dataCount(), 0);
  }
  QVERIFY(w.scalingTab()->selectedTensor().isEmpty());
  QVERIFY2(w.scalingTab()->captionText().contains(QStringLiteral("bare run")),
           qPrintable(w.scalingTab()->captionText()));
  w.selectTab(QStringLiteral("Quantization"));
  QCOMPARE(w.quantizationTab()->plots()[1]->plottable(0)->interface1D()->dataCount(), 0);
  QVERIFY(w.quantizationTab()->captionText().contains(QStringLiteral("bare run")));

  // A run just started is named on the Overview before its first step arrives.
  w.selectTab(QStringLiteral("Overview"));
  RunConfig c;
  c.name = "fresh run";
  c.model = ModelKind::Mlp;
  c.device = "cpu";
  c.steps = 2;
  QCOMPARE(w.engine()->start(c), QString());
  QVERIFY(w.engine()->data().steps().empty());
  w.refreshRunTabs(true);
  QVERIFY2(w.overviewTab()->summaryText().contains(QStringLiteral("fresh run")),
           qPrintable(w.overviewTab()->summaryText()));
  QVERIFY(!w.overviewTab()->summaryText().contains(QStringLiteral("bare run")));
  {
    QSignalSpy finished(w.engine(), &EngineController::finished);
    QVERIFY(finished.wait(120000));
  }
  // Started again with the same name: a name of its own.
  QCOMPARE(w.engine()->start(c), QString());
  {
    QSignalSpy finished(w.engine(), &EngineController::finished);
    QVERIFY(finished.wait(120000));
  }
  auto store = RunStore::open_read_only(db.toStdString());
  std::set<std::string> names;
  for (const RunInfo& r : store->runs()) names.insert(r.name);
  QCOMPARE(names.size(), store->runs().size());
  QVERIFY(names.count("fresh run"));
  QVERIFY(names.count("fresh run #2"));
  QCOMPARE(w.engine()->data().name(), std::string("fresh run #2"));
}

// Delete: the header counts what is left and the overlay drops the run; Refresh keeps
// that; Rename edits the name shown, and the selection stays on the run.
void RunViewsTest::runsTabDeleteRefreshAndRename() {
  const QString db = path(QStringLiteral("runs.sqlite"));
  {
    auto s = RunStore::open(db.toStdString());
    store_run(*s, "alpha", {}, 20);
    store_run(*s, "beta", {}, 25);
    store_run(*s, "gamma", {}, 30);
  }
  MainWindow w(false);
  w.engine()->setDatabasePath(db);
  w.show();
  RunsTab* runs = w.runsTab();
  QSignalSpy reloaded(runs, &RunsTab::reloaded);
  QSignalSpy curves(runs, &RunsTab::curvesShown);
  w.selectTab(QStringLiteral("Runs"));
  QVERIFY(reloaded.count() > 0 || reloaded.wait(30000));
  QTRY_COMPARE(runs->model()->rowCount(), 3);
  QVERIFY(runs->statusText().startsWith(QStringLiteral("3 run(s)")));
  auto* view = runs->findChild<QTableView*>(QStringLiteral("runs"));
  QVERIFY(view);
  auto click_row = [&](int row, Qt::KeyboardModifiers mods = {}) {
    const QRect r = view->visualRect(runs->model()->index(row, RunListModel::Name));
    QTest::mouseClick(view->viewport(), Qt::LeftButton, mods, r.center());
  };
  auto button = [&](const char* name) {
    auto* b = runs->findChild<QPushButton*>(QLatin1String(name));
    return b;
  };
  // Newest first: gamma, beta, alpha.
  click_row(2);
  click_row(1, Qt::ControlModifier);
  QVERIFY(button("overlay"));
  QTest::mouseClick(button("overlay"), Qt::LeftButton);
  QVERIFY(curves.wait(30000));
  QCOMPARE(runs->overlayPlot()->graphCount(), 2);
  QCOMPARE(runs->overlayPlot()->graph(1)->name(), QStringLiteral("2: beta"));

  // Delete beta (confirmed in the dialog).
  click_row(1);
  escape_modal_dialogs_after(3000);
  reloaded.clear();
  curves.clear();
  QTest::mouseClick(button("delete"), Qt::LeftButton);
  auto* confirm = runs->findChild<QMessageBox*>(QStringLiteral("delete-runs"));
  QVERIFY(confirm);
  QTest::mouseClick(confirm->button(QMessageBox::Yes), Qt::LeftButton);
  QVERIFY(reloaded.wait(30000));
  QCOMPARE(runs->model()->rowCount(), 2);
  QVERIFY2(runs->statusText().startsWith(QStringLiteral("2 run(s)")),
           qPrintable(runs->statusText()));
  QVERIFY(curves.count() > 0 || curves.wait(30000));
  QCOMPARE(runs->overlayPlot()->graphCount(), 1);
  QCOMPARE(runs->overlayPlot()->graph(0)->name(), QStringLiteral("1: alpha"));
  // Refresh: the same.
  reloaded.clear();
  QTest::mouseClick(button("refresh"), Qt::LeftButton);
  QVERIFY(reloaded.wait(30000));
  QVERIFY(runs->statusText().startsWith(QStringLiteral("2 run(s)")));
  QCOMPARE(runs->overlayPlot()->graphCount(), 1);
  QCOMPARE(runs->overlayPlot()->graph(0)->name(), QStringLiteral("1: alpha"));

  // Rename alpha (below gamma): the editor holds its name.
  click_row(1);
  escape_modal_dialogs_after(3000);
  QTest::mouseClick(button("rename"), Qt::LeftButton);
  auto* editor = runs->findChild<QInputDialog*>(QStringLiteral("rename-run"));
  QVERIFY(editor);
  QCOMPARE(editor->textValue(), QStringLiteral("alpha"));
  editor->setTextValue(QStringLiteral("alpha, renamed"));
  reloaded.clear();
  curves.clear();
  editor->accept();
  QVERIFY(reloaded.wait(30000));
  QCOMPARE(runs->model()->runAt(1)->name, std::string("alpha, renamed"));
  const QModelIndexList selected = view->selectionModel()->selectedRows();
  QCOMPARE(selected.size(), 1);
  QCOMPARE(runs->model()->runAt(selected.front().row())->id, int64_t{1});
  QVERIFY(curves.count() > 0 || curves.wait(30000));
  QCOMPARE(runs->overlayPlot()->graph(0)->name(), QStringLiteral("1: alpha, renamed"));
  // In the database too.
  QCOMPARE(RunStore::open_read_only(db.toStdString())->run(1)->name, std::string("alpha, renamed"));
}

// File > Open checkpoint, Open database (a damaged one keeps the database before),
// Recent files (a file that is gone is taken off, with a notice), Export (a plot of the
// current tab, the run shown as CSV). The file dialogs answer what the test says.
void RunViewsTest::fileMenuOpensAndExports() {
  MainWindow w(false);
  w.engine()->setDatabasePath(path(QStringLiteral("menu-first.sqlite")));
  w.show();
  QString next_open, next_save;
  QStringList asked;
  w.setFileDialogs(
      [&](QWidget*, const QString& caption, const QString&, const QString&) {
        asked << caption;
        return next_open;
      },
      [&](QWidget*, const QString& caption, const QString&, const QString&) {
        asked << caption;
        return next_save;
      });
  auto action = [&](const char* name) { return w.findChild<QAction*>(QLatin1String(name)); };
  QVERIFY(action("open-checkpoint"));
  QVERIFY(action("open-database"));
  QCOMPARE(action("open-checkpoint")->shortcut(), QKeySequence(QKeySequence::Open));
  QVERIFY(!action("open-database")->shortcut().isEmpty());

  // A checkpoint: the Checkpoint tab opens and analyses it.
  std::vector<float> v(64 * 32);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * static_cast<float>(i % 17);
  std::vector<uint8_t> bytes(v.size() * 4);
  std::memcpy(bytes.data(), v.data(), bytes.size());
  const QString ckpt = path(QStringLiteral("menu.safetensors"));
  write_safetensors(ckpt.toStdString(), {{"w", StDtype::F32, {64, 32}, bytes}});
  QSignalSpy loaded(w.checkpointTab(), &CheckpointTab::checkpointLoaded);
  next_open = ckpt;
  action("open-checkpoint")->trigger();
  QCOMPARE(asked.size(), 1);
  QCOMPARE(w.currentTabName(), QStringLiteral("Checkpoint"));
  QVERIFY(loaded.wait(60000));
  QCOMPARE(loaded.at(0).at(0).toString(), ckpt);
  QCOMPARE(w.checkpointTab()->model()->rowCount(), 1);

  // A database: its runs are listed.
  const QString other = path(QStringLiteral("menu-other.sqlite"));
  {
    auto s = RunStore::open(other.toStdString());
    store_run(*s, "in the other database", {"fc1"}, 12);
  }
  next_open = other;
  action("open-database")->trigger();
  QCOMPARE(w.engine()->databasePath(), other);
  QTRY_COMPARE_WITH_TIMEOUT(w.runsTab()->model()->rowCount(), 1, 30000);
  QCOMPARE(w.runsTab()->model()->runAt(0)->name, std::string("in the other database"));
  // A damaged one: the failure names it, and the database before stays.
  const QString damaged = path(QStringLiteral("menu-damaged.sqlite"));
  {
    QFile f(damaged);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QByteArray(8192, 'x'));
  }
  const qsizetype failures = w.failures().size();
  next_open = damaged;
  action("open-database")->trigger();
  QCOMPARE(w.failures().size(), failures + 1);
  QVERIFY2(w.failures().back().contains(damaged), qPrintable(w.failures().back()));
  QCOMPARE(w.engine()->databasePath(), other);
  QCOMPARE(w.engine()->store().runs().size(), size_t{1});

  // Recent files: the checkpoint and the database, not the damaged file.
  auto* recent = w.findChild<QMenu*>(QStringLiteral("recent-files"));
  QVERIFY(recent);
  auto recent_paths = [&] {
    Q_EMIT recent->aboutToShow();
    QStringList out;
    for (QAction* a : recent->actions()) {
      if (!a->data().toString().isEmpty()) out << a->data().toString();
    }
    return out;
  };
  QCOMPARE(recent_paths(), (QStringList{ckpt, other}));
  QVERIFY(QFile::remove(ckpt));
  const qsizetype notices = w.notices().size();
  QCOMPARE(recent_paths(), QStringList{other});
  QVERIFY(w.notices().size() > notices);
  QVERIFY(w.notices().back().contains(ckpt));
  QVERIFY(!w.checkpointTab()->recentFiles().contains(ckpt));

  // Export: the Overview's loss plot of the run opened, as PNG and PDF; the run as CSV.
  QVERIFY(open_run(w, 1));
  QVERIFY(w.selectTab(QStringLiteral("Overview")));
  auto* exports = w.findChild<QMenu*>(QStringLiteral("export"));
  QVERIFY(exports);
  Q_EMIT exports->aboutToShow();
  QList<QAction*> plots;
  QAction* csv = nullptr;
  for (QAction* a : exports->actions()) {
    if (a->objectName() == QLatin1String("export-plot")) plots << a;
    if (a->objectName() == QLatin1String("export-run-csv")) csv = a;
  }
  QCOMPARE(plots.size(), static_cast<qsizetype>(w.overviewTab()->plots().size()));
  QCOMPARE(plots.front()->shortcut(), QKeySequence(QKeySequence::Save));
  next_save = path(QStringLiteral("loss.png"));
  plots.front()->trigger();
  QImage png(next_save);
  QVERIFY(!png.isNull());
  QVERIFY(png.width() > 100);
  next_save = path(QStringLiteral("loss.pdf"));
  plots.front()->trigger();
  QFile pdf(next_save);
  QVERIFY(pdf.open(QIODevice::ReadOnly));
  QVERIFY(pdf.read(5) == "%PDF-");
  QVERIFY(csv);
  next_save = path(QStringLiteral("run.csv"));
  csv->trigger();
  QFile f(next_save);
  QVERIFY(f.open(QIODevice::ReadOnly));
  const QList<QByteArray> lines = f.readAll().trimmed().split('\n');
  QVERIFY(lines.front().startsWith("step,loss"));
  QCOMPARE(lines.size(), 1 + 12);  // a header and the run's 12 steps
  QVERIFY(lines.at(1).startsWith("0,5"));
}

// --db naming a damaged file or a folder: said at start-up through the window, naming the
// file, in words about the file (not which statement met it); a file not there yet is no
// failure, and is not created.
void RunViewsTest::aDatabaseThatCannotBeOpenedIsSaidAtStartUp() {
  const QString damaged = path(QStringLiteral("startup-damaged.sqlite"));
  {
    QFile f(damaged);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QByteArray(8192, 'x'));
  }
  const QString folder = path(QStringLiteral("startup-folder.sqlite"));
  QVERIFY(QDir().mkpath(folder));
  const QString missing = path(QStringLiteral("startup-new.sqlite"));
  const std::pair<QString, QString> cases[] = {{damaged, QStringLiteral("damaged")},
                                               {folder, QStringLiteral("is a folder")}};
  for (const auto& [db, says] : cases) {
    MainWindow w(false);
    GuiOptions o;
    o.db = db;
    QCOMPARE(apply_gui_options(w, o), QString());
    QCOMPARE(w.failures().size(), 1);
    const QString m = w.failures().front();
    QVERIFY2(m.contains(db) && m.contains(says), qPrintable(m));
    QVERIFY2(
        !m.contains(QStringLiteral("switching to WAL")) && !m.contains(QStringLiteral("prepare")),
        qPrintable(m));
  }
  MainWindow w(false);
  GuiOptions o;
  o.db = missing;
  QCOMPARE(apply_gui_options(w, o), QString());
  QVERIFY(w.failures().isEmpty());
  QVERIFY(!QFileInfo::exists(missing));
}

// A database path in a folder that does not exist, given at start-up or chosen in File >
// Open database: said at once, naming the folder; nothing is created.
void RunViewsTest::aDatabaseInAMissingFolderIsSaid() {
  const QString folder = path(QStringLiteral("no-such-folder"));
  const QString db = folder + QStringLiteral("/runs.sqlite");
  {
    MainWindow w(false);
    GuiOptions o;
    o.db = db;
    QCOMPARE(apply_gui_options(w, o), QString());
    QCOMPARE(w.failures().size(), 1);
    const QString m = w.failures().front();
    QVERIFY2(m.contains(db) && m.contains(folder) && m.contains(QStringLiteral("does not exist")),
             qPrintable(m));
    QVERIFY(!QFileInfo::exists(folder));
  }
  MainWindow w(false);
  w.setFileDialogs(
      [&](QWidget*, const QString&, const QString&, const QString&) { return db; },
      [](QWidget*, const QString&, const QString&, const QString&) { return QString(); });
  auto* open = w.findChild<QAction*>(QStringLiteral("open-database"));
  QVERIFY(open);
  open->trigger();
  QCOMPARE(w.failures().size(), 1);
  const QString m = w.failures().front();
  QVERIFY2(m.contains(folder + QStringLiteral(" does not exist")), qPrintable(m));
  QVERIFY(!QFileInfo::exists(folder));
}

QTEST_MAIN(RunViewsTest)
#include "run_views_test.moc"
