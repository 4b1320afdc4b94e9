// fp8wb train's inputs, in-process through run_cli(): where the run database may go and
// how a config file is read.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_run.h"
#include "temp_dir.h"

namespace {

using fp8wb::test::Result;
using fp8wb::test::run;

class CliTrainInput : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("fp8wb-cli-input-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fp8wb::test::remove_tree(dir_.string());
    std::filesystem::create_directories(dir_);
    db_ = (dir_ / "runs.sqlite").string();
  }
  void TearDown() override { fp8wb::test::remove_tree(dir_.string()); }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  std::filesystem::path dir_;
  std::string db_;
};

// A --db in a folder that is not there is most likely a mistyped path: refused, naming the
// folder, with nothing made.
TEST_F(CliTrainInput, ADatabaseInAMissingFolderIsRefusedCreatingNothing) {
  const std::filesystem::path missing = dir_ / "missing" / "dir";
  const Result r = run({"train", "--db", (missing / "x.db").string(), "--quiet", "--set",
                        "model=mlp", "--set", "steps=1"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("the folder " + missing.string() + " does not exist"), std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "missing"));

  // A file where the folder should be is said as such.
  const std::string file = write("plain", "x");
  const Result f = run({"train", "--db", file + "/x.db", "--quiet", "--set", "steps=1"});
  EXPECT_EQ(f.rc, 1);
  EXPECT_NE(f.err.find(file + " is not a folder"), std::string::npos) << f.err;
}

}  // namespace
