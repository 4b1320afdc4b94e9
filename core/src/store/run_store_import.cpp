// Importing runs from another run database: the source is read whole, in one snapshot,
// and checked before anything is written (run_store_import_read.cpp); then one job on the
// writer thread writes every run in one transaction. A run is recognised by its identity
// (runs.uuid, or for a file of schema version 1 the one derived from its row, as its
// migration would store it).
#include <sqlite3.h>

#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "run_store_import.h"

namespace fp8wb {

using namespace store;  // Db, Stmt (run_store_sql.h), Source (run_store_import.h)

void store::bind_value(Stmt& q, int i, const Value& v) {
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

namespace {

using SeriesIds = std::map<std::pair<int64_t, std::string>, int64_t>;

bool complete(RunStatus s) {
  return s == RunStatus::Finished || s == RunStatus::Stopped || s == RunStatus::Diverged;
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

// The target's identities (uuid -> id) of runs and sweeps, read once a job.
struct Identities {
  std::map<std::string, int64_t> runs, sweeps;
};

Identities identities_here(const Db& w) {
  Identities here;
  Stmt q(w, "SELECT uuid, id FROM runs WHERE uuid IS NOT NULL");
  while (q.step()) here.runs.emplace(q.s(0), q.i(1));
  Stmt p(w, "SELECT uuid, id FROM sweeps WHERE uuid IS NOT NULL");
  while (p.step()) here.sweeps.emplace(p.s(0), p.i(1));
  return here;
}

// The sweeps the runs belong to, by identity: source id -> target id.
std::map<int64_t, int64_t> import_sweeps(const Db& w, const Source& src, Identities& here) {
  std::map<int64_t, int64_t> sweep_ids;
  for (const SourceSweep& s : src.sweeps) {
    if (const auto it = here.sweeps.find(s.uuid); it != here.sweeps.end()) {
      sweep_ids[s.id] = it->second;
      // A copy made while the sweep ran takes the source's later status, as its trials
      // are replaced by their finished runs below (a status this fp8wb does not know, as
      // the source stored it).
      const std::string running(sweep_status_name(SweepStatus::Running));
      if (parse_table_name(kSweepStatuses, s.status) != SweepStatus::Running) {
        Stmt u(w, "UPDATE sweeps SET status = ? WHERE id = ? AND status = ?");
        u.bind(1, s.status).bind(2, it->second).bind(3, running).run();
      }
      continue;
    }
    Stmt ins(w,
             "INSERT INTO sweeps(name, grid_json, status, created_at, uuid) "
             "VALUES(?, ?, ?, ?, ?)");
    ins.bind(1, s.name).bind(2, s.grid_json).bind(3, s.status).bind(4, s.created_at);
    ins.bind(5, s.uuid).run();
    sweep_ids[s.id] = here.sweeps[s.uuid] = sqlite3_last_insert_rowid(w.get());
  }
  return sweep_ids;
}

// The target's copy of a run: 0 where it has none; its id with `keep` set where it stays
// (finished here, live here, or no further in the source), else its id to replace.
int64_t copy_here(const Db& w, int64_t here_id, const SourceRun& r, RunStatus status, bool& keep) {
  Stmt q(w,
         "SELECT r.id, r.status, IFNULL(r.owner_host, ''), IFNULL(r.owner_pid, 0), "
         "IFNULL((SELECT MAX(c.step) FROM scalars c JOIN series s ON c.series_id = s.id "
         "        WHERE s.run_id = r.id AND s.name = 'loss'), -1), r.started_at "
         "FROM runs r WHERE r.id = ?");
  q.bind(1, here_id);
  keep = false;
  if (!q.step()) return 0;
  const int64_t id = q.i(0);
  RunStatus have = RunStatus::Running;
  parse_run_status(q.s(1), have);
  const bool live = (have == RunStatus::Running || have == RunStatus::Paused) &&
                    writer_alive(q.s(2), q.i(3), q.s(5), false);
  const bool further = complete(status) || r.last_step > q.i(4);
  keep = complete(have) || live || !further;
  return id;
}

// The run's row (under the id `replace` where not 0); its id.
int64_t insert_run(const Db& w, const SourceRun& r, const ImportOptions& opt, RunStatus status,
                   const std::string& message, const std::string& ended_at, int64_t parent,
                   int64_t replace) {
  Stmt ins(w,
           "INSERT INTO runs(id, name, kind, status, config_json, device, started_at, "
           "ended_at, message, parent_sweep, owner_host, owner_pid, uuid) "
           "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (replace) ins.bind(1, replace);
  ins.bind(2, opt.name.empty() ? r.name : opt.name);
  // The source's kind as it stored it (one this fp8wb does not know too).
  ins.bind(3, opt.parent_sweep > 0 ? std::string(run_kind_name(RunKind::SweepTrial)) : r.kind);
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
  return sqlite3_last_insert_rowid(w.get());
}

// The run's series and every row of its other tables, under the target's run `id`.
void insert_run_rows(const Db& w, int64_t id, const SourceRun& r) {
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
}

// The writer's job: every run written (or left, or replaced) and its sweep. Run again from
// the start where the target was locked (the transaction rolled back). `series_ids`: the
// writer's cache of series ids, which a replaced run's leave.
void write_import(const Db& w, SeriesIds& series_ids, const Source& src, const ImportOptions& opt,
                  ImportReport& report) {
  report = ImportReport{};
  Identities here = identities_here(w);
  const std::map<int64_t, int64_t> sweep_ids = import_sweeps(w, src, here);
  for (const SourceRun& r : src.runs) {
    RunStatus status = parse_status(r.status, r.id, "");
    std::string message = r.message, ended_at = r.ended_at;
    if (opt.status) {
      status = *opt.status;
      message = opt.message;
      if (ended_at.empty()) ended_at = now_utc();
    }
    int64_t replace = 0;
    if (const auto it = here.runs.find(r.uuid); it != here.runs.end()) {
      bool keep = false;
      const int64_t id = copy_here(w, it->second, r, status, keep);
      if (keep) {
        report.unchanged++;
        report.run_ids.push_back(id);
        continue;
      }
      replace = id;
    }
    if (replace) {
      Stmt d(w, "DELETE FROM runs WHERE id = ?");
      d.bind(1, replace).run();
      for (auto it = series_ids.begin(); it != series_ids.end();) {
        it = it->first.first == replace ? series_ids.erase(it) : std::next(it);
      }
    }
    int64_t parent = 0;
    if (opt.parent_sweep > 0) {
      parent = opt.parent_sweep;
    } else if (r.parent_sweep > 0) {
      const auto it = sweep_ids.find(r.parent_sweep);
      parent = it == sweep_ids.end() ? 0 : it->second;
    }
    const int64_t id = insert_run(w, r, opt, status, message, ended_at, parent, replace);
    here.runs[r.uuid] = id;  // a source that names a run twice adds it once
    insert_run_rows(w, id, r);
    (replace ? report.updated : report.added)++;
    report.run_ids.push_back(id);
  }
}

}  // namespace

ImportReport RunStore::import_runs(const std::string& source_path, const ImportOptions& opt) {
  if (impl_->read_only) throw StoreError("run database " + impl_->path + " is open read-only");
  auto src = std::make_shared<Source>(read_source(source_path, opt));  // throws before writing
  auto report = std::make_shared<ImportReport>();
  Impl* im = impl_.get();
  im->enqueue(
      [im, src, report, opt] { write_import(*im->writer, im->series_ids, *src, opt, *report); });
  flush();
  return *report;
}

}  // namespace fp8wb
