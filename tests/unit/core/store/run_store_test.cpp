// The run store: what is written reads back identically after reopening, runs left
// running are marked interrupted, deletes cascade, readers work while the writer
// writes, and bad files give clear errors.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <functional>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "sql_file.h"
#include "temp_dir_test.h"

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/store/run_store.h"

namespace fp8wb {
namespace {

class RunStoreTest : public fp8wb::test::TempDirTest {
 protected:
  RunStoreTest() : TempDirTest("fp8wb-store", "sub/runs.sqlite") {}
};

MetricBatch step_batch(int64_t run, int64_t step) {
  MetricBatch b;
  b.run_id = run;
  StepMetrics m;
  m.step = step;
  m.loss = 3.0 / (1.0 + static_cast<double>(step));
  m.ref_loss = step % 2 ? std::nan("") : m.loss * 0.99;
  m.loss_gap = m.loss - m.ref_loss;
  m.grad_norm = 0.5;
  m.lr = 1e-3;
  m.tokens_per_s = 1000;
  m.step_ms = 2.5;
  b.steps.push_back(m);
  TensorMetrics t;
  t.step = step;
  t.layer = "blocks.0.fc1";
  t.role = Role::Input;
  t.amax = 2.5f + static_cast<float>(step);
  t.scale = 448.0f / t.amax;
  t.raw.numel = 1024;
  t.raw.underflow = static_cast<uint64_t>(step);
  t.raw.hist[3] = 7;
  t.raw.hist[5] = (uint64_t{1} << 40) + 3;  // a count that needs many varint bytes
  t.map_grid.rows = 2;
  t.map_grid.cols = 3;
  t.map_rel_error = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
  b.tensors.push_back(t);
  b.sqnr.push_back({step, "blocks.0.fc1", 30.0, 20.0, 21.0});
  return b;
}

TEST_F(RunStoreTest, ReopensWithIdenticalSeries) {
  int64_t id = 0;
  {
    auto s = RunStore::open(path_);
    EXPECT_EQ(s->schema_version(), RunStore::kSchemaVersion);
    id = s->create_run("first", fp8wb::RunKind::Train, R"({"a": 1})", "cpu");
    for (int64_t step = 0; step < 50; ++step) s->write(step_batch(id, step));
    MetricBatch end;
    end.run_id = id;
    end.final = true;
    end.status = RunStatus::Finished;
    end.events.push_back({49, fp8wb::RunEventKind::Finished, "", {}});
    s->write(end);
    s->flush();
  }
  auto s = RunStore::open(path_);
  const auto r = s->run(id);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, RunStatus::Finished);
  EXPECT_EQ(r->name, "first");
  EXPECT_EQ(r->last_step, 49);
  EXPECT_FALSE(r->ended_at.empty());
  const auto loss = s->series(id, "loss");
  ASSERT_EQ(loss.size(), 50u);
  for (int64_t i = 0; i < 50; ++i) {
    EXPECT_EQ(loss[static_cast<size_t>(i)].step, i);
    EXPECT_EQ(loss[static_cast<size_t>(i)].value, 3.0 / (1.0 + static_cast<double>(i)));
  }
  const auto ref = s->series(id, "ref_loss");
  EXPECT_TRUE(std::isnan(ref[1].value));  // NaN goes in as NULL and comes back as NaN
  EXPECT_FALSE(std::isnan(ref[2].value));
  const auto ts = s->tensor_stats(id, "blocks.0.fc1", "input");
  ASSERT_EQ(ts.size(), 50u);
  EXPECT_FLOAT_EQ(static_cast<float>(ts[10].amax), 12.5f);
  EXPECT_EQ(ts[10].raw.underflow, 10u);
  const auto maps = s->blobs(id, "error_map");
  ASSERT_EQ(maps.size(), 50u);
  EXPECT_EQ(maps[0].shape, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(maps[0].data.size(), 6 * sizeof(float));
  float cells[6];
  std::memcpy(cells, maps[0].data.data(), sizeof cells);
  EXPECT_FLOAT_EQ(cells[5], 0.6f);
  EXPECT_TRUE(s->blobs(id, "histogram").empty());  // histograms live in tensor_stats
  ASSERT_EQ(std::size(ts[10].raw.hist), static_cast<size_t>(kHistBins));
  EXPECT_EQ(ts[10].raw.hist[3], 7u);
  EXPECT_EQ(ts[10].raw.hist[2] + ts[10].raw.hist[4], 0u);
  EXPECT_EQ(ts[10].raw.hist[5], (uint64_t{1} << 40) + 3);
  EXPECT_EQ(s->series(id, "sqnr/blocks.0.fc1/fprop").size(), 50u);
  ASSERT_EQ(s->events(id).size(), 1u);
  EXPECT_EQ(s->integrity_check(), "ok");
}

TEST_F(RunStoreTest, RunsLeftRunningBecomeInterrupted) {
  {
    auto s = RunStore::open(path_);
    const int64_t id = s->create_run("killed", fp8wb::RunKind::Train, "{}", "cpu");
    s->write(step_batch(id, 0));
    s->flush();
    // A run whose process is gone (pid 0 never exists as a user process).
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "UPDATE runs SET owner_pid = 0", nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
    // Readers see at once that nobody writes the run any more, before anything marks it.
    EXPECT_EQ(s->runs()[0].status, RunStatus::Interrupted);
    EXPECT_FALSE(s->runs()[0].live);
  }
  auto s = RunStore::open(path_);
  const auto runs = s->runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, RunStatus::Interrupted);
  EXPECT_EQ(runs[0].last_step, 0);
}

// A run whose recorded writer is a live process that is not its writer: one started after
// the run (its number reused once the writer ended, or after a restart). The run reads as
// interrupted, not live, and opening the file for writing marks it so; a run whose writer
// started before it (this process) is live.
TEST_F(RunStoreTest, ALiveProcessStartedAfterTheRunIsNotItsWriter) {
  auto s = RunStore::open(path_);
  const int64_t id = s->create_run("orphan", fp8wb::RunKind::Train, "{}", "cpu");
  s->write(step_batch(id, 0));
  s->flush();
  const pid_t other = ::fork();
  if (other == 0) {
    ::pause();
    ::_exit(0);
  }
  ASSERT_GT(other, 0);
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    const std::string sql =
        "UPDATE runs SET owner_pid = " + std::to_string(other) +
        ", started_at = '2020-01-01T00:00:00Z' WHERE id = " + std::to_string(id);
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  ASSERT_EQ(::kill(other, 0), 0);  // alive
  EXPECT_FALSE(s->run(id)->live);
  EXPECT_EQ(s->run(id)->status, RunStatus::Interrupted);
  const int64_t mine = s->create_run("mine", fp8wb::RunKind::Train, "{}", "cpu");
  EXPECT_TRUE(s->run(mine)->live);
  s.reset();
  {
    auto again = RunStore::open(path_);
    EXPECT_EQ(again->run(id)->status, RunStatus::Interrupted);
  }
  ::kill(other, SIGKILL);
  ::waitpid(other, nullptr, 0);
}

// A data-parallel run's launcher puts how its ranks ended in front of the message of the
// run that rank 0 left failed or interrupted (which then reads failed); nothing else of
// that run or of other runs changes.
TEST_F(RunStoreTest, HowARunEndedIsPutBeforeItsMessageAndNothingElse) {
  auto s = RunStore::open(path_);
  const std::string u1 = new_uuid(), u2 = new_uuid(), u3 = new_uuid(), u4 = new_uuid();
  const int64_t failed = s->create_run("failed", fp8wb::RunKind::Train, "{}", "cpu", 0, u1);
  const int64_t finished = s->create_run("finished", fp8wb::RunKind::Train, "{}", "cpu", 0, u2);
  const int64_t quiet = s->create_run("quiet", fp8wb::RunKind::Train, "{}", "cpu", 0, u3);
  const int64_t live = s->create_run("live", fp8wb::RunKind::Train, "{}", "cpu", 0, u4);
  for (int64_t i = 0; i < 3; ++i) s->write(step_batch(failed, i));
  s->set_status(failed, RunStatus::Failed, "rank 0: exchanging gradients failed");
  s->set_status(finished, RunStatus::Finished, "done");
  s->set_status(quiet, RunStatus::Failed);
  s->flush();
  const RunInfo before = *s->run(failed);
  const int64_t me = getpid();
  // Another writer's pid: not this run.
  EXPECT_FALSE(s->note_how_run_ended(u1, me + 1, "rank 1 (pid 7) was killed by signal 9"));
  EXPECT_TRUE(s->note_how_run_ended(u1, me, "rank 1 (pid 7) was killed by signal 9"));
  const RunInfo after = *s->run(failed);
  EXPECT_EQ(after.message,
            "rank 1 (pid 7) was killed by signal 9; rank 0: exchanging gradients failed");
  EXPECT_EQ(after.status, RunStatus::Failed);
  EXPECT_EQ(after.ended_at, before.ended_at);
  EXPECT_EQ(after.last_step, 2);
  EXPECT_EQ(s->series(failed, "loss").size(), 3u);
  // A finished run and a running one are left as they are; an empty message becomes the note.
  EXPECT_FALSE(s->note_how_run_ended(u2, me, "rank 1 (pid 7) was killed by signal 9"));
  EXPECT_EQ(s->run(finished)->message, "done");
  EXPECT_FALSE(s->note_how_run_ended(u4, me, "rank 1 (pid 7) was killed by signal 9"));
  EXPECT_EQ(s->run(live)->status, RunStatus::Running);
  EXPECT_TRUE(s->note_how_run_ended(u3, me, "rank 1 (pid 7) ended with exit code 1"));
  EXPECT_EQ(s->run(quiet)->message, "rank 1 (pid 7) ended with exit code 1");
  // A run left interrupted (rank 0, its writer, killed) failed: said so, not "interrupted".
  const std::string u5 = new_uuid();
  const int64_t killed = s->create_run("killed", fp8wb::RunKind::Train, "{}", "cpu", 0, u5);
  s->set_status(killed, RunStatus::Interrupted, "the process writing this run ended");
  s->flush();
  EXPECT_TRUE(s->note_how_run_ended(u5, me, "rank 0 (pid 7) was killed by signal 9"));
  EXPECT_EQ(s->run(killed)->status, RunStatus::Failed);
  EXPECT_EQ(s->run(killed)->message,
            "rank 0 (pid 7) was killed by signal 9; the process writing this run ended");
  EXPECT_EQ(s->integrity_check(), "ok");
}

TEST_F(RunStoreTest, LiveRunsOfThisProcessStayRunning) {
  auto a = RunStore::open(path_);
  const int64_t id = a->create_run("live", fp8wb::RunKind::Train, "{}", "cpu");
  auto b = RunStore::open(path_);  // a second connection, e.g. the GUI beside the CLI
  EXPECT_EQ(b->run(id)->status, RunStatus::Running);
  EXPECT_TRUE(b->run(id)->live);
  // Deleting it under its writer is refused, naming why; the writer goes on.
  try {
    b->delete_run(id);
    ADD_FAILURE() << "a live run was deleted";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("live"), std::string::npos) << e.what();
  }
  MetricBatch step0;
  step0.run_id = id;
  step0.steps = {StepMetrics{}};
  a->write(step0);
  a->flush();
  EXPECT_EQ(b->run(id)->last_step, 0);
}

TEST_F(RunStoreTest, DeleteCascadesAndRenameWorks) {
  auto s = RunStore::open(path_);
  const int64_t keep = s->create_run("keep", fp8wb::RunKind::Train, "{}", "cpu");
  const int64_t gone = s->create_run("gone", fp8wb::RunKind::Train, "{}", "cpu");
  for (int64_t i = 0; i < 5; ++i) {
    s->write(step_batch(keep, i));
    s->write(step_batch(gone, i));
  }
  s->set_status(gone, RunStatus::Finished);  // a live run is not deleted under its writer
  s->flush();
  s->delete_run(gone);
  s->rename_run(keep, "kept");
  EXPECT_FALSE(s->run(gone).has_value());
  EXPECT_TRUE(s->series(gone, "loss").empty());
  EXPECT_TRUE(s->tensor_stats(gone).empty());
  EXPECT_TRUE(s->blobs(gone).empty());
  EXPECT_EQ(s->run(keep)->name, "kept");
  EXPECT_EQ(s->series(keep, "loss").size(), 5u);
  // Series ids of the deleted run are not reused for a new run's writes.
  const int64_t again = s->create_run("again", fp8wb::RunKind::Train, "{}", "cpu");
  s->write(step_batch(again, 0));
  s->flush();
  EXPECT_EQ(s->series(again, "loss").size(), 1u);
  EXPECT_THROW(s->rename_run(keep, ""), std::invalid_argument);
  EXPECT_THROW(s->rename_run(keep, std::string(201, 'a')), std::invalid_argument);
  // A control character would cut the name short (a NUL) or break the lists it is in.
  for (const std::string bad : {std::string("ke\0pt", 5), std::string("a\tb"), std::string("a\nb"),
                                std::string("a\x7f"), std::string("a\xc2\x9b")}) {
    try {
      s->rename_run(keep, bad);
      ADD_FAILURE() << "renamed to a name with a control character";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("control character"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(s->run(keep)->name, "kept");
}

TEST_F(RunStoreTest, ReadersReadWhileTheWriterWrites) {
  auto s = RunStore::open(path_);
  const int64_t id = s->create_run("busy", fp8wb::RunKind::Train, "{}", "cpu");
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int64_t i = 0; i < 2000; ++i) s->write(step_batch(id, i));
    s->flush();
    done = true;
  });
  auto reader = RunStore::open_read_only(path_);
  size_t last = 0;
  int reads = 0;
  while (!done) {
    const size_t n = reader->series(id, "loss").size();
    EXPECT_GE(n, last);  // committed batches only grow
    last = n;
    ++reads;
  }
  writer.join();
  EXPECT_EQ(reader->series(id, "loss").size(), 2000u);
  EXPECT_GT(reads, 0);
}

TEST_F(RunStoreTest, BadFilesGiveClearErrors) {
  std::filesystem::create_directories(dir_);
  const std::string junk = (dir_ / "junk.sqlite").string();
  {
    std::ofstream f(junk);
    f << "this is not a database, just text that is long enough to fill a page header....";
  }
  try {
    RunStore::open(junk);
    FAIL() << "opened a text file";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("junk.sqlite"), std::string::npos) << e.what();
    // A text file is not called a damaged database.
    EXPECT_NE(std::string(e.what()).find("not an SQLite database"), std::string::npos) << e.what();
  }
  EXPECT_THROW(RunStore::open_read_only((dir_ / "missing.sqlite").string()), StoreError);
  // A database from a newer fp8wb.
  { auto s = RunStore::open(path_); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "PRAGMA user_version = 99", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  try {
    RunStore::open(path_);
    FAIL() << "opened a newer schema";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("99"), std::string::npos) << e.what();
  }
  // Writing to a read-only store is refused.
  sqlite3_open(path_.c_str(), &db);
  sqlite3_exec(db, "PRAGMA user_version = 1", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  auto ro = RunStore::open_read_only(path_);
  EXPECT_THROW(ro->create_run("x", fp8wb::RunKind::Train, "{}", "cpu"), StoreError);
}

namespace sql = fp8wb::test::sql;

// Another program's SQLite file is refused, by reading and by writing, and left byte for
// byte as it was (no tables added, no user_version, no WAL, no -wal or -shm beside it).
TEST_F(RunStoreTest, AnotherProgramsDatabaseIsRefusedAndLeftAsItIs) {
  std::filesystem::create_directories(dir_);
  const std::string foreign = (dir_ / "foreign.sqlite").string();
  sql::exec(foreign,
            "CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT);"
            "CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INTEGER);"
            "INSERT INTO customers(name) VALUES('someone');");
  const std::string before = sql::bytes(foreign);
  auto refused = [&](const std::function<void()>& open, const std::string& says) {
    try {
      open();
      ADD_FAILURE() << "opened another program's database";
    } catch (const StoreError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(foreign + " is an SQLite database of another program"), std::string::npos)
          << what;
      EXPECT_NE(what.find("customers, orders"), std::string::npos) << what;
      EXPECT_NE(what.find(says), std::string::npos) << what;
    }
    EXPECT_TRUE(sql::bytes(foreign) == before) << "the file changed";
    EXPECT_FALSE(std::filesystem::exists(foreign + "-wal"));
    EXPECT_FALSE(std::filesystem::exists(foreign + "-shm"));
  };
  refused([&] { RunStore::open(foreign); }, "give a new file or an FP8 Workbench database");
  refused([&] { RunStore::open_read_only(foreign); }, "not an FP8 Workbench database");
  refused([&] { RunStore::open_or_read_only(foreign); }, "another program");

  // One whose table happens to be called runs is another program's too: not migrated, not
  // switched to WAL, and no hint to migrate it.
  const std::string runs_named = (dir_ / "runs_named.sqlite").string();
  sql::exec(runs_named,
            "CREATE TABLE runs(id INTEGER PRIMARY KEY, name TEXT); CREATE TABLE foo(a);"
            "INSERT INTO runs(name) VALUES('theirs');");
  const std::string runs_before = sql::bytes(runs_named);
  for (int how = 0; how < 3; ++how) {
    try {
      if (how == 0) RunStore::open(runs_named);
      if (how == 1) RunStore::open_read_only(runs_named);
      if (how == 2) RunStore::open_or_read_only(runs_named);
      ADD_FAILURE() << "opened another program's database with a runs table (" << how << ")";
    } catch (const StoreError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(runs_named + " is an SQLite database of another program"),
                std::string::npos)
          << what;
      EXPECT_NE(what.find("foo, runs"), std::string::npos) << what;
      EXPECT_EQ(what.find("migrate"), std::string::npos) << what;
    }
    EXPECT_TRUE(sql::bytes(runs_named) == runs_before) << "the file changed (" << how << ")";
    EXPECT_FALSE(std::filesystem::exists(runs_named + "-wal"));
    EXPECT_FALSE(std::filesystem::exists(runs_named + "-shm"));
  }

  // A new file, a 0-byte file and an SQLite file with no tables become run databases.
  const std::string zero = (dir_ / "zero.sqlite").string();
  const std::string blank = (dir_ / "blank.sqlite").string();
  { std::ofstream f(zero); }
  sql::exec(blank, "CREATE TABLE t(x); DROP TABLE t;");
  for (const std::string& p : {zero, blank}) {
    // Read first: an empty database with no runs, left as it is.
    const auto size = std::filesystem::file_size(p);
    {
      auto ro = RunStore::open_read_only(p);
      EXPECT_TRUE(ro->runs().empty());
      EXPECT_TRUE(ro->sweeps().empty());
      EXPECT_FALSE(ro->run(1).has_value());
    }
    EXPECT_EQ(std::filesystem::file_size(p), size) << p;
    auto s = RunStore::open(p);
    EXPECT_EQ(s->schema_version(), RunStore::kSchemaVersion) << p;
    s->create_run("r", fp8wb::RunKind::Train, "{}", "cpu");
    EXPECT_EQ(s->runs().size(), 1u) << p;
  }
  auto made = RunStore::open((dir_ / "new" / "made.sqlite").string());
  EXPECT_EQ(made->schema_version(), RunStore::kSchemaVersion);
}

// A row whose status this fp8wb does not know is listed as unknown (never finished); the
// other runs read as ever, and the row can be deleted.
TEST_F(RunStoreTest, ARunWithAnUnknownStatusLeavesTheOthersReadable) {
  {
    auto s = RunStore::open(path_);
    for (const char* name : {"bad", "good"}) {
      const int64_t id = s->create_run(name, fp8wb::RunKind::Train, "{}", "cpu");
      s->write(step_batch(id, 0));
      s->set_status(id, RunStatus::Finished, "done");
    }
    s->flush();
  }
  sql::exec(path_, "UPDATE runs SET status = 'bogus' WHERE id = 1");
  auto check = [](const RunStore& s) {
    const auto runs = s.runs();
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_NE(runs[0].status, RunStatus::Finished);
    EXPECT_EQ(runs[0].unknown_status, "bogus");
    EXPECT_EQ(run_status_text(runs[0]), "unknown (bogus)");
    EXPECT_NE(runs[0].message.find("status is unknown"), std::string::npos) << runs[0].message;
    EXPECT_EQ(runs[1].status, RunStatus::Finished);
    EXPECT_EQ(run_status_text(runs[1]), "finished");
    EXPECT_EQ(s.run(2)->name, "good");
    EXPECT_EQ(s.series(2, "loss").size(), 1u);
  };
  check(*RunStore::open_read_only(path_));
  auto s = RunStore::open(path_);
  check(*s);
  s->delete_run(1);
  s->flush();
  ASSERT_EQ(s->runs().size(), 1u);
  EXPECT_EQ(s->runs()[0].name, "good");
}

// One text value of a query on the file, as SQLite holds it.
std::string stored_text(const std::string& path, const char* query) {
  sqlite3* db = nullptr;
  std::string out = "<no row>";
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* q = nullptr;
    if (sqlite3_prepare_v2(db, query, -1, &q, nullptr) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW)
      out = reinterpret_cast<const char*>(sqlite3_column_text(q, 0));
    sqlite3_finalize(q);
  }
  sqlite3_close(db);
  return out;
}

// A run kind, a sweep status and an event kind that this fp8wb does not know (a newer one
// wrote them) read back kept, as the run status's are: shown as "unknown (NAME)", never
// taken for a known one nor dropped; the file's rows stay as stored, and an import copies
// them as they are.
TEST_F(RunStoreTest, UnknownRunKindsSweepStatusesAndEventKindsAreKept) {
  int64_t id = 0, sweep = 0;
  {
    auto s = RunStore::open(path_);
    sweep = s->create_sweep("grid", "{}");
    id = s->create_run("newer", RunKind::SweepTrial, "{}", "cpu", sweep);
    MetricBatch b = step_batch(id, 0);
    b.events.push_back({0, RunEventKind::Started, "began", {}});
    s->write(b);
    s->set_sweep_status(sweep, SweepStatus::Finished);
    s->flush();
  }
  EXPECT_EQ(stored_text(path_, "SELECT kind FROM runs"), "sweep-trial");
  EXPECT_EQ(stored_text(path_, "SELECT status FROM sweeps"), "finished");
  EXPECT_EQ(stored_text(path_, "SELECT kind FROM events"), "started");
  sql::exec(path_,
            "UPDATE runs SET kind = 'notebook'; UPDATE sweeps SET status = 'queued'; "
            "INSERT INTO events(run_id, step, kind, message) VALUES(1, 0, 'checkpoint', 'saved')");
  auto check = [&](const RunStore& s) {
    const auto r = s.run(id);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->unknown_kind, "notebook");
    EXPECT_EQ(run_kind_text(*r), "unknown (notebook)");
    EXPECT_EQ(r->name, "newer");
    const auto sw = s.sweep(sweep);
    ASSERT_TRUE(sw);
    EXPECT_NE(sw->status, SweepStatus::Finished);
    EXPECT_EQ(sw->unknown_status, "queued");
    EXPECT_EQ(sweep_status_text(*sw), "unknown (queued)");
    RunCursor cursor;
    for (const std::vector<RunEvent>& events : {s.events(id), s.read_new(id, cursor).events}) {
      ASSERT_EQ(events.size(), 2u);
      EXPECT_EQ(events[0].kind, RunEventKind::Started);
      EXPECT_EQ(run_event_kind_text(events[0]), "started");
      EXPECT_EQ(events[1].unknown_kind, "checkpoint");
      EXPECT_EQ(run_event_kind_text(events[1]), "unknown (checkpoint)");
      EXPECT_EQ(run_event_kind_stored(events[1]), "checkpoint");
      EXPECT_EQ(events[1].message, "saved");
    }
  };
  check(*RunStore::open_read_only(path_));
  {
    auto s = RunStore::open(path_);
    check(*s);
    const std::string copy = (dir_ / "copy.sqlite").string();
    auto t = RunStore::open(copy);
    EXPECT_EQ(t->import_runs(path_).added, 1);
    check(*t);
    t.reset();
    EXPECT_EQ(stored_text(copy, "SELECT kind FROM runs"), "notebook");
    EXPECT_EQ(stored_text(copy, "SELECT status FROM sweeps"), "queued");
    EXPECT_EQ(stored_text(copy, "SELECT group_concat(kind) FROM events"), "started,checkpoint");
  }
  EXPECT_EQ(stored_text(path_, "SELECT kind FROM runs"), "notebook");
  EXPECT_EQ(stored_text(path_, "SELECT status FROM sweeps"), "queued");
}

// Many connections creating the same new file at once: each migrates it or finds it
// migrated ("table runs already exists" and "database is locked" were the races).
TEST_F(RunStoreTest, ConcurrentOpensOfANewDatabaseMigrateOnce) {
  for (int round = 0; round < 5; ++round) {
    const std::string path = (dir_ / ("new" + std::to_string(round) + ".sqlite")).string();
    constexpr int kThreads = 16;
    std::atomic<int> ready{0}, failures{0};
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        ++ready;
        while (ready < kThreads) std::this_thread::yield();
        try {
          auto s = RunStore::open(path);
          s->create_run("r" + std::to_string(i), fp8wb::RunKind::Train, "{}", "cpu");
        } catch (const std::exception& e) {
          errors[i] = e.what();
          ++failures;
        }
      });
    }
    for (auto& t : threads) t.join();
    for (const auto& e : errors) EXPECT_TRUE(e.empty()) << e;
    ASSERT_EQ(failures, 0);
    auto s = RunStore::open_read_only(path);
    EXPECT_EQ(s->schema_version(), RunStore::kSchemaVersion);
    EXPECT_EQ(s->runs().size(), static_cast<size_t>(kThreads));
  }
}

// A failed write (the file at its size limit: a full disk; or read-only) keeps what was
// committed, marks this process's running runs failed, and names the cause.
TEST_F(RunStoreTest, AFullDiskKeepsCommittedStepsAndFailsTheRun) {
  auto s = RunStore::open(path_);
  const int64_t id = s->create_run("full", fp8wb::RunKind::Train, "{}", "cpu");
  for (int64_t step = 0; step < 20; ++step) s->write(step_batch(id, step));
  s->flush();
  s->exec_on_writer_for_testing("PRAGMA max_page_count = 1");  // no page more
  try {
    for (int64_t step = 20; step < 2000; ++step) s->write(step_batch(id, step));
    s->flush();
    FAIL() << "2000 steps fit in a file that could not grow";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("disk full"), std::string::npos) << e.what();
  }
  EXPECT_THROW(s->write(step_batch(id, 5000)), StoreError);  // and stays failed
  s.reset();
  auto ro = RunStore::open_read_only(path_);
  EXPECT_GE(ro->series(id, "loss").size(), 20u);
  EXPECT_EQ(ro->run(id)->status, RunStatus::Failed);
  EXPECT_NE(ro->run(id)->message.find("disk full"), std::string::npos) << ro->run(id)->message;
  EXPECT_EQ(ro->integrity_check(), "ok");
}

// A disk that is full where SQLite meets it as an I/O error (the -wal growing; here the
// process's file size limit, EFBIG, as a full disk's ENOSPC) is said as what it is, not as
// "disk I/O error" alone; what was committed stays.
TEST_F(RunStoreTest, AFullDiskMetAsAnIOErrorIsSaidAsSuch) {
  auto s = RunStore::open(path_);
  const int64_t id = s->create_run("limited", fp8wb::RunKind::Train, "{}", "cpu");
  for (int64_t step = 0; step < 20; ++step) s->write(step_batch(id, step));
  s->flush();
  struct rlimit old {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = std::filesystem::file_size(path_ + "-wal") + (64 << 10);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string what;
  try {
    for (int64_t step = 20; step < 5000; ++step) s->write(step_batch(id, step));
    s->flush();
  } catch (const StoreError& e) {
    what = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(what.find("file size limit of"), std::string::npos) << what;
  EXPECT_NE(what.find("KiB reached: File too large)"), std::string::npos) << what;
  s.reset();
  auto ro = RunStore::open_read_only(path_);
  EXPECT_GE(ro->series(id, "loss").size(), 20u);
  EXPECT_EQ(ro->run(id)->status, RunStatus::Failed);
  EXPECT_NE(ro->run(id)->message.find("File too large"), std::string::npos) << ro->run(id)->message;
}

TEST_F(RunStoreTest, ReadingCreatesNothing) {
  const auto missing = dir_ / "no" / "such" / "runs.sqlite";
  EXPECT_THROW(RunStore::open_read_only(missing.string()), StoreError);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "no"));
  {
    auto s = RunStore::open(path_);
    s->create_run("one", fp8wb::RunKind::Train, "{}", "cpu");
  }
  ASSERT_FALSE(std::filesystem::exists(path_ + "-wal"));
  {
    auto ro = RunStore::open_read_only(path_);
    EXPECT_TRUE(ro->read_only());
    EXPECT_EQ(ro->runs().size(), 1u);
  }
  EXPECT_FALSE(std::filesystem::exists(path_ + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(path_ + "-shm"));
}

// Runs fn as user nobody in a child process; its exit code (or -1 where this process
// cannot change user: then the test is skipped).
int as_nobody(const std::function<int()>& fn) {
  if (geteuid() != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(99);
    int rc = 98;
    try {
      rc = fn();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "as nobody: %s\n", e.what());
      rc = 97;
    }
    std::fflush(stderr);
    _exit(rc);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A new database in a folder this user cannot write: the file and the reason named.
TEST_F(RunStoreTest, ANewDatabaseInAFolderThatCannotBeWrittenIsNamed) {
  std::filesystem::create_directories(dir_);
  std::filesystem::permissions(
      dir_, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                std::filesystem::perms::others_exec);
  const std::string path = (dir_ / "new.sqlite").string();
  const int rc = as_nobody([&] {
    try {
      RunStore::open(path);
      return 1;
    } catch (const StoreError& e) {
      const std::string what = e.what();
      const bool named =
          what.find(path) != std::string::npos &&
          what.find("its folder " + dir_.string() + " cannot be written") != std::string::npos;
      if (!named) std::fprintf(stderr, "%s\n", what.c_str());
      return named ? 0 : 2;
    }
  });
  if (rc == -1) GTEST_SKIP() << "needs root to write as another user";
  EXPECT_EQ(rc, 0);
  EXPECT_FALSE(std::filesystem::exists(path));
}

// Another user's database (a 644 file in a folder only its owner writes), closed or with
// a live writer: readable, writes refused with the reason, nothing left behind.
TEST_F(RunStoreTest, AnotherUsersDatabaseReadsReadOnly) {
  int64_t id = 0;
  {
    auto s = RunStore::open(path_);
    id = s->create_run("theirs", fp8wb::RunKind::Train, "{}", "cpu");
    for (int64_t step = 0; step < 10; ++step) s->write(step_batch(id, step));
  }
  std::filesystem::permissions(
      dir_, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                std::filesystem::perms::others_exec);
  auto reads = [&] {
    auto ro = RunStore::open_read_only(path_);
    if (ro->series(id, "loss").size() != 10) return 1;
    std::string why;
    auto rw = RunStore::open_or_read_only(path_, &why);
    if (!rw->read_only() || why.empty()) return 2;
    try {
      rw->create_run("mine", fp8wb::RunKind::Train, "{}", "cpu");
      return 3;
    } catch (const StoreError&) {
    }
    return 0;
  };
  const int rc = as_nobody(reads);
  if (rc == -1) GTEST_SKIP() << "needs root to read as another user";
  EXPECT_EQ(rc, 0);
  EXPECT_FALSE(std::filesystem::exists(path_ + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(path_ + "-shm"));
  // With its writer live (the -wal and -shm are the writer's).
  auto w = RunStore::open(path_);
  w->write(step_batch(id, 10));
  w->flush();
  chmod((path_ + "-wal").c_str(), 0644);
  chmod((path_ + "-shm").c_str(), 0644);
  const int live = as_nobody([&] {
    auto ro = RunStore::open_read_only(path_);
    return ro->series(id, "loss").size() == 11 ? 0 : 1;  // step 10 is in the -wal only
  });
  EXPECT_EQ(live, 0);
}

// A stored run's tensor statistics read back carry what they were measured under: their
// role's recipe and the scaling mode from the run's config, whether read whole
// (tensor_stats()) or followed (read_new()); a run whose config is not one (another
// program's text) gets the default formats with current scaling.
TEST_F(RunStoreTest, ReloadedStatisticsCarryTheirRunsRecipe) {
  RunConfig c;
  c.recipe = Float8Recipe::Rowwise;
  c.formats = FormatPairing::E4M3;
  c.scaling = ScalingMode::Current;
  c.margin = 2;
  RunConfig d;  // HYBRID, tensorwise, delayed
  d.margin = 1;
  int64_t rowwise = 0, delayed = 0, other = 0;
  {
    auto s = RunStore::open(path_);
    rowwise = s->create_run("rowwise", fp8wb::RunKind::Train, run_config_json(c), "cpu");
    delayed = s->create_run("delayed", fp8wb::RunKind::Train, run_config_json(d), "cpu");
    other = s->create_run("other", fp8wb::RunKind::Train, "not a config", "cpu");
    for (const int64_t id : {rowwise, delayed, other}) {
      MetricBatch b = step_batch(id, 0);
      TensorMetrics g = b.tensors.front();
      g.role = Role::GradOutput;
      b.tensors.push_back(g);
      s->write(b);
    }
    s->flush();
  }
  auto s = RunStore::open_read_only(path_);
  struct Want {
    int64_t id;
    Format grad;
    ScalingKind kind;
    ScalingMode scaling;
    int margin;
  };
  for (const Want& w :
       {Want{rowwise, Format::E4M3FN, ScalingKind::Rowwise, ScalingMode::Current, 2},
        Want{delayed, Format::E5M2, ScalingKind::Tensorwise, ScalingMode::Delayed, 1},
        Want{other, Format::E5M2, ScalingKind::Tensorwise, ScalingMode::Current, 0}}) {
    RunCursor cursor;
    for (const std::vector<TensorMetrics>& rows :
         {s->tensor_stats(w.id), s->read_new(w.id, cursor).tensors}) {
      ASSERT_EQ(rows.size(), 2u) << w.id;
      for (const TensorMetrics& t : rows) {
        SCOPED_TRACE(std::to_string(w.id) + " " + std::string(role_name(t.role)));
        EXPECT_EQ(t.recipe.format, t.role == Role::GradOutput ? w.grad : Format::E4M3FN);
        EXPECT_EQ(t.recipe.kind, w.kind);
        EXPECT_EQ(t.recipe.margin, w.margin);
        EXPECT_EQ(t.scaling, w.scaling);
      }
    }
  }
}

TEST(RunStorePath, DefaultFollowsXdg) {
  const char* old = std::getenv("XDG_DATA_HOME");
  const std::string saved = old ? old : "";
  setenv("XDG_DATA_HOME", "/tmp/xdg-test", 1);
  EXPECT_EQ(default_database_path(), "/tmp/xdg-test/fp8-workbench/runs.sqlite");
  if (old) {
    setenv("XDG_DATA_HOME", saved.c_str(), 1);
  } else {
    unsetenv("XDG_DATA_HOME");
  }
}

}  // namespace
}  // namespace fp8wb
