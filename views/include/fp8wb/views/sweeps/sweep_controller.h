// defines: SweepOutcome, SweepController: the one way the views run a sweep. The
// controller owns the SweepRunner and the pool thread its trials run from (a
// BackgroundJob), writes through the EngineController's store, and says what happens in
// typed signals on the GUI thread: started, each trial that ends (trialFinished,
// progress), the sweep's end with its points (finished), and every failure (failed: a
// spec refused, naming the field; a sweep that fails). No widget: the Sweeps tab shows
// what it says, tests drive it alone.
#pragma once

#include <QMetaType>
#include <QObject>
#include <QString>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fp8wb/core/sweep/sweep.h"
#include "fp8wb/views/common/background_job.h"
#include "fp8wb/views/run_panel/engine_controller.h"

namespace fp8wb {

// What a sweep started by the controller ended with, read from the store on the
// controller's thread once its trials ended (the GUI thread never waits on the store).
struct SweepOutcome {
  int64_t sweep_id = 0;
  // The sweep's stored status (Finished: every trial ended; Stopped: stop() or a trial
  // left to run); `failed` where it failed, `error` saying why (after failed()).
  SweepStatus status = SweepStatus::Stopped;
  bool failed = false;
  std::string status_text;  // as shown: sweep_status_text(), or "failed"
  std::string error;
  SweepSpec spec;                  // its grid, as stored
  std::vector<SweepPoint> points;  // its grid points' figures (none where it failed)
};

class SweepController : public QObject {
  Q_OBJECT
 public:
  // Sweeps go to `engine`'s database (EngineController::store()); the engine outlives
  // the controller.
  explicit SweepController(EngineController* engine, QObject* parent = nullptr);
  // Stops the sweep and waits for its trials to return (they write through the engine's
  // store).
  ~SweepController() override;

  // Stores a new sweep of `spec` and runs its trials on a pool thread, `parallel` side by
  // side (0: SweepRunner's choice). Returns an error message, also said by failed(): a
  // sweep still running, a database that cannot be opened, a spec the grid refuses (an
  // unknown field, a value out of range: naming the field and what it takes); nothing is
  // stored then. Else empty: started() has been emitted, then a notice() for each grid
  // value dropped as another spelling of a number given before (merged_value_notes()),
  // and finished() follows once the trials end.
  QString start(const SweepSpec& spec, int parallel = 0);
  // Stops the trials running (each ends "stopped") and starts no more: finished() follows,
  // status "stopped".
  void stop();
  // A sweep's trials are running (or its end is still to be said).
  bool busy() const { return job_.busy(); }
  // The sweep started last, its spec and trials (in the order trialFinished() numbers
  // them); 0 and empty before any.
  int64_t sweepId() const { return sweep_id_; }
  const SweepSpec& spec() const { return spec_; }
  const std::vector<SweepTrial>& trials() const { return trials_; }

 Q_SIGNALS:
  void started(qint64 sweep_id, int trials);
  // Trial `index` (of trials()) ended, how (finished, diverged, stopped, failed).
  void trialFinished(qint64 sweep_id, int index, fp8wb::RunStatus status);
  // `ended` of the sweep's `trials` have ended so far.
  void progress(qint64 sweep_id, int ended, int trials);
  // The sweep has ended: its status and points (SweepOutcome).
  void finished(const fp8wb::SweepOutcome& outcome);
  // A sweep refused by start(), or one that failed (a trial that could not start, the
  // database unreadable after it); for a started sweep, finished() follows.
  void failed(const QString& message);
  // What start() says without refusing: grid values dropped as equal to one before.
  void notice(const QString& message);

 private:
  QString fail(const QString& message);
  EngineController* engine_;
  std::shared_ptr<SweepRunner> runner_;
  int64_t sweep_id_ = 0;
  SweepSpec spec_;
  std::vector<SweepTrial> trials_;
  int ended_ = 0;
  BackgroundJob job_{this};  // last: its destructor waits for the trials before the rest goes
};

}  // namespace fp8wb

Q_DECLARE_METATYPE(fp8wb::SweepOutcome)
