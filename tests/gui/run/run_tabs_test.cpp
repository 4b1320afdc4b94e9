// The run side of the GUI, offscreen: a short CPU run started from the run panel fills
// the tabs and lands in the database; pause and stop; errors show and the GUI stays
// usable; the runs list model; opening a stored run fills the same tabs.
#include <QAbstractItemModelTester>
#include <QLineEdit>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QToolButton>
#include <QtTest>
#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "fp8wb/core/store/run_store.h"
#include "fp8wb/kernels/tensor_stats.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/run_panel/run_panel.h"
#include "fp8wb/views/run_panel/run_presets.h"
#include "fp8wb/views/run_tabs/run_data.h"
#include "fp8wb/views/run_tabs/run_tabs.h"
#include "fp8wb/views/runs/runs_tab.h"
#include "main_window.h"
#include "screenshot.h"

using namespace fp8wb;

class RunTabsTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase();
  void presetFileParsesAndApplies();
  void presetsAndValidation();
  void shortRunFillsTheTabsAndTheStore();
  void pauseAndStop();
  void errorsShowAndTheGuiStaysUsable();
  void runListModelAndOpeningARun();
  void anotherRunOpensWhileOneTrains();
  void liveCurvesAppendAndResetOnANewRun();
  void heldOutLossBesideTheTrainingLoss();

 private:
  QString db(const QString& name) const { return dir_.filePath(name); }
  QTemporaryDir dir_;
};

namespace {

// A step of a run: its scalars and two tensors' statistics.
MetricBatch live_batch(int64_t step) {
  MetricBatch b;
  StepMetrics m;
  m.step = step;
  m.loss = step == 3 ? NAN : 4.0 - 0.1 * static_cast<double>(step);
  m.ref_loss = m.loss_gap = NAN;
  m.tokens_per_s = 100;
  b.steps.push_back(m);
  for (const char* layer : {"fc1", "fc2"}) {
    TensorMetrics t;
    t.step = step;
    t.layer = layer;
    t.role = Role::Input;
    t.amax = 1.0f + static_cast<float>(step);
    t.scale = 448.0f / t.amax;
    t.raw.numel = 100;
    t.raw.underflow = static_cast<uint64_t>(step);
    t.raw.hist[40] = 100;
    b.tensors.push_back(t);
  }
  return b;
}

// A graph's points.
QVector<QPointF> points_of(const QCPGraph* g) {
  QVector<QPointF> out;
  for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it)
    out << QPointF(it->key, it->value);
  return out;
}

// Waits (events flowing) for the engine's finished signal.
bool wait_finished(EngineController* e, int ms = 120000) {
  if (!e->isRunning()) return true;
  QSignalSpy spy(e, &EngineController::finished);
  return spy.wait(ms);
}

}  // namespace

void RunTabsTest::initTestCase() {
  QVERIFY(dir_.isValid());
  // Never the user's own database.
  qputenv("XDG_DATA_HOME", dir_.path().toUtf8());
}

// resources/presets/run_presets.json: every preset names only known config fields, each
// value applies, and the config it makes is valid.
void RunTabsTest::presetFileParsesAndApplies() {
  const std::vector<RunPreset>* presets = nullptr;
  try {
    presets = &run_presets();
  } catch (const std::exception& e) {
    QFAIL(e.what());
  }
  QVERIFY(!presets->empty());
  const std::vector<std::string>& keys = run_config_keys();
  QStringList names;
  for (const RunPreset& p : *presets) {
    names << p.name;
    QVERIFY2(!p.overrides.isEmpty(), qPrintable(p.name));
    RunConfig c;
    for (const QString& kv : p.overrides) {
      const std::string key = kv.section(QLatin1Char('='), 0, 0).toStdString();
      QVERIFY2(std::find(keys.begin(), keys.end(), key) != keys.end(),
               qPrintable(p.name + QStringLiteral(": unknown field in ") + kv));
      try {
        apply_override(c, kv.toStdString());
      } catch (const std::exception& e) {
        QFAIL(qPrintable(p.name + QStringLiteral(": ") + QString::fromStdString(e.what())));
      }
    }
    try {
      validate_run_config(c);
    } catch (const std::exception& e) {
      QFAIL(qPrintable(p.name + QStringLiteral(": ") + QString::fromStdString(e.what())));
    }
    // A preset named "FP8 vs BF16" compares FP8 with a bf16 reference, not an fp32 one.
    if (p.name.contains(QLatin1String("vs BF16"))) {
      QVERIFY2(c.fp8 && c.reference && c.dtype == ActivationDtype::Bf16, qPrintable(p.name));
    }
  }
  QCOMPARE(RunPanel::presetNames(), names);
}

void RunTabsTest::presetsAndValidation() {
  MainWindow w(false);
  RunPanel* p = w.runPanel();
  QVERIFY(RunPanel::presetNames().size() >= 4);
  for (const QString& n : RunPanel::presetNames()) {
    QVERIFY2(p->applyPreset(n), qPrintable(n));
    QVERIFY2(p->validationMessage().isEmpty(), qPrintable(p->validationMessage()));
  }
  QVERIFY(!p->applyPreset(QStringLiteral("no such preset")));
  QVERIFY(p->applyPreset(QStringLiteral("Delayed scaling: window 1024")));
  QCOMPARE(p->config().window, 1024);
  // An invalid combination is reported inline, naming the field.
  QVERIFY(p->applyPreset(QStringLiteral("Tiny GPT: FP8 vs BF16")));
  RunConfig c = p->config();
  QVERIFY(c.scaling == ScalingMode::Delayed);
  // The fields outside the main form, with their messages inline.
  QCOMPARE(p->setAdvanced(QStringLiteral("batch"), QStringLiteral("32")), QString());
  QCOMPARE(p->config().batch, 32);
  QVERIFY(p->setAdvanced(QStringLiteral("heads"), QStringLiteral("5"))
              .contains(QStringLiteral("heads")));
  QCOMPARE(p->config().heads, 4);  // the bad value is not taken
  QVERIFY(p->setAdvanced(QStringLiteral("dtype"), QStringLiteral("fp16"))
              .contains(QStringLiteral("dtype")));
  // A box left holding a refused value keeps a run from starting with a value other than
  // the one shown.
  auto* heads = p->findChild<QLineEdit*>(QStringLiteral("heads"));
  QVERIFY(heads);
  heads->setText(QStringLiteral("nan"));
  QVERIFY(p->start().contains(QStringLiteral("heads")));
  QVERIFY(p->validationMessage().contains(QStringLiteral("heads")));
  QVERIFY(!w.engine()->isRunning());
  GuiOptions o;
  o.preset = QStringLiteral("nope");
  QVERIFY(run_preset(w, o).contains(QStringLiteral("Tiny GPT")));
  // Every preset trains (a few steps each).
  w.engine()->setDatabasePath(db(QStringLiteral("presets.sqlite")));
  for (const QString& n : RunPanel::presetNames()) {
    o.preset = n;
    o.steps = 3;
    QCOMPARE(run_preset(w, o), QString());
    QVERIFY2(w.engine()->data().status() == RunStatus::Finished, qPrintable(n));
  }
}

// A llama trained from the run panel on a token file: its held-out losses (FP8 and
// reference, every eval_interval steps and at the last) plotted beside the training loss,
// named in the legend; a run without them names none.
void RunTabsTest::heldOutLossBesideTheTrainingLoss() {
  const std::string tokens = db(QStringLiteral("tokens.bin")).toStdString();
  {
    std::ofstream f(tokens, std::ios::binary);  // nanoGPT's raw uint16 tokens, 0..49
    for (int i = 0; i < 400; ++i) {
      const uint16_t t = static_cast<uint16_t>((i * 7 + i / 3) % 50);
      f.write(reinterpret_cast<const char*>(&t), 2);
    }
  }
  MainWindow w(false);
  w.engine()->setDatabasePath(db(QStringLiteral("held-out.sqlite")));
  w.show();
  RunPanel* p = w.runPanel();
  QCOMPARE(p->applyOverrides({QStringLiteral("model=llama"), QStringLiteral("context=16"),
                              QStringLiteral("batch=2"), QStringLiteral("eval_interval=2"),
                              QStringLiteral("data=") + QString::fromStdString(tokens)}),
           QString());
  p->setSteps(6);
  QCOMPARE(p->start(), QString());
  QVERIFY(wait_finished(w.engine()));
  QCOMPARE(w.engine()->data().status(), RunStatus::Finished);
  w.selectTab(QStringLiteral("Overview"));
  w.refreshRunTabs(true);
  ExportablePlot* loss = w.overviewTab()->plots()[0];
  QCOMPARE(loss->graph(1)->dataCount(), 6);  // the training loss, every step
  QCOMPARE(loss->graph(3)->dataCount(), 4);  // held-out (FP8): steps 0, 2, 4 and the last
  QCOMPARE(loss->graph(4)->dataCount(), 4);  // held-out (reference)
  QVERIFY(loss->legend->hasItemWithPlottable(loss->graph(3)));
  QVERIFY(loss->legend->hasItemWithPlottable(loss->graph(4)));
  // The bundled corpus: no held-out loss, none in the legend.
  QVERIFY(p->applyPreset(QStringLiteral("Tiny GPT: FP8 vs BF16")));
  p->setSteps(2);
  QCOMPARE(p->start(), QString());
  QVERIFY(wait_finished(w.engine()));
  w.refreshRunTabs(true);
  QCOMPARE(loss->graph(3)->dataCount(), 0);
  QVERIFY(!loss->legend->hasItemWithPlottable(loss->graph(3)));
}

void RunTabsTest::shortRunFillsTheTabsAndTheStore() {
  MainWindow w(false);
  w.engine()->setDatabasePath(db(QStringLiteral("short.sqlite")));
  w.show();
  QVERIFY(w.runPanel()->applyPreset(QStringLiteral("Outliers: tensorwise")));
  w.runPanel()->setSteps(30);
  QSignalSpy progress(w.engine(), &EngineController::progress);
  QCOMPARE(w.runPanel()->start(), QString());
  QVERIFY(wait_finished(w.engine()));
  QVERIFY(progress.count() > 0);
  QCOMPARE(w.engine()->data().status(), RunStatus::Finished);
  QCOMPARE(w.engine()->data().steps().size(), size_t{30});
  // What the run said of itself is a notice (its start); its layers' order, for the tabs,
  // is none.
  bool started = false;
  for (const QString& n : w.notices()) {
    QVERIFY2(!n.contains(QStringLiteral("layers.0, layers.1")), qPrintable(n));
    started = started || n.contains(QStringLiteral("FP8 linear layers"));
  }
  QVERIFY(started);
  // The Overview tab drew every step of both curves.
  w.selectTab(QStringLiteral("Overview"));
  w.refreshRunTabs(true);
  ExportablePlot* loss = w.overviewTab()->plots()[0];
  QCOMPARE(loss->graph(1)->dataCount(), 30);  // FP8 loss
  QCOMPARE(loss->graph(0)->dataCount(), 30);  // reference
  QVERIFY(w.overviewTab()->summaryText().contains(QStringLiteral("finished")));
  // Scaling and Quantization have the layers' statistics (every 10 steps and the last: 0,
  // 10, 20, 29), drawn after step 0 ("Include step 0" unticked); the amax line is every
  // step's (the run records each step's amax): steps 1-29. The scale plot is the samples'.
  QVERIFY(w.scalingTab()->select(QStringLiteral("layers.0"), QStringLiteral("input")));
  w.selectTab(QStringLiteral("Scaling"));
  w.refreshRunTabs(true);
  QCOMPARE(w.scalingTab()->plots()[0]->graph(0)->dataCount(), 29);
  QCOMPARE(w.scalingTab()->plots()[1]->graph(0)->dataCount(), 3);
  // The three plots, one under the other, span the same steps (the scale's samples start
  // at step 10, the amax at step 1); the sampled shares hold from one sample to the next,
  // not lines between samples (triangles where one sample had some and the next none).
  {
    const auto plots = w.scalingTab()->plots();
    const QCPRange steps = plots[0]->xAxis->range();
    QVERIFY2(steps.lower <= 1 && steps.upper >= 29,
             qPrintable(QStringLiteral("%1..%2").arg(steps.lower).arg(steps.upper)));
    for (int p : {1, 2}) {
      QCOMPARE(plots[p]->xAxis->range().lower, steps.lower);
      QCOMPARE(plots[p]->xAxis->range().upper, steps.upper);
    }
    for (int g = 0; g < 2; ++g) QCOMPARE(plots[2]->graph(g)->lineStyle(), QCPGraph::lsStepLeft);
    // Their axes start at the same x, whatever their tick labels' widths.
    for (int round = 0; round < 3; ++round) {
      for (int p : {0, 1, 2}) plots[p]->replot();
      QCoreApplication::processEvents();
    }
    for (int p : {1, 2}) QCOMPARE(plots[p]->axisRect()->left(), plots[0]->axisRect()->left());
  }
  w.selectTab(QStringLiteral("Quantization"));
  w.refreshRunTabs(true);
  // The exponent histogram is the chosen tensor's last sample: every nonzero finite element
  // in one bar. The heatmap has a column per sampled step and a row per layer.
  {
    const TensorSeries& t = w.engine()->data().tensors().front();
    const TensorMetrics& last = t.points.back();
    QCOMPARE(last.step, int64_t{29});
    uint64_t all = 0;
    for (uint64_t n : last.raw.hist) all += n;
    QCOMPARE(all, static_cast<uint64_t>(last.raw.numel));
    QCPPlottableInterface1D* bars = w.quantizationTab()->plots()[1]->plottable(0)->interface1D();
    double shown = 0;
    for (int i = 0; i < bars->dataCount(); ++i) shown += bars->dataMainValue(i);
    QCOMPARE(shown, static_cast<double>(last.raw.numel) -
                        static_cast<double>(last.raw.hist[kHistZeroBin] +
                                            last.raw.hist[kHistNonfiniteBin]));
    // Counts on a log axis (a bin of one element among thousands shows), from below one
    // element to above the largest; every bar whole inside the exponent axis.
    ExportablePlot* hist = w.quantizationTab()->plots()[1];
    QCOMPARE(hist->yAxis->scaleType(), QCPAxis::stLogarithmic);
    double largest = 0;
    for (int i = 0; i < bars->dataCount(); ++i) {
      largest = std::max(largest, bars->dataMainValue(i));
      const double key = bars->dataMainKey(i);
      QVERIFY2(hist->xAxis->range().contains(key - 0.5) && hist->xAxis->range().contains(key + 0.5),
               qPrintable(QString::number(key)));
    }
    QVERIFY(hist->yAxis->range().lower < 1 && hist->yAxis->range().upper >= largest);
    auto* heat = static_cast<QCPColorMap*>(w.quantizationTab()->plots()[0]->plottable(0));
    QCOMPARE(heat->data()->keySize(), 3);
    QCOMPARE(heat->data()->valueSize(), static_cast<int>(w.engine()->data().layers().size()));
  }
  // The run is in the database with the same loss series.
  auto store = RunStore::open_read_only(db(QStringLiteral("short.sqlite")).toStdString());
  const auto runs = store->runs();
  QCOMPARE(runs.size(), size_t{1});
  QCOMPARE(runs[0].status, RunStatus::Finished);
  const auto s = store->series(runs[0].id, "loss");
  QCOMPARE(s.size(), size_t{30});
  QCOMPARE(s[29].value, w.engine()->data().steps()[29].loss);
}

void RunTabsTest::pauseAndStop() {
  MainWindow w(false);
  w.engine()->setDatabasePath(db(QStringLiteral("pause.sqlite")));
  QVERIFY(w.runPanel()->applyPreset(QStringLiteral("Outliers: tensorwise")));
  w.runPanel()->setSteps(1000000);
  QCOMPARE(w.runPanel()->start(), QString());
  QTRY_VERIFY_WITH_TIMEOUT(w.engine()->data().steps().size() >= 3, 60000);
  w.engine()->pause();
  QTRY_VERIFY_WITH_TIMEOUT(
      !w.engine()->data().events().empty() &&
          w.engine()->data().events().back().kind == fp8wb::RunEventKind::Paused,
      30000);
  const size_t at = w.engine()->data().steps().size();
  QTest::qWait(300);
  QCOMPARE(w.engine()->data().steps().size(), at);  // nothing moves while paused
  w.engine()->resume();
  QTRY_VERIFY_WITH_TIMEOUT(w.engine()->data().steps().size() > at, 30000);
  w.engine()->stop();
  QVERIFY(wait_finished(w.engine()));
  QCOMPARE(w.engine()->data().status(), RunStatus::Stopped);
  QVERIFY(!w.engine()->isRunning());
}

void RunTabsTest::errorsShowAndTheGuiStaysUsable() {
  MainWindow w(false);
  w.engine()->setDatabasePath(db(QStringLiteral("errors.sqlite")));
  QVERIFY(w.runPanel()->applyPreset(QStringLiteral("Outliers: tensorwise")));
  RunConfig c = w.runPanel()->config();
  c.device = "cuda:7";  // not here
  QVERIFY(w.engine()->start(c).contains(QStringLiteral("cuda:7")));
  QVERIFY(!w.engine()->isRunning());
  c.window = -3;
  QVERIFY(w.engine()->start(c).contains(QStringLiteral("window")));
  // A database that cannot be opened names the file.
  w.engine()->setDatabasePath(QStringLiteral("/proc/no-such-dir/runs.sqlite"));
  c = w.runPanel()->config();
  c.steps = 5;
  QVERIFY(w.engine()->start(c).contains(QStringLiteral("/proc/no-such-dir")));
  // And the GUI still runs the next good run.
  w.engine()->setDatabasePath(db(QStringLiteral("errors2.sqlite")));
  QCOMPARE(w.engine()->start(c), QString());
  QVERIFY(wait_finished(w.engine()));
  QCOMPARE(w.engine()->data().status(), RunStatus::Finished);
}

void RunTabsTest::runListModelAndOpeningARun() {
  const QString path = db(QStringLiteral("list.sqlite"));
  {
    MainWindow w(false);
    w.engine()->setDatabasePath(path);
    QVERIFY(w.runPanel()->applyPreset(QStringLiteral("Outliers: blockwise 1x128")));
    w.runPanel()->setSteps(12);
    QCOMPARE(w.runPanel()->start(), QString());
    QVERIFY(wait_finished(w.engine()));
    QCOMPARE(w.engine()->data().status(), RunStatus::Finished);
    QVERIFY(w.runPanel()->applyPreset(QStringLiteral("Outliers: tensorwise")));
    w.runPanel()->setSteps(8);
    QCOMPARE(w.runPanel()->start(), QString());
    QVERIFY(wait_finished(w.engine()));
  }
  MainWindow w(false);
  w.engine()->setDatabasePath(path);
  RunsTab* runs = w.runsTab();
  QAbstractItemModelTester tester(runs->model(),
                                  QAbstractItemModelTester::FailureReportingMode::QtTest);
  QSignalSpy reloaded(runs, &RunsTab::reloaded);
  runs->reload();  // read on a pool thread
  QVERIFY(reloaded.wait(30000));
  QVERIFY(runs->statusText().contains(QStringLiteral("2 run")));
  QCOMPARE(runs->model()->rowCount(), 2);
  QCOMPARE(runs->model()
               ->data(runs->model()->index(1, RunListModel::Steps), Qt::DisplayRole)
               .toLongLong(),
           12);  // run 1, below the newer run 2
  // Opening a finished run fills the same tabs as a live one.
  QSignalSpy opened(w.engine(), &EngineController::opened);
  QSignalSpy failed(w.engine(), &EngineController::failed);
  w.engine()->openRun(1);
  QVERIFY(opened.wait(30000));
  QCOMPARE(failed.count(), 0);
  w.selectTab(QStringLiteral("Overview"));
  w.refreshRunTabs(true);
  QCOMPARE(w.overviewTab()->plots()[0]->graph(1)->dataCount(), 12);
  QVERIFY(!w.engine()->data().tensors().empty());
  {
    // The reloaded histogram holds every element of its tensor once.
    const TensorMetrics& p = w.engine()->data().tensors().front().points.front();
    QVERIFY(p.raw.numel > 0);
    uint64_t all = 0;
    for (uint64_t n : p.raw.hist) all += n;
    QCOMPARE(all, static_cast<uint64_t>(p.raw.numel));
  }
  w.engine()->openRun(99);
  QVERIFY(failed.wait(30000));
  QVERIFY(!failed.at(0).at(0).toString().isEmpty());
  // Overlay both runs' loss curves; export one as CSV.
  QSignalSpy curves(runs, &RunsTab::curvesShown);
  runs->overlay({1, 2});
  QVERIFY(curves.wait(30000));
  QCOMPARE(runs->overlayPlot()->graphCount(), 2);
  QCOMPARE(runs->overlayPlot()->graph(1)->dataCount(), 8);
  const QString csv = dir_.filePath(QStringLiteral("run1.csv"));
  QVERIFY(runs->exportCsv(1, csv).contains(QStringLiteral("wrote")));
  QFile f(csv);
  QVERIFY(f.open(QIODevice::ReadOnly));
  QVERIFY(f.readLine().startsWith("step,loss"));
  QVERIFY(
      !runs->exportCsv(1, QStringLiteral("/proc/nope/x.csv")).contains(QStringLiteral("wrote")));
}

// While a run trains, another run opens in the tabs; the training run trains on (its
// progress still in the run panel), a status bar button leads back to it, and its steps
// made meanwhile are there when it is shown again. Opening it from the list does the same.
void RunTabsTest::anotherRunOpensWhileOneTrains() {
  MainWindow w(false);
  w.engine()->setDatabasePath(db(QStringLiteral("while-training.sqlite")));
  QVERIFY(w.runPanel()->applyPreset(QStringLiteral("Outliers: tensorwise")));
  w.runPanel()->setSteps(6);
  QCOMPARE(w.runPanel()->start(), QString());
  QVERIFY(wait_finished(w.engine()));
  const qint64 done = w.engine()->data().runId();
  w.runPanel()->setSteps(1000000);
  QCOMPARE(w.runPanel()->start(), QString());
  const qint64 training = w.engine()->data().runId();
  QVERIFY(training != done);
  QTRY_VERIFY_WITH_TIMEOUT(w.engine()->data().steps().size() >= 3, 60000);
  auto* back = w.findChild<QToolButton*>(QStringLiteral("backToTrainingRun"));
  QVERIFY(back);
  QVERIFY(back->isHidden());
  QSignalSpy opened(w.engine(), &EngineController::opened);
  QSignalSpy failed(w.engine(), &EngineController::failed);
  w.engine()->openRun(done);
  QVERIFY(opened.wait(30000));
  QCOMPARE(failed.count(), 0);
  QCOMPARE(w.engine()->data().runId(), done);
  QCOMPARE(w.engine()->data().steps().size(), size_t{6});
  QVERIFY(w.engine()->isRunning());
  QCOMPARE(w.engine()->trainingRunId(), training);
  QVERIFY(!w.engine()->showsTrainingRun());
  QVERIFY(!back->isHidden());
  // The form stays the training run's.
  QCOMPARE(w.runPanel()->config().steps, int64_t{1000000});
  // It trains on, its progress reported, the shown run untouched.
  QSignalSpy progress(w.engine(), &EngineController::progress);
  QVERIFY(progress.wait(30000));
  const qint64 step_hidden = progress.last().at(0).toLongLong();
  QVERIFY(progress.wait(30000));
  QVERIFY(progress.last().at(0).toLongLong() > step_hidden);
  QCOMPARE(w.engine()->data().steps().size(), size_t{6});
  QVERIFY2(back->text().contains(QStringLiteral("Back to run %1").arg(training)),
           qPrintable(back->text()));
  w.refreshRunTabs(true);
  QCOMPARE(w.overviewTab()->plots()[0]->graph(1)->dataCount(), 6);
  // Back: the training run with the steps it made meanwhile.
  back->click();
  QCOMPARE(w.engine()->data().runId(), training);
  QVERIFY(w.engine()->showsTrainingRun());
  QVERIFY(back->isHidden());
  QVERIFY(static_cast<qint64>(w.engine()->data().steps().size()) >= step_hidden);
  // Opening the training run from the list while another is shown leads back to it too.
  w.engine()->openRun(done);
  QVERIFY(opened.wait(30000));
  QCOMPARE(w.engine()->data().runId(), done);
  w.engine()->openRun(training);
  QCOMPARE(w.engine()->data().runId(), training);
  QVERIFY(w.engine()->showsTrainingRun());
  // Stopped while another run is shown: that run stays in the tabs.
  w.engine()->openRun(done);
  QVERIFY(opened.wait(30000));
  QSignalSpy finished(w.engine(), &EngineController::finished);
  w.engine()->stop();
  QVERIFY(finished.wait(60000));
  QCOMPARE(finished.at(0).at(0).value<RunStatus>(), RunStatus::Stopped);
  QVERIFY(!w.engine()->isRunning());
  QCOMPARE(w.engine()->data().runId(), done);
  QVERIFY(back->isHidden());
  QCOMPARE(failed.count(), 0);
  // The status bar says which run ended: the one trained here, not the one shown.
  QVERIFY2(
      w.runStatusText().contains(QStringLiteral("run %1 (trained here) stopped").arg(training)),
      qPrintable(w.runStatusText()));
}

// A live run's curves grow by its new points, and equal those of tabs that draw the whole
// run at once; another run, or another tensor, is drawn anew.
void RunTabsTest::liveCurvesAppendAndResetOnANewRun() {
  RunData data;
  data.setRun(1, "live", "{}");
  ScalingTab scaling(&data);
  OverviewTab overview(&data);
  data.append(live_batch(0));
  QVERIFY(scaling.select(QStringLiteral("fc1"), QStringLiteral("input")));
  for (int64_t step = 0; step < 6; ++step) {
    if (step > 0) data.append(live_batch(step));
    scaling.refresh(true);
    overview.refresh(true);
    // Step 0 alone, then the steps after it ("Include step 0" unticked).
    const int drawn = step == 0 ? 1 : static_cast<int>(step);
    QCOMPARE(scaling.plots()[0]->graph(0)->dataCount(), drawn);
    QCOMPARE(scaling.plots()[2]->graph(0)->dataCount(), drawn);
  }
  QCOMPARE(overview.plots()[0]->graph(1)->dataCount(), 5);  // one loss is NaN
  QCOMPARE(overview.plots()[0]->graph(2)->dataCount(), 1);  // its marker
  // The same run drawn in one go.
  ScalingTab whole_scaling(&data);
  OverviewTab whole_overview(&data);
  QVERIFY(whole_scaling.select(QStringLiteral("fc1"), QStringLiteral("input")));
  whole_scaling.refresh(true);
  whole_overview.refresh(true);
  for (size_t p = 0; p < scaling.plots().size(); ++p) {
    for (int g = 0; g < scaling.plots()[p]->graphCount(); ++g)
      QCOMPARE(points_of(scaling.plots()[p]->graph(g)),
               points_of(whole_scaling.plots()[p]->graph(g)));
  }
  for (int g = 0; g < 3; ++g)
    QCOMPARE(points_of(overview.plots()[0]->graph(g)),
             points_of(whole_overview.plots()[0]->graph(g)));
  QCOMPARE(points_of(scaling.plots()[2]->graph(0)).back(),
           QPointF(5, 5.0));  // underflow_pct: 5 of 100 nonzero

  // Another tensor: its own points only.
  QVERIFY(scaling.select(QStringLiteral("fc2"), QStringLiteral("input")));
  QCOMPARE(scaling.plots()[0]->graph(0)->dataCount(), 5);  // steps 1 to 5
  // Another run with fewer steps: drawn anew, nothing of the first left.
  data.setRun(2, "next", "{}");
  data.append(live_batch(0));
  data.append(live_batch(1));
  scaling.refresh(true);
  overview.refresh(true);
  QCOMPARE(scaling.plots()[0]->graph(0)->dataCount(), 1);  // step 1
  QCOMPARE(overview.plots()[0]->graph(1)->dataCount(), 2);
  QCOMPARE(overview.plots()[0]->graph(2)->dataCount(), 0);
  // The same number of points again after a reload is still drawn anew.
  data.setRun(3, "again", "{}");
  MetricBatch other = live_batch(0);
  other.steps[0].loss = 9;
  data.append(other);
  data.append(live_batch(1));
  overview.refresh(true);
  QCOMPARE(points_of(overview.plots()[0]->graph(1)).front(), QPointF(0, 9));
}

QTEST_MAIN(RunTabsTest)
#include "run_tabs_test.moc"
