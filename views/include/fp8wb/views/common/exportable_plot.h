// defines: ExportablePlot: a QCustomPlot with zoom/pan, a right-click menu exporting the
// picture (PNG, PDF, with a title) and the data (CSV: every graph's points, every bar,
// every colour map's cells). PresentationMode scales its fonts and pens. CsvTable,
// csv_line() and write_csv_file(): CSV as every export of the views writes it.
// place_legend_below(): a legend under the plot instead of over its curves.
// fill_block_map(): a block error map; colour_scale_range(): a colour scale's ends, kept
// within what the figure can be; thermal_on_white(): the maps' colours.
#pragma once

#include <qcustomplot.h>
#include <QList>
#include <QPointer>
#include <QStringList>

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "fp8wb/kernels/format.h"
#include "fp8wb/views/common/presentation_mode.h"

class QComboBox;

namespace fp8wb {

// `text` in lines no wider than `width` pixels in `font`: broken at spaces, and a word
// wider than a line alone (a long tensor name) after a '.', '_', '/' or '-' of it, never
// inside a word; a part with none that fits is elided in its middle ("…").
QStringList wrapped_lines(const QString& text, const QFont& font, int width);

// A table as a CSV export writes it: a header, then a line of fields for each row.
struct CsvTable {
  QStringList header;
  QList<QStringList> rows;
};

// One CSV line (no line break): each field as it is, or in double quotes (its quotes
// doubled) where it holds a comma, a quote, a line break or spaces at either end.
QString csv_line(const QStringList& fields);
// A number as CSV gives it: every digit a double holds ("inf", "-inf"); NaN (no figure) as
// an empty field.
QString csv_number(double v);
// Writes `text` (UTF-8) to `path`. Returns an empty string on success, else a message
// naming the problem: a file that cannot be written, or the run database this process has
// open (run_database_guard.h), which an export would destroy.
QString write_csv_file(const QString& path, const QString& text);

// The file name an export dialog suggests for a plot titled `title`: its words in lower
// case joined by '-', at most 60 characters, then `suffix` ("png"); "plot.<suffix>" for a
// title without words.
QString export_file_name(const QString& title, const QString& suffix);

class ExportablePlot : public QCustomPlot {
  Q_OBJECT
 public:
  explicit ExportablePlot(QWidget* parent = nullptr);

  // Writes PNG, PDF or CSV by the path's suffix. Returns an empty string on success,
  // else a message naming the problem.
  QString exportTo(const QString& path);
  // The plot's data as CSV: a table for each kind of plottable with data (csvTables()),
  // tables apart by an empty line.
  QString toCsv() const;
  // The tables toCsv() writes: the one setCsvTable() gives where it is set, else
  //  - graphs: series,x,y: a line for each point;
  //  - bars: series,label,value: a line for each bar, its label the key axis's tick text
  //    at its key (a name: a scaling, a figure) where the axis has one, else its key;
  //  - colour maps: map,row,column,value: a line for each cell, row by row, named by the
  //    axes' tick texts at its centre (a layer, a sweep's value) where they have one, else
  //    by its centre's coordinate (block maps filled by fill_block_map(): the block's row
  //    and column), its value empty where it has none.
  std::vector<CsvTable> csvTables() const;
  // The table the CSV export writes instead of what the plottables hold: for a plot whose
  // drawn figures are not its data (an exact SQNR drawn as a bar to a line marked "inf",
  // a cell without error drawn past the scale's top). Empty: none.
  void setCsvTable(std::function<CsvTable()> table) { csv_table_ = std::move(table); }
  // Whether any plottable has something to draw (points, bars, cells): what an export has.
  bool hasData() const;
  // Plots' own base font size (points), and as PresentationMode shows it.
  static double basePointSize(bool presentation) {
    return presentation ? 9 * PresentationMode::kDefaultFactor : 9;
  }
  // The title an exported picture carries on top: what the plot shows and of which
  // run, tensor or format. Without one, the axis labels make it ("SQNR (dB) against step").
  // The picture is the plot as on screen under a band that holds the title, wrapped to the
  // plot's width (wrapped_lines()) and never cut.
  void setExportTitle(const QString& title) { export_title_ = title; }
  QString exportTitle() const;
  // The title's font in an exported picture: the axis labels' (larger while presenting),
  // bold and 2 points larger.
  QFont exportTitleFont() const;
  // What a colour map's cell (column x, row y) is, for its tooltip: the settings it stands
  // for and its figure. Without one (or where it returns nothing), the tooltip names the
  // cell by its axes' labels and ticks and gives its value.
  using CellTip = std::function<QString(const QCPColorMap* map, int x, int y)>;
  void setCellTip(CellTip tip) { cell_tip_ = std::move(tip); }
  // A line (or two) of grey text over the plot's middle while it has nothing to draw (no
  // plottable with points, no colour map with cells): what fills it, and how ("Select runs
  // and press Overlay ..."). While it shows, the axes' tick labels, the colour maps' scales
  // and the axis rect's background (a hatch for cells without data) are hidden: no number
  // or colour of an empty plot looks like data.
  // Empty: none.
  void setEmptyHint(const QString& text);
  // The hint as shown at the last replot, or empty where it is not shown.
  QString emptyHint() const;

 protected:
  // A tooltip with the exact values of the nearest point (graphs) or cell (colour maps).
  void mouseMoveEvent(QMouseEvent* event) override;

 private:
  void showExportMenu(const QPoint& pos);
  void applyFonts();
  void updateEmptyHint();  // shown where nothing is drawn (before each replot)
  QCPItemText* empty_hint_ = nullptr;
  // What the hint hides, as it was while something was drawn.
  QBrush drawn_background_;
  std::vector<std::pair<QPointer<QCPAxis>, bool>> drawn_tick_labels_;
  QString export_title_;
  CellTip cell_tip_;
  std::function<CsvTable()> csv_table_;
};

// Moves the plot's legend out of its axis rect into a row of its own below the plot, its
// entries in up to `columns` columns, so that it never covers the data.
void place_legend_below(QCustomPlot* plot, int columns = 4);

// The colour of a format across every plot.
QColor format_color(Format f);

// Ticks at whole numbers only (1, 2, 5, 10, ... apart as the room allows), also where the
// axis spans a step or two: for axes of steps, which are indices (never "0.5").
void set_whole_number_ticks(QCPAxis* axis);

// Fills a colour map with a rows x cols grid (row-major), one cell per block, and sets its
// axes to show every block whole; clears it when the grid and the values do not match
// (no map taken). The map keeps the grid's size (a one-row grid is drawn as two equal
// rows): its CSV holds each block once, by its row and column.
void fill_block_map(QCPColorMap* map, int64_t rows, int64_t cols, const std::vector<float>& cells);

// QCustomPlot's thermal gradient without its white top, so that the highest values stay
// visible on a plot's white (a block that lost everything is no blank); NaN cells
// transparent unless the caller sets a NaN colour.
QCPColorGradient thermal_on_white();

// What a figure can be: a percentage 0..100, a count or a loss 0 and up, else anything.
inline const QCPRange kPercentDomain(0, 100);
inline const QCPRange kNonNegativeDomain(0, std::numeric_limits<double>::infinity());
inline const QCPRange kAnyValue(-std::numeric_limits<double>::infinity(),
                                std::numeric_limits<double>::infinity());

// The range a colour scale spans for figures from `lo` to `hi` (lo <= hi), all within
// `domain`: lo..hi; where every figure is the same, a band around it (+-0.5, or +-5 % of
// the value where that is wider) moved inside the domain: a constant 0 % spans 0..1 %,
// not -0.5..0.5 %, and a constant 100 % spans 90..100 %, not 95..105 %.
QCPRange colour_scale_range(double lo, double hi, const QCPRange& domain);

// Fixed colour ranges that mean the same on every map: a percentage over all of 0-100 %,
// an SQNR over 0-60 dB (FP8's 20-35 dB in the middle, bf16's near the top), a relative
// error over 0-0.1 (E4M3's rounding of a Gaussian near 0.025, E5M2's near 0.05).
inline const QCPRange kPercentRange(0, 100);
inline const QCPRange kSqnrDbRange(0, 60);
inline const QCPRange kRelativeErrorRange(0, 0.1);

// A box choosing a colour scale's range: "auto range" (the figures' own lowest to highest)
// or "fixed range" (one that means the same whatever the figures); objectName
// "colourRange".
QComboBox* make_colour_range_box(QWidget* parent);
bool fixed_colour_range(const QComboBox* box);  // "fixed range" chosen
// Sets the map's colour range, the figures' own (lo..hi, as colour_scale_range() makes it
// within `domain`) or `fixed` where that is chosen and given, and its colour scale's label
// to `label` with the range said on a line of its own (the bar is no longer than its
// map): "underflow %", then "(auto range: 0.001 to 0.003)" or "(fixed range: 0 to 100)".
// lo > hi: no figure, the range left as it is.
// The pixels kept free right of a colour bar's title (apply_colour_range()).
inline constexpr int kColourBarGap = 10;
void apply_colour_range(QCPColorMap* map, const QString& label, double lo, double hi,
                        const QCPRange& domain, const std::optional<QCPRange>& fixed,
                        bool use_fixed);
// The same for a block map of relative errors that fill_block_map() filled: its own range,
// or the fixed kRelativeErrorRange.
void apply_block_map_range(QCPColorMap* map, const QString& label, bool use_fixed);

}  // namespace fp8wb
