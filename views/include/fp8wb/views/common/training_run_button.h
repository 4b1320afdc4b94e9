// defines: TrainingRunButton: the status bar's way back to the run training here while
// another run is shown ("Back to run 7 (120/300 steps)"); hidden otherwise.
#pragma once

#include <QToolButton>

namespace fp8wb {

class EngineController;

class TrainingRunButton : public QToolButton {
  Q_OBJECT
 public:
  explicit TrainingRunButton(EngineController* engine, QWidget* parent = nullptr);

 private:
  void update(qint64 done = -1, qint64 steps = -1);
  EngineController* engine_;
  qint64 done_ = 0, steps_ = 0;
};

}  // namespace fp8wb
