// Torch translation unit: the Llama-family decoder (see llama.h).
#include "llama.h"

#include <cmath>
#include <stdexcept>

#include "fp8wb/core/checkpoint/eval_checkpoint.h"
#include "fp8wb/core/checkpoint/safetensors.h"
#include "fp8wb/core/data/token_file.h"
#include "fp8wb/core/train/trainer.h"

namespace fp8wb::train {
namespace {

std::string shape_text(c10::IntArrayRef s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

// RMSNorm as Llama computes it: x / sqrt(mean(x^2) + eps) in fp32, back in x's dtype, times
// the weight.
struct RmsNormImpl : torch::nn::Module {
  RmsNormImpl(int64_t d, double eps) : eps_(eps) {
    weight = register_parameter("weight", torch::ones({d}));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const torch::Tensor f = x.to(torch::kFloat);
    const torch::Tensor n = f * torch::rsqrt(f.pow(2).mean(-1, /*keepdim=*/true) + eps_);
    return n.to(x.scalar_type()) * weight.to(x.scalar_type());
  }
  double eps_;
  torch::Tensor weight;
};
TORCH_MODULE(RmsNorm);

// The rotary embedding of x [B, H, T, dh] (Hugging Face's layout: the two halves of each
// head rotate together): x cos + rotate_half(x) sin, in fp32, back in x's dtype.
torch::Tensor rotate(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const torch::Tensor f = x.to(torch::kFloat);
  const int64_t half = f.size(-1) / 2;
  const torch::Tensor rotated = torch::cat({-f.narrow(-1, half, half), f.narrow(-1, 0, half)}, -1);
  return (f * cos + rotated * sin).to(x.scalar_type());
}

// Key/value heads [B, KV, T, dh] repeated for the query heads they serve: head h takes
// key/value head h / (H / KV), as Hugging Face's repeat_kv.
torch::Tensor repeat_kv(const torch::Tensor& x, int64_t rep) {
  if (rep == 1) return x;
  const int64_t b = x.size(0), kv = x.size(1), t = x.size(2), dh = x.size(3);
  return x.unsqueeze(2).expand({b, kv, rep, t, dh}).reshape({b, kv * rep, t, dh});
}

struct AttentionImpl : torch::nn::Module {
  AttentionImpl(int64_t d, int64_t heads, int64_t kv_heads, bool qkv_bias)
      : heads_(heads), kv_heads_(kv_heads), dh_(d / heads) {
    q_proj = register_module("q_proj", LinearLayer(d, heads * dh_, qkv_bias));
    k_proj = register_module("k_proj", LinearLayer(d, kv_heads * dh_, qkv_bias));
    v_proj = register_module("v_proj", LinearLayer(d, kv_heads * dh_, qkv_bias));
    o_proj = register_module("o_proj", LinearLayer(heads * dh_, d, false));
  }
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        bool fused) {
    const int64_t b = x.size(0), t = x.size(1);
    const torch::Tensor q = q_proj->forward(x).view({b, t, heads_, dh_}).transpose(1, 2);
    const torch::Tensor k = k_proj->forward(x).view({b, t, kv_heads_, dh_}).transpose(1, 2);
    const torch::Tensor v = v_proj->forward(x).view({b, t, kv_heads_, dh_}).transpose(1, 2);
    const int64_t rep = heads_ / kv_heads_;
    const torch::Tensor y = causal_attention(
        rotate(q, cos, sin), repeat_kv(rotate(k, cos, sin), rep), repeat_kv(v, rep), fused);
    return o_proj->forward(y.transpose(1, 2).reshape({b, t, heads_ * dh_}));
  }
  int64_t heads_, kv_heads_, dh_;
  LinearLayer q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
};
TORCH_MODULE(Attention);

struct MlpImpl : torch::nn::Module {
  MlpImpl(int64_t d, int64_t inter, bool smooth) : smooth_(smooth) {
    gate_proj = register_module("gate_proj", LinearLayer(d, inter, false));
    up_proj = register_module("up_proj", LinearLayer(d, inter, false));
    down_proj = register_module("down_proj", LinearLayer(inter, d, false));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const torch::Tensor h = torch::silu(gate_proj->forward(x)) * up_proj->forward(x);
    return smooth_ ? down_proj->forward_channel_smoothed(h) : down_proj->forward(h);
  }
  bool smooth_;
  LinearLayer gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(Mlp);

struct DecoderLayerImpl : torch::nn::Module {
  DecoderLayerImpl(const RunConfig& c, bool qkv_bias) {
    self_attn = register_module("self_attn", Attention(c.d_model, c.heads, c.kv_heads, qkv_bias));
    mlp = register_module("mlp", Mlp(c.d_model, c.intermediate, c.smooth_swiglu));
    input_layernorm = register_module("input_layernorm", RmsNorm(c.d_model, c.norm_eps));
    post_attention_layernorm =
        register_module("post_attention_layernorm", RmsNorm(c.d_model, c.norm_eps));
  }
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        bool fused) {
    const torch::Tensor h = x + self_attn->forward(input_layernorm->forward(x), cos, sin, fused);
    return h + mlp->forward(post_attention_layernorm->forward(h));
  }
  Attention self_attn{nullptr};
  Mlp mlp{nullptr};
  RmsNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
};
TORCH_MODULE(DecoderLayer);

}  // namespace

struct LlamaModel::Body : torch::nn::Module {
  Body(const RunConfig& c, int64_t vocab, bool qkv_bias) {
    embed_tokens = register_module("embed_tokens", torch::nn::Embedding(vocab, c.d_model));
    layers = register_module("layers", torch::nn::ModuleList());
    for (int i = 0; i < c.layers; ++i) layers->push_back(DecoderLayer(c, qkv_bias));
    norm = register_module("norm", RmsNorm(c.d_model, c.norm_eps));
  }
  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  RmsNorm norm{nullptr};
};

LlamaModel::LlamaModel(const RunConfig& c, int64_t vocab, bool qkv_bias)
    : vocab_(vocab), head_size_(c.d_model / c.heads), theta_(c.rope_theta) {
  body_ = register_module("model", std::make_shared<Body>(c, vocab, qkv_bias));
  if (!c.tie_embeddings)
    lm_head_ =
        register_module("lm_head", std::make_shared<LinearLayerImpl>(c.d_model, vocab, false));
}

std::pair<torch::Tensor, torch::Tensor> LlamaModel::rope(int64_t t, const torch::Device& device) {
  if (!rope_cos_.defined() || rope_cos_.size(0) != t || rope_cos_.device() != device) {
    // inv_freq_i = theta^(-2i / dh), the angle of position p p * inv_freq_i, both halves
    // of a head with the same angles.
    const torch::Tensor i = torch::arange(0, head_size_, 2, torch::kLong).to(torch::kFloat);
    const torch::Tensor inv = 1.0 / torch::pow(theta_, i / static_cast<double>(head_size_));
    const torch::Tensor pos = torch::arange(t, torch::kLong).to(torch::kFloat);
    const torch::Tensor freqs = torch::outer(pos, inv);
    const torch::Tensor emb = torch::cat({freqs, freqs}, -1);
    rope_cos_ = emb.cos().to(device);
    rope_sin_ = emb.sin().to(device);
  }
  return {rope_cos_, rope_sin_};
}

torch::Tensor LlamaModel::logits(const torch::Tensor& ids) {
  const auto [cos, sin] = rope(ids.size(1), ids.device());
  torch::Tensor h = body_->embed_tokens->forward(ids).to(compute_dtype);
  for (const auto& m : *body_->layers)
    h = m->as<DecoderLayerImpl>()->forward(h, cos, sin, fused_attention);
  h = body_->norm->forward(h);
  const torch::Tensor out =
      lm_head_ ? lm_head_->forward(h)
               : torch::matmul(h, body_->embed_tokens->weight.to(h.scalar_type()).t());
  return out.to(torch::kFloat);
}

torch::Tensor LlamaModel::loss(const Batch& b) {
  const torch::Tensor l = logits(b.x);
  return torch::nn::functional::cross_entropy(l.reshape({-1, l.size(-1)}), b.y.reshape({-1}));
}

std::shared_ptr<TrainModel> make_llama(const RunConfig& c, int64_t data_vocab) {
  RunConfig r = c;
  bool qkv_bias = false;
  std::string weights;
  if (!c.hf.empty()) {
    const HfModelConfig h = read_hf_config(c.hf);
    resolve_hf_config(r);
    qkv_bias = h.qkv_bias;
    weights = h.weights;
  }
  const int64_t vocab = r.vocab > 0 ? r.vocab : data_vocab;
  if (vocab < data_vocab) {
    throw std::invalid_argument("config field 'vocab': " + std::to_string(vocab) +
                                " is below the data's vocabulary of " + std::to_string(data_vocab) +
                                " tokens");
  }
  auto m = std::make_shared<LlamaModel>(r, vocab, qkv_bias);
  {
    // From scratch as Llama initializes: weights normal(0, 0.02), biases zero, the norms' ones.
    torch::NoGradGuard no_grad;
    for (auto& p : m->named_parameters()) {
      if (p.value().dim() == 2) {
        p.value().normal_(0.0, 0.02);
      } else if (p.key().size() > 5 && p.key().compare(p.key().size() - 5, 5, ".bias") == 0) {
        p.value().zero_();
      }
    }
  }
  if (!weights.empty()) load_hf_weights(*m, weights);
  return m;
}

void load_hf_weights(torch::nn::Module& model, const std::string& weights_path) {
  const std::unique_ptr<Checkpoint> ck = Checkpoint::open(weights_path);
  torch::NoGradGuard no_grad;
  for (auto& p : model.named_parameters()) {
    const std::string& name = p.key();
    torch::Tensor& dst = p.value();
    const Checkpoint::Ref* r = ck->find(name);
    if (!r) {
      throw std::invalid_argument("config field 'hf': " + weights_path + " has no tensor '" + name +
                                  "', which the config.json's model needs (shape " +
                                  shape_text(dst.sizes()) + ")");
    }
    const TensorEntry& e = *r->entry;
    if (e.dtype != StDtype::F32 && e.dtype != StDtype::BF16 && e.dtype != StDtype::F16) {
      throw std::invalid_argument("config field 'hf': tensor '" + name + "' in " + r->file->path() +
                                  " is " + std::string(st_dtype_name(e.dtype)) +
                                  "; the engine loads F32, BF16 and F16 weights");
    }
    if (c10::IntArrayRef(e.shape) != dst.sizes()) {
      throw std::invalid_argument("config field 'hf': tensor '" + name + "' in " + r->file->path() +
                                  " has shape " + shape_text(e.shape) +
                                  ", the config.json's model needs " + shape_text(dst.sizes()));
    }
    std::vector<float> v = ck->to_float(*r);
    dst.copy_(torch::from_blob(v.data(), dst.sizes(), torch::kFloat));
  }
}

}  // namespace fp8wb::train

namespace fp8wb {

EvalResult evaluate_checkpoint(const EvalOptions& o) {
  const HfModelConfig h = read_hf_config(o.hf);
  RunConfig c;
  c.hf = o.hf;
  c.model = ModelKind::Llama;
  const int64_t t = o.context > 0 ? o.context : std::min(h.max_position_embeddings, 1024);
  if (t < 1 || t > 1 << 20) throw std::invalid_argument("--context must be in [1, 1048576]");
  c.context = static_cast<int>(t);
  resolve_hf_config(c);
  const TokenFile tokens(o.data, t + 1);
  tokens.check_vocab(c.vocab);
  int64_t windows = (tokens.size() - 1) / t;
  if (o.windows > 0) windows = std::min(windows, o.windows);
  EvalResult r;
  r.architecture = h.architecture;
  r.context = t;
  r.windows = windows;
  r.tokens = windows * t;
  torch::ScalarType dtype = torch::kFloat;
  if (o.dtype == "bf16" || (o.dtype.empty() && h.torch_dtype == "bfloat16")) {
    dtype = torch::kBFloat16;
  } else if (!o.dtype.empty() && o.dtype != "fp32") {
    throw std::invalid_argument("--dtype \"" + o.dtype.substr(0, 20) + "\" is not fp32 or bf16");
  }
  r.dtype = dtype == torch::kBFloat16 ? "bf16" : "fp32";
  const torch::Device device(Trainer::resolve_device(o.device));
  auto model = train::make_model(c, 0);
  model->to(device);
  model->compute_dtype = dtype;
  torch::NoGradGuard no_grad;
  const int64_t batch = std::max(1, o.batch);
  const auto layers = train::linear_layers(*model);
  // One pass over the windows: the mean loss, and each FP8 layer's mean output SQNR.
  const auto pass = [&](int index, std::vector<EvalLayer>* sqnr) {
    double sum = 0;
    std::vector<double> db(layers.size(), 0.0);
    std::vector<int64_t> seen(layers.size(), 0);
    for (int64_t first = 0; first < windows; first += batch) {
      const int64_t n = std::min(batch, windows - first);
      torch::Tensor xy = torch::empty({2, n, t}, torch::kLong);
      int64_t* x = xy.data_ptr<int64_t>();
      for (int64_t k = 0; k < n; ++k) {
        tokens.copy((first + k) * t, t, x + k * t);
        tokens.copy((first + k) * t + 1, t, x + (n + k) * t);
      }
      xy = xy.to(device);
      const train::Batch b{xy[0], xy[1], n * t};
      sum += model->loss(b).item<double>() * static_cast<double>(n * t);
      if (sqnr) {
        for (size_t i = 0; i < layers.size(); ++i) {
          if (!layers[i].second->is_float8()) continue;
          const double v = layers[i].second->probe().fprop_sqnr_db;
          if (std::isfinite(v)) {
            db[i] += v;
            ++seen[i];
          }
        }
      }
      if (o.progress) o.progress(index, first + n, windows);
    }
    if (sqnr) {
      for (size_t i = 0; i < layers.size(); ++i) {
        if (layers[i].second->is_float8())
          sqnr->push_back({layers[i].first, seen[i] > 0 ? db[i] / seen[i] : NAN});
      }
    }
    return sum / static_cast<double>(windows * t);
  };
  r.loss_high_precision = pass(0, nullptr);
  int index = 0;
  for (RunConfig rc : o.fp8) {
    rc.scaling = ScalingMode::Current;
    rc.fp8 = true;
    Float8LinearConfig f = float8_config_of(rc);
    f.stats_interval = 0;
    f.sqnr_interval = 1;  // every forward: its output's SQNR
    f.final_step = -1;
    ConvertOptions opt;
    opt.skip_names = {"lm_head"};
    opt.gpu_min_weight_elements = 0;
    const ConvertReport rep = convert_to_float8(*model, f, opt);
    EvalFp8 e;
    e.recipe = float8_recipe_name(rc.recipe);
    e.formats = format_pairing_name(rc.formats);
    e.kept = rep.skipped;
    e.loss = pass(++index, &e.layers);
    for (auto& [name, l] : layers) l->to_high_precision();
    r.fp8.push_back(std::move(e));
  }
  return r;
}

}  // namespace fp8wb
