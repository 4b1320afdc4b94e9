#include "fp8wb/views/checkpoint_tab.h"

#include <QComboBox>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMimeData>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QShowEvent>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStackedWidget>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "fp8wb/core/open_checkpoint.h"
#include "fp8wb/views/exportable_plot.h"

namespace fp8wb {
namespace {

QString qs(const std::string& s) {
  return QString::fromStdString(s);
}

double best_sqnr(const TensorAnalysis& a, const RecipeResult** which = nullptr) {
  double best = -INFINITY;
  for (const auto& r : a.recipes) {
    if (r.sqnr_db > best) {
      best = r.sqnr_db;
      if (which) *which = &r;
    }
  }
  return best;
}

double sqnr_of(const TensorAnalysis& a, ScalingKind k, Format f) {
  for (const auto& r : a.recipes) {
    if (r.recipe.kind == k && r.recipe.format == f) return r.sqnr_db;
  }
  return NAN;
}

const QString kRecentKey = QStringLiteral("checkpoint/recent");

QString format_name(Format f) {
  const std::string_view n = format_info(f).name;
  return QString::fromLatin1(n.data(), static_cast<int>(n.size()));
}

// A recipe's scaling without its format: "1x128", "mx floor" (the name less its format).
QString scaling_of(const RecipeResult& r) {
  const QString name = qs(r.name), f = format_name(r.recipe.format);
  return name.startsWith(f + QLatin1Char(' ')) ? name.mid(f.size() + 1) : name;
}

// The marks of the recommended and the selected recipe, in the chart and the table.
const QColor kRecommendedColor(0x2c, 0xa0, 0x2c);
const QColor kSelectedColor(0xff, 0x7f, 0x0e);

const char* const kRecommendedCriterion =
    "the simplest E4M3FN recipe within 1 dB of the best E4M3FN SQNR, without saturation "
    "(E4M3FN: the format of weights and activations on OCP FP8 hardware)";
const char* const kBestCriterion =
    "the recipe x format with the highest SQNR, across every format analysed (the "
    "FNUZ formats and FP4 too)";

}  // namespace

// --- CheckpointModel -------------------------------------------------------------------

CheckpointModel::CheckpointModel(QObject* parent) : QAbstractTableModel(parent) {}

void CheckpointModel::setTensors(std::vector<TensorAnalysis> t) {
  beginResetModel();
  tensors_ = std::move(t);
  endResetModel();
}

const TensorAnalysis* CheckpointModel::tensorAt(int row) const {
  return row >= 0 && row < static_cast<int>(tensors_.size()) ? &tensors_[static_cast<size_t>(row)]
                                                             : nullptr;
}

int CheckpointModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(tensors_.size());
}

int CheckpointModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant CheckpointModel::data(const QModelIndex& index, int role) const {
  const TensorAnalysis* t = index.isValid() ? tensorAt(index.row()) : nullptr;
  if (!t) return {};
  const RecipeResult* best = nullptr;
  const double b = best_sqnr(*t, &best);
  // Sorting uses EditRole numbers; display uses text.
  if (role == Qt::EditRole || role == Qt::UserRole) {
    switch (index.column()) {
      case Amax: return t->amax;
      case Range: return t->dynamic_range_bits;
      case BestSqnr: return std::isfinite(b) ? b : 1e9;
      case TensorwiseSqnr: {
        const double v = sqnr_of(*t, ScalingKind::Tensorwise, Format::E4M3FN);
        return std::isfinite(v) ? v : 1e9;
      }
      default: break;
    }
  }
  const int64_t nonfinite = t->nan_count + t->inf_count;
  if ((role == Qt::EditRole || role == Qt::UserRole) && index.column() == NonFinite)
    return static_cast<qlonglong>(nonfinite);
  if (role == Qt::DisplayRole || role == Qt::EditRole || role == Qt::UserRole) {
    switch (index.column()) {
      case Name: return qs(t->name);
      case NonFinite:
        return nonfinite == 0 ? QString()
                              : tr("%1 NaN, %2 Inf").arg(t->nan_count).arg(t->inf_count);
      case Dtype: return qs(t->dtype);
      case Shape: {
        QStringList d;
        for (int64_t s : t->shape) d << QString::number(s);
        return d.join(QLatin1Char('x'));
      }
      case Amax: return QString::number(t->amax, 'g', 5);
      case Range: return QString::number(t->dynamic_range_bits, 'f', 1);
      case Best: return best ? qs(best->name) : QStringLiteral("-");
      case BestSqnr: return std::isfinite(b) ? QString::number(b, 'f', 1) : QStringLiteral("-");
      case TensorwiseSqnr: {
        const double v = sqnr_of(*t, ScalingKind::Tensorwise, Format::E4M3FN);
        return std::isfinite(v) ? QString::number(v, 'f', 1) : QStringLiteral("-");
      }
      case Recommended:
        return t->not_quantized.empty() ? qs(t->recommended)
                                        : tr("none: %1").arg(qs(t->not_quantized));
      default: return {};
    }
  }
  if (role == Qt::ToolTipRole) {
    switch (index.column()) {
      case NonFinite:
        return nonfinite == 0 ? tr("no NaN or Inf")
                              : tr("%1 NaN and %2 Inf values: left out of every figure (amax, "
                                   "moments, SQNR are over the finite values)")
                                    .arg(t->nan_count)
                                    .arg(t->inf_count);
      case Best:
      case BestSqnr: return tr("Highest SQNR: %1.").arg(tr(kBestCriterion));
      default:
        return !t->not_quantized.empty() ? tr("No SQNR: %1").arg(qs(t->not_quantized))
               : t->reason.empty()       ? qs(t->name)
                                         : qs(t->reason);
    }
  }
  // The recommended recipe in bold and green, the selected one on an orange ground.
  const QString cell = index.column() == Best          ? (best ? qs(best->name) : QString())
                       : index.column() == Recommended ? qs(t->recommended)
                                                       : QString();
  if (role == Qt::FontRole && index.column() == Recommended && !cell.isEmpty()) {
    QFont f;
    f.setBold(true);
    return f;
  }
  if (role == Qt::ForegroundRole && index.column() == Recommended && !cell.isEmpty())
    return QBrush(kRecommendedColor.darker(140));
  if (role == Qt::BackgroundRole) {
    if (!cell.isEmpty() && cell == selected_) {
      QColor c = kSelectedColor;
      c.setAlpha(90);
      return QBrush(c);
    }
    if (index.column() == NonFinite && nonfinite > 0) return QBrush(QColor(0xd6, 0x27, 0x28, 60));
  }
  return {};
}

void CheckpointModel::setSelectedRecipe(const QString& name) {
  if (name == selected_) return;
  selected_ = name;
  // Queued: this is called while views handle this model's reset (a new file selects its
  // first row), when a proxy must not hear of changed data.
  QMetaObject::invokeMethod(
      this,
      [this] {
        if (!tensors_.empty())
          Q_EMIT dataChanged(index(0, 0), index(rowCount() - 1, ColumnCount - 1),
                             {Qt::BackgroundRole});
      },
      Qt::QueuedConnection);
}

QVariant CheckpointModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || section < 0 || section >= ColumnCount) return {};
  if (role == Qt::DisplayRole) {
    static const char* names[] = {"tensor",
                                  "dtype",
                                  "shape",
                                  "amax",
                                  "range (bits)",
                                  "NaN / Inf",
                                  "recommended (E4M3FN)",
                                  "highest SQNR (any format)",
                                  "its SQNR (dB)",
                                  "E4M3FN tensorwise (dB)"};
    return tr(names[section]);
  }
  if (role == Qt::ToolTipRole) {
    switch (section) {
      case Best:
      case BestSqnr: return tr("Highest SQNR: %1.").arg(tr(kBestCriterion));
      case Recommended: return tr("Recommended: %1.").arg(tr(kRecommendedCriterion));
      case NonFinite: return tr("NaN and Inf values, left out of every figure");
      default: return {};
    }
  }
  return {};
}

// --- CheckpointTab ---------------------------------------------------------------------

CheckpointTab::CheckpointTab(QWidget* parent)
    : QWidget(parent),
      recent_(new QComboBox(this)),
      filter_(new QLineEdit(this)),
      status_(new QLabel(this)),
      progress_(new QProgressBar(this)),
      cancel_(new QPushButton(tr("Cancel"), this)),
      model_(new CheckpointModel(this)),
      proxy_(new QSortFilterProxyModel(this)),
      table_(new QTableView(this)),
      recipe_(new QComboBox(this)),
      caption_(new QLabel(this)),
      hist_(new ExportablePlot(this)),
      chart_(new ExportablePlot(this)),
      blocks_(new ExportablePlot(this)),
      pages_(new QStackedWidget(this)) {
  setAcceptDrops(true);
  table_->setObjectName(QStringLiteral("checkpointTable"));
  chart_->setObjectName(QStringLiteral("checkpointSqnrChart"));
  hist_->setObjectName(QStringLiteral("checkpointHistogram"));
  blocks_->setObjectName(QStringLiteral("checkpointBlockMap"));
  recipe_->setObjectName(QStringLiteral("checkpointRecipe"));
  status_->setObjectName(QStringLiteral("checkpointStatus"));
  auto* open = new QPushButton(tr("Open checkpoint..."), this);
  connect(open, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(
        this, tr("Open checkpoint"), QString(),
        tr("Checkpoints (*.safetensors *.index.json *.pt *.pth *.bin);;All files (*)"));
    if (!path.isEmpty()) openCheckpoint(path);
  });
  recent_->setObjectName(QStringLiteral("checkpointRecent"));
  recent_->installEventFilter(this);  // read again before it opens
  refreshRecent();
  connect(recent_, &QComboBox::activated, this, [this](int i) {
    if (i >= 0) openCheckpoint(recent_->itemText(i));
  });
  filter_->setPlaceholderText(tr("filter tensors by name"));
  proxy_->setSourceModel(model_);
  proxy_->setSortRole(Qt::UserRole);
  proxy_->setFilterKeyColumn(CheckpointModel::Name);
  proxy_->setFilterCaseSensitivity(Qt::CaseInsensitive);
  connect(filter_, &QLineEdit::textChanged, proxy_, &QSortFilterProxyModel::setFilterFixedString);
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setStretchLastSection(true);
  progress_->setVisible(false);
  cancel_->setVisible(false);
  connect(cancel_, &QPushButton::clicked, this, &CheckpointTab::cancel);
  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& cur) {
            showTensor(model_->tensorAt(proxy_->mapToSource(cur).row()));
          });
  connect(recipe_, &QComboBox::currentIndexChanged, this, [this] {
    model_->setSelectedRecipe(recipe_->currentText());
    showTensor(shown_);
  });

  hist_->xAxis->setLabel(tr("floor(log2 |x|)"));
  hist_->yAxis->setLabel(tr("elements"));
  hist_bars_ = new QCPBars(hist_->xAxis, hist_->yAxis);
  hist_bars_->setName(tr("log2 histogram"));
  hist_bars_->setWidth(0.9);
  // Horizontal bars: the scalings down the side (a handful of short labels that never
  // collide), one bar per format in the format's colour, the formats in a legend below.
  chart_->xAxis->setLabel(tr("SQNR (dB)"));
  chart_->yAxis->setTickLabelPadding(4);
  chart_->yAxis->setRangeReversed(true);  // the first scaling on top
  chart_->legend->setVisible(true);
  chart_->legend->setIconSize(16, 9);
  place_legend_below(chart_, 2);
  blocks_->xAxis->setLabel(tr("block column"));
  blocks_->yAxis->setLabel(tr("block row"));
  block_map_ = new QCPColorMap(blocks_->xAxis, blocks_->yAxis);
  block_map_->setName(tr("block error"));
  block_scale_ = new QCPColorScale(blocks_);
  blocks_->plotLayout()->addElement(0, 1, block_scale_);
  block_scale_->axis()->setLabel(tr("relative RMS error"));
  block_map_->setColorScale(block_scale_);
  block_map_->setGradient(QCPColorGradient::gpThermal);
  block_map_->setInterpolate(false);

  auto* top = new QHBoxLayout;
  top->addWidget(open);
  top->addWidget(recent_, 1);
  top->addWidget(filter_, 1);
  top->addWidget(progress_);
  top->addWidget(cancel_);
  auto* lower = new QHBoxLayout;
  auto* right = new QVBoxLayout;
  auto* pick = new QHBoxLayout;
  pick->addWidget(new QLabel(tr("Block errors of"), this));
  pick->addWidget(recipe_, 1);
  right->addLayout(pick);
  right->addWidget(blocks_);
  lower->addWidget(hist_, 1);
  lower->addWidget(chart_, 1);
  lower->addLayout(right, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  status_->setWordWrap(true);
  status_->setText(
      tr("A .safetensors checkpoint (or a sharded *.index.json) or a PyTorch .pt/.pth/.bin "
         "file: every tensor is quantized with every recipe x format."));
  layout->addWidget(status_);
  // Nothing open: a placeholder, not empty axes and a colour scale that read as figures.
  auto* placeholder = new QLabel(
      tr("Open a checkpoint (File \u25B8 Open checkpoint, the button above, or drop a file "
         "here)"),
      this);
  placeholder->setObjectName(QStringLiteral("checkpointPlaceholder"));
  placeholder->setAlignment(Qt::AlignCenter);
  QFont big = placeholder->font();
  big.setPointSizeF(big.pointSizeF() * 1.4);
  placeholder->setFont(big);
  placeholder->setEnabled(false);  // the greyed text of an empty view
  auto* content = new QWidget(this);
  auto* content_layout = new QVBoxLayout(content);
  content_layout->setContentsMargins(0, 0, 0, 0);
  content_layout->addWidget(table_, 2);
  caption_->setWordWrap(true);
  content_layout->addWidget(caption_);
  content_layout->addLayout(lower, 2);
  pages_->addWidget(placeholder);
  pages_->addWidget(content);
  layout->addWidget(pages_, 1);
}

bool CheckpointTab::showsPlaceholder() const {
  return pages_->currentIndex() == 0;
}

QString CheckpointTab::selectedRecipe() const {
  return recipe_->currentText();
}

void CheckpointTab::selectRecipe(const QString& name) {
  const int i = recipe_->findText(name);
  if (i >= 0) recipe_->setCurrentIndex(i);
}

CheckpointTab::~CheckpointTab() {
  cancel();
  job_.wait();  // the analysis reports progress to this tab
}

QStringList CheckpointTab::recentFiles() const {
  return QSettings().value(kRecentKey).toStringList();
}

QString CheckpointTab::statusText() const {
  return status_->text();
}

void CheckpointTab::forgetRecent(const QString& path) {
  QStringList r = recentFiles();
  if (r.removeAll(path) == 0) return;
  QSettings().setValue(kRecentKey, r);
  refreshRecent();
}

void CheckpointTab::remember(const QString& path) {
  QStringList r = recentFiles();
  r.removeAll(path);
  r.prepend(path);
  while (r.size() > 10) r.removeLast();
  QSettings().setValue(kRecentKey, r);
  fillRecent(r, 0);
}

void CheckpointTab::refreshRecent() {
  // The files still there, as File > Recent files lists them.
  QStringList r;
  for (const QString& p : recentFiles()) {
    if (QFileInfo::exists(p)) r << p;
  }
  const int current = static_cast<int>(r.indexOf(recent_->currentText()));
  fillRecent(r, current);
}

void CheckpointTab::fillRecent(const QStringList& paths, int current) {
  const QSignalBlocker b(recent_);
  recent_->clear();
  recent_->addItems(paths);
  recent_->setCurrentIndex(current);
  recent_->setPlaceholderText(paths.isEmpty() ? tr("no recent checkpoints")
                                              : tr("recent checkpoints (%1)").arg(paths.size()));
}

void CheckpointTab::showEvent(QShowEvent* e) {
  refreshRecent();
  QWidget::showEvent(e);
}

bool CheckpointTab::eventFilter(QObject* watched, QEvent* e) {
  if (watched == recent_ && e->type() == QEvent::MouseButtonPress) refreshRecent();
  return QWidget::eventFilter(watched, e);
}

void CheckpointTab::openCheckpoint(const QString& path) {
  if (busy()) {
    Q_EMIT failed(tr("a checkpoint is being analysed: cancel it first"));
    return;
  }
  cancel_flag_ = false;
  elapsed_.start();
  progress_->setRange(0, 0);  // busy until the file says how many tensors it holds
  showBusy(true);
  status_->setText(tr("opening %1 ...").arg(path));
  struct Analysed {
    std::vector<TensorAnalysis> tensors;
    bool cancelled = false;
  };
  job_.run(
      [this, path] {
        // The tab outlives this work (its destructor waits for it).
        const std::shared_ptr<Checkpoint> ckpt = open_any_checkpoint(path.toStdString());
        const int n = static_cast<int>(ckpt->tensors().size());
        QMetaObject::invokeMethod(
            this,
            [this, path, n] {
              progress_->setRange(0, n);
              progress_->setValue(0);
              status_->setText(tr("analysing %1 ...").arg(path));
            },
            Qt::QueuedConnection);
        AnalysisOptions o;
        o.progress = [this](size_t done, size_t total) {
          QMetaObject::invokeMethod(
              this,
              [this, done, total] { progress_->setValue(static_cast<int>(std::min(done, total))); },
              Qt::QueuedConnection);
          return !cancel_flag_.load();
        };
        Analysed a;
        a.tensors = analyze_checkpoint(*ckpt, o);
        a.cancelled = cancel_flag_.load();
        return a;
      },
      [this, path](Analysed a) { finishLoad(path, std::move(a.tensors), a.cancelled); },
      [this, path](const QString& message) {
        showBusy(false);
        // The file shown before is gone from view: its figures would read as this file's.
        showTensor(nullptr);
        model_->setTensors({});
        pages_->setCurrentIndex(0);
        // The reader's messages start with the file's name: name it once.
        QString detail = message;
        if (detail.startsWith(path + QStringLiteral(": "))) detail.remove(0, path.size() + 2);
        status_->setText(tr("%1 could not be analysed: %2").arg(path, detail));
        Q_EMIT failed(message);
      });
}

void CheckpointTab::showBusy(bool busy) {
  progress_->setVisible(busy);
  cancel_->setVisible(busy);
}

void CheckpointTab::cancel() {
  cancel_flag_ = true;
}

void CheckpointTab::finishLoad(const QString& path, std::vector<TensorAnalysis> result,
                               bool cancelled) {
  showBusy(false);
  const int n = static_cast<int>(result.size());
  path_ = path;
  shown_ = nullptr;  // it points into the tensors being replaced
  model_->setTensors(std::move(result));
  pages_->setCurrentIndex(n > 0 ? 1 : 0);
  table_->sortByColumn(CheckpointModel::BestSqnr, Qt::AscendingOrder);  // worst first
  table_->resizeColumnsToContents();
  remember(path);
  const QString where = analysis_gpu_available() ? tr("on the GPU") : tr("on the CPU");
  const QString took = QString::number(static_cast<double>(elapsed_.elapsed()) / 1000.0, 'f', 1);
  status_->setText(cancelled ? tr("%1: cancelled after %2 tensors").arg(path).arg(n)
                             : tr("%1: %2 tensors analysed in %3 s %4, worst SQNR first")
                                   .arg(path)
                                   .arg(n)
                                   .arg(took, where));
  if (cancelled) Q_EMIT notice(status_->text());
  if (proxy_->rowCount() > 0) table_->selectRow(0);
  Q_EMIT checkpointLoaded(path, n);
}

void CheckpointTab::selectTensor(const QString& name) {
  for (int r = 0; r < proxy_->rowCount(); ++r) {
    if (proxy_->index(r, CheckpointModel::Name).data().toString() == name) {
      table_->selectRow(r);
      return;
    }
  }
}

void CheckpointTab::showTensor(const TensorAnalysis* t) {
  if (t != shown_) {
    shown_ = t;
    const QSignalBlocker b(recipe_);
    recipe_->clear();
    if (t) {
      for (const auto& r : t->recipes) recipe_->addItem(qs(r.name));
      const int rec = recipe_->findText(qs(t->recommended));
      recipe_->setCurrentIndex(rec >= 0 ? rec : 0);
    }
    model_->setSelectedRecipe(recipe_->currentText());
  }
  if (!t) {
    // Nothing chosen (no file, or one that could not be read): no figures of another.
    hist_bars_->data()->clear();
    hist_->clearItems();
    for (QCPBars* b : chart_bars_) chart_->removePlottable(b);
    chart_bars_.clear();
    chart_->clearItems();
    block_map_->data()->clear();
    blocks_->clearItems();
    for (ExportablePlot* p : plots()) p->replot(QCustomPlot::rpQueuedReplot);
    return;
  }
  // log2 histogram, with each FP8 format's range as a tensorwise scale places it
  // (its largest exponent at the tensor's amax).
  QVector<double> keys, counts;
  for (int b = 0; b < kHistExpBins && b < static_cast<int>(t->log2_hist.size()); ++b) {
    if (t->log2_hist[static_cast<size_t>(b)] == 0) continue;
    keys << static_cast<double>(b + kHistMinExp);
    counts << static_cast<double>(t->log2_hist[static_cast<size_t>(b)]);
  }
  hist_bars_->setData(keys, counts);
  hist_->clearItems();
  // Nothing to place on a log2 axis (empty, all zero, no finite values): say why, no axes.
  const bool has_hist = !keys.isEmpty();
  for (QCPAxis* a : {hist_->xAxis, hist_->yAxis}) a->setVisible(has_hist);
  if (!has_hist) {
    auto* none = new QCPItemText(hist_);
    none->setObjectName(QStringLiteral("noHistogram"));
    none->setClipToAxisRect(false);  // the whole sentence, whatever the plot's margins
    none->position->setType(QCPItemPosition::ptViewportRatio);
    none->position->setCoords(0.5, 0.5);
    none->setText(!t->not_quantized.empty() ? qs(t->not_quantized)
                  : t->numel == 0           ? tr("empty tensor (0 elements)")
                                            : tr("no finite nonzero values"));
    none->setColor(palette().color(QPalette::Disabled, QPalette::WindowText));
  }
  const double top = t->amax > 0 ? std::floor(std::log2(t->amax)) : 0;
  int lane = 0;
  for (Format f : {Format::E4M3FN, Format::E5M2}) {
    if (!has_hist) break;
    const FormatInfo& fi = format_info(f);
    const double span =
        std::floor(std::log2(fi.max_finite)) - std::floor(std::log2(fi.min_subnormal));
    auto* band = new QCPItemRect(hist_);
    band->setPen(Qt::NoPen);
    QColor c = format_color(f);
    c.setAlpha(35);
    band->setBrush(c);
    band->topLeft->setTypeY(QCPItemPosition::ptAxisRectRatio);
    band->bottomRight->setTypeY(QCPItemPosition::ptAxisRectRatio);
    band->topLeft->setCoords(top - span - 0.5, lane == 0 ? 0.0 : 0.5);
    band->bottomRight->setCoords(top + 0.5, lane == 0 ? 0.5 : 1.0);
    auto* label = new QCPItemText(hist_);
    label->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
    label->position->setCoords(top - span + 1, lane == 0 ? 0.05 : 0.55);
    label->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
    label->setText(QString::fromLatin1(fi.name.data()));
    label->setColor(format_color(f));
    ++lane;
  }
  if (has_hist) {
    hist_->rescaleAxes();
    hist_->xAxis->setRange(std::min(hist_->xAxis->range().lower, top - 32), top + 2);
  }
  drawChart(*t);
  // Block errors of the chosen recipe.
  const int ri = recipe_->currentIndex();
  const RecipeResult* chosen = ri >= 0 && ri < static_cast<int>(t->recipes.size())
                                   ? &t->recipes[static_cast<size_t>(ri)]
                                   : nullptr;
  if (chosen) {
    fill_block_map(block_map_, chosen->map_grid.rows, chosen->map_grid.cols, chosen->map_rel_error);
  } else {
    fill_block_map(block_map_, 0, 0, {});
  }
  // No map (an integer tensor, no recipe): say so instead of empty axes and a scale.
  blocks_->clearItems();
  const bool has_map = !block_map_->data()->isEmpty();
  block_map_->setVisible(has_map);
  block_scale_->setVisible(has_map);
  for (QCPAxis* a : {blocks_->xAxis, blocks_->yAxis}) a->setVisible(has_map);
  if (!has_map) {
    auto* none = new QCPItemText(blocks_);
    none->setObjectName(QStringLiteral("noBlockMap"));
    none->setClipToAxisRect(false);  // the whole sentence, whatever the plot's margins
    none->position->setType(QCPItemPosition::ptViewportRatio);
    none->position->setCoords(0.5, 0.5);
    none->setText(!t->not_quantized.empty() ? tr("no block errors: %1").arg(qs(t->not_quantized))
                  : t->recipes.empty()
                      ? tr("no block errors: %1 is not quantized").arg(qs(t->dtype))
                      : tr("no block error map for this recipe"));
    none->setColor(palette().color(QPalette::Disabled, QPalette::WindowText));
  }
  const QString file = QFileInfo(path_).fileName();
  hist_->setExportTitle(tr("log2 histogram of %1 (%2)").arg(qs(t->name), file));
  chart_->setExportTitle(tr("SQNR of every recipe x format: %1 (%2)").arg(qs(t->name), file));
  blocks_->setExportTitle(
      tr("Block errors of %1: %2 (%3)").arg(recipe_->currentText(), qs(t->name), file));
  const RecipeResult* best = nullptr;
  best_sqnr(*t, &best);
  QString caption = tr("<b>%1</b> %2: amax %3, mean %4, std %5, dynamic range %6 bits.")
                        .arg(qs(t->name).toHtmlEscaped(), qs(t->dtype))
                        .arg(t->amax, 0, 'g', 5)
                        .arg(t->mean, 0, 'g', 4)
                        .arg(t->std, 0, 'g', 4)
                        .arg(t->dynamic_range_bits, 0, 'f', 1);
  if (t->nan_count + t->inf_count > 0) {
    caption += tr(" <span style='color:#d62728'><b>%1 NaN, %2 Inf</b></span> (left out of "
                  "every figure).")
                   .arg(t->nan_count)
                   .arg(t->inf_count);
  }
  // Two answers to two questions, each with its criterion.
  if (best) {
    caption += tr(" Highest SQNR of any format: %1 (%2 dB).")
                   .arg(qs(best->name))
                   .arg(best->sqnr_db, 0, 'f', 1);
  }
  if (!t->not_quantized.empty()) {
    caption += tr(" No SQNR and no recommendation: %1.").arg(qs(t->not_quantized).toHtmlEscaped());
  }
  if (!t->recommended.empty()) {
    caption += tr(" <span style='color:%1'>Recommended for E4M3FN (the simplest recipe within "
                  "1 dB of its best, no saturation): <b>%2</b></span>: %3.")
                   .arg(kRecommendedColor.darker(140).name(), qs(t->recommended),
                        qs(t->reason).toHtmlEscaped());
  }
  caption_->setText(caption);
  caption_->setToolTip(
      tr("Highest SQNR: %1.\nRecommended: %2.").arg(tr(kBestCriterion), tr(kRecommendedCriterion)));
  for (ExportablePlot* p : plots()) p->replot(QCustomPlot::rpQueuedReplot);
}

void CheckpointTab::drawChart(const TensorAnalysis& t) {
  for (QCPBars* b : chart_bars_) chart_->removePlottable(b);
  chart_bars_.clear();
  chart_->clearItems();
  // The scalings in the order the analysis ran them, the formats likewise.
  QStringList scalings;
  std::vector<Format> formats;
  for (const auto& r : t.recipes) {
    if (!scalings.contains(scaling_of(r))) scalings << scaling_of(r);
    if (std::find(formats.begin(), formats.end(), r.recipe.format) == formats.end())
      formats.push_back(r.recipe.format);
  }
  double top = 0;
  for (const auto& r : t.recipes) {
    if (std::isfinite(r.sqnr_db)) top = std::max(top, r.sqnr_db);
  }
  const double exact = top > 0 ? top * 1.1 : 100;  // where an exact (+inf dB) bar ends
  const double width = 0.8 / std::max<double>(1, static_cast<double>(formats.size()));
  auto key_of = [&](const RecipeResult& r) {
    const auto fi = std::find(formats.begin(), formats.end(), r.recipe.format) - formats.begin();
    return static_cast<double>(scalings.indexOf(scaling_of(r))) - 0.4 + width * 0.5 +
           width * static_cast<double>(fi);
  };
  auto value_of = [&](const RecipeResult& r) {
    return std::isfinite(r.sqnr_db) ? std::max(0.0, r.sqnr_db) : (r.sqnr_db > 0 ? exact : 0.0);
  };
  for (Format f : formats) {
    auto* bars = new QCPBars(chart_->yAxis, chart_->xAxis);
    bars->setName(format_name(f));
    bars->setWidth(width * 0.95);
    QColor c = format_color(f);
    bars->setPen(QPen(c.darker(120), 0.5));
    c.setAlpha(190);
    bars->setBrush(c);
    for (const auto& r : t.recipes) {
      if (r.recipe.format == f) bars->addData(key_of(r), value_of(r));
    }
    chart_bars_.push_back(bars);
  }
  for (QCPAxis* a : {chart_->xAxis, chart_->yAxis}) a->setVisible(!t.recipes.empty());
  chart_->legend->setVisible(!t.recipes.empty());
  if (t.recipes.empty()) {
    auto* none = new QCPItemText(chart_);
    none->setObjectName(QStringLiteral("noChart"));
    none->setClipToAxisRect(false);  // the whole sentence, whatever the plot's margins
    none->position->setType(QCPItemPosition::ptViewportRatio);
    none->position->setCoords(0.5, 0.5);
    none->setText(!t.not_quantized.empty() ? tr("no SQNR: %1").arg(qs(t.not_quantized))
                                           : tr("no SQNR: %1 is not quantized").arg(qs(t.dtype)));
    none->setColor(palette().color(QPalette::Disabled, QPalette::WindowText));
    return;
  }
  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  for (int i = 0; i < scalings.size(); ++i) ticker->addTick(i, scalings[i]);
  chart_->yAxis->setTicker(ticker);
  chart_->yAxis->setRange(-0.6, static_cast<double>(scalings.size()) - 0.4);
  chart_->xAxis->setRange(0, std::max(1.0, exact) * 1.05);
  // The recommended and the selected recipe: an outline around their bar, explained by
  // two entries of the legend.
  const QString selected = recipe_->currentText();
  const QPen rec_pen(kRecommendedColor.darker(130), 2.5);
  const QPen sel_pen(kSelectedColor, 2.5, Qt::DashLine);
  for (const auto& r : t.recipes) {
    const bool rec = r.name == t.recommended, sel = qs(r.name) == selected;
    if (!rec && !sel) continue;
    const double k = key_of(r), v = value_of(r);
    for (bool mark_rec : {true, false}) {
      if (mark_rec ? !rec : !sel) continue;
      auto* box = new QCPItemRect(chart_);
      box->setObjectName(mark_rec ? QStringLiteral("recommendedMark")
                                  : QStringLiteral("selectedMark"));
      const double grow = mark_rec ? 0.65 : 0.9;  // both visible on one bar
      box->topLeft->setCoords(0, k - width * grow);
      box->bottomRight->setCoords(v, k + width * grow);
      box->setPen(mark_rec ? rec_pen : sel_pen);
      box->setBrush(Qt::NoBrush);
    }
  }
  for (bool mark_rec : {true, false}) {
    auto* entry = new QCPBars(chart_->yAxis, chart_->xAxis);  // no bars: a legend entry
    entry->setName(mark_rec ? tr("recommended") : tr("selected"));
    entry->setPen(mark_rec ? rec_pen : sel_pen);
    entry->setBrush(Qt::NoBrush);
    chart_bars_.push_back(entry);
  }
}

void CheckpointTab::dragEnterEvent(QDragEnterEvent* e) {
  if (e->mimeData()->hasUrls()) e->acceptProposedAction();
}

void CheckpointTab::dropEvent(QDropEvent* e) {
  const auto urls = e->mimeData()->urls();
  if (!urls.isEmpty() && urls.first().isLocalFile()) openCheckpoint(urls.first().toLocalFile());
}

}  // namespace fp8wb
