// defines: RunTabBase (refresh only when visible and changed), DrawnPoints, and the helpers
// the run tabs share (run_tab_helpers.h), among them the readable tick labels of their log
// axes. The tabs themselves: run_tab_overview.cpp, run_tab_scaling.cpp,
// run_tab_quantization.cpp.
#include "fp8wb/views/run_tabs/run_tabs.h"

#include <QCheckBox>
#include <QCoreApplication>
#include <algorithm>
#include <cmath>
#include <limits>

#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/common/name_choices.h"
#include "fp8wb/views/run_tabs/run_data.h"
#include "run_tabs/run_tab_helpers.h"

namespace fp8wb {
namespace {

// Below 0.1 and from 10^5 up, a tick is labelled in scientific form with the fewest digits
// that give it back ("1e-03", "3.5e-02"), which the axis draws as a power of ten; "0.0"
// or "0.000244141" are not read at a glance.
QString readable_tick_label(double tick, const QLocale& locale, const QString& plain) {
  const double a = std::abs(tick);
  if (a == 0 || (a >= 0.1 && a < 1e5)) return plain;
  // With a lowercase 'e' whatever the locale's exponent sign ("2E-02" in en_US): the plot
  // draws only "2e-02" as a power of ten.
  const auto lower_e = [&locale](QString s) {
    return s.replace(locale.exponential(), QStringLiteral("e"));
  };
  for (int digits = 0; digits < 6; ++digits) {
    const QString s = locale.toString(tick, 'e', digits);
    if (std::abs(locale.toDouble(s) - tick) <= 1e-9 * a) return lower_e(s);
  }
  return lower_e(locale.toString(tick, 'e', 6));
}

// Evenly spaced ticks, labelled as above.
class ReadableTicker : public QCPAxisTicker {
 protected:
  QString getTickLabel(double tick, const QLocale& locale, QChar formatChar,
                       int precision) override {
    return readable_tick_label(tick, locale,
                               QCPAxisTicker::getTickLabel(tick, locale, formatChar, precision));
  }
};

// A log axis labelled as above, with evenly spaced ticks where the range spans less than a
// decade (where a log axis would have one labelled tick or none).
class ReadableLogTicker : public QCPAxisTickerLog {
 public:
  void generate(const QCPRange& range, const QLocale& locale, QChar formatChar, int precision,
                QVector<double>& ticks, QVector<double>* subTicks,
                QVector<QString>* tickLabels) override {
    if (range.lower > 0 && range.upper < range.lower * 10) {
      // Few: evenly spaced ticks crowd together at the top of a log axis.
      linear_.setTickCount(3);
      linear_.generate(range, locale, formatChar, precision, ticks, subTicks, tickLabels);
      return;
    }
    QCPAxisTickerLog::generate(range, locale, formatChar, precision, ticks, subTicks, tickLabels);
  }

 protected:
  QString getTickLabel(double tick, const QLocale& locale, QChar formatChar,
                       int precision) override {
    return readable_tick_label(tick, locale,
                               QCPAxisTickerLog::getTickLabel(tick, locale, formatChar, precision));
  }

 private:
  ReadableTicker linear_;
};

}  // namespace

namespace detail {

ExportablePlot* make_plot(QWidget* parent, const QString& x, const QString& y) {
  auto* p = new ExportablePlot(parent);
  p->xAxis->setLabel(x);
  p->yAxis->setLabel(y);
  // Steps are indices: no tick between two ("0.5") early in a run.
  if (x == QObject::tr("step")) set_whole_number_ticks(p->xAxis);
  return p;
}

QCPGraph* add_graph(ExportablePlot* p, const QString& name, const QColor& c, bool scatter) {
  QCPGraph* g = p->addGraph();
  g->setName(name);
  g->setPen(QPen(c, 1.5));
  if (scatter) {
    g->setLineStyle(QCPGraph::lsNone);
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCross, c, 9));
  }
  return g;
}

void use_log_axis(QCPAxis* a) {
  a->setScaleType(QCPAxis::stLogarithmic);
  a->setTicker(QSharedPointer<ReadableLogTicker>(new ReadableLogTicker));
  a->setNumberFormat(QStringLiteral("gb"));  // "1e-03" drawn as a power of ten
}

void use_log_count_axis(QCPAxis* a, QCPBars* bars) {
  a->setScaleType(QCPAxis::stLogarithmic);
  auto ticker = QSharedPointer<QCPAxisTickerLog>::create();
  ticker->setSubTickCount(8);  // 2 to 9 between powers of ten
  a->setTicker(ticker);
  a->setNumberFormat(QStringLiteral("gb"));  // 10^4, not 1e+04
  a->setNumberPrecision(0);
  // A bar rises from its base plus nothing: on a log axis a base of 0 lies below the axis
  // rect, where the bar is clipped (a positive base would be added to every count).
  bars->setBaseValue(0);
}

void fit_log_counts(QCPAxis* a, const QVector<double>& counts) {
  double top = 1;
  for (double c : counts) top = std::max(top, c);
  // Two decades at least: QCPAxisTickerLog draws ticks at powers of ten only from 1.6
  // decades on (below, ticks such as 2, 4, 6, 8 beside 10^1).
  a->setRange(0.5, std::max(50.0, 2 * top));
}

// Fits the plot's axes to its data; without `include_step0`, the value axis to the points
// after step 0 (where there are any): a delayed-scaling run starts from a scale of 1, whose
// figures at step 0 would otherwise stretch the axis over values no later step comes near.
void fit_axes(QCustomPlot* p, bool include_step0) {
  // A line of one point draws nothing: such a curve shows its point as a dot.
  for (int i = 0; i < p->graphCount(); ++i) {
    QCPGraph* g = p->graph(i);
    if (g->lineStyle() == QCPGraph::lsNone) continue;  // marks of their own
    const QColor c = g->pen().color();
    g->setScatterStyle(g->dataCount() == 1 ? QCPScatterStyle(QCPScatterStyle::ssDisc, c, c, 7)
                                           : QCPScatterStyle());
  }
  p->rescaleAxes();
  if (include_step0) return;
  QCPAxis* y = p->yAxis;
  const QCP::SignDomain sign =
      y->scaleType() == QCPAxis::stLogarithmic ? QCP::sdPositive : QCP::sdBoth;
  const QCPRange after_step0(0.5, std::numeric_limits<double>::max());
  QCPRange r;
  bool any = false;
  for (int i = 0; i < p->graphCount(); ++i) {
    bool found = false;
    const QCPRange g = p->graph(i)->getValueRange(found, sign, after_step0);
    if (!found) continue;
    if (any) {
      r.expand(g);
    } else {
      r = g;
      any = true;
    }
  }
  if (!any) return;
  if (y->scaleType() == QCPAxis::stLogarithmic) {
    r = QCPRange(r.lower / 1.2, r.upper * 1.2);  // a flat line stays inside the frame
  } else {
    const double pad = r.size() > 0 ? r.size() * 0.05 : std::max(std::abs(r.upper) * 0.1, 0.5);
    r = QCPRange(r.lower >= 0 ? 0 : r.lower - pad, r.upper + pad);  // percentages from 0
  }
  y->setRange(r);
}

QCheckBox* make_step0_box(QWidget* parent) {
  auto* box =
      new QCheckBox(QCoreApplication::translate("fp8wb::RunTabBase", "Include step 0"), parent);
  box->setObjectName(QStringLiteral("include-step-0"));
  box->setToolTip(QCoreApplication::translate(
      "fp8wb::RunTabBase",
      "Draw step 0 too. Step 0 quantizes with the initial scale (1 for delayed scaling), so "
      "its figures are usually far from every later step's, and the axes and colours would "
      "stretch to them."));
  return box;
}

QString role_text(Role r) {
  return name_text(role_name(r));
}

QString label_of(const TensorStatFigure& f) {
  return QCoreApplication::translate("fp8wb::TensorStatFigure", f.label);
}

}  // namespace detail

RunTabBase::RunTabBase(const RunData* run, QWidget* parent) : QWidget(parent), data_(run) {}

void RunTabBase::refresh(bool force) {
  if (!force && (!isVisible() || drawn_revision_ == data_->revision())) return;
  drawn_revision_ = data_->revision();
  rebuild();
  for (ExportablePlot* p : plots()) {
    p->setEmptyHint(emptyHintFor(p));
    p->replot(QCustomPlot::rpQueuedReplot);
  }
}

QString RunTabBase::contentOf(const ExportablePlot*) const {
  return tr("steps");
}

QString RunTabBase::emptyHintFor(const ExportablePlot* plot) const {
  if (data_->runId() == 0) return tr("No run open");
  const bool going = data_->status() == RunStatus::Running || data_->status() == RunStatus::Paused;
  return (going ? tr("No %1 yet") : tr("This run stored no %1")).arg(contentOf(plot));
}

void RunTabBase::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  refresh();
}

// Which points a tab has drawn: a run's series only grow between two generations of
// RunData, so a live run's new points are appended; another run, a reload or another
// selection draws everything anew.
bool DrawnPoints::append_from(int64_t generation, const QString& key, size_t size, size_t& from) {
  const bool same = generation == generation_ && key == key_ && size >= count_;
  from = same ? count_ : 0;
  generation_ = generation;
  key_ = key;
  count_ = size;
  return same;
}

}  // namespace fp8wb
