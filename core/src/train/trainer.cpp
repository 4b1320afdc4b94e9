// Torch translation unit: the training loop behind Trainer (trainer.h): the run's set-up
// (ranks, data, models), its steps launched and read (a step's parts are in
// trainer_step.cpp), the statistics sampled at a step, divergence, the final weights;
// run(), which ends a run as failed on any error, and the devices a config names.
// Trainer's controls, which need no torch, are in trainer_control.cpp; what both share is
// trainer_impl.h.
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <stdexcept>

#include <torch/version.h>

#include "divergence.h"
#include "fp8wb/core/backend/backend_info.h"
#include "fp8wb/core/backend/notices.h"
#include "fp8wb/core/checkpoint/file_io.h"
#include "fp8wb/core/checkpoint/safetensors.h"
#include "fp8wb/core/counted.h"
#include "trainer_impl.h"
#include "trainer_step.h"

namespace fp8wb {

using train::Batch;

namespace {

// What the run's step takes of LibTorch's fast paths, and why not where it falls back:
// said in the run's "started" event (fp8wb runs show, the GUI's status bar).
std::string fast_paths(const RunConfig& c, const train::TrainModel& m, const train::AdamW& opt,
                       const torch::Device& device) {
  std::string s;
  if (c.model != ModelKind::Mlp) {
    const int dh = c.d_model / std::max(1, c.heads);
    if (!m.fused_attention) {
      s += "; attention: two matmuls and an fp32 softmax (LibTorch " + std::string(TORCH_VERSION) +
           " has no scaled_dot_product_attention)";
    } else if (device.is_cuda() && (dh % 8 != 0 || dh > 256)) {
      s += "; attention: scaled_dot_product_attention, not its flash kernel (head size " +
           std::to_string(dh) + " is not a multiple of 8 up to 256)";
    } else {
      s += "; attention: scaled_dot_product_attention";
    }
  }
  if (device.is_cuda()) {
    s += opt.fused() ? "; AdamW: one fused kernel"
                     : "; AdamW: a loop over the parameters (LibTorch " +
                           std::string(TORCH_VERSION) + " has no fused AdamW)";
  }
  return s;
}

// Data-parallel runs on GPUs: each rank takes the GPU of its local rank.
std::string rank_device(const std::string& resolved, const RankInfo& r) {
  if (!r.distributed() || resolved == "cpu") return resolved;
  const int64_t n = static_cast<int64_t>(torch::cuda::device_count());
  if (r.local_rank >= n) {
    throw std::invalid_argument("rank " + std::to_string(r.rank) + " (local rank " +
                                std::to_string(r.local_rank) +
                                ") has no GPU of its own: " + std::to_string(n) +
                                " GPU(s) are visible on this machine; start at most that many "
                                "ranks per machine, or use device=cpu");
  }
  return "cuda:" + std::to_string(r.local_rank);
}

// What the host knows of a step once it is launched, and what it reads when the step
// is done (RunLoop::complete()).
struct Pending {
  int64_t step = 0;
  double lr = 0;
  int64_t tokens = 0;
  bool sampling = false, stop_now = false;
  double fp8_mem = NAN, ref_mem = NAN;
  double eval_loss = NAN, ref_eval_loss = NAN;
  std::shared_ptr<train::StepReadback> fp8_read, ref_read;
  std::vector<train::LayerSample> samples;  // a sampling step read after the next launch
};

using Layers = std::vector<std::pair<std::string, LinearLayerImpl*>>;

// One run's steps (Trainer::Impl::body()): the constructor joins the ranks and builds the
// data and the models, run() publishes the "started" event, launches and reads every
// step, and ends the run.
class RunLoop {
 public:
  RunLoop(Trainer::Impl& t, const torch::Device& device);
  void run();

 private:
  std::unique_ptr<dist::RankGroup> connect_ranks();
  void build_models();
  std::string started_text();
  void publish_started();
  double evaluate(train::TrainModel& model);
  Pending launch(int64_t step);
  bool complete(Pending& p);
  bool complete_pending(std::optional<Pending>& pending);
  StepMetrics step_metrics(const Pending& p);
  void add_samples(MetricBatch& b, Pending& p);

  Trainer::Impl& t_;
  const RunConfig& cfg_;
  // What the FP8 layers quantize with (and what their statistics say they were measured
  // under, where a layer has no config of its own).
  const Float8LinearConfig run_fp8_;
  const torch::Device device_;
  std::unique_ptr<dist::RankGroup> group_;
  train::RunResidentMemory run_memory_;  // before the run's data and models
  std::unique_ptr<train::DataSource> data_;
  train::Stepper fp8_;
  Layers layers_;  // the FP8 layers of fp8_'s model
  // Every step's amax of every FP8 tensor (docs/numerics.md, "Replaying delayed scaling"),
  // where every role has one scale (a tensorwise recipe).
  std::vector<Float8LinearState*> amax_layers_;
  std::vector<AmaxTensor> amax_tensors_;
  train::Stepper ref_;
  std::string convert_report_;  // what convert_to_float8() did, for the "started" event
  train::StepMemory fp8_memory_, ref_memory_;
  train::Divergence divergence_;
  // On a GPU (one process) a step is launched before the previous one is read: the host
  // queues step s + 1 while the GPU runs step s, and never waits for a step's loss while
  // the GPU idles. A step that samples statistics takes them off the layers as it is
  // launched (LayerSample), so it too is read after the next launch. Across ranks every
  // step's exchange waits anyway.
  bool lookahead_ = false;
  std::chrono::steady_clock::time_point last_end_;  // the last step's, as complete() saw it
};

RunLoop::RunLoop(Trainer::Impl& t, const torch::Device& device)
    : t_(t),
      cfg_(t.cfg),
      run_fp8_(float8_config_of(cfg_)),
      device_(device),
      group_(connect_ranks()),
      data_(train::make_data(cfg_)),
      fp8_memory_(device),
      ref_memory_(device),
      divergence_(cfg_) {
  // A token file whose tokens reach past the model's vocabulary: refused naming the first.
  if (cfg_.model == ModelKind::Llama && cfg_.vocab > 0) data_->check_vocab(cfg_.vocab);
  build_models();
  lookahead_ = device_.is_cuda() && !group_;
}

// Data-parallel runs: the ranks' group, once every rank has joined (none otherwise).
std::unique_ptr<dist::RankGroup> RunLoop::connect_ranks() {
  const RankInfo& ranks = t_.ranks;
  if (!ranks.distributed()) return nullptr;
  if (cfg_.batch % ranks.world != 0) {
    throw std::invalid_argument("batch: " + std::to_string(cfg_.batch) +
                                " does not split evenly across " + std::to_string(ranks.world) +
                                " ranks (the batch is the global one)");
  }
  // What every rank must share: its whole config but what may differ between ranks (its
  // device, as each has its GPU; the name and weights path, which rank 0 alone uses).
  RunConfig shared = cfg_;
  shared.device.clear();
  shared.name.clear();
  shared.weights.clear();
  return dist::RankGroup::connect(ranks, device_, std::chrono::seconds(cfg_.rank_timeout),
                                  &t_.stop_flag, run_config_json(shared));
}

// The FP8 model (converted, its layers listed, their amaxes reduced across ranks), and
// the reference from the same seed.
void RunLoop::build_models() {
  const torch::ScalarType dtype =
      cfg_.dtype == ActivationDtype::Bf16 ? torch::kBFloat16 : torch::kFloat;
  fp8_.model = train::make_model(cfg_, data_->vocab());
  fp8_.model->to(device_);
  fp8_.model->compute_dtype = dtype;
  if (cfg_.fp8) {
    ConvertOptions opt;
    opt.skip_names = {"head", "lm_head"};  // the output head stays in high precision
    opt.gpu_min_weight_elements = 0;       // the workbench shows FP8 on every layer it can take
    const ConvertReport r = convert_to_float8(*fp8_.model, run_fp8_, opt);
    for (auto& [name, l] : train::linear_layers(*fp8_.model)) {
      if (l->is_float8()) layers_.emplace_back(name, l);
    }
    convert_report_ = ", " + std::to_string(r.converted.size()) + " FP8 linear layers";
    for (const auto& s : r.skipped) convert_report_ += "; kept in high precision: " + s;
  }
  if (cfg_.fp8 && cfg_.recipe == Float8Recipe::Tensorwise) {
    for (auto& [name, l] : layers_) {
      amax_layers_.push_back(&l->state());
      for (const RoleEntry& r : kRoles)
        amax_tensors_.push_back({name, r.value, run_fp8_.recipe(r.value).format});
    }
  }
  if (group_) {
    dist::RankGroup* g = group_.get();
    if (cfg_.fp8 && cfg_.amax_reduction) {
      for (auto& [name, l] : layers_)
        l->state().reduce_amax = [g](torch::Tensor& t) { g->max(t, "amaxes"); };
    }
    fp8_.group = g;
  }
  fp8_.init(cfg_);
  if (cfg_.reference && cfg_.fp8) {
    ref_.model = train::make_model(cfg_, data_->vocab());  // same seed: the same weights
    ref_.model->to(device_);
    ref_.model->compute_dtype = dtype;
    ref_.init(cfg_);
    ref_.group = group_.get();
  }
}

// The "started" event's text: the model, its device, its FP8 layers, its data, its ranks,
// the fast paths its step takes.
std::string RunLoop::started_text() {
  std::string s = std::string(model_kind_name(cfg_.model)) +
                  (cfg_.hf.empty() ? std::string() : " (weights from " + cfg_.hf + ")") + " on " +
                  device_.str();
  if (cfg_.fp8) {
    s += convert_report_;
    s += device_.is_cuda() ? std::string("; FP8 GEMMs: ") + probe_backend().fp8_gemm
                           : "; FP8 GEMMs emulated (bit-exact)";
  }
  if (const std::string d = data_->describe(); !d.empty()) s += "; " + d;
  if (group_) {
    const int world = t_.ranks.world;
    s += "; " + std::to_string(world) + " ranks (" + (device_.is_cuda() ? "NCCL" : "Gloo") +
         "), batch " + std::to_string(cfg_.batch / world) + " each";
    if (cfg_.fp8)
      s += cfg_.amax_reduction ? ", amaxes reduced across ranks"
                               : ", each rank scales by its own amaxes";
  }
  return s + fast_paths(cfg_, *fp8_.model, *fp8_.opt, device_);
}

void RunLoop::publish_started() {
  MetricBatch b;
  b.events.push_back({0, RunEventKind::Started, started_text(), {}});
  // The FP8 layers in the model's order, for those who list them (RunData::layers(): the
  // stored statistics come back by name).
  if (!layers_.empty()) {
    std::string names;
    for (const auto& [name, l] : layers_) names += (names.empty() ? "" : ", ") + name;
    b.events.push_back({0, RunEventKind::Layers, names, {}});
  }
  b.amax_tensors = amax_tensors_;
  t_.publish(b);
}

// The mean loss over the data's held-out windows, after a step's update: without
// gradients, the FP8 layers with their current scales and their state left as it was.
double RunLoop::evaluate(train::TrainModel& model) {
  torch::NoGradGuard no_grad;
  const auto lin = train::linear_layers(model);
  for (auto& [name, l] : lin) l->evaluating = true;
  double sum = 0;
  int64_t tokens = 0;
  try {
    for (int64_t i = 0; i < data_->eval_batches(); ++i) {
      const Batch b = data_->eval_batch(i, device_);
      sum += model.loss(b).item<double>() * static_cast<double>(b.tokens);
      tokens += b.tokens;
    }
  } catch (...) {
    for (auto& [name, l] : lin) l->evaluating = false;
    throw;
  }
  for (auto& [name, l] : lin) l->evaluating = false;
  return tokens > 0 ? sum / static_cast<double>(tokens) : NAN;
}

// Launches a step: the batch, both models' forward, backward and update, the readbacks
// of their losses, the statistics taken off the layers, the evaluation where due.
Pending RunLoop::launch(int64_t step) {
  Pending p;
  p.step = step;
  p.lr = t_.lr_at(step);
  fp8_.set_lr(p.lr);
  const Batch global_batch = data_->next(device_);
  const Batch batch = train::shard(global_batch, t_.ranks);
  p.tokens = global_batch.tokens;
  const bool last = step + 1 == cfg_.steps;  // sampled whatever the intervals
  p.sampling = (cfg_.stats_interval > 0 && (step % cfg_.stats_interval == 0 || last)) ||
               (cfg_.sqnr_interval > 0 && (step % cfg_.sqnr_interval == 0 || last));
  p.fp8_read = std::make_shared<train::StepReadback>(device_);
  fp8_memory_.begin();
  p.fp8_read->begin();
  // Across ranks a stop (Ctrl-C, a signal) is agreed on in the step's exchange, so
  // that every rank ends after the same step.
  const train::Launched fr = fp8_.forward_backward(batch, cfg_.grad_clip, t_.stop_flag.load());
  fp8_.update(fr);
  // Before the readback's end: waiting for it covers the histories' copies.
  if (lookahead_ && p.sampling) {
    FP8WB_TRACE_SCOPE("fp8wb_take_samples");
    p.samples.reserve(layers_.size());
    for (auto& [name, l] : layers_) p.samples.emplace_back(name, *l);
    train::LayerSample::copy_histories(p.samples);
  }
  p.fp8_read->end(fr,
                  amax_layers_.empty() ? torch::Tensor() : gather_step_amax(amax_layers_, device_));
  p.stop_now = group_ ? fr.stop : t_.stop_flag.load();
  p.fp8_mem = fp8_memory_.end(fp8_, p.sampling);
  fp8_.drop_grads();
  if (ref_.model) {
    ref_.set_lr(p.lr);
    p.ref_read = std::make_shared<train::StepReadback>(device_);
    ref_memory_.begin();
    p.ref_read->begin();
    const train::Launched rr = ref_.forward_backward(batch, cfg_.grad_clip);
    ref_.update(rr);
    p.ref_read->end(rr);
    p.ref_mem = ref_memory_.end(ref_, p.sampling);
    ref_.drop_grads();
  }
  if (data_->eval_batches() > 0 && cfg_.eval_interval > 0 &&
      (step % cfg_.eval_interval == 0 || last)) {
    p.eval_loss = evaluate(*fp8_.model);
    if (ref_.model) p.ref_eval_loss = evaluate(*ref_.model);
  }
  return p;
}

// A launched step's scalars, once its readbacks have been waited for.
StepMetrics RunLoop::step_metrics(const Pending& p) {
  const double ms = p.fp8_read->ms();
  StepMetrics m;
  m.step = p.step;
  m.loss = p.fp8_read->loss();
  m.grad_norm = p.fp8_read->norm();
  m.lr = p.lr;
  m.step_ms = ms;
  m.tokens_per_s = ms > 0 ? static_cast<double>(p.tokens) / (ms / 1000.0) : 0;
  m.ref_loss = m.loss_gap = std::nan("");
  m.mem_fp8 = p.fp8_mem;
  if (p.ref_read) {
    m.mem_ref = p.ref_mem;
    m.ref_loss = p.ref_read->loss();
    m.loss_gap = m.loss - m.ref_loss;
  }
  m.peak_rss = run_memory_.growth();
  m.eval_loss = p.eval_loss;
  m.ref_eval_loss = p.ref_eval_loss;
  const auto now = std::chrono::steady_clock::now();
  if (p.step > 0) {
    const double wall = std::chrono::duration<double>(now - last_end_).count();
    m.wall_tokens_per_s = wall > 0 ? static_cast<double>(p.tokens) / wall : NAN;
  }
  last_end_ = now;
  return m;
}

// A sampled step's statistics and SQNRs (and across ranks every rank's scales) into `b`.
void RunLoop::add_samples(MetricBatch& b, Pending& p) {
  const int64_t step = p.step;
  if (group_ && !layers_.empty() && layers_.front().second->probe().stats_step == step)
    b.ranks = train::gather_rank_scales(*group_, step, layers_, device_);
  const auto add_layer = [&](const std::string& name, const Float8Probe& pr,
                             const auto& amax_history, const Float8LinearConfig* lc) {
    if (pr.stats_step == step) {
      for (const RoleEntry& r : kRoles)
        train::add_role(b, step, name, r.value, pr.stats(r.value), amax_history(r.value),
                        lc ? *lc : run_fp8_);
    }
    if (pr.sqnr_step == step)
      b.sqnr.push_back({step, name, pr.fprop_sqnr_db, pr.dgrad_sqnr_db, pr.wgrad_sqnr_db});
  };
  if (!p.samples.empty()) {
    for (train::LayerSample& ls : p.samples) {
      {
        FP8WB_TRACE_SCOPE("fp8wb_settle");
        ls.settled();
      }
      FP8WB_TRACE_SCOPE("fp8wb_add_roles");
      add_layer(
          *ls.name, ls.settled(), [&](Role r) { return ls.amax_history(r); }, ls.config);
    }
  } else {
    for (auto& [name, l] : layers_) {
      LinearLayerImpl& layer = *l;
      add_layer(
          name, layer.probe(),
          [&](Role r) {
            return layer.config() && layer.config()->delayed ? layer.state().amax_history(r)
                                                             : std::vector<float>();
          },
          layer.config());
    }
  }
}

// Reads a launched step and reports it; true when the run ended with it.
bool RunLoop::complete(Pending& p) {
  const int64_t step = p.step;
  {
    FP8WB_TRACE_SCOPE("fp8wb_wait");
    p.fp8_read->wait();
    if (p.ref_read) p.ref_read->wait();
  }
  const StepMetrics m = step_metrics(p);
  const double loss = m.loss;
  const bool finite = std::isfinite(loss) && std::isfinite(m.grad_norm);
  MetricBatch b;
  if (step % cfg_.log_interval == 0 || step + 1 == cfg_.steps || !finite ||
      std::isfinite(p.eval_loss))
    b.steps.push_back(m);
  if (!amax_layers_.empty()) b.step_amax.push_back({step, p.fp8_read->amax()});
  if (p.sampling) {
    FP8WB_TRACE_SCOPE("fp8wb_samples");
    add_samples(b, p);
  }
  t_.steps = step + 1;
  if (!finite) {
    const std::string what = "non-finite " +
                             std::string(std::isfinite(loss) ? "gradient norm" : "loss") +
                             " at step " + std::to_string(step);
    if (cfg_.on_nonfinite == OnNonfinite::Stop) {
      t_.publish(b);
      t_.finish(RunStatus::Diverged, what);
      return true;
    }
    b.events.push_back({step, RunEventKind::Skipped, what + ": update skipped", {}});
  }
  divergence_.observe(loss, p.ref_read != nullptr, m.ref_loss);
  if (divergence_.blew_up()) {
    t_.publish(b);
    t_.finish(RunStatus::Diverged, divergence_.blow_up_message(step));
    return true;
  }
  {
    FP8WB_TRACE_SCOPE("fp8wb_publish");
    t_.publish(b);
  }
  if (p.stop_now) {
    t_.finish(RunStatus::Stopped, "stopped after " + counted(step + 1, "step"));
    return true;
  }
  return false;
}

// Reads the step still on its way, if any; true when the run ended with it.
bool RunLoop::complete_pending(std::optional<Pending>& pending) {
  if (!pending) return false;
  Pending p = std::move(*pending);
  pending.reset();
  return complete(p);
}

void RunLoop::run() {
  publish_started();
  last_end_ = std::chrono::steady_clock::now();
  std::optional<Pending> pending;
  train::StepTrace trace(device_);
  for (int64_t step = 0; step < cfg_.steps; ++step) {
    // A pause or a stop first reports the step still on its way.
    if ((t_.pause_flag.load() || t_.stop_flag.load()) && complete_pending(pending)) return;
    if (!group_ && !t_.wait_if_paused(step)) {
      t_.finish(RunStatus::Stopped, "stopped after " + counted(step, "step"));
      return;
    }
    trace.before(step);
    Pending p = [&] {
      FP8WB_TRACE_SCOPE("fp8wb_step");
      return launch(step);
    }();
    const bool ended = [&] {
      FP8WB_TRACE_SCOPE("fp8wb_complete");  // the previous step read and published
      return complete_pending(pending);
    }();
    if (ended) return;
    if (lookahead_) {
      pending = std::move(p);
    } else if (complete(p)) {
      return;
    }
  }
  if (complete_pending(pending)) return;
  if (divergence_.over_at_end()) {
    t_.finish(RunStatus::Diverged, divergence_.end_message(cfg_.steps - 1));
    return;
  }
  if (t_.ranks.rank == 0) t_.save_weights(*fp8_.model);
  t_.finish(RunStatus::Finished, "");
}

}  // namespace

double Trainer::Impl::lr_at(int64_t step) const {
  if (step < cfg.warmup) return cfg.lr * static_cast<double>(step + 1) / (cfg.warmup + 1);
  const double span = std::max<int64_t>(1, cfg.steps - cfg.warmup);
  const double t = std::min(1.0, static_cast<double>(step - cfg.warmup) / span);
  const double lo = cfg.lr * cfg.min_lr_ratio;
  return lo + 0.5 * (cfg.lr - lo) * (1.0 + std::cos(M_PI * t));
}

void Trainer::Impl::body() {
  if (compute_threads > 0) {
    at::set_num_threads(compute_threads);  // this thread's share of the cores
  } else if (at::get_num_threads() <= 1) {
    init_compute_threads();
  }
  train::keep_freed_host_memory();
  resolve_hf_config(cfg);  // the checkpoint's shape (already so where the caller resolved it)
  const torch::Device device(rank_device(Trainer::resolve_device(cfg.device), ranks));
  if (ranks.rank == 0) train::check_weights_path(cfg.weights);  // before any step: not to be lost
  RunLoop loop(*this, device);
  loop.run();
}

// The model's parameters (fp32) as a safetensors file, which the checkpoint inspector
// opens like any other.
void Trainer::Impl::save_weights(torch::nn::Module& model) {
  if (cfg.weights.empty()) return;
  std::vector<TensorToWrite> out;
  int64_t vocab_written = 0;  // the llama's embedding rows (its vocabulary)
  for (const auto& p : model.named_parameters()) {
    if (p.key() == "model.embed_tokens.weight") vocab_written = p.value().size(0);
    const at::Tensor t = p.value().detach().to(at::kCPU, at::kFloat).contiguous();
    TensorToWrite w{p.key(), StDtype::F32, t.sizes().vec(), {}};
    const auto* b = static_cast<const uint8_t*>(t.data_ptr());
    w.bytes.assign(b, b + t.numel() * 4);
    out.push_back(std::move(w));
  }
  // A llama's parameters have Hugging Face's names: written as model.safetensors, with a
  // config.json beside it (where there is none), the folder is a checkpoint others load.
  std::string also;
  const size_t slash = cfg.weights.find_last_of('/');
  const std::string folder = slash == std::string::npos ? "." : cfg.weights.substr(0, slash);
  const std::string file = slash == std::string::npos ? cfg.weights : cfg.weights.substr(slash + 1);
  std::map<std::string, std::string> meta{{"written_by", "fp8wb train"},
                                          {"run", std::to_string(run_id)}};
  if (cfg.model == ModelKind::Llama) meta["format"] = "pt";  // as Hugging Face's own files say
  write_safetensors(cfg.weights, out, meta);
  if (cfg.model == ModelKind::Llama && file == "model.safetensors") {
    const std::string config = folder + "/config.json";
    struct stat st {};
    if (stat(config.c_str(), &st) != 0) {
      RunConfig shape = cfg;
      shape.vocab = static_cast<int>(vocab_written);
      const std::string text = hf_config_json(shape);
      write_file_atomically(config, [&](std::ostream& o) { o << text; });
      also = ", with " + config;
    }
  }
  MetricBatch b;
  b.events.push_back(
      {steps.load(), RunEventKind::Weights, "final weights written to " + cfg.weights + also, {}});
  publish(b);
}

void Trainer::run() {
  try {
    impl_->body();
  } catch (const c10::Error& e) {
    impl_->finish(RunStatus::Failed, without_backtrace(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    impl_->finish(RunStatus::Failed, without_backtrace(e.what()));
  } catch (...) {
    impl_->finish(RunStatus::Failed, "unknown error");
  }
}

int Trainer::cuda_device_count() {
  return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
}

std::string Trainer::resolve_device(const std::string& device) {
  if (device == "cpu") return "cpu";
  if (device != "cuda" && device.rfind("cuda:", 0) != 0) {
    throw std::invalid_argument("device \"" + device + "\" is not one of cpu, cuda, cuda:N");
  }
  if (!torch::cuda::is_available()) {
    throw std::invalid_argument("device " + device + " was asked for, but " +
                                (probe_backend().torch_cuda_build
                                     ? std::string("no CUDA device is visible")
                                     : std::string("this build's LibTorch has no CUDA")) +
                                "; use device=cpu");
  }
  const int64_t n = static_cast<int64_t>(torch::cuda::device_count());
  int64_t index = 0;
  if (device.size() > 5) {
    try {
      index = std::stoll(device.substr(5));
    } catch (const std::exception&) {
      throw std::invalid_argument("device \"" + device + "\": N in cuda:N must be a number");
    }
  }
  if (index < 0 || index >= n) {
    throw std::invalid_argument("device " + device + " does not exist: " + std::to_string(n) +
                                " CUDA device(s) are visible");
  }
  return "cuda:" + std::to_string(index);
}

}  // namespace fp8wb
