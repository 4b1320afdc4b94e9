// Every plot's CSV holds its data, checked against what the plot was given: the Checkpoint
// tab's log2 histogram (bars: a bin's exponent and count), its recipe x format SQNR chart
// (a bar's format, scaling and SQNR as it is, "inf" for an exact recipe), its block error
// map (a cell a block, one-row grids too), the Quantization tab's layer x step heatmap (a
// cell's layer, step and figure) and the Sweeps tab's heatmap (a cell's axis values and
// final loss). The Checkpoint table exports every row and the columns shown from its
// context menu; File > Export names what the tab shown can export and is greyed where
// there is nothing.
#include <QComboBox>
#include <QFile>
#include <QHeaderView>
#include <QLineEdit>
#include <QMenu>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <map>
#include <memory>

#include "fp8wb/core/checkpoint/safetensors.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/sweep/sweep.h"
#include "fp8wb/views/checkpoint/checkpoint_tab.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/formats/demo_views.h"
#include "fp8wb/views/formats/formats_tab.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/run_tabs/run_data.h"
#include "fp8wb/views/run_tabs/run_tabs.h"
#include "fp8wb/views/sweeps/sweeps_tab.h"
#include "main_window.h"
#include "range_tensors.h"

using namespace fp8wb;
using fp8wb::test::f32_bytes;

namespace {

// RFC 4180 CSV: quoted fields may hold commas, doubled quotes and line breaks.
QList<QStringList> parse_csv(const QString& text) {
  QList<QStringList> rows;
  QStringList row;
  QString field;
  bool quoted = false, any = false;
  for (qsizetype i = 0; i < text.size(); ++i) {
    const QChar c = text[i];
    if (quoted) {
      if (c == QLatin1Char('"') && i + 1 < text.size() && text[i + 1] == QLatin1Char('"')) {
        field += c;
        ++i;
      } else if (c == QLatin1Char('"')) {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == QLatin1Char('"')) {
      quoted = any = true;
    } else if (c == QLatin1Char(',')) {
      row << field;
      field.clear();
      any = true;
    } else if (c == QLatin1Char('\n')) {
      if (any || !field.isEmpty()) row << field;
      rows << row;  // an empty line: an empty row (between tables)
      row.clear();
      field.clear();
      any = false;
    } else {
      field += c;
      any = true;
    }
  }
  if (any || !field.isEmpty()) rows << (row << field);
  return rows;
}

// The plot's CSV as written to a file, read back and parsed.
QList<QStringList> exported(ExportablePlot* plot, const QString& file) {
  const QString err = plot->exportTo(file);
  if (!err.isEmpty()) qWarning("%s", qPrintable(err));
  QFile f(file);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return parse_csv(QString::fromUtf8(f.readAll()));
}

double number(const QString& field) {
  if (field.isEmpty()) return NAN;
  bool ok = false;
  const double v = field.toDouble(&ok);
  if (ok) return v;
  if (field == QLatin1String("inf")) return INFINITY;
  if (field == QLatin1String("-inf")) return -INFINITY;
  return NAN;
}

bool same(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

const TensorAnalysis* analysis_of(CheckpointTab& tab, const QString& name) {
  for (int r = 0; r < tab.model()->rowCount(); ++r) {
    const TensorAnalysis* t = tab.model()->tensorAt(r);
    if (t && QString::fromStdString(t->name) == name) return t;
  }
  return nullptr;
}

}  // namespace

class PlotCsvTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    qputenv("XDG_DATA_HOME", dir_.path().toUtf8());
    qputenv("XDG_CONFIG_HOME", dir_.path().toUtf8());
    // A smooth weight, one with outlier channels, an exact one (every value 1.5: +inf dB
    // for most recipes) and a vector (its block grid one row).
    std::vector<float> w(256 * 128), x(128 * 256), exact(64 * 64, 1.5f), v(512);
    for (size_t i = 0; i < w.size(); ++i) w[i] = 0.02f * std::sin(0.1f * static_cast<float>(i));
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = (i % 256 == 5 ? 3000.0f : 1.0f) * std::cos(0.3f * static_cast<float>(i));
    for (size_t i = 0; i < v.size(); ++i) v[i] = std::exp(0.03f * static_cast<float>(i % 300));
    path_ = dir_.filePath(QStringLiteral("model.safetensors"));
    write_safetensors(path_.toStdString(), {{"a.weight", StDtype::F32, {256, 128}, f32_bytes(w)},
                                            {"b.outliers", StDtype::F32, {128, 256}, f32_bytes(x)},
                                            {"c.exact", StDtype::F32, {64, 64}, f32_bytes(exact)},
                                            {"d.vector", StDtype::F32, {512}, f32_bytes(v)}});
  }
  void theCheckpointHistogramsCsvHoldsItsBins();
  void theSqnrChartsCsvHoldsEveryRecipesSqnr();
  void theBlockMapsCsvHoldsEveryBlock();
  void theCheckpointTableExportsEveryRowFromItsContextMenu();
  void theQuantizationHeatmapsCsvHoldsEveryCell();
  void theQuantizationColourBarsTitleFitsItsPlot();
  void theSweepHeatmapsCsvHoldsEveryCell();
  void theOutlierDemosMapsCsvNamesEachMapAndItsIndices();
  void exportDialogsSuggestANameAfterThePlot();
  void fileExportNamesWhatTheTabCanExport();

 private:
  bool load(CheckpointTab& tab) {
    tab.resize(1400, 900);
    tab.show();
    if (!QTest::qWaitForWindowExposed(&tab)) return false;
    QSignalSpy loaded(&tab, &CheckpointTab::checkpointLoaded);
    tab.openCheckpoint(path_);
    return loaded.wait(60000);
  }
  QString file(const QString& name) const { return dir_.filePath(name); }
  QTemporaryDir dir_;
  QString path_;
};

// Bars: a line a bin, its exponent and its count, as the analysis counted them.
void PlotCsvTest::theCheckpointHistogramsCsvHoldsItsBins() {
  CheckpointTab tab;
  QVERIFY(load(tab));
  for (const QString& name : {QStringLiteral("a.weight"), QStringLiteral("b.outliers")}) {
    tab.selectTensor(name);
    const TensorAnalysis* t = analysis_of(tab, name);
    QVERIFY(t);
    const QList<QStringList> rows = exported(tab.plots()[0], file(QStringLiteral("hist.csv")));
    QVERIFY(!rows.isEmpty());
    QCOMPARE(rows.front(), (QStringList{"series", "label", "value"}));
    std::map<int, double> want;  // the exponents' bins (not the zeros' and non-finite's)
    for (size_t b = 0; b < t->log2_hist.size() && b < size_t{kValueHistExpBins}; ++b) {
      if (t->log2_hist[b] > 0)
        want[static_cast<int>(b) + kValueHistMinExp] = static_cast<double>(t->log2_hist[b]);
    }
    QVERIFY(want.size() > 3);
    QCOMPARE(rows.size(), static_cast<qsizetype>(want.size()) + 1);
    for (qsizetype i = 1; i < rows.size(); ++i) {
      QCOMPARE(rows[i].size(), 3);
      QCOMPARE(rows[i][0], QStringLiteral("log2 histogram"));
      bool ok = false;
      const int exponent = rows[i][1].toInt(&ok);
      QVERIFY2(ok && want.count(exponent) == 1, qPrintable(rows[i].join(',')));
      QCOMPARE(number(rows[i][2]), want[exponent]);
    }
  }
}

// Bars of a chart: a line a recipe, its format, its scaling and its SQNR as analysed, not
// as drawn (an exact recipe's bar ends at a dashed line, its CSV says inf).
void PlotCsvTest::theSqnrChartsCsvHoldsEveryRecipesSqnr() {
  CheckpointTab tab;
  QVERIFY(load(tab));
  bool saw_inf = false;
  for (const QString& name : {QStringLiteral("b.outliers"), QStringLiteral("c.exact")}) {
    tab.selectTensor(name);
    const TensorAnalysis* t = analysis_of(tab, name);
    QVERIFY(t && t->recipes.size() > 4);
    const QList<QStringList> rows = exported(tab.plots()[1], file(QStringLiteral("sqnr.csv")));
    QVERIFY(!rows.isEmpty());
    QCOMPARE(rows.front(), (QStringList{"series", "label", "value"}));
    QCOMPARE(rows.size(), static_cast<qsizetype>(t->recipes.size()) + 1);
    for (const RecipeResult& r : t->recipes) {
      const QString format = QString::fromLatin1(format_info(r.recipe.format).name.data());
      const QString recipe = QString::fromStdString(r.name);
      int found = 0;
      for (qsizetype i = 1; i < rows.size(); ++i) {
        QCOMPARE(rows[i].size(), 3);
        // A recipe's name is its format and its scaling.
        if (rows[i][0] != format || format + QLatin1Char(' ') + rows[i][1] != recipe) continue;
        ++found;
        QVERIFY2(same(number(rows[i][2]), r.sqnr_db),
                 qPrintable(rows[i].join(',') + QStringLiteral(" against ") +
                            QString::number(r.sqnr_db, 'g', 17)));
        saw_inf = saw_inf || rows[i][2] == QLatin1String("inf");
      }
      QVERIFY2(found == 1, qPrintable(recipe));
    }
  }
  QVERIFY(saw_inf);  // the exact tensor's exact recipes
}

// A colour map of blocks: a line a block, by its row and column, its relative error; a
// vector's grid of one row too (drawn as two rows alike, written once).
void PlotCsvTest::theBlockMapsCsvHoldsEveryBlock() {
  CheckpointTab tab;
  QVERIFY(load(tab));
  int one_row = 0;
  for (const QString& name : {QStringLiteral("b.outliers"), QStringLiteral("d.vector")}) {
    tab.selectTensor(name);
    const TensorAnalysis* t = analysis_of(tab, name);
    QVERIFY(t);
    for (const RecipeResult& r : t->recipes) {
      if (r.map_grid.cell_count() == 0) continue;
      tab.selectRecipe(QString::fromStdString(r.name));
      QCOMPARE(tab.selectedRecipe(), QString::fromStdString(r.name));
      const QList<QStringList> rows = exported(tab.plots()[2], file(QStringLiteral("blocks.csv")));
      QVERIFY(!rows.isEmpty());
      QCOMPARE(rows.front(), (QStringList{"map", "row", "column", "value"}));
      QCOMPARE(rows.size(), static_cast<qsizetype>(r.map_grid.cell_count()) + 1);
      one_row += r.map_grid.rows == 1 ? 1 : 0;
      for (qsizetype i = 1; i < rows.size(); ++i) {
        const int row = rows[i][1].toInt(), col = rows[i][2].toInt();
        QCOMPARE(static_cast<int64_t>(row), (i - 1) / r.map_grid.cols);
        QCOMPARE(static_cast<int64_t>(col), (i - 1) % r.map_grid.cols);
        const float e = r.map_rel_error[static_cast<size_t>(row * r.map_grid.cols + col)];
        QVERIFY2(
            same(number(rows[i][3]), static_cast<double>(e)),
            qPrintable(QString::fromStdString(r.name) + QStringLiteral(": ") + rows[i].join(',')));
      }
    }
  }
  QVERIFY(one_row > 0);
}

// The table's context menu: "Export CSV…", greyed before a file is analysed; the CSV holds
// every tensor (those the filter hides too) in the table's order, the columns shown.
void PlotCsvTest::theCheckpointTableExportsEveryRowFromItsContextMenu() {
  CheckpointTab tab;
  auto* table = tab.findChild<QTableView*>(QStringLiteral("checkpointTable"));
  QVERIFY(table);
  QCOMPARE(table->contextMenuPolicy(), Qt::CustomContextMenu);
  QMenu* menu = tab.tableMenu();
  QAction* csv = menu->findChild<QAction*>(QStringLiteral("exportTableCsv"));
  if (!csv) {
    for (QAction* a : menu->actions())
      if (a->objectName() == QLatin1String("exportTableCsv")) csv = a;
  }
  QVERIFY(csv);
  QVERIFY(csv->text().startsWith(QStringLiteral("Export CSV")));
  QVERIFY(!csv->isEnabled());
  QVERIFY(!tab.exportTable(file(QStringLiteral("none.csv"))).isEmpty());
  QVERIFY(load(tab));
  tab.tableMenu();
  QVERIFY(csv->isEnabled());
  tab.findChild<QLineEdit*>(QStringLiteral("checkpointFilter"))->setText(QStringLiteral("weight"));
  QCOMPARE(tab.proxy()->rowCount(), 1);
  table->setColumnHidden(CheckpointModel::Dtype, true);
  QCOMPARE(tab.exportTable(file(QStringLiteral("table.csv"))), QString());
  QFile f(file(QStringLiteral("table.csv")));
  QVERIFY(f.open(QIODevice::ReadOnly));
  const QList<QStringList> rows = parse_csv(QString::fromUtf8(f.readAll()));
  QCOMPARE(rows.size(), 1 + tab.model()->rowCount());
  QCOMPARE(rows.size(), 5);
  QStringList header;
  for (int c = 0; c < CheckpointModel::ColumnCount; ++c) {
    if (c != CheckpointModel::Dtype)
      header << tab.model()
                    ->headerData(c, Qt::Horizontal, Qt::DisplayRole)
                    .toString()
                    .replace(QLatin1Char('\n'), QLatin1Char(' '));
  }
  // Issue #52: then the recommendation's reason and the recommended recipe's SQNR.
  header << QStringLiteral("recommendation reason") << QStringLiteral("recommended SQNR (dB)");
  QCOMPARE(rows.front(), header);
  // Worst first, as the table sorts (without the filter); each cell as the table shows it.
  QSortFilterProxyModel all;
  all.setSourceModel(tab.model());
  all.setSortRole(Qt::UserRole);
  all.sort(CheckpointModel::BestSqnr, Qt::AscendingOrder);
  for (int r = 0; r < all.rowCount(); ++r) {
    QStringList want;
    for (int c = 0; c < CheckpointModel::ColumnCount; ++c) {
      if (c != CheckpointModel::Dtype) want << all.index(r, c).data(Qt::DisplayRole).toString();
    }
    const TensorAnalysis* t = tab.model()->tensorAt(all.mapToSource(all.index(r, 0)).row());
    QVERIFY(t);
    const RecipeResult* rec = t->recommended_result();
    want << (!t->not_quantized.empty()
                 ? QStringLiteral("No SQNR: ") + QString::fromStdString(t->not_quantized)
             : !t->no_recipe.empty()
                 ? QStringLiteral("No recommendation: ") + QString::fromStdString(t->no_recipe)
                 : QString::fromStdString(t->reason))
         << (!rec                       ? QStringLiteral("-")
             : std::isinf(rec->sqnr_db) ? QStringLiteral("inf")
                                        : QString::number(rec->sqnr_db, 'f', 1));
    QVERIFY2(!rows[r + 1][rows[r + 1].size() - 2].isEmpty(), qPrintable(rows[r + 1].join('|')));
    QCOMPARE(rows[r + 1], want);
  }
}

namespace {
// The rectangle the axis' label is drawn in, in the plot's pixels, found by asking the
// axis which of its parts each point is (the label's box is kept as it is drawn), over the
// plot and 400 pixels around it: empty where none is found.
QRect label_rect(QCustomPlot* plot, QCPAxis* axis) {
  QRect r;
  for (int y = -400; y < plot->height() + 400; y += 2)
    for (int x = -400; x < plot->width() + 400; x += 2)
      if (axis->getPartAt(QPointF(x, y)) == QCPAxis::spAxisLabel) r |= QRect(x, y, 1, 1);
  return r;
}
}  // namespace

// Issue #52: with the colour range fixed, the Quantization heatmap's colour bar title
// ("underflow % (of nonzero)" and the range under it) lies within the plot in a default
// window, with a gap before its right edge (it was drawn 2 px from it, its glyphs cut).
void PlotCsvTest::theQuantizationColourBarsTitleFitsItsPlot() {
  const QString path = file(QStringLiteral("bar.sqlite"));
  int64_t id = 0;
  {
    auto store = RunStore::open(path.toStdString());
    id = store->create_run("bar", fp8wb::RunKind::Train, "{}", "cpu");
    for (int64_t s : {0, 10, 20, 30}) {
      MetricBatch b;
      b.run_id = id;
      StepMetrics m;
      m.step = s;
      m.loss = 2.0;
      b.steps.push_back(m);
      for (const char* layer : {"blocks.0.attn.qkv", "blocks.0.attn.proj", "blocks.0.mlp.fc1"}) {
        TensorMetrics t;
        t.step = s;
        t.layer = layer;
        t.role = Role::Input;
        t.amax = 1;
        t.scale = 1;
        t.raw.numel = 1000;
        t.raw.underflow = static_cast<uint64_t>(s + 3);
        t.raw.sq_sum = 10.0;
        t.raw.sq_err = 0.01;
        b.tensors.push_back(t);
      }
      store->write(b);
    }
    store->flush();
  }
  MainWindow w(false);  // its default size
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  w.engine()->setDatabasePath(path);
  QSignalSpy opened(w.engine(), &EngineController::opened);
  w.engine()->openRun(id);
  QVERIFY(opened.wait(30000));
  w.selectTab(QStringLiteral("Quantization"));
  w.refreshRunTabs(true);
  QuantizationTab& tab = *w.quantizationTab();
  auto* range = tab.findChild<QComboBox*>(QStringLiteral("colourRange"));
  QVERIFY(range);
  for (int fixed : {0, 1}) {
    range->setCurrentIndex(fixed);
    w.refreshRunTabs(true);
    ExportablePlot* heat = tab.plots()[0];
    QCPColorScale* scale = nullptr;
    for (int i = 0; i < heat->plotLayout()->elementCount() && !scale; ++i)
      scale = qobject_cast<QCPColorScale*>(heat->plotLayout()->elementAt(i));
    QVERIFY(scale);
    QVERIFY2(scale->axis()->label().startsWith(QStringLiteral("underflow % (of nonzero)")),
             qPrintable(scale->axis()->label()));
    for (int round = 0; round < 3; ++round) {
      heat->replot(QCustomPlot::rpImmediateRefresh);
      QCoreApplication::processEvents();
    }
    const QRect title = label_rect(heat, scale->axis());
    QVERIFY2(!title.isEmpty(), "no colour bar title drawn");
    // Within the plot and the window, with a gap at the right (antialiased glyphs drawn
    // against the edge read as cut off).
    const QRect shown(heat->mapFrom(&w, QPoint(0, 0)), w.size());
    QVERIFY2(
        heat->rect().intersected(shown).adjusted(0, 0, -kColourBarGap / 2, 0).contains(title),
        qPrintable(QStringLiteral("%1: title %2,%3 %4x%5 in a plot of %6x%7, %8 px of it shown")
                       .arg(range->currentText())
                       .arg(title.x())
                       .arg(title.y())
                       .arg(title.width())
                       .arg(title.height())
                       .arg(heat->width())
                       .arg(heat->height())
                       .arg(heat->rect().intersected(shown).width())));
  }
}

// The layer x step heatmap: a line a cell, its layer, its step and its figure as the run
// stored it (an exact SQNR "inf", drawn past the scale's top); step 0 as drawn (left out).
void PlotCsvTest::theQuantizationHeatmapsCsvHoldsEveryCell() {
  auto store = RunStore::open(file(QStringLiteral("quant.sqlite")).toStdString());
  const int64_t id = store->create_run("csv", fp8wb::RunKind::Train, "{}", "cpu");
  const std::vector<std::string> layers{"blocks.0.fc1", "blocks.0.fc2"};
  auto raw_of = [](size_t layer, int64_t s) {
    StatsBuffer raw{};
    raw.numel = 1000;
    raw.underflow = static_cast<uint64_t>(3 * s + 7 * static_cast<int64_t>(layer) + 1);
    raw.sq_sum = 10.0;
    raw.sq_err = layer == 1 && s == 20 ? 0.0 : 0.001 * static_cast<double>(s + 1);
    return raw;
  };
  for (int64_t s : {0, 10, 20, 30}) {
    MetricBatch b;
    b.run_id = id;
    StepMetrics m;
    m.step = s;
    m.loss = 2.0;
    b.steps.push_back(m);
    for (size_t l = 0; l < layers.size(); ++l) {
      TensorMetrics t;
      t.step = s;
      t.layer = layers[l];
      t.role = Role::Input;
      t.amax = 1;
      t.scale = 1;
      t.raw = raw_of(l, s);
      b.tensors.push_back(t);
    }
    store->write(b);
  }
  store->flush();
  RunData data;
  RunCursor cursor;
  data.load(*store, id, &cursor);
  QuantizationTab tab(&data);
  tab.resize(1200, 900);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  tab.refresh(true);
  QComboBox* metric = tab.findChildren<QComboBox*>().front();  // "Heatmap of"
  for (const TensorStatFigure* figure : {&kUnderflowPct, &kSqnrDb}) {
    metric->setCurrentIndex(figure == &kUnderflowPct ? 0 : 2);
    tab.refresh(true);
    const QList<QStringList> rows = exported(tab.plots()[0], file(QStringLiteral("heat.csv")));
    QVERIFY(!rows.isEmpty());
    QCOMPARE(rows.front(), (QStringList{"map", "row", "column", "value"}));
    QCOMPARE(rows.size(), 1 + 2 * 3);  // two layers x steps 10, 20, 30
    qsizetype i = 1;
    for (size_t l = 0; l < layers.size(); ++l) {
      for (int64_t s : {10, 20, 30}) {
        const QStringList& row = rows[i++];
        QCOMPARE(row[0], metric->currentText());
        QCOMPARE(row[1], QString::fromStdString(layers[l]));
        QCOMPARE(row[2], QString::number(s));
        const double want = figure->of(raw_of(l, s));
        QVERIFY2(same(number(row[3]), want),
                 qPrintable(row.join(',') + QStringLiteral(" against ") + QString::number(want)));
      }
    }
    if (figure == &kSqnrDb) QCOMPARE(rows[5][3], QStringLiteral("inf"));  // layer 1, step 20
  }
}

// The sweep's heatmap: a line a cell, named by its two axes' values, its final loss; a
// cell without a figure (still to run) empty.
void PlotCsvTest::theSweepHeatmapsCsvHoldsEveryCell() {
  EngineController engine;
  engine.setDatabasePath(file(QStringLiteral("sweep.sqlite")));
  SweepSpec spec;
  spec.name = "csv";
  spec.base.model = ModelKind::Mlp;
  spec.axes = {parse_grid("margin=0,1,2"), parse_grid("window=1,16")};
  RunStore& store = engine.store();
  const int64_t sweep = store.create_sweep(spec.name, sweep_json(spec));
  std::map<std::pair<std::string, std::string>, double> finals;
  for (const SweepTrial& t : expand_sweep(spec)) {
    if (t.values[0] == "2" && t.values[1] == "16") continue;  // still to run
    const double base = 1.0 + std::stod(t.values[0]) + 0.01 * std::stod(t.values[1]);
    const int64_t run = store.create_run(t.config.name, fp8wb::RunKind::SweepTrial,
                                         run_config_json(t.config), "cpu", sweep);
    MetricBatch b;
    b.run_id = run;
    double sum = 0;
    for (int64_t s = 0; s < 20; ++s) {
      StepMetrics m;
      m.step = s;
      m.loss = base + 0.1 * static_cast<double>(s % 3);
      if (s >= 18) sum += m.loss;  // the last 10% of 20 steps
      b.steps.push_back(m);
    }
    b.final = true;
    b.status = RunStatus::Finished;
    store.write(std::move(b));
    finals[{t.values[0], t.values[1]}] = sum / 2;
  }
  store.flush();
  SweepsTab tab(&engine);
  tab.resize(1400, 900);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  QSignalSpy shown(&tab, &SweepsTab::sweepShown);
  tab.showSweep(sweep);
  QVERIFY(shown.wait(30000));
  tab.setAxes(1, 0);  // window across, margin up
  tab.setMetric(SweepMetric::FinalLoss);
  const QList<QStringList> rows = exported(tab.plots()[0], file(QStringLiteral("sweep.csv")));
  QVERIFY(!rows.isEmpty());
  QCOMPARE(rows.front(), (QStringList{"map", "row", "column", "value"}));
  QCOMPARE(rows.size(), 1 + 3 * 2);
  qsizetype i = 1;
  for (const char* margin : {"0", "1", "2"}) {
    for (const char* window : {"1", "16"}) {
      const QStringList& row = rows[i++];
      // The map named by its figure and its axes (a tryout's CSV said "sweep").
      QCOMPARE(row[0], QStringLiteral("final loss: rows margin, columns window"));
      QCOMPARE(row[1], QString::fromLatin1(margin));
      QCOMPARE(row[2], QString::fromLatin1(window));
      const auto f = finals.find({margin, window});
      if (f == finals.end()) {
        QCOMPARE(row[3], QString());
      } else {
        QVERIFY2(std::abs(number(row[3]) - f->second) < 1e-9,
                 qPrintable(row.join(',') + QStringLiteral(" against ") +
                            QString::number(f->second, 'g', 17)));
      }
    }
  }
}

// File > Export: greyed, and saying so, where the tab shown has nothing to export (the
// Checkpoint tab before a file, the Overview without a run); else each thing by its name:
// the Checkpoint tab's plots and its table (written through the menu), no run there.
// The outlier demo's two error maps: each cell once per map, the map named, the cell by
// the tensor's token and channel indices it covers, and its relative error itself.
void PlotCsvTest::theOutlierDemosMapsCsvNamesEachMapAndItsIndices() {
  FormatsTab tab;
  QVERIFY(tab.showPage(QStringLiteral("outliers")));
  OutlierDemoView* demo = tab.outlierDemo();
  QVERIFY(demo && !demo->result().rows.empty());
  ExportablePlot* maps = nullptr;
  for (ExportablePlot* p : demo->findChildren<ExportablePlot*>()) {
    for (int i = 0; i < p->plottableCount(); ++i)
      if (qobject_cast<QCPColorMap*>(p->plottable(i))) maps = p;
  }
  QVERIFY(maps);
  const QList<QStringList> rows = exported(maps, file(QStringLiteral("outlier-maps.csv")));
  QVERIFY(!rows.isEmpty());
  QCOMPARE(rows.front(), (QStringList{"map", "tokens", "channels", "relative_error"}));
  const OutlierDemoRow& r = demo->result().rows.front();
  const OutlierDemoConfig& cfg = demo->result().config;
  qsizetype i = 1;
  for (const auto& [name, stats] : {std::pair{QStringLiteral("per tensor"), &r.tensorwise},
                                    std::pair{QStringLiteral("1x128 blocks"), &r.block}}) {
    const MapGrid& g = stats->map_grid;
    QVERIFY(g.cell_count() > 1);
    QCOMPARE(g.rows * g.cell_rows, cfg.rows);  // the cells cover the tensor, no more
    const auto rel = stats->map_rel_error();
    for (int64_t y = 0; y < g.rows; ++y) {
      for (int64_t x = 0; x < g.cols; ++x, ++i) {
        QVERIFY(i < rows.size());
        QCOMPARE(rows[i][0], name);
        QCOMPARE(rows[i][1],
                 QStringLiteral("%1-%2").arg(y * g.cell_rows).arg((y + 1) * g.cell_rows - 1));
        QCOMPARE(rows[i][2],
                 QStringLiteral("%1-%2").arg(x * g.cell_cols).arg((x + 1) * g.cell_cols - 1));
        QVERIFY(same(number(rows[i][3]),
                     static_cast<double>(rel[static_cast<size_t>(y * g.cols + x)])));
      }
    }
  }
  QCOMPARE(i, rows.size());
}

// The export dialog suggests a file name made of the plot's title (a tryout found it
// empty): lower-case words joined by '-', at most 60 characters before the suffix.
void PlotCsvTest::exportDialogsSuggestANameAfterThePlot() {
  QCOMPARE(export_file_name(QStringLiteral("Spacing (ULP) by magnitude: E4M3FN, E5M2"),
                            QStringLiteral("png")),
           QStringLiteral("spacing-ulp-by-magnitude-e4m3fn-e5m2.png"));
  QCOMPARE(export_file_name(QString(), QStringLiteral("csv")), QStringLiteral("plot.csv"));
  QCOMPARE(export_file_name(QStringLiteral(" -- "), QStringLiteral("pdf")),
           QStringLiteral("plot.pdf"));
  const QString long_name = export_file_name(
      QString(40, QLatin1Char('a')) + QStringLiteral(" b ") + QString(40, QLatin1Char('c')),
      QStringLiteral("csv"));
  QVERIFY2(long_name.size() <= 64 && long_name.endsWith(QStringLiteral(".csv")) &&
               !long_name.contains(QStringLiteral("-.")),
           qPrintable(long_name));
}

void PlotCsvTest::fileExportNamesWhatTheTabCanExport() {
  MainWindow w(false);
  w.resize(1400, 900);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  QString next_save;
  w.setFileDialogs(
      [](QWidget*, const QString&, const QString&, const QString&) { return QString(); },
      [&](QWidget*, const QString&, const QString&, const QString&) { return next_save; });
  auto* exports = w.findChild<QMenu*>(QStringLiteral("export"));
  QVERIFY(exports);
  auto actions = [&] {
    std::map<QString, QList<QAction*>> by_name;
    for (QAction* a : exports->actions())
      if (!a->isSeparator()) by_name[a->objectName()] << a;
    return by_name;
  };
  for (const QString& tab : {QStringLiteral("Checkpoint"), QStringLiteral("Overview")}) {
    QVERIFY(w.selectTab(tab));
    QCoreApplication::processEvents();
    QVERIFY2(!exports->menuAction()->isEnabled(), qPrintable(tab));
    QVERIFY2(exports->title().contains(QStringLiteral("nothing")) && exports->title().contains(tab),
             qPrintable(exports->title()));
  }
  QVERIFY(w.selectTab(QStringLiteral("Formats")));
  QVERIFY(exports->menuAction()->isEnabled());
  QVERIFY(actions().count(QStringLiteral("export-run-csv")) == 0);  // no run on this tab
  QVERIFY(w.selectTab(QStringLiteral("Checkpoint")));
  QSignalSpy loaded(w.checkpointTab(), &CheckpointTab::checkpointLoaded);
  w.openCheckpointFile(path_);
  QVERIFY(loaded.wait(60000));
  QCoreApplication::processEvents();
  QVERIFY(exports->menuAction()->isEnabled());
  QVERIFY(exports->title().contains(QStringLiteral("Checkpoint")));
  Q_EMIT exports->aboutToShow();
  auto by_name = actions();
  QCOMPARE(by_name[QStringLiteral("export-plot")].size(), 3);
  for (QAction* a : by_name[QStringLiteral("export-plot")]) {
    QVERIFY2(a->isEnabled() && a->text().contains(QStringLiteral("CSV")), qPrintable(a->text()));
  }
  QCOMPARE(by_name.count(QStringLiteral("export-run-csv")), size_t{0});
  QCOMPARE(by_name[QStringLiteral("export-checkpoint-table")].size(), 1);
  QAction* table = by_name[QStringLiteral("export-checkpoint-table")].front();
  QVERIFY2(table->isEnabled() && table->text().contains(QStringLiteral("4 tensors")),
           qPrintable(table->text()));
  next_save = file(QStringLiteral("menu-table.csv"));
  table->trigger();
  QFile f(next_save);
  QVERIFY(f.open(QIODevice::ReadOnly));
  QCOMPARE(parse_csv(QString::fromUtf8(f.readAll())).size(), 1 + 4);
  // A plot's data through the same menu, by its suffix.
  next_save = file(QStringLiteral("menu-chart.csv"));
  QAction* chart_action = nullptr;
  for (QAction* a : by_name[QStringLiteral("export-plot")])
    if (a->text().contains(QStringLiteral("SQNR of every recipe"))) chart_action = a;
  QVERIFY(chart_action);
  chart_action->trigger();
  QFile chart(next_save);
  QVERIFY(chart.open(QIODevice::ReadOnly));
  QVERIFY(chart.readLine().startsWith("series,label,value"));
}

QTEST_MAIN(PlotCsvTest)
#include "plot_csv_test.moc"
