#include "fp8wb/views/runs/runs_tab.h"

#include <QFile>
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

#include "fp8wb/core/sweep/final_loss.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/common/file_dialogs.h"
#include "fp8wb/views/common/loss_curves.h"
#include "fp8wb/views/common/run_database_guard.h"
#include "fp8wb/views/common/store_reader.h"
#include "fp8wb/views/run_panel/engine_controller.h"

namespace fp8wb {
namespace {
// Pixels: wider names are elided in the middle (the whole name is in the tooltip); where
// the columns would not fit the table's width, the name gives up width down to the least.
constexpr int kNameColumnMaxWidth = 320;
constexpr int kNameColumnMinWidth = 120;
// Every column as wide as its header and its cells (the name's capped): also with no runs
// listed, where the headers alone would otherwise be cut to the default width.
// The last column then fills the table's width again (resizing it to its contents ends
// its stretch, which leaves a gap at the right).
void fit_columns(QTableView* view) {
  QHeaderView* h = view->horizontalHeader();
  h->setStretchLastSection(false);  // the last column as wide as its contents, for the sum
  view->resizeColumnsToContents();
  view->setColumnWidth(RunListModel::Name,
                       std::min(view->columnWidth(RunListModel::Name), kNameColumnMaxWidth));
  // Every column in view without scrolling where the name can give the width (a window
  // 1400 px wide scrolled to reach the source).
  if (const int over = h->length() - view->viewport()->width(); over > 0) {
    const int name = view->columnWidth(RunListModel::Name);
    view->setColumnWidth(RunListModel::Name, std::max(kNameColumnMinWidth, name - over));
  }
  h->setStretchLastSection(true);
}
}  // namespace

RunsTab::RunsTab(EngineController* engine, QWidget* parent)
    : QWidget(parent),
      engine_(engine),
      model_(new RunListModel(this)),
      view_(new QTableView(this)),
      overlay_(new ExportablePlot(this)),
      status_(new QLabel(this)) {
  view_->setObjectName(QStringLiteral("runs"));
  view_->setModel(model_);
  view_->setSelectionBehavior(QAbstractItemView::SelectRows);
  view_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  view_->horizontalHeader()->setStretchLastSection(true);
  view_->verticalHeader()->hide();
  view_->setTextElideMode(Qt::ElideMiddle);  // a long name keeps the other columns in view
  fit_columns(view_);                        // the headers whole before the first list
  overlay_->xAxis->setLabel(tr("step"));
  set_whole_number_ticks(overlay_->xAxis);
  overlay_->setEmptyHint(
      tr("Select runs in the list and press Overlay loss curves\nto compare "
         "their loss"));
  overlay_->yAxis->setLabel(tr("loss"));
  overlay_->legend->setVisible(false);  // shown once curves are overlaid
  auto* buttons = new QHBoxLayout;
  auto button = [&](const char* name, const QString& text, auto fn) {
    auto* b = new QPushButton(text, this);
    b->setObjectName(QLatin1String(name));
    connect(b, &QPushButton::clicked, this, fn);
    buttons->addWidget(b);
    return b;
  };
  button("refresh", tr("Refresh"), [this] { reload(); });
  button("open", tr("Open"), [this] {
    const auto ids = selectedIds();
    if (!ids.empty()) Q_EMIT openRequested(ids.front());
  });
  button("overlay", tr("Overlay loss curves"), [this] { overlay(selectedIds()); });
  rename_ = button("rename", tr("Rename..."), [this] {
    const auto ids = selectedIds();
    if (ids.empty()) return;
    const int64_t id = ids.front();
    QString current;
    for (int row = 0; row < model_->rowCount(); ++row) {
      if (const RunInfo* r = model_->runAt(row); r && r->id == id)
        current = QString::fromStdString(r->name);
    }
    // The editor holds the run's name; the list keeps its selection afterwards.
    auto* d = new QInputDialog(this);
    d->setObjectName(QStringLiteral("rename-run"));
    d->setAttribute(Qt::WA_DeleteOnClose);
    d->setWindowTitle(tr("Rename run %1").arg(id));
    d->setLabelText(tr("New name:"));
    d->setTextValue(current);
    connect(d, &QInputDialog::textValueSelected, this, [this, id](const QString& text) {
      const QString name = text.trimmed();
      if (name.isEmpty()) {
        // Said, not passed over: the editor closed, and the run seemingly kept its name.
        fail(tr("Run %1 was not renamed: a run's name cannot be empty").arg(id));
        return;
      }
      try {
        engine_->store().rename_run(id, name.toStdString());
        engine_->store().flush();
      } catch (const std::exception& e) {
        fail(QString::fromStdString(e.what()));
      }
      reload();
    });
    d->open();
  });
  delete_ = button("delete", tr("Delete"), [this] {
    const auto ids = selectedIds();
    if (ids.empty()) return;
    // Named by id and name; a run being written is refused before anything is asked.
    // A trial of a sweep says so: the sweep's heatmap loses that point's figure.
    QStringList named, live;
    for (int row = 0; row < model_->rowCount(); ++row) {
      const RunInfo* r = model_->runAt(row);
      if (!r || std::find(ids.begin(), ids.end(), r->id) == ids.end()) continue;
      const QString n = tr("%1 (%2)").arg(r->id).arg(QString::fromStdString(r->name));
      named << (r->parent_sweep > 0 ? n + QStringLiteral(": ") + sweepOf(r->parent_sweep) : n);
      if (r->live) live << n;
    }
    if (!live.isEmpty()) {
      fail(tr("Not deleted: run %1 is being written now (live): stop it first where it was "
              "started, then delete it")
               .arg(live.join(QStringLiteral(", "))));
      return;
    }
    auto* box = new QMessageBox(QMessageBox::Question, tr("Delete runs"),
                                tr("Delete %n run(s) and everything recorded with them?", "",
                                   static_cast<int>(ids.size())) +
                                    QStringLiteral("\n\n") + named.join(QLatin1Char('\n')),
                                QMessageBox::Yes | QMessageBox::No, this);
    box->setObjectName(QStringLiteral("delete-runs"));
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->setDefaultButton(QMessageBox::No);
    connect(box, &QMessageBox::finished, this, [this, ids](int result) {
      if (result != QMessageBox::Yes) return;
      try {
        engine_->deleteRuns(ids);  // the Sweeps tab follows
      } catch (const std::exception& e) {
        fail(QString::fromStdString(e.what()));
      }
      reload();
    });
    box->open();
  });
  button("export", tr("Export CSV..."), [this] {
    const auto ids = selectedIds();
    if (ids.empty()) return;
    const QString path = save_file_name(
        this, tr("Export run"), QStringLiteral("run%1.csv").arg(ids.front()), tr("CSV (*.csv)"));
    if (!path.isEmpty()) exportCsv(ids.front(), path);
  });
  buttons->addStretch(1);
  connect(view_, &QTableView::doubleClicked, this, [this](const QModelIndex& i) {
    if (const RunInfo* r = model_->runAt(i.row())) Q_EMIT openRequested(r->id);
  });
  // Another database's list that cannot be read is said again.
  // The overlaid curves are the other database's runs (its ids name others here): gone.
  connect(engine_, &EngineController::databaseChanged, this, [this] {
    unreadable_said_.clear();
    curves_job_.drop();
    overlaid_.clear();
    overlaid_names_.clear();
    show_loss_curves(overlay_, {});
  });
  // A database that cannot be written takes no renames or deletes: the buttons say why,
  // as Start does.
  connect(engine_, &EngineController::readOnlyChanged, this, &RunsTab::updateWriteButtons);
  updateWriteButtons();
  // The list follows the database by itself: runs other processes start, their steps,
  // how they end. Read off the GUI thread, once a second while the tab is shown.
  poll_ = new QTimer(this);
  poll_->setInterval(1000);
  connect(poll_, &QTimer::timeout, this, [this] {
    if (!isVisible() || list_job_.busy()) return;
    ++poll_reads_;
    reload();
  });
  poll_->start();
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(buttons);
  status_->setObjectName(QStringLiteral("runs-status"));
  status_->setWordWrap(true);  // why a database cannot be read is long: said whole
  layout->addWidget(status_);
  layout->addWidget(view_, 1);
  layout->addWidget(overlay_, 1);
}

QString RunsTab::sweepOf(int64_t sweep_id) {
  QString name;
  try {
    if (const auto s = engine_->store().sweep(sweep_id); s && s->name != "sweep")
      name = QString::fromStdString(s->name);
  } catch (const std::exception&) {
    // Named by its number alone.
  }
  return name.isEmpty()
             ? tr("a trial of sweep #%1, whose heatmap will show it as deleted").arg(sweep_id)
             : tr("a trial of sweep #%1 \"%2\", whose heatmap will show it as deleted")
                   .arg(sweep_id)
                   .arg(name);
}

void RunsTab::updateWriteButtons() {
  const QString read_only = engine_->readOnlyReason();
  for (QPushButton* b : {rename_, delete_}) {
    b->setEnabled(read_only.isEmpty());
    b->setToolTip(read_only);
  }
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
  std::vector<FinalLoss> finals;
};

// A database not created yet holds no runs.
RunList read_run_list(const std::string& path) {
  RunList l;
  const auto s = open_store_reader_if_made(path);
  if (!s) return l;
  l.runs = s->runs();
  for (const RunInfo& r : l.runs) {
    l.finals.push_back(final_loss(*s, r));
  }
  return l;
}

}  // namespace

namespace {

// The overlaid runs' steps and status, as listed: a change (a live run's new steps, its
// end) redraws the overlay.
QString overlay_state(const std::vector<int64_t>& ids, const std::vector<const RunInfo*>& runs) {
  QString s;
  for (int64_t id : ids) {
    for (const RunInfo* r : runs) {
      if (r->id != id) continue;
      s += QStringLiteral("%1:%2:%3\n")
               .arg(id)
               .arg(r->last_step)
               .arg(QLatin1String(run_status_name(r->status)));
    }
  }
  return s;
}

}  // namespace

void RunsTab::reload() {
  const std::string path = engine_->databasePath().toStdString();
  if (model_->rowCount() == 0)
    status_->setText(tr("reading the runs in %1...").arg(engine_->databasePath()));
  list_job_.run(
      [path] { return read_run_list(path); },
      [this](RunList l) {
        const int live = static_cast<int>(
            std::count_if(l.runs.begin(), l.runs.end(), [](const RunInfo& r) { return r.live; }));
        // The overlaid curves follow the list: a deleted run leaves the plot, a
        // renamed one is labelled anew.
        std::vector<int64_t> still;
        QString shown;
        for (int64_t id : overlaid_) {
          for (const RunInfo& r : l.runs) {
            if (r.id != id) continue;
            still.push_back(id);
            shown += QStringLiteral("%1: %2\n").arg(id).arg(QString::fromStdString(r.name));
          }
        }
        // A live run's curve follows it: read again as its steps grow.
        std::vector<const RunInfo*> listed;
        for (const RunInfo& r : l.runs) listed.push_back(&r);
        const bool redraw_overlay =
            !overlaid_.empty() &&
            (shown != overlaid_names_ || overlay_state(overlaid_, listed) != overlaid_state_);
        // The selection stays on the same runs, wherever their rows move.
        const std::vector<int64_t> selected = selectedIds();
        model_->setRuns(std::move(l.runs), std::move(l.finals));
        selectIds(selected);
        fit_columns(view_);
        status_->setText(
            tr("%n run(s) in %1", "", model_->rowCount()).arg(engine_->databasePath()) +
            (live > 0 ? tr(", %n being written now (live)", "", live) : QString()));
        if (redraw_overlay) overlay(still);
        Q_EMIT reloaded();
      },
      [this, db = engine_->databasePath()](const QString& message) {
        // An empty list, and why, in the tab; failed() says it once a database:
        // the tab reads the list again each time it is shown and every second,
        // and a message each time would follow the user for as long as it is.
        model_->setRuns({}, {});
        fit_columns(view_);
        status_->setText(tr("the runs in %1 could not be read: %2").arg(db, message));
        if (unreadable_said_ == db) return;
        unreadable_said_ = db;
        fail(message);
      });
}

void RunsTab::refreshInBackground() {
  if (!list_job_.busy()) reload();
}

void RunsTab::setPollInterval(int ms) {
  poll_->setInterval(ms);
}

int RunsTab::pollInterval() const {
  return poll_->interval();
}

std::vector<int64_t> RunsTab::selectedIds() const {
  std::vector<int64_t> ids;
  for (const QModelIndex& i : view_->selectionModel()->selectedRows()) {
    if (const RunInfo* r = model_->runAt(i.row())) ids.push_back(r->id);
  }
  return ids;
}

void RunsTab::selectIds(const std::vector<int64_t>& ids) {
  QItemSelection keep;
  int first = -1;
  for (int row = 0; row < model_->rowCount(); ++row) {
    const RunInfo* r = model_->runAt(row);
    if (r && std::find(ids.begin(), ids.end(), r->id) != ids.end()) {
      keep.select(model_->index(row, 0), model_->index(row, RunListModel::ColumnCount - 1));
      if (first < 0) first = row;
    }
  }
  // The current row too (the keyboard's place), where the list was read anew.
  if (first >= 0)
    view_->selectionModel()->setCurrentIndex(model_->index(first, 0),
                                             QItemSelectionModel::NoUpdate);
  view_->selectionModel()->select(keep, QItemSelectionModel::ClearAndSelect);
}

void RunsTab::overlay(const std::vector<int64_t>& ids) {
  overlaid_ = ids;
  std::vector<const RunInfo*> listed;
  for (int row = 0; row < model_->rowCount(); ++row) listed.push_back(model_->runAt(row));
  overlaid_state_ = overlay_state(ids, listed);
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
        // What is drawn: each run's id and name (the list redraws it when they change).
        overlaid_.clear();
        overlaid_names_.clear();
        for (const LossCurve& curve : c) {
          overlaid_.push_back(curve.run_id);
          overlaid_names_ += curve.name + QLatin1Char('\n');
        }
        show_loss_curves(overlay_, c);
        Q_EMIT curvesShown();
      },
      [this](const QString& message) { fail(message); });
}

QString RunsTab::exportCsv(int64_t id, const QString& path) {
  // Never over the run database (or any SQLite database, or one of its files): refused
  // before the run is read.
  if (const QString no = output_refusal(path); !no.isEmpty()) return fail(no);
  std::ostringstream csv;
  try {
    write_run_csv(engine_->store(), id, csv);
  } catch (const std::exception& e) {
    return fail(QString::fromStdString(e.what()));
  }
  const std::string text = csv.str();
  if (const QString err =
          write_output_file(path, QByteArray(text.data(), static_cast<qsizetype>(text.size())));
      !err.isEmpty())
    return fail(err);
  status_->setText(tr("wrote run %1 to %2").arg(id).arg(path));
  return status_->text();
}

}  // namespace fp8wb
