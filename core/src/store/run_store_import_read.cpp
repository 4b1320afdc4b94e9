// Reading the source of an import (run_store_import.h): the file checked before it is
// trusted, its chosen runs read whole in one snapshot, every row checked (its count,
// steps, roles, blobs) before anything is written.
#include <sqlite3.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fp8wb/core/checkpoint/file_io.h"
#include "run_store_import.h"

namespace fp8wb::store {

namespace {

Value value_of(const Stmt& q, int c) {
  sqlite3_stmt* s = q.raw();
  Value v;
  v.type = sqlite3_column_type(s, c);
  switch (v.type) {
    case SQLITE_INTEGER: v.i = sqlite3_column_int64(s, c); break;
    case SQLITE_FLOAT: v.d = sqlite3_column_double(s, c); break;
    case SQLITE_TEXT:
    case SQLITE_BLOB: {
      const void* p = v.type == SQLITE_TEXT ? static_cast<const void*>(sqlite3_column_text(s, c))
                                            : sqlite3_column_blob(s, c);
      const int n = sqlite3_column_bytes(s, c);
      if (p) v.s.assign(static_cast<const char*>(p), static_cast<size_t>(n));
      break;
    }
    default: break;
  }
  return v;
}

Rows read_rows(const Db& db, const std::string& sql, int64_t run_id,
               const std::set<std::string>& skip) {
  Stmt q(db, sql.c_str());
  q.bind(1, run_id);
  Rows out;
  std::vector<int> keep;
  const int n = sqlite3_column_count(q.raw());
  for (int c = 0; c < n; ++c) {
    const std::string name = sqlite3_column_name(q.raw(), c);
    if (skip.count(name)) continue;
    keep.push_back(c);
    out.columns.push_back(name);
  }
  while (q.step()) {
    std::vector<Value>& row = out.rows.emplace_back();
    for (int c : keep) row.push_back(value_of(q, c));
  }
  return out;
}

// The most rows (scalars, tensor statistics, blobs, events, rank scales) one import reads:
// some 1.5 GiB in memory at most. A run of 100,000 steps with statistics of 40 layers at
// every tenth step has about 5 million.
constexpr int64_t kMaxImportRows = 10'000'000;

// `t` cut to at most 200 bytes, between characters, with "…", for quoting a source's text
// in a message.
std::string cut_quote(const std::string& t) {
  if (t.size() <= 200) return t;
  size_t at = 200;
  while (at > 0 && (static_cast<unsigned char>(t[at]) & 0xC0) == 0x80) --at;  // a whole character
  return t.substr(0, at) + "…";
}

std::string g17(double d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", d);
  return buf;
}

// A step is a whole number: SQLite keeps what a column of another program's making was
// given, and a text step read as 0 would collide with the real step 0 in the target
// ("UNIQUE constraint failed"), naming neither the source nor the row.
void check_step(const Value& v, const std::string& path, const SourceRun& r,
                const std::string& where) {
  if (v.type == SQLITE_INTEGER) return;
  const std::string shown = v.type == SQLITE_TEXT    ? "the text \"" + cut_quote(v.s) + "\""
                            : v.type == SQLITE_FLOAT ? "the number " + g17(v.d)
                            : v.type == SQLITE_BLOB
                                ? "a blob of " + std::to_string(v.s.size()) + " bytes"
                                : "no value (NULL)";
  throw StoreError(path + ": run " + std::to_string(r.id) + " (\"" + cut_quote(r.name) +
                   "\"): " + "a row of " + where +
                   " has a step that is not a whole number: " + shown + "; nothing was imported");
}

// A blob's shape as fp8wb writes it: `dims` whole numbers, "," between them, whose product
// is the count of 4-byte floats in `data`.
bool valid_shape(const Value& shape, const Value& data, size_t dims) {
  if (shape.type != SQLITE_TEXT || shape.s.empty() || shape.s.size() > 40) return false;
  uint64_t cells = 1;
  size_t n = 0, i = 0;
  while (i <= shape.s.size()) {
    const size_t j = std::min(shape.s.find(',', i), shape.s.size());
    const std::string d = shape.s.substr(i, j - i);
    if (d.empty() || d.size() > 9 ||
        !std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return false;
    cells *= std::stoull(d);
    ++n;
    i = j + 1;
  }
  return n == dims && (data.type == SQLITE_BLOB || data.type == SQLITE_NULL) &&
         cells * sizeof(float) == data.s.size();
}

// Whether the file begins as every SQLite database does. SQLite calls any other file with
// something in it "not a database" (SQLITE_NOTADB), which reads as a damaged database;
// an empty file is an empty database to SQLite, so it counts as one.
bool sqlite_file(const std::string& path) {
  static const char kHeader[16] = "SQLite format 3";  // and its terminating zero
  std::ifstream f(path, std::ios::binary);
  char head[sizeof kHeader] = {};
  f.read(head, sizeof head);
  return f.gcount() == 0 ||
         (f.gcount() == sizeof head && std::memcmp(head, kHeader, sizeof head) == 0);
}

// A path that is no file, or no SQLite file, is refused before SQLite opens it.
void check_source_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    const std::string link = link_problem(path);
    throw StoreError("no run database at " + path + (link.empty() ? "" : ": it is " + link));
  }
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw StoreError(path + " is not a file, so not a run database");
  }
  if (!sqlite_file(path)) {
    throw StoreError(path + " is not a run database (not an SQLite file)");
  }
}

// SQLite's quick check, and a schema version this fp8wb reads; the version.
int check_integrity(const Db& db, const std::string& path) {
  {
    Stmt q(db, "PRAGMA quick_check");
    std::string check;
    while (q.step()) check += (check.empty() ? "" : "; ") + q.s(0);
    if (check != "ok") throw StoreError("run database " + path + " is damaged: " + check);
  }
  const int v = user_version(db);
  if (v > RunStore::kSchemaVersion) {
    throw StoreError("run database " + path + " has schema version " + std::to_string(v) +
                     ", newer than this fp8wb reads (" + std::to_string(RunStore::kSchemaVersion) +
                     "): update fp8wb");
  }
  return v;
}

// The runs' rows that `opt` chooses (all, or the one of opt.uuid), each with an identity.
std::vector<SourceRun> read_runs(const Db& db, const std::string& path, const ImportOptions& opt) {
  const bool has_uuid = has_column(db, "runs", "uuid");
  const std::string sql =
      "SELECT r.id, r.name, r.kind, r.status, r.config_json, r.device, r.started_at, "
      "IFNULL(r.ended_at, ''), r.message, IFNULL(r.parent_sweep, 0), r.owner_host, "
      "r.owner_pid, " +
      run_uuid_sql(has_uuid) + " FROM runs r ORDER BY r.id";
  Stmt q(db, sql.c_str());
  std::vector<SourceRun> runs;
  while (q.step()) {
    SourceRun r;
    r.id = q.i(0);
    r.uuid = stored_uuid(q.s(12), has_uuid);
    if (!opt.uuid.empty() && r.uuid != opt.uuid) continue;
    if (r.uuid.empty()) {
      throw StoreError(path + ": run " + std::to_string(r.id) + " has no identity");
    }
    if (!is_uuid(r.uuid)) {
      throw StoreError(path + ": run " + std::to_string(r.id) + " has the identity \"" +
                       cut_quote(r.uuid) + "\", which is no UUID; nothing was imported");
    }
    r.name = q.s(1);
    r.kind = q.s(2);
    r.status = q.s(3);
    parse_status(r.status, r.id, path);
    r.config_json = q.s(4);
    r.device = q.s(5);
    r.started_at = q.s(6);
    r.ended_at = q.s(7);
    r.message = q.s(8);
    r.parent_sweep = q.i(9);
    r.owner_host = value_of(q, 10);
    r.owner_pid = value_of(q, 11);
    runs.push_back(std::move(r));
  }
  if (!opt.uuid.empty() && runs.empty()) {
    throw StoreError(path + " holds no run with the identity " + opt.uuid);
  }
  return runs;
}

// The rows read into memory are bounded (a file's rows, not its size, set what its copy
// takes): counted before they are read.
void check_row_count(const Db& db, const std::string& path, const std::vector<SourceRun>& runs,
                     bool has_ranks) {
  int64_t rows = 0;
  const std::string count_sql =
      "SELECT (SELECT count(*) FROM scalars c JOIN series s ON c.series_id = s.id WHERE "
      "s.run_id = ?1) + (SELECT count(*) FROM tensor_stats WHERE run_id = ?1) + "
      "(SELECT count(*) FROM blobs WHERE run_id = ?1) + "
      "(SELECT count(*) FROM events WHERE run_id = ?1)" +
      std::string(has_ranks ? " + (SELECT count(*) FROM rank_scales WHERE run_id = ?1)" : "");
  Stmt q(db, count_sql.c_str());
  for (const SourceRun& r : runs) {
    q.bind(1, r.id);
    if (q.step()) rows += q.i(0);
    q.reset();
  }
  if (rows > kMaxImportRows) {
    throw StoreError(path + ": its runs hold " + std::to_string(rows) +
                     " rows of statistics, more than one import reads (" +
                     std::to_string(kMaxImportRows) +
                     ": the source is read whole before anything is written); nothing was "
                     "imported");
  }
}

// A run's series, tensor statistics, blobs, events, ranks' scales and per-step amaxes.
void read_run_rows(const Db& db, const std::string& path, SourceRun& r, bool has_ranks) {
  Stmt q(db,
         "SELECT s.name, c.step, c.value FROM scalars c JOIN series s ON c.series_id = s.id "
         "WHERE s.run_id = ? ORDER BY s.id, c.step");
  q.bind(1, r.id);
  while (q.step()) {
    check_step(value_of(q, 1), path, r, "its series \"" + cut_quote(q.s(0)) + "\"");
    r.scalars.push_back({q.s(0), q.i(1), value_of(q, 2)});
    if (r.scalars.back().series == "loss") r.last_step = std::max(r.last_step, q.i(1));
  }
  r.tensor_stats = read_rows(db, "SELECT * FROM tensor_stats WHERE run_id = ?", r.id, {"run_id"});
  r.blobs = read_rows(db, "SELECT step, layer, role, kind, shape, data FROM blobs WHERE run_id = ?",
                      r.id, {});
  r.events = read_rows(db, "SELECT step, kind, message FROM events WHERE run_id = ? ORDER BY id",
                       r.id, {});
  if (has_ranks) {
    r.rank_scales = read_rows(
        db, "SELECT step, layer, role, rank, amax, scale FROM rank_scales WHERE run_id = ?", r.id,
        {});
  }
  if (has_column(db, "step_amax", "amax")) {  // version 4 on
    r.amax_tensors = read_rows(
        db, "SELECT idx, layer, role, format FROM amax_tensors WHERE run_id = ?", r.id, {});
    r.step_amax = read_rows(db, "SELECT step, amax FROM step_amax WHERE run_id = ?", r.id, {});
  }
}

// Every step a whole number; roles, kinds and shapes what fp8wb writes: one outside them
// is refused here, before anything is written, rather than by every later reader of the
// target.
void check_run_rows(const std::string& path, const SourceRun& r) {
  const std::pair<const char*, const Rows*> stepped[] = {{"tensor_stats", &r.tensor_stats},
                                                         {"blobs", &r.blobs},
                                                         {"events", &r.events},
                                                         {"rank_scales", &r.rank_scales}};
  for (const auto& [table, rows] : stepped) {
    const auto col = std::find(rows->columns.begin(), rows->columns.end(), "step");
    if (col == rows->columns.end()) continue;
    for (const std::vector<Value>& row : rows->rows) {
      check_step(row[static_cast<size_t>(col - rows->columns.begin())], path, r,
                 std::string("its ") + table);
    }
  }
  const std::pair<const char*, const Rows*> roled[] = {
      {"tensor_stats", &r.tensor_stats}, {"blobs", &r.blobs}, {"rank_scales", &r.rank_scales}};
  for (const auto& [table, rows] : roled) {
    const auto col = std::find(rows->columns.begin(), rows->columns.end(), "role");
    if (col == rows->columns.end()) continue;
    for (const std::vector<Value>& row : rows->rows) {
      const Value& role = row[static_cast<size_t>(col - rows->columns.begin())];
      if (role.type == SQLITE_TEXT && parse_role(role.s)) continue;
      throw StoreError(path + ": run " + std::to_string(r.id) + " (\"" + cut_quote(r.name) +
                       "\"): a row of its " + table + " has the role " +
                       (role.type == SQLITE_TEXT ? "\"" + cut_quote(role.s) + "\"" : "of no text") +
                       ", which is none of fp8wb's (" + role_names() + "); nothing was imported");
    }
  }
  for (const std::vector<Value>& row : r.blobs.rows) {
    // step, layer, role, kind, shape, data
    const Value &kind = row[3], &shape = row[4], &data = row[5];
    std::string why;
    if (kind.type != SQLITE_TEXT || (kind.s != "error_map" && kind.s != "amax_history")) {
      why =
          "of the kind " +
          (kind.type == SQLITE_TEXT ? "\"" + cut_quote(kind.s) + "\"" : std::string("of no text")) +
          " (known: error_map, amax_history)";
    } else if (!valid_shape(shape, data, kind.s == "error_map" ? 2 : 1)) {
      why = "whose shape \"" + cut_quote(shape.s) + "\" does not fit its " +
            std::to_string(data.s.size()) + " bytes of data";
    }
    if (!why.empty()) {
      throw StoreError(path + ": run " + std::to_string(r.id) + " (\"" + cut_quote(r.name) +
                       "\"): a blob " + why + "; nothing was imported");
    }
  }
}

// The sweeps of these ids.
std::vector<SourceSweep> read_sweeps(const Db& db, const std::set<int64_t>& ids) {
  std::vector<SourceSweep> sweeps;
  if (ids.empty()) return sweeps;
  const std::string sql = "SELECT id, name, grid_json, status, created_at, " +
                          sweep_uuid_sql(has_column(db, "sweeps", "uuid")) +
                          " FROM sweeps ORDER BY id";
  Stmt q(db, sql.c_str());
  const bool sweep_uuid = has_column(db, "sweeps", "uuid");
  while (q.step()) {
    if (!ids.count(q.i(0))) continue;
    sweeps.push_back({q.i(0), stored_uuid(q.s(5), sweep_uuid), q.s(1), q.s(2), q.s(3), q.s(4)});
  }
  return sweeps;
}

// The source read within the snapshot read_source() began.
Source read_snapshot(const Db& db, const std::string& path, const ImportOptions& opt) {
  Source src;
  const int v = check_integrity(db, path);
  std::vector<std::string> tables;
  switch (file_kind(db, &tables)) {
    case FileKind::Foreign:
      throw StoreError(foreign_file_text(path, tables) + ": not a run database");
    case FileKind::Empty:
      // A 0-byte file or an SQLite file with no tables: an empty run database, as
      // RunStore::open() would make it and `runs list` reads it.
      if (!opt.uuid.empty()) throw StoreError(path + " holds no run with the identity " + opt.uuid);
      return src;
    case FileKind::Ours: break;
  }
  check_schema(db, path);
  if (v < 1 || !has_column(db, "runs", "config_json")) {
    throw StoreError(path + " is not a run database (it has no runs table of fp8wb's)");
  }
  const bool has_ranks = has_column(db, "rank_scales", "rank");  // version 3 on
  src.runs = read_runs(db, path, opt);
  check_row_count(db, path, src.runs, has_ranks);
  std::set<int64_t> sweeps;
  for (SourceRun& r : src.runs) {
    read_run_rows(db, path, r, has_ranks);
    check_run_rows(path, r);
    if (r.parent_sweep > 0 && opt.parent_sweep <= 0) sweeps.insert(r.parent_sweep);
  }
  src.sweeps = read_sweeps(db, sweeps);
  return src;
}

}  // namespace

RunStatus parse_status(const std::string& name, int64_t id, const std::string& path) {
  RunStatus s = RunStatus::Running;
  if (!parse_run_status(name, s)) {
    throw StoreError(path + ": run " + std::to_string(id) + " has an unknown status \"" +
                     name.substr(0, 40) + "\" (known: " + run_status_names() + ")");
  }
  return s;
}

Source read_source(const std::string& path, const ImportOptions& opt) {
  check_source_file(path);
  std::unique_ptr<Db> db = open_reader(path);
  db->exec("BEGIN");  // one snapshot of every table
  try {
    Source src = read_snapshot(*db, path, opt);
    db->exec("COMMIT");
    return src;
  } catch (const StoreError&) {
    sqlite3_exec(db->get(), "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

}  // namespace fp8wb::store
