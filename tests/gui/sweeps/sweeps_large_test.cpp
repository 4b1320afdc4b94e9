// The Sweeps tab on a sweep of long axes (window 1..400 x margin -64..64, as
// `fp8wb sweep --grid window=1..400 --grid margin=-64..64` makes): the line describing it
// wraps within the window, which keeps its width and is no wider once a small sweep is
// chosen; the heatmap's tick labels do not overlap; a row's overlaid loss curves are
// capped, the title saying which are shown; choosing it takes the old heatmap down at once
// and the window keeps answering while it loads.
#include <QComboBox>
#include <QElapsedTimer>
#include <QLabel>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTimer>
#include <QtTest>
#include <cmath>
#include <memory>

#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/sweep/sweep.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/sweeps/sweeps_tab.h"
#include "main_window.h"

using namespace fp8wb;

namespace {

// A run of `steps` falling losses in the sweep.
void add_run(RunStore& store, int64_t sweep, const SweepTrial& t, double base) {
  const int64_t id = store.create_run(t.config.name, fp8wb::RunKind::SweepTrial,
                                      run_config_json(t.config), "cpu", sweep);
  MetricBatch b;
  b.run_id = id;
  for (int64_t s = 0; s < 20; ++s) {
    StepMetrics m;
    m.step = s;
    m.loss = base + std::exp(-static_cast<double>(s) / 5.0);
    b.steps.push_back(m);
  }
  b.final = true;
  b.status = RunStatus::Finished;
  store.write(std::move(b));
}

// A sweep of the grid `axes`; the trials for which `ran` holds have finished runs.
int64_t make_sweep(RunStore& store, const char* name, const std::vector<std::string>& axes,
                   const std::function<bool(const SweepTrial&)>& ran) {
  SweepSpec spec;
  spec.name = name;
  spec.base.model = ModelKind::Mlp;
  spec.base.steps = 20;
  for (const std::string& a : axes) spec.axes.push_back(parse_grid(a));
  const int64_t sweep = store.create_sweep(spec.name, sweep_json(spec));
  int k = 0;
  for (const SweepTrial& t : expand_sweep(spec))
    if (ran(t)) add_run(store, sweep, t, 1.0 + 0.001 * k++);
  store.set_sweep_status(sweep, fp8wb::SweepStatus::Stopped);
  store.flush();
  return sweep;
}

// The labels of an axis's ticks that are drawn, in pixels along the axis: no two overlap.
QString labels_overlap(QCPAxis* axis) {
  const QVector<double> ticks = axis->tickVector();
  const QVector<QString> labels = axis->tickVectorLabels();
  const QFontMetrics fm(axis->tickLabelFont());
  const bool across = axis->orientation() == Qt::Horizontal;
  double end = -1e9;
  for (int i = 0; i < ticks.size(); ++i) {
    if (labels[i].isEmpty()) continue;
    const double at = axis->coordToPixel(ticks[i]);
    const double half = (across ? fm.horizontalAdvance(labels[i]) : fm.height()) / 2.0;
    const double lo = std::min(at - half, at + half), hi = std::max(at - half, at + half);
    // Pixels run up the y axis: sorted by pixel either way.
    const double start = across ? lo : -hi;
    if (start < end)
      return QStringLiteral("label %1 at %2 px overlaps the one before").arg(labels[i]).arg(at);
    end = across ? hi : -lo;
  }
  return {};
}

// "key=from,from+1,...,to".
std::string range_axis(const char* key, int from, int to) {
  std::string s = std::string(key) + "=";
  for (int v = from; v <= to; ++v) s += std::to_string(v) + (v < to ? "," : "");
  return s;
}

}  // namespace

class SweepsLargeTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase();
  void init();
  void cleanup();
  void choosingTakesTheOldDown();
  void longAxesFitTheWindow();

 private:
  QTemporaryDir dir_;
  int64_t small_ = 0, large_ = 0;
  std::unique_ptr<MainWindow> window_;
};

void SweepsLargeTest::initTestCase() {
  QVERIFY(dir_.isValid());
  qputenv("XDG_DATA_HOME", dir_.path().toUtf8());
  qputenv("XDG_CONFIG_HOME", dir_.path().toUtf8());
}

void SweepsLargeTest::init() {
  const QString db = dir_.filePath(QStringLiteral("long.sqlite"));
  if (small_ == 0) {
    auto store = RunStore::open(db.toStdString());
    small_ = make_sweep(*store, "small", {"margin=0,1", "window=1,16"},
                        [](const SweepTrial&) { return true; });
    // The first row (margin=-64) and the first column (window=1) ran.
    large_ = make_sweep(
        *store, "long", {range_axis("window", 1, 400), range_axis("margin", -64, 64)},
        [](const SweepTrial& t) { return t.config.margin == -64 || t.config.window == 1; });
  }
  window_ = std::make_unique<MainWindow>(false);
  window_->engine()->setDatabasePath(db);
  window_->resize(1400, 900);
  window_->show();
  QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
  QVERIFY(window_->selectTab(QStringLiteral("Sweeps")));
  SweepsTab* tab = window_->sweepsTab();
  QTRY_VERIFY_WITH_TIMEOUT(tab->storedSweeps().size() == 2, 30000);
  // The newest, shown by itself.
  QTRY_VERIFY_WITH_TIMEOUT(tab->shownSweep() != 0 && !tab->isReading(), 60000);
}

void SweepsLargeTest::cleanup() {
  window_.reset();
}

void SweepsLargeTest::choosingTakesTheOldDown() {
  SweepsTab* tab = window_->sweepsTab();
  {
    QSignalSpy shown(tab, &SweepsTab::sweepShown);
    tab->showSweep(small_);
    QVERIFY(shown.wait(30000));
  }
  QCoreApplication::processEvents();
  auto* map = qobject_cast<QCPColorMap*>(tab->plots()[0]->plottable(0));
  QVERIFY(map);
  QCOMPARE(map->data()->keySize(), 2);
  const int64_t large = large_;

  // Chosen: the small sweep's heatmap is gone at once, not shown under the new name.
  QSignalSpy shown(tab, &SweepsTab::sweepShown);
  tab->showSweep(large);
  QCOMPARE(map->data()->keySize(), 0);
  QCOMPARE(tab->shownSweep(), int64_t{0});
  // The window keeps answering while it loads: no gap between timer ticks over a second.
  QElapsedTimer clock;
  clock.start();
  qint64 last = 0, longest = 0;
  QTimer tick;
  QObject::connect(&tick, &QTimer::timeout, [&] {
    longest = std::max(longest, clock.elapsed() - last);
    last = clock.elapsed();
  });
  tick.start(20);
  QVERIFY(shown.wait(60000));
  QTest::qWait(200);
  tick.stop();
  QVERIFY2(longest < 1000, qPrintable(QStringLiteral("the window froze for %1 ms").arg(longest)));
}

void SweepsLargeTest::longAxesFitTheWindow() {
  MainWindow& w = *window_;
  SweepsTab* tab = w.sweepsTab();
  const int64_t small = small_;
  {
    QSignalSpy shown(tab, &SweepsTab::sweepShown);
    tab->showSweep(large_);
    QVERIFY(shown.wait(60000));
  }
  QCoreApplication::processEvents();
  auto* map = qobject_cast<QCPColorMap*>(tab->plots()[0]->plottable(0));
  QVERIFY(map);
  QCOMPARE(map->data()->keySize(), 129);  // margin across, window up
  QCOMPARE(map->data()->valueSize(), 400);
  tab->setAxes(0, 1);  // window across
  QCOMPARE(map->data()->keySize(), 400);

  // The window keeps its width; the line describing the sweep wraps within it.
  QCOMPARE(w.width(), 1400);
  QVERIFY2(w.minimumSizeHint().width() <= 1400,
           qPrintable(QString::number(w.minimumSizeHint().width())));
  auto* spec = tab->findChild<QLabel*>(QStringLiteral("shownSweepSpec"));
  QVERIFY(spec);
  QVERIFY(spec->text().startsWith(QStringLiteral("Shown: grid window=")));
  QVERIFY2(spec->geometry().right() < tab->width(), qPrintable(spec->text().left(200)));
  QVERIFY(spec->toolTip().contains(QStringLiteral("window=1, 2, 3, 4, 5, 6, 7, 8")));  // whole

  // Tick labels: a readable subset, none overlapping.
  tab->plots()[0]->replot(QCustomPlot::rpImmediateRefresh);
  QCPAxis* x = tab->plots()[0]->xAxis;
  QCPAxis* y = tab->plots()[0]->yAxis;
  QVERIFY2(labels_overlap(x).isEmpty(), qPrintable(labels_overlap(x)));
  QVERIFY2(labels_overlap(y).isEmpty(), qPrintable(labels_overlap(y)));
  QVERIFY(x->tickVector().size() >= 5);
  QVERIFY(y->tickVector().size() >= 5);

  // A column of 129 curves (margin up, window=1 across): a few of them, said so.
  QSignalSpy curves(tab, &SweepsTab::curvesShown);
  tab->overlayLine(0, 0, true);
  QVERIFY(curves.wait(60000));
  QCustomPlot* plot = tab->plots()[1];
  QVERIFY2(plot->graphCount() >= 2 && plot->graphCount() <= 6,
           qPrintable(QString::number(plot->graphCount())));
  QVERIFY2(tab->overlayTitle().contains(QStringLiteral("of 129")), qPrintable(tab->overlayTitle()));
  QVERIFY2(
      plot->axisRect()->rect().height() > plot->height() * 2 / 5,
      qPrintable(
          QStringLiteral("%1 of %2").arg(plot->axisRect()->rect().height()).arg(plot->height())));
  // Each entry of the legend has room for its name.
  plot->replot(QCustomPlot::rpImmediateRefresh);
  for (int i = 0; i < plot->legend->itemCount(); ++i) {
    auto* item = qobject_cast<QCPPlottableLegendItem*>(plot->legend->item(i));
    QVERIFY(item);
    const int need = QFontMetrics(item->font()).horizontalAdvance(item->plottable()->name());
    QVERIFY2(item->rect().width() >= need, qPrintable(item->plottable()->name()));
  }

  // A small sweep chosen after: the window is no wider.
  QSignalSpy again(tab, &SweepsTab::sweepShown);
  tab->showSweep(small);
  QVERIFY(again.wait(30000));
  QCoreApplication::processEvents();
  QCOMPARE(w.width(), 1400);
}

QTEST_MAIN(SweepsLargeTest)
#include "sweeps_large_test.moc"
