// defines: EngineController: the one bridge from the views to the engine. It starts a
// Trainer on its own thread with the run store and a GUI buffer on its MetricBus; a
// 30 Hz timer swaps the buffer into RunData and tells the tabs to replot. Commands go
// to the engine through its flags; nothing blocks the GUI thread.
#pragma once

#include <QObject>
#include <QString>
#include <QTimer>
#include <memory>

#include "fp8wb/core/run_config.h"
#include "fp8wb/views/run_data.h"

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

  bool isRunning() const;
  bool isPaused() const { return paused_; }
  const RunData& data() const { return data_; }
  RunData& data() { return data_; }
  // Shows a stored run (not while one trains). A run that another process is still
  // writing is followed live: the tabs update as its steps are committed, and finished()
  // says how it ended (or that its writer died). Returns an error message or empty.
  QString openRun(int64_t run_id);
  // The newest run of the database that a living process is writing, or 0.
  int64_t newestLiveRun();
  bool isFollowing() const;
  int64_t followedRun() const;
  void stopFollowing();

 public Q_SLOTS:
  // Returns an error message (a bad config, no database) or empty when the run started.
  QString start(const RunConfig& config);
  void pause();
  void resume();
  void stop();

 Q_SIGNALS:
  void started(qint64 run_id);
  void progress(qint64 step, qint64 steps, double eta_seconds);
  void dataChanged();  // RunData changed: replot what is visible
  void finished(const QString& status, const QString& message);
  void failed(const QString& message);
  // Something the engine says without failing: an FP8 GEMM emulated where the GPU cannot
  // take it, layers kept in high precision and why.
  void notice(const QString& message);
  void pausedChanged(bool paused);

 private:
  void drain();
  QString db_path_;
  std::unique_ptr<RunStore> store_;
  std::shared_ptr<GuiBuffer> buffer_;
  std::unique_ptr<Trainer> trainer_;
  std::unique_ptr<RunFollower> follower_;
  QTimer timer_;
  RunData data_;
  int64_t steps_total_ = 0;
  double started_at_ = 0;
  bool paused_ = false;
  bool store_locked_ = false;  // the store is read-only because the file was locked
};

}  // namespace fp8wb
