// defines: RunPanel's form and its config: the presets, setConfig() / config(), key=value
// overrides, and the More fields, which show the config's other values and take them back.
#include "fp8wb/views/run_panel/run_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QGroupBox>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QRegularExpression>
#include <QSignalBlocker>
#include <QSpinBox>
#include <memory>
#include <vector>

#include "fp8wb/core/backend/default_formats.h"
#include "fp8wb/core/config/run_config_fields.h"
#include "fp8wb/views/common/name_choices.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/run_panel/run_presets.h"
#include "fp8wb/views/run_panel/script_runner.h"
#include "run_panel/run_panel_fields.h"

namespace fp8wb {

using namespace detail;  // the field labels and number boxes (run_panel_fields.h)

QStringList RunPanel::presetNames() {
  QStringList n;
  for (const RunPreset& p : run_presets()) n << p.name;
  return n;
}

namespace {
// The member of a boolean field (the More fields' boxes to tick).
bool RunConfig::*bool_member(const QString& key) {
  return std::get<bool RunConfig::*>(find_run_config_field(key.toStdString())->member);
}

// A config's value as key=value takes it.
QString value_text(const QJsonValue& v) {
  if (v.isBool()) return v.toBool() ? QStringLiteral("true") : QStringLiteral("false");
  return v.isString() ? v.toString()
                      : QString::number(v.toDouble(), 'g', QLocale::FloatingPointShortest);
}

// A config as a preset names it: without the run's name and the device, which are the
// form's own.
std::string comparable_json(RunConfig c) {
  c.name.clear();
  c.device.clear();
  return run_config_json(c);
}
}  // namespace

QString RunPanel::presetName() const {
  return preset_->currentText();
}

RunConfig RunPanel::presetConfig(const RunPreset& p) const {
  RunConfig c;
  c.name = p.name.toStdString();
  bool names_formats = false;
  for (const QString& kv : p.overrides) {
    apply_override(c, kv.toStdString());
    names_formats = names_formats || kv.startsWith(QLatin1String("formats="));
  }
  // Where the preset names no formats, a GPU's own (hybrid_fnuz on AMD GPUs).
  if (!names_formats) c.formats = default_run_formats(backend_, c);
  return c;
}

bool RunPanel::applyPreset(const QString& name) {
  for (const RunPreset& p : run_presets()) {
    if (name != p.name) continue;
    RunConfig c = presetConfig(p);
    c.device = config().device;  // the device chosen stays
    setConfig(c);
    preset_config_ = comparable_json(config());
    named_preset_ = name;  // the run's name follows the fields changed from here on
    auto_name_ = name;
    if (preset_->currentText() != name) {
      const QSignalBlocker b(preset_);
      preset_->setCurrentText(name);
    }
    return true;
  }
  return false;
}

QString RunPanel::applyOverrides(const QStringList& key_values) {
  RunConfig c = config();
  try {
    for (const QString& kv : key_values) apply_override(c, kv.toStdString());
    validate_run_config(c);
  } catch (const std::exception& e) {
    return QString::fromStdString(e.what());
  }
  const int preset = preset_->currentIndex();
  const QString named = named_preset_, auto_name = auto_name_;
  const bool from_run = name_from_run_;
  setConfig(c);
  named_preset_ = named;
  auto_name_ = auto_name;
  name_from_run_ = from_run;
  {
    const QSignalBlocker b(preset_);
    preset_->setCurrentIndex(preset);
  }
  showWhetherPreset();  // fields changed: "custom"; none (the device alone): still the preset
  return {};
}

void RunPanel::nameAfterSettings() {
  // Only a name the form gave: one typed by hand stays.
  if (named_preset_.isEmpty() || name_->text().trimmed() != auto_name_) return;
  const QString name =
      name_from_run_ ? run_name_from_run(named_preset_, preset_config_, comparable_json(config()))
                     : run_name_after(named_preset_, preset_config_, comparable_json(config()));
  if (name == auto_name_) return;
  auto_name_ = name;
  const QSignalBlocker b(name_);
  name_->setText(name);
}

void RunPanel::showWhetherPreset() {
  const std::string now = comparable_json(config());
  if (preset_->currentIndex() >= 0 && now == preset_config_) {
    nameAfterSettings();
    return;
  }
  // The preset whose config the form holds, whichever way it got there (typed back, an
  // opened run made from it): the box names it; else the placeholder, custom.
  int at = -1;
  for (const RunPreset& p : run_presets()) {
    if (comparable_json(presetConfig(p)) == now) {
      at = preset_->findText(p.name);
      // A name the form gave follows where the preset is of another kind: the Llama
      // preset turned into a GPT is the Tiny GPT preset, not "Llama: model=gpt". (Within
      // one kind, "Delayed scaling: window=1024", the changed fields say it already; a run
      // opened under a name of its own keeps it.)
      const auto stem = [](const QString& n) { return n.section(QLatin1Char(':'), 0, 0); };
      const bool auto_named =
          name_->text().trimmed().isEmpty() ||
          (!name_from_run_ && !named_preset_.isEmpty() && name_->text().trimmed() == auto_name_);
      if (at >= 0 && auto_named && stem(named_preset_) != stem(p.name)) {
        named_preset_ = p.name;
        name_from_run_ = false;
        preset_config_ = now;
        auto_name_ = p.name;
        const QSignalBlocker b(name_);
        name_->setText(p.name);
      }
      break;
    }
  }
  nameAfterSettings();
  if (preset_->currentIndex() == at) return;
  const QSignalBlocker b(preset_);
  preset_->setCurrentIndex(at);
}

void RunPanel::openConfig(const RunConfig& c, const QString& run) {
  // The progress and status shown were of the run before (nothing trains: the form would
  // be the training run's); a run opened live shows its own as it is followed.
  if (!engine_->isRunning() && !runner_->isRunning()) clearProgress();
  setConfig(c);
  opened_run_ = run;
  opened_config_ = comparable_json(config());
  // Its name follows the fields changed from the opened run's settings: a run made from a
  // preset as the preset's does ("Delayed scaling: margin=3", not "<its name> #2"); any
  // other (a sweep trial "trysweep: margin=0 window=1 seed=1", "my run") after its whole
  // name ("trysweep: margin=0 window=1 seed=1, margin=3"), never as if it were another
  // trial of its sweep ("trysweep: margin=3").
  if (!c.name.empty()) {
    // "Delayed scaling: window 1 #2": its name without the number that kept it apart.
    static const QRegularExpression numbered(QStringLiteral(" #\\d+$"));
    named_preset_ = QString::fromStdString(c.name).remove(numbered);
    name_from_run_ = !preset_stem_of(named_preset_);
    preset_config_ = opened_config_;
    auto_name_ = name_->text().trimmed();
  }
  showKept();
  showWhetherPreset();
  if (!keptSettings().isEmpty()) advanced_box_->setChecked(true);
}

QString RunPanel::keptSettings() const {
  const RunConfig c = config();
  const QJsonObject now =
      QJsonDocument::fromJson(QByteArray::fromStdString(run_config_json(c))).object();
  const QJsonObject fresh =
      QJsonDocument::fromJson(QByteArray::fromStdString(run_config_json(RunConfig{}))).object();
  QStringList kept;
  for (const RunConfigField& f : run_config_fields()) {
    const QString key = QString::fromLatin1(f.key.data(), static_cast<int>(f.key.size()));
    const QWidget* w = fieldOf(key);
    if (!w || !advanced_box_->isAncestorOf(w) || !f.applies_to(c.model)) continue;
    if (now.value(key) != fresh.value(key)) kept << key + QLatin1Char('=') + value_text(now[key]);
  }
  return kept.join(QStringLiteral(", "));
}

void RunPanel::showKept() {
  if (opened_run_.isEmpty()) {
    kept_->clear();
    kept_->hide();
    return;
  }
  const QString kept = keptSettings();
  // Fields edited since it was opened: said, never "its settings" alone.
  const QStringList changed = changed_fields(opened_config_, comparable_json(config()));
  QString text;
  if (changed.isEmpty())
    text = kept.isEmpty()
               ? tr("Start trains with %1's settings, all in the form above").arg(opened_run_)
               : tr("Start trains with %1's settings, these of More fields too: %2")
                     .arg(opened_run_, kept);
  else
    text = kept.isEmpty() ? tr("Start trains with %1's settings, changed: %2")
                                .arg(opened_run_, changed.join(QStringLiteral(", ")))
                          : tr("Start trains with %1's settings, changed: %2; these of More "
                               "fields too: %3")
                                .arg(opened_run_, changed.join(QStringLiteral(", ")), kept);
  kept_->setText(text);
  kept_->show();
}

void RunPanel::setConfig(const RunConfig& c) {
  opened_run_.clear();  // openConfig() names the run after
  {
    // The form is no preset's now (applyPreset() names its own after): the box says so,
    // and choosing any preset again loads it.
    const QSignalBlocker b0(preset_);
    preset_->setCurrentIndex(-1);
    named_preset_.clear();  // the name given is the config's own (applyPreset() sets it after)
    name_from_run_ = false;
  }
  {
    base_ = c;
    const QSignalBlocker b1(model_), b2(recipe_), b3(formats_), b4(scaling_), b5(algo_), b6(steps_),
        b7(margin_), b8(window_), b9(seed_), b10(stats_), b11(dmodel_), b12(layers_), b13(lr_),
        b14(fp8_), b15(reference_), b16(name_), b17(fprop_), b18(dgrad_), b19(wgrad_),
        b20(device_);  // all of them: a check half-way would take More fields' old values
    std::vector<std::unique_ptr<QSignalBlocker>> edits;
    for (auto& [key, check] : advanced_checks_) {
      edits.push_back(std::make_unique<QSignalBlocker>(check));
      check->setChecked(c.*bool_member(key));
    }
    for (auto& [key, box] : numbers_)
      edits.push_back(std::make_unique<QSignalBlocker>(box->findChild<QLineEdit*>()));
    name_->setText(QString::fromStdString(c.name));
    model_->setCurrentText(QString::fromStdString(std::string(model_kind_name(c.model))));
    show_value(dmodel_, c.d_model);
    show_value(layers_, c.layers);
    fp8_->setChecked(c.fp8);
    choose(recipe_, kFloat8Recipes, c.recipe);
    choose(formats_, kFormatPairings, c.formats);
    choose(scaling_, kScalingModes, c.scaling);
    show_value(margin_, c.margin);
    show_value(window_, c.window);
    choose(algo_, kAmaxAlgos, c.amax_algo);
    fprop_->setChecked(c.fprop_fp8);
    dgrad_->setChecked(c.dgrad_fp8);
    wgrad_->setChecked(c.wgrad_fp8);
    show_value(steps_, static_cast<double>(c.steps));
    show_value(lr_, c.lr);
    show_value(seed_, static_cast<double>(c.seed));
    show_value(stats_, c.stats_interval);
    reference_->setChecked(c.reference);
    const QString device = QString::fromStdString(c.device);
    int at = -1;
    for (int i = 0; i < device_->count(); ++i) {
      if (device_->itemData(i).toString() == device) at = i;
    }
    if (at >= 0) {
      device_->setCurrentIndex(at);
    } else {
      device_->setEditText(device);
    }
    showAdvancedValues();
  }
  showModelFields();
  validate();
}

RunConfig RunPanel::config() const {
  RunConfig c = base_;
  c.name = name_->text().trimmed().toStdString();
  c.model =
      parse_table_name(kModelKinds, model_->currentText().toStdString()).value_or(ModelKind::Gpt);
  c.d_model = dmodel_->value();
  c.layers = layers_->value();
  c.fp8 = fp8_->isChecked();
  c.recipe = chosen(recipe_, kFloat8Recipes);
  c.formats = chosen(formats_, kFormatPairings);
  c.scaling = chosen(scaling_, kScalingModes);
  c.margin = margin_->value();
  c.window = window_->value();
  c.amax_algo = chosen(algo_, kAmaxAlgos);
  c.fprop_fp8 = fprop_->isChecked();
  c.dgrad_fp8 = dgrad_->isChecked();
  c.wgrad_fp8 = wgrad_->isChecked();
  c.steps = steps_->value();
  c.lr = lr_->value();
  c.seed = static_cast<uint64_t>(seed_->value());
  c.stats_interval = stats_->value();
  // An item reads "cuda:0  NVIDIA H200"; a typed device is taken as it is.
  const QString device = device_->currentText().trimmed();
  const int at = device_->findText(device);
  c.device = (at >= 0 ? device_->itemData(at).toString() : device.section(QLatin1Char(' '), 0, 0))
                 .toStdString();
  c.reference = reference_->isChecked();
  for (const auto& [key, check] : advanced_checks_) c.*bool_member(key) = check->isChecked();
  return c;
}

void RunPanel::setSteps(int64_t steps) {
  show_value(steps_, static_cast<double>(steps));
  validate();
}

QString RunPanel::advancedValue(const QString& key) const {
  const QJsonObject j =
      QJsonDocument::fromJson(QByteArray::fromStdString(run_config_json(base_))).object();
  return value_text(j.value(key));
}

void RunPanel::showAdvancedValues() {
  for (auto& [key, edit] : advanced_) {
    const QSignalBlocker b(edit);
    edit->setText(advancedValue(key));
  }
}

QString RunPanel::setAdvanced(const QString& key, const QString& value) {
  for (auto& [k, check] : advanced_checks_) {
    if (k != key) continue;
    // Read as a config reads it (true/false), then ticked or not.
    RunConfig c = config();
    try {
      apply_override(c, (key + QLatin1Char('=') + value.trimmed()).toStdString());
    } catch (const std::exception& e) {
      return readable(e);
    }
    check->setChecked(c.*bool_member(key));
    return problems_.value(check);
  }
  for (auto& [k, edit] : advanced_) {
    if (k != key) continue;
    edit->setText(value);  // validate() takes it, or marks the box
    return problems_.value(edit);
  }
  return tr("%1 is not one of the fields").arg(key);
}

}  // namespace fp8wb
