// defines: CheckpointEvalDialog: what FP8 does to a Hugging Face checkpoint's loss, in a
// window (`fp8wb eval` for the Checkpoint tab): a token file, how many windows, the
// recipes; evaluate_checkpoint() on a pool thread with progress and cancel; the losses
// side by side, and each FP8 layer's output SQNR.
#pragma once

#include <QDialog>
#include <QString>
#include <atomic>
#include <memory>

#include "fp8wb/views/common/background_job.h"

class QCheckBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace fp8wb {

struct EvalResult;

class CheckpointEvalDialog : public QDialog {
  Q_OBJECT
 public:
  // hf_dir: the checkpoint's folder (its config.json and weights).
  explicit CheckpointEvalDialog(const QString& hf_dir, QWidget* parent = nullptr);
  ~CheckpointEvalDialog() override;

  // Whether `path` (a checkpoint file or folder) has a config.json that the evaluation
  // takes: its folder then, else empty.
  static QString hfFolderOf(const QString& path);

  void setTokenFile(const QString& path);
  void setWindows(int n);
  void setContext(int tokens);  // 0: the config's max_position_embeddings, at most 1024
  void start();                 // what Evaluate does
  bool running() const;
  QTableWidget* losses() const { return losses_; }
  // Why recipes kept layers in high precision, wrapped under the losses ("" where none did).
  QString keptNoteText() const;
  QTableWidget* layers() const { return layers_; }
  QString statusText() const;

 signals:
  void evaluationEnded(bool ok);

 private:
  void show_result(const EvalResult& r);
  void set_running(bool on);

  QString hf_;
  QLineEdit* data_;
  QSpinBox* windows_;
  QSpinBox* context_;
  QCheckBox* tensorwise_;
  QCheckBox* rowwise_;
  QCheckBox* blockwise_;
  QCheckBox* mx_;
  QPushButton* evaluate_;
  QPushButton* cancel_;
  QProgressBar* progress_;
  QLabel* status_;
  QTableWidget* losses_;
  QLabel* kept_note_;  // under the losses: why each recipe kept layers in high precision
  QTableWidget* layers_;
  std::shared_ptr<std::atomic<bool>> cancelled_;
  BackgroundJob job_;  // last: destroyed first, waiting for the work that uses the above
};

}  // namespace fp8wb
