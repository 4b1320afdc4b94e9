// Presentation mode (F11) on the whole main window, on two screens of a projector's sizes
// (1280x720 and 1920x1080, offscreen): larger fonts everywhere (the bit boxes, plots'
// axes, tick labels and legends, tables, tabs), also on a demo page built while
// presenting, the window within its screen, nothing cut (the code table's values, the ULP
// plot, the run panel's buttons), the run panel only while a run trains, and F11 or Esc
// restoring exactly the look before.
#include <QCheckBox>
#include <QDockWidget>
#include <QFile>
#include <QHeaderView>
#include <QLabel>
#include <QMenu>
#include <QPushButton>
#include <QScreen>
#include <QScrollArea>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTabBar>
#include <QTableView>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <functional>

#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/common/presentation_mode.h"
#include "fp8wb/views/formats/bit_field_widget.h"
#include "fp8wb/views/formats/code_table_model.h"
#include "fp8wb/views/formats/demo_views.h"
#include "fp8wb/views/formats/format_card.h"
#include "fp8wb/views/formats/format_plots.h"
#include "fp8wb/views/formats/formats_tab.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/run_panel/run_panel.h"
#include "fp8wb/views/run_tabs/run_tabs.h"
#include "main_window.h"

using namespace fp8wb;

namespace {

constexpr double kFactor = PresentationMode::kDefaultFactor;

double size_of(const QFont& f) {
  return f.pointSizeF() > 0 ? f.pointSizeF() : f.pixelSize();
}

// The look that presentation mode changes, as numbers to compare.
struct Look {
  double bit_box = 0, tab = 0, table = 0, label = 0;
  double axis_label = 0, tick_label = 0, legend = 0, legend_item = 0;
  double graph_pen = 0;
  QRect geometry, central, ulp_plot;
  int dock_width = 0;
  bool dock_visible = false;
};

QLabel* first_bit_box(MainWindow& w) {
  auto* bits = w.formatsTab()->findChild<BitFieldWidget*>();
  return bits ? bits->findChild<QLabel*>() : nullptr;
}

// Every widget's font under a root, by its place in the tree (class and index among its
// siblings of that class): a widget rebuilt in the same place compares with the old one.
QMap<QString, QFont> fonts_under(QWidget* root) {
  QMap<QString, QFont> out;
  std::function<void(QWidget*, const QString&)> walk = [&](QWidget* w, const QString& path) {
    out.insert(path, w->font());
    QMap<QString, int> seen;
    for (QObject* o : w->children()) {
      auto* child = qobject_cast<QWidget*>(o);
      if (!child) continue;
      const QString cls = QString::fromLatin1(child->metaObject()->className());
      walk(child, path + QLatin1Char('/') + cls + QLatin1Char('#') + QString::number(seen[cls]++));
    }
  };
  walk(root, QString());
  return out;
}

Look look_of(MainWindow& w) {
  Look l;
  l.bit_box = size_of(first_bit_box(w)->font());
  l.tab = size_of(w.findChild<QTabBar*>()->font());
  l.table = size_of(w.formatsTab()->codeTableView()->font());
  l.label = size_of(w.formatsTab()->findChild<QLabel*>()->font());
  SpacingPlot* ulp = w.formatsTab()->spacingPlot();
  ulp->replot();
  l.axis_label = size_of(ulp->xAxis->labelFont());
  l.tick_label = size_of(ulp->yAxis->tickLabelFont());
  l.legend = size_of(ulp->legend->font());
  l.legend_item = size_of(ulp->legend->item(0)->font());
  l.graph_pen = ulp->graph(0)->pen().widthF();
  l.geometry = w.geometry();
  l.central = w.centralWidget()->geometry();
  l.ulp_plot = QRect(ulp->mapTo(&w, QPoint(0, 0)), ulp->size());
  auto* dock = w.findChild<QDockWidget*>(QStringLiteral("run-panel"));
  l.dock_visible = dock->isVisible();
  l.dock_width = dock->width();
  return l;
}

// 0: the 1280x720 screen, 1: the 1920x1080 one.
QScreen* screen_of(int index) {
  const QSize size = index == 0 ? QSize(1280, 720) : QSize(1920, 1080);
  for (QScreen* s : QGuiApplication::screens()) {
    if (s->geometry().size() == size) return s;
  }
  return nullptr;
}

void settle() {
  for (int i = 0; i < 5; ++i) {
    QCoreApplication::processEvents();
    QTest::qWait(10);
  }
}

}  // namespace

class PresentationTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase();
  void f11EnlargesFitsAndRestores_data();
  void f11EnlargesFitsAndRestores();
  void escapeLeaves();
  void widgetsBuiltWhilePresentingAreScaledOnce();
  void runPanelShowsOnlyWhileTraining();
  void cardsRebuiltWhilePresentingRestoreFonts();
  void explorerPlotsKeepLabelsApart();
  void demosFitTheScreen_data();
  void demosFitTheScreen();
  void menusTakeThePresentationFont();

 private:
  // A main window filling the screen `index` (0: 1280x720, 1: 1920x1080), shown and active.
  void place(MainWindow& w, int index);
  void checkFits(MainWindow& w, const QRect& screen_area);
  void checkCodeTableValuesWhole(MainWindow& w);
  QTemporaryDir dir_;
};

void PresentationTest::initTestCase() {
  QVERIFY(dir_.isValid());
  qputenv("XDG_DATA_HOME", dir_.path().toUtf8());
  QCOMPARE(QGuiApplication::screens().size(), 2);
  QVERIFY(screen_of(0));
  QVERIFY(screen_of(1));
}

void PresentationTest::place(MainWindow& w, int index) {
  QScreen* screen = screen_of(index);
  w.engine()->setDatabasePath(dir_.filePath(QStringLiteral("runs.sqlite")));
  w.setScreen(screen);
  w.setGeometry(screen->availableGeometry());
  w.selectTab(QStringLiteral("Formats"));
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  w.activateWindow();
  QVERIFY(QTest::qWaitForWindowActive(&w));
  settle();
  QCOMPARE(w.screen(), screen);
}

void PresentationTest::checkFits(MainWindow& w, const QRect& area) {
  settle();
  QVERIFY2(area.contains(w.frameGeometry()),
           qPrintable(QStringLiteral("window %1,%2 %3x%4 outside the screen's %5x%6")
                          .arg(w.frameGeometry().x())
                          .arg(w.frameGeometry().y())
                          .arg(w.frameGeometry().width())
                          .arg(w.frameGeometry().height())
                          .arg(area.width())
                          .arg(area.height())));
  // The ULP plot is not squashed below its minimum height.
  SpacingPlot* ulp = w.formatsTab()->spacingPlot();
  QVERIFY2(ulp->height() >= ulp->minimumHeight(), qPrintable(QString::number(ulp->height())));
  QVERIFY(ulp->minimumHeight() >= 150);
}

void PresentationTest::checkCodeTableValuesWhole(MainWindow& w) {
  QTableView* view = w.formatsTab()->codeTableView();
  QAbstractItemModel* model = view->model();
  int value_col = -1;
  for (int c = 0; c < model->columnCount(); ++c) {
    if (model->headerData(c, Qt::Horizontal).toString() == QStringLiteral("Value")) value_col = c;
  }
  QVERIFY(value_col >= 0);
  const QFontMetrics fm(view->font());
  const int first = view->rowAt(0);
  int last = view->rowAt(view->viewport()->height() - 1);
  if (last < 0) last = model->rowCount() - 1;
  QVERIFY(first >= 0);
  // The column lies inside the view's visible area, and is as wide as every visible value.
  const int left = view->columnViewportPosition(value_col);
  const int width = view->columnWidth(value_col);
  QVERIFY2(left >= 0 && left + width <= view->viewport()->width(),
           qPrintable(QStringLiteral("Value column at %1..%2, viewport %3 wide")
                          .arg(left)
                          .arg(left + width)
                          .arg(view->viewport()->width())));
  for (int r = first; r <= last; ++r) {
    const QString text = model->data(model->index(r, value_col)).toString();
    QVERIFY2(width >= fm.horizontalAdvance(text),
             qPrintable(QStringLiteral("'%1' is %2 px, its column %3")
                            .arg(text)
                            .arg(fm.horizontalAdvance(text))
                            .arg(width)));
  }
}

void PresentationTest::f11EnlargesFitsAndRestores_data() {
  QTest::addColumn<int>("screen");
  QTest::newRow("1280x720") << 0;
  QTest::newRow("1920x1080") << 1;
}

void PresentationTest::f11EnlargesFitsAndRestores() {
  QFETCH(int, screen);
  const QRect area = screen_of(screen)->availableGeometry();
  MainWindow w(false);
  place(w, screen);
  const Look before = look_of(w);
  QVERIFY(before.dock_visible);

  QTest::keyClick(&w, Qt::Key_F11);
  QVERIFY(w.presentationMode());
  settle();
  const Look on = look_of(w);
  for (const auto& [name, was, is] :
       {std::tuple{"bit box", before.bit_box, on.bit_box}, std::tuple{"tab", before.tab, on.tab},
        std::tuple{"table", before.table, on.table}, std::tuple{"label", before.label, on.label},
        std::tuple{"axis label", before.axis_label, on.axis_label},
        std::tuple{"tick label", before.tick_label, on.tick_label},
        std::tuple{"legend", before.legend, on.legend},
        std::tuple{"legend item", before.legend_item, on.legend_item}}) {
    QVERIFY2(
        std::abs(is - was * kFactor) < 0.6,
        qPrintable(QStringLiteral("%1 font: %2 before, %3 presenting").arg(name).arg(was).arg(is)));
  }
  QVERIFY(on.graph_pen >= before.graph_pen * kFactor - 0.01);
  QVERIFY(!on.dock_visible);  // no run trains
  checkFits(w, area);
  QVERIFY(w.width() <= area.width() && w.height() <= area.height());
  checkCodeTableValuesWhole(w);
  // The bit boxes show their digits whole.
  QLabel* box = first_bit_box(w);
  QVERIFY(box->width() >= box->fontMetrics().horizontalAdvance(box->text()));
  // Another value, typed while presenting: new boxes, same size.
  w.formatsTab()->setValueText(QStringLiteral("-448"));
  settle();
  QVERIFY(std::abs(size_of(first_bit_box(w)->font()) - before.bit_box * kFactor) < 0.6);
  w.formatsTab()->setValueText(QStringLiteral("0.1"));  // the content before
  settle();

  QTest::keyClick(&w, Qt::Key_F11);
  QVERIFY(!w.presentationMode());
  settle();
  const Look off = look_of(w);
  QCOMPARE(off.bit_box, before.bit_box);
  QCOMPARE(off.tab, before.tab);
  QCOMPARE(off.table, before.table);
  QCOMPARE(off.label, before.label);
  QCOMPARE(off.axis_label, before.axis_label);
  QCOMPARE(off.tick_label, before.tick_label);
  QCOMPARE(off.legend, before.legend);
  QCOMPARE(off.legend_item, before.legend_item);
  QCOMPARE(off.graph_pen, before.graph_pen);
  QCOMPARE(off.geometry, before.geometry);
  QCOMPARE(off.central, before.central);
  QCOMPARE(off.dock_width, before.dock_width);
  QCOMPARE(off.ulp_plot, before.ulp_plot);
  QVERIFY(off.dock_visible);
}

// The format cards rebuilt while presenting ("All formats" ticked and unticked): on
// leaving, every widget of the Formats tab has exactly the font it had before.
void PresentationTest::cardsRebuiltWhilePresentingRestoreFonts() {
  MainWindow w(false);
  place(w, 0);
  QCheckBox* all = nullptr;
  for (QCheckBox* c : w.formatsTab()->findChildren<QCheckBox*>()) {
    if (c->text() == QStringLiteral("All formats")) all = c;
  }
  QVERIFY(all);
  const QMap<QString, QFont> before = fonts_under(w.formatsTab());
  for (Qt::Key leave : {Qt::Key_F11, Qt::Key_Escape}) {
    QTest::keyClick(&w, Qt::Key_F11);
    QVERIFY(w.presentationMode());
    settle();
    QTest::mouseClick(all, Qt::LeftButton);
    QVERIFY(all->isChecked());
    settle();
    QTest::mouseClick(all, Qt::LeftButton);
    QVERIFY(!all->isChecked());
    settle();
    QTest::keyClick(&w, leave);
    QVERIFY(!w.presentationMode());
    settle();
    const QMap<QString, QFont> after = fonts_under(w.formatsTab());
    // (A combo box's popup is made on first use: widgets new since are not compared.)
    for (auto it = before.begin(); it != before.end(); ++it) {
      QVERIFY2(after.contains(it.key()), qPrintable(it.key()));
      const QFont& now = after.value(it.key());
      QVERIFY2(size_of(now) == size_of(it.value()) && now.bold() == it.value().bold(),
               qPrintable(QStringLiteral("%1: %2 before, %3 after")
                              .arg(it.key())
                              .arg(size_of(it.value()))
                              .arg(size_of(now))));
    }
  }
}

// Presenting at 1280x720, with two formats and with all of them: the number line's row
// labels and the ULP plot's tick labels are at least a line apart (the explorer scrolls).
void PresentationTest::explorerPlotsKeepLabelsApart() {
  MainWindow w(false);
  place(w, 0);
  QTest::keyClick(&w, Qt::Key_F11);
  QVERIFY(w.presentationMode());
  for (bool all : {false, true}) {
    w.formatsTab()->setShowAllFormats(all);
    settle();
    for (QCustomPlot* p : {static_cast<QCustomPlot*>(w.formatsTab()->findChild<NumberLinePlot*>()),
                           static_cast<QCustomPlot*>(w.formatsTab()->findChild<SpacingPlot*>())}) {
      QVERIFY(p);
      p->replot();
      QCPAxis* y = p->yAxis;
      const double line = QFontMetricsF(y->tickLabelFont()).height();
      QVector<double> at;
      for (double t : y->tickVector()) {
        const double px = y->coordToPixel(t);
        if (px >= y->axisRect()->top() - 1 && px <= y->axisRect()->bottom() + 1) at << px;
      }
      QVERIFY(at.size() >= 2);
      std::sort(at.begin(), at.end());
      for (int i = 1; i < at.size(); ++i) {
        QVERIFY2(at[i] - at[i - 1] >= line,
                 qPrintable(QStringLiteral("%1 (all formats %2): ticks %3 px apart, a line %4 px")
                                .arg(QString::fromLatin1(p->metaObject()->className()))
                                .arg(all)
                                .arg(at[i] - at[i - 1])
                                .arg(line)));
      }
    }
  }
  QTest::keyClick(&w, Qt::Key_F11);
  QVERIFY(!w.presentationMode());
}

void PresentationTest::demosFitTheScreen_data() {
  QTest::addColumn<int>("screen");
  QTest::addColumn<QString>("page");
  QTest::addColumn<bool>("all_formats");
  for (int screen : {0, 1}) {
    const QString size = screen == 0 ? QStringLiteral("1280x720") : QStringLiteral("1920x1080");
    for (const char* page : {"explorer", "gradients", "outliers", "master-weights", "loss-scaling"})
      QTest::newRow(qPrintable(QStringLiteral("%1 %2").arg(size).arg(QLatin1String(page))))
          << screen << QString::fromLatin1(page) << false;
    // `fp8-workbench --presentation --tab Formats --page explorer --all-formats`
    QTest::newRow(qPrintable(QStringLiteral("%1 explorer, all formats").arg(size)))
        << screen << QStringLiteral("explorer") << true;
  }
}

// Each demo, presented on a projector's screen, is laid out for it: nothing scrolls, every
// label is whole (at least 20 px), every plot has room to be read (its data area at least
// a quarter of the page's height and 150 px, a legend never over half of it), and an axis
// label fits beside its axis.
void PresentationTest::demosFitTheScreen() {
  QFETCH(int, screen);
  QFETCH(QString, page);
  QFETCH(bool, all_formats);
  MainWindow w(false);
  place(w, screen);
  QTest::keyClick(&w, Qt::Key_F11);
  QVERIFY(w.presentationMode());
  QVERIFY(w.formatsTab()->showPage(page));
  w.formatsTab()->setShowAllFormats(all_formats);
  settle();
  if (all_formats) {
    // Every format in the table of formats, each row and column whole, no scroll bar.
    QTableWidget* table = w.formatsTab()->formatsSummary();
    QVERIFY(table->isVisible());
    QCOMPARE(table->rowCount(), static_cast<int>(kAllFormats.size()));
    QVERIFY(!table->verticalScrollBar()->isVisible() && !table->horizontalScrollBar()->isVisible());
    int rows = 0, columns = 0;
    for (int r = 0; r < table->rowCount(); ++r) rows += table->rowHeight(r);
    for (int c = 0; c < table->columnCount(); ++c) columns += table->columnWidth(c);
    QVERIFY2(rows <= table->viewport()->height() && columns <= table->viewport()->width(),
             qPrintable(QStringLiteral("rows %1 px in %2, columns %3 px in %4")
                            .arg(rows)
                            .arg(table->viewport()->height())
                            .arg(columns)
                            .arg(table->viewport()->width())));
    QVERIFY(QFontInfo(table->font()).pixelSize() >= 20);
    const QFontMetrics fm(table->font());
    for (int r = 0; r < table->rowCount(); ++r) {
      for (int c = 0; c < table->columnCount(); ++c) {
        QVERIFY(table->item(r, c));
        QVERIFY2(fm.horizontalAdvance(table->item(r, c)->text()) <= table->columnWidth(c),
                 qPrintable(table->item(r, c)->text()));
      }
    }
    QCOMPARE(table->item(0, 2)->text(), w.formatsTab()->card(Format::E4M3FN)->decodedText());
  }
  // The explorer's cards scroll sideways when there are more than fit; two do.
  for (QScrollArea* area : w.findChildren<QScrollArea*>()) {
    if (!area->isVisible()) continue;
    QVERIFY2(
        area->verticalScrollBar()->maximum() == 0 && area->horizontalScrollBar()->maximum() == 0,
        qPrintable(QStringLiteral("%1 scrolls by %2 x %3 px")
                       .arg(area->objectName())
                       .arg(area->horizontalScrollBar()->maximum())
                       .arg(area->verticalScrollBar()->maximum())));
  }
  QWidget* shown = nullptr;
  for (QWidget* v : w.formatsTab()->findChildren<QWidget*>()) {
    if (v->isVisible() && v->objectName() == QStringLiteral("demo-") + page) shown = v;
  }
  QVERIFY2(shown, qPrintable(page));
  for (QLabel* l : shown->findChildren<QLabel*>()) {
    if (!l->isVisible() || l->text().isEmpty()) continue;
    QVERIFY2(QFontInfo(l->font()).pixelSize() >= 20,
             qPrintable(QStringLiteral("'%1' at %2 px")
                            .arg(l->text().left(40))
                            .arg(QFontInfo(l->font()).pixelSize())));
    QVERIFY2(l->height() >= l->heightForWidth(l->width()) || !l->wordWrap(),
             qPrintable(QStringLiteral("'%1' cut: %2 of %3 px")
                            .arg(l->text().left(40))
                            .arg(l->height())
                            .arg(l->heightForWidth(l->width()))));
    QVERIFY2(l->height() >= l->sizeHint().height() || l->wordWrap(),
             qPrintable(QStringLiteral("'%1' cut: %2 of %3 px")
                            .arg(l->text().left(40))
                            .arg(l->height())
                            .arg(l->sizeHint().height())));
  }
  for (ExportablePlot* p : shown->findChildren<ExportablePlot*>()) {
    if (!p->isVisible()) continue;
    p->replot();
    const QRect data = p->axisRect()->rect();
    QVERIFY2(data.height() >= std::max(150, shown->height() / 4),
             qPrintable(QStringLiteral("a plot's data area %1 px of the page's %2")
                            .arg(data.height())
                            .arg(shown->height())));
    if (p->legend && p->legend->visible() && p->legend->layout() == p->axisRect()->insetLayout())
      QVERIFY2(p->legend->outerRect().height() <= data.height() / 2,
               qPrintable(QStringLiteral("legend %1 px over a %2 px plot")
                              .arg(p->legend->outerRect().height())
                              .arg(data.height())));
    // Tick labels side by side along a horizontal axis leave a space between them.
    for (QCPAxisRect* rect : p->axisRects()) {
      QCPAxis* axis = rect->axis(QCPAxis::atBottom);
      if (!axis || !axis->visible() || !axis->tickLabels()) continue;
      const QFontMetrics fm(axis->tickLabelFont());
      const QVector<double> ticks = axis->tickVector();
      const QVector<QString> labels = axis->tickVectorLabels();
      double last_right = -1e9;
      for (int i = 0; i < ticks.size(); ++i) {
        const double at = axis->coordToPixel(ticks[i]);
        if (at < axis->axisRect()->left() - 1 || at > axis->axisRect()->right() + 1) continue;
        // Powers of ten ("eb": "1e-02") are drawn as "10" and a raised exponent ("-2") at
        // three quarters of the size, as QCustomPlot's axis painter draws them.
        const QString text = labels.value(i);
        double width = fm.horizontalAdvance(text);
        if (axis->numberFormat().startsWith(QLatin1String("eb")) &&
            text.contains(QLatin1Char('e'))) {
          QString exponent = text.section(QLatin1Char('e'), 1);
          exponent.remove(QLatin1Char('+'));
          const bool negative = exponent.startsWith(QLatin1Char('-'));
          exponent = QString::number(std::abs(exponent.toInt()));
          if (negative) exponent.prepend(QLatin1Char('-'));
          width =
              fm.horizontalAdvance(QStringLiteral("10")) + 0.75 * fm.horizontalAdvance(exponent);
        }
        const double half = width / 2.0;
        QVERIFY2(at - half >= last_right + fm.horizontalAdvance(QLatin1Char(' ')) / 2.0,
                 qPrintable(QStringLiteral("%1: tick labels '%2' and the one before it touch")
                                .arg(p->objectName().isEmpty()
                                         ? QString::fromLatin1(p->metaObject()->className())
                                         : p->objectName())
                                .arg(labels.value(i))));
        last_right = at + half;
      }
    }
    for (QCPAxis* axis : {p->yAxis, p->yAxis2}) {
      if (!axis->visible() || axis->label().isEmpty()) continue;
      const QFontMetrics fm(axis->labelFont());
      int widest = 0;
      for (const QString& line : axis->label().split(QLatin1Char('\n')))
        widest = std::max(widest, fm.horizontalAdvance(line));
      QVERIFY2(widest <= data.height(),
               qPrintable(QStringLiteral("'%1' is %2 px beside a %3 px axis")
                              .arg(axis->label())
                              .arg(widest)
                              .arg(data.height())));
    }
  }
}

// A plot's context menu (a window of its own, which takes the application's font) is as
// large as the window's text while presenting, and back to the usual size after.
void PresentationTest::menusTakeThePresentationFont() {
  MainWindow w(false);
  place(w, 0);
  auto* plot = w.findChild<ExportablePlot*>();
  QVERIFY(plot);
  const int usual = QFontInfo(QApplication::font()).pixelSize();
  QTest::keyClick(&w, Qt::Key_F11);
  QVERIFY(w.presentationMode());
  settle();
  {
    QMenu menu(plot);
    menu.addAction(QStringLiteral("Reset zoom"));
    menu.ensurePolished();  // as QMenu::popup() does before laying out its items
    const int shown = QFontInfo(menu.font()).pixelSize();
    QCOMPARE(shown, QFontInfo(w.font()).pixelSize());
    QVERIFY2(shown >= usual * 1.2,
             qPrintable(QStringLiteral("%1 px, usually %2").arg(shown).arg(usual)));
  }
  QTest::keyClick(&w, Qt::Key_Escape);
  QVERIFY(!w.presentationMode());
  settle();
  QMenu after(plot);
  after.ensurePolished();
  QCOMPARE(QFontInfo(after.font()).pixelSize(), usual);
}

void PresentationTest::escapeLeaves() {
  MainWindow w(false);
  place(w, 1);
  const Look before = look_of(w);
  QTest::keyClick(&w, Qt::Key_F11);
  QVERIFY(w.presentationMode());
  QTest::keyClick(&w, Qt::Key_Escape);
  QVERIFY(!w.presentationMode());
  settle();
  const Look off = look_of(w);
  QCOMPARE(off.bit_box, before.bit_box);
  QCOMPARE(off.axis_label, before.axis_label);
  QCOMPARE(off.geometry, before.geometry);
  QCOMPARE(off.central, before.central);
  QCOMPARE(off.dock_width, before.dock_width);
  QCOMPARE(off.ulp_plot, before.ulp_plot);
  QVERIFY(off.dock_visible);
}

// A demo page built on first use while presenting, and the Overview tab: every plot's
// fonts at the presentation size (once, not twice), the range labels too.
void PresentationTest::widgetsBuiltWhilePresentingAreScaledOnce() {
  for (int screen : {0, 1}) {
    const QRect area = screen_of(screen)->availableGeometry();
    MainWindow w(false);
    place(w, screen);
    QTest::keyClick(&w, Qt::Key_F11);
    QVERIFY(w.presentationMode());
    QVERIFY(w.formatsTab()->showPage(QStringLiteral("gradients")));
    settle();
    ExportablePlot* hist = w.formatsTab()->gradientDemo()->histogramPlot();
    hist->replot();
    const double plot_size = ExportablePlot::basePointSize(false) * kFactor;
    QVERIFY(std::abs(size_of(hist->xAxis->labelFont()) - plot_size) < 0.01);
    QVERIFY(std::abs(size_of(hist->yAxis->tickLabelFont()) - plot_size) < 0.01);
    QVERIFY(std::abs(size_of(hist->legend->font()) - plot_size) < 0.01);
    QVERIFY(hist->legend->itemCount() > 0);
    QVERIFY(std::abs(size_of(hist->legend->item(0)->font()) - plot_size) < 0.01);
    // The format ranges' labels: the application's font, scaled.
    int texts = 0;
    for (int i = 0; i < hist->itemCount(); ++i) {
      if (auto* t = qobject_cast<QCPItemText*>(hist->item(i))) {
        ++texts;
        QVERIFY(std::abs(size_of(t->font()) - size_of(QFont()) * kFactor) < 0.01);
      }
    }
    QVERIFY(texts > 0);
    checkFits(w, area);
    // Every demo page, built now: each plot's axes at the presentation size, once.
    for (const QString& page : w.formatsTab()->pageNames()) {
      QVERIFY(w.formatsTab()->showPage(page));
      settle();
      for (ExportablePlot* p : w.formatsTab()->findChildren<ExportablePlot*>()) {
        if (!p->isVisible()) continue;
        p->replot();
        for (QCPAxis* a : p->axisRect()->axes()) {
          QVERIFY2(
              std::abs(size_of(a->tickLabelFont()) - plot_size) < 0.01,
              qPrintable(QStringLiteral("page %1: %2").arg(page).arg(size_of(a->tickLabelFont()))));
        }
      }
      checkFits(w, area);
    }
    // The Overview's plots.
    QVERIFY(w.selectTab(QStringLiteral("Overview")));
    settle();
    for (ExportablePlot* p : w.overviewTab()->plots()) {
      p->replot();
      QVERIFY(std::abs(size_of(p->xAxis->tickLabelFont()) - plot_size) < 0.01);
      QVERIFY(std::abs(size_of(p->yAxis->labelFont()) - plot_size) < 0.01);
    }
    checkFits(w, area);
    QTest::keyClick(&w, Qt::Key_F11);
    hist->replot();
    QCOMPARE(size_of(hist->xAxis->labelFont()), ExportablePlot::basePointSize(false));
  }
}

void PresentationTest::runPanelShowsOnlyWhileTraining() {
  MainWindow w(false);
  place(w, 0);
  const QRect area = screen_of(0)->availableGeometry();
  auto* dock = w.findChild<QDockWidget*>(QStringLiteral("run-panel"));
  QTest::keyClick(&w, Qt::Key_F11);
  settle();
  QVERIFY(!dock->isVisible());
  QVERIFY(w.runPanel()->applyPreset(QStringLiteral("Outliers: tensorwise")));
  w.runPanel()->setSteps(1000000);
  QCOMPARE(w.runPanel()->start(), QString());
  QTRY_VERIFY_WITH_TIMEOUT(dock->isVisible(), 10000);
  QTRY_VERIFY_WITH_TIMEOUT(w.engine()->data().steps().size() >= 2, 60000);
  settle();
  checkFits(w, area);
  // Start, Pause, Stop and "Python script…" are whole inside the panel's visible area.
  int buttons = 0;
  for (QPushButton* b : w.runPanel()->findChildren<QPushButton*>()) {
    if (!b->isVisible()) continue;
    ++buttons;
    const QRect in_dock(b->mapTo(dock, QPoint(0, 0)), b->size());
    const QRect shown = b->visibleRegion().boundingRect();
    QVERIFY2(dock->rect().contains(in_dock) && shown == b->rect(),
             qPrintable(QStringLiteral("%1 at %2,%3 %4x%5 in a dock %6x%7, %8x%9 of it shown")
                            .arg(b->text())
                            .arg(in_dock.x())
                            .arg(in_dock.y())
                            .arg(in_dock.width())
                            .arg(in_dock.height())
                            .arg(dock->width())
                            .arg(dock->height())
                            .arg(shown.width())
                            .arg(shown.height())));
    const QRect in_window(b->mapTo(&w, QPoint(0, 0)), b->size());
    QVERIFY(w.rect().contains(in_window));
  }
  QCOMPARE(buttons, 4);
  QSignalSpy finished(w.engine(), &EngineController::finished);
  w.engine()->stop();
  QVERIFY(finished.count() > 0 || finished.wait(60000));
  settle();
  QVERIFY(!dock->isVisible());
  QTest::keyClick(&w, Qt::Key_F11);
  settle();
  QVERIFY(dock->isVisible());
}

// Two screens side by side: a projector's 1280x720 and 1920x1080.
int main(int argc, char** argv) {
  QTemporaryDir config_dir;
  const QString config = config_dir.filePath(QStringLiteral("screens.json"));
  QFile f(config);
  if (!f.open(QIODevice::WriteOnly)) return 1;
  f.write(R"({"screens": [
    {"name": "720p", "x": 0, "y": 0, "width": 1280, "height": 720,
     "logicalDpi": 96, "logicalBpi": 96, "dpr": 1},
    {"name": "1080p", "x": 1280, "y": 0, "width": 1920, "height": 1080,
     "logicalDpi": 96, "logicalBpi": 96, "dpr": 1}]})");
  f.close();
  qputenv("QT_QPA_PLATFORM", ("offscreen:configfile=" + config).toUtf8());
  QApplication app(argc, argv);
  PresentationTest test;
  return QTest::qExec(&test, argc, argv);
}

#include "presentation_test.moc"
