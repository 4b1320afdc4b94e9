// fp8wb inspect, in-process: the table and JSON for a checkpoint written by the
// project's writer, filters, and clear errors for bad files and options; the binary
// itself on a file that once ended it with SIGBUS; --export never replaces what is not a
// regular file, nor the checkpoint it reads (by any path to it).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "cli_run.h"
#include "fifo.h"
#include "fp8wb/core/checkpoint/checkpoint_analysis.h"
#include "fp8wb/core/checkpoint/safetensors.h"
#include "fp8wb/core/metrics.h"
#include "fp8wb/core/store/run_store.h"
#include "peak_memory.h"
#include "range_tensors.h"
#include "temp_dir.h"

namespace {

using fp8wb::test::run;

std::string write_demo() {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("fp8wb-inspect-" + std::to_string(getpid()) + ".safetensors"))
                               .string();
  std::vector<float> w(128 * 256);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.02f * std::sin(0.37f * static_cast<float>(i));
  std::vector<uint8_t> bytes(w.size() * 4);
  std::memcpy(bytes.data(), w.data(), bytes.size());
  fp8wb::write_safetensors(path, {{"proj.weight", fp8wb::StDtype::F32, {128, 256}, bytes},
                                  {"step", fp8wb::StDtype::I64, {1}, std::vector<uint8_t>(8, 0)}});
  return path;
}

TEST(CliInspect, TableJsonAndFilters) {
  const std::string path = write_demo();
  auto r = run({"inspect", path});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("proj.weight"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("recommended: E4M3FN"), std::string::npos) << r.out;
  r = run({"inspect", path, "--json", "--format", "E5M2", "--recipe", "rowwise"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  for (const auto& t : j) {
    if (t["name"] != "proj.weight") {
      EXPECT_TRUE(t["recipes"].empty());  // an integer tensor: described only
      continue;
    }
    ASSERT_EQ(t["recipes"].size(), 1u);
    EXPECT_EQ(t["recipes"][0]["recipe"], "E5M2 rowwise");
    EXPECT_GT(t["recipes"][0]["sqnr_db"].get<double>(), 20.0);
  }
  // The device: cpu always works and says so; gpu without one is a clear error.
  r = run({"inspect", path, "--device", "cpu"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("on the CPU"), std::string::npos) << r.out;
  if (!fp8wb::analysis_gpu_available()) {
    r = run({"inspect", path, "--device", "gpu"});
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.err.find("GPU"), std::string::npos) << r.err;
  } else {
    r = run({"inspect", path, "--device", "gpu"});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.out.find("on the GPU"), std::string::npos) << r.out;
  }
  r = run({"inspect", path, "--device", "tpu"});
  EXPECT_NE(r.rc, 0);
  const std::string fp8 = path + ".fp8.safetensors";
  r = run({"inspect", path, "--export", fp8, "--recipe", "tensorwise"});
  ASSERT_EQ(r.rc, 0) << r.err;
  // One of each, in the singular.
  EXPECT_NE(r.err.find("1 weight in FP8 (E4M3, 128x128 blocks), 1 tensor as it was"),
            std::string::npos)
      << r.err;
  // A filter does not choose the export's recipe, and the export says so.
  EXPECT_NE(r.err.find("note: --format and --recipe choose the figures shown; --export always "
                       "writes E4M3 in 128x128 blocks\n"),
            std::string::npos)
      << r.err;
  r = run({"inspect", fp8, "--json"});  // the export reads back
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)[0]["dtype"], "F8_E4M3");
  std::filesystem::remove(fp8);
  r = run({"inspect", path, "--format", "E9M9"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("E9M9"), std::string::npos);
  // Filters that leave nothing to run say why, instead of a table of "-".
  r = run({"inspect", path, "--format", "E4M3FN", "--recipe", "nvfp4"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err,
            "fp8wb inspect: nothing to run with --recipe nvfp4 in --format E4M3FN: NVFP4 scaling "
            "needs E2M1FN elements, not E4M3FN\n");
  EXPECT_EQ(r.out, "");
  r = run({"inspect", path, "--format", "E8M0FNU"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("nothing to run in --format E8M0FNU: E8M0FNU holds scales"),
            std::string::npos)
      << r.err;
  r = run({"inspect", path, "--format", "E2M1FN", "--recipe", "nvfp4"});
  EXPECT_EQ(r.rc, 0) << r.err;
  // The recommendation's format filtered out: said once.
  EXPECT_NE(r.out.find("no recommendations: they are made among the E4M3FN recipes, which the "
                       "filters leave out\n"),
            std::string::npos)
      << r.out;
  r = run({"inspect", path, "--format", "E4M3FN"});
  EXPECT_EQ(r.out.find("no recommendations"), std::string::npos) << r.out;
  // An empty --export is a usage error, not a plain inspection.
  r = run({"inspect", path, "--export", ""});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--export: needs a file path"), std::string::npos) << r.err;
  std::filesystem::remove(path);
}

// Values E4M3FNUZ holds exactly (1 and 0.6: 240 and 144 once scaled) and E4M3FN does not
// (0.6 x 448 = 268.8): the best SQNR shown is E4M3FNUZ's while the recommendation is an
// E4M3FN recipe; the row is marked "*", a footnote under the table says why once, and a
// line under the row gives the best E4M3FN recipe's SQNR.
// Every derived figure of kTensorStatFigures is in each recipe of --json, the keys
// written before (sqnr_db, underflow_pct, saturated_pct) among them: a figure added to
// the table is written without another list to change.
TEST(CliInspect, JsonWritesEveryTensorStatFigure) {
  const std::string path = write_demo();
  const auto r = run({"inspect", path, "--json", "--device", "cpu"});
  ASSERT_EQ(r.rc, 0) << r.err;
  int recipes = 0;
  for (const auto& t : nlohmann::json::parse(r.out)) {
    for (const auto& recipe : t["recipes"]) {
      ++recipes;
      for (const fp8wb::TensorStatFigure& f : fp8wb::kTensorStatFigures)
        EXPECT_TRUE(recipe.contains(f.name)) << f.name << " in " << recipe.dump();
      EXPECT_TRUE(recipe["underflow_pct"].is_number()) << recipe.dump();
    }
  }
  EXPECT_GT(recipes, 3);
}

TEST(CliInspect, ABestSqnrOfAnotherFormatThanTheRecommendationsIsExplained) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("fp8wb-inspect-fnuz-" + std::to_string(getpid()) + ".safetensors"))
                               .string();
  std::vector<float> w(128 * 256);
  for (size_t i = 0; i < w.size(); ++i) w[i] = i % 2 ? 0.6f : 1.0f;
  std::vector<uint8_t> bytes(w.size() * 4);
  std::memcpy(bytes.data(), w.data(), bytes.size());
  // Two such tensors: the explanation is said once, not under each.
  fp8wb::write_safetensors(path, {{"proj.weight", fp8wb::StDtype::F32, {128, 256}, bytes},
                                  {"proj2.weight", fp8wb::StDtype::F32, {128, 256}, bytes}});
  const auto r = run({"inspect", path, "--device", "cpu"});
  std::filesystem::remove(path);
  ASSERT_EQ(r.rc, 0) << r.err;
  std::istringstream lines(r.out);
  std::string header, row;
  std::getline(lines, header);
  std::getline(lines, row);
  ASSERT_EQ(row.rfind("proj", 0), 0u) << r.out;
  EXPECT_NE(row.find("E4M3FNUZ"), std::string::npos) << row;
  EXPECT_NE(r.out.find("recommended: E4M3FN "), std::string::npos) << r.out;
  // Issue #52: the explanation, once worded right, under the table; the row marked "*"
  // and given its best recipe of the recommendation's format.
  EXPECT_NE(row.find("*"), std::string::npos) << row;
  const std::string note =
      "* E4M3FNUZ: the best SQNR marked * is of a format that recommendations are not made "
      "in; they are made among the E4M3FN recipes, the format this machine trains with";
  const size_t at = r.out.find(note);
  EXPECT_NE(at, std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(note, at + 1), std::string::npos) << r.out;  // once
  EXPECT_EQ(r.out.find("a format recipes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("max 240, not 448"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("    best E4M3FN recipe: E4M3FN "), std::string::npos) << r.out;
}

// --recipe takes a recipe as the table and the JSON name it, format and MX rounding
// included; an exact recipe's SQNR is "inf" in JSON, not null (no figure).
// Issue 52's weight (2048 x 512, one row 1150 times the others): rowwise is recommended,
// and the share of the values it turns into 0, a few in a million, is given for it: in
// the table's "rec. underflow" column (two significant digits, not 0.000%) and as
// recommended_underflow_pct in JSON, the recommended recipe's own figure; "-" and null
// for a tensor without a recommendation.
TEST(CliInspect, TheRecommendedRecipesUnderflowIsGiven) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("fp8wb-inspect-rec-" + std::to_string(getpid()) + ".safetensors"))
                               .string();
  std::mt19937 rng(52);
  std::normal_distribution<float> nd(0, 0.02f);
  std::vector<float> w(2048 * 512);
  for (float& v : w) v = nd(rng);
  for (size_t c = 0; c < 512; ++c) w[7 * 512 + c] *= 1150.0f;
  std::vector<uint8_t> bytes(w.size() * 4);
  std::memcpy(bytes.data(), w.data(), bytes.size());
  fp8wb::write_safetensors(path, {{"mlp.weight", fp8wb::StDtype::F32, {2048, 512}, bytes},
                                  {"step", fp8wb::StDtype::I64, {1}, std::vector<uint8_t>(8, 0)}});
  auto r = run({"inspect", path, "--json", "--device", "cpu"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  double rec_pct = -1;
  for (const auto& t : j) {
    if (t["name"] == "step") {
      EXPECT_TRUE(t["recommended_underflow_pct"].is_null()) << t.dump();
      continue;
    }
    EXPECT_EQ(t["recommended"], "E4M3FN rowwise") << t["reason"];
    for (const auto& rr : t["recipes"]) {
      if (rr["recipe"] == t["recommended"]) rec_pct = rr["underflow_pct"].get<double>();
    }
    ASSERT_TRUE(t["recommended_underflow_pct"].is_number()) << t.dump();
    EXPECT_EQ(t["recommended_underflow_pct"].get<double>(), rec_pct);
  }
  ASSERT_GT(rec_pct, 0.0);
  ASSERT_LT(rec_pct, 0.001);
  r = run({"inspect", path, "--device", "cpu"});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::istringstream lines(r.out);
  std::string header, line;
  std::getline(lines, header);
  EXPECT_NE(header.find(" rec. underflow"), std::string::npos) << header;
  char want[32];
  std::snprintf(want, sizeof want, " %.2g%%", rec_pct);
  bool weight_row = false, step_row = false;
  while (std::getline(lines, line)) {
    if (line.rfind("mlp.weight ", 0) == 0) {
      weight_row = true;
      EXPECT_TRUE(line.size() > std::strlen(want) &&
                  line.compare(line.size() - std::strlen(want), std::strlen(want), want) == 0)
          << line << " should end with" << want;
    }
    if (line.rfind("step ", 0) == 0) {
      step_row = true;
      EXPECT_EQ(line.back(), '-') << line;
    }
  }
  EXPECT_TRUE(weight_row && step_row) << r.out;
  std::filesystem::remove(path);
}

TEST(CliInspect, RecipesAsTheTableNamesThemAndExactSqnr) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fp8wb-inspect-names-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::vector<float> w(32 * 32, 0.5f);  // 0.5 is exact in every format under every scale
  std::vector<uint8_t> bytes(w.size() * 4);
  std::memcpy(bytes.data(), w.data(), bytes.size());
  const std::string model = (dir / "exact.safetensors").string();
  fp8wb::write_safetensors(model, {{"fc.weight", fp8wb::StDtype::F32, {32, 32}, bytes}});
  auto r = run({"inspect", model, "--json"});

  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_FALSE(j[0]["recipes"].empty());
  std::set<std::string> names;
  for (const auto& rec : j[0]["recipes"]) {
    EXPECT_EQ(rec["sqnr_db"], "inf") << rec;
    names.insert(rec["recipe"].get<std::string>());
  }
  ASSERT_TRUE(names.count("E4M3FN mx floor"));
  // Each name the JSON gives selects that recipe alone.
  for (const std::string& name : names) {
    r = run({"inspect", model, "--json", "--recipe", name});
    ASSERT_EQ(r.rc, 0) << name << ": " << r.err;
    j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j[0]["recipes"].size(), 1u) << name;
    EXPECT_EQ(j[0]["recipes"][0]["recipe"], name);
  }
  r = run({"inspect", model, "--json", "--recipe", "mx floor"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)[0]["recipes"].size(), 3u);  // E4M3FN, E5M2, E2M1FN
  r = run({"inspect", model, "--recipe", "mx rceil"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err,
            "fp8wb inspect: the analysis runs MX with its scales rounded down ('mx floor'), not "
            "'rceil'\n");
  r = run({"inspect", model, "--recipe", "E5M2 rowwise", "--format", "E4M3FN"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, "fp8wb inspect: --recipe 'E5M2 rowwise' names format E5M2, --format E4M3FN\n");
  r = run({"inspect", model, "--recipe", "rowwise extra"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("unknown recipe 'rowwise extra'"), std::string::npos) << r.err;
  // A training recipe's name, as train and eval spell it, selects the scaling it gives a
  // weight: blockwise's 128x128 tiles, in every format; and says so.
  r = run({"inspect", model, "--json", "--recipe", "blockwise"});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::set<std::string> blockwise;
  j = nlohmann::json::parse(r.out);
  for (const auto& rec : j[0]["recipes"]) blockwise.insert(rec["recipe"].get<std::string>());
  EXPECT_EQ(blockwise, (std::set<std::string>{"E4M3FN 128x128", "E5M2 128x128", "E4M3FNUZ 128x128",
                                              "E5M2FNUZ 128x128", "E2M1FN 128x128"}));
  EXPECT_EQ(r.err,
            "note: --recipe blockwise: a weight's scaling under that training recipe, "
            "128x128\n");
  // The model's folder is the checkpoint it holds.
  std::filesystem::create_directories(dir / "hf");
  std::filesystem::copy_file(model, dir / "hf" / "model.safetensors");
  r = run({"inspect", (dir / "hf").string(), "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)[0]["name"], "fc.weight");
  EXPECT_EQ(r.err, "note: " + (dir / "hf").string() + " is a folder: reading " +
                       (dir / "hf" / "model.safetensors").string() + "\n");
  fp8wb::test::remove_tree(dir.string());
}

// A shard's tensor that the index's weight_map does not name is said, not analysed: the
// set as loaders read it is what the index names. --json's array stays whole.
TEST(CliInspect, AShardsTensorsOutsideTheIndexAreSaid) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("fp8wb-inspect-unindexed-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::vector<uint8_t> bytes(16 * 16 * 4);
  for (size_t i = 0; i < bytes.size(); i += 4) bytes[i + 3] = 0x3F;  // ~0.5
  fp8wb::write_safetensors((dir / "s1.safetensors").string(),
                           {{"a.weight", fp8wb::StDtype::F32, {16, 16}, bytes},
                            {"extra.weight", fp8wb::StDtype::F32, {16, 16}, bytes}});
  const std::string index = (dir / "model.safetensors.index.json").string();
  std::ofstream(index) << R"({"weight_map": {"a.weight": "s1.safetensors"}})";
  auto r = run({"inspect", index});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("a.weight"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("extra.weight"), std::string::npos) << r.out;
  EXPECT_EQ(r.err,
            "note: 1 tensor in the shards is not in the index's weight_map, so not analysed nor "
            "exported (first: extra.weight in s1.safetensors)\n");
  r = run({"inspect", index, "--json"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 1u);
  EXPECT_NE(r.err.find("extra.weight"), std::string::npos) << r.err;
  fp8wb::test::remove_tree(dir.string());
}

// Worst SQNR first: finite SQNRs ascending, then exact tensors (inf), then those without an
// SQNR (an integer tensor, an all-zero one), whatever the file's order.
TEST(CliInspect, WorstFirstPutsExactThenNoSqnrLast) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fp8wb-inspect-order-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto f32 = [](const std::vector<float>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  std::vector<float> coarse(256), fine(256);
  for (size_t i = 0; i < 256; ++i) {
    coarse[i] = std::sin(0.37f * static_cast<float>(i)) * std::exp2(static_cast<float>(i % 40));
    fine[i] = 0.01f * std::sin(0.37f * static_cast<float>(i));
  }
  const std::string model = (dir / "m.safetensors").string();
  // Names in the file's (alphabetical) order mix the kinds.
  fp8wb::write_safetensors(
      model, {{"a.ints", fp8wb::StDtype::I32, {4}, std::vector<uint8_t>(16, 1)},
              {"b.exact", fp8wb::StDtype::F32, {16, 16}, f32(std::vector<float>(256, 0.5f))},
              {"c.zeros", fp8wb::StDtype::F32, {16, 16}, f32(std::vector<float>(256, 0.0f))},
              {"d.fine", fp8wb::StDtype::F32, {16, 16}, f32(fine)},
              {"e.coarse", fp8wb::StDtype::F32, {16, 16}, f32(coarse)}});
  const auto r = run({"inspect", model, "--json"});
  fp8wb::test::remove_tree(dir.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  std::vector<std::string> order;
  std::vector<double> best;
  for (const auto& t : nlohmann::json::parse(r.out)) {
    order.push_back(t["name"]);
    double b = -INFINITY;
    for (const auto& rec : t["recipes"])
      if (rec["sqnr_db"].is_number()) b = std::max(b, rec["sqnr_db"].get<double>());
    best.push_back(b);
  }
  ASSERT_EQ(order.size(), 5u);
  EXPECT_EQ(std::set<std::string>(order.begin(), order.begin() + 2),
            (std::set<std::string>{"d.fine", "e.coarse"}));
  EXPECT_LE(best[0], best[1]);  // the finite ones, ascending
  EXPECT_EQ(std::vector<std::string>(order.begin() + 2, order.end()),
            (std::vector<std::string>{"b.exact", "a.ints", "c.zeros"}));
}

// --export says when it wrote a weight's Infs as finite values (E4M3 has none).
TEST(CliInspect, ExportWarnsOfInfsWrittenAsTheLargestFiniteValue) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fp8wb-inspect-inf-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::vector<float> w(32 * 32, 0.5f);
  w[3] = std::numeric_limits<float>::infinity();
  w[4] = -std::numeric_limits<float>::infinity();
  w[5] = std::numeric_limits<float>::infinity();
  std::vector<uint8_t> bytes(w.size() * 4);
  std::memcpy(bytes.data(), w.data(), bytes.size());
  const std::string model = (dir / "model.safetensors").string();
  fp8wb::write_safetensors(model, {{"fc.weight", fp8wb::StDtype::F32, {32, 32}, bytes}});
  const auto r = run({"inspect", model, "--export", (dir / "fp8.safetensors").string()});
  fp8wb::test::remove_tree(dir.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("warning: 3 Inf values in 1 weight (first: fc.weight) written as the "
                       "largest finite E4M3 value of their sign: E4M3 has no Inf"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("note: no tensor"), std::string::npos) << r.err;  // one was converted
  EXPECT_EQ(r.err.find("to 0 in 128x128 blocks"), std::string::npos) << r.err;
}

// --export names the weights whose 128x128 blocks turn their values into 0 (one outlier
// among tiny values; values all below FP8's range), with the share each loses.
TEST(CliInspect, ExportWarnsOfWeightsThatLoseTheirValues) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fp8wb-inspect-lost-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::vector<float> outlier(32 * 32, 1e-4f), tiny(32 * 32, 1e-30f), fine(32 * 32, 0.25f);
  outlier[3] = 1000.0f;
  auto bytes = [](const std::vector<float>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  const std::string model = (dir / "model.safetensors").string();
  fp8wb::write_safetensors(model, {{"fine.weight", fp8wb::StDtype::F32, {32, 32}, bytes(fine)},
                                   {"out.weight", fp8wb::StDtype::F32, {32, 32}, bytes(outlier)},
                                   {"tiny.weight", fp8wb::StDtype::F32, {32, 32}, bytes(tiny)}});
  const auto r = run({"inspect", model, "--export", (dir / "fp8.safetensors").string()});
  fp8wb::test::remove_tree(dir.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("warning: 2 weights lost 1% or more of their nonzero values to 0 in "
                       "128x128 blocks: out.weight (99.902%), tiny.weight (100.000%); see the "
                       "recipes recommended for them below\n"),
            std::string::npos)
      << r.err;
}

// --export of a checkpoint without a tensor it converts says so, and which tensors it
// converts (a bias, a 2-D tensor not named a weight, a weight under 16 x 16, an integer
// weight).
TEST(CliInspect, ExportSaysWhenNoTensorQualifies) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fp8wb-inspect-none-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto f32 = [](size_t n) { return std::vector<uint8_t>(n * 4, 0x3F); };
  const std::string model = (dir / "model.safetensors").string();
  fp8wb::write_safetensors(model, {{"fc.bias", fp8wb::StDtype::F32, {32}, f32(32)},
                                   {"emb", fp8wb::StDtype::F32, {32, 32}, f32(32 * 32)},
                                   {"small.weight", fp8wb::StDtype::F32, {8, 32}, f32(8 * 32)},
                                   {"ids.weight", fp8wb::StDtype::I32, {32, 32}, f32(32 * 32)}});
  const std::string out = (dir / "fp8.safetensors").string();
  const auto r = run({"inspect", model, "--export", out});
  const bool written = std::filesystem::exists(out);
  fp8wb::test::remove_tree(dir.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(written);
  EXPECT_NE(r.err.find("0 weights in FP8 (E4M3, 128x128 blocks), 4 tensors as they were\n"
                       "note: no tensor was written in FP8: --export converts 2-D "
                       "floating-point tensors (F32, F64, F16, BF16) whose names end in "
                       "\"weight\", both dimensions 16 or more\n"),
            std::string::npos)
      << r.err;
}

// A tensor without dimensions (a scalar) says so in the shape column, not a blank.
TEST(CliInspect, AScalarsShapeIsSaid) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("fp8wb-inspect-scalar-" + std::to_string(getpid()) + ".safetensors"))
                               .string();
  std::vector<uint8_t> half(4), w(4 * 4);
  const float h = 0.5f;
  std::memcpy(half.data(), &h, 4);
  fp8wb::write_safetensors(path, {{"scale", fp8wb::StDtype::F32, {}, half},
                                  {"w.weight", fp8wb::StDtype::F32, {2, 2}, w}});
  const auto r = run({"inspect", path, "--device", "cpu"});
  std::filesystem::remove(path);
  ASSERT_EQ(r.rc, 0) << r.err;
  const size_t line = r.out.find("\nscale ");
  ASSERT_NE(line, std::string::npos) << r.out;
  const std::string row = r.out.substr(line + 1, r.out.find('\n', line + 1) - line - 1);
  EXPECT_NE(row.find(" F32      scalar "), std::string::npos) << row;
}

// Progress on stderr that is not a terminal (a log file) comes as plain lines, no carriage
// returns; an unknown --format is named with the formats there are.
TEST(CliInspect, ProgressInALogIsPlainLinesAndUnknownFormatsListTheKnown) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("fp8wb-inspect-log-" + std::to_string(getpid()) + ".safetensors"))
                               .string();
  std::vector<fp8wb::TensorToWrite> tensors;
  for (int t = 0; t < 25; ++t) {
    std::vector<uint8_t> bytes(8 * 8 * 4);
    for (size_t i = 0; i < bytes.size(); i += 4) {
      const float v = 0.01f * static_cast<float>(t + 1) * std::sin(static_cast<float>(i));
      std::memcpy(&bytes[i], &v, 4);
    }
    tensors.push_back(
        {"layer" + std::to_string(t) + ".weight", fp8wb::StDtype::F32, {8, 8}, bytes});
  }
  fp8wb::write_safetensors(path, tensors);
  auto r = run({"inspect", path, "--format", "E4M3FN"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("analysed 25/25 tensors\n"), std::string::npos) << r.err;
  r = run({"inspect", path, "--format", "foo"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("unknown format 'foo': known formats are"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(fp8wb::format_info(fp8wb::Format::E5M2).name), std::string::npos) << r.err;
  std::filesystem::remove(path);
}

TEST(CliInspect, BadFilesNameTheProblem) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("fp8wb-inspect-bad-" + std::to_string(getpid()) + ".safetensors"))
                               .string();
  std::ofstream(path) << "short";
  auto r = run({"inspect", path});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
  std::filesystem::remove(path);
  r = run({"inspect", "/nonexistent.safetensors"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("/nonexistent.safetensors"), std::string::npos) << r.err;
}

// A safetensors file of the given header text (its length first), no data.
std::string write_header(const std::string& name, const std::string& header) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("fp8wb-inspect-" + std::to_string(getpid()) + "-" + name))
                               .string();
  std::ofstream f(path, std::ios::binary);
  const uint64_t n = header.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << header;
  return path;
}

// Each message says, in the workbench's words, what the file was read as and what is
// wrong with it.
TEST(CliInspect, MessagesSayWhatIsWrongInOurWords) {
  // A tiny .pt file is read as PyTorch (by its name), not as a truncated safetensors file.
  const std::string pt = (std::filesystem::temp_directory_path() /
                          ("fp8wb-inspect-tiny-" + std::to_string(getpid()) + ".pt"))
                             .string();
  std::ofstream(pt) << "abc";
  auto r = run({"inspect", pt});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find(pt + " is not a PyTorch checkpoint: it is only 3 bytes long"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("truncated"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("header length"), std::string::npos) << r.err;
  std::filesystem::remove(pt);
  // A header that is not JSON: where, not nlohmann's exception text.
  const std::string bad_json = write_header("json.safetensors", "{\"w\": nope}");
  r = run({"inspect", bad_json});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("the safetensors header is not valid JSON (at byte 8 of its 11)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("json.exception"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("parse_error"), std::string::npos) << r.err;
  std::filesystem::remove(bad_json);
  // A dtype that is there but not a string is said as such, not as missing.
  const std::string bad_dtype = write_header(
      "dtype.safetensors", R"({"w": {"dtype": 5, "shape": [1], "data_offsets": [0, 4]}})");
  r = run({"inspect", bad_dtype});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("tensor 'w': its dtype is not a string but a number (5)"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("no dtype"), std::string::npos) << r.err;
  std::filesystem::remove(bad_dtype);
  const std::string bad_shape = write_header(
      "shape.safetensors", R"({"w": {"dtype": "F32", "shape": 4, "data_offsets": [0, 4]}})");
  r = run({"inspect", bad_shape});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("tensor 'w': its shape is not an array but a number (4)"), std::string::npos)
      << r.err;
  std::filesystem::remove(bad_shape);
}

// A checkpoint without tensors is said as such (exit code 0, as `runs list` of an empty
// database), not shown as an empty table; --json gives an empty array.
TEST(CliInspect, NoTensorsIsSaid) {
  const std::string path = write_header("empty.safetensors", "{}");
  auto r = run({"inspect", path});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "no tensors in " + path + "\n");
  r = run({"inspect", path, "--json"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out), nlohmann::json::array());
  std::filesystem::remove(path);
}

// The binary itself: a signal would end it, not an error message.
struct Exit {
  bool signalled;
  int code;
  std::string err;
};

Exit run_binary(const std::vector<std::string>& args, const std::string& err_file) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const int devnull = ::open("/dev/null", O_WRONLY);
    const int err = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(devnull, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    execv(FP8WB_BINARY, argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  std::ifstream in(err_file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return {WIFSIGNALED(status), WIFEXITED(status) ? WEXITSTATUS(status) : -1, text};
}

// F32 [2^62]: its byte count wraps around 2^64 to 0, which data_offsets [0, 0] match.
TEST(CliInspect, AShapeWhoseBytesWrapIsAnErrorNotASignal) {
  const std::string base =
      (std::filesystem::temp_directory_path() / ("fp8wb-inspect-wrap-" + std::to_string(getpid())))
          .string();
  for (const bool aligned : {true, false}) {
    std::string header =
        R"({"w": {"dtype": "F32", "shape": [4611686018427387904], "data_offsets": [0, 0]}})";
    if (aligned)
      header.append((8 - header.size() % 8) % 8, ' ');
    else if (header.size() % 8 == 0)
      header += ' ';
    const std::string path = base + (aligned ? "-aligned" : "-unaligned") + ".safetensors";
    {
      std::ofstream f(path, std::ios::binary);
      const uint64_t n = header.size();
      f.write(reinterpret_cast<const char*>(&n), 8);
      f << header;
    }
    const Exit e = run_binary({"fp8wb", "inspect", path, "--device", "cpu"}, base + ".err");
    EXPECT_FALSE(e.signalled) << path;
    EXPECT_EQ(e.code, 1) << path;
    EXPECT_NE(e.err.find("tensor 'w': shape [4611686018427387904] of F32 is too large"),
              std::string::npos)
        << e.err;
    std::remove(path.c_str());
  }
  std::remove((base + ".err").c_str());
}

TEST(CliInspect, ExportReplacesOnlyRegularFiles) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fp8wb-inspect-export-" + std::to_string(getpid()));
  fp8wb::test::remove_tree(dir.string());
  std::filesystem::create_directories(dir / "folder");
  const std::string model = (dir / "ok.safetensors").string();
  fp8wb::write_safetensors(model, {{"w", fp8wb::StDtype::F32, {2}, std::vector<uint8_t>(8)}});
  auto r = run({"inspect", model, "--export", (dir / "folder").string()});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("is a folder"), std::string::npos) << r.err;
  {
    fp8wb::test::FifoGuard fifo((dir / "fifo").string());
    r = run({"inspect", model, "--export", fifo.path()});
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.err.find("is a FIFO"), std::string::npos) << r.err;
    EXPECT_TRUE(std::filesystem::is_fifo(fifo.path())) << "the FIFO was replaced by a file";
  }
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"folder", "ok.safetensors"}))
      << "a .part file was left behind";
  fp8wb::test::remove_tree(dir.string());
}

}  // namespace

namespace {

// NaN and Inf in a tensor are counted and shown, in the table and in JSON.
TEST(CliInspect, NanAndInfAreShown) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("fp8wb-inspect-nan-" + std::to_string(getpid()) + ".safetensors"))
                               .string();
  std::vector<float> w(64 * 64, 0.5f);
  w[3] = NAN;
  w[10] = NAN;
  w[20] = INFINITY;
  std::vector<uint8_t> bytes(w.size() * 4);
  std::memcpy(bytes.data(), w.data(), bytes.size());
  fp8wb::write_safetensors(path, {{"bad.weight", fp8wb::StDtype::F32, {64, 64}, bytes}});
  auto r = run({"inspect", path});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("non-finite: 2 NaN, 1 Inf"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 of 1 tensor holds NaN or Inf"), std::string::npos) << r.out;
  r = run({"inspect", path, "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j[0]["nan_count"], 2);
  EXPECT_EQ(j[0]["inf_count"], 1);
  std::filesystem::remove(path);
}

TEST(CliInspect, TensorsWithoutSignalHaveNoSqnr) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("fp8wb-inspect-nosignal-" + std::to_string(getpid()) + ".safetensors"))
                               .string();
  const std::vector<float> nan(64 * 64, NAN), zero(64 * 64, 0.0f);
  std::vector<uint8_t> nan_bytes(nan.size() * 4), zero_bytes(zero.size() * 4);
  std::memcpy(nan_bytes.data(), nan.data(), nan_bytes.size());
  std::memcpy(zero_bytes.data(), zero.data(), zero_bytes.size());
  fp8wb::write_safetensors(path, {{"nan.weight", fp8wb::StDtype::F32, {64, 64}, nan_bytes},
                                  {"zero.weight", fp8wb::StDtype::F32, {64, 64}, zero_bytes},
                                  {"empty.bias", fp8wb::StDtype::F32, {0}, {}}});
  auto r = run({"inspect", path});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.find("inf"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("recommended"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no SQNR: no finite values: 4096 NaN"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no SQNR: all zero"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no SQNR: empty tensor (0 elements)"), std::string::npos) << r.out;
  r = run({"inspect", path, "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 3u);
  for (const auto& t : j) {
    EXPECT_TRUE(t["recipes"].empty()) << t["name"];
    EXPECT_EQ(t["recommended"], "") << t["name"];
    ASSERT_TRUE(t["not_quantized"].is_string()) << t["name"];
  }
  std::filesystem::remove(path);
}

// Zeros with NaN and Inf are not "all zero": what the tensor holds is counted.
TEST(CliInspect, ZerosWithNanAndInfAreCountedNotAllZero) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("fp8wb-inspect-zeronan-" + std::to_string(getpid()) + ".safetensors"))
                               .string();
  std::vector<float> w(64 * 64, 0.0f);
  w[3] = NAN;
  w[70] = INFINITY;
  w[71] = -INFINITY;
  w[900] = -0.0f;
  std::vector<uint8_t> bytes(w.size() * 4);
  std::memcpy(bytes.data(), w.data(), bytes.size());
  fp8wb::write_safetensors(path, {{"odd.weight", fp8wb::StDtype::F32, {64, 64}, bytes}});
  auto r = run({"inspect", path});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("no SQNR: no finite nonzero values: 4093 zeros, 1 NaN, 2 Inf"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("all zero"), std::string::npos) << r.out;
  r = run({"inspect", path, "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j[0]["not_quantized"], "no finite nonzero values: 4093 zeros, 1 NaN, 2 Inf");
  std::filesystem::remove(path);
}

// Issue #52: tensor names were cut at 40 columns ("model.layers.17.self_attention.query_…").
// The column is as wide as the longest name up to 72 columns: a 53-character name shows
// whole; a longer one is cut in the middle ("…"), keeping both ends, never mid-character;
// --wide shows every name whole.
TEST(CliInspect, LongNamesStayReadable) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("fp8wb-inspect-longname-" + std::to_string(getpid()) + ".safetensors"))
                               .string();
  std::vector<float> w(64 * 64);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.02f * std::sin(0.37f * static_cast<float>(i));
  std::vector<uint8_t> bytes(w.size() * 4);
  std::memcpy(bytes.data(), w.data(), bytes.size());
  const std::string long_name = "model.layers.17.self_attention.query_key_value.weight";
  std::string greek = "βάρη.";
  for (int i = 0; i < 4; ++i) greek += "αβγδεζηθικλμνξοπρστυφχψω";
  greek += ".weight";  // 108 characters, 2 bytes each but the dots and "weight"
  fp8wb::write_safetensors(path, {{long_name, fp8wb::StDtype::F32, {64, 64}, bytes},
                                  {greek, fp8wb::StDtype::F32, {64, 64}, bytes}});
  auto r = run({"inspect", path});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("\n" + long_name + " "), std::string::npos) << r.out;
  // The Greek name: its start and its end, "…" between, each a whole character.
  const size_t row = r.out.find("\nβάρη.");
  ASSERT_NE(row, std::string::npos) << r.out;
  const std::string line = r.out.substr(row + 1, r.out.find('\n', row + 1) - row - 1);
  const size_t mark = line.find("…");
  ASSERT_NE(mark, std::string::npos) << line;
  EXPECT_EQ(greek.compare(0, mark, line, 0, mark), 0) << line;
  const size_t tail = line.find(".weight ");
  ASSERT_NE(tail, std::string::npos) << line;
  const std::string kept_end =
      line.substr(mark + std::string("…").size(), tail + 7 - mark - std::string("…").size());
  EXPECT_EQ(greek.compare(greek.size() - kept_end.size(), kept_end.size(), kept_end), 0) << line;
  // --wide: whole.
  r = run({"inspect", path, "--wide"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("\n" + greek + " "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("…"), std::string::npos) << r.out;
  std::filesystem::remove(path);
}

// --export naming the checkpoint itself (or one of its shards), by whatever path, is
// refused with both paths named, and the checkpoint stays as it was.
TEST(CliInspect, ExportNeverReplacesTheCheckpoint) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fp8wb-inspect-self-" + std::to_string(getpid()));
  fp8wb::test::remove_tree(dir.string());
  std::filesystem::create_directories(dir);
  const std::string model = (dir / "model.safetensors").string();
  std::vector<float> w(32 * 32);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * std::cos(0.3f * static_cast<float>(i));
  std::vector<uint8_t> bytes(w.size() * 4);
  std::memcpy(bytes.data(), w.data(), bytes.size());
  fp8wb::write_safetensors(model, {{"proj.weight", fp8wb::StDtype::F32, {32, 32}, bytes}});
  auto content = [](const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  const std::string original = content(model);
  std::filesystem::create_symlink(model, dir / "link.safetensors");
  std::filesystem::create_hard_link(model, dir / "hard.safetensors");
  const std::string index = (dir / "model.safetensors.index.json").string();
  std::ofstream(index) << R"({"weight_map": {"proj.weight": "model.safetensors"}})";
  struct Case {
    std::string in, out, named;
  };
  for (const Case& c : std::vector<Case>{
           {model, model, model},
           {model, (dir / "." / "model.safetensors").string(), model},
           {model, (dir / "link.safetensors").string(), model},
           {(dir / "link.safetensors").string(), model, (dir / "link.safetensors").string()},
           {model, (dir / "hard.safetensors").string(), model},
           {index, model, "shard"}}) {
    const auto r = run({"inspect", c.in, "--export", c.out});
    EXPECT_EQ(r.rc, 1) << c.in << " -> " << c.out;
    EXPECT_NE(r.err.find("--export " + c.out + " is the same file as"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.named), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("wrote"), std::string::npos) << r.err;
    EXPECT_EQ(content(model), original) << c.in << " -> " << c.out << ": the checkpoint changed";
    EXPECT_TRUE(std::filesystem::is_symlink(dir / "link.safetensors"));
  }
  // Another path is written as before.
  const auto r = run({"inspect", model, "--export", (dir / "fp8.safetensors").string()});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(content(model), original);
  fp8wb::test::remove_tree(dir.string());
}

// --export naming an SQLite database (a run database given nowhere on the command line, the
// default one say), one of its -wal, -shm or -journal files, or a link to it, is refused
// with the database named, and the database keeps its run: the FP8 copy would have
// replaced it.
TEST(CliInspect, ExportNeverDestroysAnSqliteDatabase) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fp8wb-inspect-db-" + std::to_string(getpid()));
  fp8wb::test::remove_tree(dir.string());
  std::filesystem::create_directories(dir);
  const std::string model = (dir / "model.safetensors").string();
  std::vector<uint8_t> bytes(16 * 16 * 4, 0);
  for (size_t i = 0; i < bytes.size(); i += 4) bytes[i + 3] = 0x3f;  // 0.5f
  fp8wb::write_safetensors(model, {{"proj.weight", fp8wb::StDtype::F32, {16, 16}, bytes}});
  const std::string db = (dir / "runs.sqlite").string();
  fp8wb::RunStore::open(db)->create_run("kept", fp8wb::RunKind::Train, "{}", "cpu");
  std::filesystem::create_symlink(db, dir / "export.csv");
  for (const std::string& out :
       {db, db + "-wal", db + "-shm", db + "-journal", (dir / "export.csv").string()}) {
    const auto r = run({"inspect", model, "--export", out});
    EXPECT_EQ(r.rc, 1) << out;
    const bool named_db = out.size() > db.size() && out.compare(0, db.size(), db) == 0;
    const std::string said = "--export " + out +
                             (named_db ? " belongs to the SQLite database " + db
                                       : std::string(" is an SQLite database"));
    EXPECT_NE(r.err.find(said), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("wrote"), std::string::npos) << r.err;
    std::ifstream in(db, std::ios::binary);
    std::string head(15, '\0');
    in.read(head.data(), 15);
    EXPECT_EQ(head, "SQLite format 3") << out << ": the database was replaced";
    EXPECT_EQ(fp8wb::RunStore::open_read_only(db)->runs().size(), 1u) << out;
  }
  // A file that is no database is written as before.
  const auto r = run({"inspect", model, "--export", (dir / "fp8.safetensors").string()});
  EXPECT_EQ(r.rc, 0) << r.err;
  fp8wb::test::remove_tree(dir.string());
}

}  // namespace

namespace {

// Tensor names come from the checkpoint's author: in the text table a line break or an
// escape sequence in one is shown escaped, never written to the terminal as it is; an
// empty name is shown as ""; the JSON holds the names as they are.
TEST(CliInspect, ControlCharactersInNamesAreEscapedInTheTable) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("fp8wb-inspect-escape-" + std::to_string(getpid()) + ".safetensors"))
                               .string();
  std::vector<float> w(16 * 16);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.02f * std::sin(0.37f * static_cast<float>(i));
  std::vector<uint8_t> bytes(w.size() * 4);
  std::memcpy(bytes.data(), w.data(), bytes.size());
  const std::string injected = "a\nFAKE\x1b[31mred\rb\\c\xe2\x80\xae";
  fp8wb::write_safetensors(path, {{injected, fp8wb::StDtype::F32, {16, 16}, bytes},
                                  {"", fp8wb::StDtype::F32, {16, 16}, bytes},
                                  {"\"\"", fp8wb::StDtype::F32, {16, 16}, bytes},
                                  {"z\xe2\x80\x8bw", fp8wb::StDtype::F32, {16, 16}, bytes}});
  const auto r = run({"inspect", path});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\r'), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\nFAKE"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\xe2\x80\xae"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\na\\nFAKE\\x1b[31mred\\rb\\\\c\\u202e "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n\"\"      "), std::string::npos) << r.out;  // the empty name, seen
  // Two double quotes do not read as the empty name; a zero-width space is seen.
  EXPECT_NE(r.out.find("\n\\\"\\\"    "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nz\\u200bw "), std::string::npos) << r.out;
  const auto j = run({"inspect", path, "--json"});
  ASSERT_EQ(j.rc, 0) << j.err;
  const auto names = nlohmann::json::parse(j.out);
  ASSERT_EQ(names.size(), 4u);
  std::set<std::string> as_is;
  for (const auto& t : names) as_is.insert(t["name"].get<std::string>());
  EXPECT_EQ(as_is, (std::set<std::string>{injected, "", "\"\"", "z\xe2\x80\x8bw"})) << j.out;
  std::filesystem::remove(path);
}

// Writes a zip archive of stored (uncompressed) records, as a tool other than torch.save
// would.
void write_zip(const std::string& path,
               const std::vector<std::pair<std::string, std::string>>& records) {
  std::string out, dir;
  auto u16 = [](std::string& s, uint32_t v) {
    s += static_cast<char>(v & 0xFF), s += static_cast<char>(v >> 8 & 0xFF);
  };
  auto u32 = [&](std::string& s, uint32_t v) { u16(s, v & 0xFFFF), u16(s, v >> 16); };
  for (const auto& [name, data] : records) {
    const auto offset = static_cast<uint32_t>(out.size());
    const auto size = static_cast<uint32_t>(data.size());
    const auto name_len = static_cast<uint32_t>(name.size());
    u32(out, 0x04034b50), u16(out, 20), u16(out, 0), u16(out, 0), u16(out, 0), u16(out, 0);
    u32(out, 0), u32(out, size), u32(out, size), u16(out, name_len), u16(out, 0);
    out += name + data;
    u32(dir, 0x02014b50), u16(dir, 20), u16(dir, 20), u16(dir, 0), u16(dir, 0), u16(dir, 0);
    u16(dir, 0), u32(dir, 0), u32(dir, size), u32(dir, size), u16(dir, name_len), u16(dir, 0);
    u16(dir, 0), u16(dir, 0), u16(dir, 0), u32(dir, 0), u32(dir, offset);
    dir += name;
  }
  const auto dir_offset = static_cast<uint32_t>(out.size());
  out += dir;
  const auto n = static_cast<uint32_t>(records.size());
  u32(out, 0x06054b50), u16(out, 0), u16(out, 0), u16(out, n), u16(out, n);
  u32(out, static_cast<uint32_t>(dir.size())), u32(out, dir_offset), u16(out, 0);
  std::ofstream(path, std::ios::binary) << out;
}

// A zip archive that torch.save did not write is said to be no PyTorch checkpoint, with
// what it lacks, in the workbench's words, not LibTorch's internal check.
TEST(CliInspect, AZipThatIsNoCheckpointIsSaidSo) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("fp8wb-inspect-zip-" + std::to_string(getpid())))
          .string();
  std::filesystem::create_directories(dir);
  const std::string flat = dir + "/flat.pt";
  write_zip(flat, {{"notes.txt", "hello"}});
  auto r = run({"inspect", flat});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find(flat + " is not a PyTorch checkpoint: in this zip archive, record "
                              "'notes.txt' is not in a top folder"),
            std::string::npos)
      << r.err;
  const std::string no_pickle = dir + "/no_pickle.pt";
  write_zip(no_pickle, {{"archive/version", "3\n"}, {"archive/notes.txt", "hello"}});
  r = run({"inspect", no_pickle});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find(no_pickle +
                       " is not a PyTorch checkpoint: a zip archive without the data.pkl record"),
            std::string::npos)
      << r.err;
  const std::string no_version = dir + "/no_version.pt";
  write_zip(no_version, {{"archive/data.pkl", "."}});
  r = run({"inspect", no_version});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("without the version record"), std::string::npos) << r.err;
  for (const std::string& f : {flat, no_pickle, no_version}) {
    r = run({"inspect", f});
    EXPECT_EQ(r.err.find("enforce fail"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("inline_container"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("Could this error message be improved"), std::string::npos) << r.err;
  }
  fp8wb::test::remove_tree(dir);
}

}  // namespace

namespace {

using fp8wb::test::f32_bytes;

std::string temp_checkpoint(const std::string& stem) {
  return (std::filesystem::temp_directory_path() /
          ("fp8wb-inspect-" + stem + "-" + std::to_string(getpid()) + ".safetensors"))
      .string();
}

}  // namespace

// Values far outside 2^-40..2^23 are counted at their own exponents, not piled into the
// end bins: the JSON names each bin's exponent, and every value is in the right one.
TEST(CliInspect, HistogramBinsAreEveryValuesOwnExponent) {
  const std::string path = temp_checkpoint("hist");
  const auto tensors = fp8wb::test::range_tensors();
  fp8wb::write_safetensors(path, fp8wb::test::to_write(tensors));
  std::map<std::string, std::vector<float>> values;
  for (const auto& t : tensors) values[t.name] = t.values;
  auto r = run({"inspect", path, "--json", "--device", "cpu"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 4u);
  for (const auto& t : j) {
    const std::string name = t["name"];
    SCOPED_TRACE(name);
    std::map<int, uint64_t> want;
    for (float v : values.at(name)) ++want[std::ilogb(v)];
    std::map<int, uint64_t> got;
    ASSERT_TRUE(t["log2_bins"].is_array()) << t.dump();
    for (const auto& b : t["log2_bins"]) got[b["exp"].get<int>()] = b["count"].get<uint64_t>();
    EXPECT_EQ(got, want);
    // The first layout stays for older readers: 64 exponent bins, zeros, non-finite.
    ASSERT_EQ(t["log2_histogram"].size(), 66u);
    uint64_t total = 0;
    for (const auto& c : t["log2_histogram"]) total += c.get<uint64_t>();
    EXPECT_EQ(total, values.at(name).size());
    EXPECT_EQ(t["zero_count"], 0);
  }
  std::filesystem::remove(path);
}

// A tensor that every E4M3 recipe turns into zeros is not recommended a recipe: it is
// said that none represents it.
TEST(CliInspect, ATensorEveryRecipeZeroesGetsNoRecommendation) {
  const std::string path = temp_checkpoint("tiny");
  fp8wb::write_safetensors(path,
                           {{"w.tiny", fp8wb::StDtype::F32, {2}, f32_bytes({1e-45f, -1e-45f})},
                            {"w.fine", fp8wb::StDtype::F32, {2}, f32_bytes({0.5f, -0.25f})}});
  auto r = run({"inspect", path, "--device", "cpu"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const size_t tiny = r.out.find("w.tiny"), fine = r.out.find("w.fine");
  ASSERT_NE(tiny, std::string::npos) << r.out;
  ASSERT_NE(fine, std::string::npos) << r.out;
  const std::string tiny_text = r.out.substr(tiny, tiny < fine ? fine - tiny : std::string::npos);
  EXPECT_NE(tiny_text.find("recommended: none (no FP8 recipe represents this tensor"),
            std::string::npos)
      << r.out;
  EXPECT_NE(tiny_text.find("below 1e-12, which the scale formulas take as the least amax"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(tiny_text.find("recommended: E4M3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("recommended: E4M3FN"), std::string::npos) << r.out;  // w.fine
  r = run({"inspect", path, "--json", "--device", "cpu"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const auto& t : j) {
    if (t["name"] == "w.tiny") {
      EXPECT_EQ(t["recommended"], "");
      ASSERT_TRUE(t["no_recipe"].is_string()) << t.dump();
      EXPECT_NE(t["no_recipe"].get<std::string>().find("no FP8 recipe"), std::string::npos);
    } else {
      EXPECT_NE(t["recommended"], "");
      EXPECT_TRUE(t["no_recipe"].is_null()) << t.dump();
    }
  }
  std::filesystem::remove(path);
}

// DeepSeek-style `*_scale_inv` blocks that are NaN, Inf, zero or negative are named, with
// a count of each, in the table and the JSON; good scales give no warning.
TEST(CliInspect, BadScaleInvBlocksAreNamed) {
  const std::string path = temp_checkpoint("scales");
  const std::vector<uint8_t> ones(256 * 256, 0x38);  // E4M3FN 1.0
  fp8wb::write_safetensors(
      path,
      {{"l.weight", fp8wb::StDtype::F8_E4M3, {256, 256}, ones},
       {"l.weight_scale_inv", fp8wb::StDtype::F32, {2, 2}, f32_bytes({NAN, -1.0f, 0.0f, INFINITY})},
       {"m.weight", fp8wb::StDtype::F8_E4M3, {256, 256}, ones},
       {"m.weight_scale_inv", fp8wb::StDtype::F32, {2, 2}, f32_bytes({0.5f, 1.0f, 2.0f, 0.25f})}});
  auto r = run({"inspect", path, "--device", "cpu"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("warning: bad scales in 'l.weight_scale_inv': 4 of 4 blocks (1 NaN, 1 "
                       "Inf, 1 zero, 1 negative)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("[0,0] = nan"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[0,1] = -1"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("m.weight_scale_inv"), std::string::npos) << r.out;
  r = run({"inspect", path, "--json", "--device", "cpu"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  for (const auto& t : j) {
    ASSERT_TRUE(t["warnings"].is_array()) << t.dump();
    if (t["name"] == "l.weight") {
      ASSERT_EQ(t["warnings"].size(), 1u);
      EXPECT_NE(t["warnings"][0].get<std::string>().find("1 NaN, 1 Inf, 1 zero, 1 negative"),
                std::string::npos);
    } else {
      EXPECT_TRUE(t["warnings"].empty()) << t.dump();
    }
  }
  std::filesystem::remove(path);
}

// An FP8 weight whose `_scale_inv` fits it no way is listed with the reason, "-" where its
// amax and range would be (null in JSON, values_known false), and the file's other tensors
// are analysed; the exit code is 0.
TEST(CliInspect, AWeightWhoseScalesCannotBeAppliedIsListedAndTheRestAnalysed) {
  const std::string path = temp_checkpoint("unfit");
  fp8wb::write_safetensors(
      path, {{"l.weight", fp8wb::StDtype::F8_E4M3, {256, 256}, std::vector<uint8_t>(65536, 0x38)},
             {"l.weight_scale_inv", fp8wb::StDtype::F32, {3}, f32_bytes({1.0f, 1.0f, 1.0f})},
             {"m.weight", fp8wb::StDtype::F32, {2, 2}, f32_bytes({1.0f, -2.0f, 3.0f, 0.5f})}});
  auto r = run({"inspect", path, "--device", "cpu"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const size_t row = r.out.find("\nl.weight ");
  ASSERT_NE(row, std::string::npos) << r.out;
  const std::string line = r.out.substr(row + 1, r.out.find('\n', row + 1) - row - 1);
  EXPECT_NE(line.find("256x256                 -       -  -"), std::string::npos) << line;
  EXPECT_NE(r.out.find("no SQNR: values unknown: " + path +
                       ": 'l.weight_scale_inv' (F32 [3]) is "
                       "neither one F32 scale"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("recommended: E4M3"), std::string::npos) << r.out;  // m.weight's
  r = run({"inspect", path, "--json", "--device", "cpu"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  for (const auto& t : j) {
    if (t["name"] == "l.weight") {
      EXPECT_FALSE(t["values_known"].get<bool>());
      EXPECT_TRUE(t["amax"].is_null()) << t.dump();
      EXPECT_TRUE(t["dynamic_range_bits"].is_null()) << t.dump();
      EXPECT_TRUE(t["recipes"].empty()) << t.dump();
      EXPECT_TRUE(t["not_quantized"].is_string()) << t.dump();
    } else {
      EXPECT_TRUE(t["values_known"].get<bool>());
      EXPECT_EQ(t["amax"].get<double>(), 3.0);
      EXPECT_FALSE(t["recipes"].empty());
    }
  }
  std::filesystem::remove(path);
}

// A download cut short: what the file holds is analysed, the tensors cut off are listed
// with the reason, a line sums them up, the bytes analysed leave them out, and the exit
// status is 1. In JSON, a tensor without a finite value (all NaN) has null figures.
TEST(CliInspect, AFileCutShortIsAnalysedAsFarAsItGoesAndEndsWithStatus1) {
  const std::string path = temp_checkpoint("cut");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  fp8wb::write_safetensors(
      path,
      {{"a.weight", fp8wb::StDtype::F32, {2, 2}, f32_bytes({1, -2, 3, 0.5f})},
       {"n.weight", fp8wb::StDtype::F32, {2}, f32_bytes({nan, nan})},
       {"z.weight", fp8wb::StDtype::F32, {64, 64}, f32_bytes(std::vector<float>(64 * 64, 0.25f))}});
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 100);
  auto r = run({"inspect", path, "--device", "cpu"});
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.out.find("recommended: E4M3"), std::string::npos) << r.out;  // a.weight's
  // Each tensor cut off says how much of it is there; the file is said truncated once.
  EXPECT_NE(r.out.find("no SQNR: values unknown: cut off by the end of the file (16284 of its "
                       "16384 bytes there)\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("1 of 3 tensors has values that could not be read (said above); the "
                       "file is truncated: 1 tensor cut off\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("analysed 24 bytes of tensors"), std::string::npos) << r.out;
  r = run({"inspect", path, "--json", "--device", "cpu"});
  EXPECT_EQ(r.rc, 1) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 3u);
  for (const auto& t : j) {
    SCOPED_TRACE(t["name"].get<std::string>());
    EXPECT_EQ(t["values_known"].get<bool>(), t["name"] != "z.weight");
    EXPECT_EQ(t["amax"].is_null(), t["name"] != "a.weight") << t.dump();
    EXPECT_EQ(t["max"].is_null(), t["name"] != "a.weight") << t.dump();
  }
  std::filesystem::remove(path);
}

namespace {

// A small file's summary says its size and time in units that show them, and no rate
// measured on the fixed costs of a few milliseconds ("0.0 MB ... 0.000 GB/s" said nothing).
TEST(CliInspect, ASmallFilesSummarySaysItsSizeAndTime) {
  const std::string path = temp_checkpoint("small");
  fp8wb::write_safetensors(path, {{"w.a", fp8wb::StDtype::F32, {2}, f32_bytes({0.5f, -0.25f})},
                                  {"w.b", fp8wb::StDtype::F32, {2}, f32_bytes({1.0f, 2.0f})}});
  const auto r = run({"inspect", path, "--device", "cpu"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const size_t at = r.out.find("analysed ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
  EXPECT_EQ(line.rfind("analysed 16 bytes of tensors in ", 0), 0u) << line;
  EXPECT_EQ(line.find("GB/s"), std::string::npos) << line;
  EXPECT_EQ(line.find("0.0 MB"), std::string::npos) << line;
  EXPECT_EQ(line.find("0.00 s"), std::string::npos) << line;
  EXPECT_NE(line.find("on the CPU)"), std::string::npos) << line;
  std::filesystem::remove(path);
}

// --export into a folder that is not there (or a path that is a folder) is refused before
// the checkpoint is read and analysed, naming the path and the folder.
TEST(CliInspect, ExportToAMissingFolderIsRefusedFirst) {
  const std::string path = temp_checkpoint("export-src");
  fp8wb::write_safetensors(
      path,
      {{"w.weight", fp8wb::StDtype::F32, {16, 16}, f32_bytes(std::vector<float>(256, 0.5f))}});
  const std::string folder = (std::filesystem::temp_directory_path() /
                              ("fp8wb-inspect-missing-" + std::to_string(getpid())))
                                 .string();
  const std::string out = folder + "/model-fp8.safetensors";
  auto r = run({"inspect", path, "--device", "cpu", "--export", out});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_EQ(r.err, "fp8wb inspect: --export " + out + ": the folder " + folder +
                       " does not exist (create it first, or give another path)\n");
  EXPECT_FALSE(std::filesystem::exists(folder));
  // Said before the checkpoint is read: a checkpoint that is not there is not reached.
  r = run({"inspect", path + ".none", "--device", "cpu", "--export", out});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("the folder " + folder + " does not exist"), std::string::npos) << r.err;
  // A folder as the path: a file path is asked for.
  const std::string dir = std::filesystem::temp_directory_path().string();
  r = run({"inspect", path, "--device", "cpu", "--export", dir});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("--export " + dir + " is a folder: give a file path"), std::string::npos)
      << r.err;
  std::filesystem::remove(path);
}

// The binary's peak resident memory (KiB, that process's own) inspecting `path`; -1 where
// it did not end with status 0.
long inspect_peak_kib(const std::string& path, bool json) {
  std::vector<std::string> args = {"inspect", path, "--device", "cpu"};
  if (json) args.push_back("--json");
  return fp8wb::test::binary_peak_kib(FP8WB_BINARY, args);
}

// Many tiny tensors: what inspect keeps of each one until the table is sorted is bounded
// (a few hundred bytes), not the kilobytes of its figures (a histogram of 279 bins, every
// recipe's results): 20,000 tensors of one value each add far less than 3 KiB apiece to
// the process's peak, as a table and as JSON (a million once took 42 times the file).
TEST(CliInspect, ManyTinyTensorsTakeBoundedMemory) {
  if (!fp8wb::test::kPeakIsTheProgramsOwn)
    GTEST_SKIP() << "under AddressSanitizer a peak is not the program's own";
  constexpr int kTensors = 20000;
  constexpr long kBoundKiBEach = 3;
  const std::string one = temp_checkpoint("one-tiny"), many = temp_checkpoint("many-tiny");
  std::vector<fp8wb::TensorToWrite> tensors;
  for (int i = 0; i < kTensors; ++i) {
    tensors.push_back({"layers." + std::to_string(i) + ".w",
                       fp8wb::StDtype::F32,
                       {1},
                       f32_bytes({0.001f * static_cast<float>(i + 1)})});
  }
  fp8wb::write_safetensors(many, tensors);
  tensors.resize(1);
  fp8wb::write_safetensors(one, tensors);
  for (const bool json : {false, true}) {
    const long base = inspect_peak_kib(one, json);
    const long peak = inspect_peak_kib(many, json);
    ASSERT_GT(base, 0) << "inspect of one tensor failed";
    ASSERT_GT(peak, 0) << "inspect of " << kTensors << " tensors failed";
    EXPECT_LT(peak - base, kTensors * kBoundKiBEach)
        << (json ? "--json: " : "table: ") << kTensors << " tiny tensors took " << peak - base
        << " KiB more at peak than one (" << (peak - base) * 1024 / kTensors << " bytes each)";
  }
  std::filesystem::remove(one);
  std::filesystem::remove(many);
}

}  // namespace
