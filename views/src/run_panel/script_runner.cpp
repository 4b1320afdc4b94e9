#include "fp8wb/views/run_panel/script_runner.h"

#include <signal.h>

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QProcessEnvironment>
#include <QSettings>
#include <QStandardPaths>
#include <algorithm>
#include <exception>

#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/watch/watch.h"
#include "fp8wb/views/common/store_reader.h"

namespace fp8wb {

namespace {
constexpr char kInterpreterKey[] = "script/interpreter";
constexpr char kScriptKey[] = "script/path";
constexpr char kArgumentsKey[] = "script/arguments";
constexpr int kPollMs = 250;
// What the stderr panel keeps of a chatty script (its end).
constexpr int kStderrChars = 1 << 20;

// The watched run that process `pid` of this host created (0: none yet): the one named
// `name` (FP8WB_RUN_NAME, which watch() takes unless the script names its run itself),
// else the newest the process writes.
int64_t find_run(const std::string& db, const std::string& name, qint64 pid) {
  const auto store = open_store_reader(db);
  int64_t newest = 0;
  for (const RunInfo& r : store->runs()) {
    if (r.kind != RunKind::Python || r.writer_pid != pid) continue;
    if (r.name == name) return r.id;
    newest = std::max(newest, r.id);
  }
  return newest;
}

}  // namespace

ScriptRunner::ScriptRunner(QObject* parent) : QObject(parent) {
  poll_.setInterval(kPollMs);
  connect(&poll_, &QTimer::timeout, this, &ScriptRunner::poll);
  term_.setSingleShot(true);
  connect(&term_, &QTimer::timeout, this, [this] {
    if (isRunning()) process_.terminate();  // SIGTERM
  });
  connect(&process_, &QProcess::readyReadStandardError, this, [this] {
    const QString chunk = QString::fromLocal8Bit(process_.readAllStandardError());
    stderr_ += chunk;
    if (stderr_.size() > kStderrChars) stderr_ = stderr_.right(kStderrChars);
    Q_EMIT stderrReceived(chunk);
  });
  connect(&process_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus status) {
    term_.stop();
    poll_.stop();
    // A run created just before the end is still found (one last look, its answer first).
    const bool crashed = status == QProcess::CrashExit;
    if (run_id_ != 0) {
      Q_EMIT finished(code, crashed, true);
      return;
    }
    look_.run([db = db_path_.toStdString(), name = launch_.run_name.toStdString(),
               pid = pid_] { return find_run(db, name, pid); },
              [this, code, crashed](int64_t id) {
                if (id != 0 && run_id_ == 0) {
                  run_id_ = id;
                  Q_EMIT runCreated(id);
                }
                Q_EMIT finished(code, crashed, run_id_ != 0);
              },
              [this, code, crashed](const QString&) { Q_EMIT finished(code, crashed, false); });
  });
}

ScriptRunner::~ScriptRunner() {
  if (isRunning()) {
    process_.terminate();
    if (!process_.waitForFinished(5000)) process_.kill();
    process_.waitForFinished(1000);
  }
}

bool ScriptRunner::isRunning() const {
  return process_.state() != QProcess::NotRunning;
}

QString ScriptRunner::start(const ScriptLaunch& launch, const QString& db_path) {
  if (isRunning()) return tr("a script is running already: stop it first");
  const QFileInfo script(launch.script);
  if (launch.script.isEmpty()) return tr("choose a Python script (.py) to run");
  if (!script.exists()) return tr("the script %1 does not exist").arg(launch.script);
  if (!script.isFile()) return tr("the script %1 is not a file").arg(launch.script);
  QString interpreter =
      launch.interpreter.isEmpty() ? QStringLiteral("python3") : launch.interpreter;
  if (!interpreter.contains(QLatin1Char('/'))) {
    const QString found = QStandardPaths::findExecutable(interpreter);
    if (found.isEmpty())
      return tr("the interpreter %1 is not on PATH: give its path").arg(interpreter);
    interpreter = found;
  } else if (const QFileInfo f(interpreter); !f.isFile() || !f.isExecutable()) {
    return tr("the interpreter %1 is not an executable file").arg(interpreter);
  }
  if (db_path.isEmpty()) return tr("no run database is open");
  launch_ = launch;
  if (launch_.run_name.isEmpty()) launch_.run_name = script.completeBaseName();
  db_path_ = db_path;
  run_id_ = 0;
  pid_ = 0;
  stderr_.clear();
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert(QStringLiteral("FP8WB_DB"), db_path);
  env.insert(QStringLiteral("FP8WB_RUN_NAME"), launch_.run_name);
  env.insert(QStringLiteral("PYTHONUNBUFFERED"), QStringLiteral("1"));  // stderr as it comes
  // Run from a build tree (<build>/app/gui/), the package is <build>/fp8wb: the script
  // imports that one, beside the program that follows its run. (Installed, the package is
  // in Debian's python3's dist-packages.)
  if (const QDir build(QCoreApplication::applicationDirPath() + QStringLiteral("/../.."));
      QFileInfo::exists(build.filePath(QStringLiteral("fp8wb/__init__.py")))) {
    const QString path = env.value(QStringLiteral("PYTHONPATH"));
    env.insert(QStringLiteral("PYTHONPATH"),
               build.canonicalPath() + (path.isEmpty() ? QString() : QLatin1Char(':') + path));
  }
  process_.setProcessEnvironment(env);
  process_.setWorkingDirectory(script.absolutePath());
  process_.setProgram(interpreter);
  process_.setArguments(QStringList{script.absoluteFilePath()} + launch.arguments);
  process_.setStandardOutputFile(QProcess::nullDevice());
  // SIGINT as a terminal gives it: a GUI started in the background of a shell ignores
  // SIGINT, and an ignored signal stays ignored across exec (Python would then never see
  // the KeyboardInterrupt that Stop sends).
  process_.setChildProcessModifier([] { ::signal(SIGINT, SIG_DFL); });
  stopping_ = false;
  process_.start();
  if (!process_.waitForStarted(10000)) {
    return tr("%1 did not start: %2").arg(interpreter, process_.errorString());
  }
  pid_ = process_.processId();
  poll_.start();
  return {};
}

void ScriptRunner::stop(int grace_ms) {
  if (!isRunning()) return;
  const qint64 pid = process_.processId();
  if (pid > 0) ::kill(static_cast<pid_t>(pid), SIGINT);
  stopping_ = true;
  term_.start(grace_ms);
}

void ScriptRunner::poll() {
  if (run_id_ != 0 || db_path_.isEmpty() || look_.busy()) return;
  look_.run([db = db_path_.toStdString(), name = launch_.run_name.toStdString(),
             pid = pid_] { return find_run(db, name, pid); },
            [this](int64_t id) {
              if (id == 0 || run_id_ != 0) return;
              run_id_ = id;
              poll_.stop();
              Q_EMIT runCreated(id);
            },
            [](const QString&) {});  // no database yet (the script creates it): look again
}

ScriptLaunch ScriptRunner::remembered() {
  const QSettings s;
  ScriptLaunch l;
  l.interpreter = s.value(QLatin1String(kInterpreterKey), QStringLiteral("python3")).toString();
  l.script = s.value(QLatin1String(kScriptKey)).toString();
  l.arguments = s.value(QLatin1String(kArgumentsKey)).toStringList();
  return l;
}

void ScriptRunner::remember(const ScriptLaunch& launch) {
  QSettings s;
  s.setValue(QLatin1String(kInterpreterKey), launch.interpreter);
  s.setValue(QLatin1String(kScriptKey), launch.script);
  s.setValue(QLatin1String(kArgumentsKey), launch.arguments);
}

QStringList ScriptRunner::splitArguments(const QString& text, QString* error) {
  QStringList out;
  QString cur;
  bool in_arg = false;
  QChar quote;
  for (int i = 0; i < text.size(); ++i) {
    const QChar c = text[i];
    if (!quote.isNull()) {
      if (c == quote) {
        quote = QChar();
      } else if (c == QLatin1Char('\\') && quote == QLatin1Char('"') && i + 1 < text.size()) {
        cur += text[++i];
      } else {
        cur += c;
      }
    } else if (c == QLatin1Char('"') || c == QLatin1Char('\'')) {
      quote = c;
      in_arg = true;
    } else if (c == QLatin1Char('\\') && i + 1 < text.size()) {
      cur += text[++i];
      in_arg = true;
    } else if (c.isSpace()) {
      if (in_arg) out << cur;
      cur.clear();
      in_arg = false;
    } else {
      cur += c;
      in_arg = true;
    }
  }
  if (!quote.isNull() && error) *error = tr("the arguments end inside a quote (%1)").arg(quote);
  if (in_arg) out << cur;
  return out;
}

}  // namespace fp8wb
