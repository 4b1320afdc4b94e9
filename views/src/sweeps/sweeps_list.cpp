// SweepsTab's "Sweep" list (sweeps_tab.h): the database's stored sweeps, newest first,
// read off the GUI thread when the tab is shown, when the database changes and as the
// tab's own sweeps start and end; the one chosen is shown (sweeps_store_reads.cpp). Under
// it, the line describing the sweep shown and "Copy to new sweep".
#include <QComboBox>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QShowEvent>
#include <QSpinBox>

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/common/store_reader.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/sweeps/sweeps_tab.h"
#include "sweeps/sweeps_tab_internal.h"

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
           QStringLiteral(", ") + QString::fromStdString(sweep_status_text(s)) + QChar(')');
  } catch (const std::exception&) {
    what = QStringLiteral("(") + QString::fromStdString(sweep_status_text(s)) + QChar(')');
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
        const auto store = open_store_reader_if_made(path);
        if (!store) return listed;  // none yet
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
      [path, id] { return sweeps_detail::sweep_runs_state(*open_store_reader(path), id); },
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

namespace {

// A config field's value as a key=value line writes it: "mlp", "150", "0.003", "true".
QString field_text(const QJsonValue& v) {
  if (v.isString()) return v.toString();
  if (v.isBool()) return v.toBool() ? QStringLiteral("true") : QStringLiteral("false");
  if (v.isDouble()) return QString::number(v.toDouble(), 'g', 15);
  if (v.isArray())
    return QString::fromUtf8(QJsonDocument(v.toArray()).toJson(QJsonDocument::Compact));
  if (v.isObject())
    return QString::fromUtf8(QJsonDocument(v.toObject()).toJson(QJsonDocument::Compact));
  return {};
}

// The fields a sweep's base config sets apart from the defaults, as key=value lines (the
// run's name, which each trial replaces, left out).
QStringList base_overrides(const RunConfig& base) {
  const QJsonObject defaults =
      QJsonDocument::fromJson(QByteArray::fromStdString(run_config_json(RunConfig{}))).object();
  const QJsonObject fields =
      QJsonDocument::fromJson(QByteArray::fromStdString(run_config_json(base))).object();
  QStringList lines;
  for (auto f = fields.begin(); f != fields.end(); ++f)
    if (f.key() != QLatin1String("name") && defaults.value(f.key()) != f.value())
      lines << f.key() + QLatin1Char('=') + field_text(f.value());
  return lines;
}

// A grid axis as the form writes it: "margin=0,1,2".
QString axis_text(const SweepAxis& a) {
  QStringList values;
  for (const std::string& v : a.values) values << QString::fromStdString(v);
  return QString::fromStdString(a.key) + QLatin1Char('=') + values.join(QLatin1Char(','));
}

// An axis as the line describing the shown sweep names it: a long one by its first
// values and its last, "window=1,2,3,…,400 (400 values)", which wraps within the tab
// (the whole list, one word, would not).
QString short_axis_text(const SweepAxis& a) {
  constexpr size_t kShown = 6;
  if (a.values.size() <= kShown + 1) return axis_text(a);
  QStringList values;
  for (size_t i = 0; i < kShown - 1; ++i) values << QString::fromStdString(a.values[i]);
  values << QStringLiteral("…") << QString::fromStdString(a.values.back());
  return QString::fromStdString(a.key) + QLatin1Char('=') + values.join(QLatin1Char(',')) +
         QObject::tr(" (%1 values)").arg(a.values.size());
}

}  // namespace

void SweepsTab::describeShownSweep() {
  copy_spec_->setEnabled(!spec_.axes.empty());
  if (spec_.axes.empty()) {
    shown_spec_->clear();
    shown_spec_->setToolTip(QString());
    return;
  }
  QStringList grid, whole;
  for (const SweepAxis& a : spec_.axes) {
    grid << short_axis_text(a);
    whole << axis_text(a);
  }
  const QStringList base = base_overrides(spec_.base);
  const QString seeds =
      spec_.seeds == 1 ? tr("1 seed a point") : tr("%1 seeds a point").arg(spec_.seeds);
  const QString config = base.isEmpty() ? tr("the defaults") : base.join(QStringLiteral(", "));
  shown_spec_->setText(tr("Shown: grid %1 · %2 · base config %3")
                           .arg(grid.join(QStringLiteral(" x ")), seeds, config));
  // Every value of every axis, wrapped where the tooltip is too narrow for a line.
  shown_spec_->setToolTip(QStringLiteral("<p style='white-space:pre-wrap'>%1</p>")
                              .arg(tr("Grid %1 · %2 · base config %3")
                                       .arg(whole.join(QStringLiteral(" x ")), seeds, config)
                                       .replace(QLatin1Char(','), QStringLiteral(", "))
                                       .toHtmlEscaped()));
}

void SweepsTab::copyShownToForm() {
  if (spec_.axes.empty()) return;
  QStringList grid;
  for (const SweepAxis& a : spec_.axes) grid << axis_text(a);
  base_->setPlainText(base_overrides(spec_.base).join(QLatin1Char('\n')));
  grid_->setPlainText(grid.join(QLatin1Char('\n')));
  seeds_->setValue(spec_.seeds);
}

}  // namespace fp8wb
