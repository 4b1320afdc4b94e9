// fp8wb train / runs: in-process through run_cli() (the real binary killed or stopped
// mid-run: cli_train_process_test.cpp).
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
#include "fp8wb/core/config/run_config_fields.h"
#include "fp8wb/core/store/run_store.h"

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
  // An earlier export is replaced; a file that is none (a checkpoint) is kept and named.
  r = run({"runs", "export", std::to_string(id), "--db", db_, "--format", "json", "-o", csv});
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string ckpt = (dir_ / "model.safetensors").string();
  const std::string ckpt_bytes("\x10\0\0\0\0\0\0\0{\"__metadata__\":{}}", 24);
  { std::ofstream(ckpt, std::ios::binary) << ckpt_bytes; }
  r = run({"runs", "export", std::to_string(id), "--db", db_, "--format", "csv", "-o", ckpt});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find(ckpt + " exists and is not an export of a run"), std::string::npos) << r.err;
  {
    std::ifstream k(ckpt, std::ios::binary);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(k), {}), ckpt_bytes);
  }

  r = run({"runs", "export", std::to_string(id), "--db", db_, "--format", "json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto e = nlohmann::json::parse(r.out);
  EXPECT_EQ(e["series"]["loss"].size(), 12u);
  EXPECT_EQ(e["run"]["config"]["model"], "mlp");
  // 3 layers x 3 roles x steps 0, 4, 8 and the last, 11
  EXPECT_EQ(e["tensor_stats"].size(), 3u * 3u * 4u);

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
    id = s->create_run("stats", fp8wb::RunKind::Train, "{}", "cpu");
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

// The help lists every field of the config's table with what it takes (a field added to
// the table is there): its bounds, its names, or true|false.
TEST_F(CliTrain, HelpListsEveryFieldWithItsBounds) {
  const Result r = run({"train", "--help"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string fields = r.out.substr(r.out.find("Fields"));
  for (const fp8wb::RunConfigField& f : fp8wb::run_config_fields()) {
    std::string item(f.key);
    if (!f.names.empty()) {
      item += " (" + std::string(f.names.front());
    } else if (f.type == fp8wb::FieldType::Boolean) {
      item += " (true|false)";
    } else if (!fp8wb::field_bounds_text(f).empty()) {
      item += " " + fp8wb::field_bounds_text(f);
    }
    EXPECT_TRUE(fields.find(": " + item) != std::string::npos ||
                fields.find("; " + item) != std::string::npos)
        << item << " not in\n"
        << fields;
  }
  EXPECT_NE(fields.find("margin [-64, 64]"), std::string::npos) << fields;
  EXPECT_NE(fields.find("lr (0, 10]"), std::string::npos) << fields;
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
  const std::string old_export = R"({"old": "an earlier export"})";
  std::ofstream(out) << old_export;
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
  EXPECT_TRUE(content == old_export)
      << "a truncated export (" << content.size() << " bytes) replaced the file";
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
    s->create_run("kept", fp8wb::RunKind::Train, "{}", "cpu");
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
    s->create_run("kept", fp8wb::RunKind::Train, "{}", "cpu");
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

// `runs export -o` and `train --save-weights` naming another SQLite database than the
// one given (or one of its -wal files) are refused with it named: the export or weights
// would have destroyed its runs.
TEST_F(CliTrain, ExportsAndWeightsNeverDestroyAnotherDatabase) {
  fp8wb::RunStore::open(db_)->create_run("here", fp8wb::RunKind::Train, "{}", "cpu");
  const std::string other = (dir_ / "other.sqlite").string();
  fp8wb::RunStore::open(other)->create_run("kept", fp8wb::RunKind::Train, "{}", "cpu");
  for (const std::string& out : {other, other + "-wal"}) {
    const std::string said =
        out == other ? " is an SQLite database" : " belongs to the SQLite database " + other;
    const Result e = run({"runs", "export", "1", "--db", db_, "-o", out});
    EXPECT_EQ(e.rc, 1) << out;
    EXPECT_NE(e.err.find("-o " + out + said), std::string::npos) << e.err;
    const Result t = run({"train", "--db", db_, "--quiet", "--set", "model=mlp", "--set", "steps=2",
                          "--save-weights", out});
    EXPECT_EQ(t.rc, 1) << out;
    EXPECT_NE(t.err.find("--save-weights " + out + said), std::string::npos) << t.err;
    const Result l = run({"runs", "list", "--db", other, "--json"});
    ASSERT_EQ(l.rc, 0) << l.err;
    EXPECT_EQ(nlohmann::json::parse(l.out).size(), 1u) << out << ": the database was replaced";
  }
  const Result l = run({"runs", "list", "--db", db_, "--json"});
  ASSERT_EQ(l.rc, 0) << l.err;
  EXPECT_EQ(nlohmann::json::parse(l.out).size(), 1u) << "a run was started";
}

// The final weights never replace a file that is not a safetensors file (a text file,
// say): refused before the run, by --save-weights and by the config's `weights` alike, the
// file kept and no run started. A safetensors file there is replaced. A sweep, whose trials
// would write one file each over the last, takes no `weights`; inspect --export likewise
// keeps a file that is not a safetensors file.
TEST_F(CliTrain, WeightsReplaceNothingButASafetensorsFile) {
  const std::string notes = (dir_ / "notes.txt").string();
  { std::ofstream(notes) << "precious\n"; }
  const std::vector<std::string> base{"train", "--db",           db_,     "--quiet",
                                      "--set", "model=mlp",      "--set", "steps=2",
                                      "--set", "reference=false"};
  for (const std::vector<std::string>& how :
       {std::vector<std::string>{"--save-weights", notes}, {"--set", "weights=" + notes}}) {
    std::vector<std::string> args = base;
    args.insert(args.end(), how.begin(), how.end());
    const Result t = run(args);
    EXPECT_EQ(t.rc, 1) << how[0];
    // Named as given: the option, or the config's field (by --set here).
    const std::string given =
        how[0] == "--save-weights" ? "--save-weights " : "config field 'weights': ";
    EXPECT_NE(t.err.find(given + notes + " exists and is not a safetensors file"),
              std::string::npos)
        << t.err;
    if (how[0] != "--save-weights") EXPECT_EQ(t.err.find("--save-weights"), std::string::npos);
  }
  auto text = [](const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  EXPECT_TRUE(text(notes) == "precious\n") << notes << " was replaced";
  EXPECT_FALSE(std::filesystem::exists(db_)) << "a run was started";

  const std::string weights = (dir_ / "w.safetensors").string();
  for (int i = 0; i < 2; ++i) {  // the second run replaces the first's weights
    std::vector<std::string> args = base;
    args.insert(args.end(), {"--save-weights", weights});
    const Result t = run(args);
    ASSERT_EQ(t.rc, 0) << t.err;
  }
  const Result show = run({"inspect", weights, "--json"});
  EXPECT_EQ(show.rc, 0) << show.err;

  const Result e = run({"inspect", weights, "--export", notes});
  EXPECT_EQ(e.rc, 1);
  EXPECT_NE(e.err.find("--export " + notes + " exists and is not a safetensors file"),
            std::string::npos)
      << e.err;
  EXPECT_TRUE(text(notes) == "precious\n") << notes << " was replaced";

  const std::string sweep_db = (dir_ / "sweep.sqlite").string();
  for (const std::vector<std::string>& how :
       {std::vector<std::string>{"--set", "weights=" + weights},
        {"--grid", "weights=" + weights + ",x.safetensors"}}) {
    std::vector<std::string> args{"sweep", "--db",    sweep_db, "--set",     "model=mlp",
                                  "--set", "steps=1", "--grid", "margin=0,1"};
    args.insert(args.end(), how.begin(), how.end());
    const Result r = run(args);
    EXPECT_NE(r.rc, 0) << how[1];
    EXPECT_NE(r.err.find("weights"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(sweep_db)) << "a sweep was started";
}

// `runs list` shows every name up to its name column's 48 columns whole (two sweep trials
// differing only at the end stay apart), and the columns after the name stay aligned,
// counted in characters.
TEST_F(CliTrain, RunsListShowsWholeNamesAligned) {
  const std::vector<std::string> names{"sweep: margin=0 window=1", "sweep: margin=0 window=16",
                                       "short", "Schrödinger’s run: µ-scale ≥ 2⁻⁹ and a long tail"};
  {
    auto s = fp8wb::RunStore::open(db_);
    for (const auto& n : names) s->create_run(n, fp8wb::RunKind::Train, "{}", "cpu");
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

// A name wider than the name column's 48 terminal columns is cut in the middle with "…":
// its beginning and its end are kept (sweep trials that differ only at the end stay
// apart), the columns after it stay aligned (a CJK character taking two), and --json
// gives the name whole.
TEST_F(CliTrain, RunsListCutsLongNamesInTheMiddle) {
  const std::string stem = "sweep lr: " + std::string(100, 'x');
  std::string cjk;
  for (int i = 0; i < 40; ++i) cjk += "名";  // 80 columns
  const std::vector<std::string> names{stem + " trial=1", stem + " trial=2", cjk, "short"};
  {
    auto s = fp8wb::RunStore::open(db_);
    for (const auto& n : names) s->create_run(n, fp8wb::RunKind::Train, "{}", "cpu");
  }
  const Result r = run({"runs", "list", "--db", db_});
  ASSERT_EQ(r.rc, 0) << r.err;
  // The byte offset after `cols` terminal columns of `line` (CJK ideographs take two).
  auto after_columns = [](const std::string& line, size_t cols) {
    size_t at = 0, used = 0;
    while (at < line.size() && used < cols) {
      const auto lead = static_cast<unsigned char>(line[at]);
      size_t len = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
      used += (lead >= 0xE3 && lead <= 0xE9) ? 2 : 1;
      at += len;
    }
    return at;
  };
  std::istringstream lines(r.out);
  std::string line;
  std::getline(lines, line);
  // "   id  " then the name column, 48 columns, then a space and the status.
  const size_t name_end = after_columns(line, 7 + 48);
  EXPECT_EQ(line.substr(name_end, 7), " status") << r.out;
  std::vector<std::string> fields;
  while (std::getline(lines, line) && line.rfind("(", 0) != 0) {
    const size_t end = after_columns(line, 7 + 48);
    ASSERT_LT(end + 1, line.size()) << line;
    EXPECT_EQ(line[end], ' ') << "misaligned:\n" << r.out;
    EXPECT_NE(line[end + 1], ' ') << "misaligned:\n" << r.out;
    std::string field = line.substr(7, end - 7);
    field.erase(field.find_last_not_of(' ') + 1);
    fields.push_back(field);
  }
  ASSERT_EQ(fields.size(), names.size()) << r.out;
  for (const std::string& f : fields) {
    if (f == "short") continue;
    EXPECT_NE(f.find("…"), std::string::npos) << r.out;
  }
  // Newest first or oldest first: the trials by their ends.
  size_t seen = 0;
  for (const std::string& f : fields) {
    for (const std::string end : {" trial=1", " trial=2"}) {
      if (f.size() < end.size() || f.compare(f.size() - end.size(), end.size(), end) != 0) continue;
      ++seen;
      EXPECT_EQ(f.rfind("sweep lr: xxxx", 0), 0u) << f;
    }
  }
  EXPECT_EQ(seen, 2u) << r.out;
  const Result j = run({"runs", "list", "--db", db_, "--json"});
  ASSERT_EQ(j.rc, 0) << j.err;
  for (const auto& n : names) EXPECT_NE(j.out.find("\"" + n + "\""), std::string::npos) << n;
}

// A damaged page met mid-run (SQLITE_CORRUPT on a write) ends the run as failed, as a
// full disk does: the process reports and exits.
TEST_F(CliTrain, ADamagedDatabaseEndsTheRunFailed) {
  {
    auto s = fp8wb::RunStore::open(db_);
    s->create_run("earlier", fp8wb::RunKind::Train, "{}", "cpu");
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
                        "--set", "name=a \"quoted\\ name", "--save-weights", weights});
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
  EXPECT_EQ(runs[0]["name"], "a \"quoted\\ name");
  l = run({"runs", "show", "1", "--db", db_, "--json"});
  ASSERT_EQ(l.rc, 0) << l.err;
  EXPECT_NO_THROW(nlohmann::json::parse(l.out)) << l.out.substr(0, 500);
}

TEST_F(CliTrain, ReadingCommandsCreateNothing) {
  const std::string missing = (dir_ / "missing" / "dir" / "x.sqlite").string();
  const std::string absent = (dir_ / "x.sqlite").string();
  for (const std::string action : {"list", "show", "export", "delete"}) {
    // A folder that is not there is named, as train names it. (list takes no run id.)
    const std::vector<std::string> id =
        action == "list" ? std::vector<std::string>{} : std::vector<std::string>{"1"};
    auto args = [&](const std::string& db) {
      std::vector<std::string> a = {"runs", action};
      a.insert(a.end(), id.begin(), id.end());
      a.insert(a.end(), {"--db", db, "-y"});
      return a;
    };
    Result r = run(args(missing));
    EXPECT_EQ(r.rc, 1) << action;
    EXPECT_NE(r.err.find("the folder " + (dir_ / "missing" / "dir").string() + " does not exist"),
              std::string::npos)
        << r.err;
    r = run(args(absent));
    EXPECT_EQ(r.rc, 1) << action;
    EXPECT_NE(r.err.find("no run database"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "missing"));
  EXPECT_FALSE(std::filesystem::exists(absent));
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

// Steps done are a count ("5/5 steps"), a step is named by its index (the first is step
// 0, as in the store and the exports): a 5-step run's final loss is its last step's,
// "step 4" in `train`'s summary and `runs show`, never "steps 4-4".
TEST_F(CliTrain, StepCountsAndStepIndicesAreSaidApart) {
  Result r = run({"train", "--db", db_, "--set", "model=mlp", "--set", "steps=5"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("5/5 steps, loss "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("step 5/5"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("run 1 finished after 5 steps"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" (mean over step 4)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("steps 4-4"), std::string::npos) << r.out;
  r = run({"runs", "show", "1", "--db", db_});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("(mean over step 4)\n"), std::string::npos) << r.out;
  // A window of several steps keeps its range.
  r = run({"train", "--db", db_, "--quiet", "--set", "model=mlp", "--set", "steps=30"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find(" (mean over steps 27-29)"), std::string::npos) << r.out;
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

// A run that runs out of steps while its loss is blown up (fewer than the ten steps over
// the limit that end a run at once) ends diverged too, saying so, not finished. With a
// constant learning rate the shorter run's steps are the longer one's.
TEST_F(CliTrain, ARunEndingWhileItsLossIsBlownUpIsDiverged) {
  const std::vector<std::string> base = {"train",
                                         "--db",
                                         db_,
                                         "-q",
                                         "--json",
                                         "--set",
                                         "model=mlp",
                                         "--set",
                                         "lr=10",
                                         "--set",
                                         "warmup=0",
                                         "--set",
                                         "grad_clip=0",
                                         "--set",
                                         "min_lr_ratio=1",
                                         "--set",
                                         "reference=false",
                                         "--set",
                                         "stats_interval=0"};
  std::vector<std::string> args = base;
  args.insert(args.end(), {"--set", "steps=300"});
  Result r = run(args);
  ASSERT_EQ(r.rc, 2) << r.out << r.err;
  const auto whole = nlohmann::json::parse(r.out);
  const std::string message = whole["message"];
  const size_t at = message.find(" at step ");
  ASSERT_NE(at, std::string::npos) << message;
  ASSERT_NE(message.find("for 10 consecutive steps"), std::string::npos) << message;
  const int64_t first_over = std::stoll(message.substr(at + 9)) - 9;  // the first of the ten
  args = base;
  args.insert(args.end(), {"--set", "steps=" + std::to_string(first_over + 3)});
  r = run(args);
  EXPECT_EQ(r.rc, 2) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["status"], "diverged") << r.out;
  const std::string why = j["message"];
  EXPECT_NE(why.find("at the end of the run"), std::string::npos) << why;
  EXPECT_NE(why.find("at the last step, " + std::to_string(first_over + 2)), std::string::npos)
      << why;
  EXPECT_NE(why.find("for its last 3 steps"), std::string::npos) << why;
  // One step before the blow-up the run finishes as before.
  args = base;
  args.insert(args.end(), {"--set", "steps=" + std::to_string(first_over)});
  r = run(args);
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["status"], "finished") << r.out;
}

}  // namespace

// A run given no name is named after its settings and the --set fields given (not "run"
// for every run); `runs list` gives each run's recipe, scaling, margin and window, as the
// GUI's list does, and --json the same fields beside the ones it had.
TEST_F(CliTrain, UnnamedRunsAreNamedAfterTheirSettingsAndListed) {
  Result r = run({"train", "--db", db_, "--set", "model=mlp", "--set", "steps=2", "--set",
                  "margin=2", "--set", "window=4", "--quiet", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  r = run({"train", "--db", db_, "--set", "model=mlp", "--set", "steps=2", "--set", "fp8=false",
           "--quiet", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  r = run({"train", "--db", db_, "--set", "model=mlp", "--set", "steps=2", "--set", "name=run",
           "--quiet", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  r = run({"runs", "list", "--db", db_, "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 3u) << r.out;
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& run : j) by_name[run["name"].get<std::string>()] = run;
  ASSERT_TRUE(by_name.count("mlp tensorwise delayed: steps=2, margin=2, window=4")) << r.out;
  ASSERT_TRUE(by_name.count("mlp, no FP8: steps=2")) << r.out;
  ASSERT_TRUE(by_name.count("run")) << r.out;  // a name given is kept, even "run"
  const auto& fp8 = by_name["mlp tensorwise delayed: steps=2, margin=2, window=4"];
  EXPECT_EQ(fp8["model"], "mlp");
  EXPECT_EQ(fp8["fp8"], true);
  EXPECT_EQ(fp8["recipe"], "tensorwise");
  EXPECT_EQ(fp8["scaling"], "delayed");
  EXPECT_EQ(fp8["margin"], 2);
  EXPECT_EQ(fp8["window"], 4);
  EXPECT_TRUE(fp8.contains("final_loss"));  // the fields it had stay
  EXPECT_EQ(by_name["mlp, no FP8: steps=2"]["fp8"], false);
  EXPECT_TRUE(by_name["mlp, no FP8: steps=2"]["recipe"].is_null());

  r = run({"runs", "list", "--db", db_});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::istringstream lines(r.out);
  std::string header;
  std::getline(lines, header);
  for (const char* column : {"recipe", "scaling", "margin", "window"})
    EXPECT_NE(header.find(column), std::string::npos) << header;
  std::string line, fp8_line, plain_line;
  while (std::getline(lines, line)) {
    if (line.find("window=4") != std::string::npos) fp8_line = line;
    if (line.find("no FP8: steps=2") != std::string::npos) plain_line = line;
  }
  // The row's cells under their headers: "tensorwise delayed 2 4".
  const auto words = [](const std::string& s) {
    std::istringstream in(s);
    std::vector<std::string> w;
    for (std::string x; in >> x;) w.push_back(x);
    return w;
  };
  const auto after = words(fp8_line.substr(fp8_line.find("finished")));
  ASSERT_GE(after.size(), 5u) << fp8_line;
  EXPECT_EQ(after[1], "tensorwise") << fp8_line;
  EXPECT_EQ(after[2], "delayed") << fp8_line;
  EXPECT_EQ(after[3], "2") << fp8_line;
  EXPECT_EQ(after[4], "4") << fp8_line;
  EXPECT_NE(plain_line.find("no FP8"), std::string::npos) << r.out;
}
