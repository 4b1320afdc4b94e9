// A watched run's amax of every step (watch.h): what the GPU path gives the Watch (each
// step's amaxes read back a step or more late, a sampled step's statistics taken elsewhere
// with delayed_scale()) stores what host tensors give it; the per-step amax is every
// observed tensor's max |x| over finite values, recomputed here, and delayed scaling's
// scale follows Transformer Engine's rule over those amaxes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/watch/watch.h"
#include "fp8wb/kernels/quantize_cpu.h"
#include "temp_dir_test.h"

namespace fp8wb {
namespace {

class WatchTest : public test::TempDirTest {
 protected:
  WatchTest() : TempDirTest("fp8wb-watch") {}
};

struct Tensor {
  std::string layer;
  Role role;
  std::vector<float> x;
  int64_t rows, cols;
};

// Two layers' three roles at one step; the amaxes move from step to step, one tensor holds
// an infinity and a NaN (not counted in the amax).
std::vector<Tensor> step_tensors(int step) {
  std::mt19937 rng(static_cast<unsigned>(100 + step));
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<Tensor> out;
  for (const char* layer : {"fc1", "fc2"}) {
    for (Role role : {Role::Input, Role::Weight, Role::GradOutput}) {
      Tensor t{layer, role, std::vector<float>(24 * 16), 24, 16};
      const float spread = std::pow(2.0f, static_cast<float>(step % 5) - 2.0f);
      for (float& v : t.x) v = spread * n(rng);
      if (step == 3 && role == Role::GradOutput) {
        t.x[5] = std::numeric_limits<float>::infinity();
        t.x[9] = std::nanf("");
      }
      out.push_back(std::move(t));
    }
  }
  return out;
}

float finite_amax(const std::vector<float>& x) {
  float a = 0;
  for (float v : x)
    if (std::isfinite(v)) a = std::max(a, std::fabs(v));
  return a;
}

WatchSettings settings(const std::string& scaling) {
  WatchSettings s;
  s.name = "watched";
  s.settings_json =
      R"({"scaling": ")" + scaling + R"(", "window": 3, "margin": 1, "stats_interval": 4})";
  s.model = "Test";
  s.device = "cpu";
  return s;
}

constexpr int kSteps = 10;

// Host tensors, through observe().
int64_t watch_on_host(const std::string& db, const std::string& scaling) {
  Watch w(db, settings(scaling));
  for (int step = 0; step < kSteps; ++step) {
    for (const Tensor& t : step_tensors(step))
      w.observe(t.layer, t.role, TensorRef::of(t.x.data(), t.rows, t.cols));
    w.next_step();
  }
  w.end(RunStatus::Finished, "");
  return w.run_id();
}

// What libfp8wb_watch.so does with CUDA tensors: between samples each step's amaxes come
// in after the step has ended (two steps late here), a sampled step takes them all in
// first and quantizes with delayed_scale() elsewhere, and the run's end takes in the rest.
int64_t watch_as_the_gpu_does(const std::string& db, const std::string& scaling) {
  Watch w(db, settings(scaling));
  struct Late {
    int64_t step;
    std::string layer;
    Role role;
    float amax;
  };
  std::vector<Late> queued;
  auto take_in = [&](int64_t before) {
    std::vector<Late> keep;
    for (const Late& l : queued) {
      if (l.step < before)
        w.observe_amax(l.layer, l.role, l.step, l.amax);
      else
        keep.push_back(l);
    }
    queued = keep;
  };
  for (int step = 0; step < kSteps; ++step) {
    for (const Tensor& t : step_tensors(step)) {
      const TensorRef x = TensorRef::of(t.x.data(), t.rows, t.cols);
      if (w.takes_stats(t.layer, t.role)) {
        take_in(step);
        const QuantRecipe& r = w.recipe(t.role);
        const float scale = w.delayed_scale(t.layer, t.role);
        StatsOptions so;
        if (scale > 0) {
          ScaleSet s;
          s.layout = make_layout(r, t.rows, t.cols);
          s.scale = {scale};
          s.scale_inv = {1.0f / scale};
          w.observe_stats(t.layer, t.role, quantize(x, r, s, {}, so).stats, scale);
        } else {
          const CurrentQuantization cq = quantize_current(x, r, {}, so);
          w.observe_stats(t.layer, t.role, cq.result.stats, cq.scales.scale[0]);
        }
      } else if (w.records_amax(t.role)) {
        queued.push_back({step, t.layer, t.role, finite_amax(t.x)});
      }
    }
    take_in(step - 1);  // the GPU two steps behind
    w.next_step();
  }
  take_in(kSteps);
  w.end(RunStatus::Finished, "");
  return w.run_id();
}

void expect_same_run(const RunStore& a, int64_t ra, const RunStore& b, int64_t rb) {
  const StepAmaxTable ta = a.step_amax(ra), tb = b.step_amax(rb);
  ASSERT_EQ(ta.tensors.size(), tb.tensors.size());
  for (size_t j = 0; j < ta.tensors.size(); ++j) {
    EXPECT_EQ(ta.tensors[j].layer, tb.tensors[j].layer);
    EXPECT_EQ(ta.tensors[j].role, tb.tensors[j].role);
  }
  EXPECT_EQ(ta.steps, tb.steps);
  ASSERT_EQ(ta.amax.size(), tb.amax.size());
  for (size_t i = 0; i < ta.amax.size(); ++i) EXPECT_EQ(ta.amax[i], tb.amax[i]) << i;
  const std::vector<TensorMetrics> sa = a.tensor_stats(ra), sb = b.tensor_stats(rb);
  ASSERT_EQ(sa.size(), sb.size());
  ASSERT_FALSE(sa.empty());
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].step, sb[i].step);
    EXPECT_EQ(sa[i].scale, sb[i].scale) << sa[i].layer << " step " << sa[i].step;
    EXPECT_EQ(sa[i].amax, sb[i].amax);
    EXPECT_EQ(sa[i].amax_history, sb[i].amax_history);
    EXPECT_EQ(sa[i].raw.underflow, sb[i].raw.underflow);
  }
}

TEST_F(WatchTest, EveryStepsAmaxIsStoredForReplay) {
  for (const std::string scaling : {"delayed", "current"}) {
    SCOPED_TRACE(scaling);
    const std::string db = (dir_ / (scaling + ".sqlite")).string();
    const int64_t run = watch_on_host(db, scaling);
    const auto store = RunStore::open_read_only(db);
    const StepAmaxTable t = store->step_amax(run);
    ASSERT_EQ(t.tensors.size(), 6u);
    ASSERT_EQ(t.steps.size(), static_cast<size_t>(kSteps));
    for (int step = 0; step < kSteps; ++step) {
      EXPECT_EQ(t.steps[static_cast<size_t>(step)], step);
      const std::vector<Tensor> want = step_tensors(step);
      for (size_t j = 0; j < want.size(); ++j) {
        EXPECT_EQ(t.tensors[j].layer, want[j].layer);
        EXPECT_EQ(t.tensors[j].role, want[j].role);
        EXPECT_EQ(t.amax[static_cast<size_t>(step) * 6 + j], finite_amax(want[j].x))
            << "step " << step << " " << want[j].layer;
      }
    }
    // Delayed scaling: the scale of a sampled step from the window (3) of the steps before.
    if (scaling == "delayed") {
      for (const TensorMetrics& m : store->tensor_stats(run)) {
        if (m.step == 0) {
          EXPECT_EQ(m.scale, 1.0f);
          continue;
        }
        float window = 0;
        for (int64_t s = std::max<int64_t>(0, m.step - 3); s < m.step; ++s) {
          for (const Tensor& x : step_tensors(static_cast<int>(s)))
            if (x.layer == m.layer && x.role == m.role) window = std::max(window, finite_amax(x.x));
        }
        const float fmax = m.role == Role::GradOutput ? 57344.0f : 448.0f;
        EXPECT_EQ(m.scale, static_cast<float>(fmax / static_cast<double>(window)) / 2.0f)
            << m.layer << " step " << m.step;
      }
    }
  }
}

TEST_F(WatchTest, AmaxesReadBackLateStoreWhatHostTensorsStore) {
  for (const std::string scaling : {"delayed", "current"}) {
    SCOPED_TRACE(scaling);
    const std::string host_db = (dir_ / ("host-" + scaling + ".sqlite")).string();
    const std::string gpu_db = (dir_ / ("gpu-" + scaling + ".sqlite")).string();
    const int64_t a = watch_on_host(host_db, scaling);
    const int64_t b = watch_as_the_gpu_does(gpu_db, scaling);
    expect_same_run(*RunStore::open_read_only(host_db), a, *RunStore::open_read_only(gpu_db), b);
  }
}

// A watched run's statistics read back carry what the script's tensors were quantized
// under: its recipe (blocks that may end smaller, as the Watch quantizes them), formats,
// margin and scaling mode.
TEST_F(WatchTest, StoredStatisticsCarryTheWatchedRecipe) {
  for (const std::string scaling : {"delayed", "current"}) {
    SCOPED_TRACE(scaling);
    WatchSettings ws = settings(scaling);
    if (scaling == "current")
      ws.settings_json =
          R"({"recipe": "blockwise", "formats": "e4m3", "margin": 1, "scaling": "current"})";
    const std::string db = (dir_ / ("recipe-" + scaling + ".sqlite")).string();
    int64_t run = 0;
    {
      Watch w(db, ws);
      for (const Tensor& t : step_tensors(0))
        w.observe(t.layer, t.role, TensorRef::of(t.x.data(), t.rows, t.cols));
      w.next_step();
      w.end(RunStatus::Finished, "");
      run = w.run_id();
    }
    const std::vector<TensorMetrics> rows = RunStore::open_read_only(db)->tensor_stats(run);
    ASSERT_EQ(rows.size(), 6u);
    for (const TensorMetrics& m : rows) {
      SCOPED_TRACE(m.layer + " " + std::string(role_name(m.role)));
      EXPECT_EQ(m.recipe.margin, 1);
      if (scaling == "delayed") {
        EXPECT_EQ(m.scaling, ScalingMode::Delayed);
        EXPECT_EQ(m.recipe.kind, ScalingKind::Tensorwise);
        EXPECT_EQ(m.recipe.format, m.role == Role::GradOutput ? Format::E5M2 : Format::E4M3FN);
      } else {
        EXPECT_EQ(m.scaling, ScalingMode::Current);
        EXPECT_EQ(m.recipe.kind,
                  m.role == Role::Weight ? ScalingKind::Block128x128 : ScalingKind::Block1x128);
        EXPECT_EQ(m.recipe.format, Format::E4M3FN);
        EXPECT_TRUE(m.recipe.partial_blocks);
      }
    }
  }
}

TEST_F(WatchTest, AmaxesOutOfStepOrderAreRefusedByName) {
  Watch w(path_, settings("delayed"));
  w.observe_amax("fc1", Role::Input, 0, 1.0f);
  w.next_step();
  w.next_step();
  w.observe_amax("fc1", Role::Input, 2, 1.0f);
  try {
    w.observe_amax("fc1", Role::Input, 1, 1.0f);
    FAIL() << "an amax of an earlier step was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("fc1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("step order"), std::string::npos) << e.what();
  }
  EXPECT_THROW(w.observe_amax("fc1", Role::Input, 3, 1.0f), std::invalid_argument);  // ahead
  w.end(RunStatus::Finished, "");
}

}  // namespace
}  // namespace fp8wb
