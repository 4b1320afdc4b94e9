#include "fp8wb/views/runs_tab.h"

#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
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

#include "fp8wb/core/final_loss.h"
#include "fp8wb/views/engine_controller.h"
#include "fp8wb/views/exportable_plot.h"
#include "fp8wb/views/loss_curves.h"

namespace fp8wb {

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
  button(tr("Refresh"), [this] { reload(); });
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
      engine_->store().flush();
    } catch (const std::exception& e) {
      fail(QString::fromStdString(e.what()));
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
      engine_->store().flush();
    } catch (const std::exception& e) {
      fail(QString::fromStdString(e.what()));
    }
    reload();
  });
  button(tr("Export CSV..."), [this] {
    const auto ids = selectedIds();
    if (ids.empty()) return;
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Export run"), QStringLiteral("run%1.csv").arg(ids.front()), tr("CSV (*.csv)"));
    if (!path.isEmpty()) exportCsv(ids.front(), path);
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
  reload();
}

QString RunsTab::statusText() const {
  return status_->text();
}

QString RunsTab::fail(const QString& message) {
  Q_EMIT failed(message);
  return message;
}

namespace {

struct RunList {
  std::vector<RunInfo> runs;
  std::vector<double> final_loss;
};

// On a connection of its own: a read that waits on a busy database waits there. A
// database not created yet holds no runs.
RunList read_run_list(const std::string& path) {
  RunList l;
  if (!QFileInfo::exists(QString::fromStdString(path))) return l;
  const auto s = RunStore::open_read_only(path);
  l.runs = s->runs();
  for (const RunInfo& r : l.runs) {
    l.final_loss.push_back(final_loss(*s, r).loss);
  }
  return l;
}

}  // namespace

void RunsTab::reload() {
  const std::string path = engine_->databasePath().toStdString();
  if (model_->rowCount() == 0)
    status_->setText(tr("reading the runs in %1...").arg(engine_->databasePath()));
  list_job_.run([path] { return read_run_list(path); },
                [this](RunList l) {
                  const int live = static_cast<int>(std::count_if(
                      l.runs.begin(), l.runs.end(), [](const RunInfo& r) { return r.live; }));
                  model_->setRuns(std::move(l.runs), std::move(l.final_loss));
                  view_->resizeColumnsToContents();
                  status_->setText(
                      tr("%n run(s) in %1", "", model_->rowCount()).arg(engine_->databasePath()) +
                      (live > 0 ? tr(", %n being written now (live)", "", live) : QString()));
                  Q_EMIT reloaded();
                },
                [this](const QString& message) {
                  status_->setText(tr("the runs could not be read"));
                  fail(message);
                });
}

void RunsTab::refreshInBackground() {
  if (!list_job_.busy()) reload();
}

std::vector<int64_t> RunsTab::selectedIds() const {
  std::vector<int64_t> ids;
  for (const QModelIndex& i : view_->selectionModel()->selectedRows()) {
    if (const RunInfo* r = model_->runAt(i.row())) ids.push_back(r->id);
  }
  return ids;
}

void RunsTab::overlay(const std::vector<int64_t>& ids) {
  std::vector<LossCurve> curves;
  for (int64_t id : ids) {
    LossCurve c;
    c.run_id = id;
    c.colour = static_cast<int>(curves.size());
    curves.push_back(std::move(c));
  }
  const std::string path = engine_->databasePath().toStdString();
  curves_job_.run(
      [path, curves] {
        std::vector<LossCurve> read = read_loss_curves(path, curves);
        for (size_t k = 0; k < read.size(); ++k) read[k].colour = static_cast<int>(k);
        return read;
      },
      [this](std::vector<LossCurve> c) {
        show_loss_curves(overlay_, c);
        Q_EMIT curvesShown();
      },
      [this](const QString& message) { fail(message); });
}

QString RunsTab::exportCsv(int64_t id, const QString& path) {
  std::ostringstream csv;
  try {
    write_run_csv(engine_->store(), id, csv);
  } catch (const std::exception& e) {
    return fail(QString::fromStdString(e.what()));
  }
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
    return fail(tr("cannot write %1: %2").arg(path, f.errorString()));
  const std::string text = csv.str();
  if (f.write(text.data(), static_cast<qint64>(text.size())) != static_cast<qint64>(text.size()) ||
      !f.flush())
    return fail(tr("writing %1 failed: %2").arg(path, f.errorString()));
  status_->setText(tr("wrote run %1 to %2").arg(id).arg(path));
  return status_->text();
}

}  // namespace fp8wb
