// fp8wb train / runs: in-process through run_cli(), and the real binary killed with
// SIGKILL or stopped with Ctrl-C (SIGINT) mid-run.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include <vector>
#include "temp_dir.h"

#include "cli_run.h"
#include "fifo.h"
#include "fp8wb/core/run_store.h"

namespace {

using fp8wb::test::Result;
using fp8wb::test::run;

class CliTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("fp8wb-cli-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fp8wb::test::remove_tree(dir_.string());
    std::filesystem::create_directories(dir_);
    db_ = (dir_ / "runs.sqlite").string();
  }
  void TearDown() override { fp8wb::test::remove_tree(dir_.string()); }
  std::filesystem::path dir_;
  std::string db_;
};

TEST_F(CliTrain, TrainListShowExportDelete) {
  const std::string cfg = (dir_ / "mlp.json").string();
  std::ofstream(cfg) << R"({"model": "mlp", "steps": 12, "name": "mlp run", "stats_interval": 4})";
  Result r = run({"train", cfg, "--db", db_, "--set", "lr=0.002", "--quiet", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["status"], "finished");
  EXPECT_EQ(j["steps"], 12);
  const int64_t id = j["run"];

  r = run({"runs", "list", "--db", db_});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("mlp run"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("finished"), std::string::npos) << r.out;

  r = run({"runs", "show", std::to_string(id), "--db", db_});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("\"lr\": 0.002"), std::string::npos) << r.out;  // the config as run

  const std::string csv = (dir_ / "run.csv").string();
  r = run({"runs", "export", std::to_string(id), "--db", db_, "--format", "csv", "-o", csv});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::ifstream in(csv);
  std::string header, line;
  std::getline(in, header);
  EXPECT_EQ(header.rfind("step,loss,ref_loss,loss_gap", 0), 0u) << header;
  int rows = 0;
  while (std::getline(in, line)) ++rows;
  EXPECT_EQ(rows, 12);

  r = run({"runs", "export", std::to_string(id), "--db", db_, "--format", "json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto e = nlohmann::json::parse(r.out);
  EXPECT_EQ(e["series"]["loss"].size(), 12u);
  EXPECT_EQ(e["run"]["config"]["model"], "mlp");
  EXPECT_EQ(e["tensor_stats"].size(), 3u * 3u * 3u);  // 3 layers x 3 roles x steps 0, 4, 8

  r = run({"runs", "delete", std::to_string(id), "--db", db_});
  EXPECT_EQ(r.rc, 1);  // needs --yes
  r = run({"runs", "delete", std::to_string(id), "--db", db_, "--yes"});
  ASSERT_EQ(r.rc, 0) << r.err;
  r = run({"runs", "show", std::to_string(id), "--db", db_});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("no run"), std::string::npos) << r.err;
}

// The export of the tensor statistics, JSON and CSV, against a row written with every
// field of kTensorStatFields its own value.
TEST_F(CliTrain, ExportHoldsEveryStatisticAsWritten) {
  using fp8wb::TensorStatField;
  fp8wb::TensorMetrics t;
  t.step = 4;
  t.layer = "fc1";
  t.role = fp8wb::Role::GradOutput;
  int i = 0;
  for (const TensorStatField& f : fp8wb::kTensorStatFields) {
    ++i;
    switch (f.type) {
      case TensorStatField::Type::Count: t.raw.*f.count = 1000u + static_cast<uint64_t>(i); break;
      case TensorStatField::Type::Sum: t.raw.*f.sum = 0.25 + i; break;
      case TensorStatField::Type::Value: t.*f.value = 0.5f + static_cast<float>(i); break;
      case TensorStatField::Type::Histogram: t.raw.hist[10] = 5; break;
    }
  }
  int64_t id = 0;
  {
    auto s = fp8wb::RunStore::open(db_);
    id = s->create_run("stats", "train", "{}", "cpu");
    fp8wb::MetricBatch b;
    b.run_id = id;
    b.tensors.push_back(t);
    b.final = true;
    b.status = fp8wb::RunStatus::Finished;
    s->write(b);
    s->flush();
  }
  Result r = run({"runs", "export", std::to_string(id), "--db", db_, "--format", "json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto e = nlohmann::json::parse(r.out);
  ASSERT_EQ(e["tensor_stats"].size(), 1u);
  const auto& row = e["tensor_stats"][0];
  EXPECT_EQ(row["step"], 4);
  EXPECT_EQ(row["layer"], "fc1");
  EXPECT_EQ(row["role"], "grad_output");
  for (const TensorStatField& f : fp8wb::kTensorStatFields) {
    if (f.type == TensorStatField::Type::Histogram) continue;
    ASSERT_TRUE(row.contains(f.name)) << f.name;
    EXPECT_EQ(row[f.name].get<double>(), fp8wb::stat_value(t, f)) << f.name;
  }

  r = run({"runs", "export", std::to_string(id), "--db", db_, "--format", "stats-csv"});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::istringstream in(r.out);
  std::string header, line;
  ASSERT_TRUE(std::getline(in, header));
  ASSERT_TRUE(std::getline(in, line));
  std::vector<std::string> names, cells;
  for (auto [text, out] : {std::pair{&header, &names}, std::pair{&line, &cells}}) {
    std::stringstream ss(*text);
    std::string cell;
    while (std::getline(ss, cell, ',')) out->push_back(cell);
  }
  ASSERT_EQ(names.size(), cells.size()) << header << "\n" << line;
  std::map<std::string, std::string> byname;
  for (size_t k = 0; k < names.size(); ++k) byname[names[k]] = cells[k];
  EXPECT_EQ(byname["layer"], "fc1");
  for (const TensorStatField& f : fp8wb::kTensorStatFields) {
    if (f.type == TensorStatField::Type::Histogram) continue;
    ASSERT_TRUE(byname.count(f.name)) << f.name;
    EXPECT_EQ(std::stod(byname[f.name]), fp8wb::stat_value(t, f)) << f.name;
  }
  EXPECT_DOUBLE_EQ(std::stod(byname["underflow_pct"]), fp8wb::underflow_pct(t.raw));
}

TEST_F(CliTrain, BadInputGivesClearErrors) {
  Result r = run({"train", "--db", db_, "--set", "window=-4"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("window"), std::string::npos) << r.err;
  r = run({"train", (dir_ / "missing.json").string(), "--db", db_});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("missing.json"), std::string::npos) << r.err;
  r = run({"train", "--db", db_, "--device", "cuda:9"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("cuda:9"), std::string::npos) << r.err;
  r = run({"runs", "export", "1", "--format", "xml", "--db", db_});
  EXPECT_NE(r.rc, 0);
}

TEST_F(CliTrain, AConfigThatIsAFifoIsRefusedNotWaitedOn) {
  fp8wb::test::FifoGuard fifo((dir_ / "config.json").string());
  ASSERT_TRUE(fifo.made());
  const Result r = run({"train", fifo.path(), "--db", db_});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find(fifo.path() + " is a FIFO"), std::string::npos) << r.err;
  EXPECT_FALSE(fifo.reader_blocked()) << "the config reader blocked in open()";
}

TEST_F(CliTrain, RunsExportWritesAllOrNothing) {
  const std::string cfg = (dir_ / "mlp.json").string();
  std::ofstream(cfg) << R"({"model": "mlp", "steps": 60, "stats_interval": 1})";
  Result r = run({"train", cfg, "--db", db_, "--quiet", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string id = std::to_string(nlohmann::json::parse(r.out)["run"].get<int64_t>());
  const std::string out = (dir_ / "run.json").string();
  std::ofstream(out) << "old";
  // A full disk (here: a 64 KB file size limit; the export is larger) keeps the old file.
  struct rlimit old {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 64 << 10;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  r = run({"runs", "export", id, "--db", db_, "--format", "json", "-o", out});
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("writing " + out + " failed: File too large"), std::string::npos) << r.err;
  std::ifstream in(out);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(content == "old") << "a truncated export (" << content.size()
                                << " bytes) replaced the file";
  for (const auto& e : std::filesystem::directory_iterator(dir_))
    EXPECT_EQ(e.path().string().find(".part"), std::string::npos) << e.path();
  // A folder is not a file to replace.
  r = run({"runs", "export", id, "--db", db_, "-o", dir_.string()});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("is a folder"), std::string::npos) << r.err;
  r = run({"runs", "export", id, "--db", db_, "--format", "json", "-o", out});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(out))["series"]["loss"].size(), 60u);
}

// `runs export -o` naming the run database itself, by whatever path, is refused with both
// paths named: the export would have replaced every run.
TEST_F(CliTrain, RunsExportNeverReplacesTheDatabase) {
  {
    auto s = fp8wb::RunStore::open(db_);
    s->create_run("kept", "train", "{}", "cpu");
  }
  std::filesystem::create_symlink(db_, dir_ / "link.sqlite");
  std::filesystem::create_hard_link(db_, dir_ / "hard.sqlite");
  for (const std::string& out :
       {db_, (dir_ / "." / "runs.sqlite").string(), (dir_ / "link.sqlite").string(),
        (dir_ / "hard.sqlite").string()}) {
    for (const char* format : {"csv", "json", "stats-csv"}) {
      const Result r = run({"runs", "export", "1", "--db", db_, "--format", format, "-o", out});
      EXPECT_EQ(r.rc, 1) << out;
      EXPECT_NE(r.err.find("-o " + out + " is the same file as the run database " + db_),
                std::string::npos)
          << r.err;
      EXPECT_EQ(r.out.find("wrote"), std::string::npos) << r.out;
      std::ifstream in(db_, std::ios::binary);
      std::string head(15, '\0');
      in.read(head.data(), 15);
      EXPECT_EQ(head, "SQLite format 3") << out << ": the database was replaced";
      const Result l = run({"runs", "list", "--db", db_, "--json"});
      ASSERT_EQ(l.rc, 0) << l.err;
      EXPECT_EQ(nlohmann::json::parse(l.out).size(), 1u);
    }
  }
  EXPECT_TRUE(std::filesystem::is_symlink(dir_ / "link.sqlite"));
  // Another file is written as before.
  const Result r = run({"runs", "export", "1", "--db", db_, "-o", (dir_ / "run.csv").string()});
  EXPECT_EQ(r.rc, 0) << r.err;
}

// `train --save-weights` naming the run database or the config file, by whatever path, is
// refused before any step, with both paths named.
TEST_F(CliTrain, SaveWeightsNeverReplacesAnInput) {
  {
    auto s = fp8wb::RunStore::open(db_);
    s->create_run("kept", "train", "{}", "cpu");
  }
  const std::string cfg = (dir_ / "mlp.json").string();
  const std::string cfg_text = R"({"model": "mlp", "steps": 2})";
  std::ofstream(cfg) << cfg_text;
  std::filesystem::create_symlink(db_, dir_ / "link.sqlite");
  struct Case {
    std::string out, named;
  };
  for (const Case& c :
       std::vector<Case>{{db_, "the run database " + db_},
                         {(dir_ / "link.sqlite").string(), "the run database " + db_},
                         {(dir_ / "." / "mlp.json").string(), "the config file " + cfg}}) {
    const Result r = run({"train", cfg, "--db", db_, "--quiet", "--save-weights", c.out});
    EXPECT_EQ(r.rc, 1) << c.out;
    EXPECT_NE(r.err.find("--save-weights " + c.out + " is the same file as " + c.named),
              std::string::npos)
        << r.err;
    std::ifstream in(db_, std::ios::binary);
    std::string head(15, '\0');
    in.read(head.data(), 15);
    EXPECT_EQ(head, "SQLite format 3") << c.out << ": the database was replaced";
    std::ifstream cf(cfg);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(cf), {}), cfg_text);
    const Result l = run({"runs", "list", "--db", db_, "--json"});
    ASSERT_EQ(l.rc, 0) << l.err;
    EXPECT_EQ(nlohmann::json::parse(l.out).size(), 1u) << "a run was started";
  }
}

// `runs list` shows every name whole (two sweep trials differing only at the end stay
// apart), and the columns after the name stay aligned, counted in characters.
TEST_F(CliTrain, RunsListShowsWholeNamesAligned) {
  const std::vector<std::string> names{"sweep: margin=0 window=1", "sweep: margin=0 window=16",
                                       "short", "Schrödinger’s run: µ-scale ≥ 2⁻⁹ and a long tail"};
  {
    auto s = fp8wb::RunStore::open(db_);
    for (const auto& n : names) s->create_run(n, "train", "{}", "cpu");
  }
  const Result r = run({"runs", "list", "--db", db_});
  ASSERT_EQ(r.rc, 0) << r.err;
  auto chars = [](const std::string& s) {
    size_t n = 0;
    for (char c : s) n += (c & 0xC0) != 0x80;
    return n;
  };
  std::istringstream lines(r.out);
  std::string header;
  std::getline(lines, header);
  const size_t status_at = chars(header.substr(0, header.find("status")));
  for (const auto& n : names) {
    // The line of this run: its name whole, then spaces, then the status column.
    std::string line, found;
    std::istringstream again(r.out);
    while (std::getline(again, line)) {
      const size_t at = line.find("  " + n + " ");
      if (at == std::string::npos) continue;
      const size_t next = line.find_first_not_of(' ', at + 2 + n.size());
      EXPECT_EQ(chars(line.substr(0, next)), status_at) << "misaligned:\n" << r.out;
      found = line;
    }
    EXPECT_FALSE(found.empty()) << "'" << n << "' not shown whole:\n" << r.out;
  }
}

// A damaged page met mid-run (SQLITE_CORRUPT on a write) ends the run as failed, as a
// full disk does: the process reports and exits.
TEST_F(CliTrain, ADamagedDatabaseEndsTheRunFailed) {
  {
    auto s = fp8wb::RunStore::open(db_);
    s->create_run("earlier", "train", "{}", "cpu");
  }
  {
    // Pages 1-2 (the schema, the runs table) stay; every page after them is garbage.
    std::fstream f(db_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const std::streamoff size = f.tellg();
    ASSERT_GT(size, 3 * 4096);
    f.seekp(2 * 4096);
    f << std::string(static_cast<size_t>(size - 2 * 4096), '\xA5');
  }
  const Result r = run({"train", "--db", db_, "--json", "--set", "model=mlp", "--set", "steps=50"});
  EXPECT_EQ(r.rc, 1) << r.err;
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(r.out)) << r.out << r.err;
  EXPECT_EQ(j["status"], "failed");
  EXPECT_NE(j["message"].get<std::string>().find("damaged"), std::string::npos) << r.out;
}

// Input built to take the process down is refused with the field's name.
TEST_F(CliTrain, DeeplyNestedInputIsRefusedNotACrash) {
  Result r = run({"train", "--db", db_, "--set",
                  "steps=" + std::string(65000, '[') + std::string(65000, ']')});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("'steps'"), std::string::npos) << r.err.substr(0, 300);
  EXPECT_LT(r.err.size(), 300u);
  const std::string cfg = (dir_ / "deep.json").string();
  std::ofstream(cfg) << R"({"steps": )" << std::string(70000, '[') << std::string(70000, ']')
                     << "}";
  r = run({"train", cfg, "--db", db_});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("nests deeper"), std::string::npos) << r.err.substr(0, 300);
  std::ofstream(cfg) << R"({"lr": 1e400})";
  r = run({"train", cfg, "--db", db_});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("'lr'"), std::string::npos) << r.err;
  r = run({"train", "/dev/zero", "--db", db_});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("regular file"), std::string::npos) << r.err;
}

TEST_F(CliTrain, HugeSizesAreRefusedByFieldWithoutAStackTrace) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"window=16777216"}, "'window'"},
      {{"layers=2147483647"}, "'layers'"},
      {{"d_model=1000000"}, "'d_model'"},
      {{"batch=60000", "context=8000"}, "'batch'"},
  };
  for (const auto& [sets, field] : cases) {
    std::vector<std::string> args = {"train", "--db", db_, "-q"};
    for (const auto& o : sets) args.insert(args.end(), {"--set", o});
    const Result r = run(args);
    EXPECT_EQ(r.rc, 1) << field;
    EXPECT_NE(r.err.find(field), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("Exception raised from"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(db_));  // refused before the database is opened
}

// A full disk mid-run: the run ends failed naming it, its committed steps stay, the
// process reports and exits (it was "terminate called ... StoreError", signal 6).
TEST_F(CliTrain, AFullDiskEndsTheRunFailed) {
  setenv("FP8WB_STORE_MAX_PAGES", "400", 1);
  const Result r = run({"train", "--db", db_, "--json", "--set", "model=mlp", "--set",
                        "steps=100000", "--set", "stats_interval=1"});
  unsetenv("FP8WB_STORE_MAX_PAGES");
  EXPECT_EQ(r.rc, 1);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["status"], "failed");
  EXPECT_NE(j["message"].get<std::string>().find("disk full"), std::string::npos) << r.out;
  auto s = fp8wb::RunStore::open_read_only(db_);
  const auto run1 = s->run(j["run"].get<int64_t>());
  ASSERT_TRUE(run1.has_value());
  EXPECT_EQ(run1->status, fp8wb::RunStatus::Failed);
  EXPECT_GT(s->series(run1->id, "loss").size(), 0u);
  EXPECT_EQ(s->integrity_check(), "ok");
}

// --json is JSON whatever the run's name, path or message holds; no step: null, not 0.
TEST_F(CliTrain, JsonOutputIsValidJson) {
  const std::string weights = (dir_ / "no \"such\\ dir" / "w.safetensors").string();
  const Result r = run({"train", "--db", db_, "--json", "--set", "model=mlp", "--set", "steps=3",
                        "--set", "name=a \"quoted\\ name\t", "--save-weights", weights});
  EXPECT_EQ(r.rc, 1) << r.err;
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(r.out)) << r.out;
  EXPECT_EQ(j["status"], "failed");
  EXPECT_NE(j["message"].get<std::string>().find("such"), std::string::npos) << r.out;
  EXPECT_TRUE(j["loss"].is_null()) << r.out;  // the path is checked before the first step
  Result l = run({"runs", "list", "--db", db_, "--json"});
  ASSERT_EQ(l.rc, 0) << l.err;
  const auto runs = nlohmann::json::parse(l.out);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0]["name"], "a \"quoted\\ name\t");
  l = run({"runs", "show", "1", "--db", db_, "--json"});
  ASSERT_EQ(l.rc, 0) << l.err;
  EXPECT_NO_THROW(nlohmann::json::parse(l.out)) << l.out.substr(0, 500);
}

TEST_F(CliTrain, ReadingCommandsCreateNothing) {
  const std::string missing = (dir_ / "missing" / "dir" / "x.sqlite").string();
  for (const char* action : {"list", "show", "export", "delete"}) {
    const Result r = run({"runs", action, "1", "--db", missing, "-y"});
    EXPECT_EQ(r.rc, 1) << action;
    EXPECT_NE(r.err.find("no run database"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "missing"));
}

// Another user reads a 644 database in a folder it cannot write: list, show and export
// work and leave no -wal or -shm (they failed: "attempt to write a readonly database").
TEST_F(CliTrain, AnotherUserReadsTheDatabase) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run as another user";
  ASSERT_EQ(run({"train", "--db", db_, "-q", "--set", "model=mlp", "--set", "steps=3"}).rc, 0);
  for (std::vector<std::string> args : {std::vector<std::string>{"runs", "list"},
                                        {"runs", "show", "1"},
                                        {"runs", "export", "1", "--format", "json"}}) {
    args.insert(args.begin(), FP8WB_BINARY);
    args.insert(args.end(), {"--db", db_});
    const pid_t pid = fork();
    if (pid == 0) {
      if (setgid(65534) != 0 || setuid(65534) != 0) _exit(99);
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      const int devnull = ::open("/dev/null", O_WRONLY);
      dup2(devnull, STDOUT_FILENO);
      execv(FP8WB_BINARY, argv.data());
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status)) << args[2];
    EXPECT_EQ(WEXITSTATUS(status), 0) << args[2];
  }
  EXPECT_FALSE(std::filesystem::exists(db_ + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(db_ + "-shm"));
}

// A loss that blows up without a NaN (lr = 10): diverged, exit code 2.
TEST_F(CliTrain, ALossBlowUpIsDiverged) {
  const Result r = run({"train", "--db", db_, "-q", "--set", "model=mlp", "--set", "lr=10", "--set",
                        "warmup=0", "--set", "grad_clip=0", "--set", "steps=300", "--set",
                        "reference=false", "--set", "stats_interval=0"});
  EXPECT_EQ(r.rc, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("diverged"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("blew up"), std::string::npos) << r.out;
}

// The binary itself, as a user's shell runs it: stdout to /dev/null, stderr to
// `stderr_fd` (else /dev/null too).
pid_t spawn(const std::vector<std::string>& args, int stderr_fd = -1) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const int devnull = ::open("/dev/null", O_WRONLY);
    dup2(devnull, STDOUT_FILENO);
    dup2(stderr_fd >= 0 ? stderr_fd : devnull, STDERR_FILENO);
    execv(FP8WB_BINARY, argv.data());
    _exit(127);
  }
  return pid;
}

// Waits until the run has at least `steps` committed steps.
int64_t wait_for_steps(const std::string& db, int64_t steps) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      auto s = fp8wb::RunStore::open_read_only(db);
      const auto runs = s->runs();
      if (!runs.empty() && runs[0].last_step + 1 >= steps) return runs[0].last_step + 1;
    } catch (const std::exception&) {
      // not created yet
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

// Waits (at most 30 s) until the database holds at least `runs` runs.
void wait_for_run(const std::string& db, int64_t runs) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      if (static_cast<int64_t>(fp8wb::RunStore::open_read_only(db)->runs().size()) >= runs) return;
    } catch (const std::exception&) {
      // not created yet
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Until the database holds `runs` runs and the last of them a committed step.
void wait_for_first_step(const std::string& db, int64_t runs) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      const auto all = fp8wb::RunStore::open_read_only(db)->runs();
      if (static_cast<int64_t>(all.size()) >= runs &&
          all[static_cast<size_t>(runs - 1)].last_step >= 0) {
        return;
      }
    } catch (const std::exception&) {
      // not created yet
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

TEST_F(CliTrain, SigkillMidRunLeavesASoundDatabase) {
  const pid_t pid = spawn({FP8WB_BINARY, "train", "--db", db_, "--quiet", "--set", "model=mlp",
                           "--set", "steps=1000000", "--set", "reference=false"});
  ASSERT_GT(pid, 0);
  ASSERT_GE(wait_for_steps(db_, 40), 40);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));

  {
    auto ro = fp8wb::RunStore::open_read_only(db_);
    EXPECT_EQ(ro->integrity_check(), "ok");
    const auto loss = ro->series(1, "loss");
    ASSERT_GE(loss.size(), 40u);
    for (size_t i = 0; i < loss.size(); ++i) EXPECT_EQ(loss[i].step, static_cast<int64_t>(i));
  }
  auto s = fp8wb::RunStore::open(db_);
  EXPECT_EQ(s->run(1)->status, fp8wb::RunStatus::Interrupted);
}

// SIGKILL at random points, again and again, on one database: while it is created, while
// a run starts, between and inside commits. After every kill the file is sound, the
// killed run reads as interrupted, and every step committed so far is still there: a
// run's committed steps never go down and have no holes. The delays are seeded: a failure
// repeats.
TEST_F(CliTrain, RepeatedSigkillAtRandomPointsLosesNoCommittedStep) {
  std::mt19937 rng(20261130);
  std::uniform_int_distribution<int> delay_ms(50, 1500);
  std::map<int64_t, int64_t> committed;  // run id -> last committed step seen
  int kills_after_a_commit = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 15; ++i) {
    SCOPED_TRACE("kill " + std::to_string(i + 1));
    const pid_t pid = spawn({FP8WB_BINARY, "train", "--db", db_, "--quiet", "--set", "model=mlp",
                             "--set", "steps=1000000", "--set", "reference=false"});
    ASSERT_GT(pid, 0);
    // Every other kill counts its delay from when the new run exists, and every fourth
    // from its first committed step, so that kills land mid-training also where start-up
    // is slow (a sanitizer build, a loaded machine); the others from the start, so that
    // some land while the file or the run is being created.
    const int64_t next_run = static_cast<int64_t>(committed.size()) + 1;
    if (i % 4 == 3) {
      wait_for_first_step(db_, next_run);
    } else if (i % 2 == 1) {
      wait_for_run(db_, next_run);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "exited on its own with " << WEXITSTATUS(status);

    if (!std::filesystem::exists(db_)) continue;  // killed before it created the file
    std::unique_ptr<fp8wb::RunStore> ro;
    try {
      ro = fp8wb::RunStore::open_read_only(db_);
    } catch (const fp8wb::StoreError& e) {
      // Only while nothing was ever committed (killed while creating the schema).
      ASSERT_TRUE(committed.empty()) << e.what();
      continue;
    }
    ASSERT_EQ(ro->integrity_check(), "ok");
    const auto runs = ro->runs();
    ASSERT_GE(runs.size(), committed.size());
    for (const auto& r : runs) {
      SCOPED_TRACE("run " + std::to_string(r.id));
      EXPECT_EQ(r.status, fp8wb::RunStatus::Interrupted);
      EXPECT_FALSE(r.live);
      const auto seen = committed.find(r.id);
      if (seen != committed.end()) {
        EXPECT_GE(r.last_step, seen->second);
      }
      const auto loss = ro->series(r.id, "loss");
      ASSERT_EQ(static_cast<int64_t>(loss.size()), r.last_step + 1);
      for (size_t k = 0; k < loss.size(); ++k) ASSERT_EQ(loss[k].step, static_cast<int64_t>(k));
      if (r.id == runs.back().id && r.last_step >= 0 && seen == committed.end()) {
        ++kills_after_a_commit;
      }
      committed[r.id] = r.last_step;
    }
  }
  // Some kills must land mid-training, or the loop tested only start-up.
  EXPECT_GT(kills_after_a_commit, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
  // And the next writer opens it and marks what the killed ones left.
  auto s = fp8wb::RunStore::open(db_);
  for (const auto& r : s->runs()) EXPECT_EQ(r.status, fp8wb::RunStatus::Interrupted);
}

// The real binary's progress, its error output a file and then a terminal (a
// pseudo-terminal): into a file plain lines, no carriage return or escape sequence, a
// line for each tenth of the run at most and one for the last step; on a terminal the
// bar, redrawn in place.
TEST_F(CliTrain, ProgressIsABarOnlyOnATerminal) {
  const std::vector<std::string> args = {FP8WB_BINARY, "train",          "--db",  db_,
                                         "--set",      "model=mlp",      "--set", "steps=40",
                                         "--set",      "reference=false"};
  // Runs the binary with stderr on `fd`, reading `master` (a pty's, or -1) as it runs.
  auto run_with_stderr = [&](int fd, int master) {
    const pid_t pid = spawn(args, fd);
    std::string seen;
    int status = 0;
    for (;;) {
      if (master >= 0) {
        pollfd p{master, POLLIN, 0};
        if (poll(&p, 1, 100) > 0) {
          char buf[4096];
          const ssize_t n = read(master, buf, sizeof buf);
          if (n > 0) seen.append(buf, static_cast<size_t>(n));
          continue;
        }
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (waitpid(pid, &status, WNOHANG) == pid) break;
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return seen;
  };

  const std::string log = (dir_ / "err.log").string();
  {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    run_with_stderr(fd, -1);
    ::close(fd);
  }
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.find('\r'), std::string::npos) << text;
  EXPECT_EQ(text.find('\033'), std::string::npos) << text;
  std::istringstream lines(text);
  std::string line, last;
  int step_lines = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("step ", 0) != 0) continue;
    ++step_lines;
    last = line;
  }
  EXPECT_GE(step_lines, 2) << text;
  EXPECT_LE(step_lines, 12) << text;  // the first step, each tenth, the last (and 30 s ticks)
  EXPECT_EQ(last.rfind("step 40/40 loss ", 0), 0u) << text;

  int master = -1, slave = -1;
  ASSERT_EQ(openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  std::filesystem::remove(db_);
  const std::string tty = run_with_stderr(slave, master);
  ::close(slave);
  ::close(master);
  EXPECT_NE(tty.find("\r["), std::string::npos) << tty;
  EXPECT_NE(tty.find("] 40/40 loss "), std::string::npos) << tty;
}

// The progress gives an ETA only once 3 steps are done: one step's pace (its warm-up
// in it) says little. A 5-step run writes a line at every step.
TEST_F(CliTrain, ProgressShowsAnEtaFromTheThirdStep) {
  const Result r = run(
      {"train", "--db", db_, "--set", "model=mlp", "--set", "steps=5", "--set", "reference=false"});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::map<int, std::string> at;  // the progress line of each step
  std::istringstream lines(r.err);
  std::string line;
  while (std::getline(lines, line)) {
    int step = 0;
    if (std::sscanf(line.c_str(), "step %d/5 ", &step) == 1) at[step] = line;
  }
  ASSERT_EQ(at.size(), 5u) << r.err;
  for (int step = 1; step <= 5; ++step) {
    const bool eta = at[step].find(" ETA ") != std::string::npos;
    EXPECT_EQ(eta, step >= 3) << at[step];
  }
  EXPECT_EQ(r.err.find("--:--"), std::string::npos) << r.err;
}

TEST_F(CliTrain, CtrlCStopsCleanlyAndKeepsTheRun) {
  const pid_t pid = spawn({FP8WB_BINARY, "train", "--db", db_, "--set", "model=mlp", "--set",
                           "steps=1000000", "--set", "reference=false"});
  ASSERT_GT(pid, 0);
  ASSERT_GE(wait_for_steps(db_, 10), 10);
  ASSERT_EQ(kill(pid, SIGINT), 0);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  auto s = fp8wb::RunStore::open_read_only(db_);
  const auto r = s->run(1);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, fp8wb::RunStatus::Stopped);
  EXPECT_EQ(static_cast<size_t>(r->last_step + 1), s->series(1, "loss").size());
}

// SIGTERM and SIGHUP (a logout, a job scheduler) stop a run as Ctrl-C does.
TEST_F(CliTrain, SigtermAndSighupStopLikeCtrlC) {
  int n = 0;
  for (const int sig : {SIGTERM, SIGHUP}) {
    const std::string db = (dir_ / ("sig" + std::to_string(++n) + ".sqlite")).string();
    const pid_t pid = spawn({FP8WB_BINARY, "train", "--db", db, "--set", "model=mlp", "--set",
                             "steps=1000000", "--set", "reference=false"});
    ASSERT_GT(pid, 0);
    ASSERT_GE(wait_for_steps(db, 10), 10);
    ASSERT_EQ(kill(pid, sig), 0);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status)) << "signal " << sig;
    EXPECT_EQ(WEXITSTATUS(status), 0);
    auto s = fp8wb::RunStore::open_read_only(db);
    EXPECT_EQ(s->run(1)->status, fp8wb::RunStatus::Stopped);
  }
}

// Processes creating one new database at once all succeed (it raced: "table runs already
// exists", "database is locked").
TEST_F(CliTrain, ConcurrentTrainsOnANewDatabase) {
  std::vector<pid_t> pids;
  for (int i = 0; i < 8; ++i) {
    pids.push_back(spawn({FP8WB_BINARY, "train", "--db", db_, "-q", "--set", "model=mlp", "--set",
                          "steps=2", "--set", "reference=false", "--set", "width=8", "--set",
                          "features=8", "--set", "outlier_channels=1"}));
  }
  for (const pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  auto s = fp8wb::RunStore::open_read_only(db_);
  EXPECT_EQ(s->runs().size(), 8u);
}

// Where the final weights go is checked before the first step, not after the last.
TEST_F(CliTrain, AnUnwritableWeightsPathFailsBeforeTraining) {
  const std::string missing = (dir_ / "no" / "such" / "w.safetensors").string();
  Result r = run({"train", "--db", db_, "--quiet", "--set", "steps=50", "--save-weights", missing});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  r = run({"train", "--db", db_, "--quiet", "--set", "steps=50", "--save-weights", dir_.string()});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("not a regular file"), std::string::npos) << r.err;
  auto s = fp8wb::RunStore::open_read_only(db_);
  for (const auto& run : s->runs()) EXPECT_EQ(run.last_step, -1) << "run " << run.id << " trained";
}

}  // namespace
