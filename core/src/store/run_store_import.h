// defines: the source of an import as read (Value, Rows, SourceRun, SourceSweep, Source)
// and read_source(), which reads and checks it whole (run_store_import_read.cpp); what
// run_store_import.cpp writes from it. Internal to core.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <vector>

#include "run_store_sql.h"

namespace fp8wb::store {

// One SQLite value, whatever its type.
struct Value {
  int type = SQLITE_NULL;
  int64_t i = 0;
  double d = 0;
  std::string s;  // text or blob
};

// Text and blobs are bound where they lie (SQLITE_STATIC), not copied once more: `v`
// outlives the statement's step (the source's values live until the import's job ends). A
// blob of 60 MB then passes through two buffers at once (its Value, the row's record),
// not three.
void bind_value(Stmt& q, int i, const Value& v);

// Rows of one table with the columns they were read with.
struct Rows {
  std::vector<std::string> columns;
  std::vector<std::vector<Value>> rows;
};

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

// A run's status by name; an unknown one is refused, naming the run and `path`.
RunStatus parse_status(const std::string& name, int64_t id, const std::string& path);

// The runs `opt` chooses of the database at `path` (all, or the one of opt.uuid) with every
// row, and their sweeps, read in one snapshot and checked (the file, its schema, the rows'
// count, steps, roles and blobs): a StoreError naming the problem before anything is
// written.
Source read_source(const std::string& path, const ImportOptions& opt);

}  // namespace fp8wb::store
