// defines: FormatsTab: the classroom format explorer. Type a value and see its bits,
// decoded value, error and neighbours in E4M3 and E5M2 side by side (all formats on
// demand), the number line of representable values, spacing against magnitude, and the
// table of all codes.
#pragma once

#include <QWidget>
#include <optional>
#include <vector>

#include "fp8wb/core/formats/value_report.h"
#include "fp8wb/views/common/presentation_mode.h"

class QLineEdit;
class QComboBox;
class QCheckBox;
class QLabel;
class QHBoxLayout;
class QTableView;
class QTableWidget;
class QScrollArea;
class QSplitter;
class QTabWidget;

namespace fp8wb {

class FormatCard;
class GradientDemoView;
class OutlierDemoView;
class MasterWeightsDemoView;
class LossScalingDemoView;
class CodeTableModel;
class NumberLinePlot;
class SpacingPlot;
class ExportablePlot;

class FormatsTab : public QWidget, public PresentationHook {
  Q_OBJECT
 public:
  explicit FormatsTab(QWidget* parent = nullptr);

  // The same as typing into the value field.
  void setValueText(const QString& text);
  void setOverflow(Overflow o);
  void setShowAllFormats(bool all);
  void setTableFormat(Format f);

  // The cards shown now, in order; nullptr for a format not shown.
  std::vector<FormatCard*> cards() const { return cards_; }
  FormatCard* card(Format f) const;
  QString errorText() const;
  std::optional<double> value() const { return value_; }
  CodeTableModel* codeTableModel() const { return table_model_; }
  QTableView* codeTableView() const { return table_view_; }
  NumberLinePlot* numberLinePlot() const { return number_line_; }
  SpacingPlot* spacingPlot() const { return spacing_; }
  std::vector<ExportablePlot*> plots() const;

  // Presenting, the number line and the spacing plot stand side by side, so the explorer
  // fits a projector's 1280x720 without scrolling; otherwise one above the other. With all
  // formats, the cards (eight side by side would scroll) give way to a table of one row a
  // format (formatsSummary()) beside the plots.
  void presentationScaleChanged(double factor) override;
  // The formats' table shown instead of the cards (presenting with all formats).
  QTableWidget* formatsSummary() const { return summary_; }

  // The tab's pages: "explorer", "gradients" (E4M3 vs E5M2 gradients), "outliers"
  // (per-tensor vs 1x128 scaling), "master-weights", "loss-scaling". Demo pages are built
  // the first time they are shown.
  QStringList pageNames() const;
  bool showPage(const QString& name);
  QString currentPage() const;
  GradientDemoView* gradientDemo();
  OutlierDemoView* outlierDemo();
  MasterWeightsDemoView* masterWeightsDemo();
  LossScalingDemoView* lossScalingDemo();

 Q_SIGNALS:
  void valueChanged(double value);

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void rebuildCards();
  void refresh();
  std::vector<Format> shownFormats() const;
  void arrange();  // the cards or the summary table, and the panes' orientation
  void fitSummary();
  template <class View>
  View* ensurePage(View*& slot, int index, const QString& title);
  void ensurePageAt(int index);

  QLineEdit* edit_;
  QComboBox* overflow_;
  QCheckBox* all_formats_;
  QLabel* error_;
  QLabel* fp64_note_;  // "value 1: fp64's nearest to 1.00000000000000000001 ..."
  QHBoxLayout* cards_layout_;
  QWidget* cards_host_ = nullptr;
  QScrollArea* cards_scroll_ = nullptr;
  QSplitter* plots_split_ = nullptr;   // the number line and the spacing plot
  QSplitter* bottom_split_ = nullptr;  // the plots and the code table
  QSplitter* main_split_ = nullptr;    // the cards (or summary) and the rest
  QTableWidget* summary_ = nullptr;    // one row a format: presenting all formats
  bool presenting_ = false;
  std::vector<FormatCard*> cards_;
  NumberLinePlot* number_line_;
  SpacingPlot* spacing_;
  QComboBox* table_format_;
  CodeTableModel* table_model_;
  QTableView* table_view_;
  QTabWidget* pages_ = nullptr;
  GradientDemoView* gradient_demo_ = nullptr;
  OutlierDemoView* outlier_demo_ = nullptr;
  MasterWeightsDemoView* master_weights_demo_ = nullptr;
  LossScalingDemoView* loss_scaling_demo_ = nullptr;
  std::optional<double> value_;
};

}  // namespace fp8wb
