// fp8wb runs import, in-process: runs trained into one database come into another with
// their steps, and a second import adds nothing; a damaged file is refused by name and
// the target keeps its runs. fp8wb train --run-uuid takes only a UUID, once a database. fp8wb sweep
// --slurm without sbatch on PATH and --collect of a missing folder fail clearly and store
// nothing (the rest of the Slurm path runs against a real Slurm: cli_slurm_test.cpp).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_run.h"
#include "fp8wb/core/store/run_store.h"
#include "peak_memory.h"
#include "sql_file.h"
#include "temp_dir_test.h"

namespace {

using fp8wb::test::run;

class CliImport : public fp8wb::test::TempDirTest {
 protected:
  CliImport() : TempDirTest("fp8wb-cli-import") {}
  std::string file(const char* name) const { return (dir_ / name).string(); }
  fp8wb::test::Result train(const std::string& db, const std::string& name) {
    return run({"train", "--db", db, "--set", "model=mlp", "--set", "steps=4", "--set",
                "name=" + name, "--quiet"});
  }
};

// The binary's peak resident memory (KiB, that process's own) importing `source` into
// `target`; -1 where it did not end with status 0.
long import_peak_kib(const std::string& source, const std::string& target) {
  return fp8wb::test::binary_peak_kib(FP8WB_BINARY, {"runs", "import", source, "--db", target});
}

// A run holding a 48 MiB blob (an error map) comes over whole, byte for byte; on its way
// the blob is held at most twice at once (its value read from the source, the target's
// record), not three times (a copy for the binding besides): the binary's peak over an
// import of a run without it stays under 2.4 times the blob.
TEST_F(CliImport, ALargeBlobIsCopiedWholeAndHeldTwiceAtMost) {
  const std::string plain = file("plain.sqlite"), big = file("big.sqlite");
  ASSERT_EQ(train(plain, "plain").rc, 0);
  ASSERT_EQ(train(big, "big").rc, 0);
  constexpr int64_t kRows = 12288, kCols = 1024;  // 48 MiB of float32
  std::string data(static_cast<size_t>(kRows * kCols * 4), '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 131 + i / 4093) & 0xff);
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(big.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* ins = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db,
                                 "INSERT INTO blobs(run_id, step, layer, role, kind, shape, data) "
                                 "VALUES(1, 0, 'fc1', 'weight', 'error_map', ?, ?)",
                                 -1, &ins, nullptr),
              SQLITE_OK);
    const std::string shape = std::to_string(kRows) + "," + std::to_string(kCols);
    sqlite3_bind_text(ins, 1, shape.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_blob(ins, 2, data.data(), static_cast<int>(data.size()), SQLITE_STATIC);
    EXPECT_EQ(sqlite3_step(ins), SQLITE_DONE) << sqlite3_errmsg(db);
    sqlite3_finalize(ins);
    sqlite3_close(db);
  }
  const long without = import_peak_kib(plain, file("target-plain.sqlite"));
  const long with = import_peak_kib(big, file("target-big.sqlite"));
  ASSERT_GT(without, 0);
  ASSERT_GT(with, 0) << "the import failed";
  const long blob_kib = static_cast<long>(data.size() / 1024);
  if (fp8wb::test::kPeakIsTheProgramsOwn)
    EXPECT_LT(with - without, blob_kib * 12 / 5)
        << "the 48 MiB blob took " << with - without << " KiB more at peak ("
        << static_cast<double>(with - without) / static_cast<double>(blob_kib) << " times it)";
  // The copy is the source's.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(file("target-big.sqlite").c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
            SQLITE_OK);
  sqlite3_stmt* q = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db,
                               "SELECT shape, data FROM blobs WHERE kind = 'error_map' AND "
                               "layer = 'fc1' AND role = 'weight' AND step = 0",
                               -1, &q, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(sqlite3_column_text(q, 0))), "12288,1024");
  const auto* p = static_cast<const char*>(sqlite3_column_blob(q, 1));
  ASSERT_EQ(static_cast<size_t>(sqlite3_column_bytes(q, 1)), data.size());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), p));
  sqlite3_finalize(q);
  sqlite3_close(db);
}

// A run database given as a loop of symbolic links is said to be one, by every command
// that opens it (not "no run database", nor SQLite's "unable to open"); a link to nothing
// names where it leads. Nothing is created.
TEST_F(CliImport, ALinkLoopIsSaidToBeOne) {
  namespace fs = std::filesystem;
  fs::create_symlink(file("loop-b.sqlite"), file("loop-a.sqlite"));
  fs::create_symlink(file("loop-a.sqlite"), file("loop-b.sqlite"));
  const std::string loop = file("loop-a.sqlite");
  const std::vector<std::vector<std::string>> commands = {
      {"runs", "list", "--db", loop},
      {"runs", "show", "1", "--db", loop},
      {"train", "--db", loop, "--set", "model=mlp", "--set", "steps=1", "--quiet"},
      {"runs", "import", loop, "--db", file("target.sqlite")},
      {"replay", "1", "--db", loop},
  };
  for (const auto& args : commands) {
    const auto r = run(args);
    EXPECT_NE(r.rc, 0) << args[0];
    EXPECT_NE(r.err.find(loop), std::string::npos) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("a loop of symbolic links"), std::string::npos)
        << args[0] << " " << args[1] << ": " << r.err;
  }
  fs::create_symlink(file("gone.sqlite"), file("dangling.sqlite"));
  const auto r = run({"runs", "list", "--db", file("dangling.sqlite")});
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("a symbolic link to " + file("gone.sqlite") + ", which is not there"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(file("gone.sqlite")));
}

TEST_F(CliImport, RunsComeOnceWithTheirSteps) {
  ASSERT_EQ(train(file("server.sqlite"), "on the server").rc, 0);
  ASSERT_EQ(train(file("server.sqlite"), "second").rc, 0);
  ASSERT_EQ(train(file("laptop.sqlite"), "here").rc, 0);
  auto r = run({"runs", "import", file("server.sqlite"), "--db", file("laptop.sqlite"), "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["added"], 2);
  EXPECT_EQ(j["unchanged"], 0);
  r = run({"runs", "import", file("server.sqlite"), "--db", file("laptop.sqlite")});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("0 new, 0 updated, 2 already here"), std::string::npos) << r.out;
  r = run({"runs", "list", "--db", file("laptop.sqlite"), "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[1]["name"], "on the server");
  EXPECT_EQ(j[1]["steps"], 4);
  EXPECT_EQ(j[2]["name"], "second");
  // `runs show` still takes a number, and says so.
  r = run({"runs", "show", "two", "--db", file("laptop.sqlite")});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("run id must be a positive whole number (1 to 9223372036854775807), not "
                       "'two'"),
            std::string::npos)
      << r.err;
  r = run({"runs", "show", "2", "--db", file("laptop.sqlite")});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("on the server"), std::string::npos) << r.out;

  {
    std::ofstream f(file("broken.sqlite"));
    f << std::string(5000, '#');
  }
  r = run({"runs", "import", file("broken.sqlite"), "--db", file("laptop.sqlite")});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find(file("broken.sqlite")), std::string::npos) << r.err;
  r = run({"runs", "import", "--db", file("laptop.sqlite")});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("which database"), std::string::npos) << r.err;
  r = run({"runs", "list", "--db", file("laptop.sqlite"), "--json"});
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 3u);
}

// A file that is no SQLite database at all (a text file given by mistake) is called that,
// by name; an SQLite run database with a damaged page is still called damaged.
TEST_F(CliImport, ATextFileIsNotCalledADamagedDatabase) {
  ASSERT_EQ(train(file("laptop.sqlite"), "here").rc, 0);
  {
    std::ofstream f(file("notes.txt"));
    f << "step,loss\n1,4.2\n2,3.9\n";
  }
  auto r = run({"runs", "import", file("notes.txt"), "--db", file("laptop.sqlite")});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find(file("notes.txt") + " is not a run database (not an SQLite file)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("damaged"), std::string::npos) << r.err;

  // A run database whose pages past the first are overwritten.
  for (int i = 0; i < 6; ++i) ASSERT_EQ(train(file("server.sqlite"), "run").rc, 0);
  const auto size = std::filesystem::file_size(file("server.sqlite"));
  ASSERT_GT(size, 16384u);
  {
    std::fstream f(file("server.sqlite"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096);
    const std::string garbage(size - 4096, '\x5a');
    f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  r = run({"runs", "import", file("server.sqlite"), "--db", file("laptop.sqlite")});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find(file("server.sqlite")), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("damaged"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("not an SQLite file"), std::string::npos) << r.err;
  r = run({"runs", "list", "--db", file("laptop.sqlite"), "--json"});
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 1u);
}

namespace sql = fp8wb::test::sql;

// Another program's SQLite file given as --db is refused, by train and by runs, and left
// as it was; `runs list` does not invite migrating it.
TEST_F(CliImport, AnotherProgramsDatabaseIsRefusedAndLeftAsItIs) {
  const std::string foreign = file("foreign.sqlite");
  sql::exec(foreign, "CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT)");
  const std::string before = sql::bytes(foreign);
  auto r = run({"train", "--db", foreign, "--set", "model=mlp", "--set", "steps=2", "--quiet"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find(foreign + " is an SQLite database of another program (it has the table "
                                 "customers; no FP8 Workbench runs)"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(sql::bytes(foreign) == before) << "the file changed";
  for (const char* action : {"list", "delete"}) {
    r = run({"runs", action, "--db", foreign});
    EXPECT_EQ(r.rc, 1) << action;
    EXPECT_NE(r.err.find("another program"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("migrate"), std::string::npos) << r.err;
    EXPECT_TRUE(sql::bytes(foreign) == before) << "the file changed";
  }
  r = run({"runs", "list", "--db", foreign});
  EXPECT_NE(r.err.find("not an FP8 Workbench database"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(foreign + "-wal"));

  // An empty file is a database with no runs, to list and to import, and takes runs.
  { std::ofstream f(file("empty.sqlite")); }
  r = run({"runs", "list", "--db", file("empty.sqlite")});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("no runs in " + file("empty.sqlite")), std::string::npos) << r.out;
  r = run({"runs", "import", file("empty.sqlite"), "--db", file("laptop.sqlite")});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("0 new, 0 updated, 0 already here"), std::string::npos) << r.out;
  EXPECT_EQ(std::filesystem::file_size(file("empty.sqlite")), 0u);
  ASSERT_EQ(train(file("empty.sqlite"), "first").rc, 0);
  r = run({"runs", "list", "--db", file("empty.sqlite"), "--json"});
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 1u) << r.out;
}

// One row with a status this fp8wb does not know: listed as unknown, and every command
// about the other runs works; the row can be deleted.
TEST_F(CliImport, ARunWithAnUnknownStatusLeavesTheOthersUsable) {
  ASSERT_EQ(train(path_, "bad").rc, 0);
  ASSERT_EQ(train(path_, "good").rc, 0);
  sql::exec(path_, "UPDATE runs SET status = 'bogus' WHERE id = 1");
  auto r = run({"runs", "list", "--db", path_});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("unknown (bogus)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("good"), std::string::npos) << r.out;
  r = run({"runs", "list", "--db", path_, "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["status"], "unknown (bogus)");
  EXPECT_EQ(j[1]["status"], "finished");
  r = run({"runs", "show", "2", "--db", path_});
  EXPECT_EQ(r.rc, 0) << r.err;
  r = run({"runs", "show", "1", "--db", path_});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("unknown (bogus)"), std::string::npos) << r.out;
  r = run({"runs", "export", "2", "--db", path_, "--format", "json"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["run"]["name"], "good");
  r = run({"runs", "delete", "1", "-y", "--db", path_});
  EXPECT_EQ(r.rc, 0) << r.err;
  r = run({"runs", "list", "--db", path_, "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 1u);
}

// A step that is not a whole number in the source (another program's row: text in the
// INTEGER column) is named with the source, the run, the table and the value, and nothing
// is imported; it read as step 0 and failed as "UNIQUE constraint failed" against the
// target, naming neither.
TEST_F(CliImport, AStepThatIsNoWholeNumberIsNamedInTheSource) {
  ASSERT_EQ(train(file("source.sqlite"), "texty").rc, 0);
  const std::pair<const char*, std::string> cases[] = {
      {"UPDATE scalars SET step = 'three' WHERE step = 3 AND series_id = "
       "(SELECT id FROM series WHERE name = 'loss')",
       "series \"loss\" has a step that is not a whole number: the text \"three\""},
      {"UPDATE events SET step = 0.5 WHERE id = (SELECT MIN(id) FROM events)",
       "events has a step that is not a whole number: the number 0.5"},
  };
  for (const auto& [edit, said] : cases) {
    const std::string copy = file("copy.sqlite");
    std::filesystem::copy_file(file("source.sqlite"), copy,
                               std::filesystem::copy_options::overwrite_existing);
    sql::exec(copy, edit);
    const auto r = run({"runs", "import", copy, "--db", path_});
    EXPECT_EQ(r.rc, 1) << edit;
    EXPECT_NE(
        r.err.find(copy + ": run 1 (\"texty\"): a row of its " + said + "; nothing was imported"),
        std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("UNIQUE"), std::string::npos) << r.err;
    const auto list = run({"runs", "list", "--db", path_, "--json"});
    ASSERT_EQ(list.rc, 0) << list.err;
    EXPECT_EQ(nlohmann::json::parse(list.out).size(), 0u) << list.out;
  }
}

// A FIFO where the database should be is said to be one, not a missing database.
TEST_F(CliImport, AFifoIsNotARegularFile) {
  ASSERT_EQ(mkfifo(file("fifo").c_str(), 0600), 0);
  for (const char* action : {"list", "show"}) {
    std::vector<std::string> args = {"runs", action, "--db", file("fifo")};
    if (std::string(action) == "show") args.insert(args.begin() + 2, "1");
    const auto r = run(args);
    EXPECT_EQ(r.rc, 1) << action;
    EXPECT_NE(r.err.find(file("fifo") + " is not a regular file"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("no run database"), std::string::npos) << r.err;
  }
}

TEST_F(CliImport, TrainTakesARunIdentity) {
  const std::string uuid = "0123abcd-0000-4000-8000-00000000beef";
  auto r = run({"train", "--db", path_, "--set", "model=mlp", "--set", "steps=2", "--quiet",
                "--run-uuid", uuid});
  ASSERT_EQ(r.rc, 0) << r.err;
  {
    auto s = fp8wb::RunStore::open_read_only(path_);
    EXPECT_EQ(s->runs().at(0).uuid, uuid);
  }
  // An identity is one run's: a second run with it is refused before it starts.
  r = run({"train", "--db", path_, "--set", "model=mlp", "--set", "steps=2", "--quiet",
           "--run-uuid", uuid});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("already holds a run with the identity " + uuid), std::string::npos)
      << r.err;
  EXPECT_EQ(fp8wb::RunStore::open_read_only(path_)->runs().size(), 1u);
  r = run({"train", "--db", path_, "--set", "model=mlp", "--set", "steps=2", "--quiet",
           "--run-uuid", "banana"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("--run-uuid takes a UUID"), std::string::npos) << r.err;
}

TEST_F(CliImport, SlurmWithoutSbatchStoresNothing) {
  // No sbatch on PATH.
  const std::string old_path = std::getenv("PATH") ? std::getenv("PATH") : "";
  std::filesystem::create_directories(dir_ / "empty-bin");
  setenv("PATH", (dir_ / "empty-bin").c_str(), 1);
  auto r = run({"sweep", "--db", path_, "--set", "model=mlp", "--grid", "margin=0,1", "--slurm",
                "--slurm-dir", file("sw")});
  setenv("PATH", old_path.c_str(), 1);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("sbatch cannot be run"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "sw" / "sweep.json"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "sw" / "trials"));
  // No sweep stored: no database made at all.
  EXPECT_FALSE(std::filesystem::exists(path_));
  // Collecting a folder that is not there, or a bad grid before anything is submitted.
  r = run({"sweep", "--collect", file("nowhere"), "--db", path_});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("no sweep folder at " + file("nowhere")), std::string::npos) << r.err;
  r = run({"sweep", "--db", path_, "--grid", "margin=0,banana", "--slurm"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("margin"), std::string::npos) << r.err;
  r = run({"sweep", "--db", path_, "--grid", "margin=0,1", "--partition", "gpu"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("go with --slurm"), std::string::npos) << r.err;
}

void write_program(const std::filesystem::path& path, const std::string& text) {
  {
    std::ofstream f(path);
    f << text;
  }
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
}

// A submission that fails makes no database, and one that was there
// before keeps what it held; sbatch's own words say why. A job sbatch takes is recorded
// in a database made then.
TEST_F(CliImport, FailedSlurmSubmissionsMakeNoDatabase) {
  const std::string old_path = std::getenv("PATH") ? std::getenv("PATH") : "";
  const std::filesystem::path bin = dir_ / "bin";
  std::filesystem::create_directories(bin);
  const std::string db = file("new.sqlite");
  auto submit = [&](const std::string& database, const char* folder) {
    setenv("PATH", bin.c_str(), 1);
    auto r = run({"sweep", "--db", database, "--set", "model=mlp", "--grid", "margin=0,1",
                  "--slurm", "--slurm-dir", file(folder)});
    setenv("PATH", old_path.c_str(), 1);
    return r;
  };
  // No sbatch at all.
  auto r = submit(db, "sw1");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("sbatch cannot be run"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(db));
  // An sbatch that refuses the job, as a cluster does for a partition it lacks.
  write_program(bin / "sbatch",
                "#!/bin/sh\necho 'sbatch: error: Batch job submission failed: Invalid partition "
                "name specified' >&2\nexit 1\n");
  r = submit(db, "sw2");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("sbatch refused the job"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Invalid partition name specified"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(db));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "sw2" / "sweep.json"));
  // A database that was there keeps its runs and gains no sweep.
  ASSERT_EQ(train(path_, "before").rc, 0);
  r = submit(path_, "sw3");
  EXPECT_EQ(r.rc, 1);
  {
    auto s = fp8wb::RunStore::open_read_only(path_);
    EXPECT_TRUE(s->sweeps().empty());
    ASSERT_EQ(s->runs().size(), 1u);
    EXPECT_EQ(s->runs()[0].name, "before");
  }
  // Taken: the database is made with the sweep in it.
  write_program(bin / "sbatch", "#!/bin/sh\necho 4242\n");
  r = submit(db, "sw4");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("job array 4242"), std::string::npos) << r.out;
  {
    auto s = fp8wb::RunStore::open_read_only(db);
    ASSERT_EQ(s->sweeps().size(), 1u);
  }
  EXPECT_TRUE(std::filesystem::exists(dir_ / "sw4" / "sweep.json"));
}

}  // namespace

namespace {

using fp8wb::test::Result;

// A database imported into itself (by its path or another path to it) is refused, and
// its runs stay as they were.
TEST_F(CliImport, ADatabaseIsNotImportedIntoItself) {
  ASSERT_EQ(train(file("one.sqlite"), "only").rc, 0);
  for (const std::string& other : {file("one.sqlite"), (dir_ / "." / "one.sqlite").string()}) {
    const Result r = run({"runs", "import", other, "--db", file("one.sqlite")});
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.err.find("fp8wb runs import: " + other + " is the run database itself (--db " +
                         file("one.sqlite") + "): a database cannot be imported into itself"),
              std::string::npos)
        << r.err;
  }
  const Result list = run({"runs", "list", "--db", file("one.sqlite"), "--json"});
  ASSERT_EQ(list.rc, 0) << list.err;
  EXPECT_EQ(nlohmann::json::parse(list.out).size(), 1u);
}

// `runs list` takes no run: a word after it is said to be not expected, not checked as
// a run id.
TEST_F(CliImport, RunsListSaysAnExtraArgumentIsNotExpected) {
  ASSERT_EQ(train(file("one.sqlite"), "only").rc, 0);
  const Result r = run({"runs", "list", "extra", "--db", file("one.sqlite")});
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("fp8wb runs list: 'extra' is not expected: list takes no run"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("run id"), std::string::npos) << r.err;
}

// An empty --db names no database: refused by every command that takes one, and the
// default database is not touched.
TEST_F(CliImport, AnEmptyDbPathIsRefused) {
  const std::string xdg = (dir_ / "xdg").string();
  const char* before = std::getenv("XDG_DATA_HOME");
  const std::string kept = before ? before : "";
  setenv("XDG_DATA_HOME", xdg.c_str(), 1);
  const std::vector<std::vector<std::string>> commands = {
      {"runs", "list", "--db", ""},
      {"runs", "import", file("x.sqlite"), "--db", ""},
      {"train", "--db", "", "--quiet", "--set", "model=mlp", "--set", "steps=1"},
      {"sweep", "--db", "", "--quiet", "--grid", "window=1,2", "--set", "model=mlp", "--set",
       "steps=1"}};
  for (const auto& args : commands) {
    const Result r = run(args);
    EXPECT_EQ(r.rc, 2) << args[0] << " " << r.out;
    EXPECT_NE(r.err.find("--db"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("an empty path names no run database"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(xdg + "/fp8-workbench/runs.sqlite"));
  if (before)
    setenv("XDG_DATA_HOME", kept.c_str(), 1);
  else
    unsetenv("XDG_DATA_HOME");
}

// A name of blanks only shows as nothing, and bytes that are not UTF-8 cannot be shown:
// refused for a run's config name, a sweep's --name and a rename; names of any script
// stay welcome.
TEST_F(CliImport, BlankAndNonUtf8NamesAreRefused) {
  for (const std::string name : {"   ", "\xc2\xa0\xe3\x80\x80"}) {
    const Result r = run({"train", "--db", file("n.sqlite"), "--quiet", "--set", "model=mlp",
                          "--set", "steps=1", "--set", "name=" + name});
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.err.find("config field 'name': is blank (spaces only)"), std::string::npos)
        << r.err;
  }
  for (const std::string name : {"bad\xff", "cut\xe4\xb8", "over\xc0\xaf"}) {
    const Result r = run({"train", "--db", file("n.sqlite"), "--quiet", "--set", "model=mlp",
                          "--set", "steps=1", "--set", "name=" + name});
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.err.find("config field 'name': is not valid UTF-8 text"), std::string::npos)
        << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(file("n.sqlite")));
  Result r = run({"sweep", "--db", file("n.sqlite"), "--quiet", "--name", "  ", "--grid",
                  "window=1,2", "--set", "model=mlp", "--set", "steps=1"});
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.err.find("the sweep's name is blank (spaces only)"), std::string::npos) << r.err;
  r = run({"sweep", "--db", file("n.sqlite"), "--quiet", "--name", "sw\xfe", "--grid", "window=1,2",
           "--set", "model=mlp", "--set", "steps=1"});
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.err.find("the sweep's name is not valid UTF-8 text"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(file("n.sqlite")));
  ASSERT_EQ(train(file("n.sqlite"), "Schrödinger’s run 中文 😀").rc, 0);
  auto store = fp8wb::RunStore::open(file("n.sqlite"));
  for (const std::string name : {" ", "\xff"}) {
    EXPECT_THROW(store->rename_run(1, name), std::invalid_argument) << name;
  }
  store->rename_run(1, "a new name");
  EXPECT_EQ(store->run(1)->name, "a new name");
}

// The number of spaces after `name` on the line that holds it.
size_t spaces_after(const std::string& text, const std::string& name) {
  size_t at = text.find(name);
  if (at == std::string::npos) return 0;
  at += name.size();
  size_t n = 0;
  while (at + n < text.size() && text[at + n] == ' ') ++n;
  return n;
}

// `runs list` pads names to the columns a terminal gives them: a CJK character or an
// emoji takes two, so the columns after the names line up.
TEST_F(CliImport, RunsListAlignsNamesByDisplayWidth) {
  ASSERT_EQ(train(file("w.sqlite"), "plain").rc, 0);
  ASSERT_EQ(train(file("w.sqlite"), "中文名字").rc, 0);
  ASSERT_EQ(train(file("w.sqlite"), "a😀").rc, 0);
  const Result r = run({"runs", "list", "--db", file("w.sqlite")});
  ASSERT_EQ(r.rc, 0) << r.err;
  // The name column is 24 columns wide, then one space.
  EXPECT_EQ(spaces_after(r.out, "plain"), 24u - 5u + 1u) << r.out;
  EXPECT_EQ(spaces_after(r.out, "中文名字"), 24u - 8u + 1u) << r.out;
  EXPECT_EQ(spaces_after(r.out, "a😀"), 24u - 3u + 1u) << r.out;
}

// Seeds go up to 2^53 (core/src/README.md, "Limits"): one past it is refused, though
// it converts to 2^53 as a double; 2^53 itself is taken.
TEST_F(CliImport, SeedsPast2To53AreRefused) {
  Result r = run({"train", "--db", file("s.sqlite"), "--quiet", "--set", "model=mlp", "--set",
                  "steps=1", "--set", "seed=9007199254740993"});
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(
      r.err.find("config field 'seed': must be at most 9007199254740992, not 9007199254740993"),
      std::string::npos)
      << r.err;
  r = run({"train", "--db", file("s.sqlite"), "--quiet", "--set", "model=mlp", "--set", "steps=1",
           "--set", "seed=9007199254740992"});
  EXPECT_EQ(r.rc, 0) << r.err;
}

// A value of the wrong type is named once, with its type where the text alone does not
// say it ("null", not "null null").
TEST_F(CliImport, AWrongTypeIsSaidOnce) {
  Result r = run(
      {"train", "--db", file("t.sqlite"), "--quiet", "--set", "model=mlp", "--set", "steps=null"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("config field 'steps': expected an integer, got null\n"), std::string::npos)
      << r.err;
  r = run(
      {"train", "--db", file("t.sqlite"), "--quiet", "--set", "model=mlp", "--set", "steps=[1,2]"});
  EXPECT_NE(r.err.find("config field 'steps': expected an integer, got an array [1,2]"),
            std::string::npos)
      << r.err;
  r = run({"train", "--db", file("t.sqlite"), "--quiet", "--set", "model=mlp", "--set", "lr=null"});
  EXPECT_NE(r.err.find("config field 'lr': expected a number, got null\n"), std::string::npos)
      << r.err;
}

}  // namespace
