// defines: RunPanel's Python script: "Python script…" (chooseScript()), startScript(), the
// runner's stderr, end and run (connectScript()) and the buttons while a script runs.
#include <QDialog>
#include <QDialogButtonBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QVBoxLayout>

#include "fp8wb/views/common/file_dialogs.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/run_panel/run_panel.h"

namespace fp8wb {

// The runner's stderr shown below the buttons, the run it creates followed, its end said.
void RunPanel::connectScript() {
  connect(runner_, &ScriptRunner::stderrReceived, this, [this](const QString& text) {
    script_log_->moveCursor(QTextCursor::End);
    script_log_->insertPlainText(text);
    script_log_->moveCursor(QTextCursor::End);
  });
  connect(runner_, &ScriptRunner::runCreated, this, [this](qint64 id) {
    engine_->openRun(id);  // followed live, as a run of any other process
  });
  connect(runner_, &ScriptRunner::finished, this, [this](int code, bool crashed, bool created) {
    const bool stopping = runner_->wasStopped();
    if (total_ <= 0 && !engine_->isFollowing()) {
      progress_->setRange(0, 1);  // no longer busy
      progress_->setValue(created ? 1 : 0);
    }
    // A script that Stop interrupted ends by SIGINT, as Python does on a KeyboardInterrupt
    // it did not catch.
    const QString how = !crashed   ? tr("the script exited with code %1").arg(code)
                        : stopping ? tr("the script ended on SIGINT (Stop)")
                                   : tr("the script was ended by a signal");
    if (!created) {
      // The likely cause first: an interpreter that cannot import the package or torch.
      const QString err = runner_->stderrText();
      const QString why =
          err.contains(QStringLiteral("No module named 'fp8wb'"))
              ? tr("the interpreter cannot import fp8wb: choose one that can (Debian's "
                   "/usr/bin/python3 with the package installed), or set PYTHONPATH")
          : err.contains(QStringLiteral("No module named 'torch'"))
              ? tr("the interpreter cannot import torch: choose the python of the environment "
                   "that has PyTorch")
              : tr("does it call fp8wb.watch()?");
      eta_->setText(tr("%1 without creating a run (%2); see its stderr below").arg(how, why));
    } else if (!engine_->isFollowing()) {
      eta_->setText(eta_->text().isEmpty() ? how : eta_->text() + QStringLiteral("; ") + how);
    }
    updateScriptButtons();
  });
}

void RunPanel::updateScriptButtons() {
  const bool script = runner_->isRunning();
  const bool training = engine_->isRunning();
  const QString read_only = engine_->readOnlyReason();
  script_->setEnabled(!script && !training && read_only.isEmpty());
  script_->setToolTip(!read_only.isEmpty()
                          ? read_only
                          : tr("Run a PyTorch script of yours that calls fp8wb.watch(model): its "
                               "run goes to this database and is followed here"));
  if (script) {
    start_->setEnabled(false);
    pause_->setEnabled(false);
    stop_->setEnabled(true);
  } else if (!training) {
    stop_->setEnabled(false);
    updateStart(false);
  }
}

void RunPanel::chooseScript() {
  ScriptLaunch l = ScriptRunner::remembered();
  QDialog d(this);
  d.setWindowTitle(tr("Run a Python script"));
  d.setMinimumWidth(d.fontMetrics().averageCharWidth() * 80);  // a path in view
  auto* form = new QFormLayout;
  auto* script = new QLineEdit(l.script, &d);
  script->setObjectName(QStringLiteral("script-path"));
  auto* browse = new QPushButton(tr("Browse…"), &d);
  auto* script_row = new QHBoxLayout;
  script_row->addWidget(script, 1);
  script_row->addWidget(browse);
  auto* args = new QLineEdit(l.arguments.join(QLatin1Char(' ')), &d);
  args->setObjectName(QStringLiteral("script-arguments"));
  auto* interpreter = new QLineEdit(l.interpreter, &d);
  interpreter->setObjectName(QStringLiteral("script-interpreter"));
  interpreter->setToolTip(tr("python3 on PATH, or your virtual environment's python"));
  auto* name = new QLineEdit(&d);
  name->setObjectName(QStringLiteral("script-run-name"));
  name->setPlaceholderText(tr("the script's file name"));
  form->addRow(tr("Script (.py)"), script_row);
  form->addRow(tr("Arguments"), args);
  form->addRow(tr("Interpreter"), interpreter);
  form->addRow(tr("Run name"), name);
  auto* note = new QLabel(tr("Started with FP8WB_DB (this database) and FP8WB_RUN_NAME set: "
                             "fp8wb.watch(model) in it needs no db= or name=."),
                          &d);
  note->setWordWrap(true);
  auto* message = new QLabel(&d);
  message->setStyleSheet(QStringLiteral("color: #c62828"));
  message->setWordWrap(true);
  auto* box = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, &d);
  box->button(QDialogButtonBox::Ok)->setText(tr("Run"));
  auto* layout = new QVBoxLayout(&d);
  layout->addLayout(form);
  layout->addWidget(note);
  layout->addWidget(message);
  layout->addWidget(box);
  connect(browse, &QPushButton::clicked, &d, [&] {
    // The workbench's dialog: Qt's own reads files' first bytes, the database's too.
    const QString f = open_file_name(&d, tr("Python script"), script->text(),
                                     tr("Python scripts (*.py);;All files (*)"));
    if (!f.isEmpty()) script->setText(f);
  });
  connect(box, &QDialogButtonBox::rejected, &d, &QDialog::reject);
  connect(box, &QDialogButtonBox::accepted, &d, [&] {
    QString err;
    ScriptLaunch chosen;
    chosen.script = script->text().trimmed();
    chosen.interpreter = interpreter->text().trimmed();
    chosen.arguments = ScriptRunner::splitArguments(args->text(), &err);
    chosen.run_name = name->text().trimmed();
    if (err.isEmpty()) err = startScript(chosen);
    if (!err.isEmpty()) {
      message->setText(err);
      return;
    }
    d.accept();
  });
  d.exec();
}

QString RunPanel::startScript(const ScriptLaunch& launch) {
  if (engine_->isRunning()) return tr("a run is training: stop it before running a script");
  if (const QString ro = engine_->readOnlyReason(); !ro.isEmpty()) return ro;
  engine_->stopFollowing();
  const QString err = runner_->start(launch, engine_->databasePath());
  if (!err.isEmpty()) return err;
  ScriptLaunch kept = launch;
  kept.run_name.clear();  // the name is the run's, not the script's
  ScriptRunner::remember(kept);
  script_log_->clear();
  script_log_->show();
  done_ = total_ = 0;
  progress_->setRange(0, 0);  // busy: a script's steps are not known ahead
  eta_->setText(tr("running %1 (its run appears once fp8wb.watch() starts it)...")
                    .arg(QFileInfo(launch.script).fileName()));
  updateScriptButtons();
  return {};
}

}  // namespace fp8wb
