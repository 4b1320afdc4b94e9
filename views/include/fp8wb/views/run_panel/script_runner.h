// defines: ScriptLaunch, ScriptRunner: a user's Python training script started from the
// GUI (the run panel's "Python script…"): the interpreter runs it with FP8WB_DB (the open
// run database) and FP8WB_RUN_NAME in its environment, so that its fp8wb.watch() writes
// there under that name; the runner finds the run it creates and says so (runCreated),
// passes its stderr on, and stops it as a terminal would (SIGINT, then SIGTERM after 10 s).
#pragma once

#include <QObject>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <QTimer>
#include <cstdint>

#include "fp8wb/views/common/background_job.h"

namespace fp8wb {

struct ScriptLaunch {
  QString interpreter;  // a path, or a name looked up on PATH ("python3")
  QString script;       // the .py file
  QStringList arguments;
  QString run_name;  // FP8WB_RUN_NAME (empty: the script's file name)
};

class ScriptRunner : public QObject {
  Q_OBJECT
 public:
  explicit ScriptRunner(QObject* parent = nullptr);
  ~ScriptRunner() override;  // a script still running is stopped (SIGTERM) and waited for

  // Starts the script; returns why not (naming the file or interpreter), or empty.
  QString start(const ScriptLaunch& launch, const QString& db_path);
  bool isRunning() const;
  bool isStopping() const { return stopping_ && isRunning(); }  // stop() sent SIGINT
  bool wasStopped() const { return stopping_; }  // the script's end came after stop()
  // SIGINT (a KeyboardInterrupt: fp8wb.watch() ends the run 'stopped'), then SIGTERM if the
  // script is still there after `grace_ms`.
  void stop(int grace_ms = 10000);
  int64_t runId() const { return run_id_; }  // the run it created (0: none yet)
  const QString& stderrText() const { return stderr_; }
  const ScriptLaunch& launch() const { return launch_; }

  // "interpreter", "script", "arguments" as the dialog last had them (QSettings).
  static ScriptLaunch remembered();
  static void remember(const ScriptLaunch& launch);
  // Arguments as a shell would split them (quotes, backslashes; no expansion).
  static QStringList splitArguments(const QString& text, QString* error = nullptr);

 Q_SIGNALS:
  void runCreated(qint64 run_id);
  void stderrReceived(const QString& text);
  void finished(int exit_code, bool crashed, bool created_run);

 private:
  void poll();
  QProcess process_;
  QTimer poll_, term_;
  QString db_path_;
  ScriptLaunch launch_;
  qint64 pid_ = 0;  // the script's process: the run it creates names it as its writer
  BackgroundJob look_{this};
  int64_t run_id_ = 0;
  bool stopping_ = false;
  QString stderr_;
};

}  // namespace fp8wb
