// defines: MainWindow: arranges the tabs, the menus and the status bar; the tabs do the
// work. Every failure and notice of the engine, the sweeps and the checkpoint analysis
// is shown here, in one place: the status bar, and a message for failures.
#pragma once

#include <QMainWindow>
#include <QStringList>
#include <functional>

class QTabWidget;
class QAction;
class QLabel;
class QMenu;
class QMessageBox;
class QDialog;
class QDockWidget;

namespace fp8wb {

class FormatsTab;
class StatusLabel;
class EngineController;
class OverviewTab;
class ScalingTab;
class QuantizationTab;
class RunsTab;
class RunPanel;
class RunTabBase;
class CheckpointTab;
class SweepsTab;
class PresentationMode;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  // remember_layout: restore and save geometry, tab and mode in QSettings (off for
  // screenshots and tests, which must not depend on a user's settings).
  explicit MainWindow(bool remember_layout = true, QWidget* parent = nullptr);

  QStringList tabNames() const;
  // Selects a tab by name, case-insensitively; false if there is none.
  bool selectTab(const QString& name);
  QString currentTabName() const;
  // Large fonts and plots for a projector, the run panel only while a run trains, the
  // window within its screen (PresentationMode); F11 toggles it, Esc leaves it.
  void setPresentationMode(bool on);
  bool presentationMode() const;
  FormatsTab* formatsTab() const { return formats_; }
  EngineController* engine() const { return engine_; }
  RunPanel* runPanel() const { return panel_; }
  OverviewTab* overviewTab() const { return overview_; }
  ScalingTab* scalingTab() const { return scaling_; }
  QuantizationTab* quantizationTab() const { return quantization_; }
  RunsTab* runsTab() const { return runs_; }
  CheckpointTab* checkpointTab() const { return checkpoint_; }
  SweepsTab* sweepsTab() const { return sweeps_; }
  QString statusText() const;
  // Replots the run tabs (all of them with force, else the visible one).
  void refreshRunTabs(bool force = false);
  // The one place failures and notices are shown (the status bar; failures also in a
  // window-modal message that does not stop the event loop).
  void showFailure(const QString& message);
  // A failure that a tab already says in place: the status bar and the list of failures,
  // no message box on top of it.
  void noteFailure(const QString& message);
  void showNotice(const QString& message);
  QStringList failures() const { return failures_; }
  // What the status bar says of the run (training, opened, how a run ended).
  QString runStatusText() const;
  QStringList notices() const { return notices_; }

  // The File menu's file dialogs: (parent, caption, folder, filter) -> the chosen path,
  // empty when cancelled. open_file_name() and save_file_name() (file_dialogs.h) by default.
  using FileDialog =
      std::function<QString(QWidget*, const QString&, const QString&, const QString&)>;
  void setFileDialogs(FileDialog open, FileDialog save);
  // File > Open checkpoint: the Checkpoint tab opens and analyses the file.
  void openCheckpointFile(const QString& path);
  // File > Open database: the runs of another database (kept where it cannot be opened:
  // the failure says why); true where it opened.
  bool openDatabaseFile(const QString& path);
  // Says at once (showFailure) where the database the window uses cannot be opened: a
  // folder, a damaged file, a path in a folder that does not exist (but for the default
  // database's, made with it), a database not made yet whose folder cannot be written.
  // One that does not exist yet, in a folder that does, is created by the first run. One
  // that cannot be written is said by a notice (its runs can be viewed, not started,
  // renamed or deleted).
  void checkDatabase();
  // Looks again, without a message, at a database that could not be opened, written or
  // made (the file or folder may have been mended): done when the window is activated
  // and when the failure's message is closed. Start, Rename and Delete follow.
  void recheckDatabase();
  QStringList recentDatabases() const;
  // Help > Documentation: the shipped README.md and docs/ in a viewer of the program's own
  // (documentation_folders() in main_window.cpp says where they are looked for); false,
  // and a failure naming where it looked, where they are not there.
  bool showDocumentation();

 protected:
  void closeEvent(QCloseEvent* e) override;
  void showEvent(QShowEvent* e) override;
  void resizeEvent(QResizeEvent* e) override;
  bool eventFilter(QObject* watched, QEvent* e) override;
  void changeEvent(QEvent* e) override;

 private:
  // The constructor's steps (buildStatusBar(): main_window_status.cpp).
  void buildStatusBar();
  void connectRun();
  void connectTabs();
  void connectRunShown();
  void buildMenus();  // main_window_menus.cpp
  // While presenting: the run panel shows only while a run trains.
  void showRunPanelForPresentation();
  void fillRecentMenu();
  void fillExportMenu();
  void rememberDatabase(const QString& path);
  // A failure still in the status bar is taken down once what failed has worked since.
  void clearFailureMessage();
  // A message in the status bar for 20 s, cut with "..." where it would run into the
  // database label (the whole of it in the status bar's tooltip).
  void sayInStatusBar(const QString& message);
  // Whether the status bar still shows what sayInStatusBar() was last given.
  bool saying() const;
  QTabWidget* tabs_;
  FormatsTab* formats_;
  EngineController* engine_;
  OverviewTab* overview_;
  ScalingTab* scaling_;
  QuantizationTab* quantization_;
  RunsTab* runs_;
  RunPanel* panel_;
  CheckpointTab* checkpoint_;
  SweepsTab* sweeps_;
  StatusLabel* run_status_;         // the run shown or training, cut at a word where long
  QWidget* back_button_ = nullptr;  // "Back to run N", right of run_status_
  bool resay_pending_ = false;      // a message to cut again once the bar is laid out
  QStringList notices_;             // the latest notices
  QStringList failures_;            // the latest failures
  QString said_, said_shown_;       // sayInStatusBar()'s last message, and as it was shown
  QMessageBox* failure_box_ = nullptr;
  QAction* presentation_action_ = nullptr;
  QAction* leave_presentation_action_ = nullptr;
  PresentationMode* presentation_;
  QDockWidget* run_dock_ = nullptr;
  QMenu* recent_menu_ = nullptr;
  QMenu* export_menu_ = nullptr;
  QDialog* docs_ = nullptr;  // the documentation's viewer, made when first asked for
  FileDialog open_dialog_, save_dialog_;
  bool remember_layout_;
};

}  // namespace fp8wb
