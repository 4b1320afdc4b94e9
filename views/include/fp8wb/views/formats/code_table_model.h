// defines: CodeTableModel: all codes of one format (code, bits, kind, value) for a view.
#pragma once

#include <QAbstractTableModel>
#include <vector>

#include "fp8wb/core/formats/value_report.h"

namespace fp8wb {

class CodeTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { CodeColumn, BitsColumn, KindColumn, ValueColumn, ColumnCount };
  // Raw value of a cell (a double for the value column), for sorting and tests.
  static constexpr int RawRole = Qt::UserRole + 1;

  explicit CodeTableModel(QObject* parent = nullptr);
  void setFormat(Format f);
  Format format() const { return format_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

 private:
  Format format_ = Format::E4M3FN;
  std::vector<CodeRow> rows_;
};

}  // namespace fp8wb
