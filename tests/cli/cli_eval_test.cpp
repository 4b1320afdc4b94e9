// `fp8wb eval` and `fp8wb train --set hf=... --set data=...` in-process through run_cli(), on
// the tiny checkpoints that the llama test's Python reference writes (Debian's
// python3-torch): the JSON's loss_high_precision equals the reference's loss over the same
// windows, each recipe has its loss_fp8; a run from a checkpoint stores the checkpoint's
// shape in its config and its held-out loss as a series.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_run.h"
#include "fp8wb/core/checkpoint/safetensors.h"
#include "fp8wb/core/store/run_store.h"
#include "temp_dir.h"

namespace {

using fp8wb::test::Result;
using fp8wb::test::run;

class CliEval : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = "/tmp/fp8wb-cli-eval-" + std::to_string(getpid());
    fp8wb::test::remove_tree(dir_);
    std::filesystem::create_directories(dir_);
    const char* py = std::getenv("FP8WB_PYTHON");
    const std::string cmd = std::string(py && *py ? py : "/usr/bin/python3") + " " +
                            FP8WB_LLAMA_REFERENCE + " " + dir_ + " 2>&1";
    ok_ = std::system(cmd.c_str()) == 0;
  }
  static void TearDownTestSuite() { fp8wb::test::remove_tree(dir_); }
  void SetUp() override { ASSERT_TRUE(ok_) << "the Python reference failed"; }
  static double reference_loss() {
    const auto ck = fp8wb::Checkpoint::open(dir_ + "/llama/reference.safetensors");
    return ck->to_float(*ck->find("eval_loss"))[0];
  }
  static std::string dir_;
  static bool ok_;
};
std::string CliEval::dir_;
bool CliEval::ok_ = false;

TEST_F(CliEval, JsonGivesTheReferenceLossAndOnePerRecipe) {
  const Result r = run({"eval", "--hf", dir_ + "/llama", "--data", dir_ + "/llama/tokens.bin",
                        "--context", "16", "--set", "recipe=tensorwise,rowwise", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const double want = reference_loss();
  EXPECT_NEAR(j["loss_high_precision"].get<double>(), want, 1e-5 * want);
  EXPECT_EQ(j["windows"], 12);
  EXPECT_EQ(j["architecture"], "LlamaForCausalLM");
  for (const char* recipe : {"tensorwise", "rowwise"}) {
    ASSERT_TRUE(j["loss_fp8"].contains(recipe)) << r.out;
    EXPECT_NEAR(j["loss_fp8"][recipe].get<double>(), want, 0.2);
  }
  ASSERT_EQ(j["recipes"].size(), 2u);
  EXPECT_EQ(j["recipes"][1]["layers"].size(), 14u);
  EXPECT_TRUE(j["recipes"][1]["layers"][0]["sqnr_db"].is_number());
  // The table says the same.
  const Result t = run({"eval", "--hf", dir_ + "/llama", "--data", dir_ + "/llama/tokens.bin",
                        "--context", "16", "--windows", "2"});
  ASSERT_EQ(t.rc, 0) << t.err;
  EXPECT_NE(t.out.find("2 windows of 16 tokens"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("fp8 tensorwise hybrid"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("model.layers.1.mlp.down_proj"), std::string::npos) << t.out;
}

// The tiny model's projections (32 and 48 wide) take no 128-wide blocks: blockwise runs no
// layer in FP8, so it has no FP8 loss (null; "-" in the table), not the high-precision one.
TEST_F(CliEval, ARecipeNoLayerTakesHasNoFp8Loss) {
  const Result r =
      run({"eval", "--hf", dir_ + "/llama", "--data", dir_ + "/llama/tokens.bin", "--context", "16",
           "--windows", "2", "--set", "recipe=tensorwise,blockwise", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["loss_fp8"]["blockwise"].is_null()) << r.out;
  EXPECT_TRUE(j["loss_fp8"]["tensorwise"].is_number()) << r.out;
  EXPECT_TRUE(j["recipes"][1]["loss_delta"].is_null()) << r.out;
  const Result t = run({"eval", "--hf", dir_ + "/llama", "--data", dir_ + "/llama/tokens.bin",
                        "--context", "16", "--windows", "2", "--set", "recipe=blockwise"});
  ASSERT_EQ(t.rc, 0) << t.err;
  EXPECT_NE(t.out.find("no layer in FP8: all "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find(" kept in high precision: "), std::string::npos) << t.out;
}

// Issue #52: the mx row gave its loss with only some of the 14 layers in FP8 and did not
// say so; each row says how many layers the recipe put in FP8 and why the others stayed in
// high precision (the JSON counts them too).
TEST_F(CliEval, EachRowSaysHowManyLayersAreInFp8) {
  const Result t = run({"eval", "--hf", dir_ + "/llama", "--data", dir_ + "/llama/tokens.bin",
                        "--context", "16", "--windows", "2", "--set", "recipe=tensorwise,mx"});
  ASSERT_EQ(t.rc, 0) << t.err;
  const auto line_of = [&](const std::string& start) {
    const size_t at = t.out.find("\n" + start);
    return at == std::string::npos ? std::string()
                                   : t.out.substr(at + 1, t.out.find('\n', at + 1) - at - 1);
  };
  const std::string tensorwise = line_of("fp8 tensorwise");
  EXPECT_NE(tensorwise.find("14 of "), std::string::npos) << t.out;
  EXPECT_NE(tensorwise.find(" layers in FP8"), std::string::npos) << t.out;
  const std::string mx = line_of("fp8 mx");
  EXPECT_NE(mx.find(" layers in FP8; "), std::string::npos) << t.out;
  EXPECT_NE(mx.find(" kept in high precision: "), std::string::npos) << t.out;
  EXPECT_EQ(mx.find("14 of "), std::string::npos) << t.out;
  const Result j = run({"eval", "--hf", dir_ + "/llama", "--data", dir_ + "/llama/tokens.bin",
                        "--context", "16", "--windows", "2", "--set", "recipe=mx", "--json"});
  ASSERT_EQ(j.rc, 0) << j.err;
  const auto js = nlohmann::json::parse(j.out);
  EXPECT_GE(js["recipes"][0]["layers_total"].get<int>(), 14) << j.out;
  EXPECT_LT(js["recipes"][0]["layers_fp8"].get<int>(), 14) << j.out;
}

TEST_F(CliEval, BadInputIsRefusedByName) {
  Result r = run({"eval", "--hf", dir_ + "/llama", "--data", dir_ + "/llama/tokens.bin", "--set",
                  "recipe=fp4"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("config field 'recipe'"), std::string::npos) << r.err;
  // Issue #52: a folder of model folders (the reference's) names the subfolders that hold
  // a model, as `fp8wb inspect DIR` does, not only "cannot open DIR/config.json".
  r = run({"eval", "--hf", dir_, "--data", dir_ + "/llama/tokens.bin"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err.find("cannot open"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("config field 'hf'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(dir_ + " holds no checkpoint itself, but these"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(dir_ + "/llama"), std::string::npos) << r.err;
  const Result inspect = run({"inspect", dir_});
  EXPECT_EQ(inspect.rc, 1);
  std::string said = inspect.err;
  if (said.rfind("fp8wb: ", 0) == 0) said = said.substr(7);
  while (!said.empty() && said.back() == '\n') said.pop_back();
  ASSERT_FALSE(said.empty());
  EXPECT_NE(r.err.find(said), std::string::npos) << r.err << "\ninspect: " << said;
  r = run({"eval", "--hf", dir_ + "/llama", "--data", dir_ + "/llama/config.json"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("config field 'data'"), std::string::npos) << r.err;
}

// Issue #52: a field eval does not use (window: it evaluates with current scaling) was
// taken silently and changed nothing; it is refused, naming the fields eval uses. A
// field given twice is refused too.
TEST_F(CliEval, AFieldEvalDoesNotUseIsRefused) {
  Result r = run({"eval", "--hf", dir_ + "/llama", "--data", dir_ + "/llama/tokens.bin", "--set",
                  "window=16"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("config field 'window': not used by eval"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("recipe, formats, margin and fprop_fp8"), std::string::npos) << r.err;
  // A field of no config: unknown, with eval's four, not the training run's whole list.
  r = run(
      {"eval", "--hf", dir_ + "/llama", "--data", dir_ + "/llama/tokens.bin", "--set", "foo=1"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("config field 'foo': unknown field, which takes only recipe, formats, "
                       "margin and fprop_fp8"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("stats_interval"), std::string::npos) << r.err;
  r = run({"eval", "--hf", dir_ + "/llama", "--data", dir_ + "/llama/tokens.bin", "--set",
           "margin=1", "--set", "margin=2"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("config field 'margin': given twice"), std::string::npos) << r.err;
}

TEST_F(CliEval, TrainFromACheckpointStoresItsShapeAndHeldOutLoss) {
  const std::string db = dir_ + "/runs.sqlite";
  const Result r = run({"train", "--db", db, "--quiet", "--json", "--set", "hf=" + dir_ + "/qwen2",
                        "--set", "data=" + dir_ + "/qwen2/tokens.bin", "--set", "context=16",
                        "--set", "batch=2", "--set", "steps=4", "--set", "eval_interval=2"});
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  auto store = fp8wb::RunStore::open(db);
  const auto runs = store->runs();
  ASSERT_EQ(runs.size(), 1u);
  const auto cfg = nlohmann::json::parse(runs[0].config_json);
  EXPECT_EQ(cfg["model"], "llama");
  EXPECT_EQ(cfg["d_model"], 32);
  EXPECT_EQ(cfg["kv_heads"], 1);
  EXPECT_EQ(cfg["tie_embeddings"], true);
  EXPECT_EQ(cfg["vocab"], 40);
  const auto eval = store->series(runs[0].id, "eval_loss");
  ASSERT_EQ(eval.size(), 3u);  // steps 0, 2 and the last, 3
  EXPECT_EQ(eval[1].step, 2);
}

}  // namespace
