// The statistics' one schema (kTensorStatFields): a batch with every field set to its
// own value reads back the same through the store's reads, read_new() and the CSV export;
// the store's columns are the table's; a database of schema version 1 written by hand
// opens and reads; the derived figures against hand computations (numerics.md,
// "Statistics"); the metric bus hands its last consumer the batch itself.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "temp_dir_test.h"

#include "fp8wb/core/metrics.h"
#include "fp8wb/core/store/run_store.h"

namespace fp8wb {
namespace {

class StatFieldsTest : public fp8wb::test::TempDirTest {
 protected:
  StatFieldsTest() : TempDirTest("fp8wb-statfields") {}
};

// Every field of the table its own value (none 0, no two alike), and every bin of the
// histogram.
TensorMetrics distinct_metrics() {
  TensorMetrics t;
  t.step = 7;
  t.layer = "blocks.1.attn.qkv";
  t.role = Role::Weight;
  int i = 0;
  for (const TensorStatField& f : kTensorStatFields) {
    ++i;
    switch (f.type) {
      case TensorStatField::Type::Count:
        t.raw.*f.count = (uint64_t{1} << 40) + 1000u * static_cast<uint64_t>(i);
        break;
      case TensorStatField::Type::Sum: t.raw.*f.sum = 0.125 + 1e3 * i; break;
      case TensorStatField::Type::Value: t.*f.value = 1.5f + static_cast<float>(i); break;
      case TensorStatField::Type::Histogram:
        for (int b = 0; b < kHistBins; ++b) t.raw.hist[b] = 3u * static_cast<uint64_t>(b) + 1u;
        break;
    }
  }
  t.raw.amax_bits = float_bits(t.amax);
  return t;
}

void expect_same_fields(const TensorMetrics& got, const TensorMetrics& want) {
  EXPECT_EQ(got.step, want.step);
  EXPECT_EQ(got.layer, want.layer);
  EXPECT_EQ(got.role, want.role);
  for (const TensorStatField& f : kTensorStatFields) {
    switch (f.type) {
      case TensorStatField::Type::Count:
        EXPECT_EQ(got.raw.*f.count, want.raw.*f.count) << f.name;
        break;
      case TensorStatField::Type::Sum: EXPECT_EQ(got.raw.*f.sum, want.raw.*f.sum) << f.name; break;
      case TensorStatField::Type::Value: EXPECT_EQ(got.*f.value, want.*f.value) << f.name; break;
      case TensorStatField::Type::Histogram:
        for (int b = 0; b < kHistBins; ++b) EXPECT_EQ(got.raw.hist[b], want.raw.hist[b]) << b;
        break;
    }
  }
  EXPECT_EQ(got.raw.amax_bits, want.raw.amax_bits);
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, ',')) out.push_back(cell);
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

// The table itself: names unique, each field on a member of its own, types consistent.
TEST(StatFieldsTable, NamesAndMembersAreDistinct) {
  std::set<std::string> names;
  for (size_t i = 0; i < kTensorStatFieldCount; ++i) {
    const TensorStatField& f = kTensorStatFields[i];
    EXPECT_TRUE(names.insert(f.name).second) << f.name;
    EXPECT_GE(f.since, 1) << f.name;
    EXPECT_LE(f.since, RunStore::kSchemaVersion) << f.name;
    EXPECT_EQ(f.count != nullptr, f.type == TensorStatField::Type::Count) << f.name;
    EXPECT_EQ(f.sum != nullptr, f.type == TensorStatField::Type::Sum) << f.name;
    EXPECT_EQ(f.value != nullptr, f.type == TensorStatField::Type::Value) << f.name;
    for (size_t j = 0; j < i; ++j) {
      const TensorStatField& g = kTensorStatFields[j];
      EXPECT_FALSE(f.count && f.count == g.count) << f.name << " and " << g.name;
      EXPECT_FALSE(f.sum && f.sum == g.sum) << f.name << " and " << g.name;
      EXPECT_FALSE(f.value && f.value == g.value) << f.name << " and " << g.name;
    }
  }
  // Each field of distinct_metrics() holds its own value.
  const TensorMetrics t = distinct_metrics();
  std::set<double> values;
  for (const TensorStatField& f : kTensorStatFields) {
    if (f.type != TensorStatField::Type::Histogram) {
      EXPECT_TRUE(values.insert(stat_value(t, f)).second) << f.name;
    }
  }
}

TEST_F(StatFieldsTest, EveryFieldReadsBackThroughTheStoreAndTheExport) {
  const TensorMetrics want = distinct_metrics();
  int64_t id = 0;
  {
    auto s = RunStore::open(path_);
    id = s->create_run("fields", fp8wb::RunKind::Train, "{}", "cpu");
    MetricBatch b;
    b.run_id = id;
    b.tensors.push_back(want);
    s->write(std::move(b));
    s->flush();
  }
  auto s = RunStore::open_read_only(path_);
  // The row reads.
  const std::vector<TensorMetrics> rows = s->tensor_stats(id);
  ASSERT_EQ(rows.size(), 1u);
  expect_same_fields(rows[0], want);
  // What a follower (and the GUI, opening a run) reads.
  RunCursor cursor;
  const MetricBatch b = s->read_new(id, cursor);
  ASSERT_EQ(b.tensors.size(), 1u);
  expect_same_fields(b.tensors[0], want);
  EXPECT_EQ(cursor.tensor_step, want.step);

  // The columns as SQL holds them, by name, against the members by name: a table row
  // naming the wrong member would pass the round trips above and fail here.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path_.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  auto column = [&](const std::string& name) {
    sqlite3_stmt* q = nullptr;
    EXPECT_EQ(
        sqlite3_prepare_v2(db, ("SELECT " + name + " FROM tensor_stats").c_str(), -1, &q, nullptr),
        SQLITE_OK)
        << name;
    EXPECT_EQ(sqlite3_step(q), SQLITE_ROW) << name;
    const double v = sqlite3_column_double(q, 0);
    sqlite3_finalize(q);
    return v;
  };
  EXPECT_EQ(column("amax"), static_cast<double>(want.amax));
  EXPECT_EQ(column("scale"), static_cast<double>(want.scale));
  EXPECT_EQ(column("numel"), static_cast<double>(want.raw.numel));
  EXPECT_EQ(column("zeros"), static_cast<double>(want.raw.zeros));
  EXPECT_EQ(column("underflow"), static_cast<double>(want.raw.underflow));
  EXPECT_EQ(column("saturated"), static_cast<double>(want.raw.saturated));
  EXPECT_EQ(column("nonfinite"), static_cast<double>(want.raw.nonfinite));
  EXPECT_EQ(column("subnormal"), static_cast<double>(want.raw.subnormal));
  EXPECT_EQ(column("sq_err"), want.raw.sq_err);
  EXPECT_EQ(column("sq_sum"), want.raw.sq_sum);
  // The table's columns, in its order, after the key.
  {
    sqlite3_stmt* q = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA table_info(tensor_stats)", -1, &q, nullptr),
              SQLITE_OK);
    std::vector<std::string> cols;
    while (sqlite3_step(q) == SQLITE_ROW)
      cols.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(q, 1)));
    sqlite3_finalize(q);
    std::vector<std::string> expected = {"run_id", "step", "layer", "role"};
    for (const TensorStatField& f : kTensorStatFields) expected.emplace_back(f.name);
    EXPECT_EQ(cols, expected);
  }
  sqlite3_close(db);

  // CSV export: a column a field, then the derived figures.
  std::ostringstream csv;
  write_tensor_stats_csv(*s, id, csv);
  std::istringstream in(csv.str());
  std::string header, line, extra;
  ASSERT_TRUE(std::getline(in, header));
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_FALSE(std::getline(in, extra));
  const std::vector<std::string> names = split(header), cells = split(line);
  ASSERT_EQ(names.size(), cells.size());
  auto cell = [&](const std::string& name) {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name) return cells[i];
    }
    ADD_FAILURE() << "no column " << name;
    return std::string();
  };
  EXPECT_EQ(cell("step"), "7");
  EXPECT_EQ(cell("layer"), want.layer);
  EXPECT_EQ(cell("role"), std::string(role_name(want.role)));
  for (const TensorStatField& f : kTensorStatFields) {
    if (f.type == TensorStatField::Type::Histogram) continue;
    if (f.type == TensorStatField::Type::Count) {
      EXPECT_EQ(cell(f.name), std::to_string(want.raw.*f.count)) << f.name;
    } else {
      EXPECT_EQ(std::stod(cell(f.name)), stat_value(want, f)) << f.name;
    }
  }
  for (const TensorStatFigure& g : kTensorStatFigures) {
    EXPECT_DOUBLE_EQ(std::stod(cell(g.name)), g.of(want.raw)) << g.name;
  }
}

// A table's columns in order, or its primary key's, read with SQLite.
std::vector<std::string> pragma_names(const std::string& path, const std::string& pragma,
                                      int name_column) {
  sqlite3* db = nullptr;
  std::vector<std::string> out;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* q = nullptr;
    if (sqlite3_prepare_v2(db, pragma.c_str(), -1, &q, nullptr) == SQLITE_OK) {
      while (sqlite3_step(q) == SQLITE_ROW) {
        out.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(q, name_column)));
      }
    }
    sqlite3_finalize(q);
  }
  sqlite3_close(db);
  return out;
}
std::vector<std::string> columns(const std::string& path, const std::string& table) {
  return pragma_names(path, "PRAGMA table_info(" + table + ")", 1);
}
std::vector<std::string> key_columns(const std::string& path, const std::string& table) {
  std::vector<std::pair<int, std::string>> key;  // (position in the key, name)
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* q = nullptr;
    const std::string sql = "PRAGMA table_info(" + table + ")";
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &q, nullptr) == SQLITE_OK) {
      while (sqlite3_step(q) == SQLITE_ROW) {
        const int pk = sqlite3_column_int(q, 5);
        if (pk > 0) key.emplace_back(pk, reinterpret_cast<const char*>(sqlite3_column_text(q, 1)));
      }
    }
    sqlite3_finalize(q);
  }
  sqlite3_close(db);
  std::sort(key.begin(), key.end());
  std::vector<std::string> out;
  for (const auto& k : key) out.push_back(k.second);
  return out;
}

// A database of schema version 1 as the first release wrote it (its SQL kept here as it
// was): it opens, for writing and for reading, and its rows read back.
TEST_F(StatFieldsTest, ADatabaseOfVersionOneOpens) {
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
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
       INSERT INTO runs(id, name, kind, status, config_json, started_at)
         VALUES(1, 'old', 'train', 'finished', '{}', '2026-01-01T00:00:00Z');
       INSERT INTO tensor_stats VALUES(1, 3, 'fc', 'input', 2.5, 179.2, 1000, 100, 85, 19, 50,
         38, 0.01, 100.0, X'0207');
       INSERT INTO blobs VALUES(1, 3, 'fc', 'input', 'error_map', '1,2', X'0000803F00000040');
       PRAGMA user_version = 1;)";
    char* err = nullptr;
    ASSERT_EQ(sqlite3_exec(db, v1, nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
    sqlite3_close(db);
  }
  auto check = [](const RunStore& s) {
    const std::vector<TensorMetrics> rows = s.tensor_stats(1);
    ASSERT_EQ(rows.size(), 1u);
    const TensorMetrics& t = rows[0];
    EXPECT_EQ(t.step, 3);
    EXPECT_EQ(t.layer, "fc");
    EXPECT_EQ(t.role, Role::Input);
    EXPECT_EQ(t.amax, 2.5f);
    EXPECT_EQ(t.scale, 179.2f);
    EXPECT_EQ(t.raw.numel, 1000u);
    EXPECT_EQ(t.raw.zeros, 100u);
    EXPECT_EQ(t.raw.underflow, 85u);
    EXPECT_EQ(t.raw.saturated, 19u);
    EXPECT_EQ(t.raw.nonfinite, 50u);
    EXPECT_EQ(t.raw.subnormal, 38u);
    EXPECT_EQ(t.raw.sq_err, 0.01);
    EXPECT_EQ(t.raw.sq_sum, 100.0);
    EXPECT_EQ(t.raw.hist[2], 7u);
    EXPECT_EQ(t.raw.hist[1] + t.raw.hist[3], 0u);
  };
  {
    auto s = RunStore::open_read_only(path_);
    check(*s);
    EXPECT_TRUE(s->rank_scales(1).empty());  // its table came with version 3
  }
  auto s = RunStore::open(path_);
  EXPECT_EQ(s->schema_version(), RunStore::kSchemaVersion);
  check(*s);
  EXPECT_EQ(s->integrity_check(), "ok");
  const std::vector<BlobRow> maps = s->blobs(1, "error_map");
  ASSERT_EQ(maps.size(), 1u);
  EXPECT_EQ(maps[0].step, 3);
  EXPECT_EQ(maps[0].shape, (std::vector<int64_t>{1, 2}));
  std::vector<float> values(2);
  ASSERT_EQ(maps[0].data.size(), 8u);
  std::memcpy(values.data(), maps[0].data.data(), 8);
  EXPECT_EQ(values, (std::vector<float>{1.0f, 2.0f}));
  s.reset();

  // Version 5 keyed both tables by step before layer (a sampled step's rows append), and
  // the migrated file has a new file's columns in a new file's order (imports read
  // `SELECT *`).
  const std::string fresh = (dir_ / "fresh.sqlite").string();
  RunStore::open(fresh).reset();
  for (const std::string& p : {path_, fresh}) {
    EXPECT_EQ(key_columns(p, "tensor_stats"),
              (std::vector<std::string>{"run_id", "step", "layer", "role"}))
        << p;
    EXPECT_EQ(key_columns(p, "blobs"),
              (std::vector<std::string>{"run_id", "step", "kind", "layer", "role"}))
        << p;
  }
  EXPECT_EQ(columns(path_, "tensor_stats"), columns(fresh, "tensor_stats"));
  EXPECT_EQ(columns(path_, "blobs"), columns(fresh, "blobs"));
}

// numerics.md, "Statistics": underflow as % of the finite nonzero elements, saturation and
// subnormals as % of the finite ones, SQNR dB = 10 log10(sq_sum / sq_err).
TEST(DerivedFigures, AgainstHandComputation) {
  StatsBuffer s{};
  s.numel = 1000;
  s.nonfinite = 50;  // 950 finite
  s.zeros = 100;     // 850 finite nonzero
  s.underflow = 85;  // 85 / 850 = 10 %
  s.saturated = 19;  // 19 / 950 = 2 %
  s.subnormal = 38;  // 38 / 950 = 4 %
  s.sq_err = 0.01;
  s.sq_sum = 100;  // 10 log10(1e4) = 40 dB
  EXPECT_EQ(finite_count(s), 950u);
  EXPECT_DOUBLE_EQ(underflow_pct(s), 10.0);
  EXPECT_DOUBLE_EQ(saturated_pct(s), 2.0);
  EXPECT_DOUBLE_EQ(subnormal_pct(s), 4.0);
  EXPECT_DOUBLE_EQ(zeros_pct(s), 10.0);
  EXPECT_DOUBLE_EQ(sqnr_db(s), 40.0);
  EXPECT_DOUBLE_EQ(rel_error(s), 0.01);  // sqrt(0.01 / 100)
  EXPECT_DOUBLE_EQ(mse(s), 0.01 / 950);
  // The tables name the same functions.
  EXPECT_EQ(kUnderflowPct.of(s), underflow_pct(s));
  EXPECT_EQ(kSaturatedPct.of(s), saturated_pct(s));
  EXPECT_EQ(kSqnrDb.of(s), sqnr_db(s));

  // Exact quantization: +inf dB; all zeros: -inf; nothing finite or nonzero: 0 %.
  StatsBuffer exact = s;
  exact.sq_err = 0;
  EXPECT_EQ(sqnr_db(exact), INFINITY);
  StatsBuffer zero{};
  zero.numel = 4;
  zero.zeros = 4;
  zero.sq_err = 1;
  EXPECT_EQ(sqnr_db(zero), -INFINITY);
  EXPECT_EQ(underflow_pct(zero), 0.0);
  StatsBuffer empty{};
  EXPECT_EQ(saturated_pct(empty), 0.0);
  EXPECT_EQ(zeros_pct(empty), 0.0);
  TensorStats ts;
  ts.raw = s;
  EXPECT_EQ(ts.underflow_pct(), underflow_pct(s));
  EXPECT_EQ(ts.sqnr_db(), sqnr_db(s));
}

// publish(MetricBatch&&): the first consumers see the batch whole, the last takes it.
TEST(MetricBusMove, LastConsumerTakesTheBatch) {
  struct Seen : MetricConsumer {
    void consume(const MetricBatch& b) override {
      copied++;
      tensors += b.tensors.size();
    }
    void take(MetricBatch&& b) override {
      taken++;
      kept = std::move(b);
      tensors += kept.tensors.size();
    }
    int copied = 0, taken = 0;
    size_t tensors = 0;
    MetricBatch kept;
  };
  auto a = std::make_shared<Seen>(), z = std::make_shared<Seen>();
  MetricBus bus;
  bus.add(a);
  bus.add(z);
  MetricBatch b;
  b.tensors.resize(3);
  b.tensors[0].raw.hist[0] = 1;
  bus.publish(std::move(b));
  EXPECT_EQ(a->copied, 1);
  EXPECT_EQ(a->taken, 0);
  EXPECT_EQ(a->tensors, 3u);
  EXPECT_EQ(z->copied, 0);
  EXPECT_EQ(z->taken, 1);
  EXPECT_EQ(z->kept.tensors.size(), 3u);
  EXPECT_EQ(z->kept.tensors[0].raw.hist[0], 1u);
  // A batch the caller keeps is only seen.
  MetricBatch c;
  c.tensors.resize(2);
  bus.publish(c);
  EXPECT_EQ(c.tensors.size(), 2u);
  EXPECT_EQ(z->copied, 1);
}

}  // namespace
}  // namespace fp8wb
