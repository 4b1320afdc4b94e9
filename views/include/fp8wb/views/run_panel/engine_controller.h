// defines: EngineController: the one bridge from the views to the engine. It starts a
// Trainer on its own thread with the run store and a GUI buffer on its MetricBus; a
// 30 Hz timer swaps the buffer into RunData and tells the tabs to replot. Commands go
// to the engine through its flags; stored runs are read on a pool thread: nothing blocks
// the GUI thread. Every failure comes out of failed(), everything the engine says without
// failing (the core's notices, a run's notice events) out of notice().
#pragma once

#include <QList>
#include <QMetaType>
#include <QObject>
#include <QString>
#include <QTimer>
#include <memory>
#include <vector>

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/metrics.h"
#include "fp8wb/views/common/background_job.h"
#include "fp8wb/views/run_tabs/run_data.h"

// How a run ended, in signals (also queued ones).
Q_DECLARE_METATYPE(fp8wb::RunStatus)

namespace fp8wb {

class Trainer;
class RunStore;
class GuiBuffer;
class RunFollower;

class EngineController : public QObject {
  Q_OBJECT
 public:
  explicit EngineController(QObject* parent = nullptr);
  ~EngineController() override;

  // The database runs go to (opened on first use; default: the user's data directory).
  void setDatabasePath(const QString& path);
  QString databasePath() const { return db_path_; }
  // The open store (opened on demand); throws StoreError naming the problem.
  RunStore& store();
  // Opens another database now (not while a run trains) and shows no run; true where it
  // opened. One that cannot be opened keeps the database before, and failed() says why.
  bool openDatabase(const QString& path);
  // Why the open database takes no runs (it cannot be written: a read-only file or
  // folder), or empty: writable, or not opened yet. A store read-only only because another
  // program held a lock is tried for writing again at the next start: not said here. A
  // database that could not be opened at all (a folder, a file that is no database) gives
  // the reason too, until another path is set or opened.
  QString readOnlyReason() const { return read_only_reason_; }
  // Why the database cannot be used though it was not opened (one not made yet whose
  // folder cannot be written), said as readOnlyReason(); empty to take it back.
  void setUnusableReason(const QString& reason);
  // Opens the database again where it could not be opened (the file may have been mended
  // since): readOnlyReason() follows what it is now. Not while a run trains.
  void retryDatabase();

  // Deletes these runs from the open database (StoreError where one cannot be: the runs
  // before it are deleted), then runsDeleted() with those deleted.
  void deleteRuns(const std::vector<int64_t>& ids);

  bool isRunning() const;
  bool isPaused() const { return paused_; }
  // The run the tabs show: the training run's, or a run opened while it trains.
  const RunData& data() const { return data_; }
  RunData& data() { return data_; }
  // Shows a stored run: returns at once, reads the run on a pool thread, then opened() (or
  // failed()). A newer openRun() supersedes one still reading. A run that another process
  // is still writing is followed live: the tabs update as its steps are committed, and
  // finished() says how it ended (or that its writer died; while a run trains here,
  // followedRunEnded() instead). While a run trains it trains on, its steps kept aside:
  // progress() is still its, and showTrainingRun() shows it again.
  void openRun(int64_t run_id);
  // The run training here, or 0.
  int64_t trainingRunId() const { return isRunning() ? train_run_id_ : 0; }
  // The run trained here last (training or ended), or 0.
  int64_t trainedRunId() const { return train_run_id_; }
  // Whether the tabs show the training run (true where none trains).
  bool showsTrainingRun() const { return !training_hidden_; }
  // The training run back in the tabs (after openRun() while it trains); trainingShown().
  void showTrainingRun();
  bool isOpening() const { return open_job_.busy(); }
  // The newest run of the database that a living process is writing, or 0.
  int64_t newestLiveRun();
  bool isFollowing() const;
  int64_t followedRun() const;
  void stopFollowing();

 public Q_SLOTS:
  // Returns an error message (a bad config, no database; failed() says it too) or empty
  // when the run started.
  QString start(const RunConfig& config);
  void pause();
  void resume();
  void stop();

 Q_SIGNALS:
  void started(qint64 run_id);
  void progress(qint64 step, qint64 steps, double eta_seconds);
  void dataChanged();  // RunData changed: replot what is visible
  // A stored run is shown (openRun()); live: it is being followed.
  void opened(qint64 run_id, bool live);
  void finished(fp8wb::RunStatus status, const QString& message);
  // Something failed: a run could not start or open, a run failed, a store cannot be read.
  void failed(const QString& message);
  // Something the engine says without failing: an FP8 GEMM emulated where the GPU cannot
  // take it, layers kept in high precision and why, an update skipped, a store read-only.
  void notice(const QString& message);
  void pausedChanged(bool paused);
  // The training run is in the tabs again (showTrainingRun()).
  void trainingShown(qint64 run_id);
  // A run another process writes, opened while a run trains here, ended.
  void followedRunEnded(qint64 run_id, fp8wb::RunStatus status, const QString& message);
  // Another database is the one runs go to and are read from (setDatabasePath() with
  // another path, openDatabase()).
  void databaseChanged(const QString& path);
  // Runs were deleted from the database (deleteRuns()): views of them read it again.
  void runsDeleted(const QList<qint64>& ids);
  // readOnlyReason() changed.
  void readOnlyChanged(const QString& reason);

 private:
  void drain();
  void drainTrainer();
  void drainFollower();
  // The training run's data: in the tabs, or kept aside while another run is shown.
  RunData& trainingData() { return training_hidden_ ? parked_ : data_; }
  // The timer runs while a run trains or one is followed.
  void updateTimer();
  void adoptStore(std::unique_ptr<RunStore> s, const std::string& why_read_only);
  // failed(message), and message back (for the callers that return it).
  QString fail(const QString& message);
  QString db_path_;
  std::unique_ptr<RunStore> store_;
  std::shared_ptr<GuiBuffer> buffer_;         // the training run's
  std::shared_ptr<GuiBuffer> follow_buffer_;  // the followed run's
  std::unique_ptr<Trainer> trainer_;
  std::shared_ptr<RunFollower> follower_;
  QTimer timer_;
  RunData data_;
  RunData parked_;                // the training run's, while another run is shown
  bool training_hidden_ = false;  // parked_ holds the training run's data
  bool training_active_ = false;  // started, its last batch not drained yet
  int64_t train_run_id_ = 0;
  int64_t steps_total_ = 0;
  double started_at_ = 0;
  double paused_at_ = 0;       // when the current pause began
  double paused_seconds_ = 0;  // the pauses before it, which the time left leaves out
  bool paused_ = false;
  bool store_locked_ = false;  // the store is read-only because the file was locked
  QString read_only_reason_;   // readOnlyReason()
  void setReadOnlyReason(const QString& reason);
  BackgroundJob open_job_{this};  // last: it waits for its read before the rest goes
};

}  // namespace fp8wb
