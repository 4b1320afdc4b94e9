// The run store's row reads: runs, series, tensor statistics, blobs, events, sweeps.
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "fp8wb/core/store/run_store.h"
#include "run_store_sql.h"

namespace fp8wb {

using namespace store;  // Db, Stmt, the stored forms (run_store_sql.h)

std::vector<SweepInfo> RunStore::sweeps() const {
  if (impl_->empty) return {};  // a file with no tables yet
  const bool has_uuid = impl_->has_uuid;
  return impl_->read<std::vector<SweepInfo>>([has_uuid](const Db& db) {
    const std::string sql = "SELECT id, name, grid_json, status, created_at, " +
                            sweep_uuid_sql(has_uuid) + " FROM sweeps ORDER BY id";
    Stmt q(db, sql.c_str());
    std::vector<SweepInfo> out;
    while (q.step()) {
      SweepInfo s;
      s.id = q.i(0);
      s.name = q.s(1);
      s.grid_json = q.s(2);
      // A status this fp8wb does not know (a newer program's): the sweep reads as stopped,
      // never finished, and the name is kept to be shown.
      if (const auto status = parse_table_name(kSweepStatuses, q.s(3))) {
        s.status = *status;
      } else {
        s.status = SweepStatus::Stopped;
        s.unknown_status = q.s(3).empty() ? "none" : q.s(3).substr(0, 40);
      }
      s.created_at = q.s(4);
      s.uuid = stored_uuid(q.s(5), has_uuid);
      out.push_back(std::move(s));
    }
    return out;
  });
}

std::optional<SweepInfo> RunStore::sweep(int64_t id) const {
  for (SweepInfo& s : sweeps()) {
    if (s.id == id) return s;
  }
  return std::nullopt;
}

std::vector<RunInfo> RunStore::runs() const {
  if (impl_->empty) return {};
  const bool has_uuid = impl_->has_uuid;
  return impl_->read<std::vector<RunInfo>>([has_uuid](const Db& db) {
    const std::string sql =
        "SELECT r.id, r.name, r.kind, r.status, r.config_json, r.device, r.started_at, "
        "IFNULL(r.ended_at, ''), r.message, IFNULL(r.parent_sweep, 0), "
        "IFNULL((SELECT MAX(c.step) FROM scalars c JOIN series s ON c.series_id = s.id "
        "        WHERE s.run_id = r.id AND s.name = 'loss'), -1), "
        "IFNULL(r.owner_host, ''), IFNULL(r.owner_pid, 0), " +
        run_uuid_sql(has_uuid) + " FROM runs r ORDER BY r.id";
    Stmt q(db, sql.c_str());
    std::vector<RunInfo> out;
    while (q.step()) {
      RunInfo r;
      r.id = q.i(0);
      r.name = q.s(1);
      // A kind this fp8wb does not know (a newer program's) is kept, as the status is.
      if (const auto kind = parse_table_name(kRunKinds, q.s(2))) {
        r.kind = *kind;
      } else {
        r.unknown_kind = q.s(2).empty() ? "none" : q.s(2).substr(0, 40);
      }
      // A status this fp8wb does not know (written by hand, or by a newer program): the
      // run is listed all the same, unfinished, and the others stay readable.
      const bool unknown = !parse_run_status(q.s(3), r.status);
      if (unknown) {
        r.status = RunStatus::Failed;
        r.unknown_status = q.s(3).empty() ? "none" : q.s(3).substr(0, 40);
      }
      r.config_json = q.s(4);
      r.device = q.s(5);
      r.started_at = q.s(6);
      r.ended_at = q.s(7);
      r.message = q.s(8);
      if (unknown) {
        r.message = "its stored status is unknown (known: " + std::string(run_status_names()) +
                    ")" + (r.message.empty() ? "" : "; " + r.message);
      }
      r.parent_sweep = q.i(9);
      r.last_step = q.i(10);
      r.uuid = stored_uuid(q.s(13), has_uuid);
      r.writer_pid = q.i(12);
      if (r.status == RunStatus::Running || r.status == RunStatus::Paused) {
        r.live = writer_alive(q.s(11), q.i(12), r.started_at, true);
        if (!r.live) {
          r.status = RunStatus::Interrupted;
          r.message = kInterruptedMessage;
        }
      }
      out.push_back(std::move(r));
    }
    return out;
  });
}

std::string run_status_text(const RunInfo& run) {
  if (run.unknown_status.empty()) return std::string(run_status_name(run.status));
  return "unknown (" + run.unknown_status + ")";
}

std::optional<RunInfo> RunStore::run(int64_t id) const {
  for (RunInfo& r : runs()) {
    if (r.id == id) return r;
  }
  return std::nullopt;
}

std::vector<std::string> RunStore::series_names(int64_t run_id) const {
  if (impl_->empty) return {};
  return impl_->read<std::vector<std::string>>([&](const Db& db) {
    Stmt q(db, "SELECT name FROM series WHERE run_id = ? ORDER BY id");
    q.bind(1, run_id);
    std::vector<std::string> out;
    while (q.step()) out.push_back(q.s(0));
    return out;
  });
}

std::vector<SeriesPoint> RunStore::series(int64_t run_id, const std::string& name) const {
  if (impl_->empty) return {};
  return impl_->read<std::vector<SeriesPoint>>([&](const Db& db) {
    Stmt q(db,
           "SELECT c.step, c.value FROM scalars c JOIN series s ON c.series_id = s.id "
           "WHERE s.run_id = ? AND s.name = ? ORDER BY c.step");
    q.bind(1, run_id).bind(2, name);
    std::vector<SeriesPoint> out;
    while (q.step()) out.push_back({q.i(0), q.null(1) ? std::nan("") : q.d(1)});
    return out;
  });
}

std::vector<TensorMetrics> RunStore::tensor_stats(int64_t run_id, const std::string& layer,
                                                  const std::string& role) const {
  if (impl_->empty) return {};
  return impl_->read<std::vector<TensorMetrics>>([&](const Db& db) {
    const std::string sql = tensor_stat_select_sql() +
                            "WHERE run_id = ? AND (? = '' OR layer = ?) AND (? = '' OR role = ?) "
                            "ORDER BY layer, role, step";
    Stmt q(db, sql.c_str());
    q.bind(1, run_id).bind(2, layer).bind(3, layer).bind(4, role).bind(5, role);
    std::vector<TensorMetrics> out;
    std::optional<Float8LinearConfig> measured_under;  // read once there is a row
    while (q.step()) {
      TensorMetrics& t = out.emplace_back();
      t.step = q.i(0);
      t.layer = q.s(1);
      t.role = stored_role(q.s(2), run_id);
      read_tensor_stat_fields(q, 3, t);
      if (!measured_under) measured_under = stored_run_float8_config(db, run_id);
      set_recipe(t, *measured_under);
    }
    return out;
  });
}

std::vector<BlobRow> RunStore::blobs(int64_t run_id, const std::string& kind) const {
  if (impl_->empty) return {};
  return impl_->read<std::vector<BlobRow>>([&](const Db& db) {
    Stmt q(db,
           "SELECT step, layer, role, kind, shape, data FROM blobs WHERE run_id = ? "
           "AND (? = '' OR kind = ?) ORDER BY kind, layer, role, step");
    q.bind(1, run_id).bind(2, kind).bind(3, kind);
    std::vector<BlobRow> out;
    while (q.step()) {
      out.push_back({q.i(0), q.s(1), q.s(2), q.s(3), parse_shape(q.s(4)), q.blob(5)});
    }
    return out;
  });
}

std::vector<RunEvent> RunStore::events(int64_t run_id) const {
  if (impl_->empty) return {};
  return impl_->read<std::vector<RunEvent>>([&](const Db& db) {
    Stmt q(db, "SELECT step, kind, message FROM events WHERE run_id = ? ORDER BY id");
    q.bind(1, run_id);
    std::vector<RunEvent> out;
    while (q.step()) out.push_back(stored_run_event(q.i(0), q.s(1), q.s(2)));
    return out;
  });
}

std::vector<RankScale> RunStore::rank_scales(int64_t run_id, const std::string& layer,
                                             const std::string& role) const {
  if (impl_->empty) return {};
  return impl_->read<std::vector<RankScale>>([&](const Db& db) {
    std::vector<RankScale> out;
    Stmt t(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'rank_scales'");
    if (!t.step()) return out;  // a version-1 file read as it stands
    Stmt q(db,
           "SELECT step, layer, role, rank, amax, scale FROM rank_scales WHERE run_id = ?1 AND "
           "(?2 = '' OR layer = ?2) AND (?3 = '' OR role = ?3) ORDER BY layer, role, step, rank");
    q.bind(1, run_id).bind(2, layer).bind(3, role);
    while (q.step()) out.push_back(rank_scale_row(q, run_id));
    return out;
  });
}

StepAmaxTable RunStore::step_amax(int64_t run_id) const {
  if (impl_->empty) return {};
  return impl_->read<StepAmaxTable>([&](const Db& db) {
    StepAmaxTable out;
    Stmt t(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'step_amax'");
    if (!t.step()) return out;  // a file from before version 4 read as it stands
    db.exec("BEGIN");           // one snapshot: the tensors and the rows agree
    try {
      Stmt q(db, "SELECT layer, role, format FROM amax_tensors WHERE run_id = ? ORDER BY idx");
      q.bind(1, run_id);
      while (q.step()) {
        AmaxTensor a;
        a.layer = q.s(0);
        a.role = stored_role(q.s(1), run_id);
        const auto f = parse_format(q.s(2));
        if (!f) {
          throw StoreError("run " + std::to_string(run_id) +
                           ": recorded amax of an unknown format \"" + q.s(2).substr(0, 40) + "\"");
        }
        a.format = *f;
        out.tensors.push_back(std::move(a));
      }
      const size_t n = out.tensors.size();
      Stmt r(db, "SELECT step, amax FROM step_amax WHERE run_id = ? ORDER BY step");
      r.bind(1, run_id);
      while (r.step()) {
        const std::vector<uint8_t> b = r.blob(1);
        if (b.size() != n * sizeof(float)) {
          throw StoreError("run " + std::to_string(run_id) + ": the recorded amax of step " +
                           std::to_string(r.i(0)) + " has " + std::to_string(b.size()) +
                           " bytes for " + std::to_string(n) + " tensors");
        }
        out.steps.push_back(r.i(0));
        const size_t at = out.amax.size();
        out.amax.resize(at + n);
        if (n) std::memcpy(out.amax.data() + at, b.data(), b.size());
      }
      db.exec("COMMIT");
    } catch (...) {
      sqlite3_exec(db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
    return out;
  });
}

MetricBatch RunStore::read_new(int64_t run_id, RunCursor& cursor) const {
  if (impl_->empty) {
    MetricBatch b;
    b.run_id = run_id;
    return b;
  }
  return impl_->read<MetricBatch>([&](const Db& db) {
    MetricBatch b;
    b.run_id = run_id;
    db.exec("BEGIN");  // one snapshot for every table
    try {
      read_new_in(db, run_id, cursor, b);
      db.exec("COMMIT");
    } catch (...) {
      sqlite3_exec(db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
    return b;
  });
}

}  // namespace fp8wb
