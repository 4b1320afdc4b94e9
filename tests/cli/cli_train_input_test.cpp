// fp8wb train's inputs, in-process through run_cli(): where the run database may go and
// how a config file is read.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

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

// sweep and runs refuse a --db in a missing folder as train does, with nothing made: they
// made the folders and a new, empty database (runs import even for a source that is not
// there).
TEST_F(CliTrainInput, EveryCommandRefusesADatabaseInAMissingFolder) {
  const std::filesystem::path missing = dir_ / "missing" / "dir";
  const std::string db = (missing / "x.db").string();
  const std::vector<std::vector<std::string>> commands = {
      {"sweep", "--db", db, "--quiet", "--set", "model=mlp", "--set", "steps=1", "--grid",
       "lr=0.01"},
      {"sweep", "--db", db, "--collect", (dir_ / "slurm").string()},
      {"runs", "import", (dir_ / "other.sqlite").string(), "--db", db},
      {"runs", "list", "--db", db},
      {"runs", "show", "1", "--db", db},
      {"runs", "delete", "1", "--yes", "--db", db}};
  for (const auto& args : commands) {
    const Result r = run(args);
    EXPECT_EQ(r.rc, 1) << args[0] << " " << args[1];
    EXPECT_NE(r.err.find("--db " + db + ": the folder " + missing.string() + " does not exist"),
              std::string::npos)
        << args[0] << " " << args[1] << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir_ / "missing")) << args[0] << " " << args[1];
    fp8wb::test::remove_tree((dir_ / "missing").string());
  }
}

// runs import of a source that is not there says so and makes no target database.
TEST_F(CliTrainInput, ImportingAMissingSourceMakesNoDatabase) {
  const std::string source = (dir_ / "no-such.sqlite").string();
  const Result r = run({"runs", "import", source, "--db", db_});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("no run database at " + source), std::string::npos) << r.err;
  for (const char* ext : {"", "-wal", "-shm"}) {
    EXPECT_FALSE(std::filesystem::exists(db_ + ext)) << db_ + ext << " was made";
  }
}

// A local sweep reads and checks its config and grid before it opens the database: a bad
// one leaves no new, empty database (nor its -wal) behind.
TEST_F(CliTrainInput, ABadSweepConfigMakesNoDatabase) {
  const std::string broken = write("broken.json", R"({"model": "mlp", "steps": })");
  const std::string unknown = write("unknown.json", R"({"model": "mlp", "no_such_key": 1})");
  const std::vector<std::vector<std::string>> commands = {
      {"sweep", broken, "--db", db_, "--quiet", "--grid", "lr=0.01"},
      {"sweep", unknown, "--db", db_, "--quiet", "--grid", "lr=0.01"},
      {"sweep", "--db", db_, "--quiet", "--set", "steps=0", "--grid", "lr=0.01"},
      {"sweep", "--db", db_, "--quiet", "--set", "model=mlp", "--grid", "lr=0.01,-1"},
      {"sweep", "--db", db_, "--quiet", "--grid", "no_such_key=1,2"}};
  for (const auto& args : commands) {
    const Result r = run(args);
    EXPECT_EQ(r.rc, 1) << args[1] << " " << args.back() << ": " << r.err;
    EXPECT_FALSE(r.err.empty());
    for (const char* ext : {"", "-wal", "-shm"}) {
      EXPECT_FALSE(std::filesystem::exists(db_ + ext))
          << args[1] << " " << args.back() << ": " << db_ + ext << " was made";
      std::filesystem::remove(db_ + ext);
    }
  }
}

// A key given twice would leave which value counts to the parser: refused, by name, in a
// train's config and a sweep's alike.
TEST_F(CliTrainInput, AConfigKeyGivenTwiceIsRefusedByName) {
  const std::string config = write("twice.json", R"({"model": "mlp", "steps": 5, "steps": 7})");
  Result r = run({"train", config, "--db", db_, "--quiet"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find(config + ": config key 'steps' is given twice"), std::string::npos) << r.err;
  r = run({"sweep", config, "--db", db_, "--quiet", "--grid", "window=1,2"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("key 'steps' is given twice"), std::string::npos) << r.err;

  // In a nested object too, naming the key it lies under.
  const std::string nested = write("nested.json", R"({"formats": {"a": 1, "a": 2}})");
  r = run({"train", nested, "--db", db_, "--quiet"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("key 'a' is given twice in 'formats'"), std::string::npos) << r.err;
}

// A JSON object given to --set is read as a config file is: a key it gives twice is
// refused by name (it was read with the last value, which the error then showed alone).
TEST_F(CliTrainInput, ASetValueGivingAKeyTwiceIsRefusedByName) {
  for (const std::string cmd : {"train", "sweep", "bench"}) {
    for (const std::string value :
         {R"(formats={"a": 1, "a": 2})", R"(name=[{"b": {"a": 1}, "b": 2}])"}) {
      std::vector<std::string> args = {cmd, "--set", value};
      if (cmd != "bench") args.insert(args.end(), {"--db", db_, "--quiet"});
      if (cmd == "sweep") args.insert(args.end(), {"--grid", "window=1,2"});
      const Result r = run(args);
      EXPECT_EQ(r.rc, 1) << cmd << " " << value;
      const std::string key = value[0] == 'f' ? "formats" : "name";
      const std::string twice =
          value[0] == 'f' ? "key 'a' is given twice" : "key 'b' is given twice";
      EXPECT_NE(r.err.find("'" + key + "'"), std::string::npos) << cmd << ": " << r.err;
      EXPECT_NE(r.err.find(twice), std::string::npos) << cmd << ": " << r.err;
      EXPECT_FALSE(std::filesystem::exists(db_)) << cmd << " " << value;
    }
  }
  // Bare words stay strings, JSON values stay values.
  const Result ok = run({"train", "--db", db_, "--quiet", "--set", "model=mlp", "--set", "steps=1",
                         "--set", "name=a b{", "--json"});
  EXPECT_EQ(ok.rc, 0) << ok.err;
}

// Issue #52: `--set steps=1 --set steps=2` silently took the last; it is refused, naming
// both, before any database is made. "margin = 2" (spaces kept by a shell quote) is the
// field margin, not an unknown field 'margin '.
TEST_F(CliTrainInput, AFieldSetTwiceIsRefusedAndSpacesAreTrimmed) {
  for (const std::string cmd : {"train", "sweep"}) {
    std::vector<std::string> args = {cmd,         "--db",  db_,       "--quiet", "--set",
                                     "model=mlp", "--set", "steps=1", "--set",   "steps=2"};
    if (cmd == "sweep") args.insert(args.end(), {"--grid", "window=1,2"});
    const Result r = run(args);
    EXPECT_EQ(r.rc, 1) << cmd;
    EXPECT_NE(r.err.find("config field 'steps': given twice (steps=1, then steps=2)"),
              std::string::npos)
        << cmd << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(db_)) << cmd;
  }
  const Result ok = run({"train", "--db", db_, "--quiet", "--set", "model=mlp", "--set",
                         "steps = 1", "--set", "margin = 2", "--json"});
  EXPECT_EQ(ok.rc, 0) << ok.err;
}

// A whole number too large for an integer field is said to be out of range, with the
// field's range (not "not an integer"), from --set and from a config file, for every
// integer field.
TEST_F(CliTrainInput, AnIntegerOutOfRangeNamesTheRange) {
  Result r = run({"train", "--db", db_, "--quiet", "--set", "batch=1e20"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("config field 'batch': 1e+20 is out of range: must be an integer in "
                       "[1, 65536]"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("expected an integer"), std::string::npos) << r.err;
  const std::string config = write("big.json", R"({"model": "mlp", "steps": 1e20})");
  r = run({"train", config, "--db", db_, "--quiet"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("config field 'steps': 1e+20 is out of range: must be an integer in "
                       "[1, 1000000000]"),
            std::string::npos)
      << r.err;
  const std::vector<std::pair<std::string, std::string>> fields = {
      {"d_model", "[8, 8192]"},
      {"layers", "[1, 256]"},
      {"heads", "[1, 256]"},
      {"context", "[2, 8192]"},
      {"width", "[1, 65536]"},
      {"depth", "[1, 256]"},
      {"features", "[1, 65536]"},
      {"outlier_channels", "[0, 65536]"},
      {"drift_period", "[2, 1000000000]"},
      {"warmup", "[0, 1000000000]"},
      {"margin", "[-64, 64]"},
      {"window", "[1, 65536]"},
      {"stats_interval", "[0, 1000000000]"},
      {"sqnr_interval", "[0, 1000000000]"},
      {"log_interval", "[1, 1000000000]"},
      {"rank_timeout", "[1, 86400]"}};
  for (const auto& [field, range] : fields) {
    for (const std::string value : {"1e20", "-1e20", "3000000000", "18446744073709551615"}) {
      r = run({"train", "--db", db_, "--quiet", "--set", field + "=" + value});
      EXPECT_EQ(r.rc, 1) << field;
      EXPECT_NE(r.err.find("config field '" + field + "': "), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(" is out of range: must be an integer in " + range), std::string::npos)
          << field << "=" << value << ": " << r.err;
    }
  }
  // A fraction is still not an integer.
  r = run({"train", "--db", db_, "--quiet", "--set", "batch=1.5"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("expected an integer, got 1.5"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(db_));
}

// A control character in a run's name (a NUL would cut it short in `runs list`, a tab or
// line break would break its columns) is refused, naming the field, and nothing is run.
TEST_F(CliTrainInput, ControlCharactersInANameAreRefused) {
  const std::string config =
      write("nul.json", R"({"model": "mlp", "steps": 1, "name": "ab\u0000cd"})");
  Result r = run({"train", config, "--db", db_, "--quiet"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("config field 'name': holds a control character (U+0000 at byte 2)"),
            std::string::npos)
      << r.err;
  for (const std::string name : {"tab\there", "line\nbreak", "bell\x07", "del\x7f", "c1\xc2\x85"}) {
    r = run({"train", "--db", db_, "--quiet", "--set", "model=mlp", "--set", "steps=1", "--set",
             "name=" + name});
    EXPECT_EQ(r.rc, 1) << name;
    EXPECT_NE(r.err.find("config field 'name': holds a control character"), std::string::npos)
        << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(db_));
  // A sweep's name names its trials: refused the same way, before anything is stored.
  r = run({"sweep", "--db", db_, "--quiet", "--name",
           "sw\x01"
           "eep",
           "--grid", "window=1,2", "--set", "model=mlp", "--set", "steps=1"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("control character"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(db_));
  // Names of any script stay welcome.
  r = run({"train", "--db", db_, "--quiet", "--set", "model=mlp", "--set", "steps=1", "--set",
           "name=Schrödinger’s run ≥ 2⁻⁹"});
  EXPECT_EQ(r.rc, 0) << r.err;
}

// Text that is not JSON is named by file, line and column, not in the parser's own terms.
TEST_F(CliTrainInput, MalformedConfigNamesFileLineAndColumn) {
  const std::string config = write("bad.json", "{\n  \"steps\": 5,\n  \"window\": x\n}\n");
  const Result r = run({"train", config, "--db", db_, "--quiet"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find(config + ": config is not valid JSON at line 3, column 13"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("json.exception"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("last read"), std::string::npos) << r.err;

  // Text that ends too soon: the line and column past its end.
  const std::string cut = write("cut.json", "{\"steps\": 5,");
  const Result c = run({"train", cut, "--db", db_, "--quiet"});
  EXPECT_EQ(c.rc, 1);
  EXPECT_NE(c.err.find(cut + ": config is not valid JSON at line 1"), std::string::npos) << c.err;
  EXPECT_EQ(c.err.find("json.exception"), std::string::npos) << c.err;
}

}  // namespace
