// The Llama-family model (core/src/train/llama.h) against a Python reference written from the
// published equations (llama_reference.py, Debian's python3-torch): random tiny
// checkpoints in Hugging Face's layout (Llama with grouped-query attention, Qwen2 with q/k/v
// biases and tied embeddings, Mistral in bf16), whose logits the engine must give to 1e-5
// in fp32 on the CPU; a sharded checkpoint loads the same tensors as the merged one; a
// tensor missing or mis-shaped, and an architecture the engine does not take, are refused
// by name; the model trains with FP8 linears in every projection.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <sys/stat.h>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>

#include "fp8wb/core/checkpoint/eval_checkpoint.h"
#include "fp8wb/core/checkpoint/safetensors.h"
#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/data/token_file.h"
#include "fp8wb/core/train/trainer.h"
#include "temp_dir.h"
#include "train/llama.h"

namespace fp8wb::train {
namespace {

// The reference's checkpoints, written once for the test program.
class LlamaReference : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = "/tmp/fp8wb-llama-" + std::to_string(getpid());
    test::remove_tree(dir_);
    mkdir(dir_.c_str(), 0700);
    // Debian's python3 with python3-torch; FP8WB_PYTHON names another (a GPU machine's).
    const char* py = std::getenv("FP8WB_PYTHON");
    const std::string cmd = std::string(py && *py ? py : "/usr/bin/python3") + " " +
                            FP8WB_LLAMA_REFERENCE + " " + dir_ + " 2>&1";
    ok_ = std::system(cmd.c_str()) == 0;
  }
  static void TearDownTestSuite() { test::remove_tree(dir_); }
  void SetUp() override {
    ASSERT_TRUE(ok_) << "the Python reference failed: " << FP8WB_LLAMA_REFERENCE
                     << " needs /usr/bin/python3 with Debian's python3-torch";
  }
  static std::shared_ptr<LlamaModel> load(const std::string& name) {
    return load_path(dir_ + "/" + name);
  }
  static std::shared_ptr<LlamaModel> load_path(const std::string& folder) {
    RunConfig c;
    apply_override(c, "hf=" + folder);
    resolve_hf_config(c);
    validate_run_config(c);
    auto m = std::dynamic_pointer_cast<LlamaModel>(make_model(c, 0));
    m->fused_attention = false;
    return m;
  }
  static torch::Tensor reference(const std::string& name, const std::string& tensor) {
    const auto ck = Checkpoint::open(dir_ + "/" + name + "/reference.safetensors");
    const Checkpoint::Ref* r = ck->find(tensor);
    std::vector<float> v = ck->to_float(*r);
    return torch::from_blob(v.data(), r->entry->shape, torch::kFloat).clone();
  }
  static std::string dir_;
  static bool ok_;
};
std::string LlamaReference::dir_;
bool LlamaReference::ok_ = false;

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// A copy of a checkpoint folder whose model.safetensors `edit` changes (by name).
std::string edited_copy(const std::string& from, const std::string& to,
                        const std::function<void(std::vector<TensorToWrite>&)>& edit) {
  mkdir(to.c_str(), 0700);
  write_text(to + "/config.json", read_text(from + "/config.json"));
  const auto ck = Checkpoint::open(from + "/model.safetensors");
  std::vector<TensorToWrite> t;
  for (const auto& r : ck->tensors())
    t.push_back({r.entry->name, r.entry->dtype, r.entry->shape, r.file->bytes(*r.entry)});
  edit(t);
  write_safetensors(to + "/model.safetensors", t);
  return to;
}

TEST_F(LlamaReference, LogitsEqualThePublishedEquationsInFp32) {
  for (const std::string name : {"llama", "qwen2", "mistral"}) {
    SCOPED_TRACE(name);
    auto m = load(name);
    const torch::Tensor ids = reference(name, "ids").to(torch::kLong);
    const torch::Tensor want = reference(name, "logits");
    torch::NoGradGuard no_grad;
    const torch::Tensor got = m->logits(ids);
    ASSERT_EQ(got.sizes(), want.sizes());
    const double err = (got - want).abs().max().item<double>();
    const double scale = want.abs().max().item<double>();
    std::printf("%s: max |logit error| %.3g (logits up to %.3g)\n", name.c_str(), err, scale);
    EXPECT_LE(err, 1e-5 * std::max(1.0, scale));
    // The fused attention path, where this LibTorch has it, agrees as closely.
    if (fused_attention_available()) {
      m->fused_attention = true;
      EXPECT_LE((m->logits(ids) - want).abs().max().item<double>(), 1e-5 * std::max(1.0, scale));
    }
  }
}

// On a GPU in bf16 (the weights rounded to bf16 as autocast rounds them): the logits to
// bf16's tolerance. Skipped without CUDA.
TEST_F(LlamaReference, LogitsOnTheGpuInBf16) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (const std::string name : {"llama", "qwen2", "mistral"}) {
    SCOPED_TRACE(name);
    auto m = load(name);
    m->to(torch::kCUDA);
    m->compute_dtype = torch::kBFloat16;
    m->fused_attention = fused_attention_available();
    const torch::Tensor ids = reference(name, "ids").to(torch::kLong).to(torch::kCUDA);
    const torch::Tensor want = reference(name, "logits");
    torch::NoGradGuard no_grad;
    const torch::Tensor got = m->logits(ids).to(torch::kCPU);
    const double rel = (got - want).norm().item<double>() / want.norm().item<double>();
    std::printf("%s on the GPU in bf16: relative error %.3g\n", name.c_str(), rel);
    EXPECT_LT(rel, 3e-2);
  }
}

TEST_F(LlamaReference, ConfigJsonGivesTheShape) {
  RunConfig c;
  apply_override(c, "hf=" + dir_ + "/qwen2");
  EXPECT_EQ(c.model, ModelKind::Llama);
  resolve_hf_config(c);
  EXPECT_EQ(c.d_model, 32);
  EXPECT_EQ(c.intermediate, 48);
  EXPECT_EQ(c.heads, 4);
  EXPECT_EQ(c.kv_heads, 1);
  EXPECT_EQ(c.vocab, 40);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-6);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_NO_THROW(validate_run_config(c));
  // The Qwen2 has biases on q, k and v; the tied model no lm_head.
  auto m = load("qwen2");
  const auto params = m->named_parameters();
  EXPECT_NE(params.find("model.layers.1.self_attn.k_proj.bias"), nullptr);
  EXPECT_EQ(params.find("model.layers.1.self_attn.o_proj.bias"), nullptr);
  EXPECT_EQ(params.find("lm_head.weight"), nullptr);
}

TEST_F(LlamaReference, ShardedLoadsAsMerged) {
  auto merged = load("llama");
  auto sharded = load("llama_sharded");
  const auto a = merged->named_parameters();
  const auto b = sharded->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (const auto& p : a) {
    const torch::Tensor* q = b.find(p.key());
    ASSERT_NE(q, nullptr) << p.key();
    EXPECT_TRUE(torch::equal(p.value(), *q)) << p.key();
  }
  // And differs from a model built without the checkpoint (the load is not a no-op).
  RunConfig c;
  apply_override(c, "hf=" + dir_ + "/llama");
  resolve_hf_config(c);
  c.hf.clear();
  auto fresh = make_model(c, 0);
  EXPECT_FALSE(
      torch::equal(fresh->named_parameters()["model.norm.weight"], a["model.norm.weight"]));
}

TEST_F(LlamaReference, MissingOrMisshapedTensorsAndOtherArchitecturesAreRefusedByName) {
  const std::string src = dir_ + "/llama";
  const std::string missing = edited_copy(src, dir_ + "/missing", [](auto& t) {
    t.erase(std::remove_if(t.begin(), t.end(),
                           [](const TensorToWrite& w) {
                             return w.name == "model.layers.1.mlp.up_proj.weight";
                           }),
            t.end());
  });
  RunConfig c;
  apply_override(c, "hf=" + missing);
  try {
    make_model(c, 0);
    ADD_FAILURE() << "a missing tensor was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no tensor 'model.layers.1.mlp.up_proj.weight'"),
              std::string::npos)
        << e.what();
  }
  const std::string shaped = edited_copy(src, dir_ + "/shaped", [](auto& t) {
    for (auto& w : t) {
      if (w.name == "model.layers.0.self_attn.k_proj.weight") {
        w.shape = {w.shape[1], w.shape[0]};  // [16, 32] -> [32, 16]: the bytes still fit
      }
    }
  });
  apply_override(c, "hf=" + shaped);
  try {
    make_model(c, 0);
    ADD_FAILURE() << "a mis-shaped tensor was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'model.layers.0.self_attn.k_proj.weight'"),
              std::string::npos)
        << e.what();
    EXPECT_NE(
        std::string(e.what()).find("has shape [32, 16], the config.json's model needs [16, 32]"),
        std::string::npos)
        << e.what();
  }
  const std::string gpt2 = dir_ + "/gpt2";
  mkdir(gpt2.c_str(), 0700);
  std::string cfg = read_text(src + "/config.json");
  cfg.replace(cfg.find("LlamaForCausalLM"), 16, "GPT2LMHeadModel");
  write_text(gpt2 + "/config.json", cfg);
  apply_override(c, "hf=" + gpt2);
  try {
    resolve_hf_config(c);
    ADD_FAILURE() << "GPT2LMHeadModel was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("architecture 'GPT2LMHeadModel' is not one"),
              std::string::npos)
        << e.what();
  }
}

// `fp8wb eval`'s numbers: the high-precision loss over the token file's windows equals the
// reference's (llm.c's format and the raw file alike); FP8 moves it a little, and every
// projection's output SQNR is that of an FP8 GEMM.
TEST_F(LlamaReference, EvalLossEqualsTheReference) {
  const double want = reference("llama", "eval_loss").item<double>();
  for (const std::string file : {"tokens.bin", "tokens_raw.bin"}) {
    SCOPED_TRACE(file);
    EvalOptions o;
    o.hf = dir_ + "/llama";
    o.data = dir_ + "/llama/" + file;
    o.context = 16;
    o.batch = 5;  // batches of 5, 5 and 2 windows: the mean is over tokens, not batches
    RunConfig rowwise;
    apply_override(rowwise, "recipe=rowwise");
    o.fp8 = {RunConfig{}, rowwise};
    const EvalResult r = evaluate_checkpoint(o);
    EXPECT_EQ(r.windows, 12);
    EXPECT_EQ(r.tokens, 12 * 16);
    EXPECT_EQ(r.dtype, "fp32");
    std::printf("eval loss %.7f, reference %.7f; fp8 %s %.5f, %s %.5f\n", r.loss_high_precision,
                want, r.fp8[0].recipe.c_str(), r.fp8[0].loss, r.fp8[1].recipe.c_str(),
                r.fp8[1].loss);
    EXPECT_NEAR(r.loss_high_precision, want, 1e-5 * want);
    ASSERT_EQ(r.fp8.size(), 2u);
    EXPECT_EQ(r.fp8[0].recipe, "tensorwise");
    EXPECT_EQ(r.fp8[1].recipe, "rowwise");
    for (const EvalFp8& e : r.fp8) {
      EXPECT_NE(e.loss, r.loss_high_precision);
      EXPECT_NEAR(e.loss, r.loss_high_precision, 0.2);
      EXPECT_EQ(e.layers.size(), 14u);
      ASSERT_EQ(e.kept.size(), 1u);  // the output head alone, by name
      EXPECT_EQ(e.kept[0].rfind("lm_head", 0), 0u) << e.kept[0];
      for (const EvalLayer& l : e.layers) {
        EXPECT_GT(l.sqnr_db, 15) << l.layer;  // E4M3: about 30 dB
        EXPECT_LT(l.sqnr_db, 45) << l.layer;
      }
    }
  }
  // The first 3 windows only.
  EvalOptions o;
  o.hf = dir_ + "/llama";
  o.data = dir_ + "/llama/tokens.bin";
  o.context = 16;
  o.windows = 3;
  EXPECT_EQ(evaluate_checkpoint(o).tokens, 48);
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

std::vector<uint8_t> llmc(int32_t version, int32_t count, const std::vector<uint16_t>& tokens) {
  std::vector<int32_t> h(256, 0);
  h[0] = TokenFile::kMagic;
  h[1] = version;
  h[2] = count;
  std::vector<uint8_t> b(1024 + tokens.size() * 2);
  std::memcpy(b.data(), h.data(), 1024);
  std::memcpy(b.data() + 1024, tokens.data(), tokens.size() * 2);
  return b;
}

std::string refusal(const std::string& path, int64_t vocab = 0) {
  try {
    const TokenFile f(path, 2);
    if (vocab > 0) f.check_vocab(vocab);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// A token file that another process cuts short while a run reads it: an error naming the
// file and both sizes (a mapped file would kill the process with SIGBUS instead).
TEST_F(LlamaReference, TokenFileCutWhileReadIsAnErrorNotASignal) {
  const std::string p = dir_ + "/tokens-cut.bin";
  std::vector<uint16_t> toks(10000);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<uint16_t>(i % 300);
  write_bytes(p, llmc(1, 10000, toks));
  const TokenFile f(p, 2);
  std::vector<int64_t> out(16);
  f.copy(9000, 16, out.data());
  EXPECT_EQ(out[0], 9000 % 300);
  ASSERT_EQ(truncate(p.c_str(), 2000), 0);
  try {
    f.copy(9000, 16, out.data());
    FAIL() << "tokens read past the file's end";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(p), std::string::npos) << m;
    EXPECT_NE(m.find("holds 2000 bytes now, 21024 when the run opened it"), std::string::npos) << m;
  }
  EXPECT_THROW(f.max_token(), std::runtime_error);
}

TEST_F(LlamaReference, TokenFilesAreValidated) {
  const std::string p = dir_ + "/tokens-test.bin";
  std::vector<uint16_t> toks(100);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<uint16_t>(i % 40);
  write_bytes(p, llmc(1, 100, toks));
  {
    const TokenFile f(p, 2);
    EXPECT_EQ(f.size(), 100);
    EXPECT_EQ(f.at(41), 1u);
    EXPECT_EQ(f.max_token(), 39u);
    EXPECT_STREQ(f.format(), "llm.c");
  }
  EXPECT_EQ(refusal(p, 40), "");
  EXPECT_NE(refusal(p, 39).find("token 39 at offset 39 (byte " + std::to_string(1024 + 78) +
                                ") is not below the model's vocabulary of 39"),
            std::string::npos)
      << refusal(p, 39);
  write_bytes(p, llmc(1, 120, toks));  // a count the file does not hold: truncated
  EXPECT_NE(refusal(p).find("the llm.c header says 120 tokens"), std::string::npos) << refusal(p);
  write_bytes(p, llmc(7, 100, toks));
  EXPECT_NE(refusal(p).find("llm.c header version 7 is not 1"), std::string::npos) << refusal(p);
  std::vector<uint8_t> cut = llmc(1, 100, toks);
  cut.resize(600);  // the header itself cut off
  write_bytes(p, cut);
  EXPECT_NE(refusal(p).find("an llm.c header (magic 20240520) cut off at 600 bytes"),
            std::string::npos)
      << refusal(p);
  write_bytes(p, {1, 2, 3});
  EXPECT_NE(refusal(p).find("an odd number"), std::string::npos) << refusal(p);
  write_bytes(p, {});
  EXPECT_NE(refusal(p).find("the file is empty"), std::string::npos) << refusal(p);
  EXPECT_NE(refusal(dir_).find("config field 'data'"), std::string::npos) << refusal(dir_);
  // A model whose vocabulary the file's tokens reach past: refused by eval, naming the token.
  std::vector<uint16_t> big(toks);
  big[57] = 40;
  write_bytes(p, llmc(1, 100, big));
  EvalOptions o;
  o.hf = dir_ + "/llama";
  o.data = p;
  o.context = 16;
  try {
    evaluate_checkpoint(o);
    ADD_FAILURE() << "token 40 was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("token 40 at offset 57"), std::string::npos) << e.what();
  }
}

// Fine-tuning the checkpoint on its token file: the held-out loss every eval_interval steps
// (and at the last), and only then.
TEST_F(LlamaReference, TrainsOnATokenFileWithHeldOutLoss) {
  RunConfig c;
  apply_override(c, "hf=" + dir_ + "/llama");
  apply_override(c, "data=" + dir_ + "/llama/tokens.bin");
  c.context = 16;
  c.batch = 4;
  c.steps = 6;
  c.eval_interval = 2;
  c.stats_interval = 0;
  c.sqnr_interval = 0;
  c.lr = 1e-3;
  struct Collect : MetricConsumer {
    void consume(const MetricBatch& b) override { batches.push_back(b); }
    std::vector<MetricBatch> batches;
  };
  auto bus = std::make_shared<MetricBus>();
  auto col = std::make_shared<Collect>();
  bus->add(col);
  Trainer t(c, bus);
  t.run();
  ASSERT_EQ(t.status(), RunStatus::Finished) << t.message();
  std::vector<int64_t> evaluated;
  std::string started;
  for (const auto& b : col->batches) {
    for (const auto& s : b.steps) {
      if (std::isfinite(s.eval_loss)) {
        evaluated.push_back(s.step);
        EXPECT_TRUE(std::isfinite(s.ref_eval_loss));
        EXPECT_GT(s.eval_loss, 0.5);
        EXPECT_LT(s.eval_loss, 20);
      } else {
        EXPECT_TRUE(std::isnan(s.ref_eval_loss));
      }
    }
    for (const auto& e : b.events)
      if (e.kind == fp8wb::RunEventKind::Started) started = e.message;
  }
  EXPECT_EQ(evaluated, (std::vector<int64_t>{0, 2, 4, 5}));
  EXPECT_NE(started.find("llm.c, 200 tokens, the last 20 held out"), std::string::npos) << started;
  EXPECT_NE(started.find("weights from"), std::string::npos) << started;
}

// The trained weights written as model.safetensors: Hugging Face's names (Qwen2's biases,
// no lm_head where tied), with config.json beside them, so the folder loads as a
// checkpoint and gives back the very tensors written; from scratch, a config.json of the
// run's shape is written.
TEST_F(LlamaReference, SavedWeightsLoadBackAsACheckpoint) {
  for (const std::string name : {"qwen2", ""}) {
    SCOPED_TRACE(name.empty() ? "from scratch" : name);
    const std::string out = dir_ + "/saved-" + (name.empty() ? "scratch" : name);
    mkdir(out.c_str(), 0700);
    RunConfig c;
    apply_override(c, "model=llama");
    if (!name.empty()) {
      apply_override(c, "hf=" + dir_ + "/" + name);
      apply_override(c, "data=" + dir_ + "/" + name + "/tokens.bin");
      c.context = 16;
    }
    c.steps = 2;
    c.batch = 2;
    c.stats_interval = c.sqnr_interval = 0;
    c.weights = out + "/model.safetensors";
    Trainer t(c, std::make_shared<MetricBus>());
    t.run();
    ASSERT_EQ(t.status(), RunStatus::Finished) << t.message();
    if (!name.empty()) {
      EXPECT_EQ(read_text(out + "/config.json"), read_text(dir_ + "/" + name + "/config.json"));
      const auto src = Checkpoint::open(dir_ + "/" + name + "/model.safetensors");
      const auto got = Checkpoint::open(out + "/model.safetensors");
      std::map<std::string, std::vector<int64_t>> a, b;
      for (const auto& r : src->tensors()) a[r.entry->name] = r.entry->shape;
      for (const auto& r : got->tensors()) b[r.entry->name] = r.entry->shape;
      EXPECT_EQ(a, b);
    }
    auto m = load_path(out);
    const auto file = Checkpoint::open(out + "/model.safetensors");
    size_t n = 0;
    for (const auto& p : m->named_parameters()) {
      const Checkpoint::Ref* r = file->find(p.key());
      ASSERT_NE(r, nullptr) << p.key();
      std::vector<float> v = file->to_float(*r);
      EXPECT_TRUE(torch::equal(p.value(), torch::from_blob(v.data(), p.value().sizes())))
          << p.key();
      ++n;
    }
    EXPECT_EQ(n, file->tensors().size());
  }
}

TEST(LlamaConfig, FieldsAreValidatedWithClearErrors) {
  RunConfig c;
  apply_override(c, "model=llama");
  EXPECT_NO_THROW(validate_run_config(c));
  apply_override(c, "kv_heads=3");
  try {
    validate_run_config(c);
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("config field 'kv_heads': 3 does not divide heads 4"),
              std::string::npos)
        << e.what();
  }
  apply_override(c, "kv_heads=2");
  apply_override(c, "d_model=72");
  apply_override(c, "heads=8");  // head size 9: no rotary pairs
  EXPECT_THROW(validate_run_config(c), std::invalid_argument);
  RunConfig g;
  apply_override(g, "hf=/nonexistent-folder");
  apply_override(g, "model=gpt");
  try {
    validate_run_config(g);
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("config field 'hf'"), std::string::npos) << e.what();
  }
  try {
    resolve_hf_config(g);
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-folder is not a folder"), std::string::npos)
        << e.what();
  }
}

double sqnr_db(const torch::Tensor& got, const torch::Tensor& want) {
  const torch::Tensor w = want.to(torch::kDouble);
  return 10 * std::log10(w.pow(2).sum().item<double>() /
                         (got.to(torch::kDouble) - w).pow(2).sum().item<double>());
}

// Smooth-SwiGLU: an input channel 1e5 times the others (with a weight column that small, so
// that its share of the output is like theirs) makes one tensorwise scale crush the other
// channels into E4M3's subnormals; scaled per channel they keep their precision. In high
// precision the smoothed product is the plain one; the gradients flow through it.
TEST(SmoothSwiglu, PerChannelScalingKeepsTheOtherChannelsPrecision) {
  torch::manual_seed(5);
  LinearLayer l(64, 32, false);
  torch::Tensor x = torch::randn({256, 64});
  {
    torch::NoGradGuard no_grad;
    x.select(1, 3).mul_(1e5);
    l->weight.select(1, 3).mul_(1e-5);
  }
  const torch::Tensor exact = torch::matmul(x.to(torch::kDouble), l->weight.to(torch::kDouble).t());
  EXPECT_TRUE(torch::allclose(l->forward_channel_smoothed(x), l->forward(x)));
  Float8LinearConfig cfg;
  cfg.stats_interval = cfg.sqnr_interval = 0;
  l->to_float8(cfg);
  const double plain = sqnr_db(l->forward(x), exact);
  const torch::Tensor xg = x.clone().requires_grad_(true);
  const torch::Tensor ys = l->forward_channel_smoothed(xg);
  const double smooth = sqnr_db(ys, exact);
  std::printf("output SQNR: plain FP8 %.1f dB, Smooth-SwiGLU %.1f dB\n", plain, smooth);
  EXPECT_GT(smooth, 25);
  EXPECT_GT(smooth, plain + 10);
  const torch::Tensor dy = torch::randn({256, 32});
  ys.backward(dy);
  const torch::Tensor dx_exact = torch::matmul(dy.to(torch::kDouble), l->weight.to(torch::kDouble));
  EXPECT_GT(sqnr_db(xg.grad().narrow(1, 4, 60), dx_exact.narrow(1, 4, 60)), 15);
  EXPECT_TRUE(l->weight.grad().defined());
  EXPECT_TRUE(torch::isfinite(l->weight.grad()).all().item<bool>());
}

// From scratch on the bundled corpus, every projection an FP8 linear: the loss falls and
// each layer's roles are sampled.
TEST(LlamaTraining, LearnsWithFp8InEveryProjection) {
  RunConfig c;
  apply_override(c, "model=llama");
  c.d_model = 64;
  c.intermediate = 176;
  c.context = 32;
  c.batch = 8;
  c.steps = 60;
  c.lr = 3e-3;
  c.stats_interval = 20;
  c.sqnr_interval = 0;
  struct Collect : MetricConsumer {
    void consume(const MetricBatch& b) override { batches.push_back(b); }
    std::vector<MetricBatch> batches;
  };
  auto bus = std::make_shared<MetricBus>();
  auto col = std::make_shared<Collect>();
  bus->add(col);
  Trainer t(c, bus);
  t.run();
  ASSERT_EQ(t.status(), RunStatus::Finished) << t.message();
  std::vector<double> loss;
  std::map<std::string, int> roles;
  std::string layers;
  for (const auto& b : col->batches) {
    for (const auto& s : b.steps) loss.push_back(s.loss);
    for (const auto& tm : b.tensors) roles[tm.layer]++;
    for (const auto& e : b.events)
      if (e.kind == fp8wb::RunEventKind::Layers) layers = e.message;
  }
  ASSERT_EQ(loss.size(), 60u);
  EXPECT_LT(loss.back(), loss.front() - 0.5) << loss.front() << " -> " << loss.back();
  for (const char* p : {"q_proj", "k_proj", "v_proj", "o_proj"})
    EXPECT_NE(layers.find("model.layers.1.self_attn." + std::string(p)), std::string::npos)
        << layers;
  for (const char* p : {"gate_proj", "up_proj", "down_proj"})
    EXPECT_NE(layers.find("model.layers.0.mlp." + std::string(p)), std::string::npos) << layers;
  EXPECT_EQ(layers.find("lm_head"), std::string::npos);
  EXPECT_EQ(roles.size(), 14u);  // 7 projections x 2 layers, each with its roles' statistics
  EXPECT_GT(roles["model.layers.0.mlp.down_proj"], 0);
}

}  // namespace
}  // namespace fp8wb::train
