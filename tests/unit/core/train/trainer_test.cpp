// The trainer: the small transformer learns with FP8 delayed scaling and tracks its
// high-precision reference; the run lands in the store and reads back identically;
// pause, stop, divergence and failures end runs as they should.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include "fp8wb/core/backend/backend_info.h"
#include "fp8wb/core/checkpoint/safetensors.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/train/trainer.h"

namespace fp8wb {
namespace {

class Collect : public MetricConsumer {
 public:
  void consume(const MetricBatch& b) override {
    const std::lock_guard<std::mutex> lock(mutex);
    batches.push_back(b);
  }
  std::vector<StepMetrics> steps() {
    const std::lock_guard<std::mutex> lock(mutex);
    std::vector<StepMetrics> s;
    for (const auto& b : batches) s.insert(s.end(), b.steps.begin(), b.steps.end());
    return s;
  }
  std::mutex mutex;
  std::vector<MetricBatch> batches;
};

std::string temp_db(const std::string& name) {
  const auto p =
      std::filesystem::temp_directory_path() /
      (std::string("fp8wb-trainer-") + name + "-" + std::to_string(getpid()) + ".sqlite");
  for (const char* ext : {"", "-wal", "-shm"}) std::filesystem::remove(p.string() + ext);
  return p.string();
}

double mean_loss(const std::vector<StepMetrics>& s, size_t from, size_t to, bool ref) {
  double sum = 0;
  for (size_t i = from; i < to; ++i) sum += ref ? s[i].ref_loss : s[i].loss;
  return sum / static_cast<double>(to - from);
}

TEST(Trainer, TinyGptLearnsWithFp8DelayedScalingAndTracksTheReference) {
  RunConfig c;  // gpt, d_model 64, 2 layers, FP8 HYBRID tensorwise delayed, reference on
  c.steps = 300;
  c.stats_interval = 25;
  c.sqnr_interval = 100;
  const std::string path = temp_db("gpt");
  auto store = RunStore::open(path);
  const int64_t id =
      store->create_run("tiny gpt", fp8wb::RunKind::Train, run_config_json(c), "cpu");
  auto bus = std::make_shared<MetricBus>();
  auto col = std::make_shared<Collect>();
  bus->add(store->consumer());
  bus->add(col);
  Trainer t(c, bus, id);
  t.run();
  ASSERT_EQ(t.status(), RunStatus::Finished) << t.message();
  const auto s = col->steps();
  ASSERT_EQ(s.size(), 300u);
  // The loss falls from ln(vocab) ~ 4.2 well below 3 (character statistics and more).
  const double first = mean_loss(s, 0, 10, false), last = mean_loss(s, 280, 300, false);
  const double ref_last = mean_loss(s, 280, 300, true);
  std::printf("loss: first 10 steps %.4f, last 20 steps %.4f (reference %.4f)\n", first, last,
              ref_last);
  EXPECT_GT(first, 3.9);
  EXPECT_LT(last, 2.6);
  // FP8 tracks the fp32 reference trained on the same batches: within 2% of its loss.
  EXPECT_LT(std::abs(last - ref_last), 0.02 * ref_last);
  for (const auto& m : s) {
    EXPECT_TRUE(std::isfinite(m.loss) && std::isfinite(m.ref_loss));
    EXPECT_NEAR(m.loss_gap, m.loss - m.ref_loss, 1e-12);
  }
  store->flush();

  // The run reopens from SQLite with identical series.
  auto reopened = RunStore::open_read_only(path);
  const auto loss = reopened->series(id, "loss");
  ASSERT_EQ(loss.size(), s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(loss[i].step, s[i].step);
    EXPECT_EQ(loss[i].value, s[i].loss);
  }
  EXPECT_EQ(reopened->run(id)->status, RunStatus::Finished);
  // Statistics of 8 FP8 layers x 3 roles at steps 0, 25, ..., 275 and the last, 299.
  const auto ts = reopened->tensor_stats(id);
  EXPECT_EQ(ts.size(), 8u * 3u * 13u);
  for (const auto& r : ts) {
    EXPECT_GT(r.raw.numel, 0u);
    EXPECT_GT(r.amax, 0);
    EXPECT_GT(r.scale, 0);
  }
  // Under delayed scaling the scale of a step comes from the amax history of the steps
  // before it: 448 / max(window) for x (E4M3, margin 0), the window as stored with it.
  const auto hist = reopened->blobs(id, "amax_history");
  ASSERT_EQ(hist.size(), ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    if (ts[i].role != Role::Input || ts[i].step == 0) continue;
    ASSERT_EQ(hist[i].layer, ts[i].layer);
    ASSERT_EQ(hist[i].step, ts[i].step);
    std::vector<float> window(hist[i].data.size() / 4);
    std::memcpy(window.data(), hist[i].data.data(), hist[i].data.size());
    ASSERT_EQ(window.size(), 16u);
    EXPECT_FLOAT_EQ(window[0], static_cast<float>(ts[i].amax));  // this step's amax, newest
    // The step used the scale from the 16 amaxes before it (window[1..15] and one older).
    const float older_max = *std::max_element(window.begin() + 1, window.end());
    EXPECT_LE(static_cast<float>(ts[i].scale), 448.0f / older_max * 1.0001f);
  }
  EXPECT_FALSE(reopened->series(id, "sqnr/blocks.0.fc1/fprop").empty());
  EXPECT_EQ(reopened->integrity_check(), "ok");
  reopened.reset();
  store.reset();
  // Closed cleanly, the database is one file: the WAL was checkpointed into it.
  EXPECT_FALSE(std::filesystem::exists(path + "-wal"));
  std::filesystem::remove(path);
}

// Delayed scaling, step by step: the scale a step uses is fp32(fmax / max(window)) / 2^margin
// of the amax window stored with the step before (numerics.md, "Delayed scaling"). A scaler
// that never updated, or updated from the wrong window, fails the equality.
TEST(Trainer, DelayedScaleComesFromThePreviousStepsWindow) {
  RunConfig c;
  c.model = ModelKind::Mlp;
  c.steps = 40;
  c.stats_interval = 1;
  c.sqnr_interval = 0;
  c.reference = false;
  c.margin = 1;
  c.window = 8;
  const std::string path = temp_db("delayed");
  auto store = RunStore::open(path);
  const int64_t id = store->create_run("delayed", fp8wb::RunKind::Train, run_config_json(c), "cpu");
  auto bus = std::make_shared<MetricBus>();
  bus->add(store->consumer());
  Trainer t(c, bus, id);
  t.run();
  ASSERT_EQ(t.status(), RunStatus::Finished) << t.message();
  store->flush();
  const auto ts = store->tensor_stats(id);
  const auto hist = store->blobs(id, "amax_history");
  ASSERT_EQ(ts.size(), 3u * 3u * 40u);  // 3 layers x 3 roles x every step
  std::map<std::tuple<std::string, std::string, int64_t>, std::vector<float>> windows;
  for (const auto& h : hist) {
    std::vector<float> w(h.data.size() / sizeof(float));
    std::memcpy(w.data(), h.data.data(), w.size() * sizeof(float));
    windows[{h.layer, h.role, h.step}] = std::move(w);
  }
  int checked = 0, changed = 0;
  float first_scale = 0;
  for (const auto& r : ts) {
    if (r.step == 0) continue;
    const auto prev = windows.find({r.layer, std::string(role_name(r.role)), r.step - 1});
    ASSERT_NE(prev, windows.end()) << r.layer << " " << role_name(r.role) << " " << r.step;
    ASSERT_EQ(prev->second.size(), 8u);
    const float m = *std::max_element(prev->second.begin(), prev->second.end());
    ASSERT_GT(m, 0.0f);
    // HYBRID: E4M3 (max 448) for input and weight, E5M2 (max 57344) for grad_output.
    const float fmax = r.role == Role::GradOutput ? 57344.0f : 448.0f;
    const float scale = std::ldexp(fmax / m, -1);
    // Reported as the reciprocal of the scale_inv (1 / scale in fp32) decoded with.
    EXPECT_EQ(static_cast<float>(r.scale), 1.0f / (1.0f / scale))
        << r.layer << " " << role_name(r.role) << " step " << r.step;
    if (first_scale == 0) first_scale = static_cast<float>(r.scale);
    changed += static_cast<float>(r.scale) != first_scale;
    ++checked;
  }
  EXPECT_GT(checked, 100);
  EXPECT_GT(changed, 0);  // the scales moved with the amaxes
  store.reset();
  for (const char* ext : {"", "-wal", "-shm"}) std::filesystem::remove(path + ext);
}

TEST(Trainer, FinalWeightsOpenAsACheckpoint) {
  RunConfig c;
  c.model = ModelKind::Mlp;
  c.steps = 5;
  c.reference = false;
  c.weights = temp_db("weights") + ".safetensors";
  Trainer t(c, std::make_shared<MetricBus>());
  t.run();
  ASSERT_EQ(t.status(), RunStatus::Finished) << t.message();
  auto ckpt = Checkpoint::open(c.weights);
  const auto* w = ckpt->find("layers.0.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->entry->shape, (std::vector<int64_t>{256, 64}));
  EXPECT_EQ(ckpt->tensors().size(), 6u);  // 3 layers x (weight, bias)
  std::filesystem::remove(c.weights);
}

TEST(Trainer, PauseResumeAndStopBetweenSteps) {
  RunConfig c;
  c.model = ModelKind::Mlp;
  c.steps = 100000;
  c.reference = false;
  auto bus = std::make_shared<MetricBus>();
  auto col = std::make_shared<Collect>();
  bus->add(col);
  Trainer t(c, bus);
  t.start();
  while (t.steps_done() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  t.pause();
  while (t.status() != RunStatus::Paused) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const int64_t paused_at = t.steps_done();
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  EXPECT_EQ(t.steps_done(), paused_at);  // nothing moves while paused
  t.resume();
  while (t.steps_done() < paused_at + 3) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  t.stop();
  t.join();
  EXPECT_EQ(t.status(), RunStatus::Stopped);
  EXPECT_LT(t.steps_done(), 100000);
  bool paused = false, resumed = false, stopped = false;
  for (const auto& b : col->batches) {
    for (const auto& e : b.events) {
      paused |= e.kind == fp8wb::RunEventKind::Paused;
      resumed |= e.kind == fp8wb::RunEventKind::Resumed;
      stopped |= e.kind == fp8wb::RunEventKind::Stopped;
    }
  }
  EXPECT_TRUE(paused && resumed && stopped);
  EXPECT_TRUE(col->batches.back().final);
}

// A run says in its "started" event which attention path its GPT takes, and where it
// falls back, why (LibTorch 1.13 has no fused attention): a notice, not an error. It
// also stores, beside one model's tokens/s, the whole run's per wall-clock step (none for
// the first step, which has no step before it to time from).
TEST(Trainer, TheStartedEventSaysTheAttentionPath) {
  RunConfig c;
  c.d_model = 32;
  c.heads = 4;
  c.layers = 1;
  c.context = 16;
  c.batch = 2;
  c.steps = 3;
  c.reference = false;
  auto bus = std::make_shared<MetricBus>();
  auto col = std::make_shared<Collect>();
  bus->add(col);
  Trainer t(c, bus);
  t.run();
  ASSERT_EQ(t.status(), RunStatus::Finished) << t.message();
  std::string started;
  for (const auto& b : col->batches)
    for (const auto& e : b.events)
      if (e.kind == fp8wb::RunEventKind::Started) started = e.message;
  const std::string torch_version = probe_backend().torch_version;
  if (torch_version.rfind("1.", 0) != 0) {
    EXPECT_NE(started.find("; attention: scaled_dot_product_attention"), std::string::npos)
        << started;
  } else {
    EXPECT_NE(started.find("; attention: two matmuls and an fp32 softmax (LibTorch " +
                           torch_version + " has no scaled_dot_product_attention)"),
              std::string::npos)
        << started;
  }
  const auto steps = col->steps();
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_TRUE(std::isnan(steps[0].wall_tokens_per_s));
  for (size_t i = 1; i < steps.size(); ++i) {
    EXPECT_GT(steps[i].wall_tokens_per_s, 0) << i;
    // Per wall-clock step, the loop's own work included: never above one model's figure
    // by more than the clocks' granularity allows.
    EXPECT_LT(steps[i].wall_tokens_per_s, steps[i].tokens_per_s * 1.05) << i;
  }
}

// A run stopped once its first step is published says so in the singular.
// Where a process's memory once was: a GUI that analysed a large checkpoint, say.
char* volatile g_held = nullptr;

// The memory a CPU run records is what it added to its process, never the process's
// history: a process that once held 512 MB (freed again) trains a small model.
TEST(Trainer, RunMemoryIsWhatTheRunAddedNotTheProcessHistory) {
  const size_t big = size_t{512} << 20;
  g_held = static_cast<char*>(std::malloc(big));
  ASSERT_NE(g_held, nullptr);
  std::memset(g_held, 1, big);  // resident: the process's peak is now at least 512 MB
  std::free(g_held);            // mapped on its own: given back to the system at once
  g_held = nullptr;
  RunConfig c;
  c.model = ModelKind::Mlp;  // with its reference
  c.steps = 4;
  c.stats_interval = 2;
  c.sqnr_interval = 0;
  auto got = std::make_shared<Collect>();
  auto bus = std::make_shared<MetricBus>();
  bus->add(got);
  Trainer t(c, bus);
  t.run();
  ASSERT_EQ(t.status(), RunStatus::Finished) << t.message();
  const auto s = got->steps();
  ASSERT_FALSE(s.empty());
  double last = 0;
  for (const StepMetrics& m : s) {
    ASSERT_TRUE(std::isfinite(m.peak_rss)) << "step " << m.step;
    EXPECT_GE(m.peak_rss, last) << "the largest so far: step " << m.step;
    last = m.peak_rss;
  }
  EXPECT_GT(last, 0.0);
  EXPECT_LT(last, 256e6) << "a small MLP's run recorded " << last / 1e6 << " MB";
}

TEST(Trainer, AStopAfterOneStepSaysOneStep) {
  RunConfig c;
  c.model = ModelKind::Mlp;
  c.steps = 100;
  c.reference = false;
  // Stops the run from the bus, as the first step's metrics arrive: the trainer sees it
  // before its second step.
  class StopAtFirstStep : public MetricConsumer {
   public:
    void consume(const MetricBatch& b) override {
      if (!b.steps.empty() && trainer) trainer->stop();
    }
    Trainer* trainer = nullptr;
  };
  auto bus = std::make_shared<MetricBus>();
  auto stopper = std::make_shared<StopAtFirstStep>();
  bus->add(stopper);
  Trainer t(c, bus);
  stopper->trainer = &t;
  t.start();
  t.join();
  ASSERT_EQ(t.status(), RunStatus::Stopped) << t.message();
  EXPECT_EQ(t.steps_done(), 1);
  EXPECT_EQ(t.message(), "stopped after 1 step");
}

// A run shorter than its statistics interval samples its first and its last step: before,
// only step 0, so a sweep of short runs compared every trial's untrained first step.
TEST(Trainer, ARunShorterThanItsStatisticsIntervalSamplesItsLastStep) {
  RunConfig c;
  c.model = ModelKind::Mlp;
  c.steps = 6;
  c.stats_interval = 10;
  c.sqnr_interval = 0;
  c.reference = false;
  auto bus = std::make_shared<MetricBus>();
  auto collect = std::make_shared<Collect>();
  bus->add(collect);
  Trainer t(c, bus);
  t.start();
  t.join();
  ASSERT_EQ(t.status(), RunStatus::Finished) << t.message();
  std::set<int64_t> sampled;
  {
    const std::lock_guard<std::mutex> lock(collect->mutex);
    for (const MetricBatch& b : collect->batches)
      for (const TensorMetrics& m : b.tensors) sampled.insert(m.step);
  }
  EXPECT_EQ(sampled, (std::set<int64_t>{0, 5}));
  // The FP8 layers in the model's order, once, at the start: the order in which the forward
  // passes quantized their inputs at step 0.
  std::vector<std::string> said, forward;
  {
    const std::lock_guard<std::mutex> lock(collect->mutex);
    for (const MetricBatch& b : collect->batches) {
      for (const RunEvent& e : b.events) {
        if (e.kind != fp8wb::RunEventKind::Layers) continue;
        EXPECT_EQ(e.step, 0);
        EXPECT_TRUE(said.empty()) << "said twice";
        for (size_t from = 0; from <= e.message.size();) {
          const size_t comma = std::min(e.message.find(", ", from), e.message.size());
          said.push_back(e.message.substr(from, comma - from));
          from = comma + 2;
        }
      }
      for (const TensorMetrics& m : b.tensors)
        if (m.step == 0 && m.role == Role::Input) forward.push_back(m.layer);
    }
  }
  EXPECT_GE(forward.size(), 2u);
  EXPECT_EQ(said, forward);
}

// A sampled step's statistics, as published, carry what their layer quantized with: the
// role's recipe (kind, format, margin) and the scaling mode.
TEST(Trainer, SampledStatisticsCarryTheirRecipe) {
  for (const bool delayed : {false, true}) {
    SCOPED_TRACE(delayed ? "delayed" : "current");
    RunConfig c;
    c.model = ModelKind::Mlp;
    c.steps = 2;
    c.stats_interval = 1;
    c.sqnr_interval = 0;
    c.reference = false;
    c.scaling = delayed ? ScalingMode::Delayed : ScalingMode::Current;
    c.recipe = delayed ? Float8Recipe::Tensorwise : Float8Recipe::Rowwise;
    c.formats = delayed ? FormatPairing::Hybrid : FormatPairing::E4M3;
    c.margin = delayed ? 1 : 2;
    auto bus = std::make_shared<MetricBus>();
    auto collect = std::make_shared<Collect>();
    bus->add(collect);
    Trainer t(c, bus);
    t.start();
    t.join();
    ASSERT_EQ(t.status(), RunStatus::Finished) << t.message();
    const std::lock_guard<std::mutex> lock(collect->mutex);
    int seen = 0;
    for (const MetricBatch& b : collect->batches) {
      for (const TensorMetrics& m : b.tensors) {
        SCOPED_TRACE(m.layer + " " + std::string(role_name(m.role)));
        ++seen;
        EXPECT_EQ(m.scaling, c.scaling);
        EXPECT_EQ(m.recipe.kind, delayed ? ScalingKind::Tensorwise : ScalingKind::Rowwise);
        EXPECT_EQ(m.recipe.format,
                  delayed && m.role == Role::GradOutput ? Format::E5M2 : Format::E4M3FN);
        EXPECT_EQ(m.recipe.margin, c.margin);
      }
    }
    EXPECT_GE(seen, 6);
  }
}

TEST(Trainer, NonFiniteLossMarksTheRunDivergedOrSkipsTheStep) {
  for (const char* policy : {"stop", "skip"}) {
    RunConfig c;
    c.model = ModelKind::Mlp;
    c.steps = 30;
    c.outlier_scale = 1e30;  // inputs so large that the squared error overflows fp32
    c.reference = false;
    c.on_nonfinite = parse_table_name(kOnNonfinite, policy).value();
    auto bus = std::make_shared<MetricBus>();
    auto col = std::make_shared<Collect>();
    bus->add(col);
    Trainer t(c, bus);
    t.run();
    bool skipped = false;
    for (const auto& b : col->batches) {
      for (const auto& e : b.events) skipped |= e.kind == fp8wb::RunEventKind::Skipped;
    }
    if (std::string(policy) == "stop") {
      EXPECT_EQ(t.status(), RunStatus::Diverged);
      EXPECT_NE(t.message().find("non-finite"), std::string::npos) << t.message();
      EXPECT_LT(t.steps_done(), 30);
    } else {
      // Steps skipped 10 in a row (a non-finite loss each time) is a divergence too.
      EXPECT_EQ(t.status(), RunStatus::Diverged);
      EXPECT_NE(t.message().find("consecutive steps"), std::string::npos) << t.message();
      EXPECT_TRUE(skipped);
      EXPECT_LT(t.steps_done(), 30);
    }
  }
}

TEST(Trainer, ErrorsEndTheRunAsFailedWithTheMessage) {
  RunConfig c;
  c.device = "cuda:7";
  auto bus = std::make_shared<MetricBus>();
  auto col = std::make_shared<Collect>();
  bus->add(col);
  Trainer t(c, bus);
  t.start();
  t.join();
  EXPECT_EQ(t.status(), RunStatus::Failed);
  EXPECT_NE(t.message().find("cuda:7"), std::string::npos) << t.message();
  ASSERT_FALSE(col->batches.empty());
  EXPECT_TRUE(col->batches.back().final);
  EXPECT_EQ(col->batches.back().status, RunStatus::Failed);
  // A bad config never starts.
  RunConfig bad;
  bad.window = -1;
  EXPECT_THROW(Trainer(bad, bus), std::invalid_argument);
}

// A loss that blows up without turning NaN (lr = 10) ends the run as diverged
// (docs/numerics.md, "Divergence"), as a sane run of the same model finishes; where the
// reference blows up too, the reason says so.
TEST(Trainer, ALossBlowUpIsDivergence) {
  RunConfig c;
  c.model = ModelKind::Mlp;
  c.steps = 300;
  c.lr = 10;
  c.warmup = 0;
  c.grad_clip = 0;
  c.reference = false;
  c.stats_interval = 0;
  c.sqnr_interval = 0;
  Trainer t(c, std::make_shared<MetricBus>());
  t.run();
  EXPECT_EQ(t.status(), RunStatus::Diverged) << t.message();
  EXPECT_NE(t.message().find("blew up"), std::string::npos) << t.message();
  EXPECT_EQ(t.message().find("reference"), std::string::npos) << t.message();  // none ran
  EXPECT_LT(t.steps_done(), 300);
  // With the high-precision reference beside it, which blows up as well at lr = 10: the
  // reason says so, since the settings diverge, not FP8 alone.
  c.reference = true;
  Trainer both(c, std::make_shared<MetricBus>());
  both.run();
  EXPECT_EQ(both.status(), RunStatus::Diverged) << both.message();
  EXPECT_NE(both.message().find("; the high-precision reference blew up too ("), std::string::npos)
      << both.message();
  EXPECT_NE(both.message().find(" at that step): the settings diverge, not FP8 alone"),
            std::string::npos)
      << both.message();
  c.reference = false;
  c.lr = 3e-3;
  c.steps = 60;
  Trainer sane(c, std::make_shared<MetricBus>());
  sane.run();
  EXPECT_EQ(sane.status(), RunStatus::Finished) << sane.message();
}

// The MLP with drift=30 reached a loss of 9e12 at its first swing's peak and was stored
// finished: the limit drift widens stops at 1e5 x, so a loss past a million times the
// first ends the run diverged, saying so; the drifting preset (drift=4) still finishes.
TEST(Trainer, AnAbsurdLossDivergesWhateverTheDrift) {
  RunConfig c;
  c.model = ModelKind::Mlp;
  c.drift = 30;
  c.steps = 40;
  c.reference = false;
  c.stats_interval = 0;
  c.sqnr_interval = 0;
  Trainer t(c, std::make_shared<MetricBus>());
  t.run();
  EXPECT_EQ(t.status(), RunStatus::Diverged) << t.message();
  EXPECT_NE(t.message().find("loss blew up: "), std::string::npos) << t.message();
  EXPECT_NE(t.message().find(", x 1e5 at most for drift: a loss past it is absurd) for 10 "
                             "consecutive steps"),
            std::string::npos)
      << t.message();
  c.drift = 4;
  c.drift_period = 60;
  c.steps = 150;
  Trainer preset(c, std::make_shared<MetricBus>());
  preset.run();
  EXPECT_EQ(preset.status(), RunStatus::Finished) << preset.message();
}

// The run store failing mid-run (a full disk; the file turned read-only) ends the run as
// failed with the reason, keeps every committed step, and the process goes on.
class StoreFault : public ::testing::TestWithParam<const char*> {};

TEST_P(StoreFault, EndsTheRunFailedAndKeepsCommittedSteps) {
  const std::string path = temp_db(std::string(GetParam()).substr(7, 5).c_str());
  auto store = RunStore::open(path);
  RunConfig c;
  c.model = ModelKind::Mlp;
  c.steps = 100000;
  c.stats_interval = 1;
  const int64_t id = store->create_run("fault", fp8wb::RunKind::Train, run_config_json(c), "cpu");
  // At step 20 the fault, in the writer's order: everything before it is committed.
  class Fault : public MetricConsumer {
   public:
    Fault(RunStore& s, std::string sql) : s_(s), sql_(std::move(sql)) {}
    void consume(const MetricBatch& b) override {
      for (const auto& m : b.steps) {
        if (m.step == 20) s_.exec_on_writer_for_testing(sql_);
      }
    }

   private:
    RunStore& s_;
    std::string sql_;
  };
  auto bus = std::make_shared<MetricBus>();
  auto col = std::make_shared<Collect>();
  bus->add(store->consumer());
  bus->add(std::make_shared<Fault>(*store, GetParam()));
  bus->add(col);
  Trainer t(c, bus, id);
  t.start();
  t.join();
  EXPECT_EQ(t.status(), RunStatus::Failed);
  const std::string why =
      std::string(GetParam()).find("max_page") != std::string::npos ? "disk full" : "read-only";
  EXPECT_NE(t.message().find(why), std::string::npos) << t.message();
  EXPECT_LT(t.steps_done(), 1000);
  // Every consumer still got the final batch (a GUI learns that the run ended).
  ASSERT_FALSE(col->batches.empty());
  EXPECT_TRUE(col->batches.back().final);
  EXPECT_EQ(col->batches.back().status, RunStatus::Failed);
  EXPECT_THROW(store->flush(), StoreError);
  store.reset();
  auto ro = RunStore::open_read_only(path);
  EXPECT_GE(ro->series(id, "loss").size(), 21u);
  EXPECT_EQ(ro->integrity_check(), "ok");
  if (why == "disk full") {
    EXPECT_EQ(ro->run(id)->status, RunStatus::Failed);
  }
  ro.reset();
  for (const char* ext : {"", "-wal", "-shm"}) std::filesystem::remove(path + ext);
}

INSTANTIATE_TEST_SUITE_P(Faults, StoreFault,
                         ::testing::Values("PRAGMA max_page_count = 1", "PRAGMA query_only = 1"));

}  // namespace
}  // namespace fp8wb
