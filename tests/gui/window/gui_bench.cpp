// P6, offscreen: the time to replot 8 plots of 100k points each (median of 30 frames),
// and training throughput with the workbench window open (its tabs replotting at 30 Hz)
// against the same run headless. Prints a table; --json PATH writes the figures.
#include <QApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFile>
#include <QGridLayout>
#include <QTemporaryDir>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <mutex>

#include "fp8wb/core/backend/backend_info.h"
#include "fp8wb/core/train/trainer.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/runs/runs_tab.h"
#include "main_window.h"

using namespace fp8wb;

namespace {

double replot_ms() {
  QWidget window;
  auto* grid = new QGridLayout(&window);
  std::vector<ExportablePlot*> plots;
  for (int i = 0; i < 8; ++i) {
    auto* p = new ExportablePlot(&window);
    QVector<double> x(100000), y(100000);
    for (int k = 0; k < 100000; ++k) {
      x[k] = k;
      y[k] = 4.0 / std::sqrt(1.0 + k) + 0.05 * std::sin(k * 0.37 + i);
    }
    p->addGraph()->setData(x, y, true);
    p->rescaleAxes();
    grid->addWidget(p, i / 2, i % 2);
    plots.push_back(p);
  }
  window.resize(1600, 1200);
  window.show();
  QApplication::processEvents();
  std::vector<double> ms;
  for (int f = 0; f < 33; ++f) {
    QElapsedTimer t;
    t.start();
    for (ExportablePlot* p : plots) p->replot(QCustomPlot::rpImmediateRefresh);
    if (f >= 3) ms.push_back(static_cast<double>(t.nsecsElapsed()) / 1e6);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

RunConfig bench_config(int64_t steps) {
  RunConfig c;
  c.model = ModelKind::Gpt;
  c.steps = steps;
  c.reference = false;
  c.stats_interval = 10;
  return c;
}

double headless_steps_per_s(int64_t steps) {
  auto bus = std::make_shared<MetricBus>();
  Trainer t(bench_config(steps), bus);
  QElapsedTimer timer;
  timer.start();
  t.start();  // on its own thread, as `fp8wb train` runs it
  t.join();
  return static_cast<double>(steps) / (static_cast<double>(timer.nsecsElapsed()) / 1e9);
}

double gui_steps_per_s(int64_t steps, const QString& db) {
  MainWindow w(false);
  w.engine()->setDatabasePath(db);
  w.resize(1600, 1000);
  w.show();
  w.selectTab(QStringLiteral("Overview"));
  QEventLoop loop;
  QObject::connect(w.engine(), &EngineController::finished, &loop, &QEventLoop::quit);
  QElapsedTimer timer;
  timer.start();
  const QString err = w.engine()->start(bench_config(steps));
  if (!err.isEmpty()) {
    std::fprintf(stderr, "%s\n", qPrintable(err));
    return NAN;
  }
  loop.exec();
  return static_cast<double>(steps) / (static_cast<double>(timer.nsecsElapsed()) / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  if (!qEnvironmentVariableIsSet("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  init_compute_threads();
  QString json;
  int64_t steps = 200;
  for (int i = 1; i + 1 < argc; ++i) {
    if (QByteArray(argv[i]) == "--json") json = QString::fromLocal8Bit(argv[i + 1]);
    if (QByteArray(argv[i]) == "--steps") steps = QByteArray(argv[i + 1]).toLongLong();
  }
  QTemporaryDir dir;
  qputenv("XDG_DATA_HOME", dir.path().toUtf8());
  const double frame = replot_ms();
  // Alternate to spread the machine's noise over both.
  const double h1 = headless_steps_per_s(steps);
  const double g1 = gui_steps_per_s(steps, dir.filePath(QStringLiteral("a.sqlite")));
  const double h2 = headless_steps_per_s(steps);
  const double g2 = gui_steps_per_s(steps, dir.filePath(QStringLiteral("b.sqlite")));
  const double headless = (h1 + h2) / 2, gui = (g1 + g2) / 2;
  std::printf("replot of 8 plots x 100k points          %8.2f ms (median of 30)\n", frame);
  std::printf("training, headless                       %8.2f steps/s (%.2f, %.2f)\n", headless, h1,
              h2);
  std::printf("training, workbench open (Overview)      %8.2f steps/s (%.2f, %.2f)\n", gui, g1, g2);
  std::printf("GUI open vs headless                     %8.1f %%\n", 100.0 * (gui / headless - 1));
  if (!json.isEmpty()) {
    QFile f(json);
    if (f.open(QIODevice::WriteOnly)) {
      f.write(QStringLiteral("{\"replot_8x100k_ms\": %1, \"headless_steps_per_s\": %2, "
                             "\"gui_steps_per_s\": %3}\n")
                  .arg(frame)
                  .arg(headless)
                  .arg(gui)
                  .toUtf8());
    }
  }
  return 0;
}
