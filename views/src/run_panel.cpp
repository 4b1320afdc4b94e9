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
#include <QLocale>
#include <QPalette>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QScrollArea>
#include <QScrollBar>
#include <QSpinBox>
#include <QVBoxLayout>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>
#include <optional>
#include <type_traits>

#include "fp8wb/core/backend_info.h"
#include "fp8wb/core/default_formats.h"
#include "fp8wb/views/engine_controller.h"
#include "fp8wb/views/name_choices.h"
#include "fp8wb/views/run_presets.h"

namespace fp8wb {
namespace {

// The config's fields as people read them (form labels and messages); the key, as a
// config file or --set spells it, is each field's tooltip.
struct FieldLabel {
  const char* key;
  const char* label;
};
constexpr FieldLabel kFieldLabels[] = {
    {"name", "Name"},
    {"model", "Model"},
    {"d_model", "Model width (GPT)"},
    {"layers", "Layers (GPT)"},
    {"heads", "Attention heads (GPT)"},
    {"context", "Context length (GPT)"},
    {"width", "Hidden width (MLP)"},
    {"depth", "Depth (MLP)"},
    {"features", "Features (MLP)"},
    {"outlier_channels", "Outlier channels (MLP)"},
    {"outlier_scale", "Outlier scale (MLP)"},
    {"target_tail", "Target noise tail (MLP)"},
    {"drift", "Input drift"},
    {"drift_period", "Drift period"},
    {"batch", "Batch size"},
    {"steps", "Steps"},
    {"lr", "Learning rate"},
    {"warmup", "Warm-up steps"},
    {"min_lr_ratio", "Final learning rate ratio"},
    {"weight_decay", "Weight decay"},
    {"grad_clip", "Gradient clipping norm (0: off)"},
    {"seed", "Seed"},
    {"device", "Device"},
    {"dtype", "Activation dtype"},
    {"fp8", "FP8 linear layers"},
    {"recipe", "Recipe"},
    {"formats", "Formats"},
    {"scaling", "Scaling"},
    {"margin", "Margin"},
    {"window", "Window"},
    {"amax_algo", "Amax algorithm"},
    {"fprop_fp8", "FP8 GEMMs"},
    {"dgrad_fp8", "FP8 GEMMs"},
    {"wgrad_fp8", "FP8 GEMMs"},
    {"stats_interval", "Statistics interval"},
    {"sqnr_interval", "SQNR interval"},
    {"reference", "High-precision reference"},
    {"on_nonfinite", "On a non-finite loss"},
    {"log_interval", "Logging interval"},
    {"weights", "Weights file"},
    {"amax_reduction", "Amax reduction across ranks"},
    {"rank_timeout", "Rank timeout (seconds)"},
};

QString field_label(const QString& key) {
  for (const FieldLabel& f : kFieldLabels) {
    if (key == QLatin1String(f.key)) return RunPanel::tr(f.label);
  }
  return key;
}

const QRegularExpression& field_pattern() {
  static const QRegularExpression re(QStringLiteral("^config field '([^']*)': "));
  return re;
}

// The key a config message names ("config field 'heads': ..."), or empty.
QString field_key(const QString& message) {
  return field_pattern().match(message).captured(1);
}

// A config message with the field as the form labels it: "Attention heads (GPT): must be
// >= 1, not -5".
QString readable(const std::exception& e) {
  QString m = QString::fromStdString(e.what());
  const QRegularExpressionMatch match = field_pattern().match(m);
  if (!match.hasMatch()) return m;
  QString why = m.mid(match.capturedLength());
  // Other fields the reason names, in words too ("5 does not divide model width (GPT) 64").
  for (const FieldLabel& f : kFieldLabels) {
    const QString key = QString::fromLatin1(f.key);
    if (!key.contains(QLatin1Char('_'))) continue;
    QString label = field_label(key);
    if (label.size() > 1 && label[1].isLower()) label[0] = label[0].toLower();
    why.replace(QRegularExpression(QStringLiteral("\\b%1\\b").arg(key)), label);
  }
  return field_label(match.captured(1)) + QStringLiteral(": ") + why;
}

// A number box that never rewrites what was typed: text that is not a number within the
// box's bounds (the config's) stays as typed and the box is refused, so that the panel
// names it and keeps Start disabled, instead of being clamped, cut or dropped.
template <class Box>
class NumberBox : public Box {
 public:
  explicit NumberBox(QWidget* parent) : Box(parent) {
    // Once left, a value reads as the box writes it ("never" for 0 where 0 means that).
    QObject::connect(this, &QAbstractSpinBox::editingFinished, this, [this] {
      if (!refused()) this->lineEdit()->setText(shown(this->value()));
    });
  }
  bool refused() const { return !refused_.isNull(); }
  // What 0 means, shown for it and read back as 0 ("never").
  void setZeroText(const QString& text) { zero_text_ = text; }
  // Above the minimum, not at it (a learning rate).
  void setMinimumExcluded(bool excluded) { minimum_excluded_ = excluded; }
  void showValue(double v) {
    refused_ = QString();
    this->setValue(static_cast<decltype(this->value())>(v));
    this->lineEdit()->setText(shown(this->value()));
  }
  QString bounds() const {
    return QStringLiteral("%1%2, %3]")
        .arg(minimum_excluded_ ? QLatin1Char('(') : QLatin1Char('['))
        .arg(QLocale::c().toString(static_cast<double>(this->minimum()), 'g', 12))
        .arg(QLocale::c().toString(static_cast<double>(this->maximum()), 'g', 12));
  }

 protected:
  QValidator::State validate(QString& text, int&) const override {
    const bool ok = parse(text).has_value();
    refused_ = ok ? QString() : text;
    return ok ? QValidator::Acceptable : QValidator::Intermediate;
  }
  void fixup(QString&) const override {}  // what was typed stays
  void stepBy(int steps) override {
    refused_ = QString();
    Box::stepBy(steps);
  }
  std::optional<double> parse(const QString& text) const {
    const QString t = text.trimmed();
    if (!zero_text_.isEmpty() && t.compare(zero_text_, Qt::CaseInsensitive) == 0) return 0.0;
    bool ok = false;
    const double v = QLocale::c().toDouble(t, &ok);
    if (!ok || !(v >= this->minimum() && v <= this->maximum())) return std::nullopt;
    if (minimum_excluded_ && v == this->minimum()) return std::nullopt;
    if (std::is_integral_v<decltype(this->value())> && v != std::floor(v)) return std::nullopt;
    return v;
  }
  QString shown(double v) const {
    if (!refused_.isNull()) return refused_;
    if (v == 0 && !zero_text_.isEmpty()) return zero_text_;
    return QLocale::c().toString(v, 'g', QLocale::FloatingPointShortest);
  }
  mutable QString refused_;  // the text typed, while it is not a value
  QString zero_text_;
  bool minimum_excluded_ = false;
};

class IntBox : public NumberBox<QSpinBox> {
 public:
  using NumberBox::NumberBox;

 protected:
  int valueFromText(const QString& text) const override {
    return static_cast<int>(parse(text).value_or(value()));
  }
  QString textFromValue(int v) const override { return shown(v); }
};

class RealBox : public NumberBox<QDoubleSpinBox> {
 public:
  explicit RealBox(QWidget* parent) : NumberBox(parent) {
    setDecimals(15);  // the value as typed, not rounded to the box's decimals
  }

 protected:
  double valueFromText(const QString& text) const override { return parse(text).value_or(value()); }
  QString textFromValue(double v) const override { return shown(v); }
  void stepBy(int steps) override {
    refused_ = QString();
    // 0.003 - 0.0001 reads 0.0029, not 0.0029000000000000002.
    const QLocale c = QLocale::c();
    setValue(c.toDouble(c.toString(value() + steps * singleStep(), 'g', 12)));
  }
};

bool box_refused(const QAbstractSpinBox* b) {
  if (auto* i = dynamic_cast<const IntBox*>(b)) return i->refused();
  if (auto* r = dynamic_cast<const RealBox*>(b)) return r->refused();
  return false;
}

QString box_bounds(const QAbstractSpinBox* b) {
  if (auto* i = dynamic_cast<const IntBox*>(b)) return i->bounds();
  if (auto* r = dynamic_cast<const RealBox*>(b)) return r->bounds();
  return {};
}

void show_value(QAbstractSpinBox* b, double v) {
  if (auto* i = dynamic_cast<IntBox*>(b)) i->showValue(v);
  if (auto* r = dynamic_cast<RealBox*>(b)) r->showValue(v);
}

// "about 3 min 20 s left"
QString time_left(double seconds) {
  const qint64 t = std::max<qint64>(0, qRound64(seconds));
  if (t < 60) return RunPanel::tr("about %1 s left").arg(t);
  if (t < 600) {
    return t % 60 ? RunPanel::tr("about %1 min %2 s left").arg(t / 60).arg(t % 60)
                  : RunPanel::tr("about %1 min left").arg(t / 60);
  }
  if (t < 3600) return RunPanel::tr("about %1 min left").arg((t + 30) / 60);  // no seconds
  const qint64 m = (t % 3600) / 60;
  return m ? RunPanel::tr("about %1 h %2 min left").arg(t / 3600).arg(m)
           : RunPanel::tr("about %1 h left").arg(t / 3600);
}

}  // namespace

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
      steps_(new IntBox(this)),
      margin_(new IntBox(this)),
      window_(new IntBox(this)),
      seed_(new IntBox(this)),
      stats_(new IntBox(this)),
      dmodel_(new IntBox(this)),
      layers_(new IntBox(this)),
      lr_(new RealBox(this)),
      fprop_(new QCheckBox(tr("fprop"), this)),
      dgrad_(new QCheckBox(tr("dgrad"), this)),
      wgrad_(new QCheckBox(tr("wgrad"), this)),
      fp8_(new QCheckBox(field_label(QStringLiteral("fp8")), this)),
      reference_(new QCheckBox(field_label(QStringLiteral("reference")), this)),
      amax_reduction_(new QCheckBox(field_label(QStringLiteral("amax_reduction")), this)),
      name_(new QLineEdit(this)),
      error_(new QLabel(this)),
      eta_(new QLabel(this)),
      start_(new QPushButton(tr("Start"), this)),
      pause_(new QPushButton(tr("Pause"), this)),
      stop_(new QPushButton(tr("Stop"), this)),
      progress_(new QProgressBar(this)) {
  preset_->addItems(presetNames());
  // Shown while the form holds what no preset gave it (an opened run's settings).
  preset_->setPlaceholderText(tr("(not a preset: the settings of an opened run)"));
  model_->addItems({QStringLiteral("gpt"), QStringLiteral("mlp")});
  fill_choices(recipe_, kFloat8Recipes);
  fill_choices(formats_, kFormatPairings);
  scaling_->addItems({QStringLiteral("delayed"), QStringLiteral("current")});
  algo_->addItems({QStringLiteral("max"), QStringLiteral("most_recent")});
  device_->setEditable(true);
  device_->addItem(QStringLiteral("cpu"), QStringLiteral("cpu"));
  const BackendInfo backend = probe_backend();
  backend_ = backend;
  for (size_t i = 0; i < backend.cuda_device_names.size(); ++i) {
    const QString id = QStringLiteral("cuda:%1").arg(i);
    device_->addItem(
        id + QStringLiteral("  ") + QString::fromStdString(backend.cuda_device_names[i]), id);
  }
  // Runs go to the first GPU where there is one.
  device_->setCurrentIndex(device_->count() > 1 ? 1 : 0);
  // The config's bounds (run_config.cpp); the seed's box stops at the largest int.
  steps_->setRange(1, 1000000000);
  margin_->setRange(-64, 64);
  window_->setRange(1, 65536);
  seed_->setRange(0, INT32_MAX);
  stats_->setRange(0, 1000000000);
  static_cast<IntBox*>(stats_)->setZeroText(tr("never"));
  dmodel_->setRange(8, 8192);
  dmodel_->setSingleStep(16);
  layers_->setRange(1, 256);
  lr_->setRange(0, 10);
  static_cast<RealBox*>(lr_)->setMinimumExcluded(true);
  lr_->setSingleStep(1e-4);
  numbers_ = {{QStringLiteral("d_model"), dmodel_}, {QStringLiteral("layers"), layers_},
              {QStringLiteral("margin"), margin_},  {QStringLiteral("window"), window_},
              {QStringLiteral("steps"), steps_},    {QStringLiteral("lr"), lr_},
              {QStringLiteral("seed"), seed_},      {QStringLiteral("stats_interval"), stats_}};
  const std::pair<QWidget*, const char*> keys[] = {
      {preset_, "preset"},        {name_, "name"},       {model_, "model"},
      {dmodel_, "d_model"},       {layers_, "layers"},   {fp8_, "fp8"},
      {recipe_, "recipe"},        {formats_, "formats"}, {scaling_, "scaling"},
      {margin_, "margin"},        {window_, "window"},   {algo_, "amax_algo"},
      {fprop_, "fprop_fp8"},      {dgrad_, "dgrad_fp8"}, {wgrad_, "wgrad_fp8"},
      {steps_, "steps"},          {lr_, "lr"},           {seed_, "seed"},
      {stats_, "stats_interval"}, {device_, "device"},   {reference_, "reference"}};
  for (const auto& [w, key] : keys) {
    w->setObjectName(QString::fromLatin1(key));
    fields_.push_back(w);
  }
  name_->setObjectName(QStringLiteral("run-name"));  // "name" is any widget's default
  // Each field's tooltip: the key a config file or --set spells (and what it means).
  for (const auto& [w, key] : keys) w->setToolTip(QString::fromLatin1(key));
  preset_->setToolTip(tr("Fills the form; every field can be changed after"));
  stats_->setToolTip(
      tr("stats_interval: steps between full per-layer statistics (amax, "
         "scale, underflow, saturation, histograms); 0 or \"never\": never, and "
         "the Scaling and Quantization tabs stay empty"));
  margin_->setToolTip(
      tr("margin: the scale leaves 2^margin of headroom below the format's "
         "largest value"));
  window_->setToolTip(tr("window: steps of amax history that delayed scaling keeps"));
  device_->setToolTip(
      backend.cuda_device_names.empty()
          ? tr("device: no CUDA device here: runs emulate FP8 bit-exactly on the CPU")
          : tr("device: FP8 GEMMs on the GPU: %1").arg(QString::fromStdString(backend.fp8_gemm)));
  // The form fits a narrow dock: combo boxes shrink below their longest entry, and a row
  // whose field would not fit beside its label goes below it.
  for (QComboBox* c : {preset_, model_, recipe_, formats_, scaling_, algo_, device_}) {
    c->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    c->setMinimumContentsLength(8);
  }
  auto* form = new QFormLayout;
  form->setRowWrapPolicy(QFormLayout::WrapLongRows);
  form->addRow(tr("Preset"), preset_);
  form->addRow(field_label(QStringLiteral("name")), name_);
  form->addRow(field_label(QStringLiteral("model")), model_);
  form->addRow(field_label(QStringLiteral("d_model")), dmodel_);
  form->addRow(field_label(QStringLiteral("layers")), layers_);
  form->addRow(fp8_);
  form->addRow(field_label(QStringLiteral("recipe")), recipe_);
  form->addRow(field_label(QStringLiteral("formats")), formats_);
  form->addRow(field_label(QStringLiteral("scaling")), scaling_);
  form->addRow(field_label(QStringLiteral("margin")), margin_);
  form->addRow(field_label(QStringLiteral("window")), window_);
  form->addRow(field_label(QStringLiteral("amax_algo")), algo_);
  auto* gemms = new QHBoxLayout;
  gemms->setSpacing(4);
  for (QCheckBox* c : {fprop_, dgrad_, wgrad_}) gemms->addWidget(c);
  gemms->addStretch(1);
  form->addRow(field_label(QStringLiteral("fprop_fp8")), gemms);
  form->addRow(field_label(QStringLiteral("steps")), steps_);
  form->addRow(field_label(QStringLiteral("lr")), lr_);
  form->addRow(field_label(QStringLiteral("seed")), seed_);
  form->addRow(field_label(QStringLiteral("stats_interval")), stats_);
  form->addRow(field_label(QStringLiteral("device")), device_);
  form->addRow(reference_);
  // Every other field of the config, as users would type it in key=value.
  auto* advanced = new QGroupBox(tr("More fields"), this);
  advanced->setObjectName(QStringLiteral("more-fields"));
  advanced_box_ = advanced;
  advanced->setCheckable(true);
  advanced->setChecked(false);
  auto* adv_form = new QFormLayout;
  auto* adv_body = new QWidget(advanced);
  adv_body->setLayout(adv_form);
  auto* adv_layout = new QVBoxLayout(advanced);
  adv_layout->addWidget(adv_body);
  adv_body->setVisible(false);
  connect(advanced, &QGroupBox::toggled, adv_body, &QWidget::setVisible);
  advanced->setFlat(true);  // folded: a title, not an empty frame
  connect(advanced, &QGroupBox::toggled, advanced, [advanced](bool on) { advanced->setFlat(!on); });
  for (const char* key : {"heads", "context", "batch", "width", "depth", "features",
                          "outlier_channels", "outlier_scale", "target_tail", "warmup",
                          "min_lr_ratio", "weight_decay", "grad_clip", "dtype", "sqnr_interval",
                          "on_nonfinite", "log_interval", "amax_reduction", "rank_timeout"}) {
    const QString k = QString::fromLatin1(key);
    if (k == QLatin1String("amax_reduction")) {
      // A boolean: a box to tick, its label beside it (as FP8 linear layers), never a
      // word to type.
      amax_reduction_->setParent(adv_body);
      amax_reduction_->setObjectName(k);
      amax_reduction_->setToolTip(k);
      adv_form->addRow(amax_reduction_);
      fields_.push_back(amax_reduction_);
      connect(amax_reduction_, &QCheckBox::toggled, this, &RunPanel::validate);
      continue;
    }
    auto* edit = new QLineEdit(adv_body);
    edit->setObjectName(k);
    edit->setToolTip(k);
    adv_form->addRow(field_label(k), edit);
    advanced_.emplace_back(k, edit);
    fields_.push_back(edit);
    connect(edit, &QLineEdit::textChanged, this, &RunPanel::validate);
  }
  const std::pair<const char*, const char*> help[] = {
      {"heads", QT_TR_NOOP("heads: must divide the model width")},
      {"features", QT_TR_NOOP("features: the MLP's input and output width")},
      {"target_tail", QT_TR_NOOP("target_tail: Student-t degrees of freedom of the target noise "
                                 "(smaller: heavier tails)")},
      {"min_lr_ratio", QT_TR_NOOP("min_lr_ratio: the learning rate decays to lr times this")},
      {"sqnr_interval", QT_TR_NOOP("sqnr_interval: steps between GEMM-output SQNR samples; 0: "
                                   "never")},
      {"amax_reduction",
       QT_TR_NOOP("amax_reduction (data-parallel runs): true: every rank scales with the largest "
                  "amax of all ranks, so all quantize alike; false: each rank with its own")},
      {"rank_timeout", QT_TR_NOOP("rank_timeout (data-parallel runs): seconds a rank waits for "
                                  "the others before the run fails")}};
  for (auto& [k, edit] : advanced_) {
    for (const auto& [key, text] : help) {
      if (k == QLatin1String(key)) edit->setToolTip(tr(text));
    }
  }
  for (const auto& [key, text] : help) {
    if (amax_reduction_->objectName() == QLatin1String(key)) amax_reduction_->setToolTip(tr(text));
  }
  form->addRow(advanced);
  // Only a focused field takes the wheel: the wheel scrolls the form.
  for (QWidget* w : fields_) {
    if (qobject_cast<QAbstractSpinBox*>(w) || qobject_cast<QComboBox*>(w)) {
      w->setFocusPolicy(Qt::StrongFocus);
      w->installEventFilter(this);
    }
  }
  for (QWidget* w : fields_) w->setProperty("help", w->toolTip());

  // The form scrolls; the message, the buttons and the progress stay in view below it.
  auto* body = new QWidget;
  body->setLayout(form);
  auto* scroll = new QScrollArea(this);
  scroll->setObjectName(QStringLiteral("run-form"));
  scroll->setWidget(body);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  // The form may scroll sideways too: a dock as wide as the whole form would not leave a
  // 1300 px window room for its tabs.
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAsNeeded);
  error_->setObjectName(QStringLiteral("run-message"));
  error_->setWordWrap(true);
  error_->setTextFormat(Qt::PlainText);
  eta_->setObjectName(QStringLiteral("run-progress-text"));
  eta_->setWordWrap(true);  // a followed run's line is long: it wraps, the dock keeps its width
  error_->setStyleSheet(QStringLiteral("color: #c62828"));
  start_->setObjectName(QStringLiteral("start"));
  pause_->setObjectName(QStringLiteral("pause"));
  stop_->setObjectName(QStringLiteral("stop"));
  auto* buttons = new QHBoxLayout;
  for (QPushButton* b : {start_, pause_, stop_}) buttons->addWidget(b);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(scroll, 1);
  layout->addWidget(error_);
  layout->addLayout(buttons);
  layout->addWidget(progress_);
  layout->addWidget(eta_);
  pause_->setEnabled(false);
  stop_->setEnabled(false);

  connect(preset_, &QComboBox::currentTextChanged, this,
          [this](const QString& n) { applyPreset(n); });
  for (QComboBox* c : {model_, recipe_, formats_, scaling_, algo_, device_})
    connect(c, &QComboBox::currentTextChanged, this, &RunPanel::validate);
  // Every keystroke: text that is no value yet is named at once.
  for (auto& [key, box] : numbers_)
    connect(box->findChild<QLineEdit*>(), &QLineEdit::textChanged, this, &RunPanel::validate);
  for (QCheckBox* c : {fprop_, dgrad_, wgrad_, fp8_, reference_})
    connect(c, &QCheckBox::toggled, this, &RunPanel::validate);
  connect(name_, &QLineEdit::textChanged, this, &RunPanel::validate);
  connect(start_, &QPushButton::clicked, this, [this] { start(); });
  connect(pause_, &QPushButton::clicked, this, [this] {
    if (engine_->isPaused()) {
      engine_->resume();
    } else {
      engine_->pause();
    }
  });
  connect(engine_, &EngineController::pausedChanged, this, [this](bool paused) {
    pause_->setText(paused ? tr("Resume") : tr("Pause"));
    showProgress();
  });
  connect(stop_, &QPushButton::clicked, engine_, &EngineController::stop);
  connect(engine_, &EngineController::progress, this,
          [this](qint64 step, qint64 steps, double eta) {
            done_ = step;
            total_ = steps;
            eta_seconds_ = eta;
            showProgress();
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

void RunPanel::showProgress() {
  progress_->setRange(0, static_cast<int>(std::min<qint64>(total_, INT32_MAX)));
  progress_->setValue(static_cast<int>(std::min<qint64>(done_, INT32_MAX)));
  if (engine_->isFollowing()) {
    eta_->setText(tr("following run %1 (another process writes it): step %2 of %3")
                      .arg(engine_->followedRun())
                      .arg(done_)
                      .arg(total_));
    return;
  }
  const QString left = eta_seconds_ >= 0 ? time_left(eta_seconds_) : QString();
  if (engine_->isPaused()) {
    // The time left stands still while nothing trains.
    eta_->setText(
        left.isEmpty()
            ? tr("paused at step %1 of %2").arg(done_).arg(total_)
            : tr("paused at step %1 of %2 (%3 once resumed)").arg(done_).arg(total_).arg(left));
  } else {
    eta_->setText(left.isEmpty() ? tr("step %1 of %2").arg(done_).arg(total_)
                                 : tr("step %1 of %2, %3").arg(done_).arg(total_).arg(left));
  }
}

bool RunPanel::eventFilter(QObject* watched, QEvent* event) {
  if (event->type() == QEvent::Wheel) {
    auto* w = qobject_cast<QWidget*>(watched);
    if (w && !w->hasFocus()) {
      event->ignore();  // on to the form, which scrolls
      return true;
    }
  }
  return QWidget::eventFilter(watched, event);
}

QString RunPanel::presetName() const {
  return preset_->currentText();
}

bool RunPanel::applyPreset(const QString& name) {
  for (const RunPreset& p : run_presets()) {
    if (name != p.name) continue;
    RunConfig c;
    c.name = p.name.toStdString();
    bool names_formats = false;
    for (const QString& kv : p.overrides) {
      apply_override(c, kv.toStdString());
      names_formats = names_formats || kv.startsWith(QLatin1String("formats="));
    }
    c.device = config().device;  // the device chosen stays
    // Where the preset names no formats, a GPU's own (hybrid_fnuz on AMD GPUs).
    if (!names_formats) c.formats = default_run_formats(backend_, c);
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
  const int preset = preset_->currentIndex();  // changed fields keep the preset named
  setConfig(c);
  const QSignalBlocker b(preset_);
  preset_->setCurrentIndex(preset);
  return {};
}

void RunPanel::setConfig(const RunConfig& c) {
  {
    // The form is no preset's now (applyPreset() names its own after): the box says so,
    // and choosing any preset again loads it.
    const QSignalBlocker b0(preset_);
    preset_->setCurrentIndex(-1);
  }
  {
    base_ = c;
    const QSignalBlocker b1(model_), b2(recipe_), b3(formats_), b4(scaling_), b5(algo_), b6(steps_),
        b7(margin_), b8(window_), b9(seed_), b10(stats_), b11(dmodel_), b12(layers_), b13(lr_),
        b14(fp8_), b15(reference_), b16(name_), b17(fprop_), b18(dgrad_), b19(wgrad_), b20(device_),
        b21(amax_reduction_);  // all of them: a check half-way would take More fields' old values
    std::vector<std::unique_ptr<QSignalBlocker>> edits;
    for (auto& [key, box] : numbers_)
      edits.push_back(std::make_unique<QSignalBlocker>(box->findChild<QLineEdit*>()));
    name_->setText(QString::fromStdString(c.name));
    model_->setCurrentText(QString::fromStdString(std::string(model_kind_name(c.model))));
    show_value(dmodel_, c.d_model);
    show_value(layers_, c.layers);
    fp8_->setChecked(c.fp8);
    choose(recipe_, kFloat8Recipes, c.recipe);
    choose(formats_, kFormatPairings, c.formats);
    scaling_->setCurrentText(QString::fromStdString(c.scaling));
    show_value(margin_, c.margin);
    show_value(window_, c.window);
    algo_->setCurrentText(QString::fromStdString(c.amax_algo));
    fprop_->setChecked(c.fprop_fp8);
    dgrad_->setChecked(c.dgrad_fp8);
    wgrad_->setChecked(c.wgrad_fp8);
    show_value(steps_, static_cast<double>(c.steps));
    show_value(lr_, c.lr);
    show_value(seed_, static_cast<double>(c.seed));
    show_value(stats_, c.stats_interval);
    reference_->setChecked(c.reference);
    amax_reduction_->setChecked(c.amax_reduction);
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
  validate();
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
  c.amax_reduction = amax_reduction_->isChecked();
  return c;
}

void RunPanel::setSteps(int64_t steps) {
  show_value(steps_, static_cast<double>(steps));
  validate();
}

QString RunPanel::advancedValue(const QString& key) const {
  const QJsonObject j =
      QJsonDocument::fromJson(QByteArray::fromStdString(run_config_json(base_))).object();
  const QJsonValue v = j.value(key);
  if (v.isBool()) return v.toBool() ? QStringLiteral("true") : QStringLiteral("false");
  return v.isString() ? v.toString()
                      : QString::number(v.toDouble(), 'g', QLocale::FloatingPointShortest);
}

void RunPanel::showAdvancedValues() {
  for (auto& [key, edit] : advanced_) {
    const QSignalBlocker b(edit);
    edit->setText(advancedValue(key));
  }
}

QString RunPanel::setAdvanced(const QString& key, const QString& value) {
  if (key == amax_reduction_->objectName()) {
    // Read as a config reads it (true/false), then ticked or not.
    RunConfig c = config();
    try {
      apply_override(c, (key + QLatin1Char('=') + value.trimmed()).toStdString());
    } catch (const std::exception& e) {
      return readable(e);
    }
    amax_reduction_->setChecked(c.amax_reduction);
    return problems_.value(amax_reduction_);
  }
  for (auto& [k, edit] : advanced_) {
    if (k != key) continue;
    edit->setText(value);  // validate() takes it, or marks the box
    return problems_.value(edit);
  }
  return tr("%1 is not one of the fields").arg(key);
}

void RunPanel::takeAdvanced(QHash<QWidget*, QString>& problems) {
  bool form_valid = true;
  try {
    validate_run_config(config());
  } catch (const std::exception&) {
    form_valid = false;
  }
  for (auto& [key, edit] : advanced_) {
    RunConfig c = config();
    const std::string before = run_config_json(c);
    try {
      apply_override(c, (key + QLatin1Char('=') + edit->text().trimmed()).toStdString());
    } catch (const std::exception& e) {
      problems.insert(edit, readable(e));
      continue;
    }
    if (run_config_json(c) == before) continue;  // the value taken already
    try {
      validate_run_config(c);
      base_ = c;
      form_valid = true;
    } catch (const std::exception& e) {
      // Refused with the rest of the form: this box's value is what does not fit. (A form
      // refused already names its own field; this value waits until that one is fixed.)
      if (form_valid || field_key(QString::fromStdString(e.what())) == key)
        problems.insert(edit, readable(e));
    }
  }
}

QWidget* RunPanel::fieldOf(const QString& key) const {
  for (QWidget* w : fields_) {
    if (w->objectName() == key) return w;
  }
  return key == QLatin1String("name") ? name_ : nullptr;
}

QString RunPanel::validationMessage() const {
  return message_;
}

QString RunPanel::statusText() const {
  return eta_->text();
}

void RunPanel::validate() {
  QHash<QWidget*, QString> problems;
  // Number boxes holding text that is no value within their bounds.
  for (const auto& [key, box] : numbers_) {
    if (!box_refused(box)) continue;
    const bool whole = qobject_cast<QSpinBox*>(box) != nullptr;
    problems.insert(box, tr("%1: must be %2 in %3, not %4")
                             .arg(field_label(key), whole ? tr("a whole number") : tr("a number"),
                                  box_bounds(box), box->text().trimmed()));
  }
  takeAdvanced(problems);
  // The config as a whole (a field may be refused for another: heads and d_model).
  try {
    validate_run_config(config());
  } catch (const std::exception& e) {
    QWidget* field = fieldOf(field_key(QString::fromStdString(e.what())));
    if (!field) field = error_;  // a field the form does not show (the memory estimate)
    if (!problems.contains(field)) problems.insert(field, readable(e));
  }
  // The first problem in the form's order is said beside Start; every one is marked.
  message_.clear();
  int n_marked = 0;  // fields marked in red; a problem of no field shown marks none
  for (QWidget* w : fields_) {
    if (!problems.contains(w)) continue;
    if (n_marked++ == 0) message_ = problems.value(w);
  }
  if (message_.isEmpty() && problems.contains(error_)) message_ = problems.value(error_);
  // The fields marked besides the one named.
  const int more = n_marked > 0 ? n_marked - 1 : 0;
  if (more == 1) message_ += tr(" (and 1 more field marked)");
  if (more > 1) message_ += tr(" (and %1 more fields marked)").arg(more);
  for (QWidget* w : fields_) {
    const bool bad = problems.contains(w);
    if (w->property("invalid").toBool() != bad || bad) {
      w->setProperty("invalid", bad);
      w->setToolTip(bad ? problems.value(w) + QLatin1Char('\n') + w->property("help").toString()
                        : w->property("help").toString());
      // Marked in light red (a palette, so that every style keeps its own frames).
      QPalette marked;
      if (bad) {
        marked = palette();
        for (QPalette::ColorRole role : {QPalette::Base, QPalette::Button})
          marked.setColor(role, QColor(0xff, 0xcd, 0xd2));
      }
      w->setPalette(marked);
    }
    // A refused field among More fields is shown, not left folded away.
    if (bad && !advanced_box_->isChecked() && advanced_box_->isAncestorOf(w))
      advanced_box_->setChecked(true);
  }
  problems_ = problems;
  error_->setText(message_);
  start_->setEnabled(message_.isEmpty() && !engine_->isRunning());
  start_->setToolTip(message_);
}

void RunPanel::setRunning(bool running) {
  start_->setEnabled(!running && message_.isEmpty());
  pause_->setEnabled(running);
  stop_->setEnabled(running);
  pause_->setText(tr("Pause"));
}

QString RunPanel::start() {
  // A field refused, or holding text that is no value, keeps the run from starting: it
  // would train with another value than the one shown.
  validate();
  if (!message_.isEmpty()) return message_;
  // A failure is shown where every failure is (EngineController::failed).
  if (const QString err = engine_->start(config()); !err.isEmpty()) return err;
  setRunning(true);
  done_ = 0;
  total_ = config().steps;
  eta_seconds_ = -1;
  progress_->setValue(0);
  eta_->setText(tr("starting..."));
  return {};
}

}  // namespace fp8wb
