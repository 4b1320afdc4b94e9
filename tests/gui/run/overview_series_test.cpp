// The Overview tab draws every kStepSeries row marked StepTab::Overview, from a stored run:
// each on its own plot or on the plot of the row it names, under its label, with the
// stored values; rows not marked are not drawn. A new row is drawn without a change here
// or in the tab.
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/metrics.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/run_tabs/run_data.h"
#include "fp8wb/views/run_tabs/run_tabs.h"

using namespace fp8wb;

class OverviewSeriesTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void everyMarkedRowIsDrawnFromAStoredRun();
  void newRowsAreDrawnWithoutAChangeHere();
  void theLossPlotKeepsItsOrder();
};

namespace {

constexpr int kSteps = 6;

// Row `row`'s value at `step`: finite and distinct from every other row's.
double value_of(size_t row, int step) {
  return 10.0 * static_cast<double>(row + 1) + 0.25 * step;
}

// A stored run whose every step has every kStepSeries row's value.
void load_stored_run(const QString& db, RunData& data) {
  {
    auto store = RunStore::open(db.toStdString());
    RunConfig c;
    c.name = "every series";
    const int64_t id = store->create_run(c.name, fp8wb::RunKind::Train, run_config_json(c), "cpu");
    MetricBatch b;
    b.run_id = id;
    for (int i = 0; i < kSteps; ++i) {
      StepMetrics m;
      m.step = i;
      for (size_t r = 0; r < std::size(kStepSeries); ++r) m.*kStepSeries[r].field = value_of(r, i);
      b.steps.push_back(m);
    }
    b.final = true;
    b.status = RunStatus::Finished;
    store->write(b);
    store->flush();
  }
  auto store = RunStore::open_read_only(db.toStdString());
  data.load(*store, store->runs().front().id);
}

QVector<QPointF> points_of(const QCPGraph* g) {
  QVector<QPointF> out;
  for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it)
    out << QPointF(it->key, it->value);
  return out;
}

// Every row of `table` marked for the Overview drawn by `tab` from `data`, which holds
// value_of() for every kStepSeries row (the table's rows are kStepSeries', in its order).
void check_every_marked_row_drawn(const OverviewTab& tab, const std::vector<StepSeries>& table) {
  const std::vector<ExportablePlot*> plots = tab.plots();
  size_t own = 0, marked = 0;
  for (size_t r = 0; r < table.size(); ++r) {
    const StepSeries& k = table[r];
    QCPGraph* g = tab.seriesGraph(k.name);
    if (k.tab != StepTab::Overview) {
      QVERIFY2(g == nullptr, k.name);
      continue;
    }
    ++marked;
    QVERIFY2(g != nullptr, k.name);
    QVERIFY2(std::find(plots.begin(), plots.end(), g->parentPlot()) != plots.end(), k.name);
    QCOMPARE(g->name(), QString::fromUtf8(k.label));
    if (k.plot == nullptr) {
      // A plot of its own, the plots in the table's order.
      QCOMPARE(static_cast<QCustomPlot*>(plots[own]), g->parentPlot());
      ++own;
    } else {
      QVERIFY2(tab.seriesGraph(k.plot) != nullptr, k.plot);
      QCOMPARE(g->parentPlot(), tab.seriesGraph(k.plot)->parentPlot());
    }
    QVector<QPointF> want;
    for (int i = 0; i < kSteps; ++i) want << QPointF(i, value_of(r, i));
    QCOMPARE(points_of(g), want);
  }
  QVERIFY(marked >= 6);             // the losses, the gap, tokens/s at least
  QCOMPARE(plots.size(), own + 1);  // and the peak-memory bars
}

}  // namespace

void OverviewSeriesTest::everyMarkedRowIsDrawnFromAStoredRun() {
  QTemporaryDir dir;
  RunData data;
  load_stored_run(dir.filePath(QStringLiteral("runs.db")), data);
  QCOMPARE(static_cast<int>(data.steps().size()), kSteps);
  OverviewTab tab(&data);
  tab.refresh(true);
  check_every_marked_row_drawn(tab, {std::begin(kStepSeries), std::end(kStepSeries)});
}

// Rows marked in a table (as a newcomer marks a new one): each drawn, on a plot of its own
// (its axis the label and unit) or on the plot it names, with a legend there.
void OverviewSeriesTest::newRowsAreDrawnWithoutAChangeHere() {
  std::vector<StepSeries> table(std::begin(kStepSeries), std::end(kStepSeries));
  for (StepSeries& k : table) {
    const std::string_view name = k.name;
    if (name == "grad_norm" || name == "step_ms" || name == "lr") k.tab = StepTab::Overview;
    if (name == "lr") k.plot = "grad_norm";
  }
  QTemporaryDir dir;
  RunData data;
  load_stored_run(dir.filePath(QStringLiteral("runs.db")), data);
  OverviewTab tab(&data, nullptr, table);
  tab.refresh(true);
  check_every_marked_row_drawn(tab, table);
  if (QTest::currentTestFailed()) return;
  QCustomPlot* grad = tab.seriesGraph("grad_norm")->parentPlot();
  QCOMPARE(grad->yAxis->label(), QStringLiteral("gradient norm"));
  QVERIFY(grad->legend->visible());  // grad_norm and lr share it
  QCOMPARE(tab.seriesGraph("step_ms")->parentPlot()->yAxis->label(),
           QStringLiteral("step time (ms)"));
  QCOMPARE(tab.plots().size(), size_t{6});  // loss, gap, grad_norm, tokens/s, step_ms, memory
}

// The loss plot's curves in their stacking and legend order (the reference underneath),
// the gap's and the speed's axes as before.
void OverviewSeriesTest::theLossPlotKeepsItsOrder() {
  RunData data;
  OverviewTab tab(&data);
  ExportablePlot* loss = tab.plots()[0];
  QStringList names;
  for (int g = 0; g < loss->graphCount(); ++g) names << loss->graph(g)->name();
  QCOMPARE(names,
           QStringList({QStringLiteral("reference loss"), QStringLiteral("FP8 loss"),
                        QStringLiteral("non-finite loss"), QStringLiteral("held-out loss (FP8)"),
                        QStringLiteral("held-out loss (reference)")}));
  QCOMPARE(loss->graph(0)->pen().style(), Qt::DashLine);
  QVERIFY(loss->legend->visible());
  QCOMPARE(loss->yAxis->label(), QStringLiteral("loss"));
  QCOMPARE(tab.plots()[1]->yAxis->label(), QStringLiteral("FP8 loss -\nreference loss"));
  QCOMPARE(tab.plots()[2]->yAxis->label(), QStringLiteral("tokens/s (one model's step)"));
  QVERIFY(!tab.plots()[1]->legend->visible());
  QCOMPARE(tab.plots().size(), size_t{4});
}

QTEST_MAIN(OverviewSeriesTest)
#include "overview_series_test.moc"
