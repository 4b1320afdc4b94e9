// SweepController (sweep_controller.h): a sweep's runner on a pool thread, its trials'
// ends and its own end handed to the GUI thread as typed signals.
#include "fp8wb/views/sweeps/sweep_controller.h"

#include <exception>
#include <utility>

#include "fp8wb/core/store/run_store.h"
#include "sweeps/sweeps_tab_internal.h"

namespace fp8wb {

SweepController::SweepController(EngineController* engine, QObject* parent)
    : QObject(parent), engine_(engine) {
  qRegisterMetaType<fp8wb::SweepOutcome>("fp8wb::SweepOutcome");
  qRegisterMetaType<fp8wb::RunStatus>("fp8wb::RunStatus");
}

SweepController::~SweepController() {
  stop();
  job_.wait();  // its trials write through the engine's store
}

QString SweepController::fail(const QString& message) {
  Q_EMIT failed(message);
  return message;
}

QString SweepController::start(const SweepSpec& spec, int parallel) {
  if (busy()) return fail(tr("a sweep is running: stop it before starting another"));
  std::shared_ptr<SweepRunner> runner;
  try {
    // Expands and checks every trial before anything is stored.
    runner = std::make_shared<SweepRunner>(spec, engine_->store(), parallel);
  } catch (const std::exception& e) {
    return fail(QString::fromStdString(e.what()));
  }
  runner_ = runner;
  sweep_id_ = runner->sweepId();
  spec_ = spec;
  trials_ = runner->trials();
  ended_ = 0;
  const int64_t id = sweep_id_;
  const int total = static_cast<int>(trials_.size());
  const std::string path = engine_->databasePath().toStdString();
  job_.run(
      [this, runner, path, id, total] {
        // The controller outlives this work (its destructor waits for it); what the
        // trials say reaches it queued, before the job's own end.
        runner->run([this, id, total](size_t i, RunStatus st) {
          QMetaObject::invokeMethod(
              this,
              [this, id, total, i, st] {
                ++ended_;
                Q_EMIT trialFinished(id, static_cast<int>(i), st);
                Q_EMIT progress(id, ended_, total);
              },
              Qt::QueuedConnection);
        });
        sweeps_detail::SweepRead r = sweeps_detail::read_sweep(path, id);
        SweepOutcome o;
        o.sweep_id = id;
        o.status = r.status;
        o.status_text = std::move(r.status_text);
        o.spec = std::move(r.spec);
        o.points = std::move(r.points);
        return o;
      },
      [this](SweepOutcome o) { Q_EMIT finished(o); },
      [this, id](const QString& message) {
        fail(message);
        SweepOutcome o;
        o.sweep_id = id;
        o.failed = true;
        o.status_text = "failed";
        o.error = message.toStdString();
        o.spec = spec_;
        Q_EMIT finished(o);
      });
  Q_EMIT started(id, total);
  // Grid values dropped as another spelling of a number given before (lr=0.1,1e-1).
  for (const SweepAxis& a : spec.axes) {
    for (const std::string& n : merged_value_notes(a)) Q_EMIT notice(QString::fromStdString(n));
  }
  return {};
}

void SweepController::stop() {
  if (runner_) runner_->stop();
}

}  // namespace fp8wb
