// CheckpointEvalDialog (checkpoint_eval_dialog.h): the form, the evaluation as a
// BackgroundJob (progress posted back to the window; Cancel makes the next progress call
// throw, which ends the work), and the results' two tables.
#include "fp8wb/views/checkpoint/checkpoint_eval_dialog.h"

#include <QCheckBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPointer>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>
#include <stdexcept>

#include "fp8wb/core/checkpoint/eval_checkpoint.h"
#include "fp8wb/views/common/file_dialogs.h"

namespace fp8wb {
namespace {

// Thrown by the progress callback once Cancel was pressed.
struct Cancelled : std::runtime_error {
  Cancelled() : std::runtime_error("cancelled") {}
};

QTableWidgetItem* cell(const QString& text, bool number = false) {
  auto* item = new QTableWidgetItem(text);
  item->setFlags(Qt::ItemIsSelectable | Qt::ItemIsEnabled);
  if (number) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  return item;
}

}  // namespace

QString CheckpointEvalDialog::hfFolderOf(const QString& path) {
  const QFileInfo info(path);
  const QString dir = info.isDir() ? info.absoluteFilePath() : info.absolutePath();
  return QFileInfo(QDir(dir).filePath(QStringLiteral("config.json"))).isFile() ? dir : QString();
}

CheckpointEvalDialog::CheckpointEvalDialog(const QString& hf_dir, QWidget* parent)
    : QDialog(parent),
      hf_(hf_dir),
      data_(new QLineEdit(this)),
      windows_(new QSpinBox(this)),
      context_(new QSpinBox(this)),
      tensorwise_(new QCheckBox(tr("tensorwise"), this)),
      rowwise_(new QCheckBox(tr("rowwise"), this)),
      blockwise_(new QCheckBox(tr("blockwise (1x128, 128x128)"), this)),
      mx_(new QCheckBox(tr("mx (32-element blocks, E8M0 scales)"), this)),
      evaluate_(new QPushButton(tr("Evaluate"), this)),
      cancel_(new QPushButton(tr("Cancel"), this)),
      progress_(new QProgressBar(this)),
      status_(new QLabel(this)),
      losses_(new QTableWidget(this)),
      kept_note_(new QLabel(this)),
      layers_(new QTableWidget(this)),
      cancelled_(std::make_shared<std::atomic<bool>>(false)),
      job_(this) {
  setWindowTitle(tr("Evaluate %1's loss with FP8").arg(QFileInfo(hf_dir).fileName()));
  setObjectName(QStringLiteral("checkpointEvalDialog"));
  data_->setObjectName(QStringLiteral("evalTokenFile"));
  data_->setPlaceholderText(tr("a token file: llm.c's .bin (header + uint16) or raw uint16"));
  // The model folder's own tokens.bin, where it has one (as llama_reference.py writes it).
  if (const QString tokens = QDir(hf_dir).filePath(QStringLiteral("tokens.bin"));
      !hf_dir.isEmpty() && QFileInfo(tokens).isFile())
    data_->setText(QDir::toNativeSeparators(tokens));
  auto* browse = new QPushButton(tr("Browse..."), this);
  connect(browse, &QPushButton::clicked, this, [this] {
    const QString p =
        open_file_name(this, tr("Token file"), QString(), tr("Token files (*.bin);;All files (*)"));
    if (!p.isEmpty()) data_->setText(p);
  });
  auto* data_row = new QHBoxLayout;
  data_row->addWidget(data_, 1);
  data_row->addWidget(browse);
  windows_->setObjectName(QStringLiteral("evalWindows"));
  windows_->setRange(0, 1 << 30);
  windows_->setValue(64);
  windows_->setSpecialValueText(tr("all"));
  windows_->setToolTip(
      tr("The first N windows of the token file (0: all). Each window of the model's context "
         "predicts its next tokens; every recipe evaluates the same windows."));
  context_->setObjectName(QStringLiteral("evalContext"));
  context_->setRange(0, 1 << 20);
  context_->setValue(0);
  context_->setSpecialValueText(tr("the model's (at most 1024)"));
  context_->setToolTip(
      tr("Tokens a window (0: the config's max_position_embeddings, at most "
         "1024)"));
  blockwise_->setObjectName(QStringLiteral("evalBlockwise"));
  mx_->setObjectName(QStringLiteral("evalMx"));
  tensorwise_->setChecked(true);
  rowwise_->setChecked(true);
  auto* recipes = new QHBoxLayout;
  recipes->addWidget(tensorwise_);
  recipes->addWidget(rowwise_);
  recipes->addWidget(blockwise_);
  recipes->addWidget(mx_);
  recipes->addStretch(1);
  auto* form = new QFormLayout;
  form->addRow(tr("Checkpoint"), new QLabel(hf_dir.toHtmlEscaped(), this));
  form->addRow(tr("Tokens"), data_row);
  form->addRow(tr("Windows"), windows_);
  form->addRow(tr("Context"), context_);
  form->addRow(tr("FP8 recipes"), recipes);

  evaluate_->setObjectName(QStringLiteral("evalStart"));
  evaluate_->setDefault(true);
  cancel_->setObjectName(QStringLiteral("evalCancel"));
  cancel_->setEnabled(false);
  connect(evaluate_, &QPushButton::clicked, this, &CheckpointEvalDialog::start);
  connect(cancel_, &QPushButton::clicked, this, [this] { cancelled_->store(true); });
  progress_->setVisible(false);
  status_->setObjectName(QStringLiteral("evalStatus"));
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(progress_, 1);
  buttons->addWidget(evaluate_);
  buttons->addWidget(cancel_);

  losses_->setObjectName(QStringLiteral("evalLosses"));
  losses_->setColumnCount(4);
  losses_->setHorizontalHeaderLabels(
      {tr("model"), tr("loss"), tr("vs high precision"), tr("layers in FP8")});
  // Why a recipe kept layers in high precision, whole and wrapped (the table's cells are
  // too narrow for it).
  kept_note_->setObjectName(QStringLiteral("evalKeptNote"));
  kept_note_->setWordWrap(true);
  kept_note_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  kept_note_->hide();
  layers_->setObjectName(QStringLiteral("evalLayers"));
  for (QTableWidget* t : {losses_, layers_}) {
    t->verticalHeader()->hide();
    t->horizontalHeader()->setStretchLastSection(true);
    t->setEditTriggers(QAbstractItemView::NoEditTriggers);
  }
  // The headings whole before any result ("vs high precision" was cut to its column's
  // default width).
  losses_->resizeColumnsToContents();
  auto* close = new QDialogButtonBox(QDialogButtonBox::Close, this);
  connect(close, &QDialogButtonBox::rejected, this, &QDialog::reject);

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(form);
  layout->addLayout(buttons);
  layout->addWidget(status_);
  layout->addWidget(losses_, 1);
  layout->addWidget(kept_note_);
  auto* layers_heading =
      new QLabel(tr("Output SQNR of each FP8 layer (dB; the FP8 product against the "
                    "high-precision one, mean over batches):"),
                 this);
  layers_heading->setWordWrap(true);  // whole in a narrow dialog
  layout->addWidget(layers_heading);
  layout->addWidget(layers_, 2);
  layout->addWidget(close);
  resize(720, 640);
}

CheckpointEvalDialog::~CheckpointEvalDialog() {
  cancelled_->store(true);  // the work ends at its next batch; job_ waits for it
}

void CheckpointEvalDialog::setTokenFile(const QString& path) {
  data_->setText(path);
}

void CheckpointEvalDialog::setWindows(int n) {
  windows_->setValue(n);
}

void CheckpointEvalDialog::setContext(int tokens) {
  context_->setValue(tokens);
}

bool CheckpointEvalDialog::running() const {
  return job_.busy();
}

QString CheckpointEvalDialog::keptNoteText() const {
  return kept_note_->isVisibleTo(const_cast<CheckpointEvalDialog*>(this)) ? kept_note_->text()
                                                                          : QString();
}

QString CheckpointEvalDialog::statusText() const {
  return status_->text();
}

void CheckpointEvalDialog::set_running(bool on) {
  evaluate_->setEnabled(!on);
  cancel_->setEnabled(on);
  progress_->setVisible(on);
  for (QWidget* w : std::initializer_list<QWidget*>{data_, windows_, context_, tensorwise_,
                                                    rowwise_, blockwise_, mx_})
    w->setEnabled(!on);
}

void CheckpointEvalDialog::start() {
  if (job_.busy()) return;
  const QString data = data_->text().trimmed();
  if (data.isEmpty()) {
    status_->setText(tr("Choose a token file to evaluate on."));
    return;
  }
  EvalOptions o;
  o.hf = hf_.toStdString();
  o.data = data.toStdString();
  o.windows = windows_->value();
  o.context = context_->value();
  for (auto [box, name] : {std::pair{tensorwise_, "tensorwise"}, std::pair{rowwise_, "rowwise"},
                           std::pair{blockwise_, "blockwise"}, std::pair{mx_, "mx"}}) {
    if (!box->isChecked()) continue;
    RunConfig c;
    apply_override(c, std::string("recipe=") + name);
    c.scaling = ScalingMode::Current;  // an evaluation has no history
    o.fp8.push_back(c);
  }
  cancelled_->store(false);
  auto cancelled = cancelled_;
  QPointer<CheckpointEvalDialog> self(this);
  const int passes = 1 + static_cast<int>(o.fp8.size());
  o.progress = [cancelled, self, passes](int pass, int64_t done, int64_t total) {
    if (cancelled->load()) throw Cancelled();
    const int percent = total > 0
                            ? static_cast<int>((100.0 * pass + 100.0 * static_cast<double>(done) /
                                                                   static_cast<double>(total)) /
                                               passes)
                            : 0;
    QMetaObject::invokeMethod(
        self.data(),
        [self, percent, pass, passes] {
          if (!self) return;
          self->progress_->setValue(percent);
          self->status_->setText(
              pass == 0 ? tr("Evaluating in high precision...")
                        : tr("Evaluating FP8 recipe %1 of %2...").arg(pass).arg(passes - 1));
        },
        Qt::QueuedConnection);
  };
  losses_->setRowCount(0);
  layers_->setRowCount(0);
  kept_note_->clear();
  kept_note_->hide();
  progress_->setRange(0, 100);
  progress_->setValue(0);
  status_->setText(tr("Reading the checkpoint..."));
  set_running(true);
  job_.run([o] { return evaluate_checkpoint(o); },
           [this](const EvalResult& r) {
             set_running(false);
             show_result(r);
             emit evaluationEnded(true);
           },
           [this](const QString& why) {
             set_running(false);
             status_->setText(cancelled_->load()
                                  ? tr("Cancelled: nothing was evaluated to the end.")
                                  : tr("Could not evaluate: %1").arg(why));
             emit evaluationEnded(false);
           });
}

void CheckpointEvalDialog::show_result(const EvalResult& r) {
  status_->setText(tr("%1 (%2): %3 of %4 tokens, %5 tokens predicted.")
                       .arg(QString::fromStdString(r.architecture), QString::fromStdString(r.dtype))
                       .arg(r.windows == 1 ? tr("1 window") : tr("%1 windows").arg(r.windows))
                       .arg(r.context)
                       .arg(r.tokens));
  losses_->setRowCount(1 + static_cast<int>(r.fp8.size()));
  losses_->setItem(0, 0, cell(tr("high precision (%1)").arg(QString::fromStdString(r.dtype))));
  losses_->setItem(0, 1, cell(QString::number(r.loss_high_precision, 'f', 5), true));
  losses_->setItem(0, 2, cell(QString()));
  losses_->setItem(0, 3, cell(QString()));
  layers_->setColumnCount(1 + static_cast<int>(r.fp8.size()));
  QStringList heads{tr("layer")};
  QStringList notes;
  for (size_t i = 0; i < r.fp8.size(); ++i) {
    const EvalFp8& e = r.fp8[i];
    const int row = static_cast<int>(i) + 1;
    const QString name =
        QStringLiteral("FP8 %1 %2")
            .arg(QString::fromStdString(e.recipe), QString::fromStdString(e.formats));
    losses_->setItem(row, 0, cell(name));
    // How many layers the recipe put in FP8: a loss with 4 of 14 is no figure of the whole
    // model. Why the others stayed in high precision: the tooltip (each layer) and the
    // note under the table (wrapped, never cut off).
    const int total = static_cast<int>(e.layers.size() + e.kept.size());
    QStringList all;
    for (const std::string& k : e.kept) all << QString::fromStdString(k);
    QTableWidgetItem* count =
        cell(tr("%1 of %2").arg(static_cast<int>(e.layers.size())).arg(total), true);
    if (!all.isEmpty()) {
      count->setToolTip(tr("Kept in high precision:\n%1").arg(all.join(QLatin1Char('\n'))));
      const QString first = all.front().mid(all.front().indexOf(QStringLiteral(": ")) + 2);
      notes << (e.layers.empty() ? tr("%1: no layer in FP8, so no loss of its own: %2")
                                 : tr("%1: %3 of %4 layers kept in high precision: %2"))
                       .arg(QString::fromStdString(e.recipe), first)
                       .arg(all.size())
                       .arg(total) +
                   (all.size() > 1 ? tr(" (each layer's reason in the tooltip)") : QString());
    }
    losses_->setItem(row, 3, count);
    if (e.layers.empty()) {
      // Every linear kept in high precision: its loss is the high-precision one, which is
      // no finding about FP8. The reason, whole, is in the note under the table.
      QTableWidgetItem* why = cell(tr("no layer in FP8 (see below)"));
      why->setToolTip(all.isEmpty() ? tr("none could take the recipe")
                                    : all.join(QLatin1Char('\n')));
      losses_->setItem(row, 1, cell(QStringLiteral("-"), true));
      losses_->setItem(row, 2, why);
    } else {
      losses_->setItem(row, 1, cell(QString::number(e.loss, 'f', 5), true));
      losses_->setItem(row, 2,
                       cell(QString::asprintf("%+.5f", e.loss - r.loss_high_precision), true));
    }
    heads << QString::fromStdString(e.recipe);
  }
  kept_note_->setText(notes.join(QLatin1Char('\n')));
  kept_note_->setVisible(!notes.isEmpty());
  layers_->setHorizontalHeaderLabels(heads);
  // The rows: every layer any recipe put in FP8, in the order first seen; each recipe's
  // SQNR by the layer's name (a recipe that kept some has fewer, not shifted rows).
  QStringList names;
  for (const EvalFp8& e : r.fp8)
    for (const EvalLayer& l : e.layers)
      if (!names.contains(QString::fromStdString(l.layer)))
        names << QString::fromStdString(l.layer);
  layers_->setRowCount(static_cast<int>(names.size()));
  for (int row = 0; row < names.size(); ++row) {
    layers_->setItem(row, 0, cell(names[row]));
    for (size_t i = 0; i < r.fp8.size(); ++i) {
      QString v;
      for (const EvalLayer& l : r.fp8[i].layers)
        if (QString::fromStdString(l.layer) == names[row]) v = QString::number(l.sqnr_db, 'f', 2);
      layers_->setItem(row, static_cast<int>(i) + 1, cell(v, true));
    }
  }
  losses_->resizeColumnsToContents();
  layers_->resizeColumnsToContents();
}

}  // namespace fp8wb
