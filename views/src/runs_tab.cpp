#include "fp8wb/views/runs_tab.h"

#include <QFile>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <sstream>

#include "fp8wb/views/background_read.h"
#include "fp8wb/views/engine_controller.h"
#include "fp8wb/views/exportable_plot.h"

namespace fp8wb {
namespace {
QString qs(const std::string& s) {
  return QString::fromStdString(s);
}
}  // namespace

void add_loss_curve(ExportablePlot* plot, const RunStore& store, int64_t run_id,
                    const QString& name, int n) {
  static const QColor colours[] = {QColor(0x1f, 0x77, 0xb4), QColor(0xd6, 0x27, 0x28),
                                   QColor(0x2c, 0xa0, 0x2c), QColor(0xff, 0x7f, 0x0e),
                                   QColor(0x94, 0x67, 0xbd), QColor(0x8c, 0x56, 0x4b)};
  QVector<double> x, y;
  for (const SeriesPoint& p : store.series(run_id, "loss")) {
    if (!std::isfinite(p.value)) continue;
    x << static_cast<double>(p.step);
    y << p.value;
  }
  QCPGraph* g = plot->addGraph();
  g->setName(name);
  g->setPen(QPen(colours[n % 6], 1.5));
  g->setData(x, y, true);
}

RunsTab::RunsTab(EngineController* engine, QWidget* parent)
    : QWidget(parent),
      engine_(engine),
      model_(new RunListModel(this)),
      view_(new QTableView(this)),
      overlay_(new ExportablePlot(this)),
      status_(new QLabel(this)) {
  view_->setModel(model_);
  view_->setSelectionBehavior(QAbstractItemView::SelectRows);
  view_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  view_->horizontalHeader()->setStretchLastSection(true);
  view_->verticalHeader()->hide();
  overlay_->xAxis->setLabel(tr("step"));
  overlay_->yAxis->setLabel(tr("loss"));
  overlay_->legend->setVisible(false);  // shown once curves are overlaid
  auto* buttons = new QHBoxLayout;
  auto button = [&](const QString& text, auto fn) {
    auto* b = new QPushButton(text, this);
    connect(b, &QPushButton::clicked, this, fn);
    buttons->addWidget(b);
    return b;
  };
  button(tr("Refresh"), [this] { status_->setText(reload()); });
  button(tr("Open"), [this] {
    const auto ids = selectedIds();
    if (!ids.empty()) Q_EMIT openRequested(ids.front());
  });
  button(tr("Overlay loss curves"), [this] { overlay(selectedIds()); });
  button(tr("Rename..."), [this] {
    const auto ids = selectedIds();
    if (ids.empty()) return;
    bool ok = false;
    const QString name = QInputDialog::getText(this, tr("Rename run"), tr("New name:"),
                                               QLineEdit::Normal, QString(), &ok);
    if (!ok || name.trimmed().isEmpty()) return;
    try {
      engine_->store().rename_run(ids.front(), name.trimmed().toStdString());
    } catch (const std::exception& e) {
      status_->setText(QString::fromStdString(e.what()));
    }
    reload();
  });
  button(tr("Delete"), [this] {
    const auto ids = selectedIds();
    if (ids.empty()) return;
    if (QMessageBox::question(this, tr("Delete runs"),
                              tr("Delete %n run(s) and everything recorded with them?", "",
                                 static_cast<int>(ids.size()))) != QMessageBox::Yes)
      return;
    try {
      for (int64_t id : ids) engine_->store().delete_run(id);
    } catch (const std::exception& e) {
      status_->setText(QString::fromStdString(e.what()));
    }
    reload();
  });
  button(tr("Export CSV..."), [this] {
    const auto ids = selectedIds();
    if (ids.empty()) return;
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Export run"), QStringLiteral("run%1.csv").arg(ids.front()), tr("CSV (*.csv)"));
    if (!path.isEmpty()) status_->setText(exportCsv(ids.front(), path));
  });
  buttons->addStretch(1);
  connect(view_, &QTableView::doubleClicked, this, [this](const QModelIndex& i) {
    if (const RunInfo* r = model_->runAt(i.row())) Q_EMIT openRequested(r->id);
  });
  // The list follows the database by itself: runs other processes start, their steps,
  // how they end. Read off the GUI thread, once a second while the tab is shown.
  auto* poll = new QTimer(this);
  poll->setInterval(1000);
  connect(poll, &QTimer::timeout, this, [this] {
    if (isVisible()) refreshInBackground();
  });
  poll->start();
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(buttons);
  layout->addWidget(status_);
  layout->addWidget(view_, 1);
  layout->addWidget(overlay_, 1);
}

void RunsTab::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  status_->setText(reload());
}

namespace {

struct RunList {
  std::vector<RunInfo> runs;
  std::vector<double> final_loss;
};

RunList read_run_list(const RunStore& s) {
  RunList l;
  l.runs = s.runs();
  for (const RunInfo& r : l.runs) {
    const auto v = s.series(r.id, "loss");
    l.final_loss.push_back(v.empty() ? NAN : v.back().value);
  }
  return l;
}

}  // namespace

QString RunsTab::reload() {
  try {
    RunList l = read_run_list(engine_->store());
    model_->setRuns(std::move(l.runs), std::move(l.final_loss));
    view_->resizeColumnsToContents();
    return tr("%n run(s) in %1", "", model_->rowCount()).arg(engine_->databasePath());
  } catch (const std::exception& e) {
    return QString::fromStdString(e.what());
  }
}

void RunsTab::refreshInBackground() {
  if (refreshing_) return;
  refreshing_ = true;
  const std::string path = engine_->databasePath().toStdString();
  read_in_background<RunList>(
      this,
      [path] {
        // A connection of its own: a read that waits on a busy database waits here.
        const auto store = RunStore::open_read_only(path);
        return read_run_list(*store);
      },
      [this](RunList l) {
        refreshing_ = false;
        const int live = static_cast<int>(
            std::count_if(l.runs.begin(), l.runs.end(), [](const RunInfo& r) { return r.live; }));
        model_->setRuns(std::move(l.runs), std::move(l.final_loss));
        status_->setText(
            tr("%n run(s) in %1", "", model_->rowCount()).arg(engine_->databasePath()) +
            (live > 0 ? tr(", %n being written now (live)", "", live) : QString()));
      },
      [this](const QString&) { refreshing_ = false; });
}

std::vector<int64_t> RunsTab::selectedIds() const {
  std::vector<int64_t> ids;
  for (const QModelIndex& i : view_->selectionModel()->selectedRows()) {
    if (const RunInfo* r = model_->runAt(i.row())) ids.push_back(r->id);
  }
  return ids;
}

void RunsTab::overlay(const std::vector<int64_t>& ids) {
  overlay_->clearGraphs();
  int k = 0;
  try {
    for (int64_t id : ids) {
      const auto info = engine_->store().run(id);
      if (!info) continue;
      add_loss_curve(overlay_, engine_->store(), id,
                     QStringLiteral("%1: %2").arg(id).arg(qs(info->name)), k++);
    }
  } catch (const std::exception& e) {
    status_->setText(QString::fromStdString(e.what()));
  }
  overlay_->legend->setVisible(overlay_->graphCount() > 0);
  overlay_->rescaleAxes();
  overlay_->replot(QCustomPlot::rpQueuedReplot);
}

QString RunsTab::exportCsv(int64_t id, const QString& path) {
  std::ostringstream csv;
  try {
    write_run_csv(engine_->store(), id, csv);
  } catch (const std::exception& e) {
    return QString::fromStdString(e.what());
  }
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
    return tr("cannot write %1: %2").arg(path, f.errorString());
  const std::string text = csv.str();
  if (f.write(text.data(), static_cast<qint64>(text.size())) != static_cast<qint64>(text.size()) ||
      !f.flush())
    return tr("writing %1 failed: %2").arg(path, f.errorString());
  return tr("wrote run %1 to %2").arg(id).arg(path);
}

}  // namespace fp8wb
