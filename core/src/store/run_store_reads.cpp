// Reading runs back: what was committed since a cursor (following a run live, opening a
// stored one), a run's scalars and its tensor statistics as CSV.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <tuple>

#include "fp8wb/core/watch/watch.h"
#include "run_store_sql.h"

namespace fp8wb {
namespace store {

Float8LinearConfig stored_run_float8_config(const Db& db, int64_t run_id) {
  Stmt q(db, "SELECT config_json FROM runs WHERE id = ?");
  q.bind(1, run_id);
  return stored_float8_config(q.step() ? q.s(0) : std::string());
}

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// Scalars: the step series and the per-layer SQNR series ("sqnr/<layer>/<gemm>").
void read_new_scalars(const Db& db, int64_t run_id, RunCursor& cursor, MetricBatch& b) {
  std::map<int64_t, StepMetrics> steps;
  std::map<std::pair<int64_t, std::string>, SqnrMetrics> sqnr;
  Stmt q(db,
         "SELECT s.name, c.step, c.value FROM scalars c JOIN series s ON c.series_id = s.id "
         "WHERE s.run_id = ? AND c.step > ? ORDER BY c.step");
  q.bind(1, run_id).bind(2, cursor.scalar_step);
  int64_t last = cursor.scalar_step;
  while (q.step()) {
    const std::string name = q.s(0);
    const int64_t step = q.i(1);
    const double v = q.null(2) ? kNan : q.d(2);
    last = std::max(last, step);
    if (name.rfind("sqnr/", 0) == 0) {
      const size_t slash = name.rfind('/');
      if (slash <= 5) continue;
      const std::string layer = name.substr(5, slash - 5), gemm = name.substr(slash + 1);
      auto it = sqnr.find({step, layer});
      if (it == sqnr.end())
        it = sqnr.emplace(std::make_pair(step, layer), SqnrMetrics{step, layer, kNan, kNan, kNan})
                 .first;
      if (gemm == "fprop") it->second.fprop_db = v;
      if (gemm == "dgrad") it->second.dgrad_db = v;
      if (gemm == "wgrad") it->second.wgrad_db = v;
      continue;
    }
    for (const StepSeries& k : kStepSeries) {
      if (name != k.name) continue;
      auto it = steps.find(step);
      if (it == steps.end()) {
        StepMetrics m;
        m.step = step;
        for (const StepSeries& f : kStepSeries) m.*f.field = kNan;
        it = steps.emplace(step, m).first;
      }
      it->second.*k.field = v;
    }
  }
  cursor.scalar_step = last;
  for (auto& [step, m] : steps) b.steps.push_back(m);
  for (auto& [key, m] : sqnr) b.sqnr.push_back(std::move(m));
}

// Tensor statistics, with the maps and amax windows of the same steps.
void read_new_tensor_stats(const Db& db, int64_t run_id, RunCursor& cursor, MetricBatch& b) {
  const std::string sql =
      tensor_stat_select_sql() + "WHERE run_id = ? AND step > ? ORDER BY step, layer, role";
  Stmt q(db, sql.c_str());
  q.bind(1, run_id).bind(2, cursor.tensor_step);
  std::map<std::tuple<int64_t, std::string, Role>, size_t> index;
  int64_t last = cursor.tensor_step;
  std::optional<Float8LinearConfig> measured_under;  // read once there is a row
  while (q.step()) {
    TensorMetrics t;
    t.step = q.i(0);
    t.layer = q.s(1);
    t.role = stored_role(q.s(2), run_id);
    read_tensor_stat_fields(q, 3, t);
    if (!measured_under) measured_under = stored_run_float8_config(db, run_id);
    set_recipe(t, *measured_under);
    last = std::max(last, t.step);
    index[{t.step, t.layer, t.role}] = b.tensors.size();
    b.tensors.push_back(std::move(t));
  }
  if (!b.tensors.empty()) {
    Stmt m(db,
           "SELECT step, layer, role, kind, shape, data FROM blobs WHERE run_id = ? "
           "AND step > ? AND step <= ?");
    m.bind(1, run_id).bind(2, cursor.tensor_step).bind(3, last);
    while (m.step()) {
      const auto it = index.find({m.i(0), m.s(1), stored_role(m.s(2), run_id)});
      if (it == index.end()) continue;
      TensorMetrics& t = b.tensors[it->second];
      const std::string kind = m.s(3);
      const std::vector<int64_t> shape = parse_shape(m.s(4));
      const std::vector<uint8_t> data = m.blob(5);
      std::vector<float> values(data.size() / sizeof(float));
      // An empty blob: both pointers may be null (memcpy() from null is undefined).
      if (!values.empty()) {
        std::memcpy(values.data(), data.data(), values.size() * sizeof(float));
      }
      if (kind == "error_map" && shape.size() == 2 && shape[0] >= 0 && shape[1] >= 0 &&
          static_cast<uint64_t>(shape[0]) * static_cast<uint64_t>(shape[1]) == values.size()) {
        t.map_grid.rows = shape[0];
        t.map_grid.cols = shape[1];
        t.map_rel_error = std::move(values);
      } else if (kind == "amax_history") {
        t.amax_history = std::move(values);
      }
    }
  }
  cursor.tensor_step = last;
}

bool has_table(const Db& db, const char* name) {
  Stmt t(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
  t.bind(1, std::string(name));
  return t.step();
}

// Every rank's amax and scale (a data-parallel run; rank 0 writes a step's rows in one
// commit, so a step is read whole). A version-1 file read as it stands has no table.
void read_new_rank_scales(const Db& db, int64_t run_id, RunCursor& cursor, MetricBatch& b) {
  if (!has_table(db, "rank_scales")) return;
  Stmt q(db,
         "SELECT step, layer, role, rank, amax, scale FROM rank_scales WHERE run_id = ? AND "
         "step > ? ORDER BY step, layer, role, rank");
  q.bind(1, run_id).bind(2, cursor.rank_step);
  while (q.step()) {
    RankScale r = rank_scale_row(q, run_id);
    cursor.rank_step = std::max(cursor.rank_step, r.step);
    b.ranks.push_back(std::move(r));
  }
}

// Every step's amax (schema 4 on): the tensors' order with the first rows read.
void read_new_step_amax(const Db& db, int64_t run_id, RunCursor& cursor, MetricBatch& b) {
  if (!has_table(db, "step_amax")) return;
  if (cursor.amax_step < 0) {
    Stmt q(db, "SELECT layer, role, format FROM amax_tensors WHERE run_id = ? ORDER BY idx");
    q.bind(1, run_id);
    while (q.step()) {
      const auto f = parse_format(q.s(2));
      if (!f) continue;
      b.amax_tensors.push_back({q.s(0), stored_role(q.s(1), run_id), *f});
    }
  }
  if (cursor.amax_step < 0 && b.amax_tensors.empty()) return;
  Stmt q(db, "SELECT step, amax FROM step_amax WHERE run_id = ? AND step > ? ORDER BY step");
  q.bind(1, run_id).bind(2, cursor.amax_step);
  while (q.step()) {
    const std::vector<uint8_t> data = q.blob(1);
    StepAmax a;
    a.step = q.i(0);
    a.amax.resize(data.size() / sizeof(float));
    if (!a.amax.empty()) std::memcpy(a.amax.data(), data.data(), a.amax.size() * sizeof(float));
    cursor.amax_step = std::max(cursor.amax_step, a.step);
    b.step_amax.push_back(std::move(a));
  }
}

void read_new_events(const Db& db, int64_t run_id, RunCursor& cursor, MetricBatch& b) {
  Stmt q(db, "SELECT id, step, kind, message FROM events WHERE run_id = ? AND id > ? ORDER BY id");
  q.bind(1, run_id).bind(2, cursor.event_id);
  while (q.step()) {
    cursor.event_id = q.i(0);
    b.events.push_back(stored_run_event(q.i(1), q.s(2), q.s(3)));
  }
}

}  // namespace

void read_new_in(const Db& db, int64_t run_id, RunCursor& cursor, MetricBatch& b) {
  read_new_scalars(db, run_id, cursor, b);
  read_new_tensor_stats(db, run_id, cursor, b);
  read_new_rank_scales(db, run_id, cursor, b);
  read_new_step_amax(db, run_id, cursor, b);
  read_new_events(db, run_id, cursor, b);
}

}  // namespace store

void write_run_csv(const RunStore& store, int64_t run_id, std::ostream& out) {
  const auto names = store.series_names(run_id);
  std::map<int64_t, std::vector<double>> rows;
  for (size_t c = 0; c < names.size(); ++c) {
    for (const SeriesPoint& p : store.series(run_id, names[c])) {
      auto& row = rows[p.step];
      row.resize(names.size(), std::nan(""));
      row[c] = p.value;
    }
  }
  out << "step";
  for (const auto& n : names) out << ',' << n;
  out << '\n';
  char buf[32];
  for (auto& [step, row] : rows) {
    row.resize(names.size(), std::nan(""));
    out << step;
    for (double v : row) {
      out << ',';
      if (std::isfinite(v)) {
        std::snprintf(buf, sizeof buf, "%.17g", v);
        out << buf;
      }
    }
    out << '\n';
  }
}

void write_tensor_stats_csv(const RunStore& store, int64_t run_id, std::ostream& out) {
  const std::vector<TensorMetrics> rows = store.tensor_stats(run_id);
  out << "step,layer,role";
  for (const TensorStatField& f : kTensorStatFields) {
    if (f.type != TensorStatField::Type::Histogram) out << ',' << f.name;
  }
  for (const TensorStatFigure& g : kTensorStatFigures) out << ',' << g.name;
  out << '\n';
  char buf[32];
  auto real = [&](double v) {
    out << ',';
    if (std::isfinite(v)) {
      std::snprintf(buf, sizeof buf, "%.17g", v);
      out << buf;
    }
  };
  for (const TensorMetrics& t : rows) {
    out << t.step << ',' << t.layer << ',' << role_name(t.role);
    for (const TensorStatField& f : kTensorStatFields) {
      if (f.type == TensorStatField::Type::Count) {
        out << ',' << t.raw.*f.count;
      } else if (f.type != TensorStatField::Type::Histogram) {
        real(stat_value(t, f));
      }
    }
    for (const TensorStatFigure& g : kTensorStatFigures) real(g.of(t.raw));
    out << '\n';
  }
}

}  // namespace fp8wb
