// The Runs tab's list: a run being written (live) is refused at once on Delete, with no
// question asked first; the question names the runs it would delete (id and name); a
// very long name is elided in a column of capped width, whole in its tooltip; the final
// loss column says in its header what it is, with the definition in the header's tooltip,
// and the loss gap stands beside it.
// The run form filled from an opened run names no preset (its box says so); changed
// fields name no preset either ("custom"); choosing the preset again loads it.
// A database whose runs cannot be read (a file that is not a database) is said once,
// however often the tab is shown or polls it, and the tab itself says why; another
// database that cannot be read is said again. An empty new name is refused, said. An
// export onto the run database is refused without "replace?" asked first; onto another
// file that is there, replacing is asked. The empty loss plot says how to fill it. Runs
// are listed newest first with their recipe, scaling, margin and window, and the
// selection stays on its runs when a new run comes in.
#include <QApplication>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QElapsedTimer>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QHeaderView>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTableView>
#include <QTemporaryDir>
#include <QTimer>
#include <QtTest>
#include <cmath>
#include <string>

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/sweep/final_loss.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/run_panel/run_panel.h"
#include "fp8wb/views/runs/run_list_model.h"
#include "fp8wb/views/runs/runs_tab.h"

using namespace fp8wb;

namespace {

// Ten steps of loss 1 / (step + 1); with a reference, the reference's loss 0.0625 below.
int64_t add_run(RunStore& store, const std::string& name, bool finish, bool reference = false,
                const std::string& config = "{}") {
  const int64_t id = store.create_run(name, fp8wb::RunKind::Train, config, "cpu");
  MetricBatch b;
  b.run_id = id;
  for (int64_t s = 0; s < 10; ++s) {
    StepMetrics m;
    m.step = s;
    m.loss = 1.0 / static_cast<double>(s + 1);
    // As the trainer stores them: NaN without a reference.
    m.ref_loss = reference ? m.loss - 0.0625 : NAN;
    m.loss_gap = reference ? 0.0625 : NAN;
    b.steps.push_back(m);
  }
  if (finish) {
    b.final = true;
    b.status = RunStatus::Finished;
  }
  store.write(std::move(b));
  return id;
}

// The engine on a file that holds `bytes` (no database); false where it cannot be written.
bool on_text_file(EngineController& engine, const QString& path, const QByteArray& bytes) {
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate) || f.write(bytes) != bytes.size())
    return false;
  f.close();
  engine.setDatabasePath(path);
  return true;
}

// Shows the tab and waits until it has said that its runs cannot be read, and is done.
bool shown_failing(RunsTab& tab) {
  QSignalSpy failed(&tab, &RunsTab::failed);
  tab.show();
  return QTest::qWaitForWindowExposed(&tab) && (failed.count() > 0 || failed.wait(30000)) &&
         QTest::qWaitFor([&] { return !tab.isReading(); }, 30000);
}

}  // namespace

class RunsListTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void liveRunRefusedBeforeAskingAndTheQuestionNamesRuns();
  void formFromAnOpenedRunNamesNoPreset();
  void unreadableDatabaseSaidOnceAndInTheTab();
  void headersWholeWithoutRuns();
  void whyRunsCannotBeReadIsSaidWhole();
  void lastColumnFillsTheTable();
  void anEmptyNameIsRefusedAndSaid();
  void exportOntoTheDatabaseIsRefusedBeforeAskingToReplace();
  void theEmptyLossPlotSaysHowToFillIt();
  void theShownTabPollsAtTheIntervalGiven();
  void runsOfOnePresetAreToldApartNewestFirst();
  void anOverlaidLiveRunFollowsItsSteps();
  void everyColumnFitsWithoutScrolling();
  void aRunStillTrainingShowsItsLossSoFar();
  void aGapAgainstABrokenReferenceIsMarked();

 private:
  QTemporaryDir dir_;
};

void RunsListTest::liveRunRefusedBeforeAskingAndTheQuestionNamesRuns() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("runs.sqlite")));
  RunStore& store = engine.store();
  const std::string long_name(300, 'n');
  add_run(store, "alpha", true, /*reference=*/true);
  // This process is alive and the run has not ended: it is being written (live).
  add_run(store, "writer", false);
  add_run(store, "long" + long_name, true);
  store.flush();

  RunsTab tab(&engine);
  tab.resize(1200, 700);
  QSignalSpy reloaded(&tab, &RunsTab::reloaded);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  QVERIFY(reloaded.count() > 0 || reloaded.wait(30000));
  QTRY_COMPARE(tab.model()->rowCount(), 3);
  // Newest first: long (3), writer (2), alpha (1).
  QVERIFY(tab.model()->runAt(1)->live);
  auto* view = tab.findChild<QTableView*>(QStringLiteral("runs"));
  auto* del = tab.findChild<QPushButton*>(QStringLiteral("delete"));
  QVERIFY(view && del);
  auto click_row = [&](int row) {
    const QRect r = view->visualRect(tab.model()->index(row, RunListModel::Id));
    QTest::mouseClick(view->viewport(), Qt::LeftButton, {}, r.center());
  };

  // The live run: refused at once, named; nothing asked.
  QSignalSpy failed(&tab, &RunsTab::failed);
  click_row(1);
  QTest::mouseClick(del, Qt::LeftButton);
  QVERIFY(!tab.findChild<QMessageBox*>(QStringLiteral("delete-runs")));
  QCOMPARE(failed.count(), 1);
  const QString why = failed.at(0).at(0).toString();
  QVERIFY2(why.contains(QStringLiteral("2 (writer)")) && why.contains(QStringLiteral("live")),
           qPrintable(why));

  // A finished run: the question names it by id and name; No keeps it.
  click_row(2);
  QTest::mouseClick(del, Qt::LeftButton);
  auto* confirm = tab.findChild<QMessageBox*>(QStringLiteral("delete-runs"));
  QVERIFY(confirm);
  QVERIFY2(confirm->text().contains(QStringLiteral("1 (alpha)")), qPrintable(confirm->text()));
  QTest::mouseClick(confirm->button(QMessageBox::No), Qt::LeftButton);
  QCOMPARE(failed.count(), 1);

  // The long name: elided in a capped column, whole in the tooltip; the other columns
  // stay in view.
  const QModelIndex name = tab.model()->index(0, RunListModel::Name);
  QCOMPARE(tab.model()->data(name, Qt::ToolTipRole).toString(),
           QString::fromStdString("long" + long_name));
  QVERIFY2(view->columnWidth(RunListModel::Name) <= 400,
           qPrintable(QString::number(view->columnWidth(RunListModel::Name))));
  QVERIFY(view->textElideMode() != Qt::ElideNone);
  QVERIFY(view->columnViewportPosition(RunListModel::Started) < view->viewport()->width());

  // The final loss column: its header says which steps, its tooltip the definition.
  const QString header =
      tab.model()->headerData(RunListModel::Loss, Qt::Horizontal, Qt::DisplayRole).toString();
  QVERIFY2(header.contains(QStringLiteral("last 10%")), qPrintable(header));
  QCOMPARE(tab.model()->headerData(RunListModel::Loss, Qt::Horizontal, Qt::ToolTipRole).toString(),
           QString::fromUtf8(kFinalLossDefinition.data(),
                             static_cast<qsizetype>(kFinalLossDefinition.size())));
  // Beside it the loss gap, as `fp8wb runs list` gives it: the final loss (step 9's, 0.1)
  // less the reference's over the same steps; "-" for a run without a reference.
  QCOMPARE(tab.model()->headerData(RunListModel::Gap, Qt::Horizontal, Qt::DisplayRole).toString(),
           QStringLiteral("loss gap"));
  QCOMPARE(tab.model()->headerData(RunListModel::Gap, Qt::Horizontal, Qt::ToolTipRole).toString(),
           QString::fromUtf8(kFinalLossDefinition.data(),
                             static_cast<qsizetype>(kFinalLossDefinition.size())));
  QCOMPARE(tab.model()->index(2, RunListModel::Loss).data().toString(), QStringLiteral("0.1000"));
  QCOMPARE(tab.model()->index(2, RunListModel::Gap).data().toString(), QStringLiteral("+0.0625"));
  QCOMPARE(tab.model()->index(0, RunListModel::Gap).data().toString(), QStringLiteral("-"));
}

void RunsListTest::formFromAnOpenedRunNamesNoPreset() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("panel.sqlite")));
  RunPanel panel(&engine);
  panel.show();
  const QString preset = RunPanel::presetNames().last();
  QVERIFY(panel.applyPreset(preset));
  QCOMPARE(panel.presetName(), preset);
  // A changed field: the form is no longer the preset's.
  QVERIFY(panel.applyOverrides({QStringLiteral("steps=12")}).isEmpty());
  QVERIFY2(panel.presetName().isEmpty(), qPrintable(panel.presetName()));
  QVERIFY(panel.applyPreset(preset));

  // An opened run's settings, no preset's: no preset is named, the box says why. (One
  // with a preset's settings names that preset: run_panel_test.)
  RunConfig c = panel.config();
  c.name = "sweep trial margin=2 window=16 seed=1";
  c.steps += 13;
  panel.setConfig(c);
  QVERIFY2(panel.presetName().isEmpty(), qPrintable(panel.presetName()));
  auto* box = panel.findChild<QComboBox*>(QStringLiteral("preset"));
  QVERIFY(box);
  QCOMPARE(box->currentIndex(), -1);
  QVERIFY(box->placeholderText().contains(QStringLiteral("run")));
  QCOMPARE(panel.config().name, c.name);

  // Choosing the preset again loads it, its name too.
  box->setCurrentIndex(box->findText(preset));
  QCOMPARE(panel.presetName(), preset);
  QCOMPARE(QString::fromStdString(panel.config().name), preset);
}

void RunsListTest::unreadableDatabaseSaidOnceAndInTheTab() {
  auto not_a_database = [&](const QString& name) {
    const QString path = dir_.filePath(name);
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate)) return QString();
    f.write("hello");
    return path;
  };
  const QString first = not_a_database(QStringLiteral("first-notdb.sqlite"));
  const QString second = not_a_database(QStringLiteral("second-notdb.sqlite"));
  QVERIFY(!first.isEmpty() && !second.isEmpty());
  EngineController engine;
  engine.setDatabasePath(first);

  RunsTab tab(&engine);
  tab.setPollInterval(20);  // polls waited for below, not slept through
  tab.resize(900, 600);
  QSignalSpy failed(&tab, &RunsTab::failed);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  QVERIFY(failed.count() > 0 || failed.wait(30000));
  QVERIFY(failed.at(0).at(0).toString().contains(QLatin1String("not a database")));
  // Shown again and again (as closing a message over the window does), and polled
  // while shown: nothing more is said.
  for (int k = 0; k < 5; ++k) {
    tab.hide();
    tab.show();
    QVERIFY(QTest::qWaitForWindowExposed(&tab));
    QTRY_VERIFY_WITH_TIMEOUT(!tab.isReading(), 30000);
  }
  const int polls = tab.pollReads();
  QTRY_VERIFY_WITH_TIMEOUT(tab.pollReads() >= polls + 2 && !tab.isReading(), 30000);
  QCOMPARE(failed.count(), 1);
  QCOMPARE(tab.model()->rowCount(), 0);
  QVERIFY2(tab.statusText().contains(QLatin1String("could not be read")),
           qPrintable(tab.statusText()));
  QVERIFY2(tab.statusText().contains(QLatin1String("not a database")),
           qPrintable(tab.statusText()));

  // Another database that cannot be read is said again, once.
  engine.setDatabasePath(second);
  tab.reload();
  QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 2, 30000);
  tab.hide();
  tab.show();
  const int polls_again = tab.pollReads();
  QTRY_VERIFY_WITH_TIMEOUT(tab.pollReads() > polls_again && !tab.isReading(), 30000);
  QCOMPARE(failed.count(), 2);
  QVERIFY2(tab.statusText().contains(second), qPrintable(tab.statusText()));
}

// With no runs listed (a database whose runs cannot be read) every column header is
// whole: no column narrower than its header's text.
void RunsListTest::headersWholeWithoutRuns() {
  EngineController engine;
  QVERIFY(on_text_file(engine, dir_.filePath(QStringLiteral("headers-notdb.sqlite")), "hello"));
  RunsTab tab(&engine);
  tab.resize(1200, 600);
  QVERIFY(shown_failing(tab));
  auto* view = tab.findChild<QTableView*>(QStringLiteral("runs"));
  QVERIFY(view);
  QHeaderView* header = view->horizontalHeader();
  QCOMPARE(header->count(), static_cast<int>(RunListModel::ColumnCount));
  for (int i = 0; i < header->count(); ++i) {
    const QString text = tab.model()->headerData(i, Qt::Horizontal, Qt::DisplayRole).toString();
    QVERIFY2(header->sectionSize(i) >= header->sectionSizeHint(i),
             qPrintable(QStringLiteral("\"%1\": %2 px of %3")
                            .arg(text)
                            .arg(header->sectionSize(i))
                            .arg(header->sectionSizeHint(i))));
  }
}

// Why a database's runs cannot be read, a long line, is shown whole in the tab's status
// line (wrapped), and does not widen the tab (in the window: cut at the screen's edge).
void RunsListTest::whyRunsCannotBeReadIsSaidWhole() {
  EngineController engine;
  QVERIFY(on_text_file(engine, dir_.filePath(QStringLiteral("status-notdb.sqlite")),
                       QByteArray(8192, 'x')));
  RunsTab tab(&engine);
  tab.resize(900, 600);
  QVERIFY(shown_failing(tab));
  auto* status = tab.findChild<QLabel*>(QStringLiteral("runs-status"));
  QVERIFY(status);
  QCoreApplication::processEvents();
  const QString text = status->text();
  QVERIFY2(text.contains(QLatin1String("could not be read")), qPrintable(text));
  // Its whole text in the label's own rectangle, within the tab.
  const QRect needed = status->fontMetrics().boundingRect(
      QRect(0, 0, status->contentsRect().width(), 10000), Qt::TextWordWrap, text);
  QVERIFY2(needed.width() <= status->contentsRect().width() &&
               needed.height() <= status->contentsRect().height() + 1,
           qPrintable(QStringLiteral("%1 x %2 needed, %3 x %4 shown")
                          .arg(needed.width())
                          .arg(needed.height())
                          .arg(status->contentsRect().width())
                          .arg(status->contentsRect().height())));
  QVERIFY(tab.rect().contains(QRect(status->mapTo(&tab, QPoint(0, 0)), status->size())));
  // ... and the line does not widen the tab (in the window: past the screen's edge).
  QCOMPARE(tab.width(), 900);
  QVERIFY2(tab.minimumSizeHint().width() <= 900,
           qPrintable(QString::number(tab.minimumSizeHint().width())));
}

// The last column reaches the table's right edge: after the list is read, as it is read
// again, and when the tab is made wider or narrower.
void RunsListTest::lastColumnFillsTheTable() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("stretch.sqlite")));
  RunStore& store = engine.store();
  add_run(store, "a", true);
  add_run(store, "b", true);
  store.flush();
  RunsTab tab(&engine);
  tab.resize(1400, 700);
  QSignalSpy reloaded(&tab, &RunsTab::reloaded);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  QVERIFY(reloaded.count() > 0 || reloaded.wait(30000));
  QTRY_COMPARE(tab.model()->rowCount(), 2);
  auto* view = tab.findChild<QTableView*>(QStringLiteral("runs"));
  QVERIFY(view);
  QHeaderView* h = view->horizontalHeader();
  auto fills = [&] {
    const int last = h->logicalIndex(h->count() - 1);
    return h->sectionViewportPosition(last) + h->sectionSize(last) == view->viewport()->width();
  };
  QTRY_VERIFY2(
      fills(),
      qPrintable(QStringLiteral("%1 of %2").arg(h->length()).arg(view->viewport()->width())));
  // Read again (the tab polls once a second).
  reloaded.clear();
  QVERIFY(reloaded.wait(30000));
  QTest::qWait(20);
  QVERIFY(fills());
  tab.resize(1600, 700);
  QTRY_VERIFY(fills());
  tab.resize(1300, 700);
  QTRY_VERIFY(fills());
}

// The Runs tab of a database with one finished run "kept", shown, its list read.
struct ShownRuns {
  EngineController engine;
  RunsTab tab{&engine};
  ShownRuns(const QString& db) {
    engine.setDatabasePath(db);
    add_run(engine.store(), "kept", true);
    engine.store().flush();
    tab.resize(1200, 700);
  }
  bool show() {
    QSignalSpy reloaded(&tab, &RunsTab::reloaded);
    tab.show();
    return QTest::qWaitForWindowExposed(&tab) && (reloaded.count() > 0 || reloaded.wait(30000)) &&
           tab.model()->rowCount() == 1;
  }
  void selectFirst() {
    auto* view = tab.findChild<QTableView*>(QStringLiteral("runs"));
    QTest::mouseClick(view->viewport(), Qt::LeftButton, {},
                      view->visualRect(tab.model()->index(0, RunListModel::Id)).center());
  }
};

// Renaming to nothing (blanks): refused, and said, the run keeps its name.
void RunsListTest::anEmptyNameIsRefusedAndSaid() {
  ShownRuns r(dir_.filePath(QStringLiteral("rename.sqlite")));
  QVERIFY(r.show());
  r.selectFirst();
  QSignalSpy failed(&r.tab, &RunsTab::failed);
  QTest::mouseClick(r.tab.findChild<QPushButton*>(QStringLiteral("rename")), Qt::LeftButton);
  auto* editor = r.tab.findChild<QInputDialog*>(QStringLiteral("rename-run"));
  QVERIFY(editor);
  editor->setTextValue(QStringLiteral("   "));
  auto* ok = editor->findChild<QDialogButtonBox*>()->button(QDialogButtonBox::Ok);
  QVERIFY(ok);
  QTest::mouseClick(ok, Qt::LeftButton);
  QTRY_COMPARE(failed.count(), 1);
  const QString why = failed.at(0).at(0).toString();
  QVERIFY2(why.contains(QStringLiteral("empty")), qPrintable(why));
  QCOMPARE(r.engine.store().runs().front().name, std::string("kept"));
}

// Export CSV... driven through its file dialog: the run database's own path is refused
// with no "replace?" first (no question at all); a CSV file that is there is replaced
// after a question answered Yes.
void RunsListTest::exportOntoTheDatabaseIsRefusedBeforeAskingToReplace() {
  const QString db = dir_.filePath(QStringLiteral("export.sqlite"));
  ShownRuns r(db);
  QVERIFY(r.show());
  r.selectFirst();
  auto* button = r.tab.findChild<QPushButton*>(QStringLiteral("export"));
  QVERIFY(button);
  // Answers the modal dialogs as they come: the file dialog is given `path` once (then
  // cancelled), every question is recorded and answered `answer`.
  auto drive = [&](const QString& path, QMessageBox::StandardButton answer) {
    QStringList asked;
    bool given = false;
    QTimer t;
    t.setInterval(50);
    QWidget* last = nullptr;  // answered already (its answer is on its way)
    QObject::connect(&t, &QTimer::timeout, [&] {
      QWidget* modal = QApplication::activeModalWidget();
      if (!modal || modal == last) return;
      last = modal;
      if (auto* box = qobject_cast<QMessageBox*>(modal)) {
        asked << box->text();
        QAbstractButton* b = box->button(answer);
        if (b) {
          QMetaObject::invokeMethod(b, "click", Qt::QueuedConnection);
        } else {
          QMetaObject::invokeMethod(box, "reject", Qt::QueuedConnection);
        }
      } else if (auto* d = qobject_cast<QFileDialog*>(modal)) {
        if (given) {
          QMetaObject::invokeMethod(d, "reject", Qt::QueuedConnection);
          return;
        }
        given = true;
        // Typed into the name field, as a user would.
        auto* name = d->findChild<QLineEdit*>(QStringLiteral("fileNameEdit"));
        if (name) name->setText(path);
        // Later, out of this handler: the questions it may ask come in their own loop.
        QMetaObject::invokeMethod(d, "accept", Qt::QueuedConnection);
      }
    });
    t.start();
    QTest::mouseClick(button, Qt::LeftButton);
    return asked;
  };
  QSignalSpy failed(&r.tab, &RunsTab::failed);
  QStringList asked = drive(db, QMessageBox::No);
  QVERIFY2(asked.isEmpty(), qPrintable(asked.join(QLatin1Char('\n'))));
  QCOMPARE(failed.count(), 1);
  QVERIFY2(failed.at(0).at(0).toString().contains(QStringLiteral("run database")),
           qPrintable(failed.at(0).at(0).toString()));
  QVERIFY(QFileInfo(db).size() > 1000);  // still the database

  const QString csv = dir_.filePath(QStringLiteral("old.csv"));
  QFile f(csv);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write("old\n");
  f.close();
  asked = drive(csv, QMessageBox::Yes);
  QCOMPARE(asked.size(), 1);
  QVERIFY2(asked.front().contains(QStringLiteral("old.csv")), qPrintable(asked.front()));
  QCOMPARE(failed.count(), 1);
  QVERIFY(QFileInfo(csv).size() > 100);  // the run's series
}

// Before "Overlay loss curves" the loss plot is empty: a line over it says what fills it;
// once curves are drawn, it is gone.
void RunsListTest::theEmptyLossPlotSaysHowToFillIt() {
  ShownRuns r(dir_.filePath(QStringLiteral("hint.sqlite")));
  QVERIFY(r.show());
  ExportablePlot* plot = r.tab.overlayPlot();
  plot->replot(QCustomPlot::rpImmediateRefresh);
  auto* hint = plot->findChild<QCPItemText*>(QStringLiteral("emptyHint"));
  QVERIFY2(hint, "no hint in the empty loss plot");
  QVERIFY(hint->visible());
  QVERIFY2(hint->text().contains(QStringLiteral("Overlay")), qPrintable(hint->text()));
  r.selectFirst();
  QSignalSpy shown(&r.tab, &RunsTab::curvesShown);
  QTest::mouseClick(r.tab.findChild<QPushButton*>(QStringLiteral("overlay")), Qt::LeftButton);
  QVERIFY(shown.count() > 0 || shown.wait(30000));
  plot->replot(QCustomPlot::rpImmediateRefresh);
  QVERIFY(!hint->visible());
}

// The shown tab reads the list again at the interval it is given (1000 ms unless set),
// so that runs other processes write appear by the poll alone; a hidden tab does not poll.
void RunsListTest::theShownTabPollsAtTheIntervalGiven() {
  const QString path = dir_.filePath(QStringLiteral("polled.sqlite"));
  auto writer = RunStore::open(path.toStdString());
  add_run(*writer, "first", true);
  writer->flush();
  EngineController engine;
  engine.setDatabasePath(path);
  RunsTab tab(&engine);
  QCOMPARE(tab.pollInterval(), 1000);
  tab.setPollInterval(30);
  QCOMPARE(tab.pollInterval(), 30);
  QSignalSpy reloaded(&tab, &RunsTab::reloaded);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  QVERIFY(reloaded.count() > 0 || reloaded.wait(30000));
  QTRY_COMPARE_WITH_TIMEOUT(tab.model()->rowCount(), 1, 30000);
  // Five polls a second apart would take four seconds at least; 30 ms apart, a fraction of
  // one, even on a loaded machine.
  QElapsedTimer elapsed;
  elapsed.start();
  const int before = tab.pollReads();
  QTRY_VERIFY_WITH_TIMEOUT(tab.pollReads() >= before + 5, 30000);
  QVERIFY2(elapsed.elapsed() < 2500,
           qPrintable(QStringLiteral("5 polls took %1 ms").arg(elapsed.elapsed())));
  // A run written by another connection appears without a reload asked for.
  add_run(*writer, "second", true);
  writer->flush();
  QTRY_COMPARE_WITH_TIMEOUT(tab.model()->rowCount(), 2, 30000);
  tab.hide();
  QTRY_VERIFY_WITH_TIMEOUT(!tab.isReading(), 30000);
  const int hidden = tab.pollReads();
  QTest::qWait(300);  // ten intervals
  QCOMPARE(tab.pollReads(), hidden);
}

// Two runs of one preset with other windows and margins are told apart by their columns;
// the newest is listed first; a run written while one is selected comes in at the top
// and the selection stays on the run selected.
void RunsListTest::runsOfOnePresetAreToldApartNewestFirst() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("columns.sqlite")));
  auto cfg = [](int margin, int window) {
    RunConfig c;
    c.recipe = Float8Recipe::Tensorwise;
    c.scaling = ScalingMode::Delayed;
    c.margin = margin;
    c.window = window;
    return run_config_json(c);
  };
  add_run(engine.store(), "Delayed scaling: window 1", true, false, cfg(0, 1));
  add_run(engine.store(), "Delayed scaling: margin=2, window=1024", true, false, cfg(2, 1024));
  engine.store().flush();
  RunsTab tab(&engine);
  tab.resize(1400, 700);
  QSignalSpy reloaded(&tab, &RunsTab::reloaded);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  QVERIFY(reloaded.count() > 0 || reloaded.wait(30000));
  QTRY_COMPARE(tab.model()->rowCount(), 2);
  RunListModel* m = tab.model();
  auto cell = [m](int row, int column) { return m->index(row, column).data().toString(); };
  QCOMPARE(m->runAt(0)->id, int64_t{2});  // newest first
  QCOMPARE(m->headerData(RunListModel::Window, Qt::Horizontal, Qt::DisplayRole).toString(),
           QStringLiteral("window"));
  QCOMPARE(cell(0, RunListModel::Recipe), QStringLiteral("tensorwise"));
  QCOMPARE(cell(0, RunListModel::Scaling), QStringLiteral("delayed"));
  QCOMPARE(cell(0, RunListModel::Margin), QStringLiteral("2"));
  QCOMPARE(cell(0, RunListModel::Window), QStringLiteral("1024"));
  QCOMPARE(cell(1, RunListModel::Margin), QStringLiteral("0"));
  QCOMPARE(cell(1, RunListModel::Window), QStringLiteral("1"));
  // The older run selected; a new run comes in (the tab polls): at the top, and the
  // selection still on run 1.
  auto* view = tab.findChild<QTableView*>(QStringLiteral("runs"));
  QVERIFY(view);
  QTest::mouseClick(view->viewport(), Qt::LeftButton, {},
                    view->visualRect(m->index(1, RunListModel::Id)).center());
  auto selected = [&] {
    std::vector<int64_t> ids;
    for (const QModelIndex& i : view->selectionModel()->selectedRows())
      ids.push_back(m->runAt(i.row())->id);
    return ids;
  };
  QCOMPARE(selected(), std::vector<int64_t>{1});
  add_run(engine.store(), "third", true, false, cfg(1, 16));
  engine.store().flush();
  QTRY_COMPARE_WITH_TIMEOUT(m->rowCount(), 3, 30000);
  QCOMPARE(m->runAt(0)->id, int64_t{3});
  QCOMPARE(selected(), std::vector<int64_t>{1});
  QCOMPARE(view->currentIndex().row(), 2);
}

// A run still being written, overlaid: its curve follows the steps written after the
// overlay was made, and its end.
void RunsListTest::anOverlaidLiveRunFollowsItsSteps() {
  const QString path = dir_.filePath(QStringLiteral("follow.sqlite"));
  auto writer = RunStore::open(path.toStdString());
  const int64_t id = add_run(*writer, "growing", false);  // steps 0..9, not ended
  writer->flush();
  EngineController engine;
  engine.setDatabasePath(path);
  RunsTab tab(&engine);
  tab.setPollInterval(30);
  tab.resize(1200, 700);
  QSignalSpy reloaded(&tab, &RunsTab::reloaded);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  QVERIFY(reloaded.count() > 0 || reloaded.wait(30000));
  QTRY_COMPARE(tab.model()->rowCount(), 1);
  QSignalSpy shown(&tab, &RunsTab::curvesShown);
  tab.overlay({id});
  QVERIFY(shown.wait(30000));
  ExportablePlot* plot = tab.overlayPlot();
  QCOMPARE(plot->graph(0)->dataCount(), 10);
  // Ten more steps, then its end: the overlay reads them by the list's poll alone.
  MetricBatch b;
  b.run_id = id;
  for (int64_t s = 10; s < 20; ++s) {
    StepMetrics m;
    m.step = s;
    m.loss = 1.0 / static_cast<double>(s + 1);
    m.ref_loss = NAN;
    m.loss_gap = NAN;
    b.steps.push_back(m);
  }
  b.final = true;
  b.status = RunStatus::Finished;
  writer->write(std::move(b));
  writer->flush();
  QTRY_COMPARE_WITH_TIMEOUT(plot->graph(0)->dataCount(), 20, 30000);
}

// The tab as wide as it is in a window 1400 px wide (the run panel beside it), runs with
// long names and every column filled: each column in view without scrolling (the source
// column needed a horizontal scroll), the model column naming each run's model.
void RunsListTest::everyColumnFitsWithoutScrolling() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("fit.sqlite")));
  RunConfig gpt;
  gpt.model = ModelKind::Gpt;
  RunConfig mlp;
  mlp.model = ModelKind::Mlp;
  add_run(engine.store(), "Delayed scaling: margin=2, window=1024, amax_algo=most_recent", true,
          true, run_config_json(gpt));
  add_run(engine.store(), "Outliers: tensorwise vs blockwise: recipe=rowwise, steps=300", true,
          true, run_config_json(mlp));
  engine.store().flush();
  RunsTab tab(&engine);
  tab.resize(1000, 700);
  QSignalSpy reloaded(&tab, &RunsTab::reloaded);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  QVERIFY(reloaded.count() > 0 || reloaded.wait(30000));
  QTRY_COMPARE(tab.model()->rowCount(), 2);
  RunListModel* m = tab.model();
  QCOMPARE(m->headerData(RunListModel::Model, Qt::Horizontal, Qt::DisplayRole).toString(),
           QStringLiteral("model"));
  QCOMPARE(m->index(0, RunListModel::Model).data().toString(), QStringLiteral("mlp"));
  QCOMPARE(m->index(1, RunListModel::Model).data().toString(), QStringLiteral("gpt"));
  auto* view = tab.findChild<QTableView*>(QStringLiteral("runs"));
  QVERIFY(view);
  QHeaderView* h = view->horizontalHeader();
  QTRY_VERIFY2(h->length() <= view->viewport()->width(),
               qPrintable(QStringLiteral("%1 px of columns in %2 px")
                              .arg(h->length())
                              .arg(view->viewport()->width())));
  QCOMPARE(view->horizontalScrollBar()->maximum(), 0);
  // Each column but the name as wide as its cells and header; the name elided, whole in
  // its tooltip.
  const QAbstractItemView* items = view;  // sizeHintForColumn() is public here
  for (int c = 0; c < h->count(); ++c) {
    if (c == RunListModel::Name || c == h->count() - 1) continue;
    const int wants = std::max(items->sizeHintForColumn(c), h->sectionSizeHint(c));
    QVERIFY2(
        h->sectionSize(c) >= wants,
        qPrintable(
            QStringLiteral("column %1: %2 px of %3").arg(c).arg(h->sectionSize(c)).arg(wants)));
  }
}

// Issue #52: a seed whose high-precision reference climbed to 35 and then 110 late in the
// run showed a loss gap of -1.1 ("FP8 beats bf16") unmarked. The gap cell is marked and its
// tooltip says why; a run whose reference held is not.
void RunsListTest::aGapAgainstABrokenReferenceIsMarked() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  auto store = RunStore::open((dir.path() + QStringLiteral("/runs.sqlite")).toStdString());
  auto add = [&](const std::string& name, bool blow_up) {
    const int64_t id = store->create_run(name, fp8wb::RunKind::Train, "{}", "cpu");
    MetricBatch b;
    b.run_id = id;
    for (int64_t s = 0; s < 150; ++s) {
      StepMetrics m;
      m.step = s;
      m.ref_loss = 2.0 / static_cast<double>(s + 1) + 0.4;
      if (blow_up && s >= 110) m.ref_loss = s < 120 ? 35.0 : 110.0;
      m.loss = 2.0 / static_cast<double>(s + 1) + 0.42;
      m.loss_gap = m.loss - m.ref_loss;
      b.steps.push_back(m);
    }
    b.final = true;
    b.status = RunStatus::Finished;
    store->write(std::move(b));
    return id;
  };
  add("held", false);
  add("broken", true);
  store->flush();
  std::vector<RunInfo> runs = store->runs();
  std::vector<FinalLoss> finals;
  for (const RunInfo& r : runs) finals.push_back(final_loss(*store, r));
  RunListModel model;
  model.setRuns(runs, finals);
  QCOMPARE(model.rowCount(), 2);
  for (int row = 0; row < 2; ++row) {
    const QString name = model.index(row, RunListModel::Name).data().toString();
    const QModelIndex gap = model.index(row, RunListModel::Gap);
    const QString text = gap.data().toString();
    const QString tip = gap.data(Qt::ToolTipRole).toString();
    if (name == QStringLiteral("broken")) {
      QVERIFY2(text.endsWith(QStringLiteral("!")), qPrintable(text));
      QVERIFY2(tip.contains(QStringLiteral("No comparison")) &&
                   tip.contains(QStringLiteral("reference diverged or blew up")),
               qPrintable(tip));
    } else {
      QCOMPARE(text, QStringLiteral("+0.0200"));
      QVERIFY2(!tip.contains(QStringLiteral("No comparison")), qPrintable(tip));
    }
  }
}

QTEST_MAIN(RunsListTest)
// A run still training (or paused) has no final loss: the list marks its figure as the
// loss so far and says over which steps; a finished run's is its final loss, unmarked.
void RunsListTest::aRunStillTrainingShowsItsLossSoFar() {
  RunListModel m;
  std::vector<RunInfo> runs(3);
  std::vector<FinalLoss> finals(3);
  const RunStatus statuses[] = {RunStatus::Running, RunStatus::Paused, RunStatus::Finished};
  for (int i = 0; i < 3; ++i) {
    runs[i].id = 3 - i;  // newest first, as the list keeps them
    runs[i].status = statuses[i];
    runs[i].last_step = 99;
    finals[i].loss = 1.5;
    finals[i].from_step = 90;
    finals[i].to_step = 99;
  }
  m.setRuns(runs, finals);
  for (int row = 0; row < 3; ++row) {
    const QString shown = m.data(m.index(row, RunListModel::Loss), Qt::DisplayRole).toString();
    const QString tip = m.data(m.index(row, RunListModel::Loss), Qt::ToolTipRole).toString();
    if (m.runAt(row)->status == RunStatus::Finished) {
      QCOMPARE(shown, QStringLiteral("1.5000"));
      QVERIFY(!tip.contains(QLatin1String("still training")));
    } else {
      QCOMPARE(shown, QStringLiteral("1.5000 so far"));
      QVERIFY2(
          tip.contains(QLatin1String("still training")) && tip.contains(QLatin1String("90-99")),
          qPrintable(tip));
    }
  }
}

#include "runs_list_test.moc"
