// defines: TempDirTest: a GoogleTest fixture with a folder of its own for each test
// (<prefix>-<pid>-<test name> under the system's temporary folder), empty when the test
// starts and removed when it ends, and path_, a run database in it.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <utility>

#include "temp_dir.h"

namespace fp8wb::test {

class TempDirTest : public ::testing::Test {
 protected:
  // `db` is where path_ points inside the folder ("runs.sqlite", "sub/runs.sqlite"); the
  // folder itself is created, any folder below it is not.
  explicit TempDirTest(std::string prefix, std::string db = "runs.sqlite")
      : prefix_(std::move(prefix)), db_(std::move(db)) {}
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           (prefix_ + "-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    remove_tree(dir_.string());
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / db_).string();
  }
  void TearDown() override { remove_tree(dir_.string()); }
  std::filesystem::path dir_;
  std::string path_;

 private:
  std::string prefix_, db_;
};

}  // namespace fp8wb::test
