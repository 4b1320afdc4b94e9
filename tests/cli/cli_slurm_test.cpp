// fp8wb sweep on a real Slurm: the one-node cluster of scripts/slurm-local.sh (started and
// stopped by the ctest fixture `slurm`; SLURM_CONF points at it). A 2 x 2 margin x window
// sweep goes in as one job array and is collected: four finished trials in the sweep,
// each run's series and statistics those of its trial's own database, the sweep's figures
// those computed here from the trials' databases; a second collection changes nothing.
// Damaged and foreign trial databases are reported by name and leave the rest collected;
// tasks the cluster cancelled are failed runs with Slurm's reason; a refused job, a
// missing sbatch and a missing folder are clear errors that store nothing.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/sweep/sweep.h"
#include "slurm_sweep.h"
#include "temp_dir.h"

namespace {

// The one-node cluster of the ctest fixture, unless the caller names another.
const int kSlurmConf = setenv("SLURM_CONF", FP8WB_SLURM_CONF, /*overwrite=*/0);

namespace fs = std::filesystem;
using fp8wb::cli::ProgramResult;
using fp8wb::cli::run_program;
using nlohmann::json;

ProgramResult fp8wb_cmd(std::vector<std::string> args) {
  args.insert(args.begin(), FP8WB_BINARY);
  return run_program(args);
}

bool slurm_installed() {
  return fs::exists("/usr/sbin/slurmctld") && run_program({"sbatch", "--version"}).started;
}

// Waits until Slurm lists none of the job's tasks.
void wait_for_job(const std::string& job, int seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < until) {
    const ProgramResult q = run_program({"squeue", "-h", "-j", job, "-o", "%i %T"});
    ASSERT_TRUE(q.started);
    if (q.status == 0 && q.out.find_first_not_of(" \n") == std::string::npos) return;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  FAIL() << "job " << job << " still queued after " << seconds << " s";
}

// Every row of every table, as text: what "changes nothing" is checked against.
std::string dump(const std::string& path) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  std::string out;
  std::vector<std::string> tables;
  sqlite3_exec(
      db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
      [](void* t, int, char** v, char**) {
        static_cast<std::vector<std::string>*>(t)->push_back(v[0]);
        return 0;
      },
      &tables, nullptr);
  for (const std::string& t : tables) {
    out += "== " + t + "\n";
    sqlite3_exec(
        db, ("SELECT * FROM " + t + " ORDER BY 1, 2, 3").c_str(),
        [](void* o, int n, char** v, char**) {
          auto* s = static_cast<std::string*>(o);
          for (int i = 0; i < n; ++i) *s += (v[i] ? v[i] : "NULL") + std::string("|");
          *s += "\n";
          return 0;
        },
        &out, nullptr);
  }
  sqlite3_close(db);
  return out;
}

std::string read_line(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return s;
}

// The mean of the last tenth of a loss series (at least one step), as sweeps define the
// final loss (docs/sweeps.md), computed here from a trial's own database.
double tail_mean(const std::vector<fp8wb::SeriesPoint>& s) {
  const size_t n = std::max<size_t>(1, s.size() / 10);
  double sum = 0;
  for (size_t i = s.size() - n; i < s.size(); ++i) sum += s[i].value;
  return sum / static_cast<double>(n);
}

class SlurmSweep : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!slurm_installed()) {
      GTEST_SKIP() << "slurm-wlm is not installed (apt-get install slurm-wlm munge; "
                      "scripts/test.sh installs it): the Slurm sweep is not tested";
    }
    const ProgramResult info = run_program({"sinfo", "-h", "-o", "%t"});
    ASSERT_TRUE(info.started && info.status == 0)
        << "no Slurm cluster answers (scripts/slurm-local.sh start; SLURM_CONF="
        << (std::getenv("SLURM_CONF") ? std::getenv("SLURM_CONF") : "unset") << "): " << info.err;
    dir_ = fs::temp_directory_path() / ("fp8wb-slurm-test-" + std::to_string(getpid()));
    fp8wb::test::remove_tree(dir_.string());
    fs::create_directories(dir_);
    db_ = (dir_ / "runs.sqlite").string();
  }
  void TearDown() override {
    if (!dir_.empty()) fp8wb::test::remove_tree(dir_.string());
  }
  // Submits a sweep; returns its JSON summary.
  json submit(const std::vector<std::string>& extra, const std::string& folder) {
    std::vector<std::string> args = {"sweep",
                                     "--db",
                                     db_,
                                     "--set",
                                     "model=mlp",
                                     "--set",
                                     "steps=20",
                                     "--set",
                                     "reference=true",
                                     "--set",
                                     "stats_interval=5",
                                     "--slurm",
                                     "--slurm-dir",
                                     (dir_ / folder).string(),
                                     "--json"};
    // A --set of extra replaces the same field's here (fp8wb refuses a field given twice).
    for (size_t i = 0; i < extra.size(); ++i) {
      if (extra[i] == "--set" && i + 1 < extra.size()) {
        const std::string key = extra[i + 1].substr(0, extra[i + 1].find('=') + 1);
        bool replaced = false;
        for (std::string& a : args) {
          if (!replaced && a.rfind(key, 0) == 0) {
            a = extra[i + 1];
            replaced = true;
          }
        }
        if (!replaced) args.insert(args.end(), {extra[i], extra[i + 1]});
        ++i;
      } else {
        args.push_back(extra[i]);
      }
    }
    const ProgramResult r = fp8wb_cmd(args);
    EXPECT_EQ(r.status, 0) << r.err << r.out;
    return json::parse(r.out);
  }
  fs::path dir_;
  std::string db_;
};

TEST_F(SlurmSweep, GridRunsAsAnArrayAndIsCollected) {
  const json sub = submit(
      {"--grid", "margin=0,2", "--grid", "window=1,16", "--name", "grid", "--cpus-per-trial", "1"},
      "grid");
  const std::string job = sub["job"];
  const int64_t sweep_id = sub["sweep"];
  EXPECT_EQ(sub["trials"], 4);
  const fs::path folder = dir_ / "grid";
  // While the array runs, a collection stores nothing of the unfinished trials. It stores
  // into a copy of the database: a trial that has already finished would be stored, and
  // the damaged copy of the folder below must find every trial still to collect.
  const fs::path early_db = dir_ / "early.sqlite";
  for (const char* side : {"", "-wal"}) {
    if (fs::exists(db_ + side)) fs::copy_file(db_ + side, early_db.string() + side);
  }
  ProgramResult c =
      fp8wb_cmd({"sweep", "--collect", folder.string(), "--db", early_db.string(), "--json"});
  ASSERT_EQ(c.status, 0) << c.err;
  wait_for_job(job, 600);

  // A copy of the folder whose trial 1 is damaged and whose trial 2 is another sweep's.
  const fs::path bad = dir_ / "bad";
  fs::copy(folder, bad, fs::copy_options::recursive);
  {
    std::ofstream f(bad / "trials" / "1.sqlite", std::ios::trunc | std::ios::binary);
    f << std::string(8192, 'x');
  }
  // A write-ahead log left beside a trial (a collection that read it as the trial closed it
  // keeps the log from being folded in) would still hold the pages: the damage is the
  // file's alone.
  for (const char* side : {"-wal", "-shm"}) {
    fs::remove(bad / "trials" / (std::string("1.sqlite") + side));
    fs::remove(bad / "trials" / (std::string("2.sqlite") + side));
  }
  fs::remove(bad / "trials" / "2.sqlite");
  const ProgramResult other = fp8wb_cmd({"train", "--db", (bad / "trials" / "2.sqlite").string(),
                                         "--set", "model=mlp", "--set", "steps=2", "--quiet"});
  ASSERT_EQ(other.status, 0) << other.err;
  c = fp8wb_cmd({"sweep", "--collect", bad.string(), "--db", db_});
  EXPECT_EQ(c.status, 1) << c.out;
  EXPECT_NE(c.err.find((bad / "trials" / "1.sqlite").string()), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("another sweep"), std::string::npos) << c.err;
  {
    auto s = fp8wb::RunStore::open_read_only(db_);
    EXPECT_EQ(s->integrity_check(), "ok");
    std::vector<std::string> names;
    for (const auto& r : s->runs()) names.push_back(r.name);
    EXPECT_EQ(names, (std::vector<std::string>{"grid: margin=0 window=1 seed=1",
                                               "grid: margin=2 window=16 seed=1"}));
    // Two trials without a result: the sweep is not finished.
    EXPECT_NE(s->sweep(sweep_id)->status, fp8wb::SweepStatus::Finished);
  }

  // The real folder: the other two come in, the first two stay as they are.
  c = fp8wb_cmd({"sweep", "--collect", folder.string(), "--json"});
  ASSERT_EQ(c.status, 0) << c.err;
  const json col = json::parse(c.out);
  EXPECT_EQ(col["collected"], 2);
  EXPECT_EQ(col["waiting"], 0);
  EXPECT_EQ(col["status"], "finished");

  auto store = fp8wb::RunStore::open_read_only(db_);
  EXPECT_EQ(store->sweep(sweep_id)->status, fp8wb::SweepStatus::Finished);
  std::map<std::string, fp8wb::RunInfo> by_uuid;
  for (const auto& r : store->runs()) by_uuid[r.uuid] = r;
  ASSERT_EQ(by_uuid.size(), 4u);
  std::map<std::vector<std::string>, std::pair<double, double>> expected;  // loss, underflow
  const std::vector<std::vector<std::string>> points = {
      {"0", "1"}, {"0", "16"}, {"2", "1"}, {"2", "16"}};
  for (int i = 0; i < 4; ++i) {
    const std::string uuid = read_line(folder / "trials" / (std::to_string(i) + ".uuid"));
    ASSERT_EQ(by_uuid.count(uuid), 1u) << "trial " << i;
    const fp8wb::RunInfo& r = by_uuid[uuid];
    EXPECT_EQ(r.status, fp8wb::RunStatus::Finished);
    EXPECT_EQ(r.parent_sweep, sweep_id);
    EXPECT_EQ(r.last_step, 19);
    auto trial = fp8wb::RunStore::open_read_only(
        (folder / "trials" / (std::to_string(i) + ".sqlite")).string());
    const int64_t tid = trial->runs().at(0).id;
    const auto loss = trial->series(tid, "loss");
    ASSERT_EQ(loss.size(), 20u);
    const auto got = store->series(r.id, "loss");
    ASSERT_EQ(got.size(), loss.size());
    for (size_t k = 0; k < loss.size(); ++k) EXPECT_EQ(got[k].value, loss[k].value);
    EXPECT_EQ(store->series(r.id, "loss_gap").size(), 20u);
    const auto stats = trial->tensor_stats(tid);
    ASSERT_FALSE(stats.empty());
    const auto got_stats = store->tensor_stats(r.id);
    ASSERT_EQ(got_stats.size(), stats.size());
    uint64_t nonzero = 0;
    double under_mean = 0;
    for (size_t k = 0; k < stats.size(); ++k) {
      EXPECT_EQ(got_stats[k].raw.underflow, stats[k].raw.underflow);
      EXPECT_EQ(got_stats[k].raw.saturated, stats[k].raw.saturated);
      EXPECT_EQ(got_stats[k].amax, stats[k].amax);
      // numerics.md: a tensor's underflow % is of its finite nonzero elements.
      const uint64_t nz = stats[k].raw.numel - stats[k].raw.zeros - stats[k].raw.nonfinite;
      nonzero += nz;
      under_mean +=
          nz ? 100.0 * static_cast<double>(stats[k].raw.underflow) / static_cast<double>(nz) : 0.0;
    }
    EXPECT_GT(nonzero, 0u);
    under_mean /= static_cast<double>(stats.size());
    expected[points[static_cast<size_t>(i)]] = {tail_mean(loss), under_mean};
    EXPECT_EQ(trial->events(tid).size(), store->events(r.id).size());
  }
  // The sweep's figures, from its collected runs, equal those of the trials' own files.
  const auto pts = fp8wb::sweep_points(*store, sweep_id);
  ASSERT_EQ(pts.size(), 4u);
  for (const auto& p : pts) {
    ASSERT_EQ(expected.count(p.values), 1u);
    EXPECT_EQ(p.runs, 1);
    EXPECT_NEAR(p.final_loss, expected[p.values].first, 1e-12);
    EXPECT_NEAR(p.underflow_pct, expected[p.values].second, 1e-9);
  }
  store.reset();

  // Again, from either folder: nothing changes.
  const std::string before = dump(db_);
  c = fp8wb_cmd({"sweep", "--collect", folder.string()});
  EXPECT_EQ(c.status, 0) << c.err;
  EXPECT_NE(c.out.find("0 collected now"), std::string::npos) << c.out;
  // With the grid's figures, as `fp8wb sweep` prints them.
  EXPECT_NE(c.out.find("margin=2 window=16 "), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("4 of 4 trials finished"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("best: "), std::string::npos) << c.out;
  EXPECT_EQ(dump(db_), before);
  fp8wb_cmd({"sweep", "--collect", bad.string(), "--db", db_});
  EXPECT_EQ(dump(db_), before);
}

TEST_F(SlurmSweep, CancelledTasksAreFailedTrialsWithSlurmsReason) {
  // Two CPUs a trial on a two-CPU node: one runs, the other waits; both are cancelled.
  const json sub =
      submit({"--grid", "margin=0,2", "--name", "cancelled", "--cpus-per-trial",
              std::to_string(std::thread::hardware_concurrency()), "--set", "steps=1000000"},
             "cancelled");
  const std::string job = sub["job"];
  const fs::path folder = dir_ / "cancelled";
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!fs::exists(folder / "trials" / "0.sqlite") && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(fs::exists(folder / "trials" / "0.sqlite"));
  // The waiting task is cancelled, then the running one killed outright (its run never
  // ends). In the other order the waiting task could start in the CPUs the killed one
  // freed before its cancel came, and stop as a run stopped by a signal.
  EXPECT_EQ(run_program({"scancel", "--state=PENDING", job}).status, 0);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(run_program({"scancel", "--batch", "--signal=KILL", job + "_0"}).status, 0);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_EQ(run_program({"scancel", job}).status, 0);
  wait_for_job(job, 120);
  ProgramResult c = fp8wb_cmd({"sweep", "--collect", folder.string(), "--json"});
  ASSERT_EQ(c.status, 0) << c.err;
  const json col = json::parse(c.out);
  EXPECT_EQ(col["status"], "finished");
  auto store = fp8wb::RunStore::open_read_only(db_);
  const auto runs = store->runs();
  ASSERT_EQ(runs.size(), 2u);
  for (const auto& r : runs) {
    EXPECT_EQ(r.status, fp8wb::RunStatus::Failed) << r.name << ": " << r.message;
    EXPECT_NE(r.message.find("Slurm: "), std::string::npos) << r.message;
    EXPECT_EQ(r.parent_sweep, sub["sweep"].get<int64_t>());
  }
  EXPECT_NE(runs[0].message.find("did not finish on the cluster"), std::string::npos)
      << runs[0].message;
  EXPECT_NE(runs[1].message.find("CANCELLED"), std::string::npos) << runs[1].message;
  store.reset();
  const std::string before = dump(db_);
  c = fp8wb_cmd({"sweep", "--collect", folder.string()});
  EXPECT_EQ(c.status, 0) << c.err;
  EXPECT_EQ(dump(db_), before);
}

TEST_F(SlurmSweep, RefusedJobsAndMissingFoldersStoreNothing) {
  // A partition the cluster does not have: sbatch refuses, nothing is stored or left.
  ProgramResult r =
      fp8wb_cmd({"sweep", "--db", db_, "--set", "model=mlp", "--grid", "margin=0,1", "--slurm",
                 "--slurm-dir", (dir_ / "refused").string(), "--partition", "nosuch"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("sbatch refused the job"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("partition"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "refused" / "sweep.json"));
  EXPECT_FALSE(fs::exists(dir_ / "refused" / "job.sh"));
  EXPECT_FALSE(fs::exists(db_));  // no sweep stored: no database made at all
  // A folder that is not there.
  r = fp8wb_cmd({"sweep", "--collect", (dir_ / "nowhere").string(), "--db", db_});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("no sweep folder at " + (dir_ / "nowhere").string()), std::string::npos)
      << r.err;
  // A folder with no sweep in it.
  fs::create_directories(dir_ / "empty");
  r = fp8wb_cmd({"sweep", "--collect", (dir_ / "empty").string(), "--db", db_});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("holds no sweep.json"), std::string::npos) << r.err;
}

}  // namespace
