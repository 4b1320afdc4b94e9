#include "fp8wb/views/common/training_run_button.h"

#include "fp8wb/views/run_panel/engine_controller.h"

namespace fp8wb {

TrainingRunButton::TrainingRunButton(EngineController* engine, QWidget* parent)
    : QToolButton(parent), engine_(engine) {
  setObjectName(QStringLiteral("backToTrainingRun"));
  setAutoRaise(true);
  setToolTip(tr("The run training here: show it in the tabs again"));
  connect(this, &QToolButton::clicked, engine_, &EngineController::showTrainingRun);
  connect(engine_, &EngineController::progress, this,
          [this](qint64 done, qint64 steps, double) { update(done, steps); });
  connect(engine_, &EngineController::started, this, [this] { update(0, 0); });
  connect(engine_, &EngineController::opened, this, [this] { update(); });
  connect(engine_, &EngineController::trainingShown, this, [this] { update(); });
  connect(engine_, &EngineController::finished, this, [this] { update(); });
  update();
}

void TrainingRunButton::update(qint64 done, qint64 steps) {
  if (done >= 0 && engine_->isRunning()) {
    done_ = done;
    steps_ = steps;
  }
  const bool hidden_run = engine_->isRunning() && !engine_->showsTrainingRun();
  setVisible(hidden_run);
  if (!hidden_run) return;
  setText(
      steps_ > 0
          ? tr("Back to run %1 (%2/%3 steps)").arg(engine_->trainingRunId()).arg(done_).arg(steps_)
          : tr("Back to run %1").arg(engine_->trainingRunId()));
}

}  // namespace fp8wb
