// The run store's schema: the migrations that bring an older file forward (migrate()),
// the tensor_stats columns, which come from kTensorStatFields, and the rows' identities.
#include <sqlite3.h>

#include <cctype>
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "run_store_sql.h"

namespace fp8wb {
namespace store {

int user_version(const Db& db) {
  Stmt s(db, "PRAGMA user_version");
  return s.step() ? static_cast<int>(s.i(0)) : 0;
}

bool has_column(const Db& db, const char* table, const char* column) {
  Stmt q(db, (std::string("PRAGMA table_info(") + table + ")").c_str());
  while (q.step()) {
    if (q.s(1) == column) return true;
  }
  return false;
}

namespace {
std::string uuid_text(uint64_t hi, uint64_t lo) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xFFFF), static_cast<unsigned>(hi & 0xFFFF),
                static_cast<unsigned>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xFFFFFFFFFFFFULL));
  return buf;
}
}  // namespace

std::string derived_uuid(const std::string& row_text) {
  // FNV-1a, 64 bits, twice from different offsets.
  uint64_t a = 14695981039346656037ULL, b = 0x84222325CBF29CE4ULL;
  for (unsigned char c : row_text) {
    a = (a ^ c) * 1099511628211ULL;
    b = (b ^ c) * 1099511628211ULL;
  }
  return uuid_text(a, b);
}

std::string run_uuid_sql(bool has_uuid) {
  return has_uuid ? "r.uuid"
                  : "(r.id || '|' || IFNULL(r.owner_host, '') || '|' || IFNULL(r.owner_pid, 0) "
                    "|| '|' || r.started_at || '|' || r.name || '|' || r.config_json)";
}

std::string sweep_uuid_sql(bool has_uuid) {
  return has_uuid ? "uuid" : "(id || '|' || name || '|' || created_at || '|' || grid_json)";
}

std::string stored_uuid(const std::string& column, bool has_uuid) {
  return has_uuid ? column : derived_uuid(column);
}

namespace {

const char* sql_type(TensorStatField::Type t) {
  switch (t) {
    case TensorStatField::Type::Count: return "INTEGER";
    case TensorStatField::Type::Sum:
    case TensorStatField::Type::Value: return "REAL";
    case TensorStatField::Type::Histogram: return "BLOB";
  }
  return "";
}

std::string join_columns(const char* prefix) {
  std::string s;
  for (const TensorStatField& f : kTensorStatFields) {
    s += (s.empty() ? "" : ", ") + std::string(prefix) + f.name;
  }
  return s;
}

// The tables of version 1 but tensor_stats (whose columns come from kTensorStatFields),
// as they were created then. Each later entry takes the schema one version further; a
// version that only adds statistics needs none (migration_sql() adds their columns).
const char* const kMigrations[] = {
    R"(CREATE TABLE runs(
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
         status TEXT NOT NULL, created_at TEXT NOT NULL);)",
    // 2: identities, so that runs copied between databases are recognised (filled in
    // for the rows already there by fill_uuids()).
    R"(ALTER TABLE runs ADD COLUMN uuid TEXT;
       ALTER TABLE sweeps ADD COLUMN uuid TEXT;)",
    // 3: every rank's amax and scale of a data-parallel run.
    R"(CREATE TABLE rank_scales(
         run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, step INTEGER NOT NULL,
         layer TEXT NOT NULL, role TEXT NOT NULL, rank INTEGER NOT NULL, amax REAL, scale REAL,
         PRIMARY KEY(run_id, layer, role, step, rank)) WITHOUT ROWID;)",
    // 4: every step's amax of every FP8 tensor (the replay of delayed scaling): the
    // tensors' order once per run, then a row a step with the amaxes as float32 in it.
    R"(CREATE TABLE amax_tensors(
         run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, idx INTEGER NOT NULL,
         layer TEXT NOT NULL, role TEXT NOT NULL, format TEXT NOT NULL,
         PRIMARY KEY(run_id, idx)) WITHOUT ROWID;
       CREATE TABLE step_amax(
         run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, step INTEGER NOT NULL,
         amax BLOB NOT NULL, PRIMARY KEY(run_id, step)) WITHOUT ROWID;)",
    // 5: blobs keyed by step before kind, layer and role, so that a sampled step's error
    // maps (16 KB each, 144 a step for a 12-layer GPT) append to the table instead of
    // landing in as many places of it; tensor_stats likewise (kTensorStatsRekeyVersion).
    R"(CREATE TABLE blobs_by_step(
         run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, step INTEGER NOT NULL,
         layer TEXT NOT NULL, role TEXT NOT NULL, kind TEXT NOT NULL, shape TEXT NOT NULL,
         data BLOB, PRIMARY KEY(run_id, step, kind, layer, role)) WITHOUT ROWID;
       INSERT INTO blobs_by_step SELECT run_id, step, layer, role, kind, shape, data FROM blobs;
       DROP TABLE blobs;
       ALTER TABLE blobs_by_step RENAME TO blobs;)"};
// The version that rebuilds tensor_stats with the key (run_id, step, layer, role).
constexpr int kTensorStatsRekeyVersion = 5;
constexpr int kLiteralMigrations = static_cast<int>(std::size(kMigrations));
static_assert(kLiteralMigrations <= RunStore::kSchemaVersion);

}  // namespace

std::string migration_sql(int to) {
  std::string sql = to <= kLiteralMigrations ? kMigrations[to - 1] : "";
  if (to == 1) {
    sql +=
        "\nCREATE TABLE tensor_stats(\n"
        "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, step INTEGER NOT "
        "NULL,\n  layer TEXT NOT NULL, role TEXT NOT NULL";
    for (const TensorStatField& f : kTensorStatFields) {
      if (f.since == 1) sql += std::string(", ") + f.name + " " + sql_type(f.type);
    }
    sql += ",\n  PRIMARY KEY(run_id, layer, role, step)) WITHOUT ROWID;";
  }
  if (to == kTensorStatsRekeyVersion) {
    // The columns as the older versions made them: version 1's, then each later version's
    // in turn (so that `SELECT *` reads them in the same order after the rebuild).
    std::string cols = "run_id, step, layer, role", defs;
    for (int v = 1; v < to; ++v) {
      for (const TensorStatField& f : kTensorStatFields) {
        if (f.since != v) continue;
        cols += std::string(", ") + f.name;
        defs += std::string(", ") + f.name + " " + sql_type(f.type);
      }
    }
    sql +=
        "\nCREATE TABLE tensor_stats_by_step(\n"
        "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, step INTEGER NOT "
        "NULL,\n  layer TEXT NOT NULL, role TEXT NOT NULL" +
        defs + ",\n  PRIMARY KEY(run_id, step, layer, role)) WITHOUT ROWID;\n" +
        "INSERT INTO tensor_stats_by_step(" + cols + ") SELECT " + cols +
        " FROM tensor_stats;\nDROP TABLE tensor_stats;\n"
        "ALTER TABLE tensor_stats_by_step RENAME TO tensor_stats;";
  }
  for (const TensorStatField& f : kTensorStatFields) {
    if (f.since == to && to > 1) {
      sql += std::string("\nALTER TABLE tensor_stats ADD COLUMN ") + f.name + " " +
             sql_type(f.type) + ";";
    }
  }
  return sql;
}

const std::string& tensor_stat_columns() {
  static const std::string s = join_columns("");
  return s;
}

const std::string& tensor_stat_insert_sql() {
  static const std::string s = [] {
    std::string q = "INSERT OR REPLACE INTO tensor_stats(run_id, step, layer, role, " +
                    tensor_stat_columns() + ") VALUES(?, ?, ?, ?";
    for (size_t i = 0; i < kTensorStatFieldCount; ++i) q += ", ?";
    return q + ")";
  }();
  return s;
}

const std::string& tensor_stat_select_sql() {
  static const std::string s =
      "SELECT step, layer, role, " + tensor_stat_columns() + " FROM tensor_stats ";
  return s;
}

void bind_tensor_stat_fields(Stmt& s, int first, const TensorMetrics& t) {
  int i = first;
  for (const TensorStatField& f : kTensorStatFields) {
    switch (f.type) {
      case TensorStatField::Type::Count: s.bind(i, static_cast<int64_t>(t.raw.*f.count)); break;
      case TensorStatField::Type::Sum: s.bind(i, t.raw.*f.sum); break;
      case TensorStatField::Type::Value: s.bind(i, static_cast<double>(t.*f.value)); break;
      case TensorStatField::Type::Histogram: {
        const std::vector<uint8_t> packed = pack_histogram(t.raw.hist);
        s.bind_blob(i, packed.data(), packed.size());  // SQLite copies it
        break;
      }
    }
    ++i;
  }
}

void read_tensor_stat_fields(const Stmt& s, int first, TensorMetrics& t) {
  int i = first;
  for (const TensorStatField& f : kTensorStatFields) {
    switch (f.type) {
      case TensorStatField::Type::Count: t.raw.*f.count = static_cast<uint64_t>(s.i(i)); break;
      case TensorStatField::Type::Sum: t.raw.*f.sum = s.d(i); break;
      case TensorStatField::Type::Value: t.*f.value = static_cast<float>(s.d(i)); break;
      case TensorStatField::Type::Histogram: {
        const std::vector<uint64_t> h = unpack_histogram(s.blob(i));
        std::copy_n(h.begin(), std::min<size_t>(h.size(), kHistBins), t.raw.hist);
        break;
      }
    }
    ++i;
  }
  t.raw.amax_bits = float_bits(t.amax);  // as the kernels filled it (max |x| of finite x)
}

namespace {

// Version 2's identities for the rows of an older file: derived from each row, so that
// every copy of that file gives its runs the same ones.
void fill_uuids(const Db& db) {
  const std::pair<const char*, std::string> tables[] = {
      {"runs", "SELECT r.id, " + run_uuid_sql(false) + " FROM runs r WHERE r.uuid IS NULL"},
      {"sweeps", "SELECT id, " + sweep_uuid_sql(false) + " FROM sweeps WHERE uuid IS NULL"}};
  for (const auto& [table, select] : tables) {
    std::vector<std::pair<int64_t, std::string>> rows;
    {
      Stmt q(db, select.c_str());
      while (q.step()) rows.emplace_back(q.i(0), derived_uuid(q.s(1)));
    }
    Stmt u(db, (std::string("UPDATE ") + table + " SET uuid = ? WHERE id = ?").c_str());
    for (const auto& [id, uuid] : rows) u.bind(1, uuid).bind(2, id).run();
  }
  // No index: an import reads every identity once (one scan), and a file whose later
  // pages are damaged still takes new runs (its runs table is all a new run touches).
}

void check_not_newer(int v, const std::string& path) {
  if (v > RunStore::kSchemaVersion) {
    throw StoreError("run database " + path + " has schema version " + std::to_string(v) +
                     ", newer than this fp8wb reads (" + std::to_string(RunStore::kSchemaVersion) +
                     "): update fp8wb");
  }
}

}  // namespace

// Every step to the current version in one immediate transaction, the version read inside
// it: processes creating the same new file at once migrate it exactly once.
void migrate(const Db& db, const std::string& path) {
  check_not_newer(user_version(db), path);
  if (user_version(db) == RunStore::kSchemaVersion) return;
  db.exec("BEGIN IMMEDIATE");
  try {
    const int v = user_version(db);
    check_not_newer(v, path);
    for (int to = v + 1; to <= RunStore::kSchemaVersion; ++to) {
      db.exec(migration_sql(to).c_str());
      if (to == 2) fill_uuids(db);
    }
    if (v < RunStore::kSchemaVersion) {
      db.exec(("PRAGMA user_version = " + std::to_string(RunStore::kSchemaVersion)).c_str());
    }
    db.exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

}  // namespace store

using namespace store;

std::string new_uuid() {
  std::random_device rd;
  auto word = [&rd] { return (static_cast<uint64_t>(rd()) << 32) | rd(); };
  uint64_t hi = word(), lo = word();
  hi = (hi & ~0xF000ULL) | 0x4000ULL;                         // version 4
  lo = (lo & 0x3FFFFFFFFFFFFFFFULL) | 0x8000000000000000ULL;  // variant 1
  return uuid_text(hi, lo);
}

bool is_uuid(const std::string& text) {
  if (text.size() != 36) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? text[i] != '-' : !std::isxdigit(static_cast<unsigned char>(text[i]))) return false;
  }
  return true;
}

}  // namespace fp8wb
