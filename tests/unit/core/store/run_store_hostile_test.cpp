// Small hostile run databases: a `scalars` view over a recursive CTE (millions of rows from
// a file of a few pages), a generated column (a huge value from nothing), a huge text, a
// trigger, a role or a blob shape fp8wb never writes. Each is refused by name before its
// rows are read, by `runs import` (the target left as it was), by reading (`runs list`,
// `show`, `export --db`) and by opening for writing, with the process's memory bounded.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/resource.h>

#include <filesystem>
#include <functional>
#include <string>

#include "fp8wb/core/store/run_store.h"
#include "temp_dir_test.h"

namespace fp8wb {
namespace {

class RunStoreHostileTest : public test::TempDirTest {
 protected:
  RunStoreHostileTest() : TempDirTest("fp8wb-hostile") {}
  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  // A run database of one finished run of 20 steps, then `sql` run on it by hand.
  std::string crafted(const std::string& name, const char* sql) {
    const std::string path = file(name);
    {
      auto s = RunStore::open(path);
      const int64_t id = s->create_run("victim", fp8wb::RunKind::Train, "{}", "cpu");
      for (int64_t step = 0; step < 20; ++step) {
        MetricBatch b;
        b.run_id = id;
        StepMetrics m;
        m.step = step;
        m.loss = 1.0;
        b.steps.push_back(m);
        TensorMetrics t;
        t.step = step;
        t.layer = "fc1";
        t.role = Role::Weight;
        t.map_grid.rows = 1;
        t.map_grid.cols = 2;
        t.map_rel_error = {0.5f, 0.25f};
        b.tensors.push_back(t);
        s->write(b);
      }
      s->set_status(id, RunStatus::Finished);
      s->flush();
    }
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
    sqlite3_free(err);
    sqlite3_close(db);
    return path;
  }
};

// The peak resident set of this process, in MiB.
long peak_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

// `fn` throws a StoreError that says `says`, and the process's peak memory grows by less
// than 200 MiB meanwhile.
void expect_refused(const std::function<void()>& fn, const std::string& says) {
  const long before = peak_mib();
  try {
    fn();
    ADD_FAILURE() << "not refused (expected: " << says << ")";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
  EXPECT_LT(peak_mib() - before, 200) << "reading took " << peak_mib() - before << " MiB";
}

enum class Refused {
  ByImport,          // a value that only an import checks (reads refuse it where they meet it)
  ByImportAndReads,  // also `runs list`/`show`/`export --db` (open_read_only and reads)
  Everywhere,        // also opening the file for writing (`train --db`)
};

// Every way a foreign database is read refuses it; the target of an import is unchanged.
void expect_every_reader_refuses(const std::string& target, const std::string& source,
                                 const std::string& says, Refused by = Refused::Everywhere) {
  auto t = RunStore::open(target);
  const size_t runs = t->runs().size();
  expect_refused([&] { t->import_runs(source); }, says);
  EXPECT_EQ(t->runs().size(), runs);
  EXPECT_EQ(t->integrity_check(), "ok");
  if (by == Refused::ByImport) return;
  expect_refused(
      [&] {
        auto s = RunStore::open_read_only(source);
        for (const RunInfo& r : s->runs()) s->series(r.id, "loss");
      },
      says);
  if (by == Refused::Everywhere) expect_refused([&] { RunStore::open(source); }, says);
}

TEST_F(RunStoreHostileTest, AViewOverARecursiveQueryIsRefusedUnread) {
  const std::string src = crafted("view.sqlite", R"(
      DROP TABLE scalars;
      CREATE VIEW scalars AS
        WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM c LIMIT 20000000)
        SELECT (SELECT min(id) FROM series) AS series_id, x AS step, 1.0 AS value FROM c;)");
  EXPECT_LT(std::filesystem::file_size(src), 1u << 20);
  expect_every_reader_refuses(file("target.sqlite"), src,
                              "is not a run database as fp8wb writes it: it has a view "
                              "'scalars' (a run database has tables and indexes only)");
}

TEST_F(RunStoreHostileTest, AGeneratedColumnIsRefusedUnread) {
  const std::string src = crafted("generated.sqlite",
                                  "ALTER TABLE tensor_stats ADD COLUMN big BLOB GENERATED ALWAYS "
                                  "AS (zeroblob(700000000)) VIRTUAL;");
  expect_every_reader_refuses(file("target.sqlite"), src,
                              "its table 'tensor_stats' has a generated column 'big'");
}

TEST_F(RunStoreHostileTest, ATriggerIsRefused) {
  const std::string src = crafted("trigger.sqlite",
                                  "CREATE TRIGGER grow AFTER INSERT ON events BEGIN "
                                  "INSERT INTO events SELECT * FROM events; END;");
  expect_every_reader_refuses(file("target.sqlite"), src, "it has a trigger 'grow'");
}

TEST_F(RunStoreHostileTest, AHugeTextIsRefusedNotRead) {
  // 80 MB of text in one value (the file is as large: SQLite stores what it is given).
  const std::string src = crafted(
      "huge.sqlite", "UPDATE runs SET config_json = CAST(zeroblob(80000000) AS TEXT) || '';");
  expect_every_reader_refuses(file("target.sqlite"), src,
                              "(a value in the file is larger than the 64 MiB fp8wb reads)",
                              Refused::ByImportAndReads);
}

TEST_F(RunStoreHostileTest, ValuesFp8wbNeverWritesAreRefusedAtImport) {
  const std::string role =
      crafted("role.sqlite", "UPDATE tensor_stats SET role = 'bogus' WHERE step = 7;");
  expect_every_reader_refuses(file("target.sqlite"), role,
                              "a row of its tensor_stats has the role \"bogus\", which is none "
                              "of fp8wb's (",
                              Refused::ByImport);
  const std::string shape =
      crafted("shape.sqlite", "UPDATE blobs SET shape = '1000,1000' WHERE step = 3;");
  expect_every_reader_refuses(file("target.sqlite"), shape,
                              "a blob whose shape \"1000,1000\" does not fit its 8 bytes of data",
                              Refused::ByImport);
  const std::string kind = crafted("kind.sqlite", "UPDATE blobs SET kind = 'x' WHERE step = 3;");
  expect_every_reader_refuses(file("target.sqlite"), kind, "a blob of the kind \"x\"",
                              Refused::ByImport);
  const std::string uuid = crafted("uuid.sqlite", "UPDATE runs SET uuid = 'not-a-uuid';");
  expect_every_reader_refuses(file("target.sqlite"), uuid,
                              "has the identity \"not-a-uuid\", which is no UUID",
                              Refused::ByImport);
}

}  // namespace
}  // namespace fp8wb
