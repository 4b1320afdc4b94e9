// Importing runs from another database: every run comes with its series, statistics,
// maps, events and sweep, checked against what was written to the source; runs both
// files hold are not copied twice; importing again changes nothing; an unfinished run is
// replaced by the source's further copy; a file of schema version 1 imports and keeps its
// identity through its migration; damaged, foreign and missing sources are refused by
// name and leave the target as it was.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "fp8wb/core/store/run_store.h"
#include "temp_dir_test.h"

namespace fp8wb {
namespace {

class RunImportTest : public fp8wb::test::TempDirTest {
 protected:
  RunImportTest() : TempDirTest("fp8wb-import") {}
  std::string file(const char* name) const { return (dir_ / name).string(); }
};

// Step `step` of a run, every value a function of (seed, step): the reference the
// imported copy is checked against.
MetricBatch batch(int64_t run, int64_t step, double seed) {
  MetricBatch b;
  b.run_id = run;
  StepMetrics m;
  m.step = step;
  m.loss = seed + 1.0 / (1.0 + static_cast<double>(step));
  m.ref_loss = step % 2 ? std::nan("") : m.loss * 0.5;
  m.loss_gap = m.loss - m.ref_loss;
  m.grad_norm = seed;
  m.lr = 1e-3;
  m.tokens_per_s = 100;
  m.step_ms = 1;
  b.steps.push_back(m);
  TensorMetrics t;
  t.step = step;
  t.layer = "fc1";
  t.role = Role::Weight;
  t.amax = static_cast<float>(seed + static_cast<double>(step));
  t.scale = 2.0f;
  t.raw.numel = 100;
  t.raw.zeros = 3;
  t.raw.underflow = static_cast<uint64_t>(step);
  t.raw.hist[4] = 9;
  t.map_grid.rows = 1;
  t.map_grid.cols = 2;
  t.map_rel_error = {0.25f, static_cast<float>(seed)};
  b.tensors.push_back(t);
  b.events.push_back({step, fp8wb::RunEventKind::Notice, "step " + std::to_string(step), {}});
  return b;
}

// A run of `steps` steps, ended with `status`.
int64_t write_run(RunStore& s, const std::string& name, double seed, int steps,
                  RunStatus status = RunStatus::Finished, int64_t sweep = 0) {
  const int64_t id = s.create_run(name, fp8wb::RunKind::Train, R"({"seed": 1})", "cpu", sweep);
  for (int k = 0; k < steps; ++k) s.write(batch(id, k, seed));
  s.set_status(id, status, status == RunStatus::Failed ? "it broke" : "");
  s.flush();
  return id;
}

// A run's content as text (every row but ids), to compare a copy with its original.
std::string content(const RunStore& s, int64_t id) {
  std::string out;
  const RunInfo r = *s.run(id);
  out += r.name + "|" + run_kind_text(r) + "|" + std::string(run_status_name(r.status)) + "|" +
         r.config_json + "|" + r.device + "|" + r.started_at + "|" + r.ended_at + "|" + r.message +
         "|" + r.uuid + "\n";
  for (const std::string& n : s.series_names(id)) {
    out += n + ":";
    for (const SeriesPoint& p : s.series(id, n))
      out += " " + std::to_string(p.step) + "=" +
             (std::isnan(p.value) ? "nan" : std::to_string(p.value));
    out += "\n";
  }
  for (const TensorMetrics& t : s.tensor_stats(id)) {
    out += "ts " + std::to_string(t.step) + " " + t.layer + " " + std::to_string(t.amax) + " " +
           std::to_string(t.raw.numel) + " " + std::to_string(t.raw.zeros) + " " +
           std::to_string(t.raw.underflow) + " " + std::to_string(t.raw.hist[4]) + "\n";
  }
  for (const BlobRow& b : s.blobs(id)) {
    out += "blob " + std::to_string(b.step) + " " + b.kind + " " + std::to_string(b.data.size());
    for (uint8_t c : b.data) out += " " + std::to_string(c);
    out += "\n";
  }
  for (const RunEvent& e : s.events(id))
    out += "ev " + run_event_kind_text(e) + " " + e.message + "\n";
  return out;
}

std::map<std::string, int64_t> ids_by_uuid(const RunStore& s) {
  std::map<std::string, int64_t> m;
  for (const RunInfo& r : s.runs()) m[r.uuid] = r.id;
  return m;
}

TEST_F(RunImportTest, TwoStoresOverlappingRunsAndImportingTwice) {
  auto a = RunStore::open(file("a.sqlite"));
  auto b = RunStore::open(file("b.sqlite"));
  const int64_t sweep = a->create_sweep("grid", R"({"axes": []})");
  const int64_t a1 = write_run(*a, "one", 1.0, 5);
  const int64_t a2 = write_run(*a, "two", 2.0, 3, RunStatus::Diverged, sweep);
  write_run(*b, "mine", 7.0, 2);
  // Every identity is a UUID, and each run's own.
  for (const RunInfo& r : a->runs()) EXPECT_TRUE(is_uuid(r.uuid)) << r.uuid;
  EXPECT_NE(a->run(a1)->uuid, a->run(a2)->uuid);

  ImportReport rep = b->import_runs(a->path());
  EXPECT_EQ(rep.added, 2);
  EXPECT_EQ(rep.unchanged, 0);
  ASSERT_EQ(rep.run_ids.size(), 2u);
  ASSERT_EQ(b->runs().size(), 3u);
  // Each copy holds exactly what the source holds (the same identity too).
  EXPECT_EQ(content(*b, rep.run_ids[0]), content(*a, a1));
  EXPECT_EQ(content(*b, rep.run_ids[1]), content(*a, a2));
  EXPECT_EQ(b->series(rep.run_ids[0], "loss").size(), 5u);
  // The sweep came along, and the trial belongs to it in the target.
  ASSERT_EQ(b->sweeps().size(), 1u);
  EXPECT_EQ(b->sweeps()[0].uuid, a->sweep(sweep)->uuid);
  EXPECT_EQ(b->sweeps()[0].name, "grid");
  EXPECT_EQ(b->run(rep.run_ids[1])->parent_sweep, b->sweeps()[0].id);
  EXPECT_EQ(b->run(rep.run_ids[0])->parent_sweep, 0);

  // Again: nothing changes.
  const std::string before = content(*b, rep.run_ids[0]) + content(*b, rep.run_ids[1]);
  rep = b->import_runs(a->path());
  EXPECT_EQ(rep.added, 0);
  EXPECT_EQ(rep.updated, 0);
  EXPECT_EQ(rep.unchanged, 2);
  EXPECT_EQ(b->runs().size(), 3u);
  EXPECT_EQ(b->sweeps().size(), 1u);
  EXPECT_EQ(content(*b, rep.run_ids[0]) + content(*b, rep.run_ids[1]), before);

  // The other way: only the run `a` lacks comes over; its own two are not doubled.
  rep = a->import_runs(b->path());
  EXPECT_EQ(rep.added, 1);
  EXPECT_EQ(rep.unchanged, 2);
  EXPECT_EQ(a->runs().size(), 3u);
  EXPECT_EQ(a->sweeps().size(), 1u);
  EXPECT_EQ(ids_by_uuid(*a).size(), 3u);
  EXPECT_EQ(a->integrity_check(), "ok");
  EXPECT_EQ(b->integrity_check(), "ok");
}

TEST_F(RunImportTest, AnUnfinishedCopyIsReplacedByAFurtherOne) {
  auto a = RunStore::open(file("a.sqlite"));
  auto b = RunStore::open(file("b.sqlite"));
  const int64_t id = write_run(*a, "long", 3.0, 4, RunStatus::Interrupted);
  ImportReport rep = b->import_runs(a->path());
  ASSERT_EQ(rep.added, 1);
  const int64_t copy = rep.run_ids[0];
  EXPECT_EQ(b->run(copy)->status, RunStatus::Interrupted);
  auto early = RunStore::open(file("early.sqlite"));  // keeps the unfinished copy
  ASSERT_EQ(early->import_runs(a->path()).added, 1);
  // The source goes on and finishes; the next import brings the rest.
  for (int k = 4; k < 9; ++k) a->write(batch(id, k, 3.0));
  a->set_status(id, RunStatus::Finished);
  a->flush();
  rep = b->import_runs(a->path());
  EXPECT_EQ(rep.updated, 1);
  EXPECT_EQ(rep.run_ids, std::vector<int64_t>{copy});  // the same id in the target
  EXPECT_EQ(content(*b, copy), content(*a, id));
  EXPECT_EQ(b->series(copy, "loss").size(), 9u);
  // A finished copy is never replaced by an older, unfinished one.
  rep = b->import_runs(early->path());
  EXPECT_EQ(rep.unchanged, 1);
  EXPECT_EQ(rep.updated, 0);
  EXPECT_EQ(content(*b, copy), content(*a, id));
  EXPECT_EQ(b->integrity_check(), "ok");
}

// A copy of a run still being written is no process's live run in the target: its writer
// (this process, alive) writes into the source only. The copy reads as interrupted, and a
// later import of the finished source brings the rest.
TEST_F(RunImportTest, ACopyOfARunBeingWrittenIsNotLive) {
  auto a = RunStore::open(file("a.sqlite"));
  auto b = RunStore::open(file("b.sqlite"));
  const int64_t id = a->create_run("live", fp8wb::RunKind::Train, "{}", "cpu");
  a->write(batch(id, 0, 3.0));
  a->flush();
  ASSERT_TRUE(a->run(id)->live);
  ImportReport rep = b->import_runs(a->path());
  ASSERT_EQ(rep.added, 1);
  const int64_t copy = rep.run_ids[0];
  EXPECT_FALSE(b->run(copy)->live);
  EXPECT_EQ(b->run(copy)->status, RunStatus::Interrupted);
  a->write(batch(id, 1, 3.0));
  a->set_status(id, RunStatus::Finished);
  a->flush();
  rep = b->import_runs(a->path());
  EXPECT_EQ(rep.updated, 1);
  EXPECT_EQ(b->run(copy)->status, RunStatus::Finished);
  EXPECT_EQ(b->series(copy, "loss").size(), 2u);
}

// A sweep copied while it ran: a later import of the finished source brings its trials'
// further runs and the sweep's status.
TEST_F(RunImportTest, AnUnfinishedSweepsCopyIsReplacedByTheFinishedOne) {
  auto a = RunStore::open(file("a.sqlite"));
  auto b = RunStore::open(file("b.sqlite"));
  const int64_t sweep = a->create_sweep("s", "{}");
  const int64_t id = write_run(*a, "s: margin=0", 2.0, 3, RunStatus::Interrupted, sweep);
  ImportReport rep = b->import_runs(a->path());
  ASSERT_EQ(rep.added, 1);
  const int64_t copy = rep.run_ids[0];
  ASSERT_EQ(b->sweeps().size(), 1u);
  EXPECT_EQ(b->sweeps()[0].status, fp8wb::SweepStatus::Running);
  for (int k = 3; k < 8; ++k) a->write(batch(id, k, 2.0));
  a->set_status(id, RunStatus::Finished);
  a->set_sweep_status(sweep, fp8wb::SweepStatus::Finished);
  a->flush();
  rep = b->import_runs(a->path());
  EXPECT_EQ(rep.updated, 1);
  EXPECT_EQ(rep.unchanged, 0);
  EXPECT_EQ(content(*b, copy), content(*a, id));
  EXPECT_EQ(b->run(copy)->status, RunStatus::Finished);
  EXPECT_EQ(b->run(copy)->parent_sweep, b->sweeps()[0].id);
  ASSERT_EQ(b->sweeps().size(), 1u);
  EXPECT_EQ(b->sweeps()[0].status, fp8wb::SweepStatus::Finished);
  EXPECT_EQ(b->integrity_check(), "ok");
}

TEST_F(RunImportTest, OneRunAsTheTrialOfASweep) {
  auto a = RunStore::open(file("trial.sqlite"));
  auto b = RunStore::open(file("main.sqlite"));
  const std::string uuid = new_uuid();
  const int64_t id = a->create_run("t", fp8wb::RunKind::Train, "{}", "cpu", 0, uuid);
  for (int k = 0; k < 3; ++k) a->write(batch(id, k, 1.0));
  a->flush();  // left running: a cluster killed it
  write_run(*a, "another", 1.0, 1);
  const int64_t sweep = b->create_sweep("s", "{}");
  ImportOptions o;
  o.uuid = uuid;
  o.parent_sweep = sweep;
  o.name = "s: margin=0";
  o.status = RunStatus::Failed;
  o.message = "Slurm: TIMEOUT";
  ImportReport rep = b->import_runs(a->path(), o);
  ASSERT_EQ(rep.added, 1);
  ASSERT_EQ(b->runs().size(), 1u);
  const RunInfo r = b->runs()[0];
  EXPECT_EQ(r.uuid, uuid);
  EXPECT_EQ(r.name, "s: margin=0");
  EXPECT_EQ(r.kind, RunKind::SweepTrial);
  EXPECT_EQ(r.parent_sweep, sweep);
  EXPECT_EQ(r.status, RunStatus::Failed);
  EXPECT_EQ(r.message, "Slurm: TIMEOUT");
  EXPECT_FALSE(r.ended_at.empty());
  EXPECT_EQ(b->series(r.id, "loss").size(), 3u);
  rep = b->import_runs(a->path(), o);
  EXPECT_EQ(rep.unchanged, 1);
  EXPECT_EQ(b->runs().size(), 1u);
  o.uuid = new_uuid();  // a run the file does not hold
  try {
    b->import_runs(a->path(), o);
    FAIL() << "imported a run that is not there";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("trial.sqlite"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(o.uuid), std::string::npos) << e.what();
  }
}

// A data-parallel run's step: two ranks, each rank's own amax and the scale it used,
// every value a function of (seed, step, rank, role).
MetricBatch rank_batch(int64_t run, int64_t step, double seed) {
  MetricBatch b = batch(run, step, seed);
  for (int rank = 0; rank < 2; ++rank) {
    for (Role role : {Role::Input, Role::Weight}) {
      RankScale k;
      k.step = step;
      k.layer = "fc1";
      k.role = role;
      k.rank = rank;
      k.amax = static_cast<float>(seed + 0.1 * static_cast<double>(step) + rank +
                                  (role == Role::Weight ? 0.5 : 0.0));
      k.scale = 448.0f / (k.amax + 1.0f);
      b.ranks.push_back(k);
    }
  }
  return b;
}

std::string rank_content(const RunStore& s, int64_t id) {
  std::string out;
  for (const RankScale& k : s.rank_scales(id)) {
    char line[160];
    std::snprintf(line, sizeof line, "%lld %s %s %d %a %a\n", static_cast<long long>(k.step),
                  k.layer.c_str(), std::string(role_name(k.role)).c_str(), k.rank,
                  static_cast<double>(k.amax), static_cast<double>(k.scale));
    out += line;
  }
  return out;
}

TEST_F(RunImportTest, EveryRanksScalesComeAlong) {
  auto a = RunStore::open(file("a.sqlite"));
  auto b = RunStore::open(file("b.sqlite"));
  const std::string uuid = new_uuid();
  const int64_t id =
      a->create_run("ranks", fp8wb::RunKind::Train, R"({"nproc": 2})", "cpu", 0, uuid);
  for (int k = 0; k < 2; ++k) a->write(rank_batch(id, k, 3.0));
  a->set_status(id, RunStatus::Interrupted, "");
  a->flush();
  ImportReport rep = b->import_runs(a->path());
  ASSERT_EQ(rep.added, 1);
  // Two steps x two ranks x two roles, bit for bit the source's.
  EXPECT_EQ(b->rank_scales(rep.run_ids[0]).size(), 8u);
  EXPECT_EQ(rank_content(*b, rep.run_ids[0]), rank_content(*a, id));
  EXPECT_EQ(b->rank_scales(rep.run_ids[0], "fc1", "weight").size(), 4u);

  // The source's run resumes and finishes: the target's copy is replaced, its rows too
  // (none doubled, none left from the copy before).
  for (int k = 2; k < 5; ++k) a->write(rank_batch(id, k, 3.0));
  a->set_status(id, RunStatus::Finished, "");
  a->flush();
  rep = b->import_runs(a->path());
  ASSERT_EQ(rep.updated, 1);
  EXPECT_EQ(b->rank_scales(rep.run_ids[0]).size(), 20u);
  EXPECT_EQ(rank_content(*b, rep.run_ids[0]), rank_content(*a, id));

  // As a sweep's trial (how a cluster sweep's trial databases are collected).
  auto c = RunStore::open(file("c.sqlite"));
  ImportOptions o;
  o.uuid = uuid;
  o.parent_sweep = c->create_sweep("s", "{}");
  rep = c->import_runs(a->path(), o);
  ASSERT_EQ(rep.added, 1);
  EXPECT_EQ(rank_content(*c, rep.run_ids[0]), rank_content(*a, id));
  EXPECT_EQ(b->integrity_check(), "ok");
  EXPECT_EQ(c->integrity_check(), "ok");
}

TEST_F(RunImportTest, DamagedForeignAndMissingSourcesChangeNothing) {
  auto b = RunStore::open(file("b.sqlite"));
  const int64_t mine = write_run(*b, "mine", 1.0, 3);
  const std::string before = content(*b, mine);
  auto refused = [&](const std::string& source, const std::string& says) {
    try {
      b->import_runs(source);
      ADD_FAILURE() << "imported " << source;
    } catch (const StoreError& e) {
      EXPECT_NE(std::string(e.what()).find(source), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
    EXPECT_EQ(b->runs().size(), 1u);
    EXPECT_EQ(content(*b, mine), before);
  };
  // Not there; a folder; text.
  refused(file("missing.sqlite"), "no run database at");
  refused(dir_.string(), "not a file");
  {
    std::ofstream f(file("junk.sqlite"));
    f << std::string(10000, 'j');
  }
  refused(file("junk.sqlite"), "is not a run database (not an SQLite file)");
  // Another program's SQLite file.
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(file("other.sqlite").c_str(), &db), SQLITE_OK);
    sqlite3_exec(db, "CREATE TABLE runs(x); INSERT INTO runs VALUES(1);", nullptr, nullptr,
                 nullptr);
    sqlite3_close(db);
  }
  refused(file("other.sqlite"), "not a run database");
  // A real run database cut short, and one with a damaged page.
  {
    auto a = RunStore::open(file("a.sqlite"));
    for (int i = 0; i < 20; ++i) write_run(*a, "r" + std::to_string(i), 1.0, 50);
  }
  const auto size = std::filesystem::file_size(file("a.sqlite"));
  std::filesystem::copy_file(file("a.sqlite"), file("cut.sqlite"));
  std::filesystem::resize_file(file("cut.sqlite"), size / 2);
  refused(file("cut.sqlite"), "run database");
  std::filesystem::copy_file(file("a.sqlite"), file("torn.sqlite"));
  {
    std::fstream f(file("torn.sqlite"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size / 2));
    const std::string garbage(4096, '\x5a');
    f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  refused(file("torn.sqlite"), "run database");
  // Neither is called anything but a run database of fp8wb's that is damaged.
  for (const char* name : {"cut.sqlite", "torn.sqlite"}) {
    try {
      b->import_runs(file(name));
    } catch (const StoreError& e) {
      EXPECT_EQ(std::string(e.what()).find("not an SQLite file"), std::string::npos) << e.what();
    }
  }
  // From a newer fp8wb.
  std::filesystem::copy_file(file("a.sqlite"), file("newer.sqlite"));
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(file("newer.sqlite").c_str(), &db), SQLITE_OK);
    sqlite3_exec(db, "PRAGMA user_version = 99", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  refused(file("newer.sqlite"), "newer");
  // The intact file still imports whole after all that.
  EXPECT_EQ(b->import_runs(file("a.sqlite")).added, 20);
  EXPECT_EQ(b->integrity_check(), "ok");
}

// A database of schema version 1 (before identities): its runs import, each under an
// identity derived from its row, and the same identity after the file is migrated, so
// importing the migrated file finds them already there.
TEST_F(RunImportTest, AVersionOneFileKeepsItsIdentityThroughItsMigration) {
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(file("v1.sqlite").c_str(), &db), SQLITE_OK);
    const char* v1 = R"(CREATE TABLE runs(
         id INTEGER PRIMARY KEY, name TEXT NOT NULL, kind TEXT NOT NULL,
         status TEXT NOT NULL, config_json TEXT NOT NULL, device TEXT NOT NULL DEFAULT '',
         started_at TEXT NOT NULL, ended_at TEXT, message TEXT NOT NULL DEFAULT '',
         parent_sweep INTEGER, owner_host TEXT, owner_pid INTEGER);
       CREATE TABLE series(
         id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
         name TEXT NOT NULL, UNIQUE(run_id, name));
       CREATE TABLE scalars(
         series_id INTEGER NOT NULL REFERENCES series(id) ON DELETE CASCADE,
         step INTEGER NOT NULL, value REAL, PRIMARY KEY(series_id, step)) WITHOUT ROWID;
       CREATE TABLE tensor_stats(
         run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, step INTEGER NOT NULL,
         layer TEXT NOT NULL, role TEXT NOT NULL, amax REAL, scale REAL, numel INTEGER,
         zeros INTEGER, underflow INTEGER, saturated INTEGER, nonfinite INTEGER,
                  subnormal INTEGER, sq_err REAL, sq_sum REAL, histogram BLOB,
         PRIMARY KEY(run_id, layer, role, step)) WITHOUT ROWID;
       CREATE TABLE blobs(
         run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, step INTEGER NOT NULL,
         layer TEXT NOT NULL, role TEXT NOT NULL, kind TEXT NOT NULL, shape TEXT NOT NULL,
         data BLOB, PRIMARY KEY(run_id, kind, layer, role, step)) WITHOUT ROWID;
       CREATE TABLE events(
         id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
         step INTEGER NOT NULL, kind TEXT NOT NULL, message TEXT NOT NULL DEFAULT '');
       CREATE INDEX events_run ON events(run_id);
       CREATE TABLE sweeps(
         id INTEGER PRIMARY KEY, name TEXT NOT NULL, grid_json TEXT NOT NULL,
         status TEXT NOT NULL, created_at TEXT NOT NULL);
       INSERT INTO sweeps VALUES(4, 'old sweep', '{}', 'finished', '2026-01-01T00:00:00Z');
       INSERT INTO runs(id, name, kind, status, config_json, started_at, parent_sweep,
                        owner_host, owner_pid)
         VALUES(1, 'old', 'train', 'finished', '{}', '2026-01-01T00:00:00Z', NULL, 'gpu1', 7),
               (2, 'trial', 'sweep-trial', 'finished', '{}', '2026-01-01T00:00:01Z', 4,
                'gpu1', 7);
       INSERT INTO series VALUES(1, 1, 'loss');
       INSERT INTO scalars VALUES(1, 0, 2.5), (1, 1, 2.25);
       INSERT INTO tensor_stats VALUES(1, 1, 'fc', 'input', 2.5, 179.2, 1000, 100, 85, 19, 50,
         38, 0.01, 100.0, X'0207');
       PRAGMA user_version = 1;)";
    char* err = nullptr;
    ASSERT_EQ(sqlite3_exec(db, v1, nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
    sqlite3_close(db);
  }
  auto b = RunStore::open(file("b.sqlite"));
  ImportReport rep = b->import_runs(file("v1.sqlite"));
  ASSERT_EQ(rep.added, 2);
  const RunInfo old = *b->run(rep.run_ids[0]);
  EXPECT_EQ(old.name, "old");
  EXPECT_TRUE(is_uuid(old.uuid)) << old.uuid;
  const auto loss = b->series(old.id, "loss");
  ASSERT_EQ(loss.size(), 2u);
  EXPECT_EQ(loss[1].value, 2.25);
  ASSERT_EQ(b->tensor_stats(old.id).size(), 1u);
  EXPECT_EQ(b->tensor_stats(old.id)[0].raw.underflow, 85u);
  ASSERT_EQ(b->sweeps().size(), 1u);
  EXPECT_EQ(b->run(rep.run_ids[1])->parent_sweep, b->sweeps()[0].id);
  // Read as it stands, the file shows the same identities.
  {
    auto v1 = RunStore::open_read_only(file("v1.sqlite"));
    EXPECT_EQ(v1->run(1)->uuid, old.uuid);
  }
  // Migrated, too: the second import finds both already here.
  {
    auto v2 = RunStore::open(file("v1.sqlite"));
    EXPECT_EQ(v2->schema_version(), RunStore::kSchemaVersion);
    EXPECT_EQ(v2->run(1)->uuid, old.uuid);
    EXPECT_EQ(v2->sweeps()[0].uuid, b->sweeps()[0].uuid);
  }
  rep = b->import_runs(file("v1.sqlite"));
  EXPECT_EQ(rep.added, 0);
  EXPECT_EQ(rep.unchanged, 2);
  EXPECT_EQ(b->runs().size(), 2u);
  EXPECT_EQ(b->sweeps().size(), 1u);
}

}  // namespace
}  // namespace fp8wb
