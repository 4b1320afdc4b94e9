// defines: GuiOptions, parse_gui_options(), save_screenshot(): the GUI's command line
// (--screenshot PATH --tab NAME ...) for documentation and tests.
#pragma once

#include <QSize>
#include <QString>
#include <QStringList>

namespace fp8wb {

class MainWindow;

struct GuiOptions {
  QString screenshot;  // save the window to this PNG and quit
  QString tab;         // start on this tab
  QString value;       // value typed into the Formats tab
  QString page;        // Formats tab page: explorer, gradients, outliers
  bool all_formats = false;
  bool presentation = false;
  QSize size{1400, 900};
  QString db;             // run database (default: the user's data directory)
  QString preset;         // train this preset before the screenshot
  qint64 steps = 0;       // with preset: this many steps (0: the preset's)
  QString checkpoint;     // analyse this checkpoint in the Checkpoint tab first
  QString sweep;          // run this sweep preset in the Sweeps tab first
  QStringList set;        // with preset: key=value overrides of its fields (device=cuda:0, ...)
  bool follow = false;    // follow the newest run another process is writing into db
  qint64 wait_steps = 0;  // with follow: wait until this many steps are stored (or the end)
  qint64 wait_timeout_s = 300;  // with wait_steps: give up after this long without a new step
};

// Applies the options to a window; returns an error message, empty when all is well.
QString apply_gui_options(MainWindow& w, const GuiOptions& o);
// Trains the options' preset to its end (events keep flowing); returns an error message
// or empty.
QString run_preset(MainWindow& w, const GuiOptions& o);
// Runs the options' sweep preset to its end; an error message or empty.
QString run_sweep_preset(MainWindow& w, const GuiOptions& o);
// Opens the options' checkpoint and waits for its analysis; an error message or empty.
QString open_checkpoint(MainWindow& w, const GuiOptions& o);
// Opens the newest run being written into the database and follows it live; with
// wait_steps, returns once that many steps are stored or the run has ended, or with an
// error once the run has stored no new step for wait_timeout_s (a writer stalled, or one
// that is not this run's). An error message or empty.
QString follow_run(MainWindow& w, const GuiOptions& o);
// Renders the window (shown or offscreen) to PNG; returns an error message or empty.
QString save_screenshot(MainWindow& w, const QString& path);
// With several tabs ("overview,scaling"), one PNG a tab: {tab} in the path is replaced
// by the tab's name. An error message or empty.
QString save_screenshots(MainWindow& w, const QString& path, const QString& tabs);

}  // namespace fp8wb
