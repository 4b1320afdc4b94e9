// SweepsTab's "Sweep" list (sweeps_tab.h): the database's stored sweeps, newest first,
// read off the GUI thread when the tab is shown, when the database changes and as the
// tab's own sweeps start and end; the one chosen is shown (sweeps_heatmap.cpp).
#include <QComboBox>
#include <QLabel>
#include <QListWidget>
#include <QShowEvent>
#include <filesystem>

#include "fp8wb/core/run_store.h"
#include "fp8wb/views/engine_controller.h"
#include "fp8wb/views/exportable_plot.h"
#include "fp8wb/views/sweeps_tab.h"
#include "sweeps_tab_internal.h"

namespace fp8wb {
namespace {

// A stored sweep as the "Sweep" list names it.
struct ListedSweep {
  int64_t id = 0;
  QString text, tip;
};

// "#3 margin x window (12 trials, finished)", and its name where it has one of its own.
ListedSweep list_entry(const SweepInfo& s) {
  ListedSweep e;
  e.id = s.id;
  QString what;
  try {
    const SweepSpec spec = sweep_from_json(s.grid_json);
    QStringList axes;
    uint64_t trials = static_cast<uint64_t>(std::max(1, spec.seeds));
    for (const SweepAxis& a : spec.axes) {
      axes << QString::fromStdString(a.key);
      trials *= a.values.size();
    }
    what = axes.join(QStringLiteral(" x ")) + QStringLiteral(" (") +
           (trials == 1 ? QObject::tr("1 trial") : QObject::tr("%1 trials").arg(trials)) +
           QStringLiteral(", ") + QString::fromStdString(s.status) + QChar(')');
  } catch (const std::exception&) {
    what = QStringLiteral("(") + QString::fromStdString(s.status) + QChar(')');
  }
  e.text = QStringLiteral("#%1 %2").arg(s.id).arg(what);
  const QString name = QString::fromStdString(s.name);
  if (!name.isEmpty() && name != QLatin1String("sweep")) e.text += QStringLiteral(" — ") + name;
  e.tip = QObject::tr("sweep %1 \"%2\", created %3")
              .arg(s.id)
              .arg(name, QString::fromStdString(s.created_at));
  return e;
}

}  // namespace

void SweepsTab::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  refreshSweeps();  // another program may have stored one since
}

void SweepsTab::refreshSweeps() {
  const std::string path = engine_->databasePath().toStdString();
  list_job_.run(
      [path] {
        std::vector<ListedSweep> listed;
        std::error_code ec;
        if (path.empty() || !std::filesystem::exists(path, ec)) return listed;  // none yet
        // A connection of its own: a read that waits on a busy database waits here.
        const auto store = RunStore::open_read_only(path);
        const std::vector<SweepInfo> sweeps = store->sweeps();
        for (auto s = sweeps.rbegin(); s != sweeps.rend(); ++s) listed.push_back(list_entry(*s));
        return listed;
      },
      [this](std::vector<ListedSweep> listed) {
        {
          const QSignalBlocker block(stored_);
          stored_->clear();
          for (const ListedSweep& s : listed) {
            stored_->addItem(s.text, QVariant::fromValue<qlonglong>(s.id));
            stored_->setItemData(stored_->count() - 1, s.tip, Qt::ToolTipRole);
          }
          if (listed.empty()) stored_->addItem(tr("no stored sweeps"));
          stored_->setEnabled(!listed.empty());
        }
        selectShownSweep();
        // Nothing shown, nor on its way: the newest.
        if (sweep_id_ == 0 && !listed.empty() && !busy() && !isReading() && !isCollecting()) {
          chosen_ = listed.front().id;
          showSweep(chosen_);
        }
        Q_EMIT sweepsListed();
      },
      [this](const QString& message) {
        // Said in the list, not as a failure: a database that cannot be read is said where
        // it is opened and where a sweep is started or shown, once each.
        const QSignalBlocker block(stored_);
        stored_->clear();
        stored_->addItem(tr("stored sweeps could not be read"));
        stored_->setItemData(0, message, Qt::ToolTipRole);
        stored_->setEnabled(false);
        Q_EMIT sweepsListed();
      });
}

QStringList SweepsTab::storedSweeps() const {
  QStringList texts;
  for (int i = 0; i < stored_->count(); ++i)
    if (stored_->itemData(i).toLongLong() > 0) texts << stored_->itemText(i);
  return texts;
}

void SweepsTab::selectShownSweep() {
  const int i = stored_->findData(QVariant::fromValue<qlonglong>(sweep_id_));
  if (i < 0) return;
  const QSignalBlocker block(stored_);
  stored_->setCurrentIndex(i);
}

void SweepsTab::runsDeleted() {
  // A trial deleted reads as deleted, at once (not first when another sweep is chosen),
  // and its loss curve leaves the overlaid ones.
  rereadShownSweep();
}

void SweepsTab::pollShownSweep() {
  if (sweep_id_ == 0 || busy() || isReading() || isCollecting() || poll_job_.busy()) return;
  const std::string path = engine_->databasePath().toStdString();
  const int64_t id = sweep_id_;
  poll_job_.run(
      [path, id] {
        // A connection of its own: a read that waits on a busy database waits here.
        return sweeps_detail::sweep_runs_state(*RunStore::open_read_only(path), id);
      },
      [this, id](std::string state) {
        if (id != sweep_id_ || state.empty() || state == shown_runs_state_ || isReading()) return;
        rereadShownSweep();
      },
      [](const QString&) {
        // Not said: the list and the sweep's own reads say why a database cannot be read.
      });
}

void SweepsTab::rereadShownSweep() {
  if (sweep_id_ != 0 && !busy()) {
    auto* once = new QObject(this);
    connect(this, &SweepsTab::sweepShown, once, [this, once] {
      once->deleteLater();
      if (curves_->graphCount() > 0)
        overlayLine(overlaid_cell_.x(), overlaid_cell_.y(), overlay_->currentIndex() == 1);
    });
    connect(this, &SweepsTab::failed, once, [once] { once->deleteLater(); });
    showSweep(sweep_id_);
  }
  refreshSweeps();
}

void SweepsTab::databaseChanged() {
  if (!busy()) {
    // The sweep shown is the other database's.
    points_job_.drop();
    curves_job_.drop();
    poll_job_.drop();
    shown_runs_state_.clear();
    setReading(false);
    sweep_id_ = 0;
    spec_ = SweepSpec{};
    points_.clear();
    trials_->clear();
    showTrialsOrHint();
    status_->clear();
    rebuildSlicers();
    redraw();  // no axes: nothing shown (showNoSweep())
    best_->clear();
  }
  refreshSweeps();
}

}  // namespace fp8wb
