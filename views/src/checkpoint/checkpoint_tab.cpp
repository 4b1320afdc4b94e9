// CheckpointTab (checkpoint_tab.h): the tab's widgets and layout, the placeholder, the
// recent files (kept in QSettings, read again when shown and opened), drag and drop, and
// the open and analysis of a checkpoint as a BackgroundJob with progress and cancel. The
// selected tensor's plots are drawn in checkpoint_plots.cpp, the table's model is
// checkpoint_model.cpp.
#include "fp8wb/views/checkpoint/checkpoint_tab.h"

#include <QComboBox>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMimeData>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QShowEvent>
#include <QSortFilterProxyModel>
#include <QStackedWidget>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>
#include <optional>

#include "checkpoint/checkpoint_tab_internal.h"
#include "fp8wb/core/checkpoint/open_checkpoint.h"
#include "fp8wb/views/checkpoint/checkpoint_eval_dialog.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/common/file_dialogs.h"
#include "fp8wb/views/common/run_database_guard.h"
#include "run_tabs/run_tab_helpers.h"

namespace fp8wb {
namespace {

const QString kRecentKey = QStringLiteral("checkpoint/recent");

}  // namespace

using namespace checkpoint_detail;  // qs(), recommend_format(), ... (checkpoint_tab_internal.h)

CheckpointTab::CheckpointTab(QWidget* parent)
    : QWidget(parent),
      recent_(new QComboBox(this)),
      filter_(new QLineEdit(this)),
      status_(new QLabel(this)),
      progress_(new QProgressBar(this)),
      cancel_(new QPushButton(tr("Cancel"), this)),
      evaluate_(new QPushButton(tr("Evaluate loss..."), this)),
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
  table_->setTextElideMode(Qt::ElideMiddle);  // a long name or reason: both ends seen
  chart_->setObjectName(QStringLiteral("checkpointSqnrChart"));
  hist_->setObjectName(QStringLiteral("checkpointHistogram"));
  blocks_->setObjectName(QStringLiteral("checkpointBlockMap"));
  recipe_->setObjectName(QStringLiteral("checkpointRecipe"));
  status_->setObjectName(QStringLiteral("checkpointStatus"));
  QPushButton* open = buildControls();
  setUpPlots();
  buildLayout(open);
}

// The open button (returned), recent files, filter, table, progress, Cancel, "Evaluate
// loss..." and the recipe box, with their connections.
QPushButton* CheckpointTab::buildControls() {
  auto* open = new QPushButton(tr("Open checkpoint..."), this);
  connect(open, &QPushButton::clicked, this, [this] {
    const QString path = open_file_name(
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
  filter_->setObjectName(QStringLiteral("checkpointFilter"));
  filter_->setPlaceholderText(tr("filter tensors by name"));
  proxy_->setSourceModel(model_);
  proxy_->setSortRole(Qt::UserRole);
  proxy_->setFilterKeyColumn(CheckpointModel::Name);
  proxy_->setFilterCaseSensitivity(Qt::CaseInsensitive);
  connect(filter_, &QLineEdit::textChanged, this, [this](const QString& text) {
    proxy_->setFilterFixedString(text);
    // No tensor passes: no figures of one that is filtered out, and it is said why.
    if (proxy_->rowCount() == 0 && model_->rowCount() > 0) {
      showTensor(nullptr);
      caption_->setText(tr("No tensor's name contains “%1”.").arg(text.toHtmlEscaped()));
    } else if (!shown_ && proxy_->rowCount() > 0) {
      table_->selectRow(0);
    }
  });
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->setContextMenuPolicy(Qt::CustomContextMenu);
  connect(table_, &QWidget::customContextMenuRequested, this,
          [this](const QPoint& at) { tableMenu()->popup(table_->viewport()->mapToGlobal(at)); });
  progress_->setVisible(false);
  cancel_->setVisible(false);
  connect(cancel_, &QPushButton::clicked, this, &CheckpointTab::cancel);
  evaluate_->setObjectName(QStringLiteral("checkpointEvaluate"));
  evaluate_->setEnabled(false);
  evaluate_->setToolTip(
      tr("What FP8 does to the model's loss on a token file (a Hugging Face "
         "checkpoint: its config.json beside the weights)"));
  connect(evaluate_, &QPushButton::clicked, this, [this] { openEvaluation(); });
  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& cur) {
            showTensor(model_->tensorAt(proxy_->mapToSource(cur).row()));
          });
  connect(recipe_, &QComboBox::currentIndexChanged, this, [this] {
    model_->setSelectedRecipe(recipe_->currentText());
    showTensor(shown_);
  });
  return open;
}

// The histogram, the SQNR chart and the block map: axes, bars, colour scale.
void CheckpointTab::setUpPlots() {
  hist_->xAxis->setLabel(tr("floor(log2 |x|)"));
  hist_->yAxis->setLabel(tr("elements (log scale)"));
  // Exponents are whole numbers: no tick at 0.5.
  set_whole_number_ticks(hist_->xAxis);
  hist_bars_ = new QCPBars(hist_->xAxis, hist_->yAxis);
  // The few values far from the rest (those an FP8 format loses) stay in sight.
  detail::use_log_count_axis(hist_->yAxis, hist_bars_);
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
  // The colour bar spans the map's height, not down beside the axis label under the map
  // ("block column (blocks of 4 x 4)", wider than a narrow map, ran into its bottom).
  auto* group = new QCPMarginGroup(blocks_);
  blocks_->axisRect()->setMarginGroup(QCP::msBottom | QCP::msTop, group);
  block_scale_->setMarginGroup(QCP::msBottom | QCP::msTop, group);
  // Blocks without finite nonzero values (NaN in the map) in grey, apart from the scale.
  QCPColorGradient thermal = thermal_on_white();
  thermal.setNanHandling(QCPColorGradient::nhNanColor);
  thermal.setNanColor(QColor(0xb0, 0xb0, 0xb0));
  block_map_->setGradient(thermal);
  block_map_->setInterpolate(false);
}

// The row of controls over the status line, and the placeholder or the table, its legend,
// the caption and the plots under it.
void CheckpointTab::buildLayout(QPushButton* open) {
  auto* top = new QHBoxLayout;
  top->addWidget(open);
  top->addWidget(recent_, 1);
  top->addWidget(filter_, 1);
  top->addWidget(progress_);
  top->addWidget(cancel_);
  top->addWidget(evaluate_);
  auto* lower = new QHBoxLayout;
  auto* right = new QVBoxLayout;
  auto* pick = new QHBoxLayout;
  pick->addWidget(new QLabel(tr("Block errors of"), this));
  pick->addWidget(recipe_, 1);
  range_ = make_colour_range_box(this);
  connect(range_, &QComboBox::currentIndexChanged, this, [this] { showTensor(shown_); });
  pick->addWidget(range_);
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
  // What the table's colours mark (checkpoint_model.cpp), in the colours themselves.
  auto* legend = new QLabel(this);
  legend->setObjectName(QStringLiteral("checkpointLegend"));
  legend->setWordWrap(true);
  QColor selected = kSelectedColor;
  selected.setAlpha(90);
  const auto swatch = [](const QColor& c) {
    return QStringLiteral("<span style='background-color:%1'>&nbsp;&nbsp;&nbsp;&nbsp;</span>")
        .arg(c.name(QColor::HexArgb));
  };
  legend->setText(tr("%1 a cell naming the recipe chosen under \u201cBlock errors of\u201d "
                     "(below) &nbsp;\u00b7&nbsp; <b style='color:%2'>bold green</b>: the "
                     "recommended recipe &nbsp;\u00b7&nbsp; <b style='color:%4'>bold "
                     "brown</b>: recommended, but it still turns 1% or more of the values into "
                     "0 &nbsp;\u00b7&nbsp; %3 NaN or Inf values")
                      .arg(swatch(selected), kRecommendedColor.darker(140).name(),
                           swatch(QColor(0xd6, 0x27, 0x28, 60)), kLossyRecommendedColor.name()));
  content_layout->addWidget(legend);
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

QMenu* CheckpointTab::tableMenu() {
  if (!table_menu_) {
    table_menu_ = new QMenu(this);
    QAction* csv = table_menu_->addAction(tr("Export CSV…"), this, [this] {
      const QString name = QFileInfo(path_).completeBaseName();
      const QString path = save_file_name(
          this, tr("Export the table"),
          (name.isEmpty() ? QStringLiteral("checkpoint") : name) + QStringLiteral("-tensors.csv"),
          tr("CSV (*.csv)"));
      if (path.isEmpty()) return;
      const QString err = exportTable(path);
      if (err.isEmpty()) {
        Q_EMIT notice(tr("wrote %1").arg(path));
      } else {
        Q_EMIT failed(err);
      }
    });
    csv->setObjectName(QStringLiteral("exportTableCsv"));
  }
  // Nothing to export before a checkpoint is analysed.
  table_menu_->actions().front()->setEnabled(model_->rowCount() > 0);
  return table_menu_;
}

QString CheckpointTab::tableCsv() const {
  // Every row, sorted as the table is, none filtered out.
  QSortFilterProxyModel all;
  all.setSourceModel(model_);
  all.setSortRole(proxy_->sortRole());
  all.sort(proxy_->sortColumn(), proxy_->sortOrder());
  // The columns shown, in the order they are shown.
  QList<int> columns;
  const QHeaderView* header = table_->horizontalHeader();
  for (int v = 0; v < header->count(); ++v) {
    const int c = header->logicalIndex(v);
    if (!table_->isColumnHidden(c)) columns << c;
  }
  QStringList names;
  for (int c : columns) {
    // A name of two lines in the header is one in the CSV's.
    names << model_->headerData(c, Qt::Horizontal, Qt::DisplayRole)
                 .toString()
                 .replace(QLatin1Char('\n'), QLatin1Char(' '));
  }
  // Then what the table says only in part: the recommendation's whole reason (the cell's
  // tooltip) and the recommended recipe's SQNR.
  names << tr("recommendation reason") << tr("recommended SQNR (dB)");
  QString out = csv_line(names) + QLatin1Char('\n');
  for (int r = 0; r < all.rowCount(); ++r) {
    QStringList cells;
    for (int c : columns) cells << all.index(r, c).data(Qt::DisplayRole).toString();
    const int row = all.mapToSource(all.index(r, 0)).row();
    cells << model_->recommendationReason(row) << model_->recommendedSqnr(row);
    out += csv_line(cells) + QLatin1Char('\n');
  }
  return out;
}

QString CheckpointTab::exportTable(const QString& path) const {
  if (model_->rowCount() == 0) return tr("no checkpoint is analysed: there is no table to export");
  return write_csv_file(path, tableCsv());
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

void CheckpointTab::selectShownInRecent() {
  const QSignalBlocker b(recent_);
  recent_->setCurrentIndex(path_.isEmpty() ? -1 : recent_->findText(path_));
}

QString CheckpointTab::refusal(const QString& path) const {
  const QString db = run_database_ ? run_database_() : QString();
  if (db.isEmpty()) return {};
  const QString why = tr("opening it here could lose the runs being written to it");
  if (const QString file = run_database_file_of(path, db); !file.isEmpty()) {
    // Named once where it is named as the database is; a link is named with what it is.
    if (QFileInfo(path).absoluteFilePath() == QFileInfo(file).absoluteFilePath()) {
      return tr("%1 was not opened: it is a run database file this window has open, not a "
                "checkpoint (%2)")
          .arg(path, why);
    }
    return tr("%1 was not opened: it is the run database file %2, which this window has "
              "open, not a checkpoint (%3)")
        .arg(path, file, why);
  }
  for (const QString& shard : checkpoint_shards(path)) {
    if (const QString file = run_database_file_of(shard, db); !file.isEmpty()) {
      return tr("%1 was not opened: its shard %2 is the run database file %3, which this "
                "window has open, not a checkpoint (%4)")
          .arg(path, shard, file, why);
    }
  }
  return {};
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

void CheckpointTab::openCheckpoint(const QString& given) {
  // By its absolute path: what the recent files keep opens from any working folder.
  const QString path = given.isEmpty() ? given : QFileInfo(given).absoluteFilePath();
  if (busy()) {
    Q_EMIT failed(tr("a checkpoint is being analysed: cancel it first"));
    return;
  }
  if (const QString why = refusal(path); !why.isEmpty()) {
    selectShownInRecent();  // what is shown stays, and the box names it
    Q_EMIT failed(why);
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
    QString unindexed;  // what the shards hold beyond the index's weight_map, said
    int cut_off = 0;    // tensors that a truncated file (or shard) cuts off
    // A file that could not be read: which (the checkpoint or one of its shards) and why.
    std::optional<PathError> refused;
  };
  job_.run(
      [this, path] {
        // The tab outlives this work (its destructor waits for it).
        std::shared_ptr<Checkpoint> ckpt;
        try {
          ckpt = open_any_checkpoint(path.toStdString());
        } catch (const PathError& e) {
          Analysed a;
          a.refused = e;
          return a;
        }
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
        o.recommend_format = recommend_format();
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
        for (const Checkpoint::Ref& r : ckpt->tensors()) a.cut_off += r.entry->cut_off ? 1 : 0;
        if (const auto& extra = ckpt->unindexed(); !extra.empty()) {
          const QString count =
              extra.size() == 1 ? tr("1 tensor") : tr("%1 tensors").arg(extra.size());
          a.unindexed =
              tr("%1 in the shards not in the index's weight_map, not analysed "
                 "(first: %2 in %3)")
                  .arg(count, shown_name(extra.front().first), shown_name(extra.front().second));
        }
        return a;
      },
      [this, path](Analysed a) {
        if (a.refused) {
          const PathError& e = *a.refused;
          // The file named once: the checkpoint, or the shard of it that failed.
          const QString file = QString::fromStdString(e.path);
          const QString why = QString::fromStdString(e.reason);
          if (file.isEmpty() && why.contains(path))  // a message whose parts are not known
            refuse(tr("Not analysed: %1").arg(why));
          else if (why.startsWith(QStringLiteral("is ")))  // what the file is: "PATH is a FIFO"
            refuse(tr("Not analysed: %1 %2").arg(file.isEmpty() ? path : file, why));
          else if (file.isEmpty() || file == path)
            refuse(tr("%1 could not be analysed: %2").arg(path, why));
          else
            refuse(tr("%1 could not be analysed: %2: %3").arg(path, file, why));
          return;
        }
        finishLoad(path, std::move(a.tensors), a.cancelled, a.unindexed, a.cut_off);
      },
      [this, path](const QString& message) {
        refuse(tr("%1 could not be analysed: %2").arg(path, message));
      });
}

void CheckpointTab::refuse(const QString& text) {
  showBusy(false);
  // The analysis shown before stays (a failed open costs nothing), and the status line and
  // the box both name the checkpoint it belongs to.
  selectShownInRecent();
  status_->setText(path_.isEmpty() ? text : text + tr(" (still showing %1)").arg(path_));
  Q_EMIT failed(text);
}

void CheckpointTab::showBusy(bool busy) {
  progress_->setVisible(busy);
  cancel_->setVisible(busy);
}

void CheckpointTab::cancel() {
  cancel_flag_ = true;
}

void CheckpointTab::finishLoad(const QString& path, std::vector<TensorAnalysis> result,
                               bool cancelled, const QString& note, int cut_off) {
  showBusy(false);
  const int n = static_cast<int>(result.size());
  const auto unknown = std::count_if(result.begin(), result.end(),
                                     [](const TensorAnalysis& a) { return !a.values_known; });
  path_ = path;
  // No figures of the tensors being replaced (shown_ points into them): where no row is
  // chosen below (none passes the filter), none stay on show.
  showTensor(nullptr);
  model_->setTensors(std::move(result));
  pages_->setCurrentIndex(n > 0 ? 1 : 0);
  table_->sortByColumn(CheckpointModel::BestSqnr, Qt::AscendingOrder);  // worst first
  table_->resizeColumnsToContents();
  // No column wider than kMaxColumn (a name of hundreds of characters, a long reason): the
  // others stay in view; the cell is cut in the middle, its tooltip whole.
  constexpr int kMaxColumn = 420;
  for (int c = 0; c < model_->columnCount(); ++c)
    table_->setColumnWidth(c, std::min(table_->columnWidth(c), kMaxColumn));
  remember(path);
  const bool evaluable = !CheckpointEvalDialog::hfFolderOf(path).isEmpty();
  evaluate_->setEnabled(evaluable);
  evaluate_->setToolTip(evaluable ? tr("What FP8 does to the model's loss on a token file")
                                  : tr("Needs a Hugging Face checkpoint: a config.json beside "
                                       "the weights"));
  const QString where = analysis_gpu_available() ? tr("on the GPU") : tr("on the CPU");
  const QString took = QString::number(static_cast<double>(elapsed_.elapsed()) / 1000.0, 'f', 1);
  const QString count = n == 1 ? tr("1 tensor") : tr("%1 tensors").arg(n);
  // A file without tensors says so, as `fp8wb inspect` does, not "0 tensors analysed".
  QString status =
      cancelled ? tr("%1: cancelled after %2").arg(path, count)
      : n == 0  ? tr("%1: no tensors in this file").arg(path)
                : tr("%1: %2 analysed in %3 s %4, worst SQNR first").arg(path, count, took, where);
  // Tensors whose values could not be read: counted where it is seen first, not only in
  // each one's reason; those a file cut short cuts off under the cause, said once.
  if (unknown > cut_off)
    status += tr("; %n with values that could not be read (see their rows)", "",
                 static_cast<int>(unknown) - cut_off);
  if (cut_off > 0)
    status += tr("; the file is truncated: %1 cut off (see their rows)")
                  .arg(cut_off == 1 ? tr("1 tensor") : tr("%1 tensors").arg(cut_off));
  if (!note.isEmpty()) status += tr("; ") + note;
  status_->setText(status);
  if (cancelled) Q_EMIT notice(status_->text());
  if (proxy_->rowCount() > 0) table_->selectRow(0);
  Q_EMIT checkpointLoaded(path, n);
}

CheckpointEvalDialog* CheckpointTab::openEvaluation() {
  const QString hf = CheckpointEvalDialog::hfFolderOf(path_);
  if (hf.isEmpty()) return nullptr;
  auto* d = new CheckpointEvalDialog(hf, this);
  d->setAttribute(Qt::WA_DeleteOnClose);
  d->show();
  return d;
}

void CheckpointTab::selectTensor(const QString& name) {
  for (int r = 0; r < proxy_->rowCount(); ++r) {
    if (proxy_->index(r, CheckpointModel::Name).data(Qt::UserRole).toString() == name) {
      table_->selectRow(r);
      return;
    }
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
