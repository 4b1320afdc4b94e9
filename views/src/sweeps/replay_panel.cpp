// defines: ReplayPanel (replay_panel.h): its form (run, margins, windows, algorithms), the
// stored runs listed off the GUI thread, and the replay of the chosen run's per-step amax on
// a pool thread, with the check of the run's own stored scales. The heatmap, a cell's
// trajectory and the cells selected to train are in replay_results.cpp.
#include "fp8wb/views/sweeps/replay_panel.h"

#include <qcustomplot.h>
#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMouseEvent>
#include <QPushButton>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/watch/watch.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/common/store_reader.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "sweeps/sweeps_tab_internal.h"

namespace fp8wb {

namespace {

struct Loaded {
  std::shared_ptr<ReplayRun> run;
  std::shared_ptr<ReplayResult> result;
  ReplayGrid grid;
  std::string config_json;
};

QString figure_name(ReplayPanel::Figure f) {
  switch (f) {
    case ReplayPanel::SaturatingSteps: return QObject::tr("saturating steps");
    case ReplayPanel::MedianHeadroom: return QObject::tr("median headroom (binades)");
    case ReplayPanel::EstUnderflow: return QObject::tr("est. underflow %");
    case ReplayPanel::EstSaturated: return QObject::tr("est. saturated %");
    case ReplayPanel::ClosestHeadroom:
      return QObject::tr("headroom at the closest approach (binades)");
  }
  return {};
}

}  // namespace

ReplayPanel::ReplayPanel(EngineController* engine, QWidget* parent)
    : QWidget(parent),
      engine_(engine),
      runs_(new QComboBox(this)),
      figure_(new QComboBox(this)),
      algo_(new QComboBox(this)),
      tensor_(new QComboBox(this)),
      margins_(new QLineEdit(QStringLiteral("0,1,2,3"), this)),
      windows_(new QLineEdit(QStringLiteral("1,16,128,1024"), this)),
      max_(new QCheckBox(tr("max"), this)),
      recent_(new QCheckBox(tr("most_recent"), this)),
      replay_(new QPushButton(tr("Replay"), this)),
      train_(new QPushButton(tr("Train these cells"), this)),
      status_(new QLabel(this)),
      best_(new QLabel(this)),
      check_(new QLabel(this)),
      assumption_(new QLabel(this)),
      selected_(new QLabel(this)),
      heat_(new ExportablePlot(this)),
      curves_(new ExportablePlot(this)) {
  runs_->setObjectName(QStringLiteral("replayRun"));
  margins_->setObjectName(QStringLiteral("replayMargins"));
  windows_->setObjectName(QStringLiteral("replayWindows"));
  figure_->setObjectName(QStringLiteral("replayFigure"));
  algo_->setObjectName(QStringLiteral("replayAlgorithm"));
  tensor_->setObjectName(QStringLiteral("replayTensor"));
  best_->setObjectName(QStringLiteral("replayBest"));
  check_->setObjectName(QStringLiteral("replayCheck"));
  assumption_->setObjectName(QStringLiteral("replayAssumption"));
  train_->setObjectName(QStringLiteral("replayTrain"));
  heat_->setObjectName(QStringLiteral("replayHeatmap"));
  curves_->setObjectName(QStringLiteral("replayTrajectory"));
  max_->setChecked(true);
  recent_->setChecked(true);
  for (Figure f : {SaturatingSteps, MedianHeadroom, EstUnderflow, EstSaturated, ClosestHeadroom})
    figure_->addItem(figure_name(f));
  auto* form = new QFormLayout;
  form->addRow(tr("Run"), runs_);
  form->addRow(tr("Margins"), margins_);
  form->addRow(tr("Windows"), windows_);
  auto* algos = new QHBoxLayout;
  algos->addWidget(max_);
  algos->addWidget(recent_);
  form->addRow(tr("Algorithms"), algos);
  auto* left = new QWidget(this);
  auto* ll = new QVBoxLayout(left);
  ll->addLayout(form);
  ll->addWidget(replay_);
  ll->addWidget(status_);
  ll->addWidget(check_);
  ll->addWidget(selected_);
  ll->addWidget(train_);
  ll->addStretch(1);
  for (QLabel* l : {status_, check_, assumption_, selected_, best_}) l->setWordWrap(true);
  left->setMaximumWidth(380);
  train_->setEnabled(false);
  train_->setToolTip(tr("Select cells of the heatmap (ctrl-click) first"));

  map_ = new QCPColorMap(heat_->xAxis, heat_->yAxis);
  map_->setName(tr("replay"));
  scale_ = new QCPColorScale(heat_);
  heat_->plotLayout()->addElement(0, 1, scale_);
  map_->setColorScale(scale_);
  map_->setGradient(sweeps_detail::heat_gradient());
  map_->setInterpolate(false);
  heat_->setInteractions(QCP::Interactions());
  heat_->setEmptyHint(tr("Pick a run: the heatmap fills with its replay"));
  heat_->setCellTip([this](const QCPColorMap*, int x, int y) {
    const ReplayCell* c = cellAt(x, y);
    const ReplayFigures* f = figuresAt(x, y);
    if (!c || !f) return QString();
    return tr("margin %1, window %2, %3: %4 saturating steps, median headroom %5 binades, "
              "%6 at the closest approach, est. underflow %7%, rank %8")
        .arg(c->setting.margin)
        .arg(c->setting.window)
        .arg(QString::fromUtf8(amax_algo_name(c->setting.algo).data()))
        .arg(f->saturating_steps)
        .arg(f->median_headroom_binades, 0, 'f', 2)
        .arg(f->min_headroom_binades, 0, 'f', 2)
        .arg(f->est_underflow_pct, 0, 'g', 3)
        .arg(c->rank);
  });
  curves_->xAxis->setLabel(tr("step"));
  curves_->yAxis->setLabel(tr("amax"));
  curves_->yAxis->setScaleType(QCPAxis::stLogarithmic);
  curves_->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  curves_->setEmptyHint(
      tr("Click a cell: that tensor's amax over the run,\nand the amax its "
         "replayed scale maps to the format's max"));
  set_whole_number_ticks(curves_->xAxis);

  auto* pick = new QHBoxLayout;
  pick->addWidget(new QLabel(tr("colour"), this));
  pick->addWidget(figure_);
  pick->addWidget(new QLabel(tr("algorithm"), this));
  pick->addWidget(algo_);
  pick->addWidget(new QLabel(tr("tensor"), this));
  pick->addWidget(tensor_, 1);
  auto* right = new QWidget(this);
  auto* rl = new QVBoxLayout(right);
  rl->addLayout(pick);
  rl->addWidget(best_);
  rl->addWidget(heat_, 3);
  rl->addWidget(assumption_);
  rl->addWidget(curves_, 2);
  auto* layout = new QHBoxLayout(this);
  layout->addWidget(left);
  layout->addWidget(right, 1);
  assumption_->setText(tr("Assumes: %1.").arg(QString::fromUtf8(kReplayAssumption)));

  connect(replay_, &QPushButton::clicked, this, &ReplayPanel::replay);
  connect(runs_, &QComboBox::activated, this, [this] { replay(); });
  connect(margins_, &QLineEdit::editingFinished, this, &ReplayPanel::replay);
  connect(windows_, &QLineEdit::editingFinished, this, &ReplayPanel::replay);
  connect(max_, &QCheckBox::toggled, this, &ReplayPanel::replay);
  connect(recent_, &QCheckBox::toggled, this, &ReplayPanel::replay);
  connect(figure_, &QComboBox::currentIndexChanged, this, [this] { redraw(); });
  connect(algo_, &QComboBox::currentIndexChanged, this, [this] {
    selected_cells_.clear();
    redraw();
  });
  connect(tensor_, &QComboBox::currentIndexChanged, this, [this] { redraw(); });
  connect(train_, &QPushButton::clicked, this, &ReplayPanel::trainSelected);
  connect(heat_, &QCustomPlot::mousePress, this, [this](QMouseEvent* e) { cellClicked(e); });
  connect(engine_, &EngineController::databaseChanged, this, [this] { refreshRuns(); });
  // A run trained meanwhile (from the run panel, or a sweep's trials) joins the list.
  connect(engine_, &EngineController::finished, this, [this] {
    if (isVisible()) refreshRuns();
  });
  redraw();
}

ReplayPanel::~ReplayPanel() = default;

void ReplayPanel::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  refreshRuns();
}

void ReplayPanel::refreshRuns() {
  const std::string path = engine_->databasePath().toStdString();
  list_job_.run(
      [path] {
        std::vector<std::pair<int64_t, std::string>> out;
        const auto store = open_store_reader(path);
        for (const RunInfo& r : store->runs()) out.emplace_back(r.id, r.name);
        return out;
      },
      [this](std::vector<std::pair<int64_t, std::string>> runs) {
        const int64_t was = selectedRun();
        runs_->clear();
        run_ids_.clear();
        for (auto it = runs.rbegin(); it != runs.rend(); ++it) {  // newest first
          run_ids_.push_back(it->first);
          runs_->addItem(
              QStringLiteral("#%1 %2").arg(it->first).arg(QString::fromStdString(it->second)));
        }
        if (was > 0) selectRun(was);
        // Nothing shown yet: the chosen run's replay fills the heatmap at once.
        if (!result_ && !job_.busy() && selectedRun() > 0) {
          // Unasked: what keeps a run from replaying (an older run's missing per-step amax)
          // shows in the page's status line, not as a failure of the window.
          report_failures_ = false;
          replay();
          report_failures_ = true;
        }
        Q_EMIT runsListed();
      },
      [this](const QString& message) {
        status_->setText(message);
        Q_EMIT runsListed();
      });
}

QStringList ReplayPanel::runEntries() const {
  QStringList out;
  for (int i = 0; i < runs_->count(); ++i) out << runs_->itemText(i);
  return out;
}

bool ReplayPanel::selectRun(int64_t run_id) {
  for (size_t i = 0; i < run_ids_.size(); ++i) {
    if (run_ids_[i] == run_id) {
      runs_->setCurrentIndex(static_cast<int>(i));
      return true;
    }
  }
  return false;
}

int64_t ReplayPanel::selectedRun() const {
  const int i = runs_->currentIndex();
  return i >= 0 && static_cast<size_t>(i) < run_ids_.size() ? run_ids_[static_cast<size_t>(i)] : 0;
}

void ReplayPanel::setAxes(const QString& margins, const QString& windows, bool max,
                          bool most_recent) {
  const QSignalBlocker a(max_), b(recent_);
  margins_->setText(margins);
  windows_->setText(windows);
  max_->setChecked(max);
  recent_->setChecked(most_recent);
}

void ReplayPanel::replay() {
  const int64_t id = selectedRun();
  if (id <= 0) {
    status_->setText(tr("No run chosen"));
    return;
  }
  ReplayGrid grid;
  try {
    parse_replay_axis("margin=" + margins_->text().toStdString(), grid);
    parse_replay_axis("window=" + windows_->text().toStdString(), grid);
    std::string algos;
    if (max_->isChecked()) algos = "max";
    if (recent_->isChecked()) algos += std::string(algos.empty() ? "" : ",") + "most_recent";
    if (algos.empty()) throw ReplayError("tick at least one amax algorithm");
    parse_replay_axis("amax_algo=" + algos, grid);
    if (grid.cell_count() > kMaxReplayCells) {
      throw ReplayError("the grid has " + std::to_string(grid.cell_count()) + " cells, over the " +
                        std::to_string(kMaxReplayCells) + " a replay takes");
    }
  } catch (const std::exception& e) {
    status_->setText(QString::fromStdString(e.what()));
    if (report_failures_) Q_EMIT failed(status_->text());
    return;
  }
  const bool report = report_failures_;
  status_->setText(tr("Replaying run %1 …").arg(id));
  const std::string path = engine_->databasePath().toStdString();
  job_.run(
      [path, id, grid] {
        const auto store = open_store_reader(path);
        Loaded l;
        l.run = std::make_shared<ReplayRun>(load_replay_run(*store, id));
        l.config_json = store->run(id)->config_json;
        ReplayOptions o;
        o.run = l.run->run;
        o.samples = l.run->samples;
        o.stored = l.run->stored;
        o.per_tensor_median = true;
        l.result = std::make_shared<ReplayResult>(replay_amax(l.run->input, grid, o));
        l.grid = grid;
        return l;
      },
      [this](Loaded l) {
        run_ = l.run;
        result_ = l.result;
        grid_ = l.grid;
        base_config_ = l.config_json;
        selected_cells_.clear();
        {
          const QSignalBlocker a(algo_), t(tensor_);
          const int algo = algo_->currentIndex(), tensor = tensor_->currentIndex();
          algo_->clear();
          for (AmaxAlgo a2 : grid_.algos)
            algo_->addItem(QString::fromUtf8(amax_algo_name(a2).data()));
          algo_->setCurrentIndex(std::clamp(algo, 0, algo_->count() - 1));
          tensor_->clear();
          tensor_->addItem(tr("every tensor"));
          for (const AmaxTensor& t2 : run_->input.tensors)
            tensor_->addItem(QString::fromStdString(amax_tensor_label(t2)));
          tensor_->setCurrentIndex(tensor >= 0 && tensor < tensor_->count() ? tensor : 0);
        }
        status_->setText(tr("Run %1: %2 steps x %3 FP8 tensors, %4 cells")
                             .arg(run_->run_id)
                             .arg(run_->input.step_count())
                             .arg(run_->input.tensor_count())
                             .arg(result_->cells.size()));
        const OwnScalesCheck& c = result_->own;
        const QString own =
            run_->run.delayed
                ? tr("its own setting (delayed, margin %1, window %2, %3)")
                      .arg(run_->run.config.margin)
                      .arg(run_->run.config.window)
                      .arg(QString::fromUtf8(amax_algo_name(run_->run.config.algo).data()))
                : tr("its own current scaling (margin %1)").arg(run_->run.config.margin);
        if (c.compared == 0) {
          check_->setText(tr("Replayed under %1: no stored scales to compare").arg(own));
        } else if (c.matches) {
          check_->setText(tr("Replayed under %1, the stored scales are reproduced bit for bit (%2 "
                             "sampled scales)")
                              .arg(own)
                              .arg(c.compared));
        } else {
          check_->setText(tr("Replayed under %1, the stored scales are NOT reproduced: first at "
                             "step %2, %3")
                              .arg(own)
                              .arg(c.first_step)
                              .arg(QString::fromStdString(
                                  amax_tensor_label(run_->input.tensors[c.first_tensor]))));
        }
        QString notes = tr("Assumes: %1.").arg(QString::fromUtf8(kReplayAssumption));
        for (size_t i = 1; i < run_->notes.size(); ++i)
          notes += QStringLiteral("\n") + QString::fromStdString(run_->notes[i]);
        assumption_->setText(notes);
        redraw();
        curves_->clearGraphs();
        curves_->replot();
        Q_EMIT replayed();
      },
      [this, report](const QString& message) {
        run_.reset();
        result_.reset();
        status_->setText(message);
        redraw();
        if (report) Q_EMIT failed(message);
      });
}

}  // namespace fp8wb
