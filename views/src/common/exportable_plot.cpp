// defines: ExportablePlot (the tooltips, the empty hint, the export menu, PNG/PDF/CSV
// export) and the CSV helpers; the plots' look (colours, colour scales, block maps,
// legends): plot_style.cpp.
#include "fp8wb/views/common/exportable_plot.h"

#include <QApplication>
#include <QBuffer>
#include <QComboBox>
#include <QFile>
#include <QFileInfo>
#include <QMenu>
#include <QMessageBox>
#include <QPageLayout>
#include <QPdfWriter>
#include <QRegularExpression>
#include <QTextStream>
#include <QToolTip>
#include <algorithm>
#include <cmath>

#include "common/exportable_plot_internal.h"
#include "fp8wb/core/formats/value_report.h"
#include "fp8wb/views/common/file_dialogs.h"
#include "fp8wb/views/common/run_database_guard.h"

namespace fp8wb {

namespace {

// The space around an exported picture's title, in pixels of the plot.
constexpr int kTitlePadding = 6;

// The centre's coordinate of cell i of n along a map's range (the range's centre for one
// cell).
double cell_centre(const QCPRange& r, int n, int i) {
  return n > 1 ? r.lower + (r.upper - r.lower) * i / (n - 1) : r.center();
}

// The axis's tick text at `at` where its ticker is one of texts with a tick there, else
// the coordinate.
QString tick_text(const QCPAxis* axis, double at) {
  if (auto ticks = qSharedPointerDynamicCast<QCPAxisTickerText>(axis->ticker())) {
    const QMap<double, QString>& m = ticks->ticks();
    const double tolerance = 1e-9 * std::max(1.0, std::abs(at));
    if (auto it = m.lowerBound(at - tolerance); it != m.end() && it.key() <= at + tolerance)
      return it.value();
  }
  return QString::number(at, 'g', 10);
}

}  // namespace

QStringList wrapped_lines(const QString& text, const QFont& font, int width) {
  const QFontMetrics fm(font);
  QStringList lines;
  QString line;
  for (QString word : text.split(QLatin1Char(' '), Qt::SkipEmptyParts)) {
    const QString joined = line.isEmpty() ? word : line + QLatin1Char(' ') + word;
    if (fm.horizontalAdvance(joined) <= width) {
      line = joined;
      continue;
    }
    if (!line.isEmpty()) lines << line;
    // A word wider than the line alone (a long tensor name) is broken after the last '.',
    // '_', '/' or '-' that fits ("model.layers.0.mlp." / "down_proj.weight"), never inside
    // a word; a part with no such place that fits is elided in its middle.
    while (word.size() > 1 && fm.horizontalAdvance(word) > width) {
      qsizetype cut = 0;
      for (qsizetype i = 1; i < word.size(); ++i) {
        const QChar c = word[i - 1];
        const bool boundary = c == QLatin1Char('.') || c == QLatin1Char('_') ||
                              c == QLatin1Char('/') || c == QLatin1Char('-');
        if (!boundary) continue;
        if (fm.horizontalAdvance(word.left(i)) > width) break;
        cut = i;
      }
      if (cut == 0) {
        word = fm.elidedText(word, Qt::ElideMiddle, width);
        break;
      }
      lines << word.left(cut);
      word = word.mid(cut);
    }
    line = word;
  }
  if (!line.isEmpty()) lines << line;
  return lines;
}

QString csv_line(const QStringList& fields) {
  QStringList out;
  for (const QString& f : fields) {
    const bool quote = f.contains(QLatin1Char(',')) || f.contains(QLatin1Char('"')) ||
                       f.contains(QLatin1Char('\n')) || f.contains(QLatin1Char('\r')) ||
                       f.startsWith(QLatin1Char(' ')) || f.endsWith(QLatin1Char(' '));
    out << (quote ? QLatin1Char('"') +
                        QString(f).replace(QStringLiteral("\""), QStringLiteral("\"\"")) +
                        QLatin1Char('"')
                  : f);
  }
  return out.join(QLatin1Char(','));
}

QString csv_number(double v) {
  return std::isnan(v) ? QString() : QString::number(v, 'g', 17);
}

QString write_csv_file(const QString& path, const QString& text) {
  // Every file the GUI writes follows one rule (run_database_guard.h): never over an
  // SQLite database or one of its files, all or nothing.
  return write_output_file(path, text.toUtf8());
}

namespace {

// "layer layers.0, step 10: underflow % 3.5": the cell by its axes (the row's first), each
// by its label and its tick's text at the cell's centre (or the centre's coordinate), then
// the colour scale's label and the cell's value.
QString cell_text(const QCPColorMap* map, int x, int y) {
  const double key = cell_centre(map->data()->keyRange(), map->data()->keySize(), x);
  const double value = cell_centre(map->data()->valueRange(), map->data()->valueSize(), y);
  auto along = [](const QCPAxis* axis, double at) {
    QString text = QString::number(at, 'g', 6);
    if (auto ticks = qSharedPointerDynamicCast<QCPAxisTickerText>(axis->ticker()))
      text = ticks->ticks().value(at, text);
    return axis->label().isEmpty() ? text : axis->label() + QLatin1Char(' ') + text;
  };
  QStringList where;
  if (map->data()->valueSize() > 1 || !map->valueAxis()->label().isEmpty())
    where << along(map->valueAxis(), value);
  where << along(map->keyAxis(), key);
  // The scale's first line: the figure, not the colour range said under it.
  const QString label = map->colorScale() && !map->colorScale()->axis()->label().isEmpty()
                            ? map->colorScale()->axis()->label().section(QLatin1Char('\n'), 0, 0)
                            : map->name();
  const double v = map->data()->cell(x, y);
  return where.join(QStringLiteral(", ")) + QStringLiteral(": ") +
         (std::isnan(v) ? QObject::tr("no data")
                        : label + QLatin1Char(' ') + QString::number(v, 'g', 6));
}

}  // namespace

ExportablePlot::ExportablePlot(QWidget* parent) : QCustomPlot(parent) {
  setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  setContextMenuPolicy(Qt::CustomContextMenu);
  connect(this, &QWidget::customContextMenuRequested, this, &ExportablePlot::showExportMenu);
  setMinimumHeight(180);
  // What the plot makes later (axis rects, titles) starts from the application's font, not
  // from a window's larger one: PresentationMode scales every element once, from there.
  setFont(QApplication::font());
  applyFonts();
}

void ExportablePlot::setEmptyHint(const QString& text) {
  if (empty_hint_ && empty_hint_->text() == text) return;
  if (!empty_hint_) {
    empty_hint_ = new QCPItemText(this);
    empty_hint_->setObjectName(QStringLiteral("emptyHint"));
    empty_hint_->position->setType(QCPItemPosition::ptAxisRectRatio);
    empty_hint_->position->setCoords(0.5, 0.5);
    empty_hint_->setPositionAlignment(Qt::AlignCenter);
    empty_hint_->setTextAlignment(Qt::AlignCenter);
    empty_hint_->setColor(QColor(110, 110, 110));
    // Over the plot's own lines (a zero line, grid lines), readable.
    empty_hint_->setBrush(QBrush(Qt::white));
    empty_hint_->setPadding(QMargins(6, 3, 6, 3));
    empty_hint_->setSelectable(false);
    empty_hint_->setVisible(false);  // until updateEmptyHint() finds nothing drawn
    connect(this, &QCustomPlot::beforeReplot, this, &ExportablePlot::updateEmptyHint);
  }
  empty_hint_->setText(text);
  updateEmptyHint();
  replot(rpQueuedReplot);
}

QString ExportablePlot::emptyHint() const {
  return empty_hint_ && empty_hint_->visible() ? empty_hint_->text() : QString();
}

bool ExportablePlot::hasData() const {
  // QCustomPlot's accessors are not const; nothing is changed here.
  auto* self = const_cast<ExportablePlot*>(this);
  for (int i = 0; i < plottableCount(); ++i) {
    QCPAbstractPlottable* p = self->plottable(i);
    if (!p->visible()) continue;
    if (auto* map = qobject_cast<QCPColorMap*>(p)) {
      if (map->data()->keySize() > 0 && map->data()->valueSize() > 0) return true;
    } else {
      const QCPPlottableInterface1D* points = p->interface1D();
      if (!points || points->dataCount() > 0) return true;
    }
  }
  return false;
}

void ExportablePlot::updateEmptyHint() {
  if (!empty_hint_) return;
  const bool hint = !hasData() && !empty_hint_->text().isEmpty();
  if (empty_hint_->visible() != hint) {
    // What the plot shows while drawn (a hatch for cells without data, tick labels) comes
    // back as it was.
    if (hint) {
      drawn_background_ = axisRect()->backgroundBrush();
      axisRect()->setBackground(QBrush(Qt::NoBrush));
      drawn_tick_labels_.clear();
      for (QCPAxis* a : axisRect()->axes()) {
        drawn_tick_labels_.emplace_back(a, a->tickLabels());
        a->setTickLabels(false);
      }
    } else {
      axisRect()->setBackground(drawn_background_);
      for (const auto& [a, shown] : drawn_tick_labels_)
        if (a) a->setTickLabels(shown);
      drawn_tick_labels_.clear();
    }
  }
  empty_hint_->setVisible(hint);
  for (int i = 0; i < plottableCount(); ++i) {
    if (auto* map = qobject_cast<QCPColorMap*>(plottable(i)); map && map->colorScale())
      map->colorScale()->setVisible(!hint);
  }
}

void ExportablePlot::mouseMoveEvent(QMouseEvent* event) {
  QCustomPlot::mouseMoveEvent(event);
  if (event->buttons() != Qt::NoButton) return;
  const QPointF pos = event->position();
  QString tip;
  double best = 12.0;  // pixels
  for (int g = 0; g < graphCount(); ++g) {
    QCPGraph* gr = graph(g);
    if (!gr->visible() || gr->data()->isEmpty()) continue;
    const double key = gr->keyAxis()->pixelToCoord(pos.x());
    auto it = gr->data()->findBegin(key);
    for (int k = 0; k < 2 && it != gr->data()->constEnd(); ++k, ++it) {
      const double px = gr->keyAxis()->coordToPixel(it->key);
      const double py = gr->valueAxis()->coordToPixel(it->value);
      const double d = std::hypot(px - pos.x(), py - pos.y());
      if (d < best) {
        best = d;
        tip = QStringLiteral("%1\n%2 = %3\n%4 = %5")
                  .arg(gr->name(), gr->keyAxis()->label().isEmpty() ? QStringLiteral("x")
                                                                    : gr->keyAxis()->label())
                  .arg(it->key, 0, 'g', 10)
                  .arg(gr->valueAxis()->label().isEmpty() ? QStringLiteral("y")
                                                          : gr->valueAxis()->label())
                  .arg(it->value, 0, 'g', 10);
      }
    }
  }
  if (tip.isEmpty()) {
    // Bars: the bar under the pointer, named by its tick label where it has one.
    for (int i = 0; i < plottableCount() && tip.isEmpty(); ++i) {
      auto* bars = qobject_cast<QCPBars*>(plottable(i));
      if (!bars || !bars->visible()) continue;
      QVariant details;
      const double d = bars->selectTest(pos, false, &details);
      if (d < 0 || d >= selectionTolerance()) continue;
      const QCPDataSelection sel = details.value<QCPDataSelection>();
      if (sel.isEmpty()) continue;
      const auto it = bars->data()->at(sel.dataRange().begin());
      QString key = QString::number(it->key, 'g', 6);
      if (auto text = qSharedPointerDynamicCast<QCPAxisTickerText>(bars->keyAxis()->ticker()))
        key = text->ticks().value(it->key, key);
      const QString value_label = bars->valueAxis()->label();
      tip = QStringLiteral("%1\n%2 = %3")
                .arg(key, value_label.isEmpty() ? bars->name() : value_label)
                .arg(it->value, 0, 'g', 6);
      if (!bars->name().isEmpty() && bars->name() != key)
        tip = bars->name() + QLatin1Char('\n') + tip;
    }
  }
  if (tip.isEmpty()) {
    for (int i = 0; i < plottableCount(); ++i) {
      auto* map = qobject_cast<QCPColorMap*>(plottable(i));
      if (!map) continue;
      double x = 0, y = 0;
      map->pixelsToCoords(pos, x, y);
      int cx = 0, cy = 0;
      map->data()->coordToCell(x, y, &cx, &cy);
      if (cx >= 0 && cy >= 0 && cx < map->data()->keySize() && cy < map->data()->valueSize()) {
        if (cell_tip_) tip = cell_tip_(map, cx, cy);
        if (tip.isEmpty()) tip = cell_text(map, cx, cy);
      }
    }
  }
  if (tip.isEmpty()) {
    QToolTip::hideText();
  } else {
    QToolTip::showText(event->globalPosition().toPoint(), tip, this);
  }
}

void ExportablePlot::applyFonts() {
  QFont f = font();
  f.setPointSizeF(basePointSize(false));
  QFont label = f;
  label.setBold(true);
  for (QCPAxisRect* rect : axisRects()) {
    for (QCPAxis* axis : rect->axes()) {
      axis->setTickLabelFont(f);
      axis->setLabelFont(label);
    }
  }
  // A plot that rebuilt its layout (heatmaps with a colour scale) may have no legend.
  if (legend) legend->setFont(f);
  for (int i = 0; i < plotLayout()->elementCount(); ++i) {
    if (auto* scale = qobject_cast<QCPColorScale*>(plotLayout()->elementAt(i))) {
      scale->axis()->setTickLabelFont(f);
      scale->axis()->setLabelFont(label);
    }
  }
}

std::vector<CsvTable> ExportablePlot::csvTables() const {
  if (csv_table_) return {csv_table_()};
  std::vector<CsvTable> out;
  CsvTable points{{QStringLiteral("series"), QStringLiteral("x"), QStringLiteral("y")}, {}};
  for (int g = 0; g < graphCount(); ++g) {
    const QCPGraph* graph = this->graph(g);
    for (auto it = graph->data()->constBegin(); it != graph->data()->constEnd(); ++it)
      points.rows << QStringList{graph->name(), csv_number(it->key), csv_number(it->value)};
  }
  CsvTable bars{{QStringLiteral("series"), QStringLiteral("label"), QStringLiteral("value")}, {}};
  CsvTable cells{{QStringLiteral("map"), QStringLiteral("row"), QStringLiteral("column"),
                  QStringLiteral("value")},
                 {}};
  // QCustomPlot's accessors are not const; nothing is changed here.
  auto* self = const_cast<ExportablePlot*>(this);
  for (int i = 0; i < plottableCount(); ++i) {
    if (auto* b = qobject_cast<QCPBars*>(self->plottable(i))) {
      for (auto it = b->data()->constBegin(); it != b->data()->constEnd(); ++it)
        bars.rows << QStringList{b->name(), tick_text(b->keyAxis(), it->key),
                                 csv_number(it->value)};
    } else if (auto* map = qobject_cast<QCPColorMap*>(self->plottable(i))) {
      QCPColorMapData* d = map->data();
      if (d->keySize() <= 0 || d->valueSize() <= 0) continue;
      if (const QSize grid = map->property(detail::kBlockGrid).toSize(); grid.isValid()) {
        // Blocks, by their row and column (a one-row grid is drawn as two rows alike).
        for (int r = 0; r < grid.height(); ++r) {
          for (int c = 0; c < grid.width(); ++c) {
            cells.rows << QStringList{map->name(), QString::number(r), QString::number(c),
                                      csv_number(d->cell(std::min(c, d->keySize() - 1),
                                                         std::min(r, d->valueSize() - 1)))};
          }
        }
        continue;
      }
      for (int y = 0; y < d->valueSize(); ++y) {
        const QString row =
            tick_text(map->valueAxis(), cell_centre(d->valueRange(), d->valueSize(), y));
        for (int x = 0; x < d->keySize(); ++x) {
          cells.rows << QStringList{
              map->name(), row,
              tick_text(map->keyAxis(), cell_centre(d->keyRange(), d->keySize(), x)),
              csv_number(d->cell(x, y))};
        }
      }
    }
  }
  for (CsvTable* t : {&points, &bars, &cells}) {
    if (!t->rows.isEmpty()) out.push_back(std::move(*t));
  }
  if (out.empty()) out.push_back(std::move(points));  // a header: no data
  return out;
}

QString ExportablePlot::toCsv() const {
  QString out;
  QTextStream s(&out);
  bool first = true;
  for (const CsvTable& t : csvTables()) {
    if (!first) s << '\n';  // an empty line between tables
    first = false;
    s << csv_line(t.header) << '\n';
    for (const QStringList& row : t.rows) s << csv_line(row) << '\n';
  }
  return out;
}

QFont ExportablePlot::exportTitleFont() const {
  // As large as the axis labels are drawn (larger while presenting), and a little more.
  QFont f = xAxis ? xAxis->labelFont() : font();
  f.setPointSizeF(f.pointSizeF() + 2);
  f.setBold(true);
  return f;
}

QString ExportablePlot::exportTitle() const {
  if (!export_title_.isEmpty()) return export_title_;
  const QString y = yAxis ? yAxis->label() : QString();
  const QString x = xAxis ? xAxis->label() : QString();
  if (!y.isEmpty() && !x.isEmpty()) return tr("%1 against %2").arg(y, x);
  return !y.isEmpty() ? y : x;
}

QString ExportablePlot::exportTo(const QString& path) {
  // Written over the run database (a link to it named *.csv, say), the file would be
  // truncated under SQLite, and its close would end this process's locks on it; over any
  // other SQLite database it would destroy that one. Refused before anything is drawn.
  if (const QString no = output_refusal(path); !no.isEmpty()) return no;
  const QString suffix = QFileInfo(path).suffix().toLower();
  QByteArray bytes;
  if (suffix == QLatin1String("png") || suffix == QLatin1String("pdf")) {
    QString error;
    // The picture leaves the window: it carries its title on top. The plot is drawn as on
    // screen under a band of its own for the title, wrapped to the picture's width:
    // nothing of the plot's layout changes. (A title in the plot's layout could be no
    // wider than its first column: a long one was cut at both ends, and a heatmap's
    // colour bar was pushed under a blank box.)
    const int w = width(), h = height();
    const QFont f = exportTitleFont();
    const QStringList lines = wrapped_lines(exportTitle(), f, w - 2 * kTitlePadding);
    const int band =
        lines.isEmpty()
            ? 0
            : static_cast<int>(lines.size()) * QFontMetrics(f).lineSpacing() + 2 * kTitlePadding;
    auto draw = [&](QCPPainter& painter) {
      painter.fillRect(QRect(0, 0, w, h + band), Qt::white);
      if (band > 0) {
        painter.setFont(f);
        painter.setPen(Qt::black);
        painter.drawText(
            QRect(kTitlePadding, kTitlePadding, w - 2 * kTitlePadding, band - 2 * kTitlePadding),
            Qt::AlignHCenter | Qt::AlignTop, lines.join(QLatin1Char('\n')));
      }
      painter.translate(0, band);
      toPainter(&painter, w, h);
    };
    if (suffix == QLatin1String("png")) {
      constexpr int kScale = 2;  // as QCustomPlot's savePng(path, 0, 0, 2.0)
      QImage image(w * kScale, (h + band) * kScale, QImage::Format_ARGB32_Premultiplied);
      image.fill(Qt::white);
      QCPPainter painter(&image);
      painter.setMode(QCPPainter::pmNonCosmetic);
      painter.scale(kScale, kScale);
      draw(painter);
      painter.end();
      QBuffer buffer(&bytes);
      buffer.open(QIODevice::WriteOnly);
      if (!image.save(&buffer, "PNG")) error = tr("the picture could not be drawn");
    } else {
      QBuffer buffer(&bytes);
      buffer.open(QIODevice::WriteOnly);
      QPdfWriter pdf(&buffer);
      // Fonts sized as on screen, as QCustomPlot's savePdf() (a screen-resolution printer).
      pdf.setResolution(logicalDpiX());
      QPageLayout page;
      page.setMode(QPageLayout::FullPageMode);
      page.setOrientation(QPageLayout::Portrait);
      page.setMargins(QMarginsF(0, 0, 0, 0));
      page.setPageSize(
          QPageSize(QSize(w, h + band), QPageSize::Point, QString(), QPageSize::ExactMatch));
      pdf.setPageLayout(page);
      QCPPainter painter;
      bool ok = painter.begin(&pdf);
      if (ok) {
        painter.setMode(QCPPainter::pmVectorized);
        painter.setWindow(QRect(0, 0, w, h + band));
        draw(painter);
        ok = painter.end();
      }
      if (!ok) error = tr("the PDF could not be drawn");
    }
    if (!error.isEmpty()) return tr("cannot write %1: %2").arg(path, error);
  } else if (suffix == QLatin1String("csv")) {
    bytes = toCsv().toUtf8();
  } else {
    return tr("cannot export to '%1': use a .png, .pdf or .csv file name").arg(path);
  }
  return write_output_file(path, bytes);
}

QString export_file_name(const QString& title, const QString& suffix) {
  static const QRegularExpression not_word(QStringLiteral("[^a-z0-9]+"));
  QString stem = title.toLower().replace(not_word, QStringLiteral("-"));
  stem = stem.left(60);
  while (stem.startsWith(QLatin1Char('-'))) stem.remove(0, 1);
  while (stem.endsWith(QLatin1Char('-'))) stem.chop(1);
  if (stem.isEmpty()) stem = QStringLiteral("plot");
  return stem + QLatin1Char('.') + suffix;
}

void ExportablePlot::showExportMenu(const QPoint& pos) {
  QMenu menu(this);
  menu.addAction(tr("Reset zoom"), this, [this] {
    rescaleAxes();
    replot();
  });
  menu.addSeparator();
  struct Kind {
    QString label, filter, suffix;
  };
  for (const Kind& k :
       {Kind{tr("Export PNG…"), tr("PNG image (*.png)"), QStringLiteral("png")},
        Kind{tr("Export PDF…"), tr("PDF (*.pdf)"), QStringLiteral("pdf")},
        Kind{tr("Export data as CSV…"), tr("CSV (*.csv)"), QStringLiteral("csv")}}) {
    menu.addAction(k.label, this, [this, k] {
      // The dialog suggests a name after the plot's title, in the working folder.
      const QString path =
          save_file_name(this, tr("Export"), export_file_name(exportTitle(), k.suffix), k.filter);
      if (path.isEmpty()) return;
      const QString err = exportTo(path);
      if (!err.isEmpty()) QMessageBox::warning(this, tr("Export failed"), err);
    });
  }
  menu.exec(mapToGlobal(pos));
}

}  // namespace fp8wb
