#include "screenshot.h"

#include <QApplication>
#include <QBuffer>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFileInfo>
#include <QPixmap>
#include <QTimer>
#include <algorithm>
#include <cstdio>

#include "fp8wb/views/checkpoint/checkpoint_tab.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/common/run_database_guard.h"
#include "fp8wb/views/formats/formats_tab.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/run_panel/run_panel.h"
#include "fp8wb/views/runs/runs_tab.h"
#include "fp8wb/views/sweeps/sweeps_tab.h"
#include "main_window.h"

namespace fp8wb {

QString apply_gui_options(MainWindow& w, const GuiOptions& o) {
  w.resize(o.size);
  if (!o.db.isEmpty()) w.engine()->setDatabasePath(o.db);
  // The database chosen or the default one: a folder, a damaged or a read-only file is
  // said now, naming it, not first when a run is started.
  w.checkDatabase();
  for (const QString& t : o.tab.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
    if (!w.selectTab(t.trimmed())) {
      return QStringLiteral("unknown tab '%1': the tabs are %2")
          .arg(t, w.tabNames().join(QStringLiteral(", ")));
    }
  }
  if (!o.tab.isEmpty()) w.selectTab(o.tab.section(QLatin1Char(','), 0, 0).trimmed());
  if (!o.set.isEmpty() && o.preset.isEmpty())
    return QStringLiteral("--set changes a preset's fields: name one with --preset");
  if (o.wait_steps > 0 && !o.follow) return QStringLiteral("--wait-steps goes with --follow");
  if (!o.page.isEmpty() && !w.formatsTab()->showPage(o.page)) {
    return QStringLiteral("unknown Formats page '%1': the pages are %2")
        .arg(o.page, w.formatsTab()->pageNames().join(QStringLiteral(", ")));
  }
  if (o.presentation) w.setPresentationMode(true);
  if (o.all_formats) w.formatsTab()->setShowAllFormats(true);
  if (!o.value.isEmpty()) {
    w.formatsTab()->setValueText(o.value);
    if (!w.formatsTab()->errorText().isEmpty()) return w.formatsTab()->errorText();
  }
  return {};
}

QString run_preset(MainWindow& w, const GuiOptions& o) {
  if (o.preset.isEmpty()) return {};
  if (!w.runPanel()->applyPreset(o.preset)) {
    return QStringLiteral("unknown preset '%1': the presets are %2")
        .arg(o.preset, RunPanel::presetNames().join(QStringLiteral(", ")));
  }
  if (o.steps > 0) w.runPanel()->setSteps(o.steps);
  if (!o.set.isEmpty()) {
    if (const QString err = w.runPanel()->applyOverrides(o.set); !err.isEmpty()) return err;
  }
  QEventLoop loop;
  RunStatus status = RunStatus::Running;
  QString message;
  QObject::connect(w.engine(), &EngineController::finished, &loop,
                   [&](RunStatus s, const QString& m) {
                     status = s;
                     message = m;
                     loop.quit();
                   });
  if (const QString err = w.runPanel()->start(); !err.isEmpty()) return err;
  loop.exec();
  if (status == RunStatus::Failed) return QStringLiteral("the run failed: %1").arg(message);
  return {};
}

QString run_sweep_preset(MainWindow& w, const GuiOptions& o) {
  if (o.sweep.isEmpty()) return {};
  SweepsTab* tab = w.sweepsTab();
  if (!tab->applyPreset(o.sweep)) {
    return QStringLiteral("unknown sweep preset '%1': the presets are %2")
        .arg(o.sweep, SweepsTab::presetNames().join(QStringLiteral(", ")));
  }
  QEventLoop loop;
  QObject::connect(tab, &SweepsTab::sweepFinished, &loop, &QEventLoop::quit);
  if (const QString err = tab->start(); !err.isEmpty()) return err;
  loop.exec();
  return {};
}

QString open_checkpoint(MainWindow& w, const GuiOptions& o) {
  if (o.checkpoint.isEmpty()) return {};
  QEventLoop loop;
  QString error;
  CheckpointTab* tab = w.checkpointTab();
  QObject::connect(tab, &CheckpointTab::checkpointLoaded, &loop, &QEventLoop::quit);
  QObject::connect(tab, &CheckpointTab::failed, &loop, [&](const QString& m) {
    error = m;
    loop.quit();
  });
  tab->openCheckpoint(o.checkpoint);
  if (error.isEmpty() && tab->busy()) loop.exec();
  return error;
}

QString follow_run(MainWindow& w, const GuiOptions& o) {
  EngineController* engine = w.engine();
  int64_t id = 0;
  try {
    id = engine->newestLiveRun();
  } catch (const std::exception& e) {
    return QString::fromStdString(e.what());
  }
  if (id == 0) {
    return QStringLiteral(
               "no run is being written into %1 now (fp8wb runs list --db %1 shows "
               "its runs)")
        .arg(engine->databasePath());
  }
  {
    QEventLoop opening;
    QString error;
    QObject::connect(engine, &EngineController::opened, &opening, &QEventLoop::quit);
    QObject::connect(engine, &EngineController::failed, &opening, [&](const QString& m) {
      error = m;
      opening.quit();
    });
    Q_EMIT w.runsTab()->openRequested(id);
    if (engine->isOpening()) opening.exec();
    if (!error.isEmpty()) return error;
  }
  if (!engine->isFollowing()) return {};  // it ended meanwhile: shown as stored
  if (o.wait_steps <= 0) return {};
  QEventLoop loop;
  // Bounded by what it waits for: a new step restarts the clock, and a run that stores
  // none for wait_timeout_s (its writer stalled, or a live process that is not its writer)
  // ends the wait with a message.
  QElapsedTimer since_step;
  since_step.start();
  int64_t last_step = -1;
  bool stalled = false;
  auto check = [&] {
    const auto& s = engine->data().steps();
    const int64_t step = s.empty() ? -1 : s.back().step;
    if (step != last_step) {
      last_step = step;
      since_step.restart();
    }
    if (!engine->isFollowing() || step + 1 >= o.wait_steps) {
      loop.quit();
    } else if (since_step.elapsed() >= o.wait_timeout_s * 1000) {
      stalled = true;
      loop.quit();
    }
  };
  QObject::connect(engine, &EngineController::dataChanged, &loop, check);
  QObject::connect(engine, &EngineController::finished, &loop, &QEventLoop::quit);
  QTimer tick;
  QObject::connect(&tick, &QTimer::timeout, &loop, check);
  tick.start(
      static_cast<int>(std::min<qint64>(1000, std::max<qint64>(50, o.wait_timeout_s * 100))));
  check();
  if (engine->isFollowing() && !stalled) loop.exec();
  if (stalled) {
    return QStringLiteral(
               "run %1 stored no new step for %2 s (%3 of the %4 steps waited for are stored): "
               "its writer may have stalled, or the process recorded as writing it is not this "
               "run's; gave up waiting (--wait-timeout S waits longer)")
        .arg(id)
        .arg(o.wait_timeout_s)
        .arg(last_step + 1)
        .arg(o.wait_steps);
  }
  return {};
}

QString save_screenshots(MainWindow& w, const QString& path, const QString& tabs) {
  const QStringList names = tabs.split(QLatin1Char(','), Qt::SkipEmptyParts);
  if (names.size() <= 1) return save_screenshot(w, path);
  if (!path.contains(QLatin1String("{tab}")))
    return QStringLiteral("with several tabs, the screenshot path needs {tab} in it");
  for (const QString& name : names) {
    if (!w.selectTab(name.trimmed())) return QStringLiteral("unknown tab '%1'").arg(name);
    QString file = path;
    file.replace(QLatin1String("{tab}"), name.trimmed().toLower());
    if (const QString err = save_screenshot(w, file); !err.isEmpty()) return err;
    std::printf("saved %s (tab %s)\n", qPrintable(file), qPrintable(w.currentTabName()));
  }
  return {};
}

QString save_screenshot(MainWindow& w, const QString& path) {
  if (QFileInfo(path).suffix().compare(QLatin1String("png"), Qt::CaseInsensitive) != 0) {
    return QStringLiteral("screenshot path '%1' must end in .png").arg(path);
  }
  if (const QString no =
          output_refusal(path, {w.engine()->databasePath(), w.checkpointTab()->shownPath()});
      !no.isEmpty())
    return no;
  w.show();
  // Let layouts settle and queued replots run before grabbing.
  for (int i = 0; i < 5; ++i) QApplication::processEvents();
  w.refreshRunTabs(true);
  for (ExportablePlot* p : w.findChildren<ExportablePlot*>()) p->replot();
  QApplication::processEvents();
  const QPixmap shot = w.grab();
  if (shot.isNull()) return QStringLiteral("could not render the window");
  // As every file the GUI writes: never over an SQLite database (a link named x.png to
  // the run database another process is writing, say) or what the window reads, and all
  // or nothing (run_database_guard.h).
  QByteArray png;
  QBuffer buffer(&png);
  buffer.open(QIODevice::WriteOnly);
  if (!shot.save(&buffer, "PNG")) return QStringLiteral("could not encode the window as PNG");
  return write_output_file(path, png, {w.engine()->databasePath(), w.checkpointTab()->shownPath()});
}

}  // namespace fp8wb
