// The Formats tab and the main window, offscreen: known values show known bits.
#include <QAbstractItemModelTester>
#include <QApplication>
#include <QFile>
#include <QImage>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QTableView>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QtTest>
#include <cmath>

#include "fp8wb/views/formats/code_table_model.h"
#include "fp8wb/views/formats/demo_views.h"
#include "fp8wb/views/formats/format_card.h"
#include "fp8wb/views/formats/format_plots.h"
#include "fp8wb/views/formats/formats_tab.h"
#include "main_window.h"
#include "screenshot.h"

using namespace fp8wb;

class FormatsTabTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void knownValuesShowKnownBits();
  void badInputShowsAMessage();
  void textFp64RoundsIsNeverExact();
  void oneValueWrittenTwoWaysGetsTheSameNotes();
  void overflowModes();
  void allFormats();
  void codeTableModel();
  void plotsHoldEveryValue();
  void plotExport();
  void mainWindowTabsAndStatus();
  void helpOpensTheShippedDocumentation();
  void presentationMode();
  void screenshot();
  void gradientDemo();
  void outlierDemo();
  void demoPagesAreBuiltOnDemand();
  void valueOffThePlotsIsSaid();
  void clampedNoteGreyedWhileTextIsNoValue();
};

void FormatsTabTest::knownValuesShowKnownBits() {
  FormatsTab tab;
  tab.setValueText(QStringLiteral("1"));
  QCOMPARE(tab.cards().size(), size_t{2});
  QCOMPARE(tab.card(Format::E4M3FN)->bitsText(), QStringLiteral("0 0111 000"));
  QCOMPARE(tab.card(Format::E4M3FN)->decodedText(), QStringLiteral("1"));
  QCOMPARE(tab.card(Format::E4M3FN)->flagsText(), QStringLiteral("exact"));
  QCOMPARE(tab.card(Format::E5M2)->bitsText(), QStringLiteral("0 01111 00"));
  tab.setValueText(QStringLiteral("0.1"));
  QCOMPARE(tab.card(Format::E4M3FN)->bitsText(), QStringLiteral("0 0011 101"));
  QCOMPARE(tab.card(Format::E4M3FN)->decodedText(), QStringLiteral("0.1015625"));
  QCOMPARE(tab.card(Format::E5M2)->decodedText(), QStringLiteral("0.09375"));
  tab.setValueText(QStringLiteral("-2^-9"));
  QCOMPARE(tab.card(Format::E4M3FN)->bitsText(), QStringLiteral("1 0000 001"));
  QVERIFY(tab.card(Format::E4M3FN)->flagsText().contains(QStringLiteral("subnormal")));
}

void FormatsTabTest::badInputShowsAMessage() {
  FormatsTab tab;
  tab.setValueText(QStringLiteral("abc"));
  QVERIFY(tab.errorText().contains(QStringLiteral("not a number")));
  QVERIFY(!tab.card(Format::E4M3FN)->isEnabled());
  tab.setValueText(QStringLiteral("2"));
  QVERIFY(tab.errorText().isEmpty());
  QVERIFY(tab.card(Format::E4M3FN)->isEnabled());
  QCOMPARE(tab.card(Format::E4M3FN)->decodedText(), QStringLiteral("2"));
  tab.setValueText(QStringLiteral("nan"));
  QVERIFY(tab.card(Format::E4M3FN)->flagsText().contains(QStringLiteral("NaN")));
}

// Text that fp64 cannot hold is shown as fp64's nearest value, which the tab says, and
// no encoding of it is called exact, even where the nearest value has an exact code. The
// references: 1 + 1e-20, 2^99 + 1 and 1 + 2^-56 each lie strictly between 1 (or 2^99) and
// the next double, 1 + 2^-52 (2^99 + 2^47), so fp64 holds none of them; 1, 2^99 and 1.5
// (0x1.8p0) are powers of two or short binary fractions, exact in fp64 and in E4M3 or
// E8M0. 2^99 is written out by Qt from std::ldexp.
void FormatsTabTest::textFp64RoundsIsNeverExact() {
  FormatsTab tab;
  tab.setShowAllFormats(true);
  const auto* note = tab.findChild<QLabel*>(QStringLiteral("fp64-note"));
  const QString two99 = QString::number(std::ldexp(1.0, 99), 'f', 0);
  QCOMPARE(two99.size(), 30);
  QVERIFY(two99.endsWith(QLatin1Char('8')));
  const QString two99_plus_1 = two99.left(29) + QLatin1Char('9');
  struct Case {
    QString text;
    Format format;  // a format holding fp64's nearest value exactly
    bool rounded;
  };
  const Case cases[] = {
      {QStringLiteral("1"), Format::E4M3FN, false},
      {QStringLiteral("0x1.8p0"), Format::E4M3FN, false},
      {two99, Format::E8M0FNU, false},
      {QStringLiteral("1.00000000000000000001"), Format::E4M3FN, true},
      {QStringLiteral("0x1.00000000000001p0"), Format::E4M3FN, true},
      {two99_plus_1, Format::E8M0FNU, true},
  };
  for (const Case& c : cases) {
    tab.setValueText(c.text);
    QVERIFY2(tab.errorText().isEmpty(),
             qPrintable(c.text + QStringLiteral(": ") + tab.errorText()));
    const QString flags = tab.card(c.format)->flagsText();
    QVERIFY2(flags.contains(QLatin1String("exact")) == !c.rounded,
             qPrintable(c.text + QStringLiteral(": flags ") + flags));
  }
  QVERIFY2(note, "no label says where fp64 rounded the text");
  for (const Case& c : cases) {
    tab.setValueText(c.text);
    QVERIFY2(note->isVisibleTo(&tab) == c.rounded,
             qPrintable(c.text + QStringLiteral(": note ") + note->text()));
    if (c.rounded) {
      // It names the text and says that fp64 rounded it.
      QVERIFY2(note->text().contains(c.text) && note->text().contains(QLatin1String("fp64")),
               qPrintable(note->text()));
    }
  }
}

// 1e-3, 0.001 and 10^-3 are one value, which fp64 rounds alike to the double shown as
// 0.001: the tab says the same of each (no note that the text was another number, and
// the same cards). Text that says another number than the one shown (0.0010000000000000000001)
// still gets the note.
void FormatsTabTest::oneValueWrittenTwoWaysGetsTheSameNotes() {
  FormatsTab tab;
  const auto* note = tab.findChild<QLabel*>(QStringLiteral("fp64-note"));
  QVERIFY(note);
  auto shown = [&](const QString& text) {
    tab.setValueText(text);
    const FormatCard* c = tab.card(Format::E4M3FN);
    return QStringList{note->isVisibleTo(&tab) ? note->text() : QString(), c->decodedText(),
                       c->flagsText()};
  };
  const QStringList plain = shown(QStringLiteral("0.001"));
  QVERIFY2(plain.front().isEmpty(), qPrintable(plain.front()));
  for (const QString& text : {QStringLiteral("1e-3"), QStringLiteral("1E-03"),
                              QStringLiteral("0.0010"), QStringLiteral("10^-3")}) {
    const QStringList other = shown(text);
    QVERIFY2(other == plain, qPrintable(text + QStringLiteral(": ") + other.join(" | ") +
                                        QStringLiteral(" vs 0.001: ") + plain.join(" | ")));
  }
  QVERIFY(!shown(QStringLiteral("0.0010000000000000000001")).front().isEmpty());
  QVERIFY(!shown(QStringLiteral("10^-3.0000000000000000001")).front().isEmpty());
}

void FormatsTabTest::overflowModes() {
  FormatsTab tab;
  tab.setValueText(QStringLiteral("1000"));
  QVERIFY(tab.card(Format::E4M3FN)->flagsText().contains(QStringLiteral("saturated")));
  QCOMPARE(tab.card(Format::E4M3FN)->decodedText(), QStringLiteral("448"));
  tab.setOverflow(Overflow::Ieee);
  QVERIFY(tab.card(Format::E4M3FN)->flagsText().contains(QStringLiteral("overflow")));
  QCOMPARE(tab.card(Format::E4M3FN)->decodedText(), QStringLiteral("nan"));
  tab.setValueText(QStringLiteral("1e6"));
  QCOMPARE(tab.card(Format::E5M2)->decodedText(), QStringLiteral("inf"));
}

void FormatsTabTest::allFormats() {
  FormatsTab tab;
  tab.setShowAllFormats(true);
  tab.setValueText(QStringLiteral("1"));
  QCOMPARE(tab.cards().size(), size_t{8});
  QCOMPARE(tab.card(Format::E2M1FN)->bitsText(), QStringLiteral("0 01 0"));
  QCOMPARE(tab.card(Format::E8M0FNU)->bitsText(), QStringLiteral("01111111"));
  QCOMPARE(tab.card(Format::E4M3FNUZ)->bitsText(), QStringLiteral("0 1000 000"));
  tab.setShowAllFormats(false);
  QCOMPARE(tab.cards().size(), size_t{2});
  QVERIFY(tab.card(Format::E2M1FN) == nullptr);
}

void FormatsTabTest::codeTableModel() {
  CodeTableModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  QCOMPARE(model.rowCount(), 256);
  QCOMPARE(model.data(model.index(0x7E, CodeTableModel::ValueColumn), CodeTableModel::RawRole)
               .toDouble(),
           448.0);
  QCOMPARE(model.data(model.index(0x7F, CodeTableModel::KindColumn)).toString(),
           QStringLiteral("nan"));
  QCOMPARE(model.data(model.index(0x38, CodeTableModel::BitsColumn)).toString(),
           QStringLiteral("0 0111 000"));
  model.setFormat(Format::E2M1FN);
  QCOMPARE(model.rowCount(), 16);
  QCOMPARE(model.data(model.index(7, CodeTableModel::ValueColumn)).toString(), QStringLiteral("6"));

  FormatsTab tab;
  tab.setValueText(QStringLiteral("448"));
  const auto rows = tab.codeTableView()->selectionModel()->selectedRows();
  QCOMPARE(rows.size(), 1);
  QCOMPARE(rows.first().row(), 0x7E);
  tab.setTableFormat(Format::E5M2);
  QCOMPARE(tab.codeTableModel()->format(), Format::E5M2);
  QCOMPARE(tab.codeTableView()->selectionModel()->selectedRows().first().row(),
           0x5F);  // 448 in E5M2
}

void FormatsTabTest::plotsHoldEveryValue() {
  FormatsTab tab;
  NumberLinePlot* line = tab.numberLinePlot();
  QCOMPARE(line->graphCount(), 2);
  QCOMPARE(line->graph(0)->data()->size(), 126);  // E4M3FN: 0x01..0x7E
  QCOMPARE(line->graph(1)->data()->size(), 123);  // E5M2: 0x01..0x7B
  QCOMPARE(tab.spacingPlot()->graphCount(), 2);
  tab.setShowAllFormats(true);
  QCOMPARE(line->graphCount(), 8);
  QCOMPARE(line->graph(5)->data()->size(), 7);  // E2M1FN: 0.5 .. 6
}

void FormatsTabTest::plotExport() {
  QTemporaryDir dir;
  FormatsTab tab;
  tab.resize(1200, 800);
  tab.show();
  NumberLinePlot* plot = tab.numberLinePlot();
  QVERIFY(plot->exportTo(dir.filePath(QStringLiteral("line.png"))).isEmpty());
  QVERIFY(!QImage(dir.filePath(QStringLiteral("line.png"))).isNull());
  QVERIFY(plot->exportTo(dir.filePath(QStringLiteral("line.pdf"))).isEmpty());
  QVERIFY(QFileInfo(dir.filePath(QStringLiteral("line.pdf"))).size() > 1000);
  QVERIFY(plot->exportTo(dir.filePath(QStringLiteral("line.csv"))).isEmpty());
  QFile csv(dir.filePath(QStringLiteral("line.csv")));
  QVERIFY(csv.open(QIODevice::ReadOnly));
  const QString text = QString::fromUtf8(csv.readAll());
  QVERIFY(text.startsWith(QStringLiteral("series,x,y\n")));
  QVERIFY(text.contains(QStringLiteral("\nE4M3FN,8,2\n")));  // log2(256) = 8 in row 2
  QCOMPARE(text.count(QLatin1Char('\n')), 1 + 126 + 123);
  QVERIFY(
      plot->exportTo(dir.filePath(QStringLiteral("line.txt"))).contains(QStringLiteral(".png")));
  QVERIFY(!plot->exportTo(QStringLiteral("/nonexistent-dir/x.csv")).isEmpty());
}

void FormatsTabTest::mainWindowTabsAndStatus() {
  MainWindow w(false);
  QCOMPARE(w.tabNames(), QStringList({QStringLiteral("Overview"), QStringLiteral("Scaling"),
                                      QStringLiteral("Quantization"), QStringLiteral("Formats"),
                                      QStringLiteral("Checkpoint"), QStringLiteral("Sweeps"),
                                      QStringLiteral("Runs")}));
  QCOMPARE(w.currentTabName(), QStringLiteral("Formats"));
  QVERIFY(w.selectTab(QStringLiteral("runs")));
  QCOMPARE(w.currentTabName(), QStringLiteral("Runs"));
  QVERIFY(!w.selectTab(QStringLiteral("nope")));
  QVERIFY(w.statusText().contains(QStringLiteral("FP8 GEMM")));
  QVERIFY(w.statusText().contains(QStringLiteral("Device")));
  GuiOptions o;
  o.tab = QStringLiteral("bogus");
  QVERIFY(apply_gui_options(w, o).contains(QStringLiteral("Formats")));
  o.tab.clear();
  o.value = QStringLiteral("zzz");
  QVERIFY(apply_gui_options(w, o).contains(QStringLiteral("not a number")));
}

void FormatsTabTest::presentationMode() {
  MainWindow w(false);
  const int before = w.font().pointSize();
  w.setPresentationMode(true);
  QVERIFY(w.font().pointSize() > before);
  QCOMPARE(w.formatsTab()->numberLinePlot()->xAxis->tickLabelFont().pointSizeF(),
           ExportablePlot::basePointSize(true));
  w.setPresentationMode(false);
  QCOMPARE(w.font().pointSize(), before);
}

void FormatsTabTest::screenshot() {
  QTemporaryDir dir;
  MainWindow w(false);
  GuiOptions o;
  o.tab = QStringLiteral("formats");
  o.value = QStringLiteral("0.3");
  o.size = QSize(1300, 880);
  QVERIFY(apply_gui_options(w, o).isEmpty());
  const QString path = dir.filePath(QStringLiteral("shot.png"));
  QVERIFY(save_screenshot(w, path).isEmpty());
  const QImage img(path);
  QCOMPARE(img.size(), QSize(1300, 880));
  QVERIFY(save_screenshot(w, dir.filePath(QStringLiteral("shot.jpg")))
              .contains(QStringLiteral(".png")));
}

void FormatsTabTest::gradientDemo() {
  GradientDemoView view;
  QCOMPARE(view.result().cases.size(), size_t{4});
  const double e4_plain = view.result().cases[0].stats.underflow_pct();
  QVERIFY(e4_plain > 60);  // 1e-8..0.1 cast to E4M3 unscaled: most underflow
  QCOMPARE(view.histogramPlot()->graphCount(), 2);  // E4M3 and E5M2, unscaled
  QVERIFY(view.summaryText().contains(QStringLiteral("E5M2")));
  view.setScaleExponent(16);  // a loss scale of 2^16 brings them into range
  QVERIFY(view.result().cases[0].stats.underflow_pct() < e4_plain - 30);
  view.setPerTensorScaling(true);
  QCOMPARE(view.histogramPlot()->graphCount(), 2);
  QVERIFY(view.histogramPlot()->graph(0)->name().contains(QStringLiteral("scaled")));
  QCOMPARE(view.result().cases[3].stats.raw.underflow, uint64_t{0});  // E5M2, per tensor
}

void FormatsTabTest::outlierDemo() {
  OutlierDemoView view;
  view.setFactorStep(16);  // k = 1e4
  const OutlierDemoRow& row = view.result().rows.front();
  QCOMPARE(row.factor, 1e4);
  QVERIFY(row.tensorwise_error_pct > 3.5 && row.tensorwise_error_pct < 6);
  QVERIFY(row.block_error_pct > 2.3 && row.block_error_pct < 2.9);
  QVERIFY(view.summaryText().contains(QStringLiteral("1x128")));
  QCOMPARE(view.errorPlot()->graphCount(), 2);
  QCOMPARE(view.errorPlot()->graph(0)->data()->size(), 11);
  view.setFactorStep(8);  // k = 100: both alike
  QVERIFY(std::fabs(view.result().rows.front().tensorwise_error_pct -
                    view.result().rows.front().block_error_pct) < 0.3);
  view.setFormat(Format::E5M2);
  QCOMPARE(view.result().config.format, Format::E5M2);
  QVERIFY(view.result().rows.front().block_error_pct > 4);
}

void FormatsTabTest::demoPagesAreBuiltOnDemand() {
  FormatsTab tab;
  QCOMPARE(tab.currentPage(), QStringLiteral("explorer"));
  QCOMPARE(tab.plots().size(), size_t{2});
  QVERIFY(tab.showPage(QStringLiteral("gradients")));
  QCOMPARE(tab.currentPage(), QStringLiteral("gradients"));
  QVERIFY(tab.showPage(QStringLiteral("outliers")));
  QCOMPARE(tab.plots().size(), size_t{5});
  QVERIFY(!tab.showPage(QStringLiteral("nope")));
  MainWindow w(false);
  GuiOptions o;
  o.page = QStringLiteral("bogus");
  QVERIFY(apply_gui_options(w, o).contains(QStringLiteral("outliers")));
}

namespace {

// Types `text` into the tab's value field, as a user does.
void type_value(FormatsTab& tab, const QString& text) {
  QLineEdit* edit = nullptr;
  for (QLineEdit* e : tab.findChildren<QLineEdit*>())
    if (e->placeholderText().contains(QStringLiteral("a number"))) edit = e;
  QVERIFY(edit);
  edit->setFocus();
  edit->selectAll();
  QTest::keyClick(edit, Qt::Key_Delete);
  QTest::keyClicks(edit, text);
}

// The note over a plot, as drawn, or empty where none is shown.
QString plot_note(QCustomPlot* plot) {
  plot->replot(QCustomPlot::rpImmediateRefresh);
  QStringList notes;
  for (int i = 0; i < plot->itemCount(); ++i) {
    auto* t = qobject_cast<QCPItemText*>(plot->item(i));
    if (t && t->visible() && !t->text().isEmpty()) notes << t->text();
  }
  return notes.join(u'\n');
}

// Pixels of the label drawn in the note's orange (#8a4b00, give or take antialiasing).
int orange_pixels(QWidget* w) {
  const QImage img = w->grab().toImage();
  int n = 0;
  for (int y = 0; y < img.height(); ++y)
    for (int x = 0; x < img.width(); ++x) {
      const QColor c = img.pixelColor(x, y);
      if (std::abs(c.red() - 0x8a) + std::abs(c.green() - 0x4b) + std::abs(c.blue()) < 60) ++n;
    }
  return n;
}

}  // namespace

// A value whose marker is off the number line's or the spacing plot's axis (beyond its
// range, 0 on a log axis) is said over the plot; one on the axis is not.
void FormatsTabTest::valueOffThePlotsIsSaid() {
  FormatsTab tab;
  tab.resize(1300, 800);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  const std::vector<QCustomPlot*> plots = {tab.numberLinePlot(), tab.spacingPlot()};
  type_value(tab, QStringLiteral("0.1"));
  for (QCustomPlot* p : plots) QCOMPARE(plot_note(p), QString());
  type_value(tab, QStringLiteral("1e10"));
  for (QCustomPlot* p : plots) {
    QVERIFY2(plot_note(p).contains(QStringLiteral("beyond the plotted range")),
             qPrintable(plot_note(p)));
  }
  type_value(tab, QStringLiteral("-1e-30"));
  for (QCustomPlot* p : plots) {
    QVERIFY2(plot_note(p).contains(QStringLiteral("beyond the plotted range")),
             qPrintable(plot_note(p)));
  }
  type_value(tab, QStringLiteral("0"));
  for (QCustomPlot* p : plots) QVERIFY2(!plot_note(p).isEmpty(), "0 said nothing");
  type_value(tab, QStringLiteral("3"));
  for (QCustomPlot* p : plots) QCOMPARE(plot_note(p), QString());
}

// A clamped value's orange note on the E4M3 card; then text that is no value: the note is
// no longer drawn orange (the card greyed, as the rest of it).
void FormatsTabTest::clampedNoteGreyedWhileTextIsNoValue() {
  FormatsTab tab;
  tab.resize(1300, 800);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  type_value(tab, QStringLiteral("1000"));
  QLabel* note = nullptr;
  for (QLabel* l : tab.card(Format::E4M3FN)->findChildren<QLabel*>())
    if (l->isVisible() && l->text().contains(QStringLiteral("clamped"))) note = l;
  QVERIFY2(note, "no clamped note on the E4M3 card");
  QVERIFY(orange_pixels(note) > 0);
  type_value(tab, QStringLiteral("1000x"));
  QVERIFY(!tab.errorText().isEmpty());
  QVERIFY2(note->isHidden() || orange_pixels(note) == 0,
           qPrintable(QStringLiteral("%1 orange pixels").arg(orange_pixels(note))));
}

// Help > Documentation (F1) opens README.md in the program's own viewer, as installed
// (here: the source tree, where packaging/CMakeLists.txt installs it from), its links to
// the pages in docs/ followed in it; where the documentation is not there, a failure names
// where it was looked for.
void FormatsTabTest::helpOpensTheShippedDocumentation() {
  qputenv("FP8WB_DOC_DIR", QByteArray(FP8WB_SOURCE_DIR));
  MainWindow w(false);
  QAction* docs = w.findChild<QAction*>(QStringLiteral("help-documentation"));
  QVERIFY(docs);
  QCOMPARE(docs->shortcut(), QKeySequence(QKeySequence::HelpContents));
  docs->trigger();
  auto* browser = w.findChild<QTextBrowser*>(QStringLiteral("documentation"));
  QVERIFY(browser);
  QVERIFY(browser->isVisible());
  QCOMPARE(browser->source(), QUrl::fromLocalFile(QStringLiteral(FP8WB_SOURCE_DIR "/README.md")));
  const QString text = browser->toPlainText();
  QVERIFY2(text.startsWith(QStringLiteral("FP8 Workbench")), qPrintable(text.left(80)));
  QVERIFY(!text.contains(QStringLiteral("# FP8 Workbench")));  // Markdown, rendered
  // Its pictures (screenshots 1400 px wide) no wider than the viewer's text.
  QString picture;
  for (QTextBlock b = browser->document()->begin(); b.isValid() && picture.isEmpty();
       b = b.next()) {
    for (auto it = b.begin(); !it.atEnd(); ++it) {
      if (it.fragment().charFormat().isImageFormat())
        picture = it.fragment().charFormat().toImageFormat().name();
    }
  }
  QVERIFY(!picture.isEmpty());
  const QVariant shown =
      browser->loadResource(QTextDocument::ImageResource, browser->source().resolved(picture));
  QVERIFY(shown.canConvert<QImage>());
  QVERIFY2(shown.value<QImage>().width() > 0 && shown.value<QImage>().width() <= 860,
           qPrintable(QString::number(shown.value<QImage>().width())));
  // README's link to docs/sweeps.md, as a click follows it.
  QString href;
  for (QTextBlock b = browser->document()->begin(); b.isValid() && href.isEmpty(); b = b.next()) {
    for (auto it = b.begin(); !it.atEnd(); ++it) {
      const QString a = it.fragment().charFormat().anchorHref();
      if (a.endsWith(QStringLiteral("docs/sweeps.md"))) href = a;
    }
  }
  QVERIFY(!href.isEmpty());
  browser->setSource(browser->source().resolved(QUrl(href)));
  QVERIFY2(browser->toPlainText().contains(QStringLiteral("sweep")),
           qPrintable(browser->toPlainText().left(200)));
  QVERIFY(browser->source().toLocalFile().endsWith(QStringLiteral("/docs/sweeps.md")));
  // Not installed: said, naming where it was looked for.
  QTemporaryDir empty;
  qputenv("FP8WB_DOC_DIR", empty.path().toUtf8());
  QVERIFY(!w.showDocumentation());
  QVERIFY(!w.failures().isEmpty());
  QVERIFY2(w.failures().back().contains(empty.path()) &&
               w.failures().back().contains(QStringLiteral("README.md")),
           qPrintable(w.failures().back()));
  qunsetenv("FP8WB_DOC_DIR");
}

QTEST_MAIN(FormatsTabTest)
#include "formats_tab_test.moc"
