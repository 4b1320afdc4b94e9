// SweepsTab's overlaid loss curves (sweeps_tab.h): a click on a heatmap cell overlays its
// row's or column's runs (a curve a run, a colour a value; of a long axis a few values,
// the clicked one among them), read off the GUI thread; a double click opens its run.
#include "fp8wb/views/sweeps/sweeps_tab.h"

#include <QComboBox>
#include <QLabel>
#include <QMouseEvent>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/common/loss_curves.h"
#include "fp8wb/views/run_panel/engine_controller.h"

namespace fp8wb {

void SweepsTab::cellClicked(QMouseEvent* e, bool twice) {
  if (e->button() != Qt::LeftButton || !heat_->axisRect()->rect().contains(e->position().toPoint()))
    return;
  double kx = 0, ky = 0;
  map_->pixelsToCoords(e->position(), kx, ky);
  const int x = static_cast<int>(std::lround(kx)), y = static_cast<int>(std::lround(ky));
  if (!twice) {
    overlayLine(x, y, overlay_->currentIndex() == 1);
    return;
  }
  const auto ids = runsAt(x, y);
  if (!ids.empty()) Q_EMIT openRunRequested(ids.front());
}

void SweepsTab::clearOverlay() {
  curves_job_.drop();
  overlay_title_->clear();
  curves_->setExportTitle(QString());
  show_loss_curves(curves_, {});
}

QString SweepsTab::overlayTitle() const {
  return overlay_title_->text();
}

void SweepsTab::overlayLine(int x, int y, bool column) {
  // A one-axis sweep's row: along its axis, with nothing else of the grid held.
  const bool one_row = x_axis_->currentIndex() == y_axis_->currentIndex();
  const int along = column && !one_row ? y_axis_->currentIndex() : x_axis_->currentIndex();
  const int fixed = one_row ? -1 : column ? x_axis_->currentIndex() : y_axis_->currentIndex();
  overlaid_cell_ = QPoint(x, y);
  // Several seeds a point: a curve a seed, each named by its seed.
  const bool seeds = spec_.seeds > 1;
  // The title names what is held: the clicked cell's value of the other axis and the
  // slicers' values of the rest.
  QString title;
  if (along >= 0 && !spec_.axes.empty()) {
    QStringList held;
    if (fixed >= 0) {
      const auto& fv = spec_.axes[static_cast<size_t>(fixed)].values;
      const int at = column ? x : y;
      if (at >= 0 && at < static_cast<int>(fv.size()))
        held << QString::fromStdString(spec_.axes[static_cast<size_t>(fixed)].key + "=" +
                                       fv[static_cast<size_t>(at)]);
    }
    for (size_t k = 0; k < spec_.axes.size() && k < slicers_.size(); ++k)
      if (static_cast<int>(k) != along && static_cast<int>(k) != fixed)
        held << slicers_[k]->currentText();
    const QString each = QString::fromStdString(spec_.axes[static_cast<size_t>(along)].key);
    const QString curves_of = seeds ? tr("one curve for each %1 and seed").arg(each)
                                    : tr("one curve for each %1").arg(each);
    title = held.isEmpty() ? tr("Loss, %1").arg(curves_of)
                           : tr("Loss at %1, %2").arg(held.join(QStringLiteral(", ")), curves_of);
  }
  std::vector<LossCurve> curves;
  if (along >= 0 && !spec_.axes.empty()) {
    const auto& values = spec_.axes[static_cast<size_t>(along)].values;
    auto runs_of = [&](int i) { return column && !one_row ? runsAt(x, i) : runsAt(i, y); };
    // The values with runs; of a long axis, a few evenly spaced (the clicked cell's among
    // them): more curves could not be told apart, and their legend would crush the plot.
    std::vector<int> with_runs;
    for (int i = 0; i < static_cast<int>(values.size()); ++i)
      if (!runs_of(i).empty()) with_runs.push_back(i);
    constexpr size_t kMostCurves = 6;  // the loss curves' six colours, each once
    std::vector<int> shown = with_runs;
    if (with_runs.size() > kMostCurves) {
      shown.clear();
      for (size_t j = 0; j < kMostCurves; ++j)
        shown.push_back(with_runs[j * (with_runs.size() - 1) / (kMostCurves - 1)]);
      // The clicked cell's value in place of the nearest of them.
      const int clicked = column && !one_row ? y : x;
      if (std::find(with_runs.begin(), with_runs.end(), clicked) != with_runs.end()) {
        auto nearest = std::min_element(shown.begin(), shown.end(), [clicked](int a, int b) {
          return std::abs(a - clicked) < std::abs(b - clicked);
        });
        *nearest = clicked;
        std::sort(shown.begin(), shown.end());
        shown.erase(std::unique(shown.begin(), shown.end()), shown.end());
      }
      QStringList named;
      for (int i : shown) named << QString::fromStdString(values[static_cast<size_t>(i)]);
      const QString key = QString::fromStdString(spec_.axes[static_cast<size_t>(along)].key);
      title += with_runs.size() == values.size()
                   ? tr(" (%1 of %2 %3 values shown: %4)")
                         .arg(shown.size())
                         .arg(values.size())
                         .arg(key, named.join(QStringLiteral(", ")))
                   : tr(" (%1 of the %2 %3 values with runs shown, of %4: %5)")
                         .arg(shown.size())
                         .arg(with_runs.size())
                         .arg(key)
                         .arg(values.size())
                         .arg(named.join(QStringLiteral(", ")));
    }
    for (size_t n = 0; n < shown.size(); ++n) {
      const int i = shown[n];
      int seed = 0;  // the point's runs in one colour, each in a line style of its own
      for (int64_t id : runs_of(i)) {
        LossCurve c;
        c.dashes = seed++;
        c.run_id = id;
        c.name = QString::fromStdString(spec_.axes[static_cast<size_t>(along)].key + "=" +
                                        values[static_cast<size_t>(i)]);
        c.colour = static_cast<int>(n);
        c.name_seed = seeds;
        curves.push_back(std::move(c));
      }
    }
  }
  overlay_title_->setText(title);
  curves_->setExportTitle(title);
  if (curves.empty()) {
    curves_job_.drop();
    show_loss_curves(curves_, {});
    Q_EMIT curvesShown();
    return;
  }
  const std::string path = engine_->databasePath().toStdString();
  curves_job_.run([path, curves] { return read_loss_curves(path, curves); },
                  [this](std::vector<LossCurve> c) {
                    show_loss_curves(curves_, c);
                    Q_EMIT curvesShown();
                  },
                  [this](const QString& message) { fail(message); });
}

}  // namespace fp8wb
