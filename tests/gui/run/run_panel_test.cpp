// The run panel as a user drives it, offscreen: typed values that the config refuses
// block Start with a message beside it that names the field, and are never rewritten;
// the wheel changes only a focused field; the buttons stay in view at any height; More
// fields read as words; pausing reads "paused" everywhere and freezes the time left.
// Progress is a count of steps done ("10/10 steps"), never a step index past the last;
// every plot over steps ticks whole steps only; a preset whose field is changed is named
// no more ("custom"), and its run is named after the fields changed, not the preset.
#include <QAbstractSpinBox>
#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QWheelEvent>
#include <QtTest>
#include <cmath>

#include "fp8wb/core/config/run_config_fields.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/run_panel/run_panel.h"
#include "fp8wb/views/run_tabs/run_data.h"
#include "fp8wb/views/run_tabs/run_tabs.h"
#include "main_window.h"

using namespace fp8wb;

class RunPanelTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void invalidMoreFieldBlocksStart();
  void invalidMainFieldBlocksStart();
  void aRunOverTheMemoryMarksTheFieldThatWeighsMost();
  void outOfRangeIsRefusedNotRewritten();
  void wheelChangesOnlyTheFocusedField();
  void statisticsIntervalZeroSaysNever();
  void moreFieldsReadAsWords();
  void buttonsStayInView();
  void buttonsStayPutWhenTheStatusWraps();
  void timeLeftInHoursMinutesSeconds();
  void pausedReadsPausedEverywhere();
  void messageCountsTheOtherMarkedFields();
  void overridesSurviveADeviceChange();
  void rankFieldsShowAndTakeTheirValues();
  void fieldsFollowTheModelKind();
  void progressCountsStepsDone();
  void stepAxesTickWholeStepsOnly();
  void aChangedPresetReadsCustom();
  void foldedMoreFieldsIsATitleAlone();
  void everyConfigFieldIsInTheForm();
  void numberBoxesHaveTheirFieldsBounds();
  void anOpenedRunSaysWhatStartKeeps();
  void aChangedPresetsRunIsNamedAfterItsChanges();
  void anEditedOpenedRunIsNamedAfterItsChanges();
  void aPresetsNameKeepsWhatTellsItApart();
  void aFormThatMatchesAPresetShowsIt();

 private:
  QTemporaryDir dir_;
};

namespace {

template <class W>
W* child(QWidget* parent, const char* name) {
  W* w = parent->findChild<W*>(QString::fromLatin1(name));
  if (!w) qWarning("no %s named %s", W::staticMetaObject.className(), name);
  return w;
}

// Replaces what a field shows by typing, as a user would: click, select all, type.
void type_into(QWidget* field, const QString& text) {
  QTest::mouseClick(field, Qt::LeftButton);
  field->setFocus();
  QTRY_VERIFY(field->hasFocus());
  QTest::keyClick(field, Qt::Key_A, Qt::ControlModifier);
  QTest::keyClicks(field, text);
}

// Leaves a field, as Tab or a click elsewhere does (the box then shows what it holds).
void leave(QWidget* field) {
  QTest::keyClick(field, Qt::Key_Tab);
  field->clearFocus();
  QTRY_VERIFY(!field->hasFocus());
}

// The label a form shows beside a field.
QString label_of(QWidget* field) {
  for (QWidget* p = field->parentWidget(); p; p = p->parentWidget()) {
    if (auto* form = qobject_cast<QFormLayout*>(p->layout())) {
      if (auto* l = qobject_cast<QLabel*>(form->labelForField(field))) return l->text();
    }
  }
  return {};
}

bool wait_finished(EngineController* e) {
  QSignalSpy spy(e, &EngineController::finished);
  return spy.wait(120000);
}

}  // namespace

void RunPanelTest::invalidMoreFieldBlocksStart() {
  MainWindow w(false);
  w.show();
  QVERIFY(QTest::qWaitForWindowActive(&w));
  RunPanel* p = w.runPanel();
  auto* start = child<QPushButton>(p, "start");
  auto* message = child<QLabel>(p, "run-message");
  auto* more = child<QGroupBox>(p, "more-fields");
  auto* heads = child<QLineEdit>(p, "heads");
  QVERIFY(start && message && more && heads);
  more->setChecked(true);
  QVERIFY(start->isEnabled());
  type_into(heads, QStringLiteral("-5x"));
  leave(heads);
  QVERIFY(!start->isEnabled());
  // The message is beside Start (not inside the scrolled form) and names the field by
  // the label the form shows.
  const QString label = label_of(heads);
  QVERIFY(!label.isEmpty());
  QVERIFY2(message->text().contains(label), qPrintable(message->text()));
  auto* scroll = child<QScrollArea>(p, "run-form");
  QVERIFY(scroll && !scroll->isAncestorOf(message) && !scroll->isAncestorOf(start));
  QVERIFY(heads->property("invalid").toBool());  // the field itself is marked
  // Start cannot train another value than the one shown.
  QTest::mouseClick(start, Qt::LeftButton);
  QVERIFY(!w.engine()->isRunning());
  QVERIFY(p->start().contains(label));
  QVERIFY(!w.engine()->isRunning());
  // Fixing it enables Start and takes the value.
  type_into(heads, QStringLiteral("8"));
  QVERIFY(start->isEnabled());
  QVERIFY(message->text().isEmpty());
  QVERIFY(!heads->property("invalid").toBool());
  QCOMPARE(p->config().heads, 8);
  // A value that parses but does not fit the rest (heads must divide the model width).
  type_into(heads, QStringLiteral("5"));
  QVERIFY(!start->isEnabled());
  QVERIFY2(message->text().contains(label), qPrintable(message->text()));
  QCOMPARE(p->config().heads, 8);
}

void RunPanelTest::invalidMainFieldBlocksStart() {
  MainWindow w(false);
  w.show();
  QVERIFY(QTest::qWaitForWindowActive(&w));
  RunPanel* p = w.runPanel();
  auto* start = child<QPushButton>(p, "start");
  auto* message = child<QLabel>(p, "run-message");
  auto* steps = child<QSpinBox>(p, "steps");
  QVERIFY(start && message && steps);
  const int64_t before = p->config().steps;
  type_into(steps, QStringLiteral("-99999999999"));
  leave(steps);
  QVERIFY(!start->isEnabled());
  QVERIFY2(message->text().contains(label_of(steps)), qPrintable(message->text()));
  QVERIFY(steps->property("invalid").toBool());
  QCOMPARE(p->config().steps, before);
  QVERIFY(!p->start().isEmpty());
  QVERIFY(!w.engine()->isRunning());
  type_into(steps, QStringLiteral("120"));
  leave(steps);
  QVERIFY(start->isEnabled());
  QVERIFY(message->text().isEmpty());
  QVERIFY(!steps->property("invalid").toBool());
  QCOMPARE(p->config().steps, int64_t{120});
}

// The config error's field (ConfigError::field), not its message, says which field to mark:
// a run too large for the machine marks the field that weighs most (its message says
// "config field 'd_model' (with layers): ...", which names no field the way others do).
void RunPanelTest::aRunOverTheMemoryMarksTheFieldThatWeighsMost() {
  MainWindow w(false);
  w.show();
  QVERIFY(QTest::qWaitForWindowActive(&w));
  RunPanel* p = w.runPanel();
  auto* start = child<QPushButton>(p, "start");
  auto* message = child<QLabel>(p, "run-message");
  auto* dmodel = child<QSpinBox>(p, "d_model");
  auto* layers = child<QSpinBox>(p, "layers");
  QVERIFY(start && message && dmodel && layers);
  QVERIFY(p->applyPreset(RunPanel::presetNames().front()));
  RunConfig c = p->config();
  c.model = ModelKind::Gpt;
  c.d_model = 8192;
  c.layers = 256;
  c.heads = 4;
  p->setConfig(c);
  QVERIFY(!start->isEnabled());
  QVERIFY(dmodel->property("invalid").toBool());
  QVERIFY(!layers->property("invalid").toBool());
  const QString m = message->text();
  QVERIFY2(m.startsWith(label_of(dmodel) + QStringLiteral(": with layers, the run would need")),
           qPrintable(m));
  QVERIFY2(m.contains(QStringLiteral("memory")), qPrintable(m));
  QVERIFY2(dmodel->toolTip().startsWith(m), qPrintable(dmodel->toolTip()));
}

void RunPanelTest::outOfRangeIsRefusedNotRewritten() {
  MainWindow w(false);
  w.show();
  QVERIFY(QTest::qWaitForWindowActive(&w));
  RunPanel* p = w.runPanel();
  auto* start = child<QPushButton>(p, "start");
  auto* message = child<QLabel>(p, "run-message");
  auto* steps = child<QSpinBox>(p, "steps");
  auto* margin = child<QSpinBox>(p, "margin");
  auto* lr = child<QAbstractSpinBox>(p, "lr");
  auto* dmodel = child<QSpinBox>(p, "d_model");
  QVERIFY(start && message && steps && margin && lr && dmodel);
  const RunConfig before = p->config();
  struct Case {
    QAbstractSpinBox* box;
    QString typed, bounds;
  };
  const Case cases[] = {
      {steps, QStringLiteral("-99999999999"), QStringLiteral("1000000000")},
      {margin, QStringLiteral("1e9"), QStringLiteral("[-64, 64]")},
      {lr, QStringLiteral("nan"), QStringLiteral("(0, 10]")},
      {dmodel, QStringLiteral("7"), QStringLiteral("8")},
  };
  for (const Case& c : cases) {
    type_into(c.box, c.typed);
    leave(c.box);
    // What was typed stays as typed: neither clamped nor cut nor dropped.
    QCOMPARE(c.box->text(), c.typed);
    QVERIFY(!start->isEnabled());
    const QString m = message->text();
    QVERIFY2(m.contains(label_of(c.box)) && m.contains(c.bounds) && m.contains(c.typed),
             qPrintable(m));
    QVERIFY(p->start().contains(label_of(c.box)));
    // Back to a valid value: nothing else changed.
    type_into(c.box, c.box == lr ? QStringLiteral("0.003") : QStringLiteral("16"));
    leave(c.box);
    QVERIFY2(start->isEnabled(), qPrintable(message->text()));
  }
  QCOMPARE(p->config().steps, int64_t{16});
  QCOMPARE(p->config().margin, 16);
  QCOMPARE(p->config().lr, 0.003);
  QCOMPARE(p->config().d_model, 16);
  QCOMPARE(p->config().window, before.window);
  QVERIFY(!w.engine()->isRunning());
}

void RunPanelTest::wheelChangesOnlyTheFocusedField() {
  MainWindow w(false);
  w.show();
  QVERIFY(QTest::qWaitForWindowActive(&w));
  RunPanel* p = w.runPanel();
  auto* margin = child<QSpinBox>(p, "margin");
  auto* recipe = child<QComboBox>(p, "recipe");
  QVERIFY(margin && recipe);
  auto wheel = [](QWidget* target) {
    const QPointF at(target->width() / 2.0, target->height() / 2.0);
    QWheelEvent e(at, target->mapToGlobal(at), QPoint(), QPoint(0, -120), Qt::NoButton,
                  Qt::NoModifier, Qt::NoScrollPhase, false);
    QApplication::sendEvent(target, &e);
  };
  child<QLineEdit>(p, "run-name")->setFocus();
  const int m = margin->value();
  const int r = recipe->currentIndex();
  wheel(margin);
  wheel(recipe);
  QCOMPARE(margin->value(), m);
  QCOMPARE(recipe->currentIndex(), r);
  // A focused field takes the wheel.
  margin->setFocus();
  QTRY_VERIFY(margin->hasFocus());
  wheel(margin);
  QCOMPARE(margin->value(), m - 1);
  recipe->setFocus();
  QTRY_VERIFY(recipe->hasFocus());
  wheel(recipe);
  QCOMPARE(recipe->currentIndex(), r + 1);
}

void RunPanelTest::statisticsIntervalZeroSaysNever() {
  // 0 is the core's "never" (run_config.h: steps between full statistics, 0: never).
  MainWindow w(false);
  w.show();
  QVERIFY(QTest::qWaitForWindowActive(&w));
  RunPanel* p = w.runPanel();
  auto* stats = child<QSpinBox>(p, "stats_interval");
  auto* start = child<QPushButton>(p, "start");
  QVERIFY(stats && start);
  type_into(stats, QStringLiteral("0"));
  leave(stats);
  QCOMPARE(p->config().stats_interval, 0);
  QVERIFY(start->isEnabled());
  QVERIFY2(stats->text().contains(QStringLiteral("never")), qPrintable(stats->text()));
  QVERIFY(stats->toolTip().contains(QStringLiteral("never")));
  // "never" typed back reads as 0 too.
  type_into(stats, QStringLiteral("25"));
  leave(stats);
  QCOMPARE(p->config().stats_interval, 25);
}

void RunPanelTest::moreFieldsReadAsWords() {
  MainWindow w(false);
  RunPanel* p = w.runPanel();
  auto* more = child<QGroupBox>(p, "more-fields");
  QVERIFY(more);
  const auto edits = more->findChildren<QLineEdit*>();
  QVERIFY(edits.size() >= 10);
  for (QLineEdit* e : edits) {
    const QString label = label_of(e);
    QVERIFY2(!label.isEmpty() && !label.contains(QLatin1Char('_')) && label != e->objectName(),
             qPrintable(e->objectName() + QStringLiteral(": ") + label));
    QVERIFY2(e->toolTip().contains(e->objectName()), qPrintable(e->objectName()));
  }
}

void RunPanelTest::buttonsStayInView() {
  MainWindow w(false);
  w.resize(1200, 480);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  RunPanel* p = w.runPanel();
  auto* more = child<QGroupBox>(p, "more-fields");
  QVERIFY(more);
  more->setChecked(true);
  QCoreApplication::processEvents();
  // Start / Pause / Stop whole in the window, however tall the form is.
  for (const char* name : {"start", "pause", "stop"}) {
    auto* b = child<QPushButton>(p, name);
    QVERIFY(b);
    QVERIFY2(b->isVisible(), name);
    QCOMPARE(b->visibleRegion().boundingRect(), b->rect());
    const QRect in_window(b->mapTo(&w, QPoint(0, 0)), b->size());
    QVERIFY2(w.rect().contains(in_window), name);
  }
}

// The status line under the buttons takes two lines whether its text is one line,
// wrapped, or empty: the buttons do not jump when "paused after 25/3000 steps (about
// 12 min left once resumed)" wraps.
void RunPanelTest::buttonsStayPutWhenTheStatusWraps() {
  MainWindow w(false);
  w.resize(1200, 700);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  RunPanel* p = w.runPanel();
  auto* status = child<QLabel>(p, "run-progress-text");
  auto* start = child<QPushButton>(p, "start");
  QVERIFY(status && start);
  auto start_y = [&](const QString& text) {
    status->setText(text);
    QCoreApplication::processEvents();
    if (p->layout()) p->layout()->activate();
    QCoreApplication::processEvents();
    return start->mapTo(p, QPoint(0, 0)).y();
  };
  const int one_line = start_y(QStringLiteral("25/3000 steps"));
  QString wrapped = QStringLiteral("paused after 25/3000 steps (about 12 min left once resumed)");
  while (status->fontMetrics().horizontalAdvance(wrapped) < 3 * status->width())
    wrapped += QStringLiteral(" more words");
  wrapped = wrapped.left(wrapped.size() * 2 / 3);  // wider than the label, within two lines
  QCOMPARE(start_y(wrapped), one_line);
  QCOMPARE(start_y(QString()), one_line);
}

void RunPanelTest::timeLeftInHoursMinutesSeconds() {
  MainWindow w(false);
  RunPanel* p = w.runPanel();
  const std::pair<double, QString> cases[] = {
      {200, QStringLiteral("about 3 min 20 s left")}, {42, QStringLiteral("about 42 s left")},
      {3725, QStringLiteral("about 1 h 2 min left")}, {60, QStringLiteral("about 1 min left")},
      {1510, QStringLiteral("about 25 min left")},
  };
  for (const auto& [seconds, text] : cases) {
    Q_EMIT w.engine()->progress(10, 100, seconds);
    QVERIFY2(p->statusText().contains(text), qPrintable(p->statusText()));
  }
}

void RunPanelTest::pausedReadsPausedEverywhere() {
  MainWindow w(false);
  w.engine()->setDatabasePath(dir_.filePath(QStringLiteral("pause.sqlite")));
  w.show();
  RunPanel* p = w.runPanel();
  QVERIFY(p->applyPreset(QStringLiteral("Outliers: tensorwise")));
  p->setSteps(1000000);
  auto* start = child<QPushButton>(p, "start");
  auto* pause = child<QPushButton>(p, "pause");
  QVERIFY(start && pause);
  QTest::mouseClick(start, Qt::LeftButton);
  QVERIFY(w.engine()->isRunning());
  QTRY_VERIFY_WITH_TIMEOUT(w.engine()->data().steps().size() >= 3, 60000);
  QTRY_VERIFY(w.overviewTab()->summaryText().contains(QStringLiteral("running")));
  QTest::mouseClick(pause, Qt::LeftButton);
  QTRY_VERIFY_WITH_TIMEOUT(
      !w.engine()->data().events().empty() &&
          w.engine()->data().events().back().kind == fp8wb::RunEventKind::Paused,
      30000);
  QTest::qWait(200);
  w.refreshRunTabs(true);
  QVERIFY2(w.statusText().contains(QStringLiteral("paused")), qPrintable(w.statusText()));
  QVERIFY2(!w.statusText().contains(QStringLiteral("training")), qPrintable(w.statusText()));
  QVERIFY2(w.overviewTab()->summaryText().contains(QStringLiteral("paused")),
           qPrintable(w.overviewTab()->summaryText()));
  QVERIFY2(p->statusText().contains(QStringLiteral("paused")), qPrintable(p->statusText()));
  QCOMPARE(pause->text(), QStringLiteral("Resume"));
  // Nothing moves while paused, the time left neither.
  const QString frozen = p->statusText();
  QTest::qWait(1200);
  QCOMPARE(p->statusText(), frozen);
  QTest::mouseClick(pause, Qt::LeftButton);
  const size_t at = w.engine()->data().steps().size();
  QTRY_VERIFY_WITH_TIMEOUT(w.engine()->data().steps().size() > at + 2, 30000);
  QTRY_VERIFY(!p->statusText().contains(QStringLiteral("paused")));
  QVERIFY2(w.statusText().contains(QStringLiteral("training")), qPrintable(w.statusText()));
  QTRY_VERIFY(w.overviewTab()->summaryText().contains(QStringLiteral("running")));
  QCOMPARE(pause->text(), QStringLiteral("Pause"));
  // While it trains, the form is the next run's: the llama's token file and checkpoint
  // fields show as its preset is chosen.
  QVERIFY(p->applyPreset(QStringLiteral("Llama: FP8 vs BF16")));
  QTRY_VERIFY(child<QLineEdit>(p, "data")->isVisible());
  QVERIFY(child<QLineEdit>(p, "hf")->isVisible());
  w.engine()->stop();
  QVERIFY(wait_finished(w.engine()));
}

// A data-parallel run's two fields: readable labels, the config's values shown as it has
// them (the amax reduction, a boolean, as a box ticked or not; the timeout in seconds),
// and what the user clicks or types taken into the config.
void RunPanelTest::rankFieldsShowAndTakeTheirValues() {
  MainWindow w(false);
  w.show();
  QVERIFY(QTest::qWaitForWindowActive(&w));
  RunPanel* p = w.runPanel();
  auto* more = child<QGroupBox>(p, "more-fields");
  auto* reduction = child<QCheckBox>(p, "amax_reduction");
  auto* timeout = child<QLineEdit>(p, "rank_timeout");
  QVERIFY(more && reduction && timeout);
  QCOMPARE(reduction->text(), QStringLiteral("Amax reduction across ranks"));  // its label
  QCOMPARE(label_of(timeout), QStringLiteral("Rank timeout (seconds)"));
  QVERIFY(reduction->toolTip().contains(QStringLiteral("amax_reduction")));
  QCOMPARE(reduction->isChecked(), RunConfig{}.amax_reduction);  // on by default
  RunConfig c = p->config();
  c.amax_reduction = false;
  c.rank_timeout = 45;
  p->setConfig(c);
  QVERIFY(!reduction->isChecked());
  QCOMPARE(timeout->text(), QStringLiteral("45"));
  more->setChecked(true);
  QTRY_VERIFY(reduction->isVisible());
  // Clicked as a user clicks it: ticked, the config has it on; again, off.
  QTest::mouseClick(reduction, Qt::LeftButton);
  QVERIFY(reduction->isChecked());
  type_into(timeout, QStringLiteral("600"));
  leave(timeout);
  QCOMPARE(p->config().amax_reduction, true);
  QCOMPARE(p->config().rank_timeout, 600);
  QTest::mouseClick(reduction, Qt::LeftButton);
  QCOMPARE(p->config().amax_reduction, false);
  QVERIFY(p->validationMessage().isEmpty());
  // As key=value would set it.
  QCOMPARE(p->setAdvanced(QStringLiteral("amax_reduction"), QStringLiteral("true")), QString());
  QVERIFY(reduction->isChecked());
  QVERIFY(!p->setAdvanced(QStringLiteral("amax_reduction"), QStringLiteral("maybe")).isEmpty());
  QVERIFY(reduction->isChecked());
}

// An MLP's settings (its preset chosen, or its run opened) show the MLP's sizes, and no
// field of a GPT ("Model width (GPT)"); a GPT's the other way round.
void RunPanelTest::fieldsFollowTheModelKind() {
  MainWindow w(false);
  w.resize(1300, 900);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  RunPanel* p = w.runPanel();
  auto* more = child<QGroupBox>(p, "more-fields");
  auto* model = child<QComboBox>(p, "model");
  auto* preset = child<QComboBox>(p, "preset");
  auto* width = child<QLineEdit>(p, "width");
  QVERIFY(more && model && preset && width);
  more->setChecked(true);
  // The labels shown beside visible fields (a box to tick: its own), with (GPT) or (MLP).
  auto shown_of = [&](const QString& kind) {
    QStringList out;
    for (QLabel* l : p->findChildren<QLabel*>())
      if (l->isVisible() && l->text().contains(kind)) out << l->text();
    for (QCheckBox* c : p->findChildren<QCheckBox*>())
      if (c->isVisible() && c->text().contains(kind)) out << c->text();
    return out;
  };
  preset->setCurrentText(QStringLiteral("Outliers: tensorwise"));
  QCOMPARE(model->currentText(), QStringLiteral("mlp"));
  QTRY_VERIFY(width->isVisible());
  QVERIFY2(shown_of(QStringLiteral("(GPT")).isEmpty(),
           qPrintable(shown_of(QStringLiteral("(GPT")).join(QStringLiteral(", "))));
  QVERIFY(shown_of(QStringLiteral("Llama")).isEmpty());
  QVERIFY(shown_of(QStringLiteral("(MLP)")).contains(QStringLiteral("Hidden width (MLP)")));
  QCOMPARE(width->text(), QString::number(p->config().width));
  // The MLP's width is typed in, as any field is.
  type_into(width, QStringLiteral("48"));
  leave(width);
  QCOMPARE(p->config().width, 48);
  // A GPT chosen: its fields, none of the MLP's.
  model->setCurrentText(QStringLiteral("gpt"));
  QTRY_VERIFY(!width->isVisible());
  QVERIFY(shown_of(QStringLiteral("(MLP)")).isEmpty());
  QVERIFY(shown_of(QStringLiteral("(GPT")).contains(QStringLiteral("Model width (GPT, Llama)")));
  QVERIFY(shown_of(QStringLiteral("(GPT")).contains(QStringLiteral("Token file (GPT, Llama)")));
  QVERIFY(shown_of(QStringLiteral("(Llama)")).isEmpty());  // the llama's own: not a GPT's
  // A llama chosen: the decoders' fields, the llama's own (its checkpoint, key/value heads,
  // Smooth-SwiGLU), none of the MLP's; each typed in is taken.
  model->setCurrentText(QStringLiteral("llama"));
  auto* hf = child<QLineEdit>(p, "hf");
  auto* kv = child<QLineEdit>(p, "kv_heads");
  QVERIFY(hf && kv);
  QTRY_VERIFY(hf->isVisible());
  QVERIFY(shown_of(QStringLiteral("(Llama)")).contains(QStringLiteral("Key/value heads (Llama)")));
  QVERIFY(shown_of(QStringLiteral("(Llama)")).contains(QStringLiteral("Smooth-SwiGLU (Llama)")));
  QVERIFY(shown_of(QStringLiteral("(GPT")).contains(QStringLiteral("Model width (GPT, Llama)")));
  // The llama trains on a token file as a GPT does: its field and label stay.
  auto* data = child<QLineEdit>(p, "data");
  QVERIFY(data && data->isVisible());
  QVERIFY2(
      shown_of(QStringLiteral("Token file")).contains(QStringLiteral("Token file (GPT, Llama)")),
      qPrintable(shown_of(QStringLiteral("(")).join(QStringLiteral(", "))));
  QVERIFY(shown_of(QStringLiteral("Hugging Face checkpoint")).size() == 1);
  QVERIFY(shown_of(QStringLiteral("(MLP)")).isEmpty());
  QCOMPARE(p->config().model, ModelKind::Llama);
  QCOMPARE(p->setAdvanced(QStringLiteral("kv_heads"), QStringLiteral("1")), QString());
  QCOMPARE(p->config().kv_heads, 1);
  const QString refused = p->setAdvanced(QStringLiteral("kv_heads"), QStringLiteral("3"));
  QVERIFY2(refused.contains(QStringLiteral("Key/value heads")) &&
               refused.contains(QStringLiteral("does not divide heads 4")),
           qPrintable(refused));
  QCOMPARE(p->setAdvanced(QStringLiteral("kv_heads"), QStringLiteral("2")), QString());
  QCOMPARE(p->setAdvanced(QStringLiteral("smooth_swiglu"), QStringLiteral("true")), QString());
  QVERIFY(p->config().smooth_swiglu);
  QVERIFY(p->setAdvanced(QStringLiteral("hf"), QStringLiteral("/no/such/checkpoint")).isEmpty());
  QCOMPARE(p->config().hf, std::string("/no/such/checkpoint"));
  QVERIFY(w.engine()->start(p->config()).contains(QStringLiteral("/no/such/checkpoint")));
  QCOMPARE(p->setAdvanced(QStringLiteral("hf"), QString()), QString());
  QCOMPARE(p->setAdvanced(QStringLiteral("smooth_swiglu"), QStringLiteral("false")), QString());
  model->setCurrentText(QStringLiteral("gpt"));
  QTRY_VERIFY(!hf->isVisible());
  // An MLP run's settings, as opening the run shows them.
  RunConfig c = p->config();
  c.model = ModelKind::Mlp;
  p->setConfig(c);
  QTRY_VERIFY(width->isVisible());
  QVERIFY(shown_of(QStringLiteral("(GPT)")).isEmpty());
}

// The reviewer's form: Window, Steps, Learning rate and Seed refused. The message names
// the first and counts the fields marked besides it (3), not the problems found (one more:
// the config refused as a whole, which marks no field).
void RunPanelTest::messageCountsTheOtherMarkedFields() {
  MainWindow w(false);
  w.show();
  QVERIFY(QTest::qWaitForWindowActive(&w));
  RunPanel* p = w.runPanel();
  auto* message = child<QLabel>(p, "run-message");
  QVERIFY(message);
  const std::pair<const char*, QString> typed[] = {{"window", QStringLiteral("abc")},
                                                   {"steps", QStringLiteral("99999999999999")},
                                                   {"lr", QStringLiteral("NaN")},
                                                   {"seed", QStringLiteral("-1")}};
  for (const auto& [name, text] : typed) {
    auto* field = child<QAbstractSpinBox>(p, name);
    QVERIFY(field);
    type_into(field, text);
    leave(field);
  }
  int marked = 0;
  for (QWidget* f : p->findChildren<QWidget*>())
    if (f->property("invalid").toBool()) ++marked;
  QCOMPARE(marked, 4);
  QVERIFY2(message->text().endsWith(QStringLiteral("(and 3 more fields marked)")),
           qPrintable(message->text()));
}

// Settings that change the device too (a run opened from a GPU machine on the CPU, or
// --set device=cpu where the form shows cuda:0) keep every other value they set,
// More fields' included: a check made half-way through once took their old values back.
void RunPanelTest::overridesSurviveADeviceChange() {
  MainWindow w(false);
  RunPanel* p = w.runPanel();
  QVERIFY(p->applyOverrides({QStringLiteral("device=cuda:5")}).isEmpty());
  QCOMPARE(p->config().device, std::string("cuda:5"));
  QVERIFY(p->applyOverrides({QStringLiteral("device=cpu"), QStringLiteral("d_model=96"),
                             QStringLiteral("heads=3")})
              .isEmpty());
  QCOMPARE(p->config().device, std::string("cpu"));
  QCOMPARE(p->config().d_model, 96);
  QCOMPARE(p->config().heads, 3);
}

// Steps are indices from 0 (the tabs' headers say "step 9" for the tenth): the progress
// counts steps done, "10/10 steps", never "step 10 of 10".
void RunPanelTest::progressCountsStepsDone() {
  MainWindow w(false);
  RunPanel* p = w.runPanel();
  Q_EMIT w.engine()->progress(10, 10, -1);
  QVERIFY2(p->statusText().contains(QStringLiteral("10/10 steps")), qPrintable(p->statusText()));
  QVERIFY2(!p->statusText().contains(QStringLiteral("step 10")), qPrintable(p->statusText()));
  Q_EMIT w.engine()->progress(3, 10, 42);
  QVERIFY2(p->statusText().startsWith(QStringLiteral("3/10 steps")), qPrintable(p->statusText()));
  // Another run opened while nothing trains: the progress and status were the run
  // before's, and go.
  Q_EMIT w.engine()->finished(RunStatus::Stopped, QStringLiteral("stopped after 3 steps"));
  QVERIFY(!p->statusText().isEmpty());
  p->openConfig(RunConfig{}, QStringLiteral("run 1"));
  QCOMPARE(p->statusText(), QString());
  QCOMPARE(p->findChild<QProgressBar*>()->value(), -1);
}

// Every plot of the window whose x axis is steps (run tabs, Runs, Sweeps, demos) ticks
// whole steps only, also over a range of a step and a half (early in a run).
void RunPanelTest::stepAxesTickWholeStepsOnly() {
  MainWindow w(false);
  w.resize(1400, 900);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  int checked = 0;
  for (ExportablePlot* plot : w.findChildren<ExportablePlot*>()) {
    if (plot->xAxis->label() != QLatin1String("step")) continue;
    plot->xAxis->setRange(0, 1.5);
    plot->toPixmap(600, 400);  // lays the plot out: its ticks
    const QVector<double> ticks = plot->xAxis->tickVector();
    QVERIFY2(!ticks.isEmpty(), qPrintable(plot->yAxis->label()));
    for (double t : ticks) {
      QVERIFY2(t == std::round(t),
               qPrintable(QStringLiteral("%1 by step: tick %2").arg(plot->yAxis->label()).arg(t)));
    }
    ++checked;
  }
  QVERIFY2(checked >= 10, qPrintable(QString::number(checked)));
}

// Every preset, applied, is named; a field changed by typing (or by overrides) names it no
// more: the box reads "custom"; choosing the preset again loads and names it.
void RunPanelTest::aChangedPresetReadsCustom() {
  MainWindow w(false);
  w.resize(1300, 900);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  RunPanel* p = w.runPanel();
  auto* box = child<QComboBox>(p, "preset");
  QVERIFY(box);
  for (const QString& name : RunPanel::presetNames()) {
    QVERIFY(p->applyPreset(name));
    QCoreApplication::processEvents();
    QCOMPARE(p->presetName(), name);
  }
  const QString preset = RunPanel::presetNames().first();
  QVERIFY(p->applyPreset(preset));
  auto* steps = child<QSpinBox>(p, "steps");
  QVERIFY(steps);
  type_into(steps, QString::number(steps->value() + 7));
  leave(steps);
  QVERIFY2(p->presetName().isEmpty(), qPrintable(p->presetName()));
  QCOMPARE(box->currentIndex(), -1);
  QVERIFY2(box->placeholderText().contains(QStringLiteral("custom")),
           qPrintable(box->placeholderText()));
  box->setCurrentIndex(box->findText(preset));
  QCOMPARE(p->presetName(), preset);
  QVERIFY(p->applyOverrides({QStringLiteral("margin=3")}).isEmpty());
  QVERIFY2(p->presetName().isEmpty(), qPrintable(p->presetName()));
}

// "More fields" folded is its title alone: no empty grey frame under it; unfolded, it
// holds its fields, and folded again it is the title once more.
void RunPanelTest::foldedMoreFieldsIsATitleAlone() {
  MainWindow w(false);
  w.resize(1300, 900);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  auto* more = child<QGroupBox>(w.runPanel(), "more-fields");
  QVERIFY(more);
  QVERIFY(!more->isChecked());
  const int title = more->fontMetrics().height();
  auto folded_height_ok = [&] {
    QCoreApplication::processEvents();
    return more->height() <= title + 12;
  };
  QVERIFY2(folded_height_ok(),
           qPrintable(QStringLiteral("%1 px under a %2 px title").arg(more->height()).arg(title)));
  // No frame drawn below the title: the box's lower half is the panel's own colour.
  const QImage image = more->grab().toImage();
  const QColor panel = more->palette().color(QPalette::Window);
  for (int y = image.height() * 3 / 4; y < image.height(); ++y) {
    const QColor c = image.pixelColor(image.width() / 2, y);
    QVERIFY2(std::abs(c.lightness() - panel.lightness()) < 8,
             qPrintable(QStringLiteral("row %1: %2").arg(y).arg(c.name())));
  }
  more->setChecked(true);
  QTRY_VERIFY(more->height() > title * 4);
  more->setChecked(false);
  QTRY_VERIFY(folded_height_ok());
}

// Window and margin changed from "Delayed scaling: window 1": the run is named after
// them, never "Delayed scaling: window 1" (nor, started twice, "... window 1 #2"); a name
// typed by hand stays as typed; choosing the preset again names the run after it.
void RunPanelTest::aChangedPresetsRunIsNamedAfterItsChanges() {
  MainWindow w(false);
  w.resize(1300, 900);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  RunPanel* p = w.runPanel();
  const QString preset = QStringLiteral("Delayed scaling: window 1");
  QVERIFY(p->applyPreset(preset));
  auto* name = child<QLineEdit>(p, "run-name");
  QVERIFY(name);
  QCOMPARE(name->text(), preset);
  auto* window = child<QSpinBox>(p, "window");
  auto* margin = child<QSpinBox>(p, "margin");
  QVERIFY(window && margin);
  type_into(window, QStringLiteral("1024"));
  leave(window);
  QCOMPARE(name->text(), QStringLiteral("Delayed scaling: window=1024"));
  type_into(margin, QStringLiteral("2"));
  leave(margin);
  QCOMPARE(name->text(), QStringLiteral("Delayed scaling: margin=2, window=1024"));
  QCOMPARE(QString::fromStdString(p->config().name), name->text());
  // Back to the preset's window: named after what still differs.
  type_into(window, QStringLiteral("1"));
  leave(window);
  QCOMPARE(name->text(), QStringLiteral("Delayed scaling: window 1, margin=2"));
  // A name of the user's own is kept.
  type_into(name, QStringLiteral("my run"));
  type_into(window, QStringLiteral("16"));
  leave(window);
  QCOMPARE(name->text(), QStringLiteral("my run"));
  QVERIFY(p->applyPreset(preset));
  QCOMPARE(name->text(), preset);
  // Overrides taken (a sweep cell's): named after them too.
  QVERIFY(p->applyOverrides({QStringLiteral("window=128")}).isEmpty());
  QCOMPARE(name->text(), QStringLiteral("Delayed scaling: window=128"));
}

// A run opened, edited and started is named after the fields changed from its settings
// ("Delayed scaling: margin=3"), not "<its name> #2"; the line beside Start says what
// changed instead of "Start trains with run 5's settings" alone.
void RunPanelTest::anEditedOpenedRunIsNamedAfterItsChanges() {
  MainWindow w(false);
  w.resize(1300, 900);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  RunPanel* p = w.runPanel();
  auto* name = child<QLineEdit>(p, "run-name");
  auto* margin = child<QSpinBox>(p, "margin");
  auto* kept = child<QLabel>(p, "kept-settings");
  QVERIFY(name && margin && kept);
  QVERIFY(p->applyPreset(QStringLiteral("Delayed scaling: window 1")));
  RunConfig c = p->config();
  c.name = "Delayed scaling: window 1 #2";
  c.margin = 0;
  p->openConfig(c, QStringLiteral("run 5"));
  QVERIFY2(kept->text().contains(QStringLiteral("all in the form above")),
           qPrintable(kept->text()));
  type_into(margin, QStringLiteral("3"));
  leave(margin);
  QCOMPARE(name->text(), QStringLiteral("Delayed scaling: window 1, margin=3"));
  QCOMPARE(QString::fromStdString(p->config().name), name->text());
  QVERIFY2(kept->text().contains(QStringLiteral("run 5's settings, changed: margin=3 (was 0)")),
           qPrintable(kept->text()));
  QVERIFY2(!kept->text().contains(QStringLiteral("all in the form above")),
           qPrintable(kept->text()));
  // Back to its margin: its settings again, unchanged.
  type_into(margin, QStringLiteral("0"));
  leave(margin);
  QVERIFY2(kept->text().contains(QStringLiteral("all in the form above")),
           qPrintable(kept->text()));
  // A name without a preset's: the run's whole name, then the fields.
  c.name = "my run";
  p->openConfig(c, QStringLiteral("run 6"));
  type_into(margin, QStringLiteral("2"));
  leave(margin);
  QCOMPARE(name->text(), QStringLiteral("my run, margin=2"));
  // Issue #52: a sweep trial opened and edited is named after the trial's whole name and
  // the change, never as if it were another trial of the sweep ("trysweep: margin=3").
  c.name = "trysweep: margin=0 window=1 seed=1";
  p->openConfig(c, QStringLiteral("run 7"));
  QCOMPARE(name->text(), QStringLiteral("trysweep: margin=0 window=1 seed=1"));
  type_into(margin, QStringLiteral("3"));
  leave(margin);
  QCOMPARE(name->text(), QStringLiteral("trysweep: margin=0 window=1 seed=1, margin=3"));
  QCOMPARE(QString::fromStdString(p->config().name), name->text());
}

// Issue #52: the run's name keeps what the preset's name says and adds the fields edited
// away from it, so "window 1" and "window 1024" with the same edits are two names, not
// "Delayed scaling: margin=1, steps=100" and the same "#2"; a run opened under such a
// name, edited again, keeps its other settings; a preset's name that names a model is
// dropped where the model changes ("Tiny GPT: ..., model=llama" is no Tiny GPT).
void RunPanelTest::aPresetsNameKeepsWhatTellsItApart() {
  MainWindow w(false);
  w.resize(1300, 900);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  RunPanel* p = w.runPanel();
  auto* name = child<QLineEdit>(p, "run-name");
  auto* margin = child<QSpinBox>(p, "margin");
  auto* steps = child<QSpinBox>(p, "steps");
  QVERIFY(name && margin && steps);
  for (const QString window : {QStringLiteral("1024"), QStringLiteral("1")}) {
    QVERIFY(p->applyPreset(QStringLiteral("Delayed scaling: window ") + window));
    type_into(margin, QStringLiteral("1"));
    leave(margin);
    type_into(steps, QStringLiteral("100"));
    leave(steps);
    QCOMPARE(name->text(),
             QStringLiteral("Delayed scaling: window %1, margin=1, steps=100").arg(window));
    QCOMPARE(QString::fromStdString(p->config().name), name->text());
  }
  // Opened again under that kind of name and edited: the other settings it names stay.
  QVERIFY(p->applyPreset(QStringLiteral("Delayed scaling: window 1024")));
  RunConfig c = p->config();
  c.name = "Delayed scaling: margin=2, window=16";
  c.margin = 2;
  c.window = 16;
  p->openConfig(c, QStringLiteral("run 8"));
  type_into(margin, QStringLiteral("3"));
  leave(margin);
  QCOMPARE(name->text(), QStringLiteral("Delayed scaling: window=16, margin=3"));
  // Tiny GPT, edited, made a Llama: named after the model, not "Tiny GPT: ..., model=llama".
  QVERIFY(p->applyPreset(QStringLiteral("Tiny GPT: FP8 vs BF16")));
  type_into(margin, QStringLiteral("2"));
  leave(margin);
  QCOMPARE(name->text(), QStringLiteral("Tiny GPT: FP8 vs BF16, margin=2"));
  child<QComboBox>(p, "model")->setCurrentText(QStringLiteral("llama"));
  QVERIFY2(name->text().startsWith(QStringLiteral("Llama: FP8 vs BF16, ")),
           qPrintable(name->text()));
  QVERIFY2(name->text().contains(QStringLiteral("margin=2")), qPrintable(name->text()));
  QVERIFY2(!name->text().contains(QStringLiteral("GPT")), qPrintable(name->text()));
  QVERIFY2(!name->text().contains(QStringLiteral("model=")), qPrintable(name->text()));
}

// A form that holds exactly a preset's config names that preset in the box (typed back to
// it, or opened from a run made from it), not "custom".
void RunPanelTest::aFormThatMatchesAPresetShowsIt() {
  MainWindow w(false);
  w.resize(1300, 900);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  RunPanel* p = w.runPanel();
  const QString preset = QStringLiteral("Delayed scaling: window 1");
  QVERIFY(p->applyPreset(preset));
  auto* steps = child<QSpinBox>(p, "steps");
  QVERIFY(steps);
  const int was = steps->value();
  type_into(steps, QString::number(was + 7));
  leave(steps);
  QVERIFY2(p->presetName().isEmpty(), qPrintable(p->presetName()));
  type_into(steps, QString::number(was));
  leave(steps);
  QCOMPARE(p->presetName(), preset);
  // An opened run with the preset's settings (another name, another device).
  RunConfig c = p->config();
  c.name = "a run of mine";
  c.device = "cpu";
  p->applyPreset(RunPanel::presetNames().first() == preset ? RunPanel::presetNames().last()
                                                           : RunPanel::presetNames().first());
  QVERIFY(p->presetName() != preset);
  p->openConfig(c, QStringLiteral("run 3"));
  QCOMPARE(p->presetName(), preset);
  QCOMPARE(child<QLineEdit>(p, "run-name")->text(), QStringLiteral("a run of mine"));
  // The Llama preset made a GPT is the Tiny GPT preset: the box and the run's name say so
  // (not "Llama: model=gpt").
  QVERIFY(p->applyPreset(QStringLiteral("Llama: FP8 vs BF16")));
  // Its token file and checkpoint fields are there to fill.
  QTRY_VERIFY(child<QLineEdit>(p, "data")->isVisible());
  QVERIFY(child<QLineEdit>(p, "hf")->isVisible());
  child<QComboBox>(p, "model")->setCurrentText(QStringLiteral("gpt"));
  QCOMPARE(p->presetName(), QStringLiteral("Tiny GPT: FP8 vs BF16"));
  QCOMPARE(child<QLineEdit>(p, "run-name")->text(), QStringLiteral("Tiny GPT: FP8 vs BF16"));
  // So for every preset: its settings, opened from a run, name it.
  for (const QString& name : RunPanel::presetNames()) {
    QVERIFY(p->applyPreset(name));
    RunConfig same = p->config();
    same.name = "another name";
    p->applyOverrides({QStringLiteral("steps=3")});
    p->openConfig(same, QStringLiteral("run 4"));
    QCOMPARE(p->presetName(), name);
  }
}

QTEST_MAIN(RunPanelTest)
#include "run_panel_test.moc"

// The form is made from the config's field table: every field has its widget (named by its
// key; the run's name "run-name"), labelled and explained as the table has it, so that a
// field added to the table is in the form (drift and drift_period were in none, and a run
// opened with them trained with them unseen).
void RunPanelTest::everyConfigFieldIsInTheForm() {
  MainWindow w(false);
  RunPanel* p = w.runPanel();
  for (const RunConfigField& f : run_config_fields()) {
    const QString key = QString::fromLatin1(f.key.data(), static_cast<int>(f.key.size()));
    auto* field =
        p->findChild<QWidget*>(key == QLatin1String("name") ? QStringLiteral("run-name") : key);
    QVERIFY2(field, qPrintable(key + QStringLiteral(": no widget in the run panel")));
    if (key == QLatin1String("name") || key == QLatin1String("device")) continue;
    QVERIFY2(field->toolTip().contains(key), qPrintable(key));
    QVERIFY2(field->toolTip().contains(
                 QString::fromUtf8(f.help.data(), static_cast<int>(f.help.size()))),
             qPrintable(key + QStringLiteral(": ") + field->toolTip()));
    const QString label =
        qobject_cast<QCheckBox*>(field) ? qobject_cast<QCheckBox*>(field)->text() : label_of(field);
    QVERIFY2(label == QString::fromUtf8(f.label.data(), static_cast<int>(f.label.size())) ||
                 key.endsWith(QLatin1String("grad_fp8")) || key == QLatin1String("fprop_fp8"),
             qPrintable(key + QStringLiteral(": ") + label));
  }
  // Values of the More fields that are new there are taken into the config.
  QCOMPARE(p->setAdvanced(QStringLiteral("drift"), QStringLiteral("0.5")), QString());
  QCOMPARE(p->setAdvanced(QStringLiteral("weights"), QStringLiteral("/tmp/w.safetensors")),
           QString());
  QCOMPARE(p->config().drift, 0.5);
  QCOMPARE(p->config().weights, std::string("/tmp/w.safetensors"));
}

// Every number box of the form stops where its field's row does (the seed's at the largest
// int a box holds): the bounds are written once, in the table.
void RunPanelTest::numberBoxesHaveTheirFieldsBounds() {
  MainWindow w(false);
  RunPanel* p = w.runPanel();
  int boxes = 0;
  for (QAbstractSpinBox* box : p->findChildren<QAbstractSpinBox*>()) {
    const RunConfigField* f = find_run_config_field(box->objectName().toStdString());
    if (!f) continue;
    ++boxes;
    QVERIFY2(f->has_min() && f->has_max(), qPrintable(box->objectName()));
    if (auto* i = qobject_cast<QSpinBox*>(box)) {
      QCOMPARE(i->minimum(), static_cast<int>(f->min));
      QCOMPARE(i->maximum(), static_cast<int>(std::min<double>(f->max, INT32_MAX)));
    } else if (auto* d = qobject_cast<QDoubleSpinBox*>(box)) {
      QCOMPARE(d->minimum(), f->min);
      QCOMPARE(d->maximum(), f->max);
    }
  }
  QCOMPARE(boxes, 8);  // d_model, layers, margin, window, steps, lr, seed, stats_interval
}

// A run opened with settings that only More fields holds: the box unfolds, and a line
// beside Start names them, as Start trains with them.
void RunPanelTest::anOpenedRunSaysWhatStartKeeps() {
  MainWindow w(false);
  RunPanel* p = w.runPanel();
  auto* more = child<QGroupBox>(p, "more-fields");
  auto* kept = child<QLabel>(p, "kept-settings");
  QVERIFY(more && kept);
  QVERIFY(!more->isChecked());
  QVERIFY(kept->isHidden());
  RunConfig c;
  c.model = ModelKind::Mlp;
  c.drift = 0.5;
  c.drift_period = 50;
  p->openConfig(c, QStringLiteral("run 7"));
  QVERIFY(more->isChecked());
  QVERIFY(!kept->isHidden());
  QVERIFY2(kept->text().contains(QStringLiteral("run 7")), qPrintable(kept->text()));
  QVERIFY2(kept->text().contains(QStringLiteral("drift=0.5")), qPrintable(kept->text()));
  QVERIFY2(kept->text().contains(QStringLiteral("drift_period=50")), qPrintable(kept->text()));
  QCOMPARE(p->keptSettings(), QStringLiteral("drift=0.5, drift_period=50"));
  QCOMPARE(child<QLineEdit>(p, "drift")->text(), QStringLiteral("0.5"));
  // Changed in the form: the line follows, saying what changed; a preset chosen: no run's
  // settings any more.
  QCOMPARE(p->setAdvanced(QStringLiteral("drift"), QStringLiteral("0")), QString());
  QVERIFY2(!kept->text().contains(QStringLiteral("drift=0.5,")), qPrintable(kept->text()));
  QVERIFY2(kept->text().contains(QStringLiteral("changed: drift=0 (was 0.5)")),
           qPrintable(kept->text()));
  QVERIFY(p->applyPreset(RunPanel::presetNames().first()));
  QVERIFY(kept->isHidden());
  QVERIFY(p->keptSettings() != QStringLiteral("drift=0.5, drift_period=50"));
}
