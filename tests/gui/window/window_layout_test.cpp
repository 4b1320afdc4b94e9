// The main window at a desktop's sizes (1400x900, the default, and 1280x800) on a
// 1920x1080 screen: no splitter pane is ever squeezed or dragged to nothing (also after
// presentation mode was on while a run started); the run form's labels are whole, the form
// never scrolled sideways; another database opened leaves nothing of the run shown before
// in the status bar's run label or the run panel's progress; a status message is never
// drawn over the device labels or under the run label and "Back to run N".
#include <QAction>
#include <QCheckBox>
#include <QDockWidget>
#include <QFile>
#include <QFormLayout>
#include <QGroupBox>
#include <QLabel>
#include <QProgressBar>
#include <QScrollArea>
#include <QScrollBar>
#include <QSignalSpy>
#include <QSplitter>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QtTest>

#include "fp8wb/core/store/run_store.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/run_panel/run_panel.h"
#include "fp8wb/views/runs/runs_tab.h"
#include "main_window.h"
#include "status_label.h"

using namespace fp8wb;

namespace {

void settle() {
  for (int i = 0; i < 10; ++i) {
    QCoreApplication::processEvents();
    QTest::qWait(20);
  }
}

// What is wrong with the window's visible splitters, or empty: each pane at least its
// minimum size along the splitter, and more than nothing.
QString panes_squeezed(MainWindow& w, const QString& when) {
  QStringList wrong;
  for (QSplitter* s : w.findChildren<QSplitter*>()) {
    if (!s->isVisible()) continue;
    const bool across = s->orientation() == Qt::Horizontal;
    for (int i = 0; i < s->count(); ++i) {
      QWidget* pane = s->widget(i);
      if (pane->isHidden()) continue;
      const int has = across ? pane->width() : pane->height();
      const QSize min = pane->minimumSize().isNull() ? pane->minimumSizeHint()
                                                     : pane->minimumSize().expandedTo({1, 1});
      const int needs = std::max(1, across ? min.width() : min.height());
      if (has < needs)
        wrong << QStringLiteral("%1: pane %2 of a %3 splitter in %4 is %5 px, needs %6")
                     .arg(when)
                     .arg(i)
                     .arg(across ? QStringLiteral("horizontal") : QStringLiteral("vertical"))
                     .arg(QString::fromLatin1(s->parentWidget()->metaObject()->className()))
                     .arg(has)
                     .arg(needs);
    }
  }
  return wrong.join(u'\n');
}

// Drags splitter handle `i` by the mouse to `to` (in the splitter's coordinates).
void drag_handle(QSplitter* s, int i, QPoint to) {
  QSplitterHandle* h = s->handle(i);
  const QPoint from = h->rect().center();
  QTest::mousePress(h, Qt::LeftButton, {}, from);
  QMouseEvent move(QEvent::MouseMove, h->mapFrom(s, to), h->mapToGlobal(h->mapFrom(s, to)),
                   Qt::NoButton, Qt::LeftButton, Qt::NoModifier);
  QCoreApplication::sendEvent(h, &move);
  QTest::mouseRelease(h, Qt::LeftButton, {}, h->mapFrom(s, to));
}

// What of the run form is cut, or empty: its labels (and boxes' texts) whole and inside
// the form's visible area, and the form not scrolled or scrollable sideways.
QString form_cut(MainWindow& w, const QString& when) {
  auto* area = w.runPanel()->findChild<QScrollArea*>(QStringLiteral("run-form"));
  if (!area) return QStringLiteral("no run form");
  QStringList wrong;
  QWidget* body = area->widget();
  if (body->width() > area->viewport()->width() || area->horizontalScrollBar()->value() != 0 ||
      area->horizontalScrollBar()->isVisible())
    wrong << QStringLiteral("%1: the form is %2 px wide in a %3 px area, scrolled sideways by %4")
                 .arg(when)
                 .arg(body->width())
                 .arg(area->viewport()->width())
                 .arg(area->horizontalScrollBar()->value());
  const QRect shown = area->viewport()->rect();
  auto check = [&](QWidget* item, const QString& text) {
    if (!item->isVisibleTo(body) || text.isEmpty()) return;
    const QRect r(item->mapTo(area->viewport(), QPoint(0, 0)), item->size());
    // Whole across (up and down the form scrolls).
    if (r.left() < shown.left() || r.right() > shown.right() ||
        item->width() < item->sizeHint().width())
      wrong << QStringLiteral("%1: \"%2\" at x %3..%4 (needs %5 px) in an area 0..%6")
                   .arg(when, text)
                   .arg(r.left())
                   .arg(r.right())
                   .arg(item->sizeHint().width())
                   .arg(shown.right());
  };
  for (QLabel* l : body->findChildren<QLabel*>()) check(l, l->text());
  for (QCheckBox* c : body->findChildren<QCheckBox*>()) check(c, c->text());
  return wrong.join(u'\n');
}

// A database at `path` with one finished run.
void one_run_database(const QString& path) {
  auto store = RunStore::open(path.toStdString());
  RunConfig c;
  const int64_t id = store->create_run("stored", fp8wb::RunKind::Train, run_config_json(c), "cpu");
  MetricBatch b;
  b.run_id = id;
  for (int64_t s = 0; s < 10; ++s) {
    StepMetrics m;
    m.step = s;
    m.loss = 2.0 - 0.1 * static_cast<double>(s);
    b.steps.push_back(m);
  }
  b.final = true;
  b.status = RunStatus::Finished;
  store->write(std::move(b));
  store->flush();
}

}  // namespace

class WindowLayoutTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase();
  void noSplitterPaneIsSqueezedToNothing();
  void runFormLabelsAreWholeWithoutSidewaysScrolling();
  void anotherDatabaseLeavesNoRunShown();
  void statusMessageNeverDrawnOverOtherText();
  void statusTextCutAtAWordWholeInItsTooltip();

 private:
  QTemporaryDir dir_;
};

void WindowLayoutTest::initTestCase() {
  QVERIFY(dir_.isValid());
  qputenv("XDG_DATA_HOME", dir_.path().toUtf8());
  qputenv("XDG_CONFIG_HOME", dir_.path().toUtf8());
}

// Presentation mode on, a run started (the run panel shows), presentation mode off: every
// tab's splitters keep each pane at least its minimum (the Scaling tab's plots were left
// 0 px wide); dragging a handle to either end leaves the pane beyond it its minimum too.
void WindowLayoutTest::noSplitterPaneIsSqueezedToNothing() {
  MainWindow w(false);
  w.engine()->setDatabasePath(dir_.filePath(QStringLiteral("splitters.sqlite")));
  w.resize(1400, 900);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  settle();
  QTest::keyClick(&w, Qt::Key_F11);
  settle();
  QVERIFY(w.presentationMode());
  QVERIFY(w.runPanel()->applyPreset(QStringLiteral("Outliers: tensorwise")));
  w.runPanel()->setSteps(1000000);
  QCOMPARE(w.runPanel()->start(), QString());
  QTRY_VERIFY_WITH_TIMEOUT(w.engine()->data().steps().size() >= 2, 60000);
  QTest::keyClick(&w, Qt::Key_F11);
  settle();
  QVERIFY(!w.presentationMode());
  for (const QString& tab : w.tabNames()) {
    QVERIFY(w.selectTab(tab));
    settle();
    const QString wrong = panes_squeezed(w, tab);
    QVERIFY2(wrong.isEmpty(), qPrintable(wrong));
  }
  // Each handle dragged to both ends, as far as the mouse goes.
  for (const QString& tab : w.tabNames()) {
    QVERIFY(w.selectTab(tab));
    settle();
    for (QSplitter* s : w.findChildren<QSplitter*>()) {
      if (!s->isVisible()) continue;
      for (int i = 1; i < s->count(); ++i) {
        for (const QPoint to : {QPoint(-2000, -2000), QPoint(4000, 4000)}) {
          drag_handle(s, i, to);
          settle();
          const QString wrong = panes_squeezed(w, tab + QStringLiteral(", a handle dragged"));
          QVERIFY2(wrong.isEmpty(), qPrintable(wrong));
        }
      }
    }
  }
  QSignalSpy finished(w.engine(), &EngineController::finished);
  w.engine()->stop();
  QVERIFY(finished.count() > 0 || finished.wait(60000));
}

// The run form at the window's default size and at 1280x800: every label whole and in
// view, nothing scrolled sideways; the window takes 1280 px, not more.
void WindowLayoutTest::runFormLabelsAreWholeWithoutSidewaysScrolling() {
  MainWindow w(false);
  w.engine()->setDatabasePath(dir_.filePath(QStringLiteral("form.sqlite")));
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  settle();
  QCOMPARE(w.size(), QSize(1400, 900));  // the default
  QString wrong = form_cut(w, QStringLiteral("1400x900"));
  QVERIFY2(wrong.isEmpty(), qPrintable(wrong));
  w.resize(1280, 800);
  settle();
  QCOMPARE(w.size(), QSize(1280, 800));
  wrong = form_cut(w, QStringLiteral("1280x800"));
  QVERIFY2(wrong.isEmpty(), qPrintable(wrong));
  // An MLP's fields and More fields unfolded: still whole.
  auto* more = w.runPanel()->findChild<QGroupBox*>(QStringLiteral("more-fields"));
  QVERIFY(more);
  more->setChecked(true);
  settle();
  wrong = form_cut(w, QStringLiteral("1280x800, More fields"));
  QVERIFY2(wrong.isEmpty(), qPrintable(wrong));
}

// A run opened, then one trained; File > Open database: the status bar's run label names
// the database opened, not a run of the other, and the run panel's progress is empty.
void WindowLayoutTest::anotherDatabaseLeavesNoRunShown() {
  const QString a = dir_.filePath(QStringLiteral("a.sqlite"));
  const QString b = dir_.filePath(QStringLiteral("b.sqlite"));
  one_run_database(a);
  one_run_database(b);
  MainWindow w(false);
  w.engine()->setDatabasePath(a);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  QSignalSpy opened(w.engine(), &EngineController::opened);
  Q_EMIT w.runsTab()->openRequested(1);
  QVERIFY(opened.count() > 0 || opened.wait(30000));
  QLabel* label = nullptr;
  for (QLabel* l : w.statusBar()->findChildren<QLabel*>())
    if (l->text().startsWith(QStringLiteral("run 1"))) label = l;
  QVERIFY2(label, qPrintable(w.statusText()));
  QVERIFY(w.runPanel()->applyPreset(QStringLiteral("Outliers: tensorwise")));
  w.runPanel()->setSteps(3);
  QSignalSpy finished(w.engine(), &EngineController::finished);
  QCOMPARE(w.runPanel()->start(), QString());
  QVERIFY(finished.wait(60000));
  settle();
  QVERIFY(!w.runPanel()->statusText().isEmpty());  // "run finished"
  w.setFileDialogs(
      [&](QWidget*, const QString&, const QString&, const QString&) { return b; },
      [](QWidget*, const QString&, const QString&, const QString&) { return QString(); });
  QAction* open = nullptr;
  for (QAction* act : w.findChildren<QAction*>())
    if (act->objectName() == QLatin1String("open-database")) open = act;
  QVERIFY(open);
  open->trigger();
  settle();
  QCOMPARE(w.engine()->databasePath(), b);
  QVERIFY2(!label->text().contains(QStringLiteral("run")), qPrintable(label->text()));
  QVERIFY2(label->text().contains(QStringLiteral("b.sqlite")), qPrintable(label->text()));
  QVERIFY2(w.runPanel()->statusText().isEmpty(), qPrintable(w.runPanel()->statusText()));
  auto* progress = w.runPanel()->findChild<QProgressBar*>();
  QVERIFY(progress);
  QVERIFY2(progress->value() <= progress->minimum(), qPrintable(progress->text()));
}

// A notice said while the status bar was hidden, and the run label grown after it ("run 1
// opened; run 2 trains on"): the device and GEMM labels stay hidden while the message shows
// (they were drawn under it), and the message is cut with "..." to the room left of the
// permanent widgets rather than clipped under them.
void WindowLayoutTest::statusMessageNeverDrawnOverOtherText() {
  MainWindow w(false);
  w.resize(1280, 720);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  auto* device = w.statusBar()->findChild<QLabel*>(QStringLiteral("deviceLabel"));
  auto* gemm = w.statusBar()->findChild<QLabel*>(QStringLiteral("gemmLabel"));
  auto* run = w.statusBar()->findChild<QLabel*>(QStringLiteral("runStatus"));
  QVERIFY(device && gemm && run);
  w.statusBar()->hide();
  const QString notice =
      QStringLiteral("Notice: 8 FP8 linear layers kept in high precision on the CPU; ").repeated(4);
  w.showNotice(notice);
  w.statusBar()->show();
  settle();
  QVERIFY(!w.statusBar()->currentMessage().isEmpty());
  QVERIFY2(!device->isVisible() && !gemm->isVisible(),
           "the device labels show under the status message");
  run->setText(QStringLiteral("run 1 opened; run 2 trains on, a label that has grown long"));
  settle();
  const QString shown = w.statusBar()->currentMessage();
  QVERIFY(!shown.isEmpty());
  QVERIFY2(shown.endsWith(QChar(0x2026)), qPrintable(shown));
  const int width = w.statusBar()->fontMetrics().horizontalAdvance(shown);
  QVERIFY2(6 + width <= run->geometry().left(),
           qPrintable(QStringLiteral("message %1 px wide, run label at x %2")
                          .arg(width)
                          .arg(run->geometry().left())));
  w.statusBar()->clearMessage();
  settle();
  QVERIFY(device->isVisible() && gemm->isVisible());
  // Without a message, the labels side by side at 1280 px: the GEMM line gives up width
  // (cut with "...") rather than running under the run label.
  QVERIFY2(device->geometry().right() < gemm->geometry().left(), "device under the GEMM line");
  QVERIFY2(gemm->geometry().right() < run->geometry().left(),
           qPrintable(QStringLiteral("GEMM line to x %1, run label from x %2")
                          .arg(gemm->geometry().right())
                          .arg(run->geometry().left())));
  QVERIFY(run->geometry().right() <= w.statusBar()->width());
}

namespace {

// `shown` is `whole`, or a beginning of it cut after a whole word, with "…".
bool cut_at_a_word(const QString& whole, const QString& shown) {
  if (shown == whole) return true;
  if (!shown.endsWith(QChar(0x2026))) return false;
  const QString head = shown.chopped(1);
  if (head.isEmpty() || !whole.startsWith(head)) return false;
  const QChar next = whole.at(head.size());
  return next == QLatin1Char(' ') || QStringLiteral(",;:").contains(next);
}

}  // namespace

// At 1280x720 a long run label ("run stopped: ..." was drawn "run stopped: s") and a long
// message are cut after a whole word with "…", never mid-word or clipped; the whole text
// is in the tooltip.
void WindowLayoutTest::statusTextCutAtAWordWholeInItsTooltip() {
  MainWindow w(false);
  w.engine()->setDatabasePath(dir_.filePath(QStringLiteral("status.sqlite")));
  w.resize(1280, 720);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  settle();
  auto* run = w.statusBar()->findChild<QLabel*>(QStringLiteral("runStatus"));
  QVERIFY(run);
  const QString message = QStringLiteral(
      "stopped by the user at step 1234 of 100000, after the loss had risen "
      "three times above the reference's; the last checkpoint, written at step "
      "1200, is in /home/someone/experiments/fp8-workbench/checkpoints/run-17");
  const QString label = QStringLiteral("run stopped: ") + message;
  run->setText(label);
  w.showNotice(QStringLiteral("Notice: ") + message);
  settle();
  QVERIFY(run->geometry().right() <= w.statusBar()->width());
  QVERIFY(run->geometry().width() < run->fontMetrics().horizontalAdvance(label));  // it is cut
  auto* status = dynamic_cast<StatusLabel*>(run);
  QVERIFY2(status, "the run label draws its whole text, clipped where it is long");
  const QString shown = status->shownText();
  QVERIFY2(cut_at_a_word(label, shown), qPrintable(shown));
  QVERIFY(shown.size() > QStringLiteral("run stopped: ").size());
  QVERIFY(run->fontMetrics().horizontalAdvance(shown) <= run->contentsRect().width());
  QVERIFY2(status->fullToolTip().startsWith(label), qPrintable(status->fullToolTip()));
  QVERIFY(status->fullToolTip().contains(QStringLiteral("Notice: ")));  // the notices after
  // The message beside it.
  const QString said = w.statusBar()->currentMessage();
  QVERIFY(!said.isEmpty());
  QVERIFY2(cut_at_a_word(QStringLiteral("Notice: ") + message, said), qPrintable(said));
  QCOMPARE(w.statusBar()->toolTip(), QStringLiteral("Notice: ") + message);
  // A label that fits is drawn whole, and its tooltip is the notices alone.
  run->setText(QStringLiteral("run 3 training"));
  settle();
  QCOMPARE(status->shownText(), QStringLiteral("run 3 training"));
  QVERIFY(!status->fullToolTip().contains(QStringLiteral("run 3 training")));
}

// A 1920x1080 screen: the default 1400x900 window and a 1280x800 one fit on it.
int main(int argc, char** argv) {
  QTemporaryDir config_dir;
  const QString config = config_dir.filePath(QStringLiteral("screens.json"));
  QFile f(config);
  if (!f.open(QIODevice::WriteOnly)) return 1;
  f.write(R"({"screens": [{"name": "1080p", "x": 0, "y": 0, "width": 1920, "height": 1080,
     "logicalDpi": 96, "logicalBpi": 96, "dpr": 1}]})");
  f.close();
  qputenv("QT_QPA_PLATFORM", ("offscreen:configfile=" + config).toUtf8());
  QApplication app(argc, argv);
  WindowLayoutTest test;
  return QTest::qExec(&test, argc, argv);
}

#include "window_layout_test.moc"
