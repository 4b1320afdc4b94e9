// The Checkpoint tab, offscreen: a checkpoint written by the project's writer is
// analysed in the background and fills the table (worst first) and the plots; filter;
// the model under QAbstractItemModelTester; bad files give their message.
#include <sys/stat.h>
#include <QAbstractItemModelTester>
#include <QComboBox>

#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QSettings>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>

#include "checkpoint_tab_shown.h"
#include "fp8wb/core/checkpoint/safetensors.h"
#include "fp8wb/views/checkpoint/checkpoint_tab.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "range_tensors.h"

using namespace fp8wb;

class CheckpointTabTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    qputenv("XDG_CONFIG_HOME", dir_.path().toUtf8());  // recent files: not the user's
  }
  void analysesAndShows();
  void badFilesShowTheirMessage();
  void singleColumnBlockMapsAreDrawn();
  void tensorsWithoutSignalSayWhy();
  void recentListIsTheSettingsList();
  void histogramShowsEveryValueWhereItIs();
  void noRecipeIsSaid();
  void badScaleInvBlocksAreWarnedOf();
  void orangeCellsAreExplained();
  void anotherFileLeavesNoFiguresOfTheFirst();
  void blocksWithoutSignalAreGrey();
  void aFilterThatMatchesNothingShowsNoFigures();
  void exactRecipesSayInf();
  void aScalarsShapeIsSaid();
  void aRecommendationThatLosesValuesIsNotGreen();
  void shardTensorsOutsideTheIndexAreSaid();
  void aTruncatedFileIsSaidOnce();
  void theCaptionGivesTheChosenRecipesMedianBlock();
  void worstFirstPutsExactThenNoSqnrLast();
  void theRecommendedRecipesUnderflowHasAColumn();

 private:
  QTemporaryDir dir_;
};

void CheckpointTabTest::analysesAndShows() {
  std::vector<float> w(256 * 128), x(128 * 256);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.02f * std::sin(0.1f * static_cast<float>(i));
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = (i % 256 == 5 ? 3000.0f : 1.0f) * std::cos(0.3f * static_cast<float>(i));
  auto bytes = [](const std::vector<float>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  const QString path = dir_.filePath(QStringLiteral("m.safetensors"));
  write_safetensors(path.toStdString(), {{"a.weight", StDtype::F32, {256, 128}, bytes(w)},
                                         {"b.outliers", StDtype::F32, {128, 256}, bytes(x)}});
  CheckpointTab tab;
  QAbstractItemModelTester tester(tab.model(),
                                  QAbstractItemModelTester::FailureReportingMode::QtTest);
  QSignalSpy loaded(&tab, &CheckpointTab::checkpointLoaded);
  QSignalSpy failed(&tab, &CheckpointTab::failed);
  tab.openCheckpoint(path);
  QVERIFY(tab.busy());
  QVERIFY(loaded.wait(60000));
  QCOMPARE(failed.count(), 0);
  QCOMPARE(tab.model()->rowCount(), 2);
  QVERIFY(!tab.busy());
  // Worst first: the first row has the lowest best SQNR.
  const double first =
      tab.proxy()->index(0, CheckpointModel::BestSqnr).data(Qt::UserRole).toDouble();
  const double second =
      tab.proxy()->index(1, CheckpointModel::BestSqnr).data(Qt::UserRole).toDouble();
  QVERIFY(first <= second);
  tab.selectTensor(QStringLiteral("b.outliers"));
  // The histogram shows floor(log2 |x|) of the tensor, bin by bin, recomputed here.
  std::map<int, double> expected;
  for (float v : x) {
    if (v == 0 || !std::isfinite(v)) continue;
    expected[std::ilogb(v)] += 1;  // every value at its own exponent, none clamped
  }
  QCPPlottableInterface1D* hist = tab.plots()[0]->plottable(0)->interface1D();
  QCOMPARE(hist->dataCount(), static_cast<int>(expected.size()));
  for (int i = 0; i < hist->dataCount(); ++i) {
    const int key = static_cast<int>(hist->dataMainKey(i));
    QVERIFY2(expected.count(key) == 1, qPrintable(QString::number(key)));
    QCOMPARE(hist->dataMainValue(i), expected[key]);
  }
  int bars = 0;  // recipe x format bars (one plottable per format)
  for (int i = 0; i < tab.plots()[1]->plottableCount(); ++i)
    bars += tab.plots()[1]->plottable(i)->interface1D()->dataCount();
  QVERIFY(bars >= 20);
  auto* filter = tab.proxy();
  filter->setFilterFixedString(QStringLiteral("weight"));
  QCOMPARE(filter->rowCount(), 1);
  QVERIFY(tab.recentFiles().contains(path));
}

void CheckpointTabTest::badFilesShowTheirMessage() {
  const QString path = dir_.filePath(QStringLiteral("bad.safetensors"));
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write("tiny");
  f.close();
  CheckpointTab tab;
  // A good file first: its table and figures stay on screen after the bad one fails,
  // and the status line says whose they are.
  const QString good = dir_.filePath(QStringLiteral("good.safetensors"));
  std::vector<uint8_t> ones(64 * 64 * 4);
  const float one = 1.5f;
  for (size_t i = 0; i < ones.size(); i += 4) std::memcpy(&ones[i], &one, 4);
  write_safetensors(good.toStdString(), {{"w", StDtype::F32, {64, 64}, ones}});
  QSignalSpy loaded(&tab, &CheckpointTab::checkpointLoaded);
  tab.openCheckpoint(good);
  QVERIFY(loaded.wait(30000));
  QCOMPARE(tab.model()->rowCount(), 1);
  QVERIFY2(tab.statusText().contains(QStringLiteral(": 1 tensor analysed in ")),
           qPrintable(tab.statusText()));
  tab.selectTensor(QStringLiteral("w"));
  QVERIFY(tab.plots()[0]->plottable(0)->interface1D()->dataCount() > 0);
  QSignalSpy failed(&tab, &CheckpointTab::failed);
  tab.openCheckpoint(path);  // opened on a pool thread
  QVERIFY(failed.wait(30000));
  QVERIFY(failed.at(0).at(0).toString().contains(QStringLiteral("truncated")));
  QCOMPARE(failed.count(), 1);
  QCOMPARE(tab.statusText().count(path), 1);  // the file is named once
  QVERIFY(tab.statusText().contains(QStringLiteral("truncated")));
  QVERIFY(!tab.busy());
  QCOMPARE(tab.model()->rowCount(), 1);
  QVERIFY(tab.statusText().contains(QStringLiteral("still showing ") + good));
  QVERIFY(tab.plots()[0]->plottable(0)->interface1D()->dataCount() > 0);
  // A well-formed file without tensors: said so, as `fp8wb inspect` does ("no tensors in").
  const QString empty = dir_.filePath(QStringLiteral("empty.safetensors"));
  write_safetensors(empty.toStdString(), {});
  tab.openCheckpoint(empty);
  QVERIFY(loaded.wait(30000));
  QCOMPARE(tab.model()->rowCount(), 0);
  QCOMPARE(tab.statusText(), empty + QStringLiteral(": no tensors in this file"));
  // Whatever the shape of the reader's message, the status line says it from the error's
  // parts: the file once, then what it is or what is wrong with it.
  const QString pipe = dir_.filePath(QStringLiteral("pipe.safetensors"));
  QCOMPARE(::mkfifo(pipe.toLocal8Bit().constData(), 0600), 0);
  tab.openCheckpoint(pipe);
  QVERIFY(failed.wait(30000));
  QVERIFY2(tab.statusText().startsWith(QStringLiteral("Not analysed: ") + pipe +
                                       QStringLiteral(" is a FIFO, not a regular file")),
           qPrintable(tab.statusText()));
  QCOMPARE(tab.statusText().count(pipe), 1);
}

void CheckpointTabTest::singleColumnBlockMapsAreDrawn() {
  // Rowwise scaling has one block per row: a 4 x 1 map must cover x in [-0.5, 0.5] with
  // each row's value, and render coloured pixels where the column is.
  ExportablePlot plot;
  plot.resize(300, 300);
  auto* map = new QCPColorMap(plot.xAxis, plot.yAxis);
  fill_block_map(map, 4, 1, {0.1f, 0.2f, 0.3f, 0.4f});
  // Block indices are whole numbers: one column has the one tick 0, no fractions.
  plot.replot();
  QCOMPARE(plot.xAxis->tickVector(), QVector<double>{0.0});
  for (double t : plot.yAxis->tickVector()) QCOMPARE(t, std::round(t));
  for (int r = 0; r < 4; ++r) {
    QCOMPARE(map->data()->data(-0.4, r),
             static_cast<double>(std::vector<float>{0.1f, 0.2f, 0.3f, 0.4f}[r]));
    QCOMPARE(map->data()->data(0.4, r), map->data()->data(-0.4, r));
  }
  plot.xAxis->setRange(-2, 2);
  plot.yAxis->setRange(-1, 4);
  const QImage img = plot.toPixmap(300, 300).toImage();
  auto at = [&](double x, double y) {
    return img.pixelColor(static_cast<int>(plot.xAxis->coordToPixel(x)),
                          static_cast<int>(plot.yAxis->coordToPixel(y)));
  };
  QVERIFY2(at(0, 1.5) != QColor(Qt::white), "the column is not drawn");
  QVERIFY2(at(0.45, 1.5) != QColor(Qt::white), "the column is narrower than its block");
  QCOMPARE(at(0.7, 1.5), QColor(Qt::white));  // and no wider
  // Every block exact (relative error 0): the colour scale spans 0 to 1, not a range that
  // no relative error of the tensor comes near.
  fill_block_map(map, 2, 2, {0.0f, 0.0f, 0.0f, 0.0f});
  QCOMPARE(map->dataRange(), QCPRange(0, 1));
  fill_block_map(map, 2, 2, {0.3f, 0.3f, 0.3f, 0.3f});  // one figure: a band around it
  QVERIFY2(
      map->dataRange().contains(0.3) && map->dataRange().lower >= 0 &&
          map->dataRange().size() <= 1.0,
      qPrintable(QStringLiteral("%1..%2").arg(map->dataRange().lower).arg(map->dataRange().upper)));
}

namespace {

using fp8wb::test::f32_bytes;

QString caption_text(const CheckpointTab& tab) {
  QString all;
  for (QLabel* l : tab.findChildren<QLabel*>()) all += l->text() + QLatin1Char('\n');
  return all;
}

}  // namespace

void CheckpointTabTest::tensorsWithoutSignalSayWhy() {
  const std::vector<float> nan(64 * 64, std::nanf("")), zero(64 * 64, 0.0f);
  auto bytes = [](const std::vector<float>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  const QString path = dir_.filePath(QStringLiteral("nosignal.safetensors"));
  // An FP8 weight whose `_scale_inv` fits it no way: its values are unknown.
  write_safetensors(path.toStdString(),
                    {{"nan.weight", StDtype::F32, {64, 64}, bytes(nan)},
                     {"zero.weight", StDtype::F32, {64, 64}, bytes(zero)},
                     {"empty.bias", StDtype::F32, {0}, {}},
                     {"unfit.weight", StDtype::F8_E4M3, {64, 64}, std::vector<uint8_t>(4096, 0x38)},
                     {"unfit.weight_scale_inv", StDtype::F32, {3}, bytes({1.0f, 1.0f, 1.0f})}});
  CheckpointTab tab;
  QSignalSpy loaded(&tab, &CheckpointTab::checkpointLoaded);
  tab.openCheckpoint(path);
  QVERIFY(loaded.wait(60000));
  QCOMPARE(tab.model()->rowCount(), 4);
  // The tensor whose values are unknown is counted where the file's result is said.
  QVERIFY2(tab.statusText().endsWith(
               QStringLiteral("; 1 with values that could not be read (see their rows)")),
           qPrintable(tab.statusText()));
  const std::map<QString, QString> why{
      {"nan.weight", "no finite values: 4096 NaN"},
      {"zero.weight", "all zero"},
      {"empty.bias", "empty tensor (0 elements)"},
      {"unfit.weight", "values unknown: " + path +
                           ": 'unfit.weight_scale_inv' (F32 [3]) is neither one F32 scale for the "
                           "whole of 'unfit.weight' [64, 64] nor an F32 grid of its 128x128 "
                           "blocks, so it cannot be applied"}};
  auto item = [](ExportablePlot* p, const QString& name) -> QCPItemText* {
    for (int i = 0; i < p->itemCount(); ++i) {
      if (p->item(i)->objectName() == name) return qobject_cast<QCPItemText*>(p->item(i));
    }
    return nullptr;
  };
  for (int r = 0; r < tab.proxy()->rowCount(); ++r) {
    const QString name = tab.proxy()->index(r, CheckpointModel::Name).data().toString();
    QVERIFY2(why.count(name) == 1, qPrintable(name));
    const QString reason = why.at(name);
    QCOMPARE(tab.proxy()->index(r, CheckpointModel::BestSqnr).data().toString(),
             QStringLiteral("-"));
    // No figures where no value is known and finite (an amax of 0 would be made up): only
    // the all-zero tensor has an amax, 0; the caption gives none either.
    const bool figures = name == QStringLiteral("zero.weight");
    QCOMPARE(tab.proxy()->index(r, CheckpointModel::Amax).data().toString(),
             figures ? QStringLiteral("0") : QStringLiteral("-"));
    QCOMPARE(tab.proxy()->index(r, CheckpointModel::Range).data().toString() == QStringLiteral("-"),
             !figures);
    // The cell says the reason's start, its tooltip the whole reason.
    const QModelIndex rec = tab.proxy()->index(r, CheckpointModel::Recommended);
    const QString cell = rec.data().toString();
    QVERIFY2(cell.startsWith(QStringLiteral("none: ")) &&
                 reason.startsWith(QString(cell.mid(6)).remove(QChar(0x2026))),
             qPrintable(cell));
    QVERIFY2(rec.data(Qt::ToolTipRole).toString().contains(reason),
             qPrintable(rec.data(Qt::ToolTipRole).toString()));
    QVERIFY(!rec.data(Qt::FontRole).isValid());  // not the bold green of a recommendation
    tab.selectTensor(name);
    QCOMPARE(caption_text(tab).contains(QStringLiteral("amax")), figures);
    // No bars (none drawn at a made-up limit), the reason where they would be.
    for (int i = 0; i < tab.plots()[1]->plottableCount(); ++i)
      QCOMPARE(tab.plots()[1]->plottable(i)->interface1D()->dataCount(), 0);
    QCPItemText* chart_note = item(tab.plots()[1], QStringLiteral("noChart"));
    QVERIFY(chart_note);
    // Notes are broken into lines at spaces (a long reason ran off the plot's sides).
    const auto one_line = [](QCPItemText* note) {
      return note->text().replace(QLatin1Char('\n'), QLatin1Char(' '));
    };
    QVERIFY2(one_line(chart_note).contains(reason), qPrintable(chart_note->text()));
    QVERIFY(!tab.plots()[1]->xAxis->visible());
    QCPItemText* map_note = item(tab.plots()[2], QStringLiteral("noBlockMap"));
    QVERIFY(map_note);
    QVERIFY2(one_line(map_note).contains(reason), qPrintable(map_note->text()));
    // No histogram bins: the reason, no axes (a negative count axis before).
    QCOMPARE(tab.plots()[0]->plottable(0)->interface1D()->dataCount(), 0);
    QCPItemText* hist_note = item(tab.plots()[0], QStringLiteral("noHistogram"));
    QVERIFY(hist_note);
    QCOMPARE(one_line(hist_note), reason);
    for (const QString& line : hist_note->text().split(QLatin1Char('\n')))
      QVERIFY2(line.size() <= 44 || !line.contains(QLatin1Char(' ')), qPrintable(line));
    QVERIFY(!tab.plots()[0]->yAxis->visible());
  }
}

void CheckpointTabTest::recentListIsTheSettingsList() {
  QSettings().remove(QStringLiteral("checkpoint/recent"));
  CheckpointTab tab;
  auto* recent = tab.findChild<QComboBox*>(QStringLiteral("checkpointRecent"));
  QVERIFY(recent);
  QCOMPARE(recent->count(), 0);
  // File > Recent files writes this list (another window, or the menu): the tab shows
  // the same files when it is shown, those still there.
  QStringList files;
  for (const char* n : {"r1.safetensors", "r2.safetensors"}) {
    QFile f(dir_.filePath(QString::fromLatin1(n)));
    QVERIFY(f.open(QIODevice::WriteOnly));
    files << f.fileName();
  }
  QSettings().setValue(QStringLiteral("checkpoint/recent"),
                       QStringList{files[0], dir_.filePath(QStringLiteral("gone.pt")), files[1]});
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  QCOMPARE(recent->count(), 2);
  QCOMPARE(recent->itemText(0), files[0]);
  QCOMPARE(recent->itemText(1), files[1]);
  QVERIFY(recent->isEnabled());
  // And again when it is opened.
  QSettings().setValue(QStringLiteral("checkpoint/recent"), QStringList{files[1]});
  QTest::mouseClick(recent, Qt::LeftButton);
  recent->hidePopup();
  QCOMPARE(recent->count(), 1);
  QCOMPARE(recent->itemText(0), files[1]);
}

// Values far outside 2^-40..2^23 are drawn at their own exponents (not piled into an end
// bin, not left off the axis), and the axis shows them and the formats' bands beside them.
void CheckpointTabTest::histogramShowsEveryValueWhereItIs() {
  const auto tensors = fp8wb::test::range_tensors();
  const QString path = dir_.filePath(QStringLiteral("range.safetensors"));
  write_safetensors(path.toStdString(), fp8wb::test::to_write(tensors));
  std::map<QString, std::vector<float>> values;
  for (const auto& t : tensors) values[QString::fromStdString(t.name)] = t.values;
  CheckpointTab tab;
  QSignalSpy loaded(&tab, &CheckpointTab::checkpointLoaded);
  tab.openCheckpoint(path);
  QVERIFY(loaded.wait(60000));
  for (const auto& [name, v] : values) {
    tab.selectTensor(name);
    std::map<int, double> expected;
    for (float f : v) expected[std::ilogb(f)] += 1;
    QCPPlottableInterface1D* hist = tab.plots()[0]->plottable(0)->interface1D();
    QCOMPARE(hist->dataCount(), static_cast<int>(expected.size()));
    for (int i = 0; i < hist->dataCount(); ++i) {
      const int key = static_cast<int>(hist->dataMainKey(i));
      QVERIFY2(expected.count(key) == 1,
               qPrintable(name + QLatin1Char(' ') + QString::number(key)));
      QCOMPARE(hist->dataMainValue(i), expected[key]);
    }
    // The axis holds every bar.
    const QCPRange x = tab.plots()[0]->xAxis->range();
    QVERIFY2(x.lower <= expected.begin()->first && x.upper >= expected.rbegin()->first + 1,
             qPrintable(name + QStringLiteral(": %1..%2").arg(x.lower).arg(x.upper)));
    // Each format's band ends at the tensor's largest bin (a tensorwise scale's place).
    int bands = 0;
    for (int i = 0; i < tab.plots()[0]->itemCount(); ++i) {
      auto* band = qobject_cast<QCPItemRect*>(tab.plots()[0]->item(i));
      if (!band) continue;
      ++bands;
      QCOMPARE(band->bottomRight->coords().x(), expected.rbegin()->first + 0.5);
      QVERIFY(band->topLeft->coords().x() >= x.lower);
    }
    QCOMPARE(bands, 2);
  }
}

// A tensor that every E4M3 recipe zeroes is recommended nothing, and it is said.
void CheckpointTabTest::noRecipeIsSaid() {
  const QString path = dir_.filePath(QStringLiteral("unrepresentable.safetensors"));
  write_safetensors(path.toStdString(),
                    {{"w.tiny", StDtype::F32, {2}, f32_bytes({1e-45f, -1e-45f})}});
  CheckpointTab tab;
  QSignalSpy loaded(&tab, &CheckpointTab::checkpointLoaded);
  tab.openCheckpoint(path);
  QVERIFY(loaded.wait(60000));
  QCOMPARE(tab.model()->rowCount(), 1);
  const QModelIndex rec = tab.proxy()->index(0, CheckpointModel::Recommended);
  tab.selectTensor(QStringLiteral("w.tiny"));
  const QString caption = caption_text(tab);
  QVERIFY2(rec.data().toString().startsWith(
               QStringLiteral("none: no FP8 recipe represents this tensor")),
           qPrintable(rec.data().toString()));
  QVERIFY(!rec.data(Qt::FontRole).isValid());  // not the bold of a recommendation
  QVERIFY2(caption.contains(QStringLiteral("No recommendation:")), qPrintable(caption));
  QVERIFY2(!caption.contains(QStringLiteral("Recommended for")), qPrintable(caption));
}

// An FP8 weight with NaN, Inf, zero or negative `_scale_inv` blocks is warned of, in the
// caption and the row's tooltip.
void CheckpointTabTest::badScaleInvBlocksAreWarnedOf() {
  const std::vector<uint8_t> ones(256 * 256, 0x38);  // E4M3FN 1.0
  const QString path = dir_.filePath(QStringLiteral("badscales.safetensors"));
  write_safetensors(path.toStdString(), {{"l.weight", StDtype::F8_E4M3, {256, 256}, ones},
                                         {"l.weight_scale_inv",
                                          StDtype::F32,
                                          {2, 2},
                                          f32_bytes({std::nanf(""), -1.0f, 0.0f, INFINITY})}});
  CheckpointTab tab;
  QSignalSpy loaded(&tab, &CheckpointTab::checkpointLoaded);
  tab.openCheckpoint(path);
  QVERIFY(loaded.wait(60000));
  QCOMPARE(tab.model()->rowCount(), 1);
  tab.selectTensor(QStringLiteral("l.weight"));
  const QString caption = caption_text(tab);
  QVERIFY2(caption.contains(QStringLiteral("Warning:")) &&
               caption.contains(QStringLiteral("l.weight_scale_inv")) &&
               caption.contains(QStringLiteral("1 NaN, 1 Inf, 1 zero, 1 negative")),
           qPrintable(caption));
  const QString tip = tab.proxy()->index(0, CheckpointModel::Name).data(Qt::ToolTipRole).toString();
  QVERIFY2(tip.contains(QStringLiteral("l.weight_scale_inv")), qPrintable(tip));
}

// The table's orange cells (the recipe chosen under "Block errors of") are explained: by a
// legend beside the table, in the orange itself, and by the cells' tooltips.
void CheckpointTabTest::orangeCellsAreExplained() {
  std::vector<float> w(128 * 128);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.02f * std::sin(0.1f * static_cast<float>(i));
  std::vector<uint8_t> b(w.size() * 4);
  std::memcpy(b.data(), w.data(), b.size());
  const QString path = dir_.filePath(QStringLiteral("legend.safetensors"));
  write_safetensors(path.toStdString(), {{"l.weight", StDtype::F32, {128, 128}, b}});
  CheckpointTab tab;
  QVERIFY(test::shown_with_file(tab, path, 1300, 800));
  QCoreApplication::processEvents();
  // A cell on the orange ground: the recipe chosen is its tensor's recommended one.
  auto* model = tab.proxy();
  QModelIndex orange;
  for (int c = 0; c < model->columnCount() && !orange.isValid(); ++c) {
    const QModelIndex i = model->index(0, c);
    const QColor bg = i.data(Qt::BackgroundRole).value<QBrush>().color();
    if (bg.isValid() && bg.red() == 0xff && bg.green() == 0x7f) orange = i;
  }
  if (!orange.isValid()) {
    tab.selectRecipe(model->index(0, CheckpointModel::Recommended).data().toString());
    QTRY_VERIFY(model->index(0, CheckpointModel::Recommended)
                    .data(Qt::BackgroundRole)
                    .value<QBrush>()
                    .color()
                    .isValid());
    orange = model->index(0, CheckpointModel::Recommended);
  }
  QVERIFY2(orange.data(Qt::ToolTipRole).toString().contains(QStringLiteral("Block errors of")),
           qPrintable(orange.data(Qt::ToolTipRole).toString()));
  QLabel* legend = nullptr;
  for (QLabel* l : tab.findChildren<QLabel*>()) {
    if (l->isVisible() && l->text().contains(QStringLiteral("Block errors of")) &&
        l->text().contains(QStringLiteral("ff7f0e"), Qt::CaseInsensitive))
      legend = l;
  }
  QVERIFY2(legend, "no legend of the table's orange cells, in the orange");
  // Beside the table, whole.
  QVERIFY(legend->width() >= legend->minimumSizeHint().width());
}

// Opening another file replaces the figures of the tensor shown: where the filter lets no
// tensor of the new file through, nothing is shown (the first file's caption and bars had
// stayed beside the new file's empty table).
void CheckpointTabTest::anotherFileLeavesNoFiguresOfTheFirst() {
  const QString first = dir_.filePath(QStringLiteral("first.safetensors"));
  const QString second = dir_.filePath(QStringLiteral("second.safetensors"));
  write_safetensors(first.toStdString(),
                    {{"layer.weight", StDtype::F32, {2, 2}, f32_bytes({1.0f, -2.0f, 3.0f, 0.5f})}});
  write_safetensors(second.toStdString(),
                    {{"other.bias", StDtype::F32, {2}, f32_bytes({0.25f, 4.0f})}});
  CheckpointTab tab;
  QSignalSpy loaded(&tab, &CheckpointTab::checkpointLoaded);
  tab.openCheckpoint(first);
  QVERIFY(loaded.wait(60000));
  tab.selectTensor(QStringLiteral("layer.weight"));
  auto* filter = tab.findChild<QLineEdit*>(QStringLiteral("checkpointFilter"));
  QVERIFY(filter);
  QVERIFY2(caption_text(tab).contains(QStringLiteral("layer.weight")),
           qPrintable(caption_text(tab)));
  QVERIFY(tab.plots()[0]->plottable(0)->interface1D()->dataCount() > 0);
  filter->setText(QStringLiteral("layer"));
  tab.openCheckpoint(second);
  QVERIFY(loaded.wait(60000));
  QCOMPARE(tab.proxy()->rowCount(), 0);
  QVERIFY2(!caption_text(tab).contains(QStringLiteral("layer.weight")),
           qPrintable(caption_text(tab)));
  QVERIFY2(!caption_text(tab).contains(QStringLiteral("amax")), qPrintable(caption_text(tab)));
  QCOMPARE(tab.plots()[0]->plottable(0)->interface1D()->dataCount(), 0);
  QCOMPARE(tab.plots()[1]->plottableCount(), 0);
  filter->setText(QString());
  QCOMPARE(tab.proxy()->rowCount(), 1);
}

// A block without finite nonzero values (all NaN, all zero) has no relative error: it is
// drawn grey, apart from the scale (before, it was drawn as an error of 0), and a note
// says what grey means.
void CheckpointTabTest::blocksWithoutSignalAreGrey() {
  std::vector<float> w(256 * 256);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.02f * std::sin(0.1f * static_cast<float>(i));
  for (size_t r = 0; r < 128; ++r) {
    for (size_t c = 0; c < 128; ++c) {
      w[r * 256 + c] = std::nanf("");
      w[r * 256 + c + 128] = 0.0f;
    }
  }
  const QString path = dir_.filePath(QStringLiteral("grey.safetensors"));
  write_safetensors(path.toStdString(), {{"g.weight", StDtype::F32, {256, 256}, f32_bytes(w)}});
  CheckpointTab tab;
  QVERIFY(test::shown_with_file(tab, path, 1300, 800));
  tab.selectTensor(QStringLiteral("g.weight"));
  tab.selectRecipe(QStringLiteral("E4M3FN 128x128"));
  ExportablePlot* blocks = tab.plots()[2];
  // Said under the map, on a line of the axis label: over its top it hid the top row.
  QVERIFY2(blocks->xAxis->label().endsWith(QStringLiteral("\ngrey: no finite nonzero value")),
           qPrintable(blocks->xAxis->label()));
  for (int i = 0; i < blocks->itemCount(); ++i) {
    if (auto* text = qobject_cast<QCPItemText*>(blocks->item(i)))
      QVERIFY2(!text->text().contains(QStringLiteral("grey")), qPrintable(text->text()));
  }
  blocks->replot();
  const QImage img = blocks->toPixmap(blocks->width(), blocks->height()).toImage();
  auto at = [&](double x, double y) {
    return img.pixelColor(static_cast<int>(blocks->xAxis->coordToPixel(x)),
                          static_cast<int>(blocks->yAxis->coordToPixel(y)));
  };
  // Block row 0 (columns 0 and 1) has no signal, row 1 has.
  QCOMPARE(at(0, 0), QColor(0xb0, 0xb0, 0xb0));
  QCOMPARE(at(1, 0), QColor(0xb0, 0xb0, 0xb0));
  QVERIFY(at(0, 1) != QColor(0xb0, 0xb0, 0xb0));
  QVERIFY(at(1, 1) != QColor(0xb0, 0xb0, 0xb0));
  // The colour scale spans the blocks with a figure (QCustomPlot's own rescale gave NaN
  // where the first block was NaN).
  const QCPRange range = blocks->findChild<QCPColorScale*>()
                             ? blocks->findChild<QCPColorScale*>()->dataRange()
                             : QCPRange();
  QVERIFY2(std::isfinite(range.lower) && std::isfinite(range.upper) && range.lower > 0 &&
               range.upper < 1,
           qPrintable(QStringLiteral("%1 %2").arg(range.lower).arg(range.upper)));
}

// A filter that no tensor's name passes: no figures of the tensor filtered out, no axes
// of its ranges, and the caption says why; cleared, the first tensor is shown again.
void CheckpointTabTest::aFilterThatMatchesNothingShowsNoFigures() {
  std::vector<float> w(64 * 64);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.02f * std::sin(0.1f * static_cast<float>(i));
  const QString path = dir_.filePath(QStringLiteral("filter.safetensors"));
  write_safetensors(path.toStdString(), {{"a.weight", StDtype::F32, {64, 64}, f32_bytes(w)},
                                         {"b.weight", StDtype::F32, {64, 64}, f32_bytes(w)}});
  CheckpointTab tab;
  QVERIFY(test::shown_with_file(tab, path, 1300, 800));
  QVERIFY(caption_text(tab).contains(QStringLiteral("amax")));
  auto* filter = tab.findChild<QLineEdit*>(QStringLiteral("checkpointFilter"));
  QVERIFY(filter);
  QTest::keyClicks(filter, QStringLiteral("zzz"));
  QCOMPARE(tab.proxy()->rowCount(), 0);
  QVERIFY2(caption_text(tab).contains(QStringLiteral("No tensor's name contains “zzz”")),
           qPrintable(caption_text(tab)));
  QVERIFY(!caption_text(tab).contains(QStringLiteral("amax")));
  for (ExportablePlot* p : tab.plots()) {
    QVERIFY(!p->xAxis->visible());
    for (int i = 0; i < p->plottableCount(); ++i) {
      if (auto* one_d = p->plottable(i)->interface1D()) QCOMPARE(one_d->dataCount(), 0);
    }
  }
  filter->clear();
  QCOMPARE(tab.proxy()->rowCount(), 2);
  QTRY_VERIFY(caption_text(tab).contains(QStringLiteral("amax")));
  QVERIFY(tab.plots()[0]->xAxis->visible());
}

// A recipe that represents every value exactly has an SQNR of +inf: its bar, whose length
// is no figure, ends past the largest finite one at a dashed line marked "inf" (before, it
// read as a finite bar of 1.1 x the largest).
void CheckpointTabTest::exactRecipesSayInf() {
  // Powers of two from 2^-3 to 2^3: one tensorwise scale (448 / 8) gives each an E4M3 and
  // an E5M2 code exactly; FP4's one mantissa bit cannot hold 1.75 x 2^k.
  std::vector<float> w(64 * 64);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = std::ldexp(i % 2 ? -1.0f : 1.0f, static_cast<int>(i % 7) - 3);
  const QString path = dir_.filePath(QStringLiteral("exact.safetensors"));
  write_safetensors(path.toStdString(), {{"e.weight", StDtype::F32, {64, 64}, f32_bytes(w)}});
  CheckpointTab tab;
  QVERIFY(test::shown_with_file(tab, path, 1300, 800));
  tab.selectTensor(QStringLiteral("e.weight"));
  const TensorAnalysis* t = tab.model()->tensorAt(0);
  QVERIFY(t);
  double top = 0;
  int exact = 0;
  for (const auto& r : t->recipes) {
    if (std::isinf(r.sqnr_db) && r.sqnr_db > 0) ++exact;
    if (std::isfinite(r.sqnr_db)) top = std::max(top, r.sqnr_db);
  }
  QVERIFY(exact > 0 && exact < static_cast<int>(t->recipes.size()));
  QVERIFY(top > 0);
  ExportablePlot* chart = tab.plots()[1];
  QCPItemStraightLine* line = nullptr;
  QCPItemText* label = nullptr;
  for (int i = 0; i < chart->itemCount(); ++i) {
    if (chart->item(i)->objectName() == QStringLiteral("exactLine"))
      line = qobject_cast<QCPItemStraightLine*>(chart->item(i));
    if (chart->item(i)->objectName() == QStringLiteral("exactLabel"))
      label = qobject_cast<QCPItemText*>(chart->item(i));
  }
  QVERIFY(line && label);
  QCOMPARE(label->text(), QStringLiteral("inf"));
  // Past every finite bar, inside the axis's range; the exact bars end there, the others
  // before it.
  const double at = line->point1->coords().x();
  QCOMPARE(line->point2->coords().x(), at);
  QCOMPARE(label->position->coords().x(), at);
  QVERIFY(at > top && at < chart->xAxis->range().upper);
  int ending_there = 0;
  for (int p = 0; p < chart->plottableCount(); ++p) {
    auto* bars = qobject_cast<QCPBars*>(chart->plottable(p));
    if (!bars) continue;
    for (auto it = bars->data()->constBegin(); it != bars->data()->constEnd(); ++it) {
      if (it->value == at) ++ending_there;
      QVERIFY(it->value <= at);
    }
  }
  QCOMPARE(ending_there, exact);
}

// A recommendation that still turns 1% or more of the nonzero values into 0 (a tensor
// spanning 120 binades: no E4M3 recipe keeps them) is not drawn in the green of a tensor
// well served; a Gaussian weight's is; the legend says what the other colour means.
void CheckpointTabTest::aRecommendationThatLosesValuesIsNotGreen() {
  std::vector<float> wide(64 * 64), normal(64 * 64);
  for (size_t i = 0; i < wide.size(); ++i) {
    wide[i] = std::ldexp(1.0f, static_cast<int>((i * 37) % 121) - 60);
    normal[i] = 0.02f * std::sin(0.37f * static_cast<float>(i));
  }
  const QString path = dir_.filePath(QStringLiteral("lossy.safetensors"));
  write_safetensors(path.toStdString(), {{"wide", StDtype::F32, {64, 64}, f32_bytes(wide)},
                                         {"normal", StDtype::F32, {64, 64}, f32_bytes(normal)}});
  CheckpointTab tab;
  QVERIFY(test::shown_with_file(tab, path, 1300, 800));
  std::map<QString, QColor> colour;
  std::map<QString, double> lost;
  for (int row = 0; row < tab.model()->rowCount(); ++row) {
    const TensorAnalysis* t = tab.model()->tensorAt(row);
    QVERIFY(t && !t->recommended.empty());
    for (const RecipeResult& r : t->recipes)
      if (r.name == t->recommended) lost[QString::fromStdString(t->name)] = r.underflow_pct;
    colour[QString::fromStdString(t->name)] = tab.model()
                                                  ->index(row, CheckpointModel::Recommended)
                                                  .data(Qt::ForegroundRole)
                                                  .value<QBrush>()
                                                  .color();
  }
  QVERIFY2(lost[QStringLiteral("wide")] >= 1.0, qPrintable(QString::number(lost["wide"])));
  QVERIFY(lost[QStringLiteral("normal")] < 1.0);
  const QColor green = colour[QStringLiteral("normal")];
  QVERIFY(green.green() > green.red());
  const QColor other = colour[QStringLiteral("wide")];
  QVERIFY2(other.red() > other.green(), qPrintable(other.name()));
  bool said = false;
  for (QLabel* l : tab.findChildren<QLabel*>())
    said |= l->text().contains(other.name()) && l->text().contains(QStringLiteral("into 0"));
  QVERIFY(said);
}

// A tensor without dimensions says "scalar" in the shape column, not a blank.
void CheckpointTabTest::aScalarsShapeIsSaid() {
  const QString path = dir_.filePath(QStringLiteral("scalar.safetensors"));
  write_safetensors(path.toStdString(), {{"s", StDtype::F32, {}, f32_bytes({0.5f})},
                                         {"v", StDtype::F32, {3}, f32_bytes({1, 2, 3})}});
  CheckpointTab tab;
  QVERIFY(test::shown_with_file(tab, path, 1300, 800));
  std::map<QString, QString> shapes;
  for (int row = 0; row < tab.model()->rowCount(); ++row) {
    shapes[tab.model()->index(row, CheckpointModel::Name).data().toString()] =
        tab.model()->index(row, CheckpointModel::Shape).data().toString();
  }
  QCOMPARE(shapes[QStringLiteral("s")], QStringLiteral("scalar"));
  QCOMPARE(shapes[QStringLiteral("v")], QStringLiteral("3"));
}

// A shard's tensor that the index's weight_map does not name: not listed, and said on the
// status line, as `fp8wb inspect` says it.
void CheckpointTabTest::shardTensorsOutsideTheIndexAreSaid() {
  write_safetensors(dir_.filePath(QStringLiteral("s1.safetensors")).toStdString(),
                    {{"a.weight", StDtype::F32, {2}, f32_bytes({0.5f, 1.0f})},
                     {"b.extra", StDtype::F32, {2}, f32_bytes({0.5f, 1.0f})},
                     {"c.extra", StDtype::F32, {2}, f32_bytes({0.5f, 1.0f})}});
  const QString index = dir_.filePath(QStringLiteral("part.safetensors.index.json"));
  QFile f(index);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(R"({"weight_map": {"a.weight": "s1.safetensors"}})");
  f.close();
  CheckpointTab tab;
  QSignalSpy loaded(&tab, &CheckpointTab::checkpointLoaded);
  tab.openCheckpoint(index);
  QVERIFY(loaded.wait(60000));
  QCOMPARE(tab.model()->rowCount(), 1);
  QVERIFY2(tab.statusText().endsWith(QStringLiteral(
               "; 2 tensors in the shards not in the index's weight_map, not analysed (first: "
               "b.extra in s1.safetensors)")),
           qPrintable(tab.statusText()));
}

// A download cut short: the status line says once that the file is truncated and how many
// tensors it cuts off; each of their rows says how much of it is there, without the
// file's path and the byte offsets again.
void CheckpointTabTest::aTruncatedFileIsSaidOnce() {
  const QString path = dir_.filePath(QStringLiteral("cut.safetensors"));
  const std::vector<float> w(64 * 64, 0.5f);
  write_safetensors(path.toStdString(), {{"a.weight", StDtype::F32, {64, 64}, f32_bytes(w)},
                                         {"b.weight", StDtype::F32, {64, 64}, f32_bytes(w)},
                                         {"c.weight", StDtype::F32, {64, 64}, f32_bytes(w)}});
  QFile f(path);
  QVERIFY(f.resize(f.size() - 16384 - 100));
  CheckpointTab tab;
  QSignalSpy loaded(&tab, &CheckpointTab::checkpointLoaded);
  tab.openCheckpoint(path);
  QVERIFY(loaded.wait(60000));
  QCOMPARE(tab.model()->rowCount(), 3);
  QVERIFY2(tab.statusText().endsWith(
               QStringLiteral("; the file is truncated: 2 tensors cut off (see their rows)")),
           qPrintable(tab.statusText()));
  // The cell says what happened, its tooltip how much of the tensor is there.
  std::map<QString, QString> why, tip;
  for (int r = 0; r < tab.model()->rowCount(); ++r) {
    const QString name = tab.model()->index(r, CheckpointModel::Name).data().toString();
    why[name] = tab.model()->index(r, CheckpointModel::Recommended).data().toString();
    tip[name] =
        tab.model()->index(r, CheckpointModel::Recommended).data(Qt::ToolTipRole).toString();
  }
  QCOMPARE(why[QStringLiteral("b.weight")],
           QStringLiteral("none: values unknown: cut off by the end of the file"));
  QVERIFY2(tip[QStringLiteral("b.weight")].contains(
               QStringLiteral("values unknown: cut off by the end of the file (16284 of its "
                              "16384 bytes there)")),
           qPrintable(tip[QStringLiteral("b.weight")]));
  QCOMPARE(why[QStringLiteral("c.weight")],
           QStringLiteral("none: values unknown: cut off by the end of the file"));
  QVERIFY2(tip[QStringLiteral("c.weight")].contains(
               QStringLiteral("values unknown: cut off by the end of the file (none of its "
                              "16384 bytes there)")),
           qPrintable(tip[QStringLiteral("c.weight")]));
  QCOMPARE(why[QStringLiteral("a.weight")], QStringLiteral("E4M3FN tensorwise"));
}

// The caption gives the typical block of the recipe chosen under "Block errors of" beside
// the whole tensor's SQNR, which outliers carry; it follows the choice.
void CheckpointTabTest::theCaptionGivesTheChosenRecipesMedianBlock() {
  std::vector<float> x(256 * 256);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 1e-3f * std::sin(0.7f * static_cast<float>(i)) *
           (1.0f + 0.001f * static_cast<float>(i % 97));
  for (size_t k = 0; k < 4; ++k) x[k * 16411] = 1000.0f;
  const QString path = dir_.filePath(QStringLiteral("outliers.safetensors"));
  write_safetensors(path.toStdString(), {{"w", StDtype::F32, {256, 256}, f32_bytes(x)}});
  CheckpointTab tab;
  QSignalSpy loaded(&tab, &CheckpointTab::checkpointLoaded);
  tab.openCheckpoint(path);
  QVERIFY(loaded.wait(60000));
  const TensorAnalysis* t = tab.model()->tensorAt(0);
  QVERIFY(t);
  auto* recipe = tab.findChild<QComboBox*>(QStringLiteral("checkpointRecipe"));
  QVERIFY(recipe);
  for (const char* name : {"E4M3FN tensorwise", "E4M3FN 1x128"}) {
    recipe->setCurrentIndex(recipe->findText(QString::fromLatin1(name)));
    QCOMPARE(recipe->currentText(), QString::fromLatin1(name));
    const RecipeResult* r = nullptr;
    for (const RecipeResult& e : t->recipes)
      if (e.name == name) r = &e;
    QVERIFY(r);
    const BlockSqnr b = median_block_sqnr(*r);
    const QString said =
        QStringLiteral(
            "%1: the block map's median cell has an SQNR of %2 dB (of %3 cells with "
            "values), against %4 dB for the whole tensor.")
            .arg(QString::fromLatin1(name))
            .arg(b.median_db, 0, 'f', 1)
            .arg(b.blocks)
            .arg(r->sqnr_db, 0, 'f', 1);
    QVERIFY2(caption_text(tab).contains(said), qPrintable(caption_text(tab) + said));
  }
}

// The table's "worst SQNR first", as `fp8wb inspect`'s: finite SQNRs ascending, then the
// exact tensors, then those without an SQNR (integers, all zeros).
void CheckpointTabTest::worstFirstPutsExactThenNoSqnrLast() {
  std::vector<float> fine(256);
  for (size_t i = 0; i < 256; ++i) fine[i] = 0.01f * std::sin(0.37f * static_cast<float>(i));
  const QString path = dir_.filePath(QStringLiteral("order.safetensors"));
  write_safetensors(path.toStdString(),
                    {{"a.ints", StDtype::I32, {4}, std::vector<uint8_t>(16, 1)},
                     {"b.exact", StDtype::F32, {16, 16}, f32_bytes(std::vector<float>(256, 0.5f))},
                     {"c.zeros", StDtype::F32, {16, 16}, f32_bytes(std::vector<float>(256, 0.0f))},
                     {"d.fine", StDtype::F32, {16, 16}, f32_bytes(fine)}});
  CheckpointTab tab;
  QSignalSpy loaded(&tab, &CheckpointTab::checkpointLoaded);
  tab.openCheckpoint(path);
  QVERIFY(loaded.wait(60000));
  QStringList order;
  for (int r = 0; r < tab.proxy()->rowCount(); ++r)
    order << tab.proxy()->index(r, CheckpointModel::Name).data(Qt::EditRole).toString();
  QCOMPARE(order.mid(0, 2), (QStringList{QStringLiteral("d.fine"), QStringLiteral("b.exact")}));
  QCOMPARE(QSet<QString>(order.begin() + 2, order.end()),
           (QSet<QString>{QStringLiteral("a.ints"), QStringLiteral("c.zeros")}));
}

// Issue 52's weight (2048 x 512, one row 1150 times the others): the table gives the share
// of the values the recommended recipe (rowwise) turns into 0 in a column of its own, in
// two significant digits where it is below 0.001% (not "0.000%"), sorting by the figure;
// "-" for a tensor without a recommendation.
void CheckpointTabTest::theRecommendedRecipesUnderflowHasAColumn() {
  std::mt19937 rng(52);
  std::normal_distribution<float> nd(0, 0.02f);
  std::vector<float> w(2048 * 512);
  for (float& v : w) v = nd(rng);
  for (size_t c = 0; c < 512; ++c) w[7 * 512 + c] *= 1150.0f;
  std::vector<uint8_t> b(w.size() * 4);
  std::memcpy(b.data(), w.data(), b.size());
  const QString path = dir_.filePath(QStringLiteral("outlier-row.safetensors"));
  write_safetensors(path.toStdString(),
                    {{"mlp.weight", StDtype::F32, {2048, 512}, b},
                     {"zero.weight", StDtype::F32, {16, 16}, std::vector<uint8_t>(1024, 0)}});
  CheckpointTab tab;
  QSignalSpy loaded(&tab, &CheckpointTab::checkpointLoaded);
  tab.openCheckpoint(path);
  QVERIFY(loaded.wait(60000));
  const QAbstractItemModel* m = tab.proxy();
  QCOMPARE(m->headerData(CheckpointModel::RecommendedUnderflow, Qt::Horizontal).toString(),
           QStringLiteral("its underflow"));
  bool seen_weight = false;
  for (int r = 0; r < m->rowCount(); ++r) {
    const QString name = m->index(r, CheckpointModel::Name).data().toString();
    const QModelIndex cell = m->index(r, CheckpointModel::RecommendedUnderflow);
    if (name == QLatin1String("zero.weight")) {
      QCOMPARE(cell.data().toString(), QStringLiteral("-"));
      continue;
    }
    seen_weight = true;
    QCOMPARE(m->index(r, CheckpointModel::Recommended).data().toString(),
             QStringLiteral("E4M3FN rowwise"));
    const TensorAnalysis* t = tab.model()->tensorAt(tab.proxy()->mapToSource(m->index(r, 0)).row());
    QVERIFY(t);
    double pct = -1;
    for (const RecipeResult& rr : t->recipes)
      if (rr.name == "E4M3FN rowwise") pct = rr.underflow_pct;
    QVERIFY(pct > 0 && pct < 0.001);
    QCOMPARE(cell.data().toString(), QString::number(pct, 'g', 2) + QLatin1Char('%'));
    QCOMPARE(cell.data(Qt::EditRole).toDouble(), pct);
  }
  QVERIFY(seen_weight);
}

QTEST_MAIN(CheckpointTabTest)
#include "checkpoint_tab_test.moc"
