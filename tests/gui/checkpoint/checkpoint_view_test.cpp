// What a user sees of a checkpoint and of the format plots at the default window size
// (1400x900), offscreen, in the real main window: the recipe x format chart's labels fit
// and use the format table's names; the recommended and the selected recipe are marked
// in table and chart, each answer with its criterion; the empty state is a placeholder;
// a file that is no checkpoint says what it is not; an empty block map does not look
// like data; NaN and Inf are counted in the table; legends sit beside the data, not on
// it; the ULP axis label fits; exported pictures carry a title.
#include <QComboBox>
#include <QHeaderView>
#include <QLabel>
#include <QMenu>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "fp8wb/core/checkpoint/safetensors.h"
#include "fp8wb/kernels/format.h"
#include "fp8wb/views/checkpoint/checkpoint_tab.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/common/loss_curves.h"
#include "fp8wb/views/formats/format_plots.h"
#include "fp8wb/views/formats/formats_tab.h"
#include "fp8wb/views/run_tabs/run_tabs.h"
#include "main_window.h"

using namespace fp8wb;

namespace {

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// The format table's names: the one name a format goes by.
std::set<QString> table_names() {
  std::set<QString> out;
  for (Format f : {Format::E4M3FN, Format::E5M2, Format::E4M3FNUZ, Format::E5M2FNUZ,
                   Format::E8M0FNU, Format::E2M1FN, Format::E3M2FN, Format::E2M3FN}) {
    out.insert(QString::fromLatin1(format_info(f).name.data(),
                                   static_cast<int>(format_info(f).name.size())));
  }
  return out;
}

// Every word of `text` that looks like a format name ("E4M3", "E5M2FNUZ", "E4M3UZ").
QStringList format_words(const QString& text) {
  QStringList out;
  static const QRegularExpression word(QStringLiteral("\\bE\\d+M\\d+[A-Z]*\\b"));
  for (auto it = word.globalMatch(text); it.hasNext();) out << it.next().captured(0);
  return out;
}

int column_titled(const QAbstractItemModel* m, const QString& starts) {
  for (int c = 0; c < m->columnCount(); ++c) {
    if (m->headerData(c, Qt::Horizontal, Qt::DisplayRole).toString().startsWith(starts)) return c;
  }
  return -1;
}

// How many dark pixels lie in the rows [y0, y1) and the middle 40% of the columns.
int dark_pixels(const QImage& img, int y0, int y1) {
  int n = 0;
  for (int y = y0; y < y1 && y < img.height(); ++y) {
    for (int x = img.width() * 3 / 10; x < img.width() * 7 / 10; ++x)
      n += qGray(img.pixel(x, y)) < 110;
  }
  return n;
}

}  // namespace

class CheckpointViewTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    qputenv("XDG_DATA_HOME", dir_.path().toUtf8());
    qputenv("XDG_CONFIG_HOME", dir_.path().toUtf8());
    // One checkpoint: a smooth weight, one with outlier channels (finer scaling wins), one
    // with NaN and Inf, and an integer tensor (described, not quantized).
    std::vector<float> w(256 * 128), x(128 * 256), bad(64 * 64, 0.25f);
    for (size_t i = 0; i < w.size(); ++i) w[i] = 0.02f * std::sin(0.1f * static_cast<float>(i));
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = (i % 256 == 5 ? 3000.0f : 1.0f) * std::cos(0.3f * static_cast<float>(i));
    bad[1] = NAN;
    bad[2] = NAN;
    bad[9] = INFINITY;
    path_ = dir_.filePath(QStringLiteral("model.safetensors"));
    write_safetensors(path_.toStdString(),
                      {{"a.weight", StDtype::F32, {256, 128}, f32_bytes(w)},
                       {"b.outliers", StDtype::F32, {128, 256}, f32_bytes(x)},
                       {"c.nonfinite", StDtype::F32, {64, 64}, f32_bytes(bad)},
                       {"d.step", StDtype::I64, {4}, std::vector<uint8_t>(32, 0)}});
  }
  void emptyStateIsAPlaceholder();
  void aFileThatIsNoCheckpointSaysWhatItIsNot();
  void chartLabelsFitAndUseTheFormatTable();
  void recommendedAndSelectedAreMarked();
  void bestAndRecommendedStateTheirCriteria();
  void anEmptyBlockMapDoesNotLookLikeData();
  void nanAndInfAreCountedInTheTable();
  void histogramShowsItsSmallestBins();
  void legendsDoNotCoverTheData();
  void theUlpAxisLabelFits();
  void exportedPicturesHaveATitle();
  void theExportMenuNamesEveryPlotByItsTitle();
  void longReasonsKeepTheRecommendationColumnNarrow();
  void exportedTitlesAreWholeAndTheColourBarShows();
  void aLongTensorNameWrapsAtItsDotsAndTheColourBarKeepsItsGap();

 private:
  // The main window at the default size, shown (offscreen), on `tab`.
  std::unique_ptr<MainWindow> window(const QString& tab) {
    auto w = std::make_unique<MainWindow>(false);
    w->resize(1400, 900);
    w->show();
    w->selectTab(tab);
    QTest::qWait(50);
    return w;
  }
  bool load(MainWindow& w, const QString& path) {
    QSignalSpy loaded(w.checkpointTab(), &CheckpointTab::checkpointLoaded);
    w.checkpointTab()->openCheckpoint(path);
    if (!loaded.wait(60000)) return false;
    QCoreApplication::processEvents();
    return true;
  }
  ExportablePlot* chart(MainWindow& w) {
    return w.checkpointTab()->findChild<ExportablePlot*>(QStringLiteral("checkpointSqnrChart"));
  }
  QTemporaryDir dir_;
  QString path_;
};

void CheckpointViewTest::emptyStateIsAPlaceholder() {
  auto w = window(QStringLiteral("Checkpoint"));
  auto* placeholder =
      w->checkpointTab()->findChild<QLabel*>(QStringLiteral("checkpointPlaceholder"));
  QVERIFY(placeholder);
  QVERIFY(placeholder->isVisible());
  QVERIFY(placeholder->text().startsWith(QStringLiteral("Open a checkpoint")));
  // No axes, no colour scale, no empty table under it.
  for (ExportablePlot* p : w->checkpointTab()->plots()) QVERIFY(!p->isVisible());
  QVERIFY(!w->checkpointTab()->findChild<QTableView*>()->isVisible());
  // Once a file is open the placeholder gives way to the figures.
  QVERIFY(load(*w, path_));
  QVERIFY(!placeholder->isVisible());
  for (ExportablePlot* p : w->checkpointTab()->plots()) QVERIFY(p->isVisible());
}

void CheckpointViewTest::aFileThatIsNoCheckpointSaysWhatItIsNot() {
  const QString png = dir_.filePath(QStringLiteral("x.png"));
  QFile f(png);
  QVERIFY(f.open(QIODevice::WriteOnly));
  // The signature and the start of the IHDR chunk (29 bytes, NULs included).
  static const char kPng[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x10\0\0\0\x10\x08\x06\0\0\0";
  f.write(QByteArray(kPng, static_cast<qsizetype>(sizeof kPng - 1)));
  f.close();
  auto w = window(QStringLiteral("Checkpoint"));
  QVERIFY(load(*w, path_));
  QSignalSpy failed(w->checkpointTab(), &CheckpointTab::failed);
  w->checkpointTab()->openCheckpoint(png);
  QVERIFY(failed.wait(30000));
  const QString m = failed.at(0).at(0).toString();
  QVERIFY2(m.contains(png + QStringLiteral(" is not a safetensors file: its first 8 bytes do not "
                                           "give a header length (expected a little-endian "
                                           "length below 100 MB followed by '{')")),
           qPrintable(m));
  QVERIFY2(!m.contains(QStringLiteral("over the 100 MB limit")), qPrintable(m));
  // The checkpoint analysed before stays on screen, and the status line says it is that
  // one's, not the refused file's.
  auto* placeholder =
      w->checkpointTab()->findChild<QLabel*>(QStringLiteral("checkpointPlaceholder"));
  QVERIFY(placeholder && !placeholder->isVisible());
  QVERIFY2(w->checkpointTab()->statusText().contains(QStringLiteral("still showing ") + path_),
           qPrintable(w->checkpointTab()->statusText()));
}

void CheckpointViewTest::chartLabelsFitAndUseTheFormatTable() {
  auto w = window(QStringLiteral("Checkpoint"));
  QVERIFY(load(*w, path_));
  w->checkpointTab()->selectTensor(QStringLiteral("a.weight"));
  ExportablePlot* c = chart(*w);
  QVERIFY(c);
  c->replot();
  QVERIFY(c->plottableCount() > 0);
  QCPAxis* key = c->plottable(0)->keyAxis();
  auto ticker = qSharedPointerDynamicCast<QCPAxisTickerText>(key->ticker());
  QVERIFY(ticker);
  const QFontMetrics fm(key->tickLabelFont());
  const bool vertical = key->orientation() == Qt::Vertical;
  const bool rotated = std::fabs(key->tickLabelRotation()) > 45;
  // Along the axis, the labels one after another fit in its length (no two collide) ...
  double along = 0, across = 0;
  for (const QString& label : ticker->ticks()) {
    const double wdt = fm.horizontalAdvance(label), hgt = fm.height();
    along += (vertical != rotated) ? hgt : wdt;
    across = std::max(across, (vertical != rotated) ? wdt : hgt);
  }
  const QRect rect = c->axisRect()->rect();
  const double length = vertical ? rect.height() : rect.width();
  QVERIFY2(along <= length,
           qPrintable(QStringLiteral("labels need %1 px, the axis has %2").arg(along).arg(length)));
  // ... and across it, the longest one fits between the axis and the plot's edge.
  const double room =
      vertical ? (key->axisType() == QCPAxis::atLeft ? rect.left() : c->width() - rect.right())
               : (key->axisType() == QCPAxis::atBottom ? c->height() - rect.bottom() : rect.top());
  QVERIFY2(across <= room,
           qPrintable(QStringLiteral("a label is %1 px, there are %2").arg(across).arg(room)));
  // Formats go by the format table's names, in labels and legend alike.
  const std::set<QString> names = table_names();
  QStringList shown = ticker->ticks().values();
  for (int i = 0; i < c->plottableCount(); ++i) shown << c->plottable(i)->name();
  for (const QString& text : shown) {
    for (const QString& word : format_words(text))
      QVERIFY2(names.count(word), qPrintable(word + QStringLiteral(" in '") + text + "'"));
  }
  QVERIFY(std::any_of(shown.begin(), shown.end(),
                      [](const QString& s) { return s.contains(QStringLiteral("E4M3FNUZ")); }));
}

void CheckpointViewTest::recommendedAndSelectedAreMarked() {
  auto w = window(QStringLiteral("Checkpoint"));
  QVERIFY(load(*w, path_));
  CheckpointTab* tab = w->checkpointTab();
  tab->selectTensor(QStringLiteral("b.outliers"));
  QCoreApplication::processEvents();
  const TensorAnalysis* t = nullptr;
  for (int r = 0; r < tab->model()->rowCount(); ++r) {
    if (tab->model()->tensorAt(r)->name == "b.outliers") t = tab->model()->tensorAt(r);
  }
  QVERIFY(t && !t->recommended.empty());
  double rec_sqnr = NAN;
  for (const auto& r : t->recipes) {
    if (r.name == t->recommended) rec_sqnr = r.sqnr_db;
  }
  // The chart: an outline around the recommended recipe's bar, as long as its SQNR.
  ExportablePlot* c = chart(*w);
  auto mark = [&](const QString& name) -> QCPItemRect* {
    for (int i = 0; i < c->itemCount(); ++i) {
      if (c->item(i)->objectName() == name) return qobject_cast<QCPItemRect*>(c->item(i));
    }
    return nullptr;
  };
  QCPItemRect* rec = mark(QStringLiteral("recommendedMark"));
  QVERIFY(rec);
  QCOMPARE(std::max(rec->topLeft->coords().x(), rec->bottomRight->coords().x()), rec_sqnr);
  // The table: the recommended recipe in bold.
  const int rc = column_titled(tab->proxy(), QStringLiteral("recommended"));
  QVERIFY(rc >= 0);
  int row = -1;
  for (int r = 0; r < tab->proxy()->rowCount(); ++r) {
    if (tab->proxy()->index(r, 0).data().toString() == QStringLiteral("b.outliers")) row = r;
  }
  QVERIFY(row >= 0);
  QCOMPARE(tab->proxy()->index(row, rc).data().toString(), QString::fromStdString(t->recommended));
  QVERIFY(tab->proxy()->index(row, rc).data(Qt::FontRole).value<QFont>().bold());
  // Another recipe chosen with the keyboard in "Block errors of": marked in the chart, and
  // cells naming it in the table are highlighted.
  auto* recipe = tab->findChild<QComboBox*>(QStringLiteral("checkpointRecipe"));
  QVERIFY(recipe);
  const int before = recipe->currentIndex();
  recipe->setFocus();
  QTest::keyClick(recipe, Qt::Key_Down);
  QVERIFY(recipe->currentIndex() != before);
  const QString chosen = recipe->currentText();
  QCPItemRect* sel = mark(QStringLiteral("selectedMark"));
  QVERIFY(sel);
  double chosen_sqnr = NAN;
  for (const auto& r : t->recipes) {
    if (QString::fromStdString(r.name) == chosen) chosen_sqnr = r.sqnr_db;
  }
  // Its outline ends a few pixels past its bar, so that it shows beside the recommended
  // one's where both mark one bar.
  const auto right_end = [](const QCPItemRect* box) {
    return std::max(box->topLeft->coords().x(), box->bottomRight->coords().x());
  };
  QVERIFY(right_end(sel) > std::max(0.0, chosen_sqnr));
  QVERIFY(right_end(sel) <= std::max(0.0, chosen_sqnr) + 0.02 * c->xAxis->range().size());
  recipe->setCurrentIndex(recipe->findText(QString::fromStdString(t->recommended)));
  sel = mark(QStringLiteral("selectedMark"));
  rec = mark(QStringLiteral("recommendedMark"));
  QVERIFY(sel && rec);
  QCOMPARE(right_end(rec), rec_sqnr);
  QVERIFY(c->xAxis->coordToPixel(right_end(sel)) - c->xAxis->coordToPixel(right_end(rec)) >= 3);
  // Both outlines whole inside the plot, their pens too, the first group's included: none
  // drawn at the plot's top or bottom edge.
  recipe->setCurrentIndex(recipe->findText(QStringLiteral("E4M3FN tensorwise")));
  QVERIFY(recipe->currentText() == QStringLiteral("E4M3FN tensorwise"));  // the first group
  sel = mark(QStringLiteral("selectedMark"));
  rec = mark(QStringLiteral("recommendedMark"));
  QVERIFY(sel && rec);
  c->replot();
  for (const QCPItemRect* box : {sel, rec}) {
    const double a = c->yAxis->coordToPixel(box->topLeft->coords().y());
    const double b = c->yAxis->coordToPixel(box->bottomRight->coords().y());
    const double spare = box->pen().widthF() / 2 + 3;
    const QRect area = c->axisRect()->rect();
    QVERIFY2(std::min(a, b) >= area.top() + spare && std::max(a, b) <= area.bottom() - spare,
             qPrintable(QStringLiteral("%1: %2..%3 px in %4..%5")
                            .arg(box->objectName())
                            .arg(std::min(a, b))
                            .arg(std::max(a, b))
                            .arg(area.top())
                            .arg(area.bottom())));
  }
  // Choose the one the best column names for this tensor: its cell is highlighted.
  const int bc = column_titled(tab->proxy(), QStringLiteral("highest SQNR"));
  QVERIFY(bc >= 0);
  const QString best = tab->proxy()->index(row, bc).data().toString();
  recipe->setCurrentIndex(recipe->findText(best));
  QVERIFY(tab->proxy()->index(row, bc).data(Qt::BackgroundRole).value<QBrush>().style() !=
          Qt::NoBrush);
}

void CheckpointViewTest::bestAndRecommendedStateTheirCriteria() {
  auto w = window(QStringLiteral("Checkpoint"));
  QVERIFY(load(*w, path_));
  CheckpointTab* tab = w->checkpointTab();
  const QAbstractItemModel* m = tab->proxy();
  const int bc = column_titled(m, QStringLiteral("highest SQNR"));
  const int rc = column_titled(m, QStringLiteral("recommended"));
  QVERIFY2(bc >= 0 && rc >= 0, "columns named by what they answer");
  // Each column says how it chooses.
  QVERIFY(m->headerData(bc, Qt::Horizontal, Qt::ToolTipRole)
              .toString()
              .contains(QStringLiteral("highest SQNR")));
  const QString rec_tip = m->headerData(rc, Qt::Horizontal, Qt::ToolTipRole).toString();
  QVERIFY2(rec_tip.contains(QStringLiteral("within 1 dB")), qPrintable(rec_tip));
  QVERIFY(rec_tip.contains(QStringLiteral("E4M3FN")));
  // A tensor where they differ: the caption names both, each with its criterion.
  tab->selectTensor(QStringLiteral("a.weight"));
  QCoreApplication::processEvents();
  int row = -1;
  for (int r = 0; r < m->rowCount(); ++r) {
    if (m->index(r, 0).data().toString() == QStringLiteral("a.weight")) row = r;
  }
  const QString best = m->index(row, bc).data().toString();
  const QString rec = m->index(row, rc).data().toString();
  QVERIFY2(best != rec, "the test needs a tensor where they differ");
  QLabel* caption = nullptr;
  for (QLabel* l : tab->findChildren<QLabel*>()) {
    if (l->text().contains(QStringLiteral("a.weight"))) caption = l;
  }
  QVERIFY(caption);
  const QString text = caption->text();
  QVERIFY2(text.contains(QStringLiteral("Highest SQNR of any format: ") + best), qPrintable(text));
  QVERIFY2(text.contains(QStringLiteral("Recommended for E4M3FN")), qPrintable(text));
  QVERIFY2(text.contains(QStringLiteral("within 1 dB")), qPrintable(text));
  QVERIFY(text.contains(rec));
}

void CheckpointViewTest::anEmptyBlockMapDoesNotLookLikeData() {
  auto w = window(QStringLiteral("Checkpoint"));
  QVERIFY(load(*w, path_));
  CheckpointTab* tab = w->checkpointTab();
  tab->selectTensor(QStringLiteral("d.step"));  // I64: not quantized, no map
  QCoreApplication::processEvents();
  ExportablePlot* blocks = tab->plots()[2];
  auto* map = qobject_cast<QCPColorMap*>(blocks->plottable(0));
  QVERIFY(map);
  QVERIFY(map->data()->isEmpty());
  QVERIFY(!map->visible());
  for (int i = 0; i < blocks->plotLayout()->elementCount(); ++i) {
    if (auto* scale = qobject_cast<QCPColorScale*>(blocks->plotLayout()->elementAt(i)))
      QVERIFY2(!scale->visible(), "a colour scale without a map reads as figures");
  }
  QVERIFY(!blocks->xAxis->visible());
  bool said = false;
  for (int i = 0; i < blocks->itemCount(); ++i) {
    if (auto* text = qobject_cast<QCPItemText*>(blocks->item(i)))
      said |= text->text().contains(QStringLiteral("no block"));
  }
  QVERIFY(said);
  // A quantized tensor brings the map back.
  tab->selectTensor(QStringLiteral("a.weight"));
  QCoreApplication::processEvents();
  QVERIFY(map->visible() && !map->data()->isEmpty());
  // The axis says what a block is, and the blocks cover the 256 x 128 tensor.
  const QRegularExpression what(QStringLiteral("^block column \\(blocks of (\\d+) x (\\d+)\\)$"));
  const auto got = what.match(blocks->xAxis->label());
  QVERIFY2(got.hasMatch(), qPrintable(blocks->xAxis->label()));
  const int br = got.captured(1).toInt(), bc = got.captured(2).toInt();
  QVERIFY(br >= 1 && bc >= 1);
  QCOMPARE((256 + br - 1) / br, map->data()->valueSize());
  QCOMPARE((128 + bc - 1) / bc, map->data()->keySize());
  // The histogram counts elements by whole exponents: whole-number ticks on the exponent
  // axis, and on the count axis powers of ten (histogramShowsItsSmallestBins()).
  {
    QCPAxis* a = tab->plots()[0]->xAxis;
    const auto fixed = qSharedPointerDynamicCast<QCPAxisTickerFixed>(a->ticker());
    QVERIFY2(fixed && fixed->tickStep() == 1.0 &&
                 fixed->scaleStrategy() == QCPAxisTickerFixed::ssMultiples,
             qPrintable(a->label()));
  }
  // The scale's top (a block that lost everything) is no white: on the plot's white it
  // would read as an empty block.
  QCPColorGradient g = map->gradient();  // color() is not const
  const QColor top = g.color(1.0, QCPRange(0, 1));
  QVERIFY2(top.lightness() < 200, qPrintable(top.name()));
}

// A bin of a few elements among tens of thousands (the outlier channel's values, those an
// FP8 format may lose) is seen: bars on a log count axis, a bar of one element several
// pixels high; the count axis labelled so, its ticks at powers of ten.
void CheckpointViewTest::histogramShowsItsSmallestBins() {
  auto w = window(QStringLiteral("Checkpoint"));
  QVERIFY(load(*w, path_));
  CheckpointTab* tab = w->checkpointTab();
  tab->selectTensor(QStringLiteral("b.outliers"));
  QCoreApplication::processEvents();
  ExportablePlot* hist = tab->plots()[0];
  hist->replot();
  auto* bars = qobject_cast<QCPBars*>(hist->plottable(0));
  QVERIFY(bars && !bars->data()->isEmpty());
  double smallest = 0, largest = 0;
  for (auto it = bars->data()->constBegin(); it != bars->data()->constEnd(); ++it) {
    if (smallest == 0 || it->value < smallest) smallest = it->value;
    largest = std::max(largest, it->value);
  }
  QVERIFY2(smallest >= 1 && largest > 1000 * smallest,
           qPrintable(QStringLiteral("%1 to %2").arg(smallest).arg(largest)));
  QCPAxis* y = hist->yAxis;
  QCOMPARE(y->scaleType(), QCPAxis::stLogarithmic);
  QVERIFY(y->label().contains(QStringLiteral("log")));
  // Each bar's top is its count (bars stack on their base value: it must add nothing),
  // the tallest under the axis's top, the smallest above its bottom.
  bool found = false;
  QCOMPARE(bars->getValueRange(found).upper, largest);
  QVERIFY(y->range().upper >= largest && y->range().lower < 1);
  const double one_high = std::abs(y->coordToPixel(smallest) - y->coordToPixel(y->range().lower));
  QVERIFY2(one_high >= 0.04 * y->axisRect()->height(),
           qPrintable(QStringLiteral("a bin of %1 is %2 px of %3")
                          .arg(smallest)
                          .arg(one_high)
                          .arg(y->axisRect()->height())));
  for (double t : y->tickVector()) {
    const double p = std::log10(t);
    QVERIFY2(std::abs(p - std::round(p)) < 1e-9, qPrintable(QString::number(t)));
  }
}

void CheckpointViewTest::nanAndInfAreCountedInTheTable() {
  auto w = window(QStringLiteral("Checkpoint"));
  QVERIFY(load(*w, path_));
  const QAbstractItemModel* m = w->checkpointTab()->proxy();
  const int col = column_titled(m, QStringLiteral("NaN"));
  QVERIFY(col >= 0);
  for (int r = 0; r < m->rowCount(); ++r) {
    const QString name = m->index(r, 0).data().toString();
    const QString cell = m->index(r, col).data().toString();
    if (name == QStringLiteral("c.nonfinite"))
      QCOMPARE(cell, QStringLiteral("2 NaN, 1 Inf"));
    else
      QVERIFY2(cell.isEmpty(), qPrintable(name + ": " + cell));
  }
  // The caption of that tensor says so too.
  w->checkpointTab()->selectTensor(QStringLiteral("c.nonfinite"));
  QCoreApplication::processEvents();
  bool said = false;
  for (QLabel* l : w->checkpointTab()->findChildren<QLabel*>())
    said |= l->text().contains(QStringLiteral("c.nonfinite")) &&
            l->text().contains(QStringLiteral("2 NaN, 1 Inf"));
  QVERIFY(said);
}

void CheckpointViewTest::legendsDoNotCoverTheData() {
  auto w = window(QStringLiteral("Formats"));
  w->formatsTab()->setShowAllFormats(true);
  QCoreApplication::processEvents();
  SpacingPlot* spacing = w->formatsTab()->spacingPlot();
  spacing->replot();
  QCOMPARE(spacing->graphCount(), 8);
  QVERIFY(spacing->legend->visible());
  QVERIFY2(!spacing->legend->outerRect().intersects(spacing->axisRect()->rect()),
           "the spacing plot's legend lies on its curves");
  // Overview's loss plot.
  w->selectTab(QStringLiteral("Overview"));
  QCoreApplication::processEvents();
  ExportablePlot* loss = w->overviewTab()->plots()[0];
  loss->replot();
  QVERIFY(loss->legend->visible());
  QVERIFY2(!loss->legend->outerRect().intersects(loss->axisRect()->rect()),
           "Overview's legend lies on its curves");
  // Overlaid loss curves (the sweep's row or column, the Runs tab).
  ExportablePlot overlay;
  overlay.resize(500, 300);
  std::vector<LossCurve> curves(3);
  for (int i = 0; i < 3; ++i) {
    curves[static_cast<size_t>(i)].name = QStringLiteral("run %1").arg(i);
    curves[static_cast<size_t>(i)].colour = i;
    for (int s = 0; s < 50; ++s) {
      curves[static_cast<size_t>(i)].steps << s;
      curves[static_cast<size_t>(i)].losses << 4.0 - 0.01 * s * (i + 1);
    }
  }
  show_loss_curves(&overlay, curves);
  overlay.replot();
  QVERIFY2(!overlay.legend->outerRect().intersects(overlay.axisRect()->rect()),
           "the overlay's legend lies on its curves");
}

void CheckpointViewTest::theUlpAxisLabelFits() {
  auto w = window(QStringLiteral("Formats"));
  for (bool all : {false, true}) {
    w->formatsTab()->setShowAllFormats(all);
    QCoreApplication::processEvents();
    SpacingPlot* spacing = w->formatsTab()->spacingPlot();
    spacing->replot();
    const QFontMetrics fm(spacing->yAxis->labelFont());
    const int need = fm.horizontalAdvance(spacing->yAxis->label());
    QVERIFY2(need <= spacing->axisRect()->rect().height(),
             qPrintable(QStringLiteral("'%1' needs %2 px, the axis is %3 px")
                            .arg(spacing->yAxis->label())
                            .arg(need)
                            .arg(spacing->axisRect()->rect().height())));
    QVERIFY(spacing->yAxis->label().contains(QStringLiteral("ULP")));
  }
}

void CheckpointViewTest::exportedPicturesHaveATitle() {
  auto w = window(QStringLiteral("Formats"));
  QCoreApplication::processEvents();
  // The number line has nothing in the middle of its top margin: a title shows there.
  // (The layout as on screen: measured before the export adds its title.)
  NumberLinePlot* line = w->formatsTab()->numberLinePlot();
  line->replot();
  // Above the data (the axis rect's border left out), at twice the size.
  const int band = line->axisRect()->top() * 2 - 4;
  const QImage screen = line->toPixmap(0, 0, 2.0).toImage();
  const QString png = dir_.filePath(QStringLiteral("line.png"));
  QCOMPARE(line->exportTo(png), QString());
  const QImage exported(png);
  QVERIFY(!exported.isNull());
  QVERIFY2(dark_pixels(screen, 0, band) == 0, "the plot itself has something at the top");
  QVERIFY2(dark_pixels(exported, 0, band) > 30, "no title on top of the exported picture");
  // A PDF too, and the plot on screen is as it was.
  QCOMPARE(line->exportTo(dir_.filePath(QStringLiteral("line.pdf"))), QString());
  QCOMPARE(line->toPixmap(0, 0, 2.0).toImage(), screen);
  // The checkpoint plots: the exported picture differs from the screen by its title.
  w->selectTab(QStringLiteral("Checkpoint"));
  QVERIFY(load(*w, path_));
  for (ExportablePlot* p : w->checkpointTab()->plots()) {
    p->replot();
    const QString file = dir_.filePath(p->objectName() + QStringLiteral(".png"));
    QCOMPARE(p->exportTo(file), QString());
    QVERIFY2(QImage(file).convertToFormat(QImage::Format_RGB32) !=
                 p->toPixmap(0, 0, 2.0).toImage().convertToFormat(QImage::Format_RGB32),
             qPrintable(p->objectName()));
  }
}

// File > Export names each plot of the tab shown by the title its picture carries: the
// Checkpoint tab's recipe chart, whose value axis has no label, is no "Plot of  by SQNR
// (dB)"; and the file name offered is made of that title.
void CheckpointViewTest::theExportMenuNamesEveryPlotByItsTitle() {
  auto w = window(QStringLiteral("Checkpoint"));
  QVERIFY(load(*w, path_));
  auto* exports = w->findChild<QMenu*>(QStringLiteral("export"));
  QVERIFY(exports);
  for (const QString& tab :
       {QStringLiteral("Checkpoint"), QStringLiteral("Formats"), QStringLiteral("Scaling")}) {
    QVERIFY(w->selectTab(tab));
    QCoreApplication::processEvents();
    Q_EMIT exports->aboutToShow();
    QStringList titles;
    for (ExportablePlot* p : w->findChildren<ExportablePlot*>()) {
      if (p->isVisible()) titles << p->exportTitle();
    }
    int named = 0;
    for (QAction* a : exports->actions()) {
      if (a->objectName() != QLatin1String("export-plot")) continue;
      const QString text = a->text();
      QVERIFY2(!text.contains(QLatin1String("  ")) && !text.contains(QLatin1String("of  by")),
               qPrintable(tab + QStringLiteral(": ") + text));
      QVERIFY2(std::any_of(titles.begin(), titles.end(),
                           [&](const QString& t) { return !t.isEmpty() && text.contains(t); }),
               qPrintable(tab + QStringLiteral(": ") + text + QStringLiteral(" names none of ") +
                          titles.join(QStringLiteral(" | "))));
      ++named;
    }
    QVERIFY2(named > 0, qPrintable(tab));
    if (tab == QLatin1String("Checkpoint")) {
      const QList<QAction*> actions = exports->actions();
      QVERIFY(std::any_of(actions.begin(), actions.end(), [](QAction* a) {
        return a->text().contains(QLatin1String("SQNR of every recipe x format: "));
      }));
    }
  }
}

// The integer tensor's reason (a sentence) is no longer the recommendation column's text:
// the cell says its start, its tooltip and the details line under the table the whole
// reason, and the column stays narrow, the SQNR columns in view.
void CheckpointViewTest::longReasonsKeepTheRecommendationColumnNarrow() {
  auto w = window(QStringLiteral("Checkpoint"));
  QVERIFY(load(*w, path_));
  auto* table = w->checkpointTab()->findChild<QTableView*>(QStringLiteral("checkpointTable"));
  QVERIFY(table);
  const QSortFilterProxyModel* proxy = w->checkpointTab()->proxy();
  int row = -1;
  for (int r = 0; r < proxy->rowCount(); ++r) {
    if (proxy->index(r, CheckpointModel::Name).data().toString() == QLatin1String("d.step"))
      row = r;
  }
  QVERIFY(row >= 0);
  const QModelIndex rec = proxy->index(row, CheckpointModel::Recommended);
  const QString reason = QStringLiteral("FP8 holds floating-point values");
  QVERIFY2(!rec.data().toString().contains(reason), qPrintable(rec.data().toString()));
  QVERIFY2(rec.data().toString().startsWith(QStringLiteral("none: an integer tensor")),
           qPrintable(rec.data().toString()));
  QVERIFY2(rec.data(Qt::ToolTipRole).toString().contains(reason),
           qPrintable(rec.data(Qt::ToolTipRole).toString()));
  const int width = table->columnWidth(CheckpointModel::Recommended);
  const int text =
      table->fontMetrics().horizontalAdvance(QStringLiteral("none: an integer tensor"));
  QVERIFY2(width < text + 60, qPrintable(QStringLiteral("%1 px").arg(width)));
  const int right = table->columnViewportPosition(CheckpointModel::BestSqnr) +
                    table->columnWidth(CheckpointModel::BestSqnr);
  QVERIFY2(right <= table->viewport()->width(),
           qPrintable(QStringLiteral("its SQNR ends at %1 px of %2")
                          .arg(right)
                          .arg(table->viewport()->width())));
  w->checkpointTab()->selectTensor(QStringLiteral("d.step"));
  QString details;
  for (QLabel* l : w->checkpointTab()->findChildren<QLabel*>()) details += l->text();
  QVERIFY2(details.contains(reason), qPrintable(details));
}

// An exported picture is the plot as on screen under a band that holds its whole title:
// a long title (the block map's names recipe, tensor and file) is wrapped to the picture's
// width, centred, never cut at its ends; and nothing of the plot is moved or covered (the
// block map's colour bar was under a white box).
void CheckpointViewTest::exportedTitlesAreWholeAndTheColourBarShows() {
  auto w = window(QStringLiteral("Checkpoint"));
  QVERIFY(load(*w, path_));
  w->checkpointTab()->selectTensor(QStringLiteral("b.outliers"));
  QCoreApplication::processEvents();
  bool wrapped = false;
  for (ExportablePlot* p : w->checkpointTab()->plots()) {
    p->replot();
    const QString name = p->objectName();
    const QImage screen = p->toPixmap(0, 0, 2.0).toImage().convertToFormat(QImage::Format_RGB32);
    const QString file = dir_.filePath(name + QStringLiteral(".png"));
    QCOMPARE(p->exportTo(file), QString());
    const QImage image = QImage(file).convertToFormat(QImage::Format_RGB32);
    QCOMPARE(image.width(), screen.width());
    const int band = image.height() - screen.height();  // the title's, over the plot
    QVERIFY2(band >= 0, qPrintable(name));
    // Under the band: the plot as on screen, pixel for pixel but for text's antialiasing.
    qsizetype differ = 0;
    for (int y = 0; y < screen.height(); ++y) {
      for (int x = 0; x < screen.width(); ++x) {
        const QRgb a = screen.pixel(x, y), b = image.pixel(x, y + band);
        differ += std::abs(qRed(a) - qRed(b)) + std::abs(qGreen(a) - qGreen(b)) +
                      std::abs(qBlue(a) - qBlue(b)) >
                  96;
      }
    }
    QVERIFY2(
        differ * 200 < static_cast<qsizetype>(screen.width()) * screen.height(),
        qPrintable(QStringLiteral("%1: %2 pixels differ from the screen").arg(name).arg(differ)));
    // The colour bar (where there is one: its bar along the left of its rect, its ticks
    // and label to the right) shows its colours, not white.
    for (int i = 0; i < p->plotLayout()->elementCount(); ++i) {
      auto* scale = qobject_cast<QCPColorScale*>(p->plotLayout()->elementAt(i));
      if (!scale || !scale->visible()) continue;
      const QRect r = scale->rect();
      int white = 0, n = 0;
      for (int y = r.top() + 2; y < r.bottom() - 2; ++y, ++n) {
        const QRgb c = image.pixel((r.left() + scale->barWidth() / 2) * 2, y * 2 + band);
        white += qRed(c) > 240 && qGreen(c) > 240 && qBlue(c) > 240;
      }
      QVERIFY2(n > 20 && white * 10 < n,
               qPrintable(QStringLiteral("%1: %2 of %3 pixels of the colour bar white")
                              .arg(name)
                              .arg(white)
                              .arg(n)));
    }
    // The title: every line within the picture, every word of it there, centred.
    QVERIFY2(band > 20, qPrintable(name));
    const int room = p->width() - 12;
    const QStringList lines = wrapped_lines(p->exportTitle(), p->exportTitleFont(), room);
    QCOMPARE(lines.join(QLatin1Char(' ')), p->exportTitle().simplified());
    wrapped = wrapped || lines.size() > 1;
    const QFontMetrics fm(p->exportTitleFont());
    for (const QString& line : lines) QVERIFY(fm.horizontalAdvance(line) <= room);
    int left = image.width(), right = -1;
    for (int y = 0; y < band; ++y) {
      for (int x = 0; x < image.width(); ++x) {
        if (qGray(image.pixel(x, y)) < 110) {
          left = std::min(left, x);
          right = std::max(right, x);
        }
      }
    }
    QVERIFY2(right > left, qPrintable(name + QStringLiteral(": no title")));
    const int margin_left = left, margin_right = image.width() - 1 - right;
    QVERIFY2(margin_left > 4 && margin_right > 4 && std::abs(margin_left - margin_right) < 24,
             qPrintable(QStringLiteral("%1: the title spans %2..%3 of %4 px")
                            .arg(name)
                            .arg(left)
                            .arg(right)
                            .arg(image.width())));
  }
  QVERIFY(wrapped);  // the block map's title is longer than its plot is wide
}

// Issue #52: the block map's exported title broke a tensor's name mid-word
// ("down_proj.weigh" / "t"): a name wider than the line breaks after a '.' or '_' (or is
// elided), never inside a word. And the colour bar keeps a gap from the axis label under
// the map, which ran into its bottom.
void CheckpointViewTest::aLongTensorNameWrapsAtItsDotsAndTheColourBarKeepsItsGap() {
  const QString name = QStringLiteral("model.layers.0.mlp.down_proj.weight");
  const QFont font = QApplication::font();
  const QFontMetrics fm(font);
  const QString title = QStringLiteral("Block errors of e4m3 blockwise: ") + name +
                        QStringLiteral(" (model.safetensors)");
  // Widths that break the name: a little narrower than it, and narrower than half of it.
  for (const int room : {fm.horizontalAdvance(name) - 4, fm.horizontalAdvance(name) / 2}) {
    const QStringList lines = wrapped_lines(title, font, room);
    QVERIFY(lines.size() > 1);
    for (const QString& line : lines)
      QVERIFY2(fm.horizontalAdvance(line) <= room, qPrintable(line));
    for (qsizetype i = 0; i + 1 < lines.size(); ++i) {
      const QString a = lines[i].section(QLatin1Char(' '), -1);
      const QString b = lines[i + 1].section(QLatin1Char(' '), 0, 0);
      // Broken between words, or after a '.' or '_' of one.
      const bool between = title.contains(a + QLatin1Char(' ') + b);
      const bool at_boundary =
          title.contains(a + b) && (a.endsWith(QLatin1Char('.')) || a.endsWith(QLatin1Char('_')));
      QVERIFY2(between || at_boundary || a.contains(QChar(0x2026)),
               qPrintable(QStringLiteral("%1 px: \"%2\" / \"%3\"").arg(room).arg(a, b)));
    }
  }
  const QString path = dir_.filePath(QStringLiteral("long.safetensors"));
  std::vector<float> w(256 * 256);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.02f * std::sin(0.1f * static_cast<float>(i));
  write_safetensors(path.toStdString(),
                    {{name.toStdString(), StDtype::F32, {256, 256}, f32_bytes(w)}});
  auto win = window(QStringLiteral("Checkpoint"));
  QVERIFY(load(*win, path));
  win->checkpointTab()->selectTensor(name);
  QCoreApplication::processEvents();
  ExportablePlot* blocks =
      win->checkpointTab()->findChild<ExportablePlot*>(QStringLiteral("checkpointBlockMap"));
  QVERIFY(blocks);
  blocks->replot(QCustomPlot::rpImmediateRefresh);
  const QString file = dir_.filePath(QStringLiteral("blocks.png"));
  QCOMPARE(blocks->exportTo(file), QString());
  QCPColorScale* scale = nullptr;
  for (int i = 0; i < blocks->plotLayout()->elementCount() && !scale; ++i)
    scale = qobject_cast<QCPColorScale*>(blocks->plotLayout()->elementAt(i));
  QVERIFY(scale);
  // The colour bar (its bar: the scale's inner rect) keeps a gap from the x axis' label
  // ("block column (blocks of 4 x 4)", wider than the map), which ran into it.
  QRect label;
  for (int y = 0; y < blocks->height(); ++y)
    for (int x = 0; x < blocks->width(); ++x)
      if (blocks->xAxis->getPartAt(QPointF(x, y)) == QCPAxis::spAxisLabel)
        label |= QRect(x, y, 1, 1);
  QVERIFY(!label.isEmpty());
  // The box QCustomPlot keeps is the axis rect's width; the text, centred on it, is drawn
  // unclipped past its ends where it is wider.
  const int text = QFontMetrics(blocks->xAxis->labelFont())
                       .boundingRect(QRect(), Qt::TextDontClip, blocks->xAxis->label())
                       .width();
  if (text > label.width())
    label = QRect(label.center().x() - text / 2, label.y(), text, label.height());
  const QRect bar = scale->rect();
  QVERIFY2(!label.adjusted(-4, -4, 4, 4).intersects(bar),
           qPrintable(QStringLiteral("the label %1,%2 %3x%4 against the bar %5,%6 %7x%8")
                          .arg(label.x())
                          .arg(label.y())
                          .arg(label.width())
                          .arg(label.height())
                          .arg(bar.x())
                          .arg(bar.y())
                          .arg(bar.width())
                          .arg(bar.height())));
}

QTEST_MAIN(CheckpointViewTest)
#include "checkpoint_view_test.moc"
