#include "fp8wb/views/run_panel/engine_controller.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QPointer>
#include <algorithm>
#include <mutex>
#include <set>

#include "fp8wb/core/backend/notices.h"
#include "fp8wb/core/store/run_follower.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/train/run_start.h"
#include "fp8wb/core/train/trainer.h"
#include "fp8wb/views/common/run_database_guard.h"
#include "fp8wb/views/common/store_reader.h"

namespace fp8wb {

// The engine thread appends under a lock held only for the push; the GUI thread swaps
// the whole vector out at its own pace.
class GuiBuffer : public MetricConsumer {
 public:
  void consume(const MetricBatch& b) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back(b);
  }
  // The bus's last consumer: the batch moves in, nothing is copied.
  void take(MetricBatch&& b) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back(std::move(b));
  }
  std::vector<MetricBatch> swap_out() {
    std::vector<MetricBatch> out;
    const std::lock_guard<std::mutex> lock(mutex_);
    out.swap(pending_);
    return out;
  }

 private:
  std::mutex mutex_;
  std::vector<MetricBatch> pending_;
};

namespace {

// The controller the core's notices go to (the newest one).
EngineController* notice_owner = nullptr;

// A stored run read off the GUI thread, with its follower already polling where it is
// live (what arrives meanwhile waits in the buffer).
struct OpenedRun {
  RunData data;
  bool live = false;
  std::shared_ptr<GuiBuffer> buffer;
  std::shared_ptr<RunFollower> follower;
};

}  // namespace

EngineController::EngineController(QObject* parent)
    : QObject(parent), db_path_(QString::fromStdString(default_database_path())) {
  set_open_run_database(this, db_path_);
  qRegisterMetaType<fp8wb::RunStatus>("fp8wb::RunStatus");
  timer_.setInterval(33);  // ~30 Hz
  connect(&timer_, &QTimer::timeout, this, &EngineController::drain);
  // The engine's notices come from its threads; they reach the GUI thread queued.
  QPointer<EngineController> self(this);
  notice_owner = this;
  set_notice_sink([self](const std::string& message) {
    const QString m = QString::fromStdString(message);
    QMetaObject::invokeMethod(
        qApp,
        [self, m] {
          if (self) Q_EMIT self->notice(m);
        },
        Qt::QueuedConnection);
  });
}

EngineController::~EngineController() {
  set_open_run_database(this, {});
  open_job_.drop();
  open_job_.wait();
  follower_.reset();
  if (trainer_) {
    trainer_->stop();
    trainer_->join();
  }
  if (notice_owner == this) {
    notice_owner = nullptr;
    set_notice_sink(nullptr);
  }
}

QString EngineController::fail(const QString& message) {
  Q_EMIT failed(message);
  return message;
}

void EngineController::setDatabasePath(const QString& path) {
  if (path == db_path_) return;
  db_path_ = path;
  set_open_run_database(this, db_path_);
  if (!isRunning()) {
    store_.reset();
    setReadOnlyReason({});  // not known before it is opened
  }
  Q_EMIT databaseChanged(db_path_);
}

void EngineController::setReadOnlyReason(const QString& reason) {
  if (reason == read_only_reason_) return;
  read_only_reason_ = reason;
  Q_EMIT readOnlyChanged(reason);
}

void EngineController::setUnusableReason(const QString& reason) {
  if (!isRunning()) setReadOnlyReason(reason);
}

void EngineController::retryDatabase() {
  // Only one that did not open: a read-only one that did is said once, not at each try.
  if (isRunning() || follower_ || read_only_reason_.isEmpty() || store_) return;
  try {
    store();  // its reason, or none
  } catch (const std::exception&) {
    // Still no database: store() has kept the reason.
  }
}

RunStore& EngineController::store() {
  // A database it cannot write (another user's, a read-only mount) is browsed read-only;
  // starting a run there says so (StoreError "... is open read-only").
  // Read-only because another program held a lock: try writing again, it may be gone.
  if (store_ && store_->read_only() && store_locked_ && !isRunning() && !follower_) store_.reset();
  if (!store_) {
    std::string why;
    std::unique_ptr<RunStore> s;
    try {
      s = RunStore::open_or_read_only(db_path_.toStdString(), &why);
    } catch (const std::exception& e) {
      // No database at all (a folder, a file that is not one): nothing can be stored there,
      // and Start, Rename, Delete and Start sweep say why, as for a read-only one, until
      // another database is chosen.
      setReadOnlyReason(QString::fromStdString(e.what()));
      throw;
    }
    adoptStore(std::move(s), why);
  }
  return *store_;
}

void EngineController::adoptStore(std::unique_ptr<RunStore> s, const std::string& why) {
  store_ = std::move(s);
  store_locked_ = why.find("locked") != std::string::npos || why.find("busy") != std::string::npos;
  // Browsing still works; runs cannot be started, renamed or deleted: say so once.
  if (store_->read_only()) {
    const QString reason = QString::fromStdString(why);
    // The core's reason names the database already ("run database PATH is read-only: ...").
    const QString what =
        reason.contains(db_path_) ? reason : tr("%1 is open read-only (%2)").arg(db_path_, reason);
    Q_EMIT notice(
        tr("%1. Its runs can be viewed and followed, not started, renamed or deleted").arg(what));
    setReadOnlyReason(store_locked_ ? QString() : what);
  } else {
    setReadOnlyReason({});
  }
}

bool EngineController::openDatabase(const QString& path) {
  if (isRunning()) {
    fail(tr("a run is training: stop it before opening another database"));
    return false;
  }
  std::string why;
  std::unique_ptr<RunStore> s;
  try {
    s = RunStore::open_or_read_only(path.toStdString(), &why);
  } catch (const std::exception& e) {
    fail(QString::fromStdString(e.what()));  // the database open before stays
    return false;
  }
  open_job_.drop();
  stopFollowing();
  trainer_.reset();
  store_.reset();
  db_path_ = path;
  set_open_run_database(this, db_path_);
  adoptStore(std::move(s), why);
  // The run shown was one of the other database's.
  data_.clear();
  Q_EMIT dataChanged();
  Q_EMIT databaseChanged(db_path_);
  return true;
}

void EngineController::deleteRuns(const std::vector<int64_t>& ids) {
  QList<qint64> deleted;
  try {
    for (int64_t id : ids) {
      store().delete_run(id);
      deleted << id;
    }
    store().flush();
  } catch (...) {
    if (!deleted.isEmpty()) Q_EMIT runsDeleted(deleted);
    throw;
  }
  if (!deleted.isEmpty()) Q_EMIT runsDeleted(deleted);
}

bool EngineController::isRunning() const {
  return trainer_ &&
         (trainer_->status() == RunStatus::Running || trainer_->status() == RunStatus::Paused);
}

void EngineController::openRun(int64_t run_id) {
  if (isRunning() && run_id == train_run_id_) {  // the training run: back to it
    open_job_.drop();
    showTrainingRun();
    return;
  }
  stopFollowing();
  const std::string path = db_path_.toStdString();
  open_job_.run(
      [path, run_id] {
        const auto store = open_store_reader(path);
        const std::optional<RunInfo> info = store->run(run_id);
        if (!info) throw StoreError("no run " + std::to_string(run_id) + " in " + path);
        OpenedRun r;
        RunCursor cursor;
        r.data.load(*store, run_id, &cursor);
        r.live = info->live;
        if (r.live) {
          auto bus = std::make_shared<MetricBus>();
          r.buffer = std::make_shared<GuiBuffer>();
          bus->add(r.buffer);
          r.follower = std::make_shared<RunFollower>(path, run_id, cursor, bus);
        }
        return r;
      },
      [this, run_id](OpenedRun r) {
        stopFollowing();
        // A run training here trains on: its steps go aside until it is shown again.
        if (isRunning() && !training_hidden_) {
          parked_ = std::move(data_);
          training_hidden_ = true;
        } else if (!isRunning()) {
          parked_ = RunData();
          training_hidden_ = false;
          train_run_id_ = 0;  // what is shown now is no longer beside a run trained here
        }
        data_.replace(std::move(r.data));
        if (r.live) {
          follow_buffer_ = std::move(r.buffer);
          follower_ = std::move(r.follower);
          if (!isRunning()) {
            // A watched script's steps are not known ahead.
            steps_total_ = data_.hasConfig() && !data_.watched() ? data_.config().steps : 0;
            started_at_ = -1;  // no ETA for a run another process times
          }
          updateTimer();
        }
        Q_EMIT opened(run_id, r.live);
        Q_EMIT dataChanged();
      },
      [this](const QString& message) { fail(message); });
}

int64_t EngineController::newestLiveRun() {
  const std::vector<RunInfo> runs = store().runs();
  for (auto it = runs.rbegin(); it != runs.rend(); ++it) {
    if (it->live) return it->id;
  }
  return 0;
}

bool EngineController::isFollowing() const {
  return follower_ != nullptr;
}

int64_t EngineController::followedRun() const {
  return follower_ ? follower_->run_id() : 0;
}

void EngineController::stopFollowing() {
  if (!follower_) return;
  follower_.reset();
  follow_buffer_.reset();
  updateTimer();
}

void EngineController::showTrainingRun() {
  if (!training_hidden_) return;
  open_job_.drop();
  stopFollowing();
  RunData back = std::move(parked_);
  parked_ = RunData();
  training_hidden_ = false;
  data_.replace(std::move(back));
  Q_EMIT trainingShown(data_.runId());
  Q_EMIT dataChanged();
}

void EngineController::updateTimer() {
  if (training_active_ || follower_) {
    if (!timer_.isActive()) timer_.start();
  } else {
    timer_.stop();
  }
}

QString EngineController::start(const RunConfig& config) {
  if (isRunning()) return fail(tr("a run is already training"));
  open_job_.drop();  // a stored run still being read is not shown over this one
  stopFollowing();
  parked_ = RunData();
  training_hidden_ = false;
  try {
    RunStore& s = store();
    s.flush();
    trainer_.reset();
    auto buffer = std::make_shared<GuiBuffer>();
    RunStartOptions how;
    how.distinct_name = true;
    how.consumers = {buffer};
    StartedRun run = start_run(s, config, how);
    const RunConfig& c = run.config;
    const int64_t id = run.id;
    buffer_ = std::move(buffer);
    data_.setRun(id, c.name, run_config_json(c));
    trainer_ = std::move(run.trainer);
    steps_total_ = c.steps;
    started_at_ = static_cast<double>(QDateTime::currentMSecsSinceEpoch()) / 1000.0;
    paused_ = false;
    paused_seconds_ = 0;
    train_run_id_ = id;
    trainer_->start();
    training_active_ = true;
    updateTimer();
    Q_EMIT started(id);
    Q_EMIT dataChanged();
    return {};
  } catch (const std::exception& e) {
    return fail(QString::fromStdString(e.what()));
  }
}

void EngineController::pause() {
  if (!isRunning()) return;
  trainer_->pause();
  if (!paused_) paused_at_ = static_cast<double>(QDateTime::currentMSecsSinceEpoch()) / 1000.0;
  paused_ = true;
  trainingData().setStatus(RunStatus::Paused, "");
  Q_EMIT pausedChanged(true);
  Q_EMIT dataChanged();
}

void EngineController::resume() {
  if (!trainer_) return;
  trainer_->resume();
  if (!paused_) return;
  paused_ = false;
  paused_seconds_ += static_cast<double>(QDateTime::currentMSecsSinceEpoch()) / 1000.0 - paused_at_;
  trainingData().setStatus(RunStatus::Running, "");
  Q_EMIT pausedChanged(false);
  Q_EMIT dataChanged();
}

void EngineController::stop() {
  if (trainer_) {
    trainer_->resume();
    trainer_->stop();
  }
}

void EngineController::drain() {
  drainFollower();
  drainTrainer();
}

namespace {

// How a run's batches ended, if they did.
struct Ending {
  bool ended = false;
  RunStatus status = RunStatus::Running;
  std::string message;
};

// Appends the batches to `run`, saying through `say` the notices their events carry (what
// a run says of itself: layers kept in high precision, GEMMs emulated, an update skipped,
// weights written; how it ended comes with finished(), its layers' order is for the tabs).
template <class Say>
Ending take_batches(std::vector<MetricBatch>& batches, RunData& run, Say&& say) {
  Ending end;
  for (MetricBatch& b : batches) {
    for (const RunEvent& e : b.events) {
      RunStatus ending;
      if (!e.message.empty() && e.kind != RunEventKind::Layers && !run_status_of(e.kind, ending))
        say(QString::fromStdString(e.message));
    }
    if (b.final) {
      end.ended = true;
      end.status = b.status;
      end.message = b.message;
    }
    run.append(std::move(b));
  }
  return end;
}

}  // namespace

void EngineController::drainFollower() {
  if (!follow_buffer_) return;
  std::vector<MetricBatch> batches = follow_buffer_->swap_out();
  const auto [ended, status, message] =
      take_batches(batches, data_, [this](const QString& m) { Q_EMIT notice(m); });
  // While a run trains here, progress() is its.
  if (!batches.empty() && !isRunning() && !data_.steps().empty())
    Q_EMIT progress(data_.steps().back().step + 1, steps_total_, -1);
  if (!batches.empty()) Q_EMIT dataChanged();
  if (!ended) return;
  const int64_t id = follower_->run_id();
  stopFollowing();
  data_.setStatus(status, message);
  if (training_active_) {
    Q_EMIT followedRunEnded(id, status, QString::fromStdString(message));
  } else {
    Q_EMIT finished(status, QString::fromStdString(message));
  }
}

void EngineController::drainTrainer() {
  if (!buffer_ || !training_active_) return;
  std::vector<MetricBatch> batches = buffer_->swap_out();
  RunData& run = trainingData();
  auto [ended, status, message] =
      take_batches(batches, run, [this](const QString& m) { Q_EMIT notice(m); });
  if (!batches.empty()) {
    if (!run.steps().empty()) {
      const int64_t done = run.steps().back().step + 1;
      // Time spent training: the pauses do not count (nor does the time since a pause).
      const double now = static_cast<double>(QDateTime::currentMSecsSinceEpoch()) / 1000.0;
      const double elapsed = (paused_ ? paused_at_ : now) - started_at_ - paused_seconds_;
      const double eta =
          done > 0 ? elapsed * static_cast<double>(steps_total_ - done) / static_cast<double>(done)
                   : -1;
      Q_EMIT progress(done, steps_total_, eta);
    }
    if (!training_hidden_) Q_EMIT dataChanged();
  }
  if (!ended) return;
  training_active_ = false;
  updateTimer();
  trainer_->join();
  try {
    store().flush();
  } catch (const std::exception& e) {
    message += (message.empty() ? "" : "; ") + std::string(e.what());
    status = RunStatus::Failed;
  }
  paused_ = false;
  // Ended while another run is shown: that one stays; this one is in the store.
  parked_ = RunData();
  training_hidden_ = false;
  if (status == RunStatus::Failed)
    Q_EMIT failed(tr("run %1 failed: %2").arg(train_run_id_).arg(QString::fromStdString(message)));
  Q_EMIT finished(status, QString::fromStdString(message));
}

}  // namespace fp8wb
