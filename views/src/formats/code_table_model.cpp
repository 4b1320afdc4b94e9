#include "fp8wb/views/formats/code_table_model.h"

#include <QBrush>
#include <QColor>
#include <cmath>

namespace fp8wb {

CodeTableModel::CodeTableModel(QObject* parent) : QAbstractTableModel(parent) {
  rows_ = code_table(format_);
}

void CodeTableModel::setFormat(Format f) {
  beginResetModel();
  format_ = f;
  rows_ = code_table(f);
  endResetModel();
}

int CodeTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int CodeTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant CodeTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= static_cast<int>(rows_.size())) return {};
  const CodeRow& r = rows_[static_cast<size_t>(index.row())];
  switch (role) {
    case Qt::DisplayRole:
      switch (index.column()) {
        case CodeColumn: return QStringLiteral("0x%1").arg(r.code, 2, 16, QLatin1Char('0'));
        case BitsColumn: return QString::fromStdString(r.bits.joined(' '));
        case KindColumn:
          return QString::fromLatin1(code_kind_name(r.kind).data(),
                                     static_cast<int>(code_kind_name(r.kind).size()));
        case ValueColumn: return QString::fromStdString(format_number(r.value));
        default: return {};
      }
    case RawRole:
      switch (index.column()) {
        case CodeColumn: return static_cast<int>(r.code);
        case ValueColumn: return r.value;
        default: return data(index, Qt::DisplayRole);
      }
    case Qt::ToolTipRole:
      return QStringLiteral("code 0x%1 = %2 (%3)")
          .arg(r.code, 2, 16, QLatin1Char('0'))
          .arg(QString::fromStdString(format_number(r.value)))
          .arg(QString::fromLatin1(code_kind_name(r.kind).data()));
    case Qt::ForegroundRole:
      if (r.kind == CodeKind::NaN || r.kind == CodeKind::Infinity)
        return QBrush(QColor(0xC6, 0x28, 0x28));
      if (r.kind == CodeKind::Subnormal) return QBrush(QColor(0x8E, 0x24, 0xAA));
      return {};
    case Qt::TextAlignmentRole:
      return index.column() == ValueColumn ? QVariant(Qt::AlignRight | Qt::AlignVCenter)
                                           : QVariant();
    case Qt::FontRole: return {};
    default: return {};
  }
}

QVariant CodeTableModel::headerData(int section, Qt::Orientation o, int role) const {
  if (role != Qt::DisplayRole || o != Qt::Horizontal) return {};
  switch (section) {
    case CodeColumn: return tr("Code");
    case BitsColumn: return tr("Bits (s exp man)");
    case KindColumn: return tr("Kind");
    case ValueColumn: return tr("Value");
    default: return {};
  }
}

}  // namespace fp8wb
