// What a user trying the workbench ran into: the Runs tab's overlaid curves of a database
// left (its run ids name other runs in the next one); the Sweeps form's preset name kept
// after its base config was edited (and its trials named after it); a long value quoted
// whole in the Formats tab's error line, widening the page.
#include <QComboBox>
#include <QLabel>
#include <QPlainTextEdit>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <cstring>
#include <map>

#include "checkpoint_tab_shown.h"
#include "fp8wb/core/checkpoint/safetensors.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/views/checkpoint/checkpoint_tab.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/formats/formats_tab.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/runs/runs_tab.h"
#include "fp8wb/views/sweeps/sweeps_tab.h"

using namespace fp8wb;

namespace {

// A database at `path` whose one run (id 1) is named `name`, with a few falling losses.
void one_run_database(const QString& path, const std::string& name) {
  auto store = RunStore::open(path.toStdString());
  RunConfig c;
  c.name = name;
  const int64_t id = store->create_run(name, fp8wb::RunKind::Train, run_config_json(c), "cpu");
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

// Types `lines` into the editor, replacing its text, as a user does: Return between lines.
void type_lines(QPlainTextEdit* edit, const QStringList& lines) {
  edit->setFocus();
  edit->selectAll();
  QTest::keyClick(edit, Qt::Key_Delete);
  for (qsizetype i = 0; i < lines.size(); ++i) {
    if (i > 0) QTest::keyClick(edit, Qt::Key_Return);
    QTest::keyClicks(edit, lines[i]);
  }
}

}  // namespace

class UserTrialTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase();
  void overlaysLeaveWithTheirDatabase();
  void editedPresetIsCustom();
  void longValueIsElided();
  void tensorNamesCannotReorderText();
  void exactSqnrIsInf();
  void longNamesKeepTheTabsSize();

 private:
  QTemporaryDir dir_;
};

void UserTrialTest::initTestCase() {
  QVERIFY(dir_.isValid());
  qputenv("XDG_DATA_HOME", dir_.path().toUtf8());
  qputenv("XDG_CONFIG_HOME", dir_.path().toUtf8());
}

void UserTrialTest::overlaysLeaveWithTheirDatabase() {
  const QString a = dir_.filePath(QStringLiteral("a.sqlite"));
  const QString b = dir_.filePath(QStringLiteral("b.sqlite"));
  one_run_database(a, "run of a");
  one_run_database(b, "run of b");
  EngineController engine;
  engine.setDatabasePath(a);
  RunsTab tab(&engine);
  tab.resize(1000, 700);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  QSignalSpy curves(&tab, &RunsTab::curvesShown);
  tab.overlay({1});
  QVERIFY(curves.wait(30000));
  QCOMPARE(tab.overlayPlot()->graphCount(), 1);
  QVERIFY(tab.overlayPlot()->graph(0)->name().contains(QStringLiteral("run of a")));
  // Another database: its run 1 is another run; no curve of either is left overlaid.
  QSignalSpy reloaded(&tab, &RunsTab::reloaded);
  engine.setDatabasePath(b);
  tab.reload();
  QVERIFY(reloaded.wait(30000));
  QTest::qWait(300);  // a redraw of the overlay, were one on its way
  for (int i = 0; i < tab.overlayPlot()->graphCount(); ++i)
    QVERIFY2(false, qPrintable(tab.overlayPlot()->graph(i)->name()));
  QCOMPARE(tab.overlayPlot()->graphCount(), 0);
}

void UserTrialTest::editedPresetIsCustom() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("sweeps.sqlite")));
  SweepsTab tab(&engine);
  tab.resize(1200, 800);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  QComboBox* preset = nullptr;  // the one listing the presets
  for (QComboBox* c : tab.findChildren<QComboBox*>())
    if (c->count() > 0 && c->itemText(0) == SweepsTab::presetNames().at(0)) preset = c;
  auto* base = tab.findChild<QPlainTextEdit*>(QStringLiteral("baseText"));
  auto* grid = tab.findChild<QPlainTextEdit*>(QStringLiteral("gridText"));
  QVERIFY(preset && base && grid);
  const QString name = SweepsTab::presetNames().at(0);
  QCOMPARE(preset->currentText(), name);
  // The base config edited by typing: the preset's name goes, as the run panel's does.
  type_lines(base, {QStringLiteral("model=mlp"), QStringLiteral("steps=3"),
                    QStringLiteral("stats_interval=1"), QStringLiteral("reference=false")});
  QCOMPARE(preset->currentIndex(), -1);
  QVERIFY(preset->currentText().isEmpty());
  type_lines(grid, {QStringLiteral("margin=0")});
  QSignalSpy done(&tab, &SweepsTab::sweepFinished);
  QCOMPARE(tab.start(), QString());
  QVERIFY(done.wait(120000));
  const auto sweeps = engine.store().sweeps();
  QCOMPARE(sweeps.size(), size_t{1});
  QCOMPARE(QString::fromStdString(sweeps[0].name), QStringLiteral("sweep"));
  for (const RunInfo& r : engine.store().runs())
    QVERIFY2(!QString::fromStdString(r.name).contains(name), r.name.c_str());
  // Chosen again, the preset fills the form and names it.
  preset->setCurrentIndex(1);
  QCOMPARE(preset->currentText(), SweepsTab::presetNames().at(1));
  QVERIFY(base->toPlainText().contains(QStringLiteral("model=gpt")));
}

void UserTrialTest::longValueIsElided() {
  FormatsTab tab;
  tab.resize(1200, 800);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  const QString digits = QString(400, QLatin1Char('1')) + QStringLiteral("x");
  tab.setValueText(digits);
  const QString error = tab.errorText();
  QVERIFY(!error.isEmpty());
  QVERIFY2(error.size() < 200, qPrintable(error));
  QVERIFY2(error.contains(QStringLiteral("…")), qPrintable(error));
  QVERIFY2(tab.minimumSizeHint().width() < 1200,
           qPrintable(QString::number(tab.minimumSizeHint().width())));
  QCOMPARE(tab.width(), 1200);
}

void UserTrialTest::tensorNamesCannotReorderText() {
  // "layer.<RLO>thgiew" reads "layer.weight" reversed: the override is shown escaped.
  const std::string name = "layer.\u202Ethgiew\x01";
  std::vector<float> w(64 * 64);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i % 97);
  std::vector<uint8_t> bytes(w.size() * 4);
  std::memcpy(bytes.data(), w.data(), bytes.size());
  const QString path = dir_.filePath(QStringLiteral("bidi.safetensors"));
  // Also a name of two double quotes (which must not read as the empty name) and one with
  // a tab, a backslash and a zero-width space: shown as `fp8wb inspect` shows them.
  const std::string quotes = "\"\"", tabbed = "t\tb\\c\xe2\x80\x8b";
  write_safetensors(path.toStdString(), {{name, StDtype::F32, {64, 64}, bytes},
                                         {"", StDtype::F32, {64, 64}, bytes},
                                         {quotes, StDtype::F32, {64, 64}, bytes},
                                         {tabbed, StDtype::F32, {64, 64}, bytes}});
  CheckpointTab tab;
  QVERIFY(test::shown_with_file(tab, path, 1200, 800));
  tab.selectTensor(QString::fromStdString(name));
  const QChar rlo(0x202E);
  QCOMPARE(tab.proxy()->rowCount(), 4);
  std::map<std::string, QString> shown;  // by the name as it is
  for (int row = 0; row < 4; ++row) {
    const QModelIndex i = tab.proxy()->index(row, CheckpointModel::Name);
    shown[i.data(Qt::EditRole).toString().toStdString()] = i.data().toString();
  }
  const QString cell = shown[name];
  QVERIFY2(!cell.contains(rlo), qPrintable(cell));
  QCOMPARE(cell, QStringLiteral("layer.\\u202ethgiew\\x01"));
  QCOMPARE(shown[""], QStringLiteral("\"\""));  // an empty name is seen
  QCOMPARE(shown[quotes], QStringLiteral("\\\"\\\""));
  QCOMPARE(shown[tabbed], QStringLiteral("t\\tb\\\\c\\u200b"));
  bool captioned = false;
  for (QLabel* l : tab.findChildren<QLabel*>()) {
    QVERIFY2(!l->text().contains(rlo) && !l->text().contains(QChar(1)), qPrintable(l->text()));
    captioned = captioned || l->text().contains(QStringLiteral("layer.\\u202ethgiew"));
  }
  QVERIFY(captioned);
  for (ExportablePlot* p : tab.plots())
    QVERIFY2(!p->exportTitle().contains(rlo), qPrintable(p->exportTitle()));
}

// A tensor every recipe holds exactly (1 and 2, scaled to 224 and 448 in E4M3): its SQNR
// is infinite, "inf" as `fp8wb inspect` says, not "-" (no figure).
void UserTrialTest::exactSqnrIsInf() {
  std::vector<float> w(64 * 64);
  for (size_t i = 0; i < w.size(); ++i) w[i] = i % 2 ? 1.0f : 2.0f;
  std::vector<uint8_t> bytes(w.size() * 4);
  std::memcpy(bytes.data(), w.data(), bytes.size());
  const QString path = dir_.filePath(QStringLiteral("exact.safetensors"));
  write_safetensors(path.toStdString(), {{"exact", StDtype::F32, {64, 64}, bytes}});
  CheckpointTab tab;
  QSignalSpy loaded(&tab, &CheckpointTab::checkpointLoaded);
  tab.openCheckpoint(path);
  QVERIFY(loaded.wait(60000));
  QCOMPARE(tab.proxy()->index(0, CheckpointModel::BestSqnr).data().toString(),
           QStringLiteral("inf"));
  QCOMPARE(tab.proxy()->index(0, CheckpointModel::TensorwiseSqnr).data().toString(),
           QStringLiteral("inf"));
}

// A name of 339 characters without a space: the tab keeps its size (the caption had
// widened the window past the screen), the name's column stays narrow enough for the
// others to be seen, and the caption cuts the name in the middle, its tooltip whole.
void UserTrialTest::longNamesKeepTheTabsSize() {
  std::string name = "model.layers";
  for (int i = 0; i < 40; ++i) name += ".block" + std::to_string(i);
  name += ".attention.weight";
  std::vector<float> w(64 * 64);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i % 97);
  std::vector<uint8_t> bytes(w.size() * 4);
  std::memcpy(bytes.data(), w.data(), bytes.size());
  const QString path = dir_.filePath(QStringLiteral("long.safetensors"));
  write_safetensors(path.toStdString(), {{name, StDtype::F32, {64, 64}, bytes}});
  CheckpointTab tab;
  QVERIFY(test::shown_with_file(tab, path, 1200, 800));
  tab.selectTensor(QString::fromStdString(name));
  QCoreApplication::processEvents();
  QVERIFY2(tab.minimumSizeHint().width() < 1200,
           qPrintable(QString::number(tab.minimumSizeHint().width())));
  QCOMPARE(tab.width(), 1200);
  auto* table = tab.findChild<QTableView*>(QStringLiteral("checkpointTable"));
  QVERIFY(table);
  QVERIFY2(table->columnWidth(CheckpointModel::Name) <= 420,
           qPrintable(QString::number(table->columnWidth(CheckpointModel::Name))));
  bool cut = false;
  for (QLabel* l : tab.findChildren<QLabel*>()) {
    if (!l->text().contains(QStringLiteral("model.layers.block0"))) continue;
    QVERIFY2(!l->text().contains(QString::fromStdString(name)), qPrintable(l->text()));
    cut = cut || (l->text().contains(QChar(0x2026)) &&
                  l->toolTip().startsWith(QString::fromStdString(name) + QStringLiteral("\n\n")));
  }
  QVERIFY(cut);
}

QTEST_MAIN(UserTrialTest)
#include "user_trial_test.moc"
