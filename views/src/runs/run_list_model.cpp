#include "fp8wb/views/runs/run_list_model.h"

#include <QColor>
#include <QJsonDocument>
#include <QJsonObject>
#include <algorithm>
#include <cmath>
#include <iterator>

#include "fp8wb/core/sweep/final_loss.h"

namespace fp8wb {
namespace {
QString qs(const std::string& s) {
  return QString::fromStdString(s);
}
}  // namespace

RunListModel::Settings RunListModel::settings_of(const std::string& config_json) {
  const QJsonObject o = QJsonDocument::fromJson(QByteArray::fromStdString(config_json)).object();
  auto text = [&o](const char* key) {
    const QJsonValue v = o.value(QLatin1String(key));
    if (v.isString()) return v.toString();
    if (v.isDouble()) return QString::number(v.toDouble(), 'g', 6);
    return QString();
  };
  Settings s{text("model"), text("recipe"), text("scaling"), text("margin"), text("window")};
  // A high-precision run has no FP8 settings.
  if (!o.value(QLatin1String("fp8")).toBool(true))
    s = {s.model, tr("no FP8"), QString(), QString(), QString()};
  return s;
}

RunListModel::RunListModel(QObject* parent) : QAbstractTableModel(parent) {}

void RunListModel::setRuns(std::vector<RunInfo> runs, std::vector<FinalLoss> finals) {
  finals.resize(runs.size());
  // Newest first: the run just started, or just imported, at the top.
  std::vector<size_t> order(runs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&runs](size_t a, size_t b) { return runs[a].id > runs[b].id; });
  std::vector<RunInfo> sorted_runs;
  std::vector<FinalLoss> sorted_finals;
  std::vector<Settings> settings;
  for (size_t i : order) {
    sorted_runs.push_back(std::move(runs[i]));
    sorted_finals.push_back(finals[i]);
    settings.push_back(settings_of(sorted_runs.back().config_json));
  }
  bool same_rows = sorted_runs.size() == runs_.size();
  for (size_t i = 0; same_rows && i < sorted_runs.size(); ++i)
    same_rows = sorted_runs[i].id == runs_[i].id;
  if (same_rows) {  // a refresh of the same runs keeps the view's selection
    runs_ = std::move(sorted_runs);
    finals_ = std::move(sorted_finals);
    settings_ = std::move(settings);
    if (!runs_.empty()) Q_EMIT dataChanged(index(0, 0), index(rowCount() - 1, ColumnCount - 1));
    return;
  }
  beginResetModel();
  runs_ = std::move(sorted_runs);
  finals_ = std::move(sorted_finals);
  settings_ = std::move(settings);
  endResetModel();
}

const RunInfo* RunListModel::runAt(int row) const {
  return row >= 0 && row < static_cast<int>(runs_.size()) ? &runs_[static_cast<size_t>(row)]
                                                          : nullptr;
}

int RunListModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(runs_.size());
}

int RunListModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

namespace {

bool still_training(const RunInfo& r) {
  return r.status == RunStatus::Running || r.status == RunStatus::Paused;
}

}  // namespace

QVariant RunListModel::data(const QModelIndex& index, int role) const {
  const RunInfo* r = index.isValid() ? runAt(index.row()) : nullptr;
  if (!r) return {};
  const FinalLoss& f = finals_[static_cast<size_t>(index.row())];
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case Id: return QVariant::fromValue<qlonglong>(r->id);
      case Name: return qs(r->name);
      case Model: return settings_[static_cast<size_t>(index.row())].model;
      case Recipe: return settings_[static_cast<size_t>(index.row())].recipe;
      case Scaling: return settings_[static_cast<size_t>(index.row())].scaling;
      case Margin: return settings_[static_cast<size_t>(index.row())].margin;
      case Window: return settings_[static_cast<size_t>(index.row())].window;
      case Status: {
        const QString s = qs(run_status_text(*r));
        return r->live ? tr("%1 (live)").arg(s) : s;
      }
      case Steps: return QVariant::fromValue<qlonglong>(r->last_step + 1);
      case Loss:
        if (!std::isfinite(f.loss)) return QStringLiteral("-");
        // A run still training has no final loss yet: its figure so far, marked.
        return still_training(*r) ? tr("%1 so far").arg(f.loss, 0, 'f', 4)
                                  : QString::number(f.loss, 'f', 4);
      case Gap: {  // as `fp8wb runs list` gives it, "!" where the reference broke down
        const QString gap =
            std::isfinite(f.gap) ? QString::asprintf("%+.4f", f.gap) : QStringLiteral("-");
        return f.ref_broken ? gap + QStringLiteral(" !") : gap;
      }
      case Device: return qs(r->device);
      case Started: return qs(r->started_at);
      case Source: return qs(run_kind_text(*r));
      default: return {};
    }
  }
  if (role == Qt::ToolTipRole) {
    if (index.column() == Name) return qs(r->name);  // shown whole: the column elides it
    if (r->live && index.column() == Status)
      return tr("Another process is writing this run now: open it to follow it live");
    if (index.column() == Gap && f.ref_broken)
      return tr(
          "No comparison: this run's high-precision reference diverged or blew up (its "
          "loss rose far above its own earlier lowest, or was not finite), so the loss "
          "gap does not say that FP8 did better or worse. Open the run to see the "
          "reference's loss curve.");
    if (index.column() == Loss && still_training(*r) && std::isfinite(f.loss))
      return tr("The run is still training: the mean loss over the last 10% of the %1 steps "
                "stored so far (steps %2-%3), not yet its final loss")
          .arg(r->last_step + 1)
          .arg(f.from_step)
          .arg(f.to_step);
    return r->message.empty() ? qs(r->config_json) : qs(r->message);
  }
  if (role == Qt::ForegroundRole && index.column() == Status && r->live)
    return QColor(0x2c, 0xa0, 0x2c);
  if (role == Qt::ForegroundRole && index.column() == Gap && f.ref_broken)
    return QColor(0xc0, 0x30, 0x30);
  if (role == Qt::TextAlignmentRole &&
      (index.column() == Id || index.column() == Steps || index.column() == Loss ||
       index.column() == Gap || index.column() == Margin || index.column() == Window)) {
    return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
  }
  return {};
}

QVariant RunListModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal) return {};
  if (role == Qt::ToolTipRole && (section == Loss || section == Gap))
    return QString::fromUtf8(kFinalLossDefinition.data(),
                             static_cast<qsizetype>(kFinalLossDefinition.size()));
  if (role != Qt::DisplayRole) return {};
  // Long headers on two lines: the columns stay as narrow as their cells.
  static const char* names[] = {"id",       "name",   "model",   "recipe", "scaling",
                                "margin",   "window", "status",  "steps",  "final loss\n(last 10%)",
                                "loss gap", "device", "started", "source"};
  static_assert(std::size(names) == ColumnCount);
  return section >= 0 && section < ColumnCount ? tr(names[section]) : QVariant();
}

}  // namespace fp8wb
