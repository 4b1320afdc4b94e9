// fp8wb sweep, in-process: a 2 x 2 grid of tiny MLP runs gives a table with one row per
// grid point, "-" where no reference run gives a loss gap, the best setting, and child
// runs in the database; --json has every point; a bad grid names its problem. One trial
// and one step are said in the singular, in a Slurm sweep's submission and collection too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli_run.h"
#include "commands/sweep_command.h"
#include "fifo.h"
#include "fp8wb/core/backend/backend_info.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/sweep/sweep_collect.h"
#include "sql_file.h"
#include "table_text.h"
#include "temp_dir.h"
#include "temp_dir_test.h"

namespace {

using fp8wb::test::run;

// One of a thing is said in the singular: a sweep of one trial, a run of one step (and
// two stay plural).
TEST(CliSweep, OneTrialAndOneStepAreSingular) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("fp8wb-cli-singular-" + std::to_string(getpid()));
  fp8wb::test::remove_tree(dir.string());
  std::filesystem::create_directories(dir);
  const std::string db = (dir / "runs.sqlite").string();
  auto r = run({"sweep", "--db", db, "--set", "model=mlp", "--set", "steps=1", "--set",
                "reference=false", "--grid", "margin=0"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find(": 1 trial (0 already done)"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("1 of 1 trial finished"), std::string::npos) << r.out;
  EXPECT_EQ((r.out + r.err).find("1 trials"), std::string::npos) << r.out << r.err;
  r = run({"train", "--db", db, "--set", "model=mlp", "--set", "steps=1", "--set",
           "reference=false", "-q"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find(" finished after 1 step: loss"), std::string::npos) << r.out;
  r = run({"train", "--db", db, "--set", "model=mlp", "--set", "steps=2", "--set",
           "reference=false", "-q"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find(" finished after 2 steps: loss"), std::string::npos) << r.out;
  r = run({"bench", "--train-only", "--model", "mlp", "--steps", "1"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("(1 step: median, then mean)"), std::string::npos) << r.out;
  fp8wb::test::remove_tree(dir.string());
}

// --rounds runs every variant that many times, the variants in turn, and the figures take
// every round's timed steps.
TEST(CliBench, RoundsRunEveryVariantAgain) {
  auto r = run({"bench", "--train-only", "--model", "mlp", "--steps", "2", "--rounds", "3"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("(2 steps in each of 3 rounds, the variants in turn: median, then mean)"),
            std::string::npos)
      << r.out;
  r = run({"bench", "--train-only", "--model", "mlp", "--steps", "2", "--rounds", "3", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("rounds"), 3);
  ASSERT_EQ(j.at("train").size(), 5u);
  for (const auto& t : j.at("train")) EXPECT_EQ(t.at("timed_steps"), 6) << t.dump();
  for (const char* bad : {"0", "101", "x"}) {
    r = run({"bench", "--train-only", "--rounds", bad});
    EXPECT_NE(r.rc, 0) << bad;
    EXPECT_NE(r.err.find("--rounds"), std::string::npos) << r.err;
  }
}

// --resume 0 or -1 names no sweep: refused (as a run id of -1 is), and no new sweep is
// started in its place.
TEST(CliSweep, ResumeTakesAPositiveSweepId) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("fp8wb-cli-resume-id-" + std::to_string(getpid()));
  fp8wb::test::remove_tree(dir.string());
  std::filesystem::create_directories(dir);
  const std::string db = (dir / "runs.sqlite").string();
  for (const char* id : {"-1", "0"}) {
    const auto r = run({"sweep", "--db", db, "--resume", id, "--set", "model=mlp", "--set",
                        "steps=1", "--set", "reference=false", "--grid", "margin=0"});
    EXPECT_EQ(r.rc, 1) << id;
    EXPECT_NE(r.err.find("--resume takes a sweep id, a positive whole number (1 to "
                         "9223372036854775807), not '" +
                         std::string(id) + "'"),
              std::string::npos)
        << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(db)) << "a sweep was started";
  fp8wb::test::remove_tree(dir.string());
}

// --parallel takes 1 or more trials side by side: 0 or a negative count is refused by name
// before a database is made (it ran the sweep with the default).
TEST(CliSweep, ParallelTakesAPositiveCount) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("fp8wb-cli-parallel-" + std::to_string(getpid()));
  fp8wb::test::remove_tree(dir.string());
  std::filesystem::create_directories(dir);
  const std::string db = (dir / "runs.sqlite").string();
  for (const char* n : {"0", "-3"}) {
    const auto r = run({"sweep", "--db", db, "--parallel", n, "--set", "model=mlp", "--set",
                        "steps=1", "--set", "reference=false", "--grid", "margin=0"});
    EXPECT_NE(r.rc, 0) << n;
    EXPECT_NE(r.err.find("--parallel"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(db)) << "a sweep was started";
  fp8wb::test::remove_tree(dir.string());
}

// A Slurm sweep of one trial, with stand-ins for sbatch and sacct on PATH (the job taken,
// its one task running): submitted and collected as "1 trial", and the trial's run, one
// step in, as "1 step done".
TEST(CliSweep, OneSlurmTrialAndOneStepDoneAreSingular) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("fp8wb-cli-slurm-singular-" + std::to_string(getpid()));
  fp8wb::test::remove_tree(dir.string());
  fs::create_directories(dir / "bin");
  auto script = [&](const char* name, const std::string& text) {
    const fs::path p = dir / "bin" / name;
    std::ofstream(p) << text;
    fs::permissions(p, fs::perms::owner_all);
  };
  script("sbatch", "#!/bin/sh\necho 4242\n");
  script("sacct", "#!/bin/sh\nprintf '4242_0|RUNNING|0:0|None\\n'\n");
  const std::string old_path = getenv("PATH") ? getenv("PATH") : "";
  setenv("PATH", ((dir / "bin").string() + ":" + old_path).c_str(), 1);

  const fs::path folder = dir / "sw";
  auto r = run({"sweep", "--db", (dir / "runs.sqlite").string(), "--set", "model=mlp", "--grid",
                "margin=0", "--slurm", "--slurm-dir", folder.string()});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find(": 1 trial submitted to Slurm as job array 4242"), std::string::npos)
      << r.out;

  // The trial's task has written one step of its run, and runs on.
  {
    std::ifstream u(folder / "trials" / "0.uuid");
    std::string uuid;
    u >> uuid;
    auto trial = fp8wb::RunStore::open((folder / "trials" / "0.sqlite").string());
    fp8wb::MetricBatch b;
    b.run_id = trial->create_run("trial 0", fp8wb::RunKind::Train, "{}", "cpu", 0, uuid);
    fp8wb::StepMetrics m;
    m.step = 0;
    m.loss = 2.5;
    b.steps.push_back(m);
    trial->write(b);
    trial->flush();
  }
  r = run({"sweep", "--collect", folder.string()});
  setenv("PATH", old_path.c_str(), 1);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("Slurm job 4242: 1 trial (states from sacct)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 step done"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("1 trials"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("1 steps"), std::string::npos) << r.out;
  fp8wb::test::remove_tree(dir.string());
}

TEST(CliSweep, TableJsonAndBadGrids) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("fp8wb-cli-sweep-" + std::to_string(getpid()));
  fp8wb::test::remove_tree(dir.string());
  std::filesystem::create_directories(dir);
  const std::string db = (dir / "runs.sqlite").string();
  const std::vector<std::string> base = {"sweep",           "--db",   db,           "--set",
                                         "model=mlp",       "--set",  "steps=6",    "--set",
                                         "reference=false", "--grid", "margin=0,2", "--grid",
                                         "window=1,4",      "-q"};
  auto args = base;
  args.insert(args.end(), {"--name", "table"});
  auto r = run(args);
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* point :
       {"margin=0 window=1", "margin=0 window=4", "margin=2 window=1", "margin=2 window=4"})
    EXPECT_NE(r.out.find(point), std::string::npos) << point << "\n" << r.out;
  EXPECT_EQ(r.out.find("nan"), std::string::npos) << r.out;  // no reference: "-", not nan
  // A verdict ("best: ..." or "no clear best: ...") and the rule it follows.
  EXPECT_NE(r.out.find("best: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rule: The best is the lowest final loss"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("finished"), std::string::npos) << r.out;

  args = base;
  args.insert(args.end(), {"--name", "json", "--json"});
  r = run(args);
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["points"].size(), 4u);
  for (const auto& p : j["points"]) {
    EXPECT_EQ(p["runs"], 1);
    EXPECT_TRUE(p["loss_gap"].is_null());
    EXPECT_TRUE(p["final_loss"].is_number());
    EXPECT_TRUE(p["spike"].is_null());  // no reference: no spike figure
    EXPECT_EQ(p["spiked"], 0);
  }
  EXPECT_TRUE(j["verdict"].is_string());
  EXPECT_NE(j["rule"].get<std::string>().find("within the noise"), std::string::npos);
  r = run({"runs", "list", "--db", db});
  EXPECT_NE(r.out.find("json: margin=2 windo"), std::string::npos) << r.out;

  r = run({"sweep", "--db", db, "--grid", "margin=0,banana", "-q"});
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("margin"), std::string::npos) << r.err;
  // A value twice would run twice; --resume runs the stored grid, so a new one is refused.
  r = run({"sweep", "--db", db, "--grid", "margin=0,1,0", "-q"});
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("twice"), std::string::npos) << r.err;
  r = run({"sweep", "--db", db, "--resume", std::to_string(j["sweep"].get<int64_t>()), "--grid",
           "margin=5,6", "-q"});
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("--resume"), std::string::npos) << r.err;
  r = run({"sweep", "--db", db, "--set", "model=mlp", "--grid",
           "lr=" +
               [] {
                 std::string v;
                 for (int i = 1; i <= 200000; ++i) v += (i > 1 ? "," : "") + std::to_string(i);
                 return v;
               }(),
           "-q"});
  EXPECT_NE(r.rc, 0);
  fp8wb::test::remove_tree(dir.string());
}

// The summary's row that begins with `point` (its grid point's label).
std::string row_of(const std::string& table, const std::string& point) {
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(point + " ", 0) == 0) return line;
  return {};
}

// A grid point with one of its two seeds' runs ended has no seed spread: "n/a", not
// "0.00000". Resumed, the sweep runs that seed's trial again under a name of its own
// ("NAME #2"): no two runs in the list share a name, and the new run counts for its point.
TEST(CliSweep, OneSeedHasNoSpreadAndAResumedTrialIsNamedApart) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("fp8wb-cli-resumed-" + std::to_string(getpid()));
  fp8wb::test::remove_tree(dir.string());
  std::filesystem::create_directories(dir);
  const std::string db = (dir / "runs.sqlite").string();
  auto r = run({"sweep", "--db", db, "--name", "again", "--set", "model=mlp", "--set", "steps=2",
                "--set", "reference=false", "--grid", "margin=0,1", "--seeds", "2", "-q"});
  ASSERT_EQ(r.rc, 0) << r.err;
  // The last trial of margin=0 interrupted (its process gone mid-run).
  fp8wb::test::sql::exec(db,
                         "UPDATE runs SET status = 'stopped' WHERE id = (SELECT max(id) FROM runs "
                         "WHERE name LIKE 'again: margin=0 %'); "
                         "UPDATE sweeps SET status = 'stopped'");
  std::ostringstream table;
  fp8wb::cli::print_sweep_summary(*fp8wb::RunStore::open_read_only(db), 1, table);
  const std::string one = row_of(table.str(), "margin=0");
  ASSERT_FALSE(one.empty()) << table.str();
  EXPECT_NE(one.find(" 1 "), std::string::npos) << one;  // one run
  EXPECT_EQ(one.find("0.00000"), std::string::npos) << one;
  EXPECT_NE(one.find("n/a"), std::string::npos) << one;
  const std::string two = row_of(table.str(), "margin=1");
  EXPECT_EQ(two.find("n/a"), std::string::npos) << two;  // two runs: a spread

  r = run({"sweep", "--db", db, "--resume", "1", "-q"});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::map<std::string, int> names;
  std::string again;
  for (const fp8wb::RunInfo& run_info : fp8wb::RunStore::open_read_only(db)->runs()) {
    ++names[run_info.name];
    if (run_info.status == fp8wb::RunStatus::Finished && run_info.name.size() > 3 &&
        run_info.name.compare(run_info.name.size() - 3, 3, " #2") == 0)
      again = run_info.name;
  }
  for (const auto& [name, n] : names) EXPECT_EQ(n, 1) << "'" << name << "' " << n << " times";
  EXPECT_EQ(names.size(), 5u);
  EXPECT_EQ(again.rfind("again: margin=0 ", 0), 0u) << again;
  // The trial run again counts for its point: both seeds, a spread, the sweep finished.
  const std::string resumed = row_of(r.out, "margin=0");
  EXPECT_NE(resumed.find(" 2 "), std::string::npos) << r.out;
  EXPECT_EQ(resumed.find("n/a"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sweep 1 finished"), std::string::npos) << r.out;
  fp8wb::test::remove_tree(dir.string());
}

// A grid point's label too long for its column, in the sweep's summary and in a Slurm
// sweep's collection (trial and message), ends in "…" where it is cut.
TEST(CliSweep, CutLabelsEndInAnEllipsis) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("fp8wb-cli-sweep-cut-" + std::to_string(getpid()));
  fp8wb::test::remove_tree(dir.string());
  fs::create_directories(dir / "bin");
  const std::string lr = "lr=0.00100000000000000000000000000001";
  auto r = run({"sweep", "--db", (dir / "here.sqlite").string(), "--set", "model=mlp", "--set",
                "steps=1", "--set", "reference=false", "--grid", lr + ",0.002", "-q"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("\n" + lr.substr(0, 33) + "…     1"), std::string::npos) << r.out;

  auto script = [&](const char* name, const std::string& text) {
    const fs::path p = dir / "bin" / name;
    std::ofstream(p) << text;
    fs::permissions(p, fs::perms::owner_all);
  };
  script("sbatch", "#!/bin/sh\necho 4242\n");
  script("sacct", "#!/bin/sh\nprintf '4242_0|RUNNING|0:0|None\\n4242_1|RUNNING|0:0|None\\n'\n");
  const std::string old_path = getenv("PATH") ? getenv("PATH") : "";
  setenv("PATH", ((dir / "bin").string() + ":" + old_path).c_str(), 1);
  const fs::path folder = dir / "sw";
  r = run({"sweep", "--db", (dir / "runs.sqlite").string(), "--set", "model=mlp", "--grid",
           lr + ",0.002", "--slurm", "--slurm-dir", folder.string()});
  ASSERT_EQ(r.rc, 0) << r.err;
  {
    std::ifstream u(folder / "trials" / "0.uuid");
    std::string uuid;
    u >> uuid;
    auto trial = fp8wb::RunStore::open((folder / "trials" / "0.sqlite").string());
    fp8wb::MetricBatch b;
    b.run_id = trial->create_run("trial 0", fp8wb::RunKind::Train, "{}", "cpu", 0, uuid);
    fp8wb::StepMetrics m;
    m.step = 0;
    m.loss = 2.5;
    b.steps.push_back(m);
    trial->write(b);
    trial->flush();
  }
  r = run({"sweep", "--collect", folder.string()});
  setenv("PATH", old_path.c_str(), 1);
  ASSERT_EQ(r.rc, 0) << r.err;
  // The trial's key in the collection's table (no run collected yet: no summary after it).
  size_t cuts = 0;
  for (size_t at = r.out.find(lr.substr(0, 20)); at != std::string::npos;
       at = r.out.find(lr.substr(0, 20), at + 1)) {
    const size_t end = r.out.find_first_of(" \n", at);
    const std::string shown = r.out.substr(at, end - at);
    EXPECT_EQ(shown.substr(shown.size() - 3), "…") << shown;
    ++cuts;
  }
  EXPECT_EQ(cuts, 1u) << r.out;
  fp8wb::test::remove_tree(dir.string());
}

// `sweep --collect` of a folder whose tasks failed, with hostile logs and links: a FIFO
// log is not waited on, a log linked to /dev/zero is not read, a log or a trial database
// linked outside the folder is not read (each said, naming the path); without --db, a
// sweep.json naming a database that is not there makes no folder and no database.
TEST(CliSweep, CollectReadsOnlyRegularFilesInsideTheFolder) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("fp8wb-cli-collect-hostile-" + std::to_string(getpid()));
  fp8wb::test::remove_tree(dir.string());
  fs::create_directories(dir / "bin");
  auto script = [&](const char* name, const std::string& text) {
    const fs::path p = dir / "bin" / name;
    std::ofstream(p) << text;
    fs::permissions(p, fs::perms::owner_all);
  };
  script("sbatch", "#!/bin/sh\necho 4242\n");
  script("sacct", "#!/bin/sh\nprintf '4242_[0-3]|FAILED|1:0|None\\n'\n");
  const std::string old_path = getenv("PATH") ? getenv("PATH") : "";
  setenv("PATH", ((dir / "bin").string() + ":" + old_path).c_str(), 1);
  const fs::path folder = dir / "sw";
  const std::string db = (dir / "runs.sqlite").string();
  auto r = run({"sweep", "--db", db, "--set", "model=mlp", "--grid", "margin=0,1,2,3", "--slurm",
                "--slurm-dir", folder.string()});
  ASSERT_EQ(r.rc, 0) << r.err;
  fs::create_directories(folder / "logs");
  fs::create_directories(folder / "trials");
  for (int i = 0; i < 4; ++i) fs::remove(folder / "logs" / (std::to_string(i) + ".log"));
  fp8wb::test::FifoGuard fifo((folder / "logs" / "0.log").string());
  ASSERT_TRUE(fifo.made());
  fs::create_symlink("/dev/zero", folder / "logs" / "1.log");
  std::ofstream(dir / "secret.txt") << "SECRET LINE\n";
  fs::create_symlink(dir / "secret.txt", folder / "logs" / "2.log");
  {
    auto other = fp8wb::RunStore::open((dir / "other.sqlite").string());
    other->create_run("other", fp8wb::RunKind::Train, "{}", "cpu");
    other->flush();
  }
  fs::create_symlink(dir / "other.sqlite", folder / "trials" / "3.sqlite");

  r = run({"sweep", "--collect", folder.string(), "--db", db});
  EXPECT_FALSE(fifo.reader_blocked()) << "the FIFO log was waited on";
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  const std::string trial3 = (folder / "trials" / "3.sqlite").string();
  EXPECT_NE(r.err.find(trial3 + " leads outside the sweep folder"), std::string::npos) << r.err;
  std::map<std::string, std::string> messages;  // by run name's end
  for (const fp8wb::RunInfo& run_info : fp8wb::RunStore::open_read_only(db)->runs())
    messages[run_info.name.substr(run_info.name.find("margin="))] = run_info.message;
  ASSERT_EQ(messages.size(), 3u);
  const std::string log0 = (folder / "logs" / "0.log").string();
  EXPECT_NE(messages["margin=0 seed=1"].find("log " + log0 + " not read: " + log0 + " is a FIFO"),
            std::string::npos)
      << messages["margin=0 seed=1"];
  EXPECT_NE(messages["margin=1 seed=1"].find("1.log leads outside the sweep folder"),
            std::string::npos)
      << messages["margin=1 seed=1"];
  EXPECT_NE(messages["margin=2 seed=1"].find("2.log leads outside the sweep folder"),
            std::string::npos)
      << messages["margin=2 seed=1"];
  EXPECT_EQ(messages["margin=2 seed=1"].find("SECRET"), std::string::npos);

  // sweep.json naming a database elsewhere that is not there: nothing is made.
  const fs::path manifest = folder / "sweep.json";
  nlohmann::json m;
  {
    std::ifstream in(manifest);
    m = nlohmann::json::parse(in);
  }
  m["db"] = (dir / "made" / "deep" / "x.sqlite").string();
  std::ofstream(manifest, std::ios::trunc) << m.dump();
  r = run({"sweep", "--collect", folder.string()});
  setenv("PATH", old_path.c_str(), 1);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("names the database " + (dir / "made" / "deep" / "x.sqlite").string() +
                       ", which is not there"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir / "made"));
  fp8wb::test::remove_tree(dir.string());
}

class CliSweepLimits : public fp8wb::test::TempDirTest {
 protected:
  CliSweepLimits() : TempDirTest("fp8wb-cli-sweep-limits") {}
  // Statuses of the database's runs: "finished" -> how many.
  std::map<std::string, int> statuses() const {
    std::map<std::string, int> n;
    for (const fp8wb::RunInfo& r : fp8wb::RunStore::open_read_only(path_)->runs())
      ++n[std::string(fp8wb::run_status_name(r.status))];
    return n;
  }
};

// --parallel 128 on a 2-core machine: 128 trial threads inside OpenBLAS at once overflowed
// its buffer table ("precompiled NUM_THREADS exceeded", then SIGSEGV) and left the runs
// `running`. The trials past its limit wait their turn, said on stderr, and every trial
// finishes. A process of its own: OpenBLAS writes to the real stderr, and a crash must
// not take the test program with it.
TEST_F(CliSweepLimits, ParallelPastOpenBlasLimitFinishesEveryTrial) {
  const fp8wb::ProgramResult r = fp8wb::run_program({FP8WB_BINARY, "sweep",
                                                     "--db",       path_,
                                                     "--set",      "model=mlp",
                                                     "--set",      "steps=2",
                                                     "--set",      "reference=false",
                                                     "--set",      "stats_interval=0",
                                                     "--set",      "sqnr_interval=0",
                                                     "--grid",     "margin=0,1",
                                                     "--seeds",    "128",
                                                     "--parallel", "128",
                                                     "-q"});
  ASSERT_TRUE(r.started);
  EXPECT_EQ(r.status, 0) << r.err.substr(0, 2000);
  EXPECT_EQ(r.err.find("NUM_THREADS exceeded"), std::string::npos) << r.err.substr(0, 2000);
  EXPECT_EQ(statuses(), (std::map<std::string, int>{{"finished", 256}}));
  if (const int limit = fp8wb::blas_thread_limit(); limit > 0 && limit < 128) {
    EXPECT_NE(r.err.find("--parallel 128: " + std::to_string(limit) +
                         " trials side by side at most here, as OpenBLAS takes " +
                         std::to_string(limit) + " computing threads at once"),
              std::string::npos)
        << r.err;
  }
}

// lr=0.1,1e-1,0.10 is one value spelled three ways: its trials run once, as 0.1, and the
// dropped spellings are said; the same value spelled the same way twice is still refused.
TEST_F(CliSweepLimits, NumericallyEqualGridValuesRunOnce) {
  auto r = run({"sweep", "--db", path_, "--set", "model=mlp", "--set", "steps=1", "--set",
                "reference=false", "--grid", "lr=0.1,1e-1,0.10,0.2", "--grid", "margin=0,0.0", "-q",
                "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["trials"], 2);
  EXPECT_EQ(j["axes"][0]["values"], (std::vector<std::string>{"0.1", "0.2"}));
  EXPECT_EQ(j["axes"][1]["values"], (std::vector<std::string>{"0"}));
  EXPECT_NE(r.err.find("grid 'lr': 1e-1 and 0.10 are the number 0.1 again: dropped, so that its "
                       "trials run once (as 0.1)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("grid 'margin': 0.0 is the number 0 again"), std::string::npos) << r.err;
  EXPECT_EQ(statuses(), (std::map<std::string, int>{{"finished", 2}}));
  r = run({"sweep", "--db", path_, "--grid", "lr=0.1,0.1", "-q"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("grid 'lr' has the value 0.1 twice"), std::string::npos) << r.err;
}

// device=cuda (in the grid or the base) on a machine without a usable GPU is refused, naming
// the trial and the problem, before a database or a sweep record is made; a Slurm sweep,
// whose trials run on the cluster's GPUs, is not held to this machine's.
TEST_F(CliSweepLimits, CudaWithoutAGpuStoresNothing) {
  if (fp8wb::probe_backend().cuda_devices > 0) GTEST_SKIP() << "this machine has a GPU";
  for (const std::vector<std::string>& how :
       {std::vector<std::string>{"--grid", "device=cpu,cuda"},
        std::vector<std::string>{"--set", "device=cuda:1", "--grid", "margin=0"}}) {
    std::vector<std::string> args = {"sweep", "--db", path_, "--set", "model=mlp", "-q"};
    args.insert(args.end(), how.begin(), how.end());
    const auto r = run(args);
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.err.find("fp8wb: trial "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(": device cuda was asked for, but "), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(path_)) << "a database was made";
  }
  // Into a database that exists: no sweep is recorded in it.
  fp8wb::RunStore::open(path_);
  const auto r = run({"sweep", "--db", path_, "--set", "model=mlp", "--grid", "device=cuda"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(fp8wb::RunStore::open_read_only(path_)->sweeps().empty());
}

// A stored grid that cannot be read (a copy edited by hand, another program's row) is
// said in words, naming the sweep, its database and the field: never nlohmann's
// "[json.exception...]" texts.
TEST_F(CliSweepLimits, AnUnreadableStoredGridIsSaidInWords) {
  auto r = run({"sweep", "--db", path_, "--set", "model=mlp", "--set", "steps=1", "--set",
                "reference=false", "--grid", "margin=0", "-q"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string at = "fp8wb: sweep 1's stored grid (in " + path_ + ") is unreadable: ";
  const std::pair<const char*, std::string> cases[] = {
      {"not json", "it is not valid JSON at line 1, column 2: invalid literal"},
      {"[1, 2]", "it is an array, not a JSON object"},
      {R"({"name": "s", "seeds": 1, "base": {}})", "field 'axes' is missing"},
      {R"({"name": 7, "seeds": 1, "base": {}, "axes": []})", "field 'name' is a number, not text"},
      {R"({"name": "s", "seeds": 1, "base": {}, "axes": [{"key": "margin", "values": [0]}]})",
       "field 'axes[0].values[0]' is a number, not text"},
      {R"({"name": "s", "seeds": 1, "base": {}, "axes": {"key": "margin"}})",
       "field 'axes' is an object, not an array"},
      {R"({"name": "s", "seeds": 1, "base": {"lr": "fast"}, "axes": []})",
       "its base config field 'lr': expected a number"},
  };
  for (const auto& [grid, said] : cases) {
    const std::string sql = "UPDATE sweeps SET grid_json = '" + std::string(grid) + "'";
    fp8wb::test::sql::exec(path_, sql.c_str());
    r = run({"sweep", "--db", path_, "--resume", "1", "-q"});
    EXPECT_EQ(r.rc, 1) << grid;
    EXPECT_NE(r.err.find(at + said), std::string::npos) << grid << "\n" << r.err;
    EXPECT_EQ(r.err.find("json.exception"), std::string::npos) << r.err;
  }
}

// A Slurm sweep's sweep.json that is damaged or edited is named with the field and what is
// wrong with it, in words.
TEST_F(CliSweepLimits, AMalformedSweepJsonIsSaidInWords) {
  const std::filesystem::path folder = dir_ / "sw";
  std::filesystem::create_directories(folder);
  const std::string file = (folder / "sweep.json").string();
  const std::string head =
      R"({"format": "fp8wb Slurm sweep", "sweep_uuid": "u", "sweep_name": "s", )";
  const std::pair<std::string, std::string> cases[] = {
      {"{\"format\": ", "it is not valid JSON at line 1, column 12: unexpected end of input"},
      {R"({"format": "something else"})",
       "its field 'format' is not \"fp8wb Slurm sweep\": not a file `fp8wb sweep --slurm` "
       "wrote"},
      {head + R"("db": "x", "job": "1", "trials": []})", "field 'sweep_id' is missing"},
      {head + R"("sweep_id": 1.5, "db": "x", "job": "1", "trials": []})",
       "field 'sweep_id' is a number that is not a whole one within range, not a whole number"},
      {head + R"("sweep_id": 1, "db": "x", "job": "1", "trials": [{"key": "k", "name": "n", )" +
           R"("uuid": 5, "config": {}}]})",
       "field 'trials[0].uuid' is a number, not text"},
      {head + R"("sweep_id": 1, "db": "x", "job": "1", "trials": [{"key": "k", "name": "n", )" +
           R"("uuid": "u", "config": {"steps": "many"}}]})",
       "field 'trials[0].config': config field 'steps': expected an integer"},
  };
  for (const auto& [text, said] : cases) {
    std::ofstream(file) << text;
    const auto r = run({"sweep", "--collect", folder.string(), "--db", path_});
    EXPECT_EQ(r.rc, 1) << text;
    EXPECT_NE(r.err.find(file + " cannot be read as a sweep's description: " + said),
              std::string::npos)
        << text << "\n"
        << r.err;
    EXPECT_EQ(r.err.find("json.exception"), std::string::npos) << r.err;
  }
}

// A message that quotes a long input (an id, a path, an option's value) cuts it at 200
// characters with "…", whoever wrote it: fp8wb's own messages and CLI11's.
TEST_F(CliSweepLimits, LongInputsAreCutInMessages) {
  const std::string longer(5000, 'x');
  const std::vector<std::vector<std::string>> cases = {
      {"runs", "show", longer, "--db", path_},
      {"sweep", "--collect", (dir_ / longer).string(), "--db", path_},
      {"sweep", "--resume", longer, "--db", path_},
      {"runs", "import", (dir_ / longer).string(), "--db", path_},
  };
  for (const auto& args : cases) {
    const auto r = run(args);
    EXPECT_NE(r.rc, 0) << args[1];
    EXPECT_LT(r.err.size(), 600u) << r.err;
    EXPECT_NE(r.err.find(std::string(100, 'x')), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("x…"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(std::string(201, 'x')), std::string::npos) << r.err;
  }
}

// The tables' cut: whole characters, the mark counted as one, padding to the column.
TEST(TableText, CutsWholeCharactersWithAMark) {
  using fp8wb::cli::cut_text;
  using fp8wb::cli::fit_column;
  EXPECT_EQ(cut_text("abcdef", 6), "abcdef");
  EXPECT_EQ(cut_text("abcdefg", 6), "abcde…");
  EXPECT_EQ(cut_text("αβγδεζη", 4), "αβγ…");
  EXPECT_EQ(fit_column("ab", 4), "ab  ");
  EXPECT_EQ(fit_column("αβγδεζη", 4), "αβγ…");
  EXPECT_EQ(fit_column("αβ", 3), "αβ ");
}

}  // namespace
