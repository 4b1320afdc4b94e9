// defines: RunPanel: the panel that starts runs (presets, a form for the config with
// inline validation, Start / Pause / Stop, progress and the time left). The form scrolls;
// the message, the buttons and the progress stay below it, in view at any height. A field
// the config refuses is marked, named beside Start, and keeps Start disabled.
#pragma once

#include <QHash>
#include <QStringList>
#include <QWidget>
#include <utility>
#include <vector>

#include "fp8wb/core/backend/backend_info.h"
#include "fp8wb/core/config/run_config.h"
#include "fp8wb/views/run_panel/script_runner.h"

class QLabel;
class QComboBox;
class QSpinBox;
class QDoubleSpinBox;
class QCheckBox;
class QLineEdit;
class QPushButton;
class QProgressBar;
class QScrollArea;
class QGroupBox;
class QAbstractSpinBox;
class QFormLayout;
class QPlainTextEdit;

namespace fp8wb {

class EngineController;

struct RunPreset;
class RunPanel : public QWidget {
  Q_OBJECT
 public:
  RunPanel(EngineController* engine, QWidget* parent = nullptr);
  // The presets' names, in order (run_presets.h).
  static QStringList presetNames();
  QString presetName() const;
  // Loads a preset into the form; false for an unknown name.
  bool applyPreset(const QString& name);
  RunConfig config() const;  // the form's contents
  void setSteps(int64_t steps);
  // Sets fields of the form as key=value would in a config (device=cuda:0, d_model=512);
  // returns the error naming the field, or empty.
  QString applyOverrides(const QStringList& key_values);
  void setConfig(const RunConfig& c);  // fills the form
  // Fills the form with an opened run's settings (`run`: "run 5"): More fields unfolds
  // where it holds any of them, and a line beside Start names them (keptSettings()), as
  // Start trains with every one of them, not only those of the form above.
  void openConfig(const RunConfig& c, const QString& run);
  // The form's settings that More fields holds for the model chosen and that differ from a
  // new config's: "drift=0.5, drift_period=50"; empty where none.
  QString keptSettings() const;
  // What keeps Start disabled, naming the field as the form labels it; empty when none.
  QString validationMessage() const;
  QString statusText() const;
  // Starts the form's run; returns an error message or empty.
  QString start();
  // Sets one of the fields the main form does not show (batch, context, ...), as
  // key=value would (the box shows it); returns the error it is marked with, or empty.
  QString setAdvanced(const QString& key, const QString& value);
  // "Python script…": asks for the script, its arguments and the interpreter (remembered),
  // then startScript().
  void chooseScript();
  // Runs a user's script with FP8WB_DB (the open database) and FP8WB_RUN_NAME set, opens
  // the run its fp8wb.watch() creates (followed live), shows its stderr below the buttons;
  // Stop sends it SIGINT, then SIGTERM after 10 s. Returns why it did not start, or empty.
  QString startScript(const ScriptLaunch& launch);
  ScriptRunner* scriptRunner() const { return runner_; }

 protected:
  // Only a focused field takes the wheel; otherwise the wheel scrolls the form. The form's
  // area is never narrower than the form (its minimum follows the form's).
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  // The constructor's steps, in order (run_panel.cpp; connectScript(): run_panel_script.cpp).
  void fillChoices();
  void nameFields();
  QFormLayout* buildForm();
  void addMoreFields(QFormLayout* form);
  void buildBody(QFormLayout* form);
  void connectFields();
  void connectRunControl();
  void connectScript();
  void connectEngine();
  void validate();
  void setRunning(bool running);
  // Start: enabled where nothing trains, the form is valid and the database can be
  // written; its tooltip says why not.
  void updateStart(bool running);
  void showAdvancedValues();
  // Only the fields of the model kind chosen: a GPT's width and layers, or an MLP's.
  void showModelFields();
  void showProgress();
  // No progress and no status line (another run opened, another database).
  void clearProgress();
  // A form that is no longer the preset's config (a field changed, overrides taken): the
  // preset box names none ("custom"). Its name and device do not count.
  void showWhetherPreset();
  // The run's name, while it is the one the form gave, follows the fields changed from
  // the preset last chosen (run_name_after()).
  void nameAfterSettings();
  // Takes the More fields' values that the config accepts into base_; the others are
  // problems of their box.
  void takeAdvanced(QHash<QWidget*, QString>& problems);
  QWidget* fieldOf(const QString& key) const;       // the form's widget of a config key
  QString advancedValue(const QString& key) const;  // as the box shows base_'s value
  // The fields that the form above does not hold (run_config_fields.h), by key: booleans
  // a box to tick, the others their text as key=value reads it.
  std::vector<std::pair<QString, QLineEdit*>> advanced_;
  std::vector<std::pair<QString, QCheckBox*>> advanced_checks_;
  std::vector<std::pair<QString, QAbstractSpinBox*>> numbers_;  // the number boxes, by key
  std::vector<QWidget*> fields_;       // every field, in the form's order (for the first problem)
  QHash<QWidget*, QString> problems_;  // what each marked field is refused for
  QString message_;                    // validationMessage()
  QGroupBox* advanced_box_;
  // The fields of one model kind (true: the GPT's) and the form that holds each.
  std::vector<std::pair<QWidget*, QString>> model_fields_;  // the model kinds, by name
  QFormLayout *form_ = nullptr, *advanced_form_ = nullptr;
  EngineController* engine_;
  RunConfig base_;             // the preset's fields that the form does not show (batch, widths...)
  BackendInfo backend_;        // for a preset's formats on a GPU where it names none
  std::string preset_config_;  // the named preset's config as the form held it (no name, device)
  QString named_preset_;       // the preset last chosen, while the form started from it
  QString auto_name_;          // the run name the form last gave (not typed by hand)
  bool name_from_run_ = false;  // named_preset_ is an opened run's own name (run_name_from_run())
  QComboBox *preset_, *model_, *recipe_, *formats_, *scaling_, *algo_, *device_;
  QSpinBox *steps_, *margin_, *window_, *seed_, *stats_, *dmodel_, *layers_;
  QDoubleSpinBox* lr_;
  QCheckBox *fprop_, *dgrad_, *wgrad_, *fp8_, *reference_;
  QLineEdit* name_;
  QLabel *error_, *eta_;
  QLabel* kept_ = nullptr;     // the opened run's settings Start keeps (openConfig())
  QString opened_run_;         // "run 5" while the form holds an opened run's settings
  std::string opened_config_;  // its config as the form held it when opened (no name, device)
  // A preset's config as applyPreset() fills the form (its formats this machine's where it
  // names none).
  RunConfig presetConfig(const RunPreset& p) const;
  void showKept();
  QPushButton *start_, *pause_, *stop_, *script_;
  QPlainTextEdit* script_log_;  // the script's stderr
  ScriptRunner* runner_;
  void updateScriptButtons();
  QProgressBar* progress_;
  QScrollArea* form_area_ = nullptr;  // scrolls the form up and down, never sideways
  qint64 done_ = 0, total_ = 0;       // the last progress: steps done, of
  double eta_seconds_ = -1;
};

}  // namespace fp8wb
