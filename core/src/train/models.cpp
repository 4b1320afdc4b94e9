// Torch translation unit: the trainer's models and data (see models.h).
#include "models.h"

#include <torch/version.h>

#include <mutex>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "fp8wb/core/data/corpus.h"
#include "fp8wb/core/torch/layers.h"
#include "llama.h"

namespace fp8wb {

#if defined(FP8WB_FLOAT8_CUDA)
namespace detail {
at::Tensor gelu_tables_cuda(const at::Tensor& x);  // gelu_cuda.cpp
}  // namespace detail
#endif

bool detail::gelu_tables_take(const torch::Tensor& x) {
#if defined(FP8WB_FLOAT8_CUDA)
  return x.is_cuda() && x.scalar_type() == torch::kBFloat16 && x.is_contiguous() &&
         reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0;
#else
  (void)x;
  return false;
#endif
}

bool detail::gelu_uses_tables(const torch::Tensor& x) {
  return x.numel() >= kGeluTablesFrom && gelu_tables_take(x);
}

torch::Tensor detail::gelu_tables(const torch::Tensor& x) {
  if (!gelu_tables_take(x))
    throw std::invalid_argument(
        "the GELU tables take contiguous, 16-byte aligned CUDA bf16 tensors in CUDA builds");
#if defined(FP8WB_FLOAT8_CUDA)
  return detail::gelu_tables_cuda(x);
#else
  return torch::gelu(x);  // not reached: nothing passes gelu_tables_take() here
#endif
}

torch::Tensor gelu(const torch::Tensor& x) {
  if (detail::gelu_uses_tables(x)) return detail::gelu_tables(x);
  return torch::gelu(x);
}

}  // namespace fp8wb

namespace fp8wb::train {
namespace {

torch::Tensor host_normal(std::mt19937_64& rng, int64_t rows, int64_t cols, double stddev) {
  std::normal_distribution<float> nd(0.0f, static_cast<float>(stddev));
  torch::Tensor t = torch::empty({rows, cols});
  float* p = t.data_ptr<float>();
  for (int64_t i = 0; i < rows * cols; ++i) p[i] = nd(rng);
  return t;
}

// Layer norm (layer_norm() below).
struct NormImpl : torch::nn::Module {
  explicit NormImpl(int64_t d) {
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return layer_norm(x, norm->weight, norm->bias, norm->options.eps(), true);
  }
  torch::nn::LayerNorm norm{nullptr};
};
TORCH_MODULE(Norm);

struct BlockImpl : torch::nn::Module {
  BlockImpl(int64_t d, int64_t heads) : heads_(heads) {
    ln1 = register_module("ln1", Norm(d));
    qkv = register_module("qkv", LinearLayer(d, 3 * d));
    proj = register_module("proj", LinearLayer(d, d));
    ln2 = register_module("ln2", Norm(d));
    fc1 = register_module("fc1", LinearLayer(d, 4 * d));
    fc2 = register_module("fc2", LinearLayer(4 * d, d));
  }
  torch::Tensor forward(const torch::Tensor& x, bool fused_attention) {
    const int64_t b = x.size(0), t = x.size(1), d = x.size(2), dh = d / heads_;
    const torch::Tensor qkv_out = qkv->forward(ln1->forward(x));
    // q, k, v [B, H, T, dh] by unbind along the three, whose backward stacks their
    // gradients straight into qkv's [B, T, 3, H, dh] layout in one pass (indexing would
    // give each a zero-filled [B, T, 3, H, dh] and add the three up; unbinding a permuted
    // [3, B, H, T, dh] view would stack them there and copy the stack into qkv's layout).
    const auto parts = qkv_out.view({b, t, 3, heads_, dh}).unbind(2);  // 3 x B,T,H,dh
    const torch::Tensor y = causal_attention(parts[0].transpose(1, 2), parts[1].transpose(1, 2),
                                             parts[2].transpose(1, 2), fused_attention)
                                .transpose(1, 2)
                                .reshape({b, t, d});
    const torch::Tensor h = x + proj->forward(y);
    return h + fc2->forward(fp8wb::gelu(fc1->forward(ln2->forward(h))));
  }
  int64_t heads_;
  Norm ln1{nullptr}, ln2{nullptr};
  LinearLayer qkv{nullptr}, proj{nullptr}, fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Block);

class TinyGpt : public TrainModel {
 public:
  TinyGpt(const RunConfig& c, int64_t vocab) : context_(c.context) {
    tok = register_module("tok", torch::nn::Embedding(vocab, c.d_model));
    pos = register_parameter("pos", torch::randn({c.context, c.d_model}) * 0.02);
    blocks = register_module("blocks", torch::nn::ModuleList());
    for (int i = 0; i < c.layers; ++i) blocks->push_back(Block(c.d_model, c.heads));
    ln_f = register_module("ln_f", Norm(c.d_model));
    head = register_module("head", LinearLayer(c.d_model, vocab));
  }
  torch::Tensor loss(const Batch& b) override {
    const int64_t t = b.x.size(1);
    if (t > context_) throw std::invalid_argument("sequence longer than the context");
    torch::Tensor h = (tok(b.x) + pos.narrow(0, 0, t)).to(compute_dtype);
    for (const auto& m : *blocks) h = m->as<BlockImpl>()->forward(h, fused_attention);
    const torch::Tensor logits = head->forward(ln_f->forward(h)).to(torch::kFloat);
    return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                                b.y.reshape({-1}));
  }

 private:
  int64_t context_;
  torch::nn::Embedding tok{nullptr};
  torch::Tensor pos;
  torch::nn::ModuleList blocks{nullptr};
  Norm ln_f{nullptr};
  LinearLayer head{nullptr};
};

class OutlierMlp : public TrainModel {
 public:
  explicit OutlierMlp(const RunConfig& c) {
    layers = register_module("layers", torch::nn::ModuleList());
    int64_t in = c.features;
    for (int i = 0; i < c.depth; ++i) {
      const int64_t out = i + 1 == c.depth ? c.features : c.width;
      layers->push_back(LinearLayer(in, out));
      in = out;
    }
  }
  torch::Tensor loss(const Batch& b) override {
    torch::Tensor h = b.x.to(compute_dtype);
    const size_t n = layers->size();
    for (size_t i = 0; i < n; ++i) {
      h = layers[i]->as<LinearLayerImpl>()->forward(h);
      if (i + 1 < n) h = fp8wb::gelu(h);
    }
    return torch::mse_loss(h.to(torch::kFloat), b.y);
  }

 private:
  torch::nn::ModuleList layers{nullptr};
};

}  // namespace

bool fused_attention_available() {
#if TORCH_VERSION_MAJOR >= 2
  return true;
#else
  return false;
#endif
}

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, bool fused) {
#if TORCH_VERSION_MAJOR >= 2
  if (fused) return at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
#else
  if (fused) throw std::invalid_argument("this LibTorch has no scaled_dot_product_attention");
#endif
  const int64_t t = q.size(-2);
  const torch::Tensor mask =
      torch::ones({t, t}, torch::TensorOptions().dtype(torch::kBool).device(q.device())).triu(1);
  torch::Tensor att =
      torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
  att = torch::softmax(att.to(torch::kFloat).masked_fill(mask, -INFINITY), -1).to(q.scalar_type());
  return torch::matmul(att, v);
}

torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& weight,
                         const torch::Tensor& bias, double eps, bool in_compute_dtype) {
  const auto t = x.scalar_type();
  if (in_compute_dtype && x.is_cuda() && t == torch::kBFloat16) {
#if defined(FP8WB_FLOAT8_CUDA)
    return detail::layer_norm_cuda(x, weight, bias, eps);
#else
    return torch::layer_norm(x, {x.size(-1)}, weight.to(t), bias.to(t), eps);
#endif
  }
  return torch::layer_norm(x.to(torch::kFloat), {x.size(-1)}, weight, bias, eps).to(t);
}

bool fused_adamw_available(const torch::Device& device) {
#if defined(FP8WB_TORCH_CUDA) && \
    (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1))
  return device.is_cuda();
#else
  (void)device;
  return false;
#endif
}

AdamW::AdamW(std::vector<torch::Tensor> params, double lr, double weight_decay)
    : params_(std::move(params)), lr_(lr), weight_decay_(weight_decay) {
  fused_ = !params_.empty() && fused_adamw_available(params_.front().device());
  for (const auto& p : params_) {
    if (p.device() != params_.front().device() || p.scalar_type() != torch::kFloat) fused_ = false;
  }
  if (!fused_) {
    opt_ = std::make_unique<torch::optim::AdamW>(
        params_, torch::optim::AdamWOptions(lr).weight_decay(weight_decay));
    return;
  }
  for (const auto& p : params_) {
    exp_avg_.push_back(torch::zeros_like(p));
    exp_avg_sq_.push_back(torch::zeros_like(p));
  }
  step_ = torch::zeros({}, params_.front().options().dtype(torch::kFloat));
}

void AdamW::set_lr(double lr) {
  lr_ = lr;
  if (!opt_) return;
  for (auto& g : opt_->param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
}

void AdamW::zero_grad() {
  for (auto& p : params_) p.mutable_grad() = torch::Tensor();
}

void AdamW::step(const torch::Tensor& found_inf) {
  if (opt_) {
    if (found_inf.defined() && found_inf.item<float>() != 0) return;
    opt_->step();
    return;
  }
#if defined(FP8WB_TORCH_CUDA) && \
    (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1))
  std::vector<torch::Tensor> p, g, m, v;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;  // as torch::optim::AdamW: no gradient, no update
    p.push_back(params_[i]);
    g.push_back(params_[i].grad());
    m.push_back(exp_avg_[i]);
    v.push_back(exp_avg_sq_[i]);
  }
  if (p.empty()) return;
  // One step count for every parameter (they are updated together): counted before the
  // update as its bias corrections need, taken back where the update is skipped.
  step_.add_(1);
  const std::vector<torch::Tensor> steps(p.size(), step_);
  const c10::optional<at::Tensor> inf =
      found_inf.defined() ? c10::optional<at::Tensor>(found_inf) : c10::nullopt;
  at::_fused_adamw_(p, g, m, v, {}, steps, lr_, 0.9, 0.999, weight_decay_, 1e-8,
                    /*amsgrad=*/false, /*maximize=*/false, c10::nullopt, inf);
  if (found_inf.defined()) step_.sub_(found_inf.reshape({}));
#else
  (void)found_inf;
#endif
}

int64_t AdamW::state_bytes() const {
  int64_t n = 0;
  if (opt_) {
    for (const auto& kv : opt_->state()) {
      if (const auto* st = dynamic_cast<const torch::optim::AdamWParamState*>(kv.second.get())) {
        for (const torch::Tensor& t : {st->exp_avg(), st->exp_avg_sq(), st->max_exp_avg_sq()})
          if (t.defined()) n += static_cast<int64_t>(t.nbytes());
      }
    }
    return n;
  }
  for (const auto* list : {&exp_avg_, &exp_avg_sq_})
    for (const auto& t : *list) n += static_cast<int64_t>(t.nbytes());
  return n;
}

torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  const bool clip = max_norm > 0 && std::isfinite(max_norm);
  if (grads.empty() || !grads.front().is_cuda()) {
    const double n = torch::nn::utils::clip_grad_norm_(params, clip ? max_norm : INFINITY);
    return torch::tensor(n, torch::kDouble);
  }
  torch::NoGradGuard no_grad;
#if TORCH_VERSION_MAJOR >= 2
  const std::vector<torch::Tensor> norms = at::_foreach_norm(grads, 2);
#else
  std::vector<torch::Tensor> norms;
  for (const auto& g : grads) norms.push_back(g.norm(2));
#endif
  const torch::Tensor total = norms.size() == 1 ? norms.front() : torch::stack(norms).norm(2);
  if (clip) {
    const torch::Tensor coef = torch::clamp_max(max_norm / (total + 1e-6), 1.0);
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
    at::_foreach_mul_(grads, coef);
#else
    for (auto& g : grads) g.mul_(coef);
#endif
  }
  return total;
}

CharCorpus::CharCorpus(int batch, int context, uint64_t seed)
    : batch_(batch), context_(context), rng_(seed) {
  const std::string_view text = bundled_corpus();
  bool seen[256] = {};
  for (unsigned char ch : text) seen[ch] = true;
  for (int i = 0; i < 256; ++i) {
    if (seen[i]) chars_.push_back(static_cast<char>(i));
  }
  int64_t index[256] = {};
  for (size_t i = 0; i < chars_.size(); ++i)
    index[static_cast<unsigned char>(chars_[i])] = static_cast<int64_t>(i);
  ids_ = torch::empty({static_cast<int64_t>(text.size())}, torch::kLong);
  int64_t* p = ids_.data_ptr<int64_t>();
  for (size_t i = 0; i < text.size(); ++i) p[i] = index[static_cast<unsigned char>(text[i])];
  if (ids_.numel() <= context_ + 1) throw std::runtime_error("the bundled corpus is too short");
}

Batch CharCorpus::next(const torch::Device& device) {
  std::uniform_int_distribution<int64_t> pick(0, ids_.numel() - context_ - 2);
  // x and y side by side, in page-locked memory for a GPU: one copy that the host does
  // not wait for (a copy from pageable memory would wait for the GPU's queue to drain).
  const bool gpu = device.is_cuda();
  torch::Tensor xy = torch::empty({2, batch_, context_},
                                  torch::TensorOptions().dtype(torch::kLong).pinned_memory(gpu));
  int64_t* x = xy.data_ptr<int64_t>();
  int64_t* y = x + int64_t{batch_} * context_;
  const int64_t* src = ids_.data_ptr<int64_t>();
  for (int b = 0; b < batch_; ++b) {
    const int64_t o = pick(rng_);
    std::copy(src + o, src + o + context_, x + int64_t{b} * context_);
    std::copy(src + o + 1, src + o + 1 + context_, y + int64_t{b} * context_);
  }
  if (gpu) xy = xy.to(device, /*non_blocking=*/true);
  return {xy[0], xy[1], int64_t{batch_} * context_};
}

TokenData::TokenData(const std::string& path, int batch, int context, uint64_t seed)
    : batch_(batch), context_(context), rng_(seed) {
  // At least one training window and one held-out window.
  file_ = std::make_unique<TokenFile>(path, 2 * (int64_t{context} + 1));
  const int64_t n = file_->size();
  const int64_t held = std::max<int64_t>(context + 1, n / 10);
  split_ = n - held;
  if (split_ < context + 1) split_ = context + 1;
  const int64_t windows = (n - split_) / (context + 1);
  eval_batches_ = std::min<int64_t>(4, (windows + batch - 1) / batch);
}

TokenData::~TokenData() = default;

std::string TokenData::describe() const {
  return "data " + file_->path() + " (" + file_->format() + ", " + std::to_string(file_->size()) +
         " tokens, the last " + std::to_string(file_->size() - split_) + " held out)";
}

int64_t TokenData::vocab() const {
  return static_cast<int64_t>(file_->max_token()) + 1;
}

void TokenData::check_vocab(int64_t vocab) const {
  file_->check_vocab(vocab);
}

Batch TokenData::windows(const std::vector<int64_t>& starts, const torch::Device& device) const {
  const bool gpu = device.is_cuda();
  const auto rows = static_cast<int64_t>(starts.size());
  torch::Tensor xy = torch::empty({2, rows, context_},
                                  torch::TensorOptions().dtype(torch::kLong).pinned_memory(gpu));
  int64_t* x = xy.data_ptr<int64_t>();
  int64_t* y = x + rows * context_;
  for (int64_t b = 0; b < rows; ++b) {
    file_->copy(starts[static_cast<size_t>(b)], context_, x + b * context_);
    file_->copy(starts[static_cast<size_t>(b)] + 1, context_, y + b * context_);
  }
  if (gpu) xy = xy.to(device, /*non_blocking=*/true);
  return {xy[0], xy[1], rows * context_};
}

Batch TokenData::next(const torch::Device& device) {
  std::uniform_int_distribution<int64_t> pick(0, split_ - context_ - 1);
  std::vector<int64_t> starts(static_cast<size_t>(batch_));
  for (auto& s : starts) s = pick(rng_);
  return windows(starts, device);
}

Batch TokenData::eval_batch(int64_t i, const torch::Device& device) const {
  const int64_t w = context_ + 1;
  const int64_t total = (file_->size() - split_) / w;
  std::vector<int64_t> starts;
  for (int64_t k = i * batch_; k < std::min<int64_t>(total, (i + 1) * batch_); ++k)
    starts.push_back(split_ + k * w);
  return windows(starts, device);
}

SyntheticRegression::SyntheticRegression(const RunConfig& c)
    : batch_(c.batch),
      features_(c.features),
      outliers_(c.outlier_channels),
      outlier_scale_(c.outlier_scale),
      tail_(c.target_tail),
      drift_(c.drift),
      period_(c.drift_period),
      rng_(c.seed) {
  teacher1_ = host_normal(rng_, features_, 2 * features_, 1.0 / std::sqrt(double(features_)));
  teacher2_ = host_normal(rng_, 2 * features_, features_, 1.0 / std::sqrt(2.0 * features_));
}

Batch SyntheticRegression::next(const torch::Device& device) {
  torch::Tensor x = host_normal(rng_, batch_, features_, 1.0);
  // Outlier channels: a few inputs far larger than the rest (as in LLM activations).
  if (outliers_ > 0) x.narrow(1, 0, outliers_).mul_(outlier_scale_);
  const torch::Tensor clean =
      torch::tanh(x.matmul(teacher1_) / std::max(1.0, outlier_scale_ / 4)).matmul(teacher2_);
  // Student-t noise: heavy tails in the targets give heavy-tailed gradients.
  std::student_t_distribution<float> t(static_cast<float>(tail_));
  torch::Tensor noise = torch::empty({batch_, features_});
  float* p = noise.data_ptr<float>();
  for (int64_t i = 0; i < noise.numel(); ++i) p[i] = 0.1f * t(rng_);
  // Drifting activations: the inputs (not the targets) swing in scale over the steps, so
  // that delayed scaling's window and margin matter.
  if (drift_ > 0) {
    x.mul_(std::exp2(drift_ * std::sin(2 * M_PI * static_cast<double>(step_) / period_)));
  }
  ++step_;
  return {x.to(device), (clean + noise).to(device), int64_t{batch_}};
}

std::shared_ptr<TrainModel> make_model(const RunConfig& c, int64_t vocab) {
  // The initial weights come from LibTorch's one global generator: trials built side by
  // side (a sweep) would draw from it in turn and get each other's numbers. Seeding and
  // building are one step under a lock, so that a seed always gives the same model.
  static std::mutex global_generator;
  const std::lock_guard<std::mutex> lock(global_generator);
  torch::manual_seed(c.seed);
  std::shared_ptr<TrainModel> m;
  if (c.model == ModelKind::Gpt) {
    m = std::make_shared<TinyGpt>(c, vocab);
  } else if (c.model == ModelKind::Llama) {
    m = make_llama(c, vocab);
  } else {
    m = std::make_shared<OutlierMlp>(c);
  }
  return m;
}

std::unique_ptr<DataSource> make_data(const RunConfig& c) {
  if (c.model != ModelKind::Mlp && !c.data.empty())
    return std::make_unique<TokenData>(c.data, c.batch, c.context, c.seed);
  if (c.model != ModelKind::Mlp) return std::make_unique<CharCorpus>(c.batch, c.context, c.seed);
  return std::make_unique<SyntheticRegression>(c);
}

std::vector<std::pair<std::string, LinearLayerImpl*>> linear_layers(torch::nn::Module& m) {
  std::vector<std::pair<std::string, LinearLayerImpl*>> out;
  for (const auto& item : m.named_modules("", /*include_self=*/false)) {
    if (auto* l = dynamic_cast<LinearLayerImpl*>(item.value().get()))
      out.emplace_back(item.key(), l);
  }
  return out;
}

}  // namespace fp8wb::train
