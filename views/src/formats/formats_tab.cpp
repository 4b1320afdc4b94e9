#include "fp8wb/views/formats/formats_tab.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QScrollArea>
#include <QScrollBar>
#include <QSplitter>
#include <QTableView>
#include <QTableWidget>
#include <QVBoxLayout>
#include <cmath>
#include <stdexcept>

#include <QTabWidget>

#include "fp8wb/views/formats/code_table_model.h"
#include "fp8wb/views/formats/demo_views.h"
#include "fp8wb/views/formats/format_card.h"
#include "fp8wb/views/formats/format_plots.h"

namespace fp8wb {
namespace {

QString qs(std::string_view s) {
  return QString::fromLatin1(s.data(), static_cast<int>(s.size()));
}

QWidget* titled(const QString& title, QWidget* body, QWidget* parent, QWidget* extra = nullptr) {
  auto* box = new QWidget(parent);
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* head = new QHBoxLayout;
  head->addWidget(new QLabel(QStringLiteral("<b>%1</b>").arg(title), box));
  head->addStretch(1);
  if (extra) head->addWidget(extra);
  layout->addLayout(head);
  layout->addWidget(body, 1);
  return box;
}

QString percent(double rel) {
  if (std::isnan(rel)) return QStringLiteral("nan");
  if (std::isinf(rel)) return QStringLiteral("inf");
  return QString::number(rel * 100, 'g', 4) + QLatin1Char('%');
}

QTableWidgetItem* summary_cell(const QString& text, bool number = false) {
  auto* item = new QTableWidgetItem(text);
  item->setFlags(Qt::ItemIsSelectable | Qt::ItemIsEnabled);
  item->setTextAlignment((number ? Qt::AlignRight : Qt::AlignLeft) | Qt::AlignVCenter);
  return item;
}

}  // namespace

FormatsTab::FormatsTab(QWidget* parent)
    : QWidget(parent),
      edit_(new QLineEdit(this)),
      overflow_(new QComboBox(this)),
      all_formats_(new QCheckBox(tr("All formats"), this)),
      error_(new QLabel(this)),
      fp64_note_(new QLabel(this)),
      cards_layout_(new QHBoxLayout),
      number_line_(new NumberLinePlot(this)),
      spacing_(new SpacingPlot(this)),
      table_format_(new QComboBox(this)),
      table_model_(new CodeTableModel(this)),
      table_view_(new QTableView(this)) {
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  pages_ = new QTabWidget(this);
  outer->addWidget(pages_);
  // The explorer scrolls where the window is too small for it (a projector's 1280x720 at
  // presentation size) rather than pushing the window past the screen.
  auto* explorer_scroll = new QScrollArea(pages_);
  explorer_scroll->setWidgetResizable(true);
  explorer_scroll->setFrameShape(QFrame::NoFrame);
  explorer_scroll->setObjectName(QStringLiteral("demo-explorer"));
  auto* explorer = new QWidget(explorer_scroll);
  auto* layout = new QVBoxLayout(explorer);

  auto* input_row = new QHBoxLayout;
  input_row->addWidget(new QLabel(tr("Value:"), this));
  edit_->setPlaceholderText(tr("a number: 0.1, -3e-5, 0x1.8p3, 2^-9, inf, nan"));
  edit_->setClearButtonEnabled(true);
  edit_->setMaximumWidth(380);
  input_row->addWidget(edit_, 1);
  input_row->addWidget(new QLabel(tr("Overflow:"), this));
  overflow_->addItem(tr("saturate (clamp to ±max)"), static_cast<int>(Overflow::Saturate));
  overflow_->addItem(tr("ieee (Inf / NaN)"), static_cast<int>(Overflow::Ieee));
  input_row->addWidget(overflow_);
  all_formats_->setToolTip(tr("Show the fnuz, E8M0, FP6 and FP4 formats next to E4M3 and E5M2"));
  input_row->addWidget(all_formats_);
  input_row->addStretch(1);
  layout->addLayout(input_row);
  error_->setStyleSheet(QStringLiteral("color: #c62828;"));
  error_->setObjectName(QStringLiteral("valueError"));
  error_->setTextFormat(Qt::PlainText);
  error_->setWordWrap(true);
  error_->setVisible(false);
  layout->addWidget(error_);
  // Text that fp64 cannot hold (0.1000000000000000000001, a 30-digit integer, hex with
  // more than 53 bits) is shown as fp64's nearest value: said here, as `fp8wb formats`
  // says it.
  fp64_note_->setObjectName(QStringLiteral("fp64-note"));
  fp64_note_->setStyleSheet(QStringLiteral("color: #8a4b00;"));
  fp64_note_->setWordWrap(true);
  fp64_note_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  fp64_note_->setVisible(false);
  layout->addWidget(fp64_note_);

  auto* cards_host = cards_host_ = new QWidget(this);
  cards_host->setLayout(cards_layout_);
  auto* scroll = cards_scroll_ = new QScrollArea(this);
  scroll->setWidget(cards_host);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  // Cards that do not fit side by side scroll sideways; their height is never cut.
  scroll->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  // The cards are never cut in height: their area is as tall as they are at any font.
  cards_host->installEventFilter(this);
  scroll->installEventFilter(this);

  // Presenting all formats: one row a format (eight cards side by side would scroll).
  summary_ = new QTableWidget(this);
  summary_->setObjectName(QStringLiteral("formats-summary"));
  summary_->setColumnCount(4);
  summary_->setHorizontalHeaderLabels({tr("Format"), tr("Bits"), tr("Decoded"), tr("Rel. error")});
  summary_->verticalHeader()->setVisible(false);
  summary_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  summary_->setSelectionMode(QAbstractItemView::NoSelection);
  summary_->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  summary_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  summary_->setToolTip(tr("A row's tooltip: its code, absolute error and neighbours"));
  summary_->setVisible(false);
  summary_->installEventFilter(this);

  for (Format f : kAllFormats) table_format_->addItem(qs(format_info(f).name), static_cast<int>(f));
  table_view_->setModel(table_model_);
  table_view_->verticalHeader()->setVisible(false);
  table_view_->horizontalHeader()->setStretchLastSection(true);
  table_view_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_view_->setAlternatingRowColors(true);
  table_view_->resizeColumnsToContents();

  auto* plots = plots_split_ = new QSplitter(Qt::Vertical, this);
  plots->addWidget(titled(tr("Every value (number line)"), number_line_, plots));
  plots->addWidget(titled(tr("Spacing (ULP) by magnitude"), spacing_, plots));
  auto* bottom = bottom_split_ = new QSplitter(Qt::Horizontal, this);
  bottom->addWidget(plots);
  bottom->addWidget(titled(tr("All codes"), table_view_, bottom, table_format_));
  bottom->setStretchFactor(0, 3);
  bottom->setStretchFactor(1, 2);

  auto* main_split = main_split_ = new QSplitter(Qt::Vertical, this);
  main_split->addWidget(scroll);
  main_split->addWidget(summary_);
  main_split->addWidget(bottom);
  main_split->setStretchFactor(0, 2);
  main_split->setStretchFactor(1, 2);
  main_split->setStretchFactor(2, 3);
  // No pane is ever dragged or squeezed to nothing: each keeps its minimum size.
  for (QSplitter* s : {plots, bottom, main_split}) s->setChildrenCollapsible(false);
  layout->addWidget(main_split, 1);
  explorer_scroll->setWidget(explorer);
  pages_->addTab(explorer_scroll, tr("Explorer"));
  pages_->addTab(new QWidget(pages_), tr("Gradients: E4M3 vs E5M2"));
  pages_->addTab(new QWidget(pages_), tr("Outliers: per tensor vs 1x128"));
  pages_->addTab(new QWidget(pages_), tr("Master weights"));
  pages_->addTab(new QWidget(pages_), tr("Loss scaling"));
  connect(pages_, &QTabWidget::currentChanged, this, [this](int i) { ensurePageAt(i); });

  connect(edit_, &QLineEdit::textChanged, this, [this] { refresh(); });
  connect(overflow_, &QComboBox::currentIndexChanged, this, [this] { refresh(); });
  connect(all_formats_, &QCheckBox::toggled, this, [this] { rebuildCards(); });
  connect(table_format_, &QComboBox::currentIndexChanged, this, [this] {
    table_model_->setFormat(static_cast<Format>(table_format_->currentData().toInt()));
    table_view_->resizeColumnsToContents();
    refresh();
  });

  rebuildCards();
  edit_->setText(QStringLiteral("0.1"));
}

void FormatsTab::presentationScaleChanged(double factor) {
  presenting_ = factor > 1;
  plots_split_->setOrientation(presenting_ ? Qt::Horizontal : Qt::Vertical);
  arrange();
}

// Every row and column of the summary shown whole, at any font: the table as tall as its
// rows and as wide as its columns.
void FormatsTab::fitSummary() {
  summary_->resizeColumnsToContents();
  summary_->resizeRowsToContents();
  int height = summary_->horizontalHeader()->sizeHint().height() + 2 * summary_->frameWidth();
  for (int row = 0; row < summary_->rowCount(); ++row) height += summary_->rowHeight(row);
  int width = 2 * summary_->frameWidth();
  for (int col = 0; col < summary_->columnCount(); ++col) width += summary_->columnWidth(col);
  summary_->setMinimumSize(width, height);
}

// Presenting all formats at a projector's 1280x720: the summary table on the left, the
// plots and the code table on the right, nothing scrolled. Otherwise the cards above.
void FormatsTab::arrange() {
  const bool summary = presenting_ && all_formats_->isChecked();
  fitSummary();
  if (summary == summary_->isVisibleTo(this) &&
      main_split_->orientation() == (summary ? Qt::Horizontal : Qt::Vertical))
    return;
  cards_scroll_->setVisible(!summary);
  summary_->setVisible(summary);
  main_split_->setOrientation(summary ? Qt::Horizontal : Qt::Vertical);
  spacing_->setLegendColumns(summary ? 2 : 4);
  bottom_split_->setOrientation(summary ? Qt::Vertical : Qt::Horizontal);
  if (summary) {
    // The table as wide as its columns; the plots have the rest.
    const int table = summary_->sizeHint().width();
    main_split_->setSizes({0, table, std::max(1, main_split_->width() - table)});
  }
}

bool FormatsTab::eventFilter(QObject* watched, QEvent* event) {
  if (watched == summary_ && event->type() == QEvent::FontChange) fitSummary();
  const bool relayout = watched == cards_host_ && event->type() == QEvent::LayoutRequest;
  const bool resized = watched == cards_scroll_ && event->type() == QEvent::Resize;
  if (relayout || resized) {
    // Room for the sideways scroll bar only where the cards are wider than their area.
    const QSize hint = cards_host_->minimumSizeHint();
    const int bar = hint.width() > cards_scroll_->width()
                        ? cards_scroll_->horizontalScrollBar()->sizeHint().height()
                        : 0;
    cards_scroll_->setMinimumHeight(hint.height() + bar);
  }
  return QWidget::eventFilter(watched, event);
}

std::vector<Format> FormatsTab::shownFormats() const {
  if (all_formats_->isChecked()) return {kAllFormats.begin(), kAllFormats.end()};
  return {Format::E4M3FN, Format::E5M2};
}

void FormatsTab::rebuildCards() {
  for (FormatCard* c : cards_) delete c;
  cards_.clear();
  for (Format f : shownFormats()) {
    auto* card = new FormatCard(f, this);
    cards_layout_->addWidget(card);
    cards_.push_back(card);
  }
  number_line_->setFormats(shownFormats());
  spacing_->setFormats(shownFormats());
  summary_->setRowCount(static_cast<int>(shownFormats().size()));
  refresh();
  arrange();
}

void FormatsTab::refresh() {
  const QString text = edit_->text().trimmed();
  fp64_note_->setVisible(false);
  if (text.isEmpty()) {
    error_->setVisible(false);
    return;
  }
  ParsedValue parsed;
  try {
    parsed = parse_value_exactly(text.toStdString());
  } catch (const std::invalid_argument& e) {
    // The value quoted in the message, where it is long, by its ends: a page-wide line
    // (or wider: it does not wrap) for a pasted number says no more. Whole in the tooltip.
    QString message = QString::fromStdString(e.what());
    error_->setToolTip(message.size() > 120 ? message : QString());
    constexpr qsizetype kLongest = 40;
    if (text.size() > kLongest)
      message.replace(
          text, tr("%1…%2 (%3 characters)").arg(text.left(24), text.right(8)).arg(text.size()));
    error_->setText(message);
    error_->setVisible(true);
    for (FormatCard* c : cards_) c->setEnabled(false);
    summary_->setEnabled(false);
    return;
  }
  value_ = parsed.value;
  error_->setVisible(false);
  // Text that fp64 rounded to a value shown as another number is named beside it (not 1e-3,
  // which is 0.001 as shown: says_same_number()); no encoding of a rounded value is called
  // exact (explain_value(ParsedValue)).
  const QString shown = QString::fromStdString(format_number(parsed.value));
  if (parsed.rounded && !says_same_number(text.toStdString(), shown.toStdString())) {
    fp64_note_->setText(tr("value %1: fp64's nearest to %2, which fp64 cannot hold. The "
                           "encodings and errors below are of %1; none is exact to the text.")
                            .arg(shown, text));
    fp64_note_->setVisible(true);
  }
  const auto ov = static_cast<Overflow>(overflow_->currentData().toInt());
  summary_->setEnabled(true);
  for (size_t i = 0; i < cards_.size(); ++i) {
    FormatCard* c = cards_[i];
    const ValueReport r = explain_value(parsed, c->format(), ov);
    c->setEnabled(true);
    c->showReport(r);
    // The card's figures on one row; what does not fit (code, absolute error, neighbours,
    // flags, note) in its tooltip.
    const int row = static_cast<int>(i);
    const QString name = c->title();
    summary_->setItem(row, 0, summary_cell(name));
    summary_->setItem(row, 1, summary_cell(c->bitsText()));
    summary_->setItem(row, 2, summary_cell(c->decodedText(), true));
    summary_->setItem(row, 3, summary_cell(percent(r.rel_error), true));
    QString tip =
        tr("%1: code 0x%2 (%3), %4 absolute error; neighbours %5 and %6; %7")
            .arg(name)
            .arg(r.code, 2, 16, QLatin1Char('0'))
            .arg(QString::fromLatin1(code_kind_name(r.kind).data(),
                                     static_cast<int>(code_kind_name(r.kind).size())))
            .arg(QString::fromStdString(format_short(r.abs_error)))
            .arg(r.below ? QString::fromStdString(format_number(*r.below)) : QStringLiteral("—"))
            .arg(r.above ? QString::fromStdString(format_number(*r.above)) : QStringLiteral("—"))
            .arg(c->flagsText());
    if (!r.note.empty()) tip += QStringLiteral("\n") + QString::fromStdString(r.note);
    for (int col = 0; col < summary_->columnCount(); ++col)
      summary_->item(row, col)->setToolTip(tip);
  }
  fitSummary();
  number_line_->setMarker(value_);
  spacing_->setMarker(value_);
  // Point at the typed value's code in the table.
  const ValueReport r = explain_value(parsed, table_model_->format(), ov);
  table_view_->selectRow(r.code);
  table_view_->scrollTo(table_model_->index(r.code, 0));
  Q_EMIT valueChanged(*value_);
}

void FormatsTab::setValueText(const QString& text) {
  edit_->setText(text);
}

void FormatsTab::setOverflow(Overflow o) {
  overflow_->setCurrentIndex(overflow_->findData(static_cast<int>(o)));
}

void FormatsTab::setShowAllFormats(bool all) {
  all_formats_->setChecked(all);
}

void FormatsTab::setTableFormat(Format f) {
  table_format_->setCurrentIndex(table_format_->findData(static_cast<int>(f)));
}

FormatCard* FormatsTab::card(Format f) const {
  for (FormatCard* c : cards_) {
    if (c->format() == f) return c;
  }
  return nullptr;
}

QString FormatsTab::errorText() const {
  return error_->isHidden() ? QString() : error_->text();
}

std::vector<ExportablePlot*> FormatsTab::plots() const {
  std::vector<ExportablePlot*> p = {number_line_, spacing_};
  if (gradient_demo_) p.push_back(gradient_demo_->histogramPlot());
  if (outlier_demo_) {
    p.push_back(outlier_demo_->errorPlot());
    p.push_back(outlier_demo_->mapPlot());
  }
  if (master_weights_demo_) p.push_back(master_weights_demo_->trajectoryPlot());
  if (loss_scaling_demo_) {
    p.push_back(loss_scaling_demo_->scalePlot());
    p.push_back(loss_scaling_demo_->underflowPlot());
  }
  return p;
}

QStringList FormatsTab::pageNames() const {
  return {QStringLiteral("explorer"), QStringLiteral("gradients"), QStringLiteral("outliers"),
          QStringLiteral("master-weights"), QStringLiteral("loss-scaling")};
}

bool FormatsTab::showPage(const QString& name) {
  const int i = static_cast<int>(pageNames().indexOf(name.toLower()));
  if (i < 0) return false;
  pages_->setCurrentIndex(i);
  ensurePageAt(i);
  return true;
}

QString FormatsTab::currentPage() const {
  return pageNames().value(pages_->currentIndex());
}

// Demo pages replace their empty placeholders on first use (each runs its demo at once).
template <class View>
View* FormatsTab::ensurePage(View*& slot, int index, const QString& title) {
  if (!slot) {
    slot = new View(pages_);
    slot->setObjectName(QStringLiteral("demo-") + pageNames().value(index));
    const int current = pages_->currentIndex();
    QWidget* old = pages_->widget(index);
    pages_->blockSignals(true);
    pages_->removeTab(index);
    pages_->insertTab(index, slot, title);
    pages_->setCurrentIndex(current);
    pages_->blockSignals(false);
    delete old;
  }
  return slot;
}

GradientDemoView* FormatsTab::gradientDemo() {
  return ensurePage(gradient_demo_, 1, tr("Gradients: E4M3 vs E5M2"));
}

OutlierDemoView* FormatsTab::outlierDemo() {
  return ensurePage(outlier_demo_, 2, tr("Outliers: per tensor vs 1x128"));
}

MasterWeightsDemoView* FormatsTab::masterWeightsDemo() {
  return ensurePage(master_weights_demo_, 3, tr("Master weights"));
}

LossScalingDemoView* FormatsTab::lossScalingDemo() {
  return ensurePage(loss_scaling_demo_, 4, tr("Loss scaling"));
}

void FormatsTab::ensurePageAt(int index) {
  if (index == 1) gradientDemo();
  if (index == 2) outlierDemo();
  if (index == 3) masterWeightsDemo();
  if (index == 4) lossScalingDemo();
}

}  // namespace fp8wb
