// fp8wb inspect, in-process: the table and JSON for a checkpoint written by the
// project's writer, filters, and clear errors for bad files and options.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "fp8wb/core/checkpoint_analysis.h"
#include "fp8wb/core/safetensors.h"

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
  EXPECT_NE(r.err.find("1 weights in FP8"), std::string::npos) << r.err;
  r = run({"inspect", fp8, "--json"});  // the export reads back
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)[0]["dtype"], "F8_E4M3");
  std::filesystem::remove(fp8);
  r = run({"inspect", path, "--format", "E9M9"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("E9M9"), std::string::npos);
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

}  // namespace
