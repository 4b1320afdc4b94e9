// The Scaling tab on a data-parallel run: every rank's amax and scale of the selected
// tensor side by side, a curve a rank, equal to what the run store holds for each rank
// (read back by RunStore::rank_scales()); the curves grow as the run's new rows arrive
// through read_new() (as a followed run's do), follow the tree's selection, and are not
// shown for a run of one rank.
#include <QCheckBox>
#include <QTemporaryDir>
#include <QTreeWidget>
#include <QtTest>
#include <string>

#include "fp8wb/core/store/run_store.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/run_tabs/run_data.h"
#include "fp8wb/views/run_tabs/run_tabs.h"

using namespace fp8wb;

namespace {

const char* kLayer = "blocks.0.fc1";

// A sampled step of a run of `ranks` ranks: rank 0's statistics and every rank's amax
// and scale of the layer's input and weight (each value its own).
MetricBatch step(int64_t run, int64_t s, int ranks) {
  MetricBatch b;
  b.run_id = run;
  StepMetrics m;
  m.step = s;
  m.loss = 3.0 - 0.01 * static_cast<double>(s);
  b.steps.push_back(m);
  for (Role role : {Role::Input, Role::Weight}) {
    const float base = role == Role::Weight ? 0.5f : 2.0f;
    float largest = 0;
    for (int r = 0; r < ranks; ++r) {
      RankScale k;
      k.step = s;
      k.layer = kLayer;
      k.role = role;
      k.rank = r;
      k.amax = base * static_cast<float>(1 + s) * static_cast<float>(r + 1);
      largest = std::max(largest, k.amax);
      b.ranks.push_back(k);
    }
    for (RankScale& k : b.ranks) {
      if (k.role == role) k.scale = 448.0f / largest / static_cast<float>(k.rank + 1);
    }
    TensorMetrics t;
    t.step = s;
    t.layer = kLayer;
    t.role = role;
    t.amax = base * static_cast<float>(1 + s);
    t.scale = 448.0f / largest;
    t.raw.numel = 64;
    b.tensors.push_back(t);
  }
  return b;
}

// The tab's curve of `rank` (graph `g`) against the store's rows of that rank and role
// after step 0 ("Include step 0" unticked), or of every step.
void compare(QCPGraph* g, const std::vector<RankScale>& stored, int rank, bool amax,
             bool with_step0 = false) {
  std::vector<std::pair<double, double>> want;
  for (const RankScale& k : stored) {
    if (k.rank == rank && (with_step0 || k.step > 0))
      want.emplace_back(static_cast<double>(k.step), amax ? k.amax : k.scale);
  }
  QCOMPARE(g->dataCount(), static_cast<int>(want.size()));
  for (int i = 0; i < g->dataCount(); ++i) {
    QCOMPARE(g->data()->at(i)->key, want[static_cast<size_t>(i)].first);
    QCOMPARE(g->data()->at(i)->value, want[static_cast<size_t>(i)].second);
  }
}

void select(ScalingTab& tab, const QString& role) {
  auto* tree = tab.findChild<QTreeWidget*>();
  QVERIFY(tree);
  QTreeWidgetItem* item = nullptr;
  for (QTreeWidgetItem* i : tree->findItems(role, Qt::MatchExactly | Qt::MatchRecursive)) {
    if (i->parent() && i->parent()->text(0) == QString::fromLatin1(kLayer)) item = i;
  }
  QVERIFY(item);
  tree->setCurrentItem(item);
  tab.refresh(true);
}

}  // namespace

class ScalingRanksTest : public QObject {
  Q_OBJECT
 private slots:
  void ranksSideBySideGrowLive();
  void oneRankShowsNoRankCurves();
  void theNewestSampleIsDrawn();

 private:
  QTemporaryDir dir_;
};

void ScalingRanksTest::ranksSideBySideGrowLive() {
  QVERIFY(dir_.isValid());
  auto store = RunStore::open(dir_.filePath(QStringLiteral("dp.sqlite")).toStdString());
  const int64_t id = store->create_run("two ranks", fp8wb::RunKind::Train, "{}", "cpu");
  for (int64_t s : {0, 10, 20}) store->write(step(id, s, 2));
  store->flush();

  RunData data;
  RunCursor cursor;
  data.load(*store, id, &cursor);
  ScalingTab tab(&data);
  tab.resize(1200, 900);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  tab.refresh(true);
  select(tab, QStringLiteral("weight"));
  QVERIFY(tab.rankAmaxPlot()->isVisible());
  QVERIFY(tab.rankScalePlot()->isVisible());
  QCOMPARE(tab.plots().size(), size_t{5});  // exported with the others
  for (ExportablePlot* p : {tab.rankAmaxPlot(), tab.rankScalePlot()}) {
    QCOMPARE(p->graphCount(), 2);
    QCOMPARE(p->graph(0)->name(), QStringLiteral("rank 0"));
    QCOMPARE(p->graph(1)->name(), QStringLiteral("rank 1"));
  }
  auto stored = store->rank_scales(id, kLayer, "weight");
  QCOMPARE(stored.size(), size_t{6});
  for (int r = 0; r < 2; ++r) {
    compare(tab.rankAmaxPlot()->graph(r), stored, r, true);
    compare(tab.rankScalePlot()->graph(r), stored, r, false);
  }
  // The ranks differ: rank 1's amax is twice rank 0's at each step.
  QCOMPARE(tab.rankAmaxPlot()->graph(1)->data()->at(1)->value,
           2 * tab.rankAmaxPlot()->graph(0)->data()->at(1)->value);

  // The run goes on: its new rows arrive as a follower reads them, and the curves grow.
  for (int64_t s : {30, 40}) store->write(step(id, s, 2));
  store->flush();
  MetricBatch more = store->read_new(id, cursor);
  QCOMPARE(more.ranks.size(), size_t{8});
  data.append(std::move(more));
  tab.refresh();
  stored = store->rank_scales(id, kLayer, "weight");
  QCOMPARE(stored.size(), size_t{10});
  for (int r = 0; r < 2; ++r) {
    compare(tab.rankAmaxPlot()->graph(r), stored, r, true);
    compare(tab.rankScalePlot()->graph(r), stored, r, false);
  }
  // Another role: its own rows.
  select(tab, QStringLiteral("input"));
  stored = store->rank_scales(id, kLayer, "input");
  for (int r = 0; r < 2; ++r) compare(tab.rankAmaxPlot()->graph(r), stored, r, true);
  // "Include step 0": step 0 too.
  auto* box = tab.findChild<QCheckBox*>(QStringLiteral("include-step-0"));
  QVERIFY(box);
  box->setChecked(true);
  for (int r = 0; r < 2; ++r) {
    compare(tab.rankAmaxPlot()->graph(r), stored, r, true, true);
    compare(tab.rankScalePlot()->graph(r), stored, r, false, true);
  }
}

void ScalingRanksTest::oneRankShowsNoRankCurves() {
  auto store = RunStore::open(dir_.filePath(QStringLiteral("one.sqlite")).toStdString());
  const int64_t id = store->create_run("one rank", fp8wb::RunKind::Train, "{}", "cpu");
  for (int64_t s : {0, 10}) store->write(step(id, s, 1));
  store->flush();
  RunData data;
  data.load(*store, id);
  QCOMPARE(data.ranks().size(), size_t{4});
  ScalingTab tab(&data);
  tab.resize(1200, 900);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  tab.refresh(true);
  select(tab, QStringLiteral("weight"));
  QVERIFY(!tab.rankAmaxPlot()->isVisible());
  QVERIFY(!tab.rankScalePlot()->isVisible());
  QCOMPARE(tab.plots().size(), size_t{3});
}

// The orange steps of "amax the scale maps to max" (step-left: a sample's value holds
// until the next sample) reach past the newest sample by one sampling interval, so that a
// newest step whose amax is above what its scale maps to max, which the caption calls
// Saturating, shows as the blue amax over the orange step; and, as the run goes on, that
// extension moves to the new newest sample (no stale point left behind).
void ScalingRanksTest::theNewestSampleIsDrawn() {
  auto store = RunStore::open(dir_.filePath(QStringLiteral("newest.sqlite")).toStdString());
  const int64_t id = store->create_run("saturating", fp8wb::RunKind::Train, "{}", "cpu");
  // Each step's scale maps half of its amax to 448: every step saturates.
  auto saturating = [&](int64_t s) {
    MetricBatch b = step(id, s, 1);
    for (TensorMetrics& t : b.tensors) t.scale = 448.0f / (0.5f * t.amax);
    return b;
  };
  for (int64_t s : {0, 10, 20}) store->write(saturating(s));
  store->flush();
  RunData data;
  RunCursor cursor;
  data.load(*store, id, &cursor);
  ScalingTab tab(&data);
  tab.resize(1200, 900);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  tab.refresh(true);
  select(tab, QStringLiteral("weight"));
  QVERIFY2(tab.captionText().contains(QLatin1String("Saturating")), qPrintable(tab.captionText()));
  QCPGraph* amax = tab.plots().front()->graph(0);
  QCPGraph* mapped = tab.plots().front()->graph(1);
  QCOMPARE(mapped->lineStyle(), QCPGraph::lsStepLeft);
  // The newest sample (step 20, without step 0): blue amax a, orange a / 2 from step 20 to
  // step 30, one interval on.
  auto check = [&](double newest, double interval) {
    const TensorMetrics& last = data.tensor(kLayer, Role::Weight)->points.back();
    QCOMPARE(static_cast<double>(last.step), newest);
    const double want = 448.0 / static_cast<double>(last.scale);
    QCOMPARE(amax->data()->at(amax->dataCount() - 1)->key, newest);
    QCOMPARE(amax->data()->at(amax->dataCount() - 1)->value, static_cast<double>(last.amax));
    const int n = mapped->dataCount();
    QVERIFY(n >= 2);
    QCOMPARE(mapped->data()->at(n - 2)->key, newest);
    QCOMPARE(mapped->data()->at(n - 2)->value, want);
    QCOMPARE(mapped->data()->at(n - 1)->key, newest + interval);
    QCOMPARE(mapped->data()->at(n - 1)->value, want);
    QVERIFY(want < static_cast<double>(last.amax));  // drawn below the blue amax
    // Every other point is a sample's, once.
    for (int i = 1; i < n; ++i)
      QVERIFY(mapped->data()->at(i)->key > mapped->data()->at(i - 1)->key);
    QCOMPARE(n, amax->dataCount() + 1);
  };
  check(20, 10);
  // The run goes on: the step reaches past the new newest sample.
  for (int64_t s : {30, 40}) store->write(saturating(s));
  store->flush();
  data.append(store->read_new(id, cursor));
  tab.refresh();
  check(40, 10);
}

QTEST_MAIN(ScalingRanksTest)
#include "scaling_ranks_test.moc"
