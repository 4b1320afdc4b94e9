#include "train_command.h"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>
#include "fp8wb/core/file_io.h"

#include "fp8wb/core/run_store.h"
#include "fp8wb/core/trainer.h"
#include "stop_signals.h"

namespace fp8wb::cli {
namespace {

using nlohmann::json;

// JSON out: strings that are not UTF-8 (a path, say) are written with U+FFFD, never refused.
std::string dump(const json& j, int indent = -1) {
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

json num(double v) {
  return std::isfinite(v) ? json(v) : json();
}

std::string fmt_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{:02}:{:02}", s / 60, s % 60);
}

// The progress bar: one line, redrawn at most five times a second, with the ETA.
class Console : public MetricConsumer {
 public:
  Console(std::ostream& err, int64_t steps, bool quiet) : err_(err), steps_(steps), quiet_(quiet) {}
  void consume(const MetricBatch& b) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (const RunEvent& e : b.events) {
      if (e.kind == "started" || e.kind == "skipped" || e.kind == "diverged") {
        if (!quiet_) err_ << "\r\033[K" << e.kind << ": " << e.message << "\n";
      }
    }
    if (b.steps.empty()) return;
    last_ = b.steps.back();
    any_ = true;
    const auto now = std::chrono::steady_clock::now();
    if (!started_) {
      start_ = now;
      started_ = true;
    }
    if (quiet_ || (now - drawn_ < std::chrono::milliseconds(200) && last_.step + 1 < steps_))
      return;
    drawn_ = now;
    const double done = static_cast<double>(last_.step + 1) / static_cast<double>(steps_);
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double eta = done > 0 ? elapsed * (1 - done) / done : NAN;
    const int width = 30;
    const int fill = static_cast<int>(done * width);
    err_ << "\r[" << std::string(static_cast<size_t>(fill), '#')
         << std::string(static_cast<size_t>(width - fill), '.') << "] "
         << fmt::format("{}/{} loss {:.4f}", last_.step + 1, steps_, last_.loss);
    if (std::isfinite(last_.ref_loss)) err_ << fmt::format(" (ref {:.4f})", last_.ref_loss);
    err_ << fmt::format(" {:.0f} tok/s ETA {}", last_.tokens_per_s, fmt_duration(eta))
         << std::flush;
  }
  // The last step recorded; nullopt when the run ended before its first step.
  std::optional<StepMetrics> last() {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (!any_) return std::nullopt;
    return last_;
  }

 private:
  std::mutex mutex_;
  std::ostream& err_;
  int64_t steps_;
  bool quiet_;
  bool started_ = false, any_ = false;
  std::chrono::steady_clock::time_point start_, drawn_;
  StepMetrics last_;
};

std::string db_path(const std::string& given) {
  return given.empty() ? default_database_path() : given;
}

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

CLI::App* add_train_command(CLI::App& app, TrainOptions& opt) {
  auto* c = app.add_subcommand("train", "Train a model with FP8 linear layers, keeping the run");
  c->add_option("config", opt.config_file, "A JSON file of config fields (optional)");
  c->add_option("--set", opt.overrides, "Override a field: key=value (repeatable)");
  c->add_option("--db", opt.db, "Run database (default: " + default_database_path() + ")");
  c->add_option("--device", opt.device, "cpu, cuda or cuda:N (overrides the config)");
  c->add_option("--save-weights", opt.weights,
                "Write the final weights here (.safetensors; fp8wb inspect reads it)");
  c->add_flag("-q,--quiet", opt.quiet, "No progress bar");
  c->add_flag("--json", opt.json, "Print the result as JSON");
  c->footer("Fields: " + [] {
    std::string s;
    for (const auto& k : run_config_keys()) s += (s.empty() ? "" : ", ") + k;
    return s;
  }());
  return c;
}

int run_train(const TrainOptions& opt, std::ostream& out, std::ostream& err) {
  RunConfig cfg;
  if (!opt.config_file.empty()) cfg = read_run_config_file(opt.config_file);
  for (const auto& o : opt.overrides) apply_override(cfg, o);
  if (!opt.device.empty()) cfg.device = opt.device;
  if (!opt.weights.empty()) cfg.weights = opt.weights;
  validate_run_config(cfg);
  const std::string device = Trainer::resolve_device(cfg.device);

  auto store = RunStore::open(db_path(opt.db));
  auto bus = std::make_shared<MetricBus>();
  auto console = std::make_shared<Console>(err, cfg.steps, opt.quiet || opt.json);
  bus->add(store->consumer());
  bus->add(console);
  const int64_t id = store->create_run(cfg.name, "train", run_config_json(cfg), device);
  Trainer trainer(cfg, bus, id);

  {
    const StopSignals signals;  // Ctrl-C, SIGTERM, SIGHUP: stop after this step, keep the run
    trainer.start();
    bool asked = false;
    while (trainer.status() == RunStatus::Running || trainer.status() == RunStatus::Paused) {
      if (signals.requested() && !asked) {
        trainer.stop();
        asked = true;
        if (!opt.quiet) err << "\ninterrupted: stopping after this step (the run is kept)\n";
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    trainer.join();
  }
  RunStatus st = trainer.status();
  std::string message = without_backtrace(trainer.message());
  try {
    store->flush();
  } catch (const StoreError& e) {
    // The run's last writes did not reach the file (a full disk): what was committed stays.
    if (st != RunStatus::Failed) {
      st = RunStatus::Failed;
      message = std::string("the run database could not be written: ") + e.what();
    }
  }
  if (!opt.quiet && !opt.json) err << "\n";

  const std::optional<StepMetrics> last = console->last();
  if (opt.json) {
    json j;
    j["run"] = id;
    j["status"] = run_status_name(st);
    j["steps"] = trainer.steps_done();
    j["loss"] = last ? num(last->loss) : json();
    j["ref_loss"] = last ? num(last->ref_loss) : json();
    j["tokens_per_s"] = last ? num(last->tokens_per_s) : json();
    j["message"] = message;
    j["db"] = store->path();
    out << dump(j) << "\n";
  } else {
    out << fmt::format("run {} {} after {} steps", id, run_status_name(st), trainer.steps_done());
    if (last) {
      out << fmt::format(": loss {:.4f}", last->loss);
      if (std::isfinite(last->ref_loss)) out << fmt::format(", reference {:.4f}", last->ref_loss);
      out << fmt::format(", {:.0f} tokens/s", last->tokens_per_s);
    }
    out << "\n";
    if (!message.empty()) out << message << "\n";
    out << "database: " << store->path() << "\n";
  }
  if (st == RunStatus::Failed) {
    err << "fp8wb: the run failed: " << message << "\n";
    return 1;
  }
  return st == RunStatus::Diverged ? 2 : 0;
}

CLI::App* add_runs_command(CLI::App& app, RunsOptions& opt) {
  auto* c = app.add_subcommand("runs", "List, show, export or delete stored runs");
  c->add_option("action", opt.action, "list, show, export or delete")
      ->required()
      ->check(CLI::IsMember({"list", "show", "export", "delete"}));
  c->add_option("id", opt.id, "The run (show, export, delete)");
  c->add_option("--db", opt.db, "Run database (default: " + default_database_path() + ")");
  c->add_option("--format", opt.format, "export: csv or json")
      ->check(CLI::IsMember({"csv", "json"}));
  c->add_option("-o,--out", opt.out_file, "export: write to this file (default: stdout)");
  c->add_flag("--json", opt.json, "list/show as JSON");
  c->add_flag("-y,--yes", opt.yes, "delete without asking");
  return c;
}

namespace {

double last_value(const RunStore& s, int64_t id, const char* series) {
  const auto v = s.series(id, series);
  return v.empty() ? NAN : v.back().value;
}

json config_of(const RunInfo& r) {
  if (r.config_json.empty()) return json();
  try {
    check_json_nesting(r.config_json, "the stored config");
    return json::parse(r.config_json);
  } catch (const std::exception&) {
    return r.config_json;  // as stored, if it is not JSON
  }
}

void export_run(const RunStore& s, const RunInfo& r, const std::string& format, std::ostream& o) {
  if (format == "csv") {
    write_run_csv(s, r.id, o);
    return;
  }
  json j;
  j["run"] = {{"id", r.id},
              {"name", r.name},
              {"status", r.status},
              {"message", r.message},
              {"device", r.device},
              {"started_at", r.started_at},
              {"ended_at", r.ended_at},
              {"config", config_of(r)}};
  json series = json::object();
  for (const auto& n : s.series_names(r.id)) {
    json points = json::array();
    for (const SeriesPoint& p : s.series(r.id, n)) points.push_back({p.step, num(p.value)});
    series[n] = std::move(points);
  }
  j["series"] = std::move(series);
  json ts = json::array();
  for (const auto& t : s.tensor_stats(r.id)) {
    ts.push_back({{"step", t.step},
                  {"layer", t.layer},
                  {"role", t.role},
                  {"amax", num(t.amax)},
                  {"scale", num(t.scale)},
                  {"numel", t.numel},
                  {"zeros", t.zeros},
                  {"underflow", t.underflow},
                  {"saturated", t.saturated},
                  {"nonfinite", t.nonfinite},
                  {"subnormal", t.subnormal},
                  {"sq_err", num(t.sq_err)},
                  {"sq_sum", num(t.sq_sum)}});
  }
  j["tensor_stats"] = std::move(ts);
  json ev = json::array();
  for (const auto& e : s.events(r.id)) {
    ev.push_back({{"step", e.step}, {"kind", e.kind}, {"message", e.message}});
  }
  j["events"] = std::move(ev);
  o << dump(j) << "\n";
}

}  // namespace

int run_runs(const RunsOptions& opt, std::ostream& out, std::ostream& err) {
  // Reading creates nothing (no folder, no file, no -wal): a missing database is an error.
  // Only delete writes, and only to a database that exists.
  const std::string path = db_path(opt.db);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    err << "fp8wb: no run database at " << path << "\n";
    return 1;
  }
  auto store = opt.action == "delete" ? RunStore::open(path) : RunStore::open_read_only(path);
  if (opt.action == "list") {
    const auto runs = store->runs();
    if (opt.json) {
      json j = json::array();
      for (const auto& r : runs) {
        j.push_back({{"id", r.id},
                     {"name", r.name},
                     {"status", r.status},
                     {"steps", r.last_step + 1},
                     {"loss", num(last_value(*store, r.id, "loss"))},
                     {"device", r.device},
                     {"started_at", r.started_at}});
      }
      out << dump(j) << "\n";
      return 0;
    }
    if (runs.empty()) {
      out << "no runs in " << store->path() << "\n";
      return 0;
    }
    out << fmt::format("{:>5}  {:<24} {:<12} {:>7} {:>10} {:>11}  {:<8} {}\n", "id", "name",
                       "status", "steps", "loss", "tokens/s", "device", "started");
    for (const auto& r : runs) {
      const auto tps = store->series(r.id, "tokens_per_s");
      std::vector<double> t;
      for (const auto& p : tps) t.push_back(p.value);
      out << fmt::format("{:>5}  {:<24} {:<12} {:>7} {:>10.4f} {:>11.0f}  {:<8} {}\n", r.id,
                         r.name.substr(0, 24), r.status, r.last_step + 1,
                         last_value(*store, r.id, "loss"), median(t), r.device, r.started_at);
    }
    return 0;
  }
  if (opt.id <= 0) {
    err << "fp8wb runs " << opt.action << ": which run? (give its id; `fp8wb runs list`)\n";
    return 1;
  }
  const auto r = store->run(opt.id);
  if (!r) {
    err << "fp8wb: no run " << opt.id << " in " << store->path() << "\n";
    return 1;
  }
  if (opt.action == "show") {
    if (opt.json) {
      export_run(*store, *r, "json", out);
      return 0;
    }
    out << fmt::format("run {}: {} ({})\nstatus   {}{}\ndevice   {}\nstarted  {}\nended    {}\n",
                       r->id, r->name, r->kind, r->status,
                       r->message.empty() ? "" : " - " + r->message, r->device, r->started_at,
                       r->ended_at.empty() ? "-" : r->ended_at);
    out << "steps    " << r->last_step + 1 << "\n";
    for (const char* s : {"loss", "ref_loss", "loss_gap", "grad_norm", "tokens_per_s"}) {
      const double v = last_value(*store, r->id, s);
      if (std::isfinite(v)) out << fmt::format("{:<14}{:.6g}\n", s, v);
    }
    const double mem_fp8 = last_value(*store, r->id, "mem_fp8");
    const double mem_ref = last_value(*store, r->id, "mem_ref");
    const double rss = last_value(*store, r->id, "peak_rss");
    if (std::isfinite(mem_fp8)) {
      out << fmt::format("peak memory   FP8 model {:.3f} GB", mem_fp8 / 1e9);
      if (std::isfinite(mem_ref)) out << fmt::format(", reference {:.3f} GB", mem_ref / 1e9);
      out << " (GPU: the allocator's peak while each model stepped, with its parameters and "
             "optimizer state)\n";
    }
    if (std::isfinite(rss)) {
      out << fmt::format(
          "peak RSS      {:.3f} GB (the whole process: every model, the data, the "
          "program)\n",
          rss / 1e9);
    }
    const auto ts = store->tensor_stats(r->id);
    out << "tensor statistics: " << ts.size() << " rows\n";
    out << "events:\n";
    for (const auto& e : store->events(r->id))
      out << fmt::format("  step {:>6}  {:<10} {}\n", e.step, e.kind, e.message);
    out << "config:\n" << r->config_json << "\n";
    return 0;
  }
  if (opt.action == "export") {
    if (opt.out_file.empty()) {
      export_run(*store, *r, opt.format, out);
    } else {
      // All or nothing: a full disk leaves no truncated file, a device is not replaced.
      write_file_atomically(opt.out_file,
                            [&](std::ostream& f) { export_run(*store, *r, opt.format, f); });
      out << "wrote run " << r->id << " to " << opt.out_file << "\n";
    }
    return 0;
  }
  // delete
  if (r->live) {
    err << "fp8wb: run " << r->id << " (" << r->name
        << ") is being written now (live): stop it first where it was started, then delete it\n";
    return 1;
  }
  if (!opt.yes) {
    err << "fp8wb: deleting run " << r->id << " (" << r->name << ") needs --yes\n";
    return 1;
  }
  store->delete_run(r->id);
  out << "deleted run " << r->id << "\n";
  return 0;
}

CLI::App* add_bench_command(CLI::App& app, BenchOptions& opt) {
  auto* c = app.add_subcommand(
      "bench", "Measure: FP8 training steps against high precision, and the run store");
  c->add_option("--device", opt.device, "cpu, cuda or cuda:N");
  c->add_option("--steps", opt.steps, "Timed steps per variant")->check(CLI::PositiveNumber);
  c->add_option("--model", opt.model, "gpt or mlp")->check(CLI::IsMember({"gpt", "mlp"}));
  c->add_option("--set", opt.overrides, "Override a model field: key=value (repeatable)");
  c->add_flag("--json", opt.json, "Print the figures as JSON");
  c->add_flag("--store-only", opt.store_only, "Only the run-store figures");
  c->add_flag("--train-only", opt.train_only, "Only the training-step figures");
  return c;
}

namespace {

class Collect : public MetricConsumer {
 public:
  void consume(const MetricBatch& b) override {
    const std::lock_guard<std::mutex> lock(mutex);
    for (const auto& s : b.steps) steps.push_back(s);
  }
  std::mutex mutex;
  std::vector<StepMetrics> steps;
};

struct TrainFigure {
  std::string variant;
  double step_ms, tokens_per_s;
};

std::vector<TrainFigure> bench_training(const BenchOptions& opt) {
  RunConfig base;
  base.model = opt.model == "mlp" ? ModelKind::Mlp : ModelKind::Gpt;
  base.device = opt.device;
  base.reference = false;
  base.steps = opt.steps + 5;  // the first steps warm up
  for (const auto& o : opt.overrides) apply_override(base, o);
  validate_run_config(base);
  struct V {
    const char* name;
    bool fp8;
    int stats;
    const char* scaling;
  };
  const V vs[] = {{"high precision", false, 0, "delayed"},
                  {"FP8 delayed, no statistics", true, 0, "delayed"},
                  {"FP8 current, no statistics", true, 0, "current"},
                  {"FP8 delayed, statistics every 10 steps", true, 10, "delayed"},
                  {"FP8 delayed, statistics every step", true, 1, "delayed"}};
  std::vector<TrainFigure> out;
  for (const V& v : vs) {
    RunConfig c = base;
    c.fp8 = v.fp8;
    c.stats_interval = v.stats;
    c.sqnr_interval = 0;
    c.scaling = v.scaling;
    auto bus = std::make_shared<MetricBus>();
    auto col = std::make_shared<Collect>();
    bus->add(col);
    Trainer t(c, bus);
    t.run();
    if (t.status() != RunStatus::Finished)
      throw std::runtime_error(std::string(v.name) + ": " + t.message());
    std::vector<double> ms;
    double tokens = 0;
    for (size_t i = 5; i < col->steps.size(); ++i) {
      ms.push_back(col->steps[i].step_ms);
      tokens = col->steps[i].tokens_per_s * col->steps[i].step_ms / 1000.0;
    }
    const double m = median(ms);
    out.push_back({v.name, m, tokens / (m / 1000.0)});
  }
  return out;
}

struct StoreFigures {
  double ingest_rows_per_s = 0;  // tensor_stats rows (with their histogram blobs)
  double scalar_rows_per_s = 0;
  double open_and_read_ms = 0;  // open a 1M-step run and read its loss series
  int64_t rows = 0;
};

StoreFigures bench_store() {
  StoreFigures f;
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("fp8wb-bench-" + std::to_string(getpid()) + ".sqlite"))
                               .string();
  for (const char* ext : {"", "-wal", "-shm"}) std::filesystem::remove(path + ext);
  {
    auto store = RunStore::open(path);
    const int64_t run = store->create_run("ingest", "bench", "{}", "cpu");
    // Tensor statistics as a 48-layer model with 3 roles sends them: batches of 144 rows.
    const int64_t steps = 1400;
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < steps; ++s) {
      MetricBatch b;
      b.run_id = run;
      for (int l = 0; l < 48; ++l) {
        for (const RoleEntry& role : kRoles) {
          TensorMetrics t;
          t.step = s;
          t.layer = "blocks." + std::to_string(l) + ".fc1";
          t.role = role.value;
          t.amax = 1.0f + static_cast<float>(s % 7);
          t.raw.numel = 4096;
          // A typical exponent histogram: about 20 occupied bins.
          for (int bin = 20; bin < 40; ++bin) t.raw.hist[bin] = static_cast<uint64_t>(bin * 37 + s);
          b.tensors.push_back(std::move(t));
        }
      }
      store->write(b);
    }
    store->flush();
    f.rows = steps * 144;
    f.ingest_rows_per_s =
        static_cast<double>(f.rows) /
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // A 1M-step run's scalars (7 series a step), in batches of 1000 steps.
    const int64_t big = store->create_run("1M steps", "bench", "{}", "cpu");
    const auto t1 = std::chrono::steady_clock::now();
    for (int64_t s0 = 0; s0 < 1000000; s0 += 1000) {
      MetricBatch b;
      b.run_id = big;
      for (int64_t s = s0; s < s0 + 1000; ++s) {
        StepMetrics m;
        m.step = s;
        m.loss = 4.0 / std::sqrt(1.0 + static_cast<double>(s));
        b.steps.push_back(m);
      }
      store->write(b);
    }
    store->flush();
    f.scalar_rows_per_s =
        7e6 / std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  }
  const auto t2 = std::chrono::steady_clock::now();
  {
    auto store = RunStore::open_read_only(path);
    const auto runs = store->runs();
    const auto loss = store->series(runs.back().id, "loss");
    if (loss.size() != 1000000) throw std::runtime_error("the 1M-step run did not read back");
  }
  f.open_and_read_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t2).count();
  for (const char* ext : {"", "-wal", "-shm"}) std::filesystem::remove(path + ext);
  return f;
}

}  // namespace

int run_bench(const BenchOptions& opt, std::ostream& out, std::ostream& err) {
  (void)err;
  std::vector<TrainFigure> train;
  StoreFigures store;
  if (!opt.store_only) train = bench_training(opt);
  if (!opt.train_only) store = bench_store();
  if (opt.json) {
    json j;
    j["device"] = Trainer::resolve_device(opt.device);
    j["model"] = opt.model;
    j["train"] = json::array();
    for (const auto& t : train) {
      j["train"].push_back({{"variant", t.variant},
                            {"step_ms", num(t.step_ms)},
                            {"tokens_per_s", num(t.tokens_per_s)},
                            {"vs_high_precision", num(t.step_ms / train[0].step_ms)}});
    }
    if (!opt.train_only) {
      j["store"] = {{"tensor_stat_rows_per_s", num(store.ingest_rows_per_s)},
                    {"scalar_rows_per_s", num(store.scalar_rows_per_s)},
                    {"open_and_read_1M_ms", num(store.open_and_read_ms)}};
    }
    out << dump(j) << "\n";
    return 0;
  }
  if (!train.empty()) {
    out << fmt::format("training steps, {} on {} (median of {} steps)\n", opt.model,
                       Trainer::resolve_device(opt.device), opt.steps);
    for (const auto& t : train) {
      out << fmt::format("  {:<40} {:9.2f} ms {:11.0f} tokens/s {:6.2f}x\n", t.variant, t.step_ms,
                         t.tokens_per_s, t.step_ms / train[0].step_ms);
    }
  }
  if (!opt.train_only) {
    out << fmt::format(
        "run store\n  tensor statistics ingest        {:11.0f} rows/s ({} rows)\n"
        "  scalar ingest                   {:11.0f} rows/s (7M rows)\n"
        "  open + read a 1M-step loss curve {:10.1f} ms\n",
        store.ingest_rows_per_s, store.rows, store.scalar_rows_per_s, store.open_and_read_ms);
  }
  return 0;
}

}  // namespace fp8wb::cli
