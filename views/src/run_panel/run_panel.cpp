// defines: RunPanel's construction (the form, More fields, the scrolling body with the
// message, Start / Pause / Stop and the progress below it; the signals) and the run control:
// start(), the buttons' states, the progress and the time left. The form's contents and the
// presets: run_panel_form.cpp; validation: run_panel_validation.cpp; the Python script:
// run_panel_script.cpp.
#include "fp8wb/views/run_panel/run_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QVBoxLayout>
#include <QWheelEvent>
#include <algorithm>

#include "fp8wb/core/backend/backend_info.h"
#include "fp8wb/core/config/run_config_fields.h"
#include "fp8wb/views/common/name_choices.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "run_panel/run_panel_fields.h"

namespace fp8wb {

using namespace detail;  // the field labels and number boxes (run_panel_fields.h)

namespace {

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
      name_(new QLineEdit(this)),
      error_(new QLabel(this)),
      eta_(new QLabel(this)),
      start_(new QPushButton(tr("Start"), this)),
      pause_(new QPushButton(tr("Pause"), this)),
      stop_(new QPushButton(tr("Stop"), this)),
      script_(new QPushButton(tr("Python script…"), this)),
      script_log_(new QPlainTextEdit(this)),
      runner_(new ScriptRunner(this)),
      progress_(new QProgressBar(this)) {
  fillChoices();
  nameFields();
  QFormLayout* form = buildForm();
  addMoreFields(form);
  buildBody(form);
  connectFields();
  connectRunControl();
  connectScript();  // run_panel_script.cpp
  connectEngine();
  applyPreset(preset_->currentText());
}

// The preset, model, recipe, formats, scaling, algorithm and device choices; the number
// boxes' bounds.
void RunPanel::fillChoices() {
  preset_->addItems(presetNames());
  // Shown while the form holds what no preset gave it (a preset's fields changed, an opened
  // run's settings). Short: a combo box is never narrower than its placeholder, and the
  // form never narrower than its widest field.
  preset_->setPlaceholderText(tr("custom run settings"));
  // The names each field takes (run_config_fields.h; the model's gpt first).
  for (std::string_view n : find_run_config_field("model")->names)
    model_->addItem(QString::fromLatin1(n.data(), static_cast<int>(n.size())));
  fill_choices(scaling_, kScalingModes);
  fill_choices(algo_, kAmaxAlgos);
  fill_choices(recipe_, kFloat8Recipes);
  fill_choices(formats_, kFormatPairings);
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
  numbers_ = {{QStringLiteral("d_model"), dmodel_}, {QStringLiteral("layers"), layers_},
              {QStringLiteral("margin"), margin_},  {QStringLiteral("window"), window_},
              {QStringLiteral("steps"), steps_},    {QStringLiteral("lr"), lr_},
              {QStringLiteral("seed"), seed_},      {QStringLiteral("stats_interval"), stats_}};
  // The config's bounds (run_config_fields.h); the seed's box stops at the largest int.
  for (auto& [key, box] : numbers_) set_field_bounds(box, key);
  static_cast<IntBox*>(stats_)->setZeroText(tr("never"));
  dmodel_->setSingleStep(16);
  lr_->setSingleStep(1e-4);
}

// Each field's object name (its config key) and tooltip; the combo boxes' widths.
void RunPanel::nameFields() {
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
  // Each field's tooltip: the key a config file or --set spells, and what it means.
  for (const auto& [w, key] : keys) w->setToolTip(field_help(QString::fromLatin1(key)));
  preset_->setToolTip(
      tr("Fills the form; every field can be changed after (\"custom run settings\": a "
         "preset's field changed, or an opened run's settings)"));
  device_->setToolTip(
      backend_.cuda_device_names.empty()
          ? tr("device: no CUDA device here: runs emulate FP8 bit-exactly on the CPU")
          : tr("device: FP8 GEMMs on the GPU: %1").arg(QString::fromStdString(backend_.fp8_gemm)));
  // The form fits a narrow dock: combo boxes shrink below their longest entry, and a row
  // whose field would not fit beside its label goes below it.
  for (QComboBox* c : {preset_, model_, recipe_, formats_, scaling_, algo_, device_}) {
    c->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    c->setMinimumContentsLength(8);
  }
}

// The form's rows, in the order they are shown.
QFormLayout* RunPanel::buildForm() {
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
  return form;
}

// "More fields": every field the form above does not hold, and the fields' wheel and help.
void RunPanel::addMoreFields(QFormLayout* form) {
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
  // Folded: the title alone, not an empty grey frame under it (styles such as Fusion draw
  // a group box's frame flat or not).
  auto fold = [advanced, adv_layout, margins = adv_layout->contentsMargins()](bool on) {
    advanced->setFlat(!on);
    advanced->setStyleSheet(on ? QString() : QStringLiteral("QGroupBox { border: none; }"));
    adv_layout->setContentsMargins(on ? margins : QMargins());
  };
  fold(false);
  connect(advanced, &QGroupBox::toggled, advanced, fold);
  form_ = form;
  advanced_form_ = adv_form;
  // Every other field of the config (run_config_fields.h), in the table's order: a field
  // added there is here. An MLP's sizes, the checkpoint and the token file go in the form
  // itself, where a GPT's sizes are (only one kind's are shown).
  int sizes_row = 0;
  QFormLayout::ItemRole sizes_role{};
  form->getWidgetPosition(layers_, &sizes_row, &sizes_role);
  for (const RunConfigField& f : run_config_fields()) {
    const QString k = QString::fromLatin1(f.key.data(), static_cast<int>(f.key.size()));
    if (fieldOf(k)) continue;  // a field of the form above
    if (f.type == FieldType::Boolean) {
      // A box to tick, its label beside it (as FP8 linear layers), never a word to type.
      auto* check = new QCheckBox(field_label(k), adv_body);
      check->setObjectName(k);
      check->setToolTip(field_help(k));
      adv_form->addRow(check);
      advanced_checks_.emplace_back(k, check);
      fields_.push_back(check);
      connect(check, &QCheckBox::toggled, this, &RunPanel::validate);
      continue;
    }
    const bool in_form = k == QLatin1String("width") || k == QLatin1String("depth") ||
                         k == QLatin1String("hf") || k == QLatin1String("data");
    auto* edit = new QLineEdit(in_form ? static_cast<QWidget*>(this) : adv_body);
    edit->setObjectName(k);
    edit->setToolTip(field_help(k));
    if (in_form) {
      form->insertRow(++sizes_row, field_label(k), edit);
    } else {
      adv_form->addRow(field_label(k), edit);
    }
    advanced_.emplace_back(k, edit);
    fields_.push_back(edit);
    connect(edit, &QLineEdit::textChanged, this, &RunPanel::validate);
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
}

// The scrolling form with the message, the buttons, the progress and the script's log below.
void RunPanel::buildBody(QFormLayout* form) {
  // The form scrolls; the message, the buttons and the progress stay in view below it.
  auto* body = new QWidget;
  body->setLayout(form);
  auto* scroll = new QScrollArea(this);
  scroll->setObjectName(QStringLiteral("run-form"));
  scroll->setWidget(body);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  // The form scrolls up and down, never sideways (a label scrolled off to the left reads
  // "rgin" for "Margin"): the area is at least as wide as the form's minimum, rows whose
  // field does not fit beside its label wrapping below it (eventFilter()).
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  form_area_ = scroll;
  body->installEventFilter(this);
  error_->setObjectName(QStringLiteral("run-message"));
  error_->setWordWrap(true);
  error_->setTextFormat(Qt::PlainText);
  eta_->setObjectName(QStringLiteral("run-progress-text"));
  eta_->setWordWrap(true);  // a followed run's line is long: it wraps, the dock keeps its width
  // Two lines always, whatever the text: a line that wraps (or clears) must not move the
  // buttons above it, or a click meant for Resume lands on the progress bar.
  eta_->setAlignment(Qt::AlignLeft | Qt::AlignTop);
  eta_->setFixedHeight(2 * eta_->fontMetrics().lineSpacing() + 2);
  error_->setStyleSheet(QStringLiteral("color: #c62828"));
  kept_ = new QLabel(this);
  kept_->setObjectName(QStringLiteral("kept-settings"));
  kept_->setWordWrap(true);
  kept_->setTextFormat(Qt::PlainText);
  kept_->hide();  // until a run's settings are opened (openConfig())
  start_->setObjectName(QStringLiteral("start"));
  pause_->setObjectName(QStringLiteral("pause"));
  stop_->setObjectName(QStringLiteral("stop"));
  auto* buttons = new QHBoxLayout;
  for (QPushButton* b : {start_, pause_, stop_}) buttons->addWidget(b);
  script_->setObjectName(QStringLiteral("python-script"));
  script_->setToolTip(
      tr("Run a PyTorch script of yours that calls fp8wb.watch(model): its run goes to this "
         "database and is followed here"));
  script_log_->setObjectName(QStringLiteral("script-stderr"));
  script_log_->setReadOnly(true);
  script_log_->setMaximumBlockCount(2000);
  script_log_->setPlaceholderText(tr("the script's stderr"));
  script_log_->setFixedHeight(6 * script_log_->fontMetrics().lineSpacing());
  script_log_->hide();  // until a script runs
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(scroll, 1);
  layout->addWidget(error_);
  layout->addWidget(kept_);
  layout->addLayout(buttons);
  layout->addWidget(script_);
  layout->addWidget(progress_);
  layout->addWidget(eta_);
  layout->addWidget(script_log_);
  pause_->setEnabled(false);
  stop_->setEnabled(false);
}

// The preset, the model kind's fields and every field's validation.
void RunPanel::connectFields() {
  connect(preset_, &QComboBox::currentTextChanged, this,
          [this](const QString& n) { applyPreset(n); });
  // The fields of one model kind (their row's models): only those of the kind chosen
  // are shown.
  for (QWidget* w : fields_) {
    const RunConfigField* f = find_run_config_field(w->objectName().toStdString());
    if (!f || f->models == kAllModels) continue;
    QStringList kinds;
    for (const ModelKind m : {ModelKind::Gpt, ModelKind::Mlp, ModelKind::Llama}) {
      if (f->applies_to(m)) kinds << QString::fromLatin1(model_kind_name(m).data());
    }
    model_fields_.emplace_back(w, kinds.join(QLatin1Char(' ')));
  }
  connect(model_, &QComboBox::currentTextChanged, this, &RunPanel::showModelFields);
  showModelFields();
  for (QComboBox* c : {model_, recipe_, formats_, scaling_, algo_, device_})
    connect(c, &QComboBox::currentTextChanged, this, &RunPanel::validate);
  // Every keystroke: text that is no value yet is named at once.
  for (auto& [key, box] : numbers_)
    connect(box->findChild<QLineEdit*>(), &QLineEdit::textChanged, this, &RunPanel::validate);
  for (QCheckBox* c : {fprop_, dgrad_, wgrad_, fp8_, reference_})
    connect(c, &QCheckBox::toggled, this, &RunPanel::validate);
  connect(name_, &QLineEdit::textChanged, this, &RunPanel::validate);
}

// Start, Pause / Resume, Stop and the script's button.
void RunPanel::connectRunControl() {
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
  connect(stop_, &QPushButton::clicked, this, [this] {
    if (runner_->isRunning()) {
      runner_->stop();  // SIGINT, SIGTERM after 10 s
      eta_->setText(tr("stopping the script (SIGINT; SIGTERM after 10 s)..."));
      return;
    }
    engine_->stop();
  });
  connect(script_, &QPushButton::clicked, this, &RunPanel::chooseScript);
}

// The engine's progress, end, read-only state and database.
void RunPanel::connectEngine() {
  connect(engine_, &EngineController::readOnlyChanged, this,
          [this] { updateStart(engine_->isRunning()); });
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
            if (total_ <= 0) {  // a followed run of unknown length (a script's): ended
              progress_->setRange(0, 1);
              progress_->setValue(1);
            }
            const QString name = QString::fromLatin1(run_status_name(status));
            eta_->setText(message.isEmpty() ? tr("run %1").arg(name)
                                            : tr("run %1: %2").arg(name, message));
          });
  // Another database: the progress shown was of a run of the one before.
  connect(engine_, &EngineController::databaseChanged, this, [this] {
    if (!engine_->isRunning()) clearProgress();
  });
}

void RunPanel::clearProgress() {
  done_ = total_ = 0;
  eta_seconds_ = -1;
  progress_->reset();
  eta_->clear();
}

void RunPanel::showProgress() {
  // A count of steps done ("10/10 steps"), never "step 10": steps are indices from 0 in the
  // store and in the tabs' headers ("step 9" is the tenth).
  progress_->setRange(0, static_cast<int>(std::min<qint64>(total_, INT32_MAX)));
  progress_->setValue(static_cast<int>(std::min<qint64>(done_, INT32_MAX)));
  // A run followed while one trains here: the progress is the training run's.
  if (engine_->isFollowing() && !engine_->isRunning()) {
    eta_->setText(total_ > 0 ? tr("following run %1 (another process writes it): %2/%3 steps")
                                   .arg(engine_->followedRun())
                                   .arg(done_)
                                   .arg(total_)
                             : tr("following run %1 (another process writes it): %2 steps")
                                   .arg(engine_->followedRun())
                                   .arg(done_));
    if (runner_->isStopping())
      eta_->setText(eta_->text() + tr("; stopping the script (SIGINT, SIGTERM after 10 s)"));
    return;
  }
  const QString left = eta_seconds_ >= 0 ? time_left(eta_seconds_) : QString();
  if (engine_->isPaused()) {
    // The time left stands still while nothing trains.
    eta_->setText(
        left.isEmpty()
            ? tr("paused after %1/%2 steps").arg(done_).arg(total_)
            : tr("paused after %1/%2 steps (%3 once resumed)").arg(done_).arg(total_).arg(left));
  } else {
    eta_->setText(left.isEmpty() ? tr("%1/%2 steps").arg(done_).arg(total_)
                                 : tr("%1/%2 steps, %3").arg(done_).arg(total_).arg(left));
  }
}

void RunPanel::showModelFields() {
  const QString kind = model_->currentText();
  for (const auto& [w, kinds] : model_fields_) {
    for (QFormLayout* f : {form_, advanced_form_}) {
      int row = -1;
      QFormLayout::ItemRole role{};
      f->getWidgetPosition(w, &row, &role);
      if (row >= 0) f->setRowVisible(row, kinds.split(QLatin1Char(' ')).contains(kind));
    }
  }
}

bool RunPanel::eventFilter(QObject* watched, QEvent* event) {
  if (form_area_ && watched == form_area_->widget() && event->type() == QEvent::LayoutRequest) {
    // Room for the form's minimum beside the vertical scroll bar (fonts, More fields).
    const int bar = form_area_->verticalScrollBar()->sizeHint().width();
    form_area_->setMinimumWidth(form_area_->widget()->minimumSizeHint().width() + bar +
                                2 * form_area_->frameWidth());
  }
  if (event->type() == QEvent::Wheel) {
    auto* w = qobject_cast<QWidget*>(watched);
    if (w && !w->hasFocus()) {
      event->ignore();  // on to the form, which scrolls
      return true;
    }
  }
  return QWidget::eventFilter(watched, event);
}

QString RunPanel::statusText() const {
  return eta_->text();
}

void RunPanel::updateStart(bool running) {
  // A database that cannot be written takes no runs: Start says why, as for a field refused.
  const QString read_only = engine_->readOnlyReason();
  // A script the panel started runs until it ends, or is stopped, whatever is followed.
  start_->setEnabled(!running && !runner_->isRunning() && message_.isEmpty() &&
                     read_only.isEmpty());
  start_->setToolTip(message_.isEmpty() ? read_only : message_);
}

void RunPanel::setRunning(bool running) {
  updateStart(running);
  pause_->setEnabled(running);
  stop_->setEnabled(running);
  pause_->setText(tr("Pause"));
  updateScriptButtons();
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