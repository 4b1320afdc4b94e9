#include <QApplication>
#include <QCommandLineParser>
#include <QIcon>
#include <cstdio>
#include <cstdlib>

#include "fp8wb/core/backend/backend_info.h"
#include "fp8wb/views/common/presentation_mode.h"
#include "main_window.h"
#include "screenshot.h"

namespace {

bool has_display() {
  return std::getenv("DISPLAY") != nullptr || std::getenv("WAYLAND_DISPLAY") != nullptr;
}

// Reads the command line into o (--help and --version answered and the program ended by
// the parser; the compute threads set up after them). Returns 0, or 2 for a value refused.
int read_options(const QApplication& app, fp8wb::GuiOptions& o) {
  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("FP8 Workbench: see what FP8 does to numbers"));
  parser.addHelpOption();
  parser.addVersionOption();
  const QCommandLineOption shot({QStringLiteral("screenshot")},
                                QStringLiteral("Render the window to PATH (.png) and quit."),
                                QStringLiteral("PATH"));
  const QCommandLineOption tab({QStringLiteral("tab")}, QStringLiteral("Start on this tab."),
                               QStringLiteral("NAME"));
  const QCommandLineOption value({QStringLiteral("value")},
                                 QStringLiteral("Value to show in the Formats tab."),
                                 QStringLiteral("VALUE"));
  const QCommandLineOption page(
      {QStringLiteral("page")},
      QStringLiteral("Formats tab page: explorer, gradients, outliers, master-weights or "
                     "loss-scaling."),
      QStringLiteral("PAGE"));
  const QCommandLineOption all({QStringLiteral("all-formats")},
                               QStringLiteral("Show every format in the Formats tab."));
  const QCommandLineOption present({QStringLiteral("presentation")},
                                   QStringLiteral("Large fonts, for teaching."));
  const QCommandLineOption size({QStringLiteral("size")},
                                QStringLiteral("Window size, e.g. 1400x900."),
                                QStringLiteral("WxH"));
  const QCommandLineOption db({QStringLiteral("db")},
                              QStringLiteral("Run database (default: the user's data directory)."),
                              QStringLiteral("PATH"));
  const QCommandLineOption preset(
      {QStringLiteral("preset")},
      QStringLiteral("Train this preset (e.g. \"Tiny GPT: FP8 vs BF16\") before the screenshot."),
      QStringLiteral("NAME"));
  const QCommandLineOption steps({QStringLiteral("steps")},
                                 QStringLiteral("With --preset: train this many steps."),
                                 QStringLiteral("N"));
  const QCommandLineOption ckpt({QStringLiteral("checkpoint")},
                                QStringLiteral("Analyse this checkpoint in the Checkpoint tab."),
                                QStringLiteral("PATH"));
  const QCommandLineOption sweep({QStringLiteral("sweep")},
                                 QStringLiteral("Run this sweep preset in the Sweeps tab first."),
                                 QStringLiteral("NAME"));
  const QCommandLineOption set(
      {QStringLiteral("set")},
      QStringLiteral("With --preset: set a field as in a config, e.g. device=cuda:0 or "
                     "d_model=512 (repeatable)."),
      QStringLiteral("KEY=VALUE"));
  const QCommandLineOption follow(
      {QStringLiteral("follow")},
      QStringLiteral("Open the newest run that another process is writing into the database "
                     "(--db) and follow it live."));
  const QCommandLineOption wait_steps(
      {QStringLiteral("wait-steps")},
      QStringLiteral("With --follow and --screenshot: wait until N steps are stored (or the "
                     "run ends) first."),
      QStringLiteral("N"));
  const QCommandLineOption wait_timeout(
      {QStringLiteral("wait-timeout")},
      QStringLiteral("With --wait-steps: give up, saying so, when the run has stored no new "
                     "step for S seconds (default 300)."),
      QStringLiteral("S"));
  parser.addOptions({shot, tab, value, page, all, present, size, db, preset, steps, ckpt, sweep,
                     set, follow, wait_steps, wait_timeout});
  parser.process(app);

  fp8wb::init_compute_threads();
  o.screenshot = parser.value(shot);
  o.tab = parser.value(tab);
  o.value = parser.value(value);
  o.page = parser.value(page);
  o.all_formats = parser.isSet(all);
  o.presentation = parser.isSet(present);
  o.db = parser.value(db);
  o.preset = parser.value(preset);
  o.checkpoint = parser.value(ckpt);
  o.sweep = parser.value(sweep);
  o.set = parser.values(set);
  o.follow = parser.isSet(follow);
  // --steps N, --wait-steps N: positive counts.
  for (const auto& [option, out] :
       {std::make_pair(&steps, &o.steps), std::make_pair(&wait_steps, &o.wait_steps),
        std::make_pair(&wait_timeout, &o.wait_timeout_s)}) {
    if (!parser.isSet(*option)) continue;
    bool ok = false;
    *out = parser.value(*option).toLongLong(&ok);
    if (!ok || *out < 1) {
      std::fprintf(stderr, "fp8-workbench: --%s wants a positive number, got '%s'\n",
                   qPrintable(option->names().first()), qPrintable(parser.value(*option)));
      return 2;
    }
  }
  if (parser.isSet(size)) {
    const QStringList wh = parser.value(size).split(QLatin1Char('x'));
    bool okw = false, okh = false;
    const int w = wh.size() == 2 ? wh[0].toInt(&okw) : 0;
    const int h = wh.size() == 2 ? wh[1].toInt(&okh) : 0;
    if (!okw || !okh || w < 200 || h < 150 || w > 8000 || h > 8000) {
      std::fprintf(stderr, "fp8-workbench: --size wants WxH such as 1400x900, got '%s'\n",
                   qPrintable(parser.value(size)));
      return 2;
    }
    o.size = QSize(w, h);
  }
  return 0;
}

// --preset, --follow, --sweep and --checkpoint, in this order. Returns the exit code where
// the program ends here (an error said), else -1; *exit_code becomes 1 where a preset's run
// failed midway and a screenshot still shows what it stored.
int run_start_options(fp8wb::MainWindow& window, const fp8wb::GuiOptions& o, int* exit_code) {
  if (!o.preset.isEmpty()) {
    window.show();
    if (const QString err = fp8wb::run_preset(window, o); !err.isEmpty()) {
      std::fprintf(stderr, "fp8-workbench: %s\n", qPrintable(err));
      // A run that failed midway still shows what it stored: the screenshot says so.
      if (o.screenshot.isEmpty() || !err.startsWith(QLatin1String("the run failed"))) return 1;
      *exit_code = 1;
    }
    if (!o.tab.isEmpty()) window.selectTab(o.tab.section(QLatin1Char(','), 0, 0));
  }
  if (o.follow) {
    window.show();
    if (const QString err = fp8wb::follow_run(window, o); !err.isEmpty()) {
      std::fprintf(stderr, "fp8-workbench: %s\n", qPrintable(err));
      return 1;
    }
    window.selectTab(o.tab.isEmpty() ? QStringLiteral("Overview")
                                     : o.tab.section(QLatin1Char(','), 0, 0));
  }
  if (!o.sweep.isEmpty()) {
    window.show();
    if (const QString err = fp8wb::run_sweep_preset(window, o); !err.isEmpty()) {
      std::fprintf(stderr, "fp8-workbench: %s\n", qPrintable(err));
      return 1;
    }
    if (o.tab.isEmpty()) window.selectTab(QStringLiteral("Sweeps"));
  }
  if (!o.checkpoint.isEmpty()) {
    if (const QString err = fp8wb::open_checkpoint(window, o); !err.isEmpty()) {
      std::fprintf(stderr, "fp8-workbench: %s\n", qPrintable(err));
      // A screenshot of it cannot be taken; on screen the window opens on the Checkpoint
      // tab with the error shown, as when the file is opened from the tab.
      if (!o.screenshot.isEmpty()) return 1;
    }
    if (o.tab.isEmpty()) window.selectTab(QStringLiteral("Checkpoint"));
  }
  return -1;
}

// --screenshot: the tab, or each tab of a list, saved. Returns the exit code.
int take_screenshots(fp8wb::MainWindow& window, const fp8wb::GuiOptions& o, int exit_code) {
  if (o.tab.contains(QLatin1Char(','))) {
    if (const QString err = fp8wb::save_screenshots(window, o.screenshot, o.tab); !err.isEmpty()) {
      std::fprintf(stderr, "fp8-workbench: %s\n", qPrintable(err));
      return 1;
    }
    return exit_code;
  }
  if (const QString err = fp8wb::save_screenshot(window, o.screenshot); !err.isEmpty()) {
    std::fprintf(stderr, "fp8-workbench: %s\n", qPrintable(err));
    return 1;
  }
  std::printf("saved %s (tab %s)\n", qPrintable(o.screenshot), qPrintable(window.currentTabName()));
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  // Without a display: render offscreen unless told otherwise, so that screenshots,
  // --help, --version and argument errors work; a window to look at needs a display.
  const bool no_display = !has_display() && std::getenv("QT_QPA_PLATFORM") == nullptr;
  if (no_display) setenv("QT_QPA_PLATFORM", "offscreen", 1);
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("fp8wb"));
  QApplication::setApplicationName(QStringLiteral("FP8 Workbench"));
  QApplication::setApplicationVersion(QString::fromStdString(fp8wb::workbench_version()));
  // The installed desktop entry and icon (packaging/): Wayland compositors match the
  // window to its entry by this name; the icon comes from the hicolor theme when installed.
  QGuiApplication::setDesktopFileName(QStringLiteral(FP8WB_APP_ID));
  QApplication::setWindowIcon(QIcon::fromTheme(QStringLiteral("fp8-workbench")));
  fp8wb::GuiOptions o;
  if (const int code = read_options(app, o)) return code;

  fp8wb::MainWindow window(/*remember_layout=*/o.screenshot.isEmpty());
  if (const QString err = fp8wb::apply_gui_options(window, o); !err.isEmpty()) {
    std::fprintf(stderr, "fp8-workbench: %s\n", qPrintable(err));
    return 2;
  }
  int exit_code = 0;
  if (const int code = run_start_options(window, o, &exit_code); code >= 0) return code;
  if (!o.screenshot.isEmpty()) return take_screenshots(window, o, exit_code);
  if (no_display) {
    std::fprintf(stderr,
                 "fp8-workbench: no display (DISPLAY and WAYLAND_DISPLAY are unset): start it in "
                 "a desktop session, render a tab with --screenshot PATH, or use the CLI, fp8wb\n");
    return 2;
  }
  // The window's size (remembered, --size or the default) never exceeds the screen's.
  fp8wb::PresentationMode::fitToScreen(&window);
  window.show();
  return app.exec();
}
