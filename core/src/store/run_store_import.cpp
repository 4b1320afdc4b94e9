// Importing runs from another run database: the source is read whole, in one snapshot,
// and checked before anything is written; then one job on the writer thread writes every
// run in one transaction. A run is recognised by its identity (runs.uuid, or for a file
// of schema version 1 the one derived from its row, as its migration would store it).
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fp8wb/core/file_io.h"
#include "run_store_sql.h"

namespace fp8wb {

using namespace store;  // Db, Stmt (run_store_sql.h)

namespace {

// One SQLite value, whatever its type.
struct Value {
  int type = SQLITE_NULL;
  int64_t i = 0;
  double d = 0;
  std::string s;  // text or blob
};

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

// Text and blobs are bound where they lie (SQLITE_STATIC), not copied once more: `v`
// outlives the statement's step (the source's values live until the import's job ends). A
// blob of 60 MB then passes through two buffers at once (its Value, the row's record),
// not three.
void bind_value(Stmt& q, int i, const Value& v) {
  switch (v.type) {
    case SQLITE_INTEGER: q.bind(i, v.i); break;
    case SQLITE_FLOAT: q.bind(i, v.d); break;
    case SQLITE_TEXT:
      sqlite3_bind_text(q.raw(), i, v.s.data(), static_cast<int>(v.s.size()), SQLITE_STATIC);
      break;
    case SQLITE_BLOB:
      sqlite3_bind_blob(q.raw(), i, v.s.data(), static_cast<int>(v.s.size()), SQLITE_STATIC);
      break;
    default: sqlite3_bind_null(q.raw(), i); break;
  }
}

// Rows of one table with the columns they were read with.
struct Rows {
  std::vector<std::string> columns;
  std::vector<std::vector<Value>> rows;
};

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

struct SourceRun {
  int64_t id = 0;
  std::string uuid, name, kind, status, config_json, device, started_at, ended_at, message;
  Value owner_host, owner_pid;
  int64_t parent_sweep = 0, last_step = -1;
  struct Scalar {
    std::string series;
    int64_t step;
    Value value;
  };
  std::vector<Scalar> scalars;
  Rows tensor_stats, blobs, events, rank_scales, amax_tensors, step_amax;
};

struct SourceSweep {
  int64_t id = 0;
  std::string uuid, name, grid_json, status, created_at;
};

struct Source {
  std::vector<SourceRun> runs;
  std::vector<SourceSweep> sweeps;
};

// The most rows (scalars, tensor statistics, blobs, events, rank scales) one import reads:
// some 1.5 GiB in memory at most. A run of 100,000 steps with statistics of 40 layers at
// every tenth step has about 5 million.
constexpr int64_t kMaxImportRows = 10'000'000;

bool complete(RunStatus s) {
  return s == RunStatus::Finished || s == RunStatus::Stopped || s == RunStatus::Diverged;
}

RunStatus parse_status(const std::string& name, int64_t id, const std::string& path) {
  RunStatus s = RunStatus::Running;
  if (!parse_run_status(name, s)) {
    throw StoreError(path + ": run " + std::to_string(id) + " has an unknown status \"" +
                     name.substr(0, 40) + "\" (known: " + run_status_names() + ")");
  }
  return s;
}

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

Source read_source(const std::string& path, const ImportOptions& opt) {
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
  std::unique_ptr<Db> db = open_reader(path);
  Source src;
  db->exec("BEGIN");  // one snapshot of every table
  try {
    {
      Stmt q(*db, "PRAGMA quick_check");
      std::string check;
      while (q.step()) check += (check.empty() ? "" : "; ") + q.s(0);
      if (check != "ok") throw StoreError("run database " + path + " is damaged: " + check);
    }
    const int v = user_version(*db);
    if (v > RunStore::kSchemaVersion) {
      throw StoreError("run database " + path + " has schema version " + std::to_string(v) +
                       ", newer than this fp8wb reads (" +
                       std::to_string(RunStore::kSchemaVersion) + "): update fp8wb");
    }
    std::vector<std::string> tables;
    switch (file_kind(*db, &tables)) {
      case FileKind::Foreign:
        throw StoreError(foreign_file_text(path, tables) + ": not a run database");
      case FileKind::Empty:
        // A 0-byte file or an SQLite file with no tables: an empty run database, as
        // RunStore::open() would make it and `runs list` reads it.
        if (!opt.uuid.empty())
          throw StoreError(path + " holds no run with the identity " + opt.uuid);
        db->exec("COMMIT");
        return src;
      case FileKind::Ours: break;
    }
    check_schema(*db, path);
    if (v < 1 || !has_column(*db, "runs", "config_json")) {
      throw StoreError(path + " is not a run database (it has no runs table of fp8wb's)");
    }
    const bool has_uuid = has_column(*db, "runs", "uuid");
    const bool has_ranks = has_column(*db, "rank_scales", "rank");  // version 3 on
    std::set<int64_t> sweeps;
    {
      const std::string sql =
          "SELECT r.id, r.name, r.kind, r.status, r.config_json, r.device, r.started_at, "
          "IFNULL(r.ended_at, ''), r.message, IFNULL(r.parent_sweep, 0), r.owner_host, "
          "r.owner_pid, " +
          run_uuid_sql(has_uuid) + " FROM runs r ORDER BY r.id";
      Stmt q(*db, sql.c_str());
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
        src.runs.push_back(std::move(r));
      }
    }
    if (!opt.uuid.empty() && src.runs.empty()) {
      throw StoreError(path + " holds no run with the identity " + opt.uuid);
    }
    // The rows read into memory are bounded (a file's rows, not its size, set what its
    // copy takes): counted before they are read.
    {
      int64_t rows = 0;
      const std::string count_sql =
          "SELECT (SELECT count(*) FROM scalars c JOIN series s ON c.series_id = s.id WHERE "
          "s.run_id = ?1) + (SELECT count(*) FROM tensor_stats WHERE run_id = ?1) + "
          "(SELECT count(*) FROM blobs WHERE run_id = ?1) + "
          "(SELECT count(*) FROM events WHERE run_id = ?1)" +
          std::string(has_ranks ? " + (SELECT count(*) FROM rank_scales WHERE run_id = ?1)" : "");
      Stmt q(*db, count_sql.c_str());
      for (const SourceRun& r : src.runs) {
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
    for (SourceRun& r : src.runs) {
      Stmt q(*db,
             "SELECT s.name, c.step, c.value FROM scalars c JOIN series s ON c.series_id = s.id "
             "WHERE s.run_id = ? ORDER BY s.id, c.step");
      q.bind(1, r.id);
      while (q.step()) {
        check_step(value_of(q, 1), path, r, "its series \"" + cut_quote(q.s(0)) + "\"");
        r.scalars.push_back({q.s(0), q.i(1), value_of(q, 2)});
        if (r.scalars.back().series == "loss") r.last_step = std::max(r.last_step, q.i(1));
      }
      r.tensor_stats =
          read_rows(*db, "SELECT * FROM tensor_stats WHERE run_id = ?", r.id, {"run_id"});
      r.blobs = read_rows(
          *db, "SELECT step, layer, role, kind, shape, data FROM blobs WHERE run_id = ?", r.id, {});
      r.events = read_rows(
          *db, "SELECT step, kind, message FROM events WHERE run_id = ? ORDER BY id", r.id, {});
      if (has_ranks) {
        r.rank_scales = read_rows(
            *db, "SELECT step, layer, role, rank, amax, scale FROM rank_scales WHERE run_id = ?",
            r.id, {});
      }
      if (has_column(*db, "step_amax", "amax")) {  // version 4 on
        r.amax_tensors = read_rows(
            *db, "SELECT idx, layer, role, format FROM amax_tensors WHERE run_id = ?", r.id, {});
        r.step_amax = read_rows(*db, "SELECT step, amax FROM step_amax WHERE run_id = ?", r.id, {});
      }
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
      // Roles, kinds and shapes are what fp8wb writes: one outside them is refused here,
      // before anything is written, rather than by every later reader of the target.
      const std::pair<const char*, const Rows*> roled[] = {
          {"tensor_stats", &r.tensor_stats}, {"blobs", &r.blobs}, {"rank_scales", &r.rank_scales}};
      for (const auto& [table, rows] : roled) {
        const auto col = std::find(rows->columns.begin(), rows->columns.end(), "role");
        if (col == rows->columns.end()) continue;
        for (const std::vector<Value>& row : rows->rows) {
          const Value& role = row[static_cast<size_t>(col - rows->columns.begin())];
          if (role.type == SQLITE_TEXT && parse_role(role.s)) continue;
          throw StoreError(
              path + ": run " + std::to_string(r.id) + " (\"" + cut_quote(r.name) +
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
          why = "of the kind " +
                (kind.type == SQLITE_TEXT ? "\"" + cut_quote(kind.s) + "\""
                                          : std::string("of no text")) +
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
      if (r.parent_sweep > 0 && opt.parent_sweep <= 0) sweeps.insert(r.parent_sweep);
    }
    if (!sweeps.empty()) {
      const std::string sql = "SELECT id, name, grid_json, status, created_at, " +
                              sweep_uuid_sql(has_column(*db, "sweeps", "uuid")) +
                              " FROM sweeps ORDER BY id";
      Stmt q(*db, sql.c_str());
      const bool sweep_uuid = has_column(*db, "sweeps", "uuid");
      while (q.step()) {
        if (!sweeps.count(q.i(0))) continue;
        src.sweeps.push_back(
            {q.i(0), stored_uuid(q.s(5), sweep_uuid), q.s(1), q.s(2), q.s(3), q.s(4)});
      }
    }
    db->exec("COMMIT");
  } catch (const StoreError&) {
    sqlite3_exec(db->get(), "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
  return src;
}

std::string insert_sql(const char* table, const std::vector<std::string>& columns,
                       const std::string& first) {
  std::string cols = first, marks = "?";
  for (const std::string& c : columns) {
    cols += ", " + c;
    marks += ", ?";
  }
  return std::string("INSERT INTO ") + table + "(" + cols + ") VALUES(" + marks + ")";
}

}  // namespace

ImportReport RunStore::import_runs(const std::string& source_path, const ImportOptions& opt) {
  if (impl_->read_only) throw StoreError("run database " + impl_->path + " is open read-only");
  auto src = std::make_shared<Source>(read_source(source_path, opt));  // throws before writing
  auto report = std::make_shared<ImportReport>();
  Impl* im = impl_.get();
  im->enqueue([im, src, report, opt] {
    // Run again from the start where the target was locked (the transaction rolled back).
    *report = ImportReport{};
    const Db& w = *im->writer;
    // The target's identities, read once.
    std::map<std::string, int64_t> runs_here, sweeps_here;
    {
      Stmt q(w, "SELECT uuid, id FROM runs WHERE uuid IS NOT NULL");
      while (q.step()) runs_here.emplace(q.s(0), q.i(1));
      Stmt p(w, "SELECT uuid, id FROM sweeps WHERE uuid IS NOT NULL");
      while (p.step()) sweeps_here.emplace(p.s(0), p.i(1));
    }
    // The sweeps the runs belong to, by identity.
    std::map<int64_t, int64_t> sweep_ids;  // source id -> target id
    for (const SourceSweep& s : src->sweeps) {
      if (const auto it = sweeps_here.find(s.uuid); it != sweeps_here.end()) {
        sweep_ids[s.id] = it->second;
        // A copy made while the sweep ran takes the source's later status, as its trials
        // are replaced by their finished runs below.
        if (s.status != "running") {
          Stmt u(w, "UPDATE sweeps SET status = ? WHERE id = ? AND status = 'running'");
          u.bind(1, s.status).bind(2, it->second).run();
        }
        continue;
      }
      Stmt ins(w,
               "INSERT INTO sweeps(name, grid_json, status, created_at, uuid) "
               "VALUES(?, ?, ?, ?, ?)");
      ins.bind(1, s.name).bind(2, s.grid_json).bind(3, s.status).bind(4, s.created_at);
      ins.bind(5, s.uuid).run();
      sweep_ids[s.id] = sweeps_here[s.uuid] = sqlite3_last_insert_rowid(w.get());
    }
    for (const SourceRun& r : src->runs) {
      RunStatus status = parse_status(r.status, r.id, "");
      std::string message = r.message, ended_at = r.ended_at;
      if (opt.status) {
        status = *opt.status;
        message = opt.message;
        if (ended_at.empty()) ended_at = now_utc();
      }
      // The target's copy, if any.
      int64_t replace = 0;
      if (const auto here = runs_here.find(r.uuid); here != runs_here.end()) {
        Stmt q(w,
               "SELECT r.id, r.status, IFNULL(r.owner_host, ''), IFNULL(r.owner_pid, 0), "
               "IFNULL((SELECT MAX(c.step) FROM scalars c JOIN series s ON c.series_id = s.id "
               "        WHERE s.run_id = r.id AND s.name = 'loss'), -1), r.started_at "
               "FROM runs r WHERE r.id = ?");
        q.bind(1, here->second);
        if (q.step()) {
          const int64_t id = q.i(0);
          RunStatus have = RunStatus::Running;
          parse_run_status(q.s(1), have);
          const bool live = (have == RunStatus::Running || have == RunStatus::Paused) &&
                            writer_alive(q.s(2), q.i(3), q.s(5), false);
          const bool further = complete(status) || r.last_step > q.i(4);
          if (complete(have) || live || !further) {
            report->unchanged++;
            report->run_ids.push_back(id);
            continue;
          }
          replace = id;
        }
      }
      if (replace) {
        Stmt d(w, "DELETE FROM runs WHERE id = ?");
        d.bind(1, replace).run();
        for (auto it = im->series_ids.begin(); it != im->series_ids.end();) {
          it = it->first.first == replace ? im->series_ids.erase(it) : std::next(it);
        }
      }
      int64_t parent = 0;
      if (opt.parent_sweep > 0) {
        parent = opt.parent_sweep;
      } else if (r.parent_sweep > 0) {
        const auto it = sweep_ids.find(r.parent_sweep);
        parent = it == sweep_ids.end() ? 0 : it->second;
      }
      int64_t id = 0;
      {
        Stmt ins(w,
                 "INSERT INTO runs(id, name, kind, status, config_json, device, started_at, "
                 "ended_at, message, parent_sweep, owner_host, owner_pid, uuid) "
                 "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
        if (replace) ins.bind(1, replace);
        ins.bind(2, opt.name.empty() ? r.name : opt.name);
        ins.bind(3, opt.parent_sweep > 0 ? std::string("sweep-trial") : r.kind);
        ins.bind(4, std::string(run_status_name(status))).bind(5, r.config_json);
        ins.bind(6, r.device).bind(7, r.started_at);
        if (!ended_at.empty()) ins.bind(8, ended_at);
        ins.bind(9, message);
        if (parent > 0) ins.bind(10, parent);
        // A copy of a run still being written is no process's live run here: its writer
        // writes into the source file, never into this one. Without an owner it reads as
        // interrupted until a later import brings it further.
        if (status != RunStatus::Running && status != RunStatus::Paused) {
          bind_value(ins, 11, r.owner_host);
          bind_value(ins, 12, r.owner_pid);
        }
        ins.bind(13, r.uuid).run();
        id = sqlite3_last_insert_rowid(w.get());
        runs_here[r.uuid] = id;  // a source that names a run twice adds it once
      }
      {
        Stmt ser(w, "INSERT INTO series(run_id, name) VALUES(?, ?)");
        Stmt val(w, "INSERT INTO scalars(series_id, step, value) VALUES(?, ?, ?)");
        std::map<std::string, int64_t> series;
        for (const SourceRun::Scalar& s : r.scalars) {
          auto it = series.find(s.series);
          if (it == series.end()) {
            ser.bind(1, id).bind(2, s.series).run();
            it = series.emplace(s.series, sqlite3_last_insert_rowid(w.get())).first;
          }
          val.bind(1, it->second).bind(2, s.step);
          bind_value(val, 3, s.value);
          val.run();
        }
      }
      const std::pair<const char*, const Rows*> tables[] = {{"tensor_stats", &r.tensor_stats},
                                                            {"blobs", &r.blobs},
                                                            {"events", &r.events},
                                                            {"rank_scales", &r.rank_scales},
                                                            {"amax_tensors", &r.amax_tensors},
                                                            {"step_amax", &r.step_amax}};
      for (const auto& [table, rows] : tables) {
        if (rows->rows.empty()) continue;
        // Only the columns the target has (a source of an older schema has fewer; the
        // rest stay NULL).
        std::vector<size_t> keep;
        std::vector<std::string> columns;
        for (size_t c = 0; c < rows->columns.size(); ++c) {
          if (has_column(w, table, rows->columns[c].c_str())) {
            keep.push_back(c);
            columns.push_back(rows->columns[c]);
          }
        }
        Stmt ins(w, insert_sql(table, columns, "run_id").c_str());
        for (const std::vector<Value>& row : rows->rows) {
          ins.bind(1, id);
          for (size_t k = 0; k < keep.size(); ++k) {
            bind_value(ins, static_cast<int>(k) + 2, row[keep[k]]);
          }
          ins.run();
        }
      }
      (replace ? report->updated : report->added)++;
      report->run_ids.push_back(id);
    }
  });
  flush();
  return *report;
}

}  // namespace fp8wb
