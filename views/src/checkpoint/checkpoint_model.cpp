// CheckpointModel (checkpoint_tab.h): the Checkpoint tab's table, a row per tensor: its
// dtype, shape, amax, dynamic range, NaN and Inf, the recommended recipe and the share of
// the values it turns into 0, the highest-SQNR recipe, numbers to sort by and text to show, the
// recommended recipe in bold and green and the selected one on an orange ground.
#include "fp8wb/views/checkpoint/checkpoint_tab.h"

#include <QBrush>
#include <QFont>
#include <QStringList>
#include <algorithm>
#include <cmath>
#include <limits>

#include "checkpoint/checkpoint_tab_internal.h"

namespace fp8wb {

using namespace checkpoint_detail;  // qs(), best_sqnr(), ... (checkpoint_tab_internal.h)

namespace {

// Why there is no recommendation, as its cell says it: the reason up to its first
// parenthesis or comma; where that is still long, up to its first ": "; at most 48
// characters, cut at a space. The whole reason is in the cell's tooltip and the details
// line under the table: a reason of a sentence or two widened the column and pushed the
// SQNR columns off screen.
QString short_reason(const std::string& reason) {
  constexpr qsizetype kMost = 48;
  QString text = QString::fromStdString(reason);
  for (const QString& at : {QStringLiteral(" ("), QStringLiteral(", ")}) {
    if (const qsizetype i = text.indexOf(at); i > 0) text.truncate(i);
  }
  if (text.size() > kMost) {
    if (const qsizetype colon = text.indexOf(QStringLiteral(": ")); colon > 0) text.truncate(colon);
  }
  if (text.size() <= kMost) return text;
  qsizetype cut = text.lastIndexOf(QLatin1Char(' '), kMost - 1);
  if (cut <= 0) cut = kMost - 1;
  return text.left(cut) + QChar(0x2026);
}

}  // namespace

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
  const RecipeResult* rec = t->recommended_result();
  // Sorting uses EditRole numbers; display uses text.
  if (role == Qt::EditRole || role == Qt::UserRole) {
    switch (index.column()) {
      case Amax: return t->amax;
      case Range: return t->dynamic_range_bits;
      case BestSqnr: return worst_first_key(*t);  // exact after finite, none last
      case RecommendedUnderflow: return rec ? rec->underflow_pct : INFINITY;  // none last
      case TensorwiseSqnr: {
        // As the best SQNR's column: exact after finite, none last.
        const double v = sqnr_of(*t, ScalingKind::Tensorwise, recommend_format());
        return std::isnan(v)   ? INFINITY
               : std::isinf(v) ? (v > 0 ? std::numeric_limits<double>::max() : -INFINITY)
                               : v;
      }
      default: break;
    }
  }
  const int64_t nonfinite = t->nan_count + t->inf_count;
  if ((role == Qt::EditRole || role == Qt::UserRole) && index.column() == NonFinite)
    return static_cast<qlonglong>(nonfinite);
  if (role == Qt::DisplayRole || role == Qt::EditRole || role == Qt::UserRole) {
    switch (index.column()) {
      case Name: return role == Qt::DisplayRole ? shown_name(t->name) : qs(t->name);
      case NonFinite:
        return nonfinite == 0 ? QString()
                              : tr("%1 NaN, %2 Inf").arg(t->nan_count).arg(t->inf_count);
      case Dtype: return qs(t->dtype);
      case Shape: {
        QStringList d;
        for (int64_t s : t->shape) d << QString::number(s);
        return d.isEmpty() ? tr("scalar") : d.join(QLatin1Char('x'));  // no dimension
      }
      case Amax: return t->has_figures() ? QString::number(t->amax, 'g', 5) : QStringLiteral("-");
      case Range:
        return t->has_figures() ? QString::number(t->dynamic_range_bits, 'f', 1)
                                : QStringLiteral("-");
      case Best: return best ? qs(best->name) : QStringLiteral("-");
      case BestSqnr: return best ? sqnr_text(b) : QStringLiteral("-");
      case TensorwiseSqnr: {
        const double v = sqnr_of(*t, ScalingKind::Tensorwise, recommend_format());
        return sqnr_text(v);
      }
      case Recommended:
        return !t->not_quantized.empty() ? tr("none: %1").arg(short_reason(t->not_quantized))
               : !t->no_recipe.empty()   ? tr("none: %1").arg(short_reason(t->no_recipe))
                                         : qs(t->recommended);
      case RecommendedUnderflow:
        return rec ? qs(underflow_pct_text(rec->underflow_pct)) + QLatin1Char('%')
                   : QStringLiteral("-");
      default: return {};
    }
  }
  // The recommended recipe in bold and green, the selected one on an orange ground.
  const QString cell = index.column() == Best          ? (best ? qs(best->name) : QString())
                       : index.column() == Recommended ? qs(t->recommended)
                                                       : QString();
  const bool selected = !cell.isEmpty() && cell == selected_;
  if (role == Qt::ToolTipRole) {
    QString tip;
    switch (index.column()) {
      case NonFinite:
        tip = nonfinite == 0 ? tr("no NaN or Inf")
                             : tr("%1 NaN and %2 Inf values: left out of every figure (amax, "
                                  "moments, SQNR are over the finite values)")
                                   .arg(t->nan_count)
                                   .arg(t->inf_count);
        break;
      case Best:
      case BestSqnr: tip = tr("Highest SQNR: %1.").arg(tr(kBestCriterion)); break;
      default: {
        // The whole reason where the cell says only its start.
        tip = !t->not_quantized.empty() ? tr("No SQNR: %1").arg(qs(t->not_quantized))
              : !t->no_recipe.empty()   ? tr("No recommendation: %1").arg(qs(t->no_recipe))
              : t->reason.empty()       ? shown_name(t->name)
                                        : qs(t->reason);
        for (const std::string& w : t->warnings) tip += tr("\nWarning: %1").arg(qs(w));
      }
    }
    if (selected)
      tip += tr("\nOrange: %1 is the recipe chosen under \u201cBlock errors of\u201d (its block "
                "errors are shown below).")
                 .arg(cell);
    return tip;
  }
  if (role == Qt::FontRole && index.column() == Recommended && !cell.isEmpty()) {
    QFont f;
    f.setBold(true);
    return f;
  }
  if (role == Qt::ForegroundRole && index.column() == Recommended && !cell.isEmpty()) {
    const bool lossy = rec && rec->underflow_pct >= kNamedZeroedPct;
    return QBrush(lossy ? kLossyRecommendedColor : kRecommendedColor.darker(140));
  }
  if (role == Qt::BackgroundRole) {
    if (selected) {
      QColor c = kSelectedColor;
      c.setAlpha(90);
      return QBrush(c);
    }
    if (index.column() == NonFinite && nonfinite > 0) return QBrush(QColor(0xd6, 0x27, 0x28, 60));
  }
  return {};
}

QString CheckpointModel::recommendationReason(int row) const {
  const TensorAnalysis* t = tensorAt(row);
  if (!t) return {};
  return !t->not_quantized.empty() ? tr("No SQNR: %1").arg(qs(t->not_quantized))
         : !t->no_recipe.empty()   ? tr("No recommendation: %1").arg(qs(t->no_recipe))
                                   : qs(t->reason);
}

QString CheckpointModel::recommendedSqnr(int row) const {
  const TensorAnalysis* t = tensorAt(row);
  const RecipeResult* rec = t ? t->recommended_result() : nullptr;
  return rec ? sqnr_text(rec->sqnr_db) : QStringLiteral("-");
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
    // The long names on two lines: the columns as narrow as their figures, so that the
    // SQNR columns stay in view.
    static const char* names[] = {"tensor",
                                  "dtype",
                                  "shape",
                                  "amax",
                                  "range\n(bits)",
                                  "NaN / Inf",
                                  "recommended\n(%1)",
                                  "its underflow",
                                  "highest SQNR\n(any format)",
                                  "its SQNR (dB)",
                                  "%1\ntensorwise (dB)"};
    const QString name = tr(names[section]);
    return name.contains(QLatin1String("%1")) ? name.arg(format_name(recommend_format())) : name;
  }
  if (role == Qt::ToolTipRole) {
    switch (section) {
      case Best:
      case BestSqnr: return tr("Highest SQNR: %1.").arg(tr(kBestCriterion));
      case Recommended: return tr("Recommended: %1.").arg(recommended_criterion());
      case RecommendedUnderflow:
        return tr(
            "The share of the tensor's nonzero values that the recommended recipe "
            "turns into 0");
      case NonFinite: return tr("NaN and Inf values, left out of every figure");
      default: return {};
    }
  }
  return {};
}

}  // namespace fp8wb
