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
#include <QSortFilterProxyModel>
#include <QSplitter>
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

// "E4M3 1x128": short enough for 30 bars side by side.
QString short_name(const QuantRecipe& r) {
  QString f = QString::fromLatin1(format_info(r.format).name.data());
  f.replace(QLatin1String("FN"), QString());
  return f + QLatin1Char(' ') + QString::fromLatin1(scaling_kind_name(r.kind).data());
}

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
  if (role == Qt::DisplayRole || role == Qt::EditRole || role == Qt::UserRole) {
    switch (index.column()) {
      case Name: return qs(t->name);
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
      case Recommended: return qs(t->recommended);
      default: return {};
    }
  }
  if (role == Qt::ToolTipRole) return t->reason.empty() ? qs(t->name) : qs(t->reason);
  return {};
}

QVariant CheckpointModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* names[] = {
      "tensor",       "dtype",       "shape",          "amax",
      "range (bits)", "best recipe", "best SQNR (dB)", "E4M3 tensorwise (dB)",
      "recommended"};
  return section >= 0 && section < ColumnCount ? tr(names[section]) : QVariant();
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
      blocks_(new ExportablePlot(this)) {
  setAcceptDrops(true);
  auto* open = new QPushButton(tr("Open checkpoint..."), this);
  connect(open, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(
        this, tr("Open checkpoint"), QString(),
        tr("Checkpoints (*.safetensors *.index.json *.pt *.pth *.bin);;All files (*)"));
    if (!path.isEmpty()) openCheckpoint(path);
  });
  recent_->setPlaceholderText(tr("recent checkpoints"));
  recent_->addItems(recentFiles());
  recent_->setCurrentIndex(-1);
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
  connect(recipe_, &QComboBox::currentIndexChanged, this, [this] { showTensor(shown_); });

  hist_->xAxis->setLabel(tr("floor(log2 |x|)"));
  hist_->yAxis->setLabel(tr("elements"));
  hist_bars_ = new QCPBars(hist_->xAxis, hist_->yAxis);
  hist_bars_->setName(tr("log2 histogram"));
  hist_bars_->setWidth(0.9);
  chart_->yAxis->setLabel(tr("SQNR (dB)"));
  chart_bars_ = new QCPBars(chart_->xAxis, chart_->yAxis);
  chart_bars_->setName(tr("SQNR"));
  chart_bars_->setBrush(QColor(0x1f, 0x77, 0xb4, 170));
  blocks_->xAxis->setLabel(tr("block column"));
  blocks_->yAxis->setLabel(tr("block row"));
  block_map_ = new QCPColorMap(blocks_->xAxis, blocks_->yAxis);
  block_map_->setName(tr("block error"));
  auto* scale = new QCPColorScale(blocks_);
  blocks_->plotLayout()->addElement(0, 1, scale);
  scale->axis()->setLabel(tr("relative RMS error"));
  block_map_->setColorScale(scale);
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
      tr("Open a .safetensors checkpoint (or a sharded *.index.json), or drop one "
         "here: every tensor is quantized with every recipe x format."));
  layout->addWidget(status_);
  layout->addWidget(table_, 2);
  caption_->setWordWrap(true);
  layout->addWidget(caption_);
  layout->addLayout(lower, 2);
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
  const QSignalBlocker b(recent_);
  recent_->clear();
  recent_->addItems(r);
  recent_->setCurrentIndex(-1);
}

void CheckpointTab::remember(const QString& path) {
  QStringList r = recentFiles();
  r.removeAll(path);
  r.prepend(path);
  while (r.size() > 10) r.removeLast();
  QSettings().setValue(kRecentKey, r);
  const QSignalBlocker b(recent_);
  recent_->clear();
  recent_->addItems(r);
  recent_->setCurrentIndex(0);
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
        status_->setText(tr("%1 could not be analysed").arg(path));
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
  model_->setTensors(std::move(result));
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
  }
  if (!t) {
    // Nothing chosen (no file, or one that could not be read): no figures of another.
    hist_bars_->data()->clear();
    hist_->clearItems();
    chart_bars_->data()->clear();
    block_map_->data()->clear();
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
  const double top = t->amax > 0 ? std::floor(std::log2(t->amax)) : 0;
  int lane = 0;
  for (Format f : {Format::E4M3FN, Format::E5M2}) {
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
  hist_->rescaleAxes();
  hist_->xAxis->setRange(std::min(hist_->xAxis->range().lower, top - 32), top + 2);
  // Recipe x format comparison.
  QVector<double> x, y;
  QSharedPointer<QCPAxisTickerText> ticks(new QCPAxisTickerText);
  for (size_t i = 0; i < t->recipes.size(); ++i) {
    const auto& r = t->recipes[i];
    x << static_cast<double>(i);
    y << (std::isfinite(r.sqnr_db) ? r.sqnr_db : 0.0);
    ticks->addTick(static_cast<double>(i), short_name(r.recipe));
  }
  chart_bars_->setData(x, y);
  chart_->xAxis->setTicker(ticks);
  chart_->xAxis->setTickLabelRotation(90);
  chart_->rescaleAxes();
  chart_->yAxis->setRangeLower(0);
  // Block errors of the chosen recipe.
  const int ri = recipe_->currentIndex();
  if (ri >= 0 && ri < static_cast<int>(t->recipes.size())) {
    const RecipeResult& r = t->recipes[static_cast<size_t>(ri)];
    fill_block_map(block_map_, r.map_grid.rows, r.map_grid.cols, r.map_rel_error);
  } else {
    fill_block_map(block_map_, 0, 0, {});
  }
  caption_->setText(tr("<b>%1</b> %2: amax %3, mean %4, std %5, dynamic range %6 bits. "
                       "Recommended: <b>%7</b> (%8).")
                        .arg(qs(t->name).toHtmlEscaped(), qs(t->dtype))
                        .arg(t->amax, 0, 'g', 5)
                        .arg(t->mean, 0, 'g', 4)
                        .arg(t->std, 0, 'g', 4)
                        .arg(t->dynamic_range_bits, 0, 'f', 1)
                        .arg(qs(t->recommended.empty() ? std::string("-") : t->recommended),
                             qs(t->reason).toHtmlEscaped()));
  for (ExportablePlot* p : plots()) p->replot(QCustomPlot::rpQueuedReplot);
}

void CheckpointTab::dragEnterEvent(QDragEnterEvent* e) {
  if (e->mimeData()->hasUrls()) e->acceptProposedAction();
}

void CheckpointTab::dropEvent(QDropEvent* e) {
  const auto urls = e->mimeData()->urls();
  if (!urls.isEmpty() && urls.first().isLocalFile()) openCheckpoint(urls.first().toLocalFile());
}

}  // namespace fp8wb
