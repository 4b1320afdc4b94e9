// The Scaling and Quantization tabs draw a tensor as its statistics say it was measured
// (TensorMetrics::recipe and ::scaling), not as the run's config says: a run whose rows
// carry E5M2 and delayed scaling is drawn with E5M2's max and the delayed-scaling window
// whether its config says E4M3 with current scaling or the run has no config at all.
#include <QtTest>
#include <string>
#include <utility>
#include <vector>

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/run_tabs/run_data.h"
#include "fp8wb/views/run_tabs/run_tabs.h"

using namespace fp8wb;

class RunTabRecipeTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void theStatisticsRecipeOverridesTheConfigs();
  void theStatisticsRecipeStandsWithoutAConfig();
};

namespace {

constexpr float kAmax[] = {3.0f, 3.5f, 4.0f};

// fc1's input at steps 0, 10 and 20, measured as E5M2 with delayed scaling (margin 2)
// over an amax history of `window` steps.
void fill(RunData& d, int window) {
  for (int i = 0; i < 3; ++i) {
    MetricBatch b;
    StepMetrics m;
    m.step = i * 10;
    m.loss = 2.0;
    b.steps.push_back(m);
    TensorMetrics t;
    t.step = m.step;
    t.layer = "fc1";
    t.role = Role::Input;
    t.amax = kAmax[i];
    t.scale = 57344.0f / 16.0f / kAmax[i];
    t.raw.numel = 100;
    t.raw.hist[40] = 100;
    t.recipe.format = Format::E5M2;
    t.recipe.margin = 2;
    t.scaling = ScalingMode::Delayed;
    t.amax_history.assign(static_cast<size_t>(window), kAmax[i]);
    b.tensors.push_back(t);
    d.append(b);
  }
}

// The Scaling tab's caption of fc1's input, and the amax its scale maps to the format's
// max at step 10 (the first drawn: step 0 is left out).
std::pair<QString, double> scaling_of(const RunData& d) {
  ScalingTab tab(&d);
  tab.resize(1000, 800);
  tab.show();
  if (!QTest::qWaitForWindowExposed(&tab)) return {QStringLiteral("(not exposed)"), 0};
  tab.refresh(true);
  if (!tab.select(QStringLiteral("fc1"), QStringLiteral("input")))
    return {QStringLiteral("(no fc1 / input)"), 0};
  const QCPGraph* mapped = tab.amaxPlot()->graph(1);
  return {tab.captionText(), mapped->dataCount() > 0 ? mapped->data()->at(0)->value : 0.0};
}

QString quantization_caption(const RunData& d) {
  QuantizationTab tab(&d);
  tab.resize(1000, 800);
  tab.show();
  if (!QTest::qWaitForWindowExposed(&tab)) return QStringLiteral("(not exposed)");
  tab.refresh(true);
  return tab.captionText();
}

void check(const RunData& d, int window) {
  const auto [caption, mapped] = scaling_of(d);
  for (const QString& want :
       {QStringLiteral("fc1 / input</b> in E5M2 (max 57344)"), QStringLiteral("(margin 2)"),
        QStringLiteral(", window %1").arg(window),
        QStringLiteral("the shaded steps are the delayed-scaling window")})
    QVERIFY2(caption.contains(want), qPrintable(want + QStringLiteral(" not in: ") + caption));
  // Step 10's scale maps E5M2's max, not E4M3's 448.
  QCOMPARE(mapped, 57344.0 / static_cast<double>(57344.0f / 16.0f / kAmax[1]));
  const QString q = quantization_caption(d);
  QVERIFY2(q.contains(QStringLiteral("exponents E5M2 represents")), qPrintable(q));
}

}  // namespace

void RunTabRecipeTest::theStatisticsRecipeOverridesTheConfigs() {
  RunConfig c;
  c.name = "config says e4m3, current";
  c.formats = FormatPairing::E4M3;
  c.scaling = ScalingMode::Current;
  c.window = 7;
  RunData d;
  d.setRun(1, c.name, run_config_json(c));
  QVERIFY(d.hasConfig());
  fill(d, 7);
  check(d, 7);
}

void RunTabRecipeTest::theStatisticsRecipeStandsWithoutAConfig() {
  RunData d;
  d.setRun(2, "no config", "not a config");
  QVERIFY(!d.hasConfig());
  fill(d, 5);
  check(d, 5);  // the window: the length of the amax history the step kept
}

QTEST_MAIN(RunTabRecipeTest)
#include "run_tab_recipe_test.moc"
