#include "fp8wb/views/run_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>

#include "fp8wb/core/backend_info.h"
#include "fp8wb/views/engine_controller.h"
#include "fp8wb/views/name_choices.h"
#include "fp8wb/views/run_presets.h"

namespace fp8wb {

QStringList RunPanel::presetNames() {
  QStringList n;
  for (const RunPreset& p : run_presets()) n << p.name;
  return n;
}

RunPanel::RunPanel(EngineController* engine, QWidget* parent)
    : QWidget(parent),
      engine_(engine),
      preset_(new QComboBox(this)),
      model_(new QComboBox(this)),
      recipe_(new QComboBox(this)),
      formats_(new QComboBox(this)),
      scaling_(new QComboBox(this)),
      algo_(new QComboBox(this)),
      device_(new QComboBox(this)),
      steps_(new QSpinBox(this)),
      margin_(new QSpinBox(this)),
      window_(new QSpinBox(this)),
      seed_(new QSpinBox(this)),
      stats_(new QSpinBox(this)),
      dmodel_(new QSpinBox(this)),
      layers_(new QSpinBox(this)),
      lr_(new QDoubleSpinBox(this)),
      fprop_(new QCheckBox(tr("fprop"), this)),
      dgrad_(new QCheckBox(tr("dgrad"), this)),
      wgrad_(new QCheckBox(tr("wgrad"), this)),
      fp8_(new QCheckBox(tr("FP8 linear layers"), this)),
      reference_(new QCheckBox(tr("high-precision reference"), this)),
      name_(new QLineEdit(this)),
      error_(new QLabel(this)),
      eta_(new QLabel(this)),
      start_(new QPushButton(tr("Start"), this)),
      pause_(new QPushButton(tr("Pause"), this)),
      stop_(new QPushButton(tr("Stop"), this)),
      progress_(new QProgressBar(this)) {
  preset_->addItems(presetNames());
  model_->addItems({QStringLiteral("gpt"), QStringLiteral("mlp")});
  fill_choices(recipe_, kFloat8Recipes);
  fill_choices(formats_, kFormatPairings);
  scaling_->addItems({QStringLiteral("delayed"), QStringLiteral("current")});
  algo_->addItems({QStringLiteral("max"), QStringLiteral("most_recent")});
  device_->setEditable(true);
  device_->addItem(QStringLiteral("cpu"), QStringLiteral("cpu"));
  const BackendInfo backend = probe_backend();
  for (size_t i = 0; i < backend.cuda_device_names.size(); ++i) {
    const QString id = QStringLiteral("cuda:%1").arg(i);
    device_->addItem(
        id + QStringLiteral("  ") + QString::fromStdString(backend.cuda_device_names[i]), id);
  }
  // Runs go to the first GPU where there is one.
  device_->setCurrentIndex(device_->count() > 1 ? 1 : 0);
  device_->setToolTip(
      backend.cuda_device_names.empty()
          ? tr("No CUDA device here: runs emulate FP8 bit-exactly on the CPU")
          : tr("FP8 GEMMs on the GPU: %1").arg(QString::fromStdString(backend.fp8_gemm)));
  steps_->setRange(1, 100000000);
  margin_->setRange(-64, 64);
  window_->setRange(1, 65536);  // the config's bound (run_config.cpp)
  seed_->setRange(0, 1 << 30);
  stats_->setRange(0, 1000000);
  dmodel_->setRange(8, 16384);
  dmodel_->setSingleStep(16);
  layers_->setRange(1, 256);
  lr_->setDecimals(6);
  lr_->setRange(1e-6, 10);
  lr_->setSingleStep(1e-4);
  auto* form = new QFormLayout;
  form->addRow(tr("Preset"), preset_);
  form->addRow(tr("Name"), name_);
  form->addRow(tr("Model"), model_);
  form->addRow(tr("d_model (GPT)"), dmodel_);
  form->addRow(tr("Layers (GPT)"), layers_);
  form->addRow(fp8_);
  form->addRow(tr("Recipe"), recipe_);
  form->addRow(tr("Formats"), formats_);
  form->addRow(tr("Scaling"), scaling_);
  form->addRow(tr("Margin"), margin_);
  form->addRow(tr("Window"), window_);
  form->addRow(tr("amax algorithm"), algo_);
  auto* gemms = new QHBoxLayout;
  for (QCheckBox* c : {fprop_, dgrad_, wgrad_}) gemms->addWidget(c);
  form->addRow(tr("FP8 GEMMs"), gemms);
  form->addRow(tr("Steps"), steps_);
  form->addRow(tr("Learning rate"), lr_);
  form->addRow(tr("Seed"), seed_);
  form->addRow(tr("Statistics every"), stats_);
  form->addRow(tr("Device"), device_);
  form->addRow(reference_);
  // Every other field of the config, as users would type it in key=value.
  auto* advanced = new QGroupBox(tr("More fields"), this);
  advanced->setCheckable(true);
  advanced->setChecked(false);
  auto* adv_form = new QFormLayout;
  auto* adv_body = new QWidget(advanced);
  adv_body->setLayout(adv_form);
  auto* adv_layout = new QVBoxLayout(advanced);
  adv_layout->addWidget(adv_body);
  adv_body->setVisible(false);
  connect(advanced, &QGroupBox::toggled, adv_body, &QWidget::setVisible);
  advanced_error_ = new QLabel(this);
  advanced_error_->setWordWrap(true);
  advanced_error_->setStyleSheet(QStringLiteral("color: #c62828"));
  for (const char* key :
       {"heads", "context", "batch", "width", "depth", "features", "outlier_channels",
        "outlier_scale", "target_tail", "warmup", "min_lr_ratio", "weight_decay", "grad_clip",
        "dtype", "sqnr_interval", "on_nonfinite", "log_interval"}) {
    auto* edit = new QLineEdit(adv_body);
    const QString k = QString::fromLatin1(key);
    edit->setObjectName(k);
    adv_form->addRow(k, edit);
    advanced_.emplace_back(k, edit);
    connect(edit, &QLineEdit::editingFinished, this,
            [this, k, edit] { setAdvanced(k, edit->text()); });
  }
  adv_form->addRow(advanced_error_);
  form->addRow(advanced);
  error_->setWordWrap(true);
  eta_->setWordWrap(true);  // a followed run's line is long: it wraps, the dock keeps its width
  error_->setStyleSheet(QStringLiteral("color: #c62828"));
  auto* buttons = new QHBoxLayout;
  for (QPushButton* b : {start_, pause_, stop_}) buttons->addWidget(b);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(form);
  layout->addWidget(error_);
  layout->addLayout(buttons);
  layout->addWidget(progress_);
  layout->addWidget(eta_);
  layout->addStretch(1);
  pause_->setEnabled(false);
  stop_->setEnabled(false);

  connect(preset_, &QComboBox::currentTextChanged, this,
          [this](const QString& n) { applyPreset(n); });
  for (QComboBox* c : {model_, recipe_, formats_, scaling_, algo_, device_})
    connect(c, &QComboBox::currentTextChanged, this, &RunPanel::validate);
  for (QSpinBox* s : {steps_, margin_, window_, seed_, stats_, dmodel_, layers_})
    connect(s, &QSpinBox::valueChanged, this, &RunPanel::validate);
  connect(lr_, &QDoubleSpinBox::valueChanged, this, &RunPanel::validate);
  for (QCheckBox* c : {fprop_, dgrad_, wgrad_, fp8_, reference_})
    connect(c, &QCheckBox::toggled, this, &RunPanel::validate);
  connect(name_, &QLineEdit::textChanged, this, &RunPanel::validate);
  connect(start_, &QPushButton::clicked, this, [this] { start(); });
  connect(pause_, &QPushButton::clicked, this, [this] {
    if (engine_->isPaused()) {
      engine_->resume();
      pause_->setText(tr("Pause"));
    } else {
      engine_->pause();
      pause_->setText(tr("Resume"));
    }
  });
  connect(stop_, &QPushButton::clicked, engine_, &EngineController::stop);
  connect(engine_, &EngineController::progress, this,
          [this](qint64 step, qint64 steps, double eta) {
            progress_->setRange(0, static_cast<int>(std::min<qint64>(steps, INT32_MAX)));
            progress_->setValue(static_cast<int>(std::min<qint64>(step, INT32_MAX)));
            if (engine_->isFollowing()) {
              eta_->setText(tr("following run %1 (another process writes it): step %2 of %3")
                                .arg(engine_->followedRun())
                                .arg(step)
                                .arg(steps));
            } else if (eta >= 0) {
              eta_->setText(tr("step %1 of %2, ETA %3 s").arg(step).arg(steps).arg(eta, 0, 'f', 0));
            } else {
              eta_->setText(tr("step %1 of %2").arg(step).arg(steps));
            }
          });
  connect(engine_, &EngineController::finished, this,
          [this](RunStatus status, const QString& message) {
            setRunning(false);
            const QString name = QString::fromLatin1(run_status_name(status));
            eta_->setText(message.isEmpty() ? tr("run %1").arg(name)
                                            : tr("run %1: %2").arg(name, message));
          });
  applyPreset(preset_->currentText());
}

QString RunPanel::presetName() const {
  return preset_->currentText();
}

bool RunPanel::applyPreset(const QString& name) {
  for (const RunPreset& p : run_presets()) {
    if (name != p.name) continue;
    RunConfig c;
    c.name = p.name.toStdString();
    for (const QString& kv : p.overrides) apply_override(c, kv.toStdString());
    c.device = config().device;  // the device chosen stays
    setConfig(c);
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
  setConfig(c);
  return {};
}

void RunPanel::setConfig(const RunConfig& c) {
  {
    base_ = c;
    const QSignalBlocker b1(model_), b2(recipe_), b3(formats_), b4(scaling_), b5(algo_), b6(steps_),
        b7(margin_), b8(window_), b9(seed_), b10(stats_), b11(dmodel_), b12(layers_), b13(lr_),
        b14(fp8_), b15(reference_), b16(name_), b17(fprop_), b18(dgrad_), b19(wgrad_);
    name_->setText(QString::fromStdString(c.name));
    model_->setCurrentText(QString::fromStdString(std::string(model_kind_name(c.model))));
    dmodel_->setValue(c.d_model);
    layers_->setValue(c.layers);
    fp8_->setChecked(c.fp8);
    choose(recipe_, kFloat8Recipes, c.recipe);
    choose(formats_, kFormatPairings, c.formats);
    scaling_->setCurrentText(QString::fromStdString(c.scaling));
    margin_->setValue(c.margin);
    window_->setValue(c.window);
    algo_->setCurrentText(QString::fromStdString(c.amax_algo));
    fprop_->setChecked(c.fprop_fp8);
    dgrad_->setChecked(c.dgrad_fp8);
    wgrad_->setChecked(c.wgrad_fp8);
    steps_->setValue(static_cast<int>(c.steps));
    lr_->setValue(c.lr);
    seed_->setValue(static_cast<int>(c.seed));
    stats_->setValue(c.stats_interval);
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
    validate();
  }
}

RunConfig RunPanel::config() const {
  RunConfig c = base_;
  c.name = name_->text().trimmed().toStdString();
  c.model = model_->currentText() == QLatin1String("mlp") ? ModelKind::Mlp : ModelKind::Gpt;
  c.d_model = dmodel_->value();
  c.layers = layers_->value();
  c.fp8 = fp8_->isChecked();
  c.recipe = chosen(recipe_, kFloat8Recipes);
  c.formats = chosen(formats_, kFormatPairings);
  c.scaling = scaling_->currentText().toStdString();
  c.margin = margin_->value();
  c.window = window_->value();
  c.amax_algo = algo_->currentText().toStdString();
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
  return c;
}

void RunPanel::setSteps(int64_t steps) {
  steps_->setValue(static_cast<int>(steps));
}

QString RunPanel::advancedValue(const QString& key) const {
  const QJsonObject j =
      QJsonDocument::fromJson(QByteArray::fromStdString(run_config_json(base_))).object();
  const QJsonValue v = j.value(key);
  return v.isString() ? v.toString() : QString::number(v.toDouble(), 'g', 12);
}

void RunPanel::showAdvancedValues() {
  for (auto& [key, edit] : advanced_) edit->setText(advancedValue(key));
  advanced_error_->clear();
}

QString RunPanel::setAdvanced(const QString& key, const QString& value) {
  RunConfig c = base_;
  try {
    apply_override(c, (key + QLatin1Char('=') + value.trimmed()).toStdString());
    validate_run_config(c);
  } catch (const std::exception& e) {
    advanced_error_->setText(QString::fromStdString(e.what()));
    return advanced_error_->text();
  }
  base_ = c;
  advanced_error_->clear();
  validate();
  return {};
}

QString RunPanel::validationMessage() const {
  return error_->text();
}

QString RunPanel::statusText() const {
  return eta_->text();
}

void RunPanel::validate() {
  try {
    validate_run_config(config());
    error_->clear();
    start_->setEnabled(!engine_->isRunning());
  } catch (const std::exception& e) {
    error_->setText(QString::fromStdString(e.what()));
    start_->setEnabled(false);
  }
}

void RunPanel::setRunning(bool running) {
  start_->setEnabled(!running && error_->text().isEmpty());
  pause_->setEnabled(running);
  stop_->setEnabled(running);
  pause_->setText(tr("Pause"));
}

QString RunPanel::start() {
  // A "More fields" box whose text was refused, or not taken yet, keeps the run from
  // starting: it would train with another value than the one shown.
  for (auto& [key, edit] : advanced_) {
    if (edit->text() == advancedValue(key)) continue;
    if (const QString err = setAdvanced(key, edit->text()); !err.isEmpty()) {
      error_->setText(tr("More fields: %1").arg(err));
      return error_->text();
    }
  }
  // A failure is shown where every failure is (EngineController::failed).
  if (const QString err = engine_->start(config()); !err.isEmpty()) return err;
  setRunning(true);
  progress_->setValue(0);
  eta_->setText(tr("starting..."));
  return {};
}

}  // namespace fp8wb
