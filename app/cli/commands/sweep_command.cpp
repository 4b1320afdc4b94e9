#include "commands/sweep_command.h"

#include <fmt/format.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "command_registry.h"
#include "fp8wb/core/checkpoint/file_io.h"
#include "fp8wb/core/counted.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/sweep/final_loss.h"
#include "fp8wb/core/sweep/sweep.h"
#include "run_command_common.h"
#include "slurm_sweep.h"
#include "stop_signals.h"
#include "table_text.h"

namespace fp8wb::cli {
namespace {

// A figure a run did not record (no reference run: no loss gap) reads "-", not nan.
std::string fixed(double v, int digits) {
  return std::isfinite(v) ? fmt::format("{:.{}f}", v, digits) : std::string("-");
}

// A metric's column in the table: its heading, width and figure.
struct Column {
  const char* heading;
  int width;
  int digits;  // < 0: a count
};
Column column(SweepMetric m) {
  switch (m) {
    case SweepMetric::FinalLoss: return {"final loss", 11, 5};
    case SweepMetric::LossGap: return {"loss gap", 11, 5};
    case SweepMetric::Spike: return {"spike", 9, 3};
    case SweepMetric::SaturatedPct: return {"saturated%", 11, 4};
    case SweepMetric::UnderflowPct: return {"underflow%", 11, 4};
    case SweepMetric::Diverged: return {"diverged", 9, -1};
  }
  throw std::invalid_argument("unknown sweep metric " + std::to_string(static_cast<int>(m)));
}

std::string cell(const SweepPoint& p, SweepMetric m) {
  const Column c = column(m);
  return c.digits < 0 ? std::to_string(p.diverged) : fixed(sweep_metric(p, m), c.digits);
}

}  // namespace

void print_sweep_summary(const RunStore& store, int64_t sweep_id, std::ostream& out) {
  const auto sweep = store.sweep(sweep_id);
  if (!sweep) throw StoreError("no sweep " + std::to_string(sweep_id) + " in " + store.path());
  const SweepSpec spec =
      sweep_from_json(sweep->grid_json, stored_grid_name(sweep_id, store.path()));
  const std::vector<SweepPoint> points = sweep_points(store, sweep_id);
  const SweepVerdict verdict = sweep_verdict(points);
  const SweepCounts counts = sweep_counts(spec, points);
  auto label = [&](const SweepPoint& p) {
    std::string s;
    for (size_t k = 0; k < p.values.size(); ++k)
      s += (k ? " " : "") + spec.axes[k].key + "=" + p.values[k];
    return s;
  };
  // With several seeds, the spread of their final losses (highest minus lowest).
  const bool seeds = spec.seeds > 1;
  std::string heading = fmt::format("{:<34} {:>5}", "grid point", "runs");
  for (const SweepMetricEntry& m : kSweepMetrics) {
    const Column c = column(m.value);
    heading += fmt::format(" {:>{}}", c.heading, c.width);
  }
  if (seeds) heading += fmt::format(" {:>12} {:>12}", "seed spread", "gap spread");
  out << heading << " flag\n";
  for (const auto& p : points) {
    std::string row = fmt::format("{} {:>5}", fit_column(label(p), 34), p.runs);
    for (const SweepMetricEntry& m : kSweepMetrics)
      row += fmt::format(" {:>{}}", cell(p, m.value), column(m.value).width);
    if (seeds)
      // One run of the point's seeds ended: its spread is unknown ("n/a"), not 0.
      row += fmt::format(" {:>12} {:>12}",
                         p.final_loss_spread_known() ? fixed(p.final_loss_spread(), 5) : "n/a",
                         p.loss_gap_spread_known() ? fixed(p.loss_gap_spread(), 5) : "n/a");
    // The spike's size, not a yes/no; a reference that spiked itself is said.
    if (p.diverged > 0)
      row += " diverged";
    else if (p.spiked > 0)
      row += std::isfinite(p.spike_fraction)
                 ? fmt::format(" spiked +{:.0f}%", 100 * p.spike_fraction)
                 : std::string(" spiked");
    if (p.reference_troubled > 0)
      row += fmt::format(
          " (reference blew up in {}: spike measured only before it, gap of {} left out)",
          p.reference_troubled, p.gap_ref_broken);
    out << row << "\n";
  }
  out << fmt::format("{} of {} finished, {} diverged, {} spiked\n", counts.finished,
                     counted(static_cast<int64_t>(counts.trials), "trial"), counts.diverged,
                     counts.spiked);
  out << sweep_verdict_text(verdict, label) << "\n";
  out << "rule: " << kSweepVerdictRule << "\n";
  out << kFinalLossDefinition << "; " << kSpikeDefinition << "\n";
}

CLI::App* add_sweep_command(CLI::App& app, SweepOptions& opt) {
  auto* c = app.add_subcommand("sweep",
                               "Train a grid of configs (e.g. margin x window), kept as one sweep");
  c->add_option("config", opt.config_file,
                "A JSON file of config fields (the base of every trial)");
  c->add_option("--set", opt.overrides, "Override a base field: key=value (repeatable)");
  c->add_option("--grid", opt.grid,
                "An axis: key=v1,v2,... (repeatable), e.g. --grid margin=0,1,2,4");
  c->add_option("--seeds", opt.seeds, "Seeds per grid point")->check(CLI::Range(1, 1000));
  c->add_option("--parallel", opt.parallel,
                "Trials side by side (default: one per GPU, or per 2 cores)")
      ->check(CLI::Range(1, 1024));
  c->add_option("--name", opt.name, "The sweep's name");
  c->add_option("--db", opt.db, "Run database (default: " + default_database_path() + ")")
      ->check(kDatabasePath);
  c->add_option("--resume", opt.resume, "Resume this sweep: finished trials are not run again");
  c->add_flag("--json", opt.json, "Print the summary as JSON");
  c->add_flag("-q,--quiet", opt.quiet, "No progress lines");
  auto* g = c->add_option_group("Slurm", "Run the trials on a cluster, as one Slurm job array");
  g->add_flag("--slurm", opt.slurm,
              "Submit the grid with sbatch, a task a trial, each training into its own database "
              "under --slurm-dir; then collect them with --collect");
  g->add_option("--slurm-dir", opt.slurm_dir,
                "A folder every node sees, for the trials, their databases and logs (default: "
                "./fp8wb-sweep-<id>)");
  g->add_option("--partition", opt.partition, "Slurm partition (default: the cluster's)");
  g->add_option("--gpus-per-trial", opt.gpus_per_trial,
                "GPUs a task asks for (default: 1 with device=cuda, else none)")
      ->check(CLI::Range(0, 64));
  g->add_option("--cpus-per-trial", opt.cpus_per_trial,
                "CPU cores a task asks for (default: the cluster's)")
      ->check(CLI::Range(1, 4096));
  g->add_option("--time", opt.time, "A task's time limit, as sbatch takes it (e.g. 2:00:00)");
  g->add_option("--collect", opt.collect,
                "Merge the finished trials of a Slurm sweep's folder into its sweep (again at "
                "any time: trials already collected are left as they are)");
  return c;
}

namespace {

// The sweep the options describe (config file, --set, --grid, --seeds), every value
// checked, and its trials in `trials` where asked for. Grid values dropped as another
// spelling of a number given before are said on `err`.
SweepSpec checked_spec(const SweepOptions& opt, std::ostream& err,
                       std::vector<SweepTrial>* trials = nullptr) {
  SweepSpec spec;
  spec.name = opt.name;
  if (!opt.config_file.empty()) spec.base = read_run_config_file(opt.config_file);
  apply_overrides(spec.base, opt.overrides);  // a field given twice refused
  for (const auto& g : opt.grid) spec.axes.push_back(parse_grid(g));
  spec.seeds = opt.seeds;
  std::vector<SweepTrial> expanded = expand_sweep(spec);
  if (trials) *trials = std::move(expanded);
  for (const SweepAxis& a : spec.axes) {
    for (const std::string& note : merged_value_notes(a)) err << "fp8wb sweep: " << note << "\n";
  }
  return spec;
}

// `sweep --json`: the sweep's axes, its points with every metric, the verdict and counts.
void print_sweep_json(int64_t sweep_id, const SweepInfo& sweep, const SweepSpec& spec,
                      const std::vector<SweepPoint>& points, const SweepVerdict& verdict,
                      const SweepCounts& counts, std::ostream& out) {
  auto label = [&](const SweepPoint& p) {
    std::string s;
    for (size_t k = 0; k < p.values.size(); ++k)
      s += (k ? " " : "") + spec.axes[k].key + "=" + p.values[k];
    return s;
  };
  nlohmann::json j;
  j["sweep"] = sweep_id;
  j["status"] = sweep_status_text(sweep);
  j["axes"] = nlohmann::json::array();
  for (const auto& a : spec.axes) j["axes"].push_back({{"key", a.key}, {"values", a.values}});
  j["points"] = nlohmann::json::array();
  for (const auto& p : points) {
    nlohmann::json jp = {{"values", p.values},
                         {"trials", p.trials},
                         {"runs", p.runs},
                         {"finished", p.finished},
                         {"spiked", p.spiked},
                         {"final_loss_min", num(p.final_loss_min)},
                         {"final_loss_max", num(p.final_loss_max)},
                         {"loss_gap_min", num(p.loss_gap_min)},
                         {"loss_gap_max", num(p.loss_gap_max)},
                         {"spike_fraction", num(p.spike_fraction)},
                         {"reference_troubled", p.reference_troubled},
                         {"gap_ref_broken", p.gap_ref_broken},
                         {"run_ids", p.run_ids}};
    for (const SweepMetricEntry& m : kSweepMetrics) {
      jp[std::string(m.name)] = m.value == SweepMetric::Diverged ? nlohmann::json(p.diverged)
                                                                 : num(sweep_metric(p, m.value));
    }
    j["points"].push_back(std::move(jp));
  }
  // "best": only where one point wins by more than the noise (kSweepVerdictRule).
  j["best"] = verdict.kind == SweepVerdict::Kind::Best ? nlohmann::json(label(*verdict.lowest))
                                                       : nlohmann::json();
  j["verdict"] = sweep_verdict_text(verdict, label);
  j["rule"] = kSweepVerdictRule;
  j["trials"] = counts.trials;
  j["finished"] = counts.finished;
  j["diverged"] = counts.diverged;
  j["spiked"] = counts.spiked;
  j["definition"] = std::string(kFinalLossDefinition) + "; " + std::string(kSpikeDefinition);
  out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

}  // namespace

int run_sweep(const SweepOptions& opt, std::ostream& out, std::ostream& err) {
  check_db_folder(opt.db);  // as train: a mistyped --db makes no folders
  // Given at all, --resume names a sweep: 0 or -1 is not one (and must not start a new
  // sweep in its place).
  if (opt.resume && *opt.resume < 1) {
    throw std::invalid_argument("--resume takes a sweep id, a positive whole number (1 to " +
                                std::to_string(INT64_MAX) + "), not '" +
                                std::to_string(*opt.resume) + "'");
  }
  if (!opt.collect.empty()) {
    if (opt.slurm || opt.resume || !opt.grid.empty() || !opt.overrides.empty() ||
        !opt.config_file.empty()) {
      throw std::invalid_argument(
          "--collect merges a submitted sweep's trials: drop --slurm, --resume, --grid, --set "
          "and the config file");
    }
    return collect_slurm_sweep(opt.collect, opt.db, opt.json, out, err);
  }
  if (!opt.slurm && (!opt.slurm_dir.empty() || !opt.partition.empty() || !opt.time.empty() ||
                     opt.gpus_per_trial >= 0 || opt.cpus_per_trial > 0)) {
    throw std::invalid_argument(
        "--slurm-dir, --partition, --gpus-per-trial, --cpus-per-trial and --time go with "
        "--slurm");
  }
  if (opt.slurm) {
    if (opt.resume) {
      throw std::invalid_argument(
          "--resume runs a stored sweep here; a Slurm sweep is collected with --collect DIR");
    }
    const SweepSpec spec = checked_spec(opt, err);
    SlurmOptions so;
    so.dir = opt.slurm_dir;
    so.partition = opt.partition;
    so.gpus_per_trial = opt.gpus_per_trial;
    so.cpus_per_trial = opt.cpus_per_trial;
    so.time = opt.time;
    return submit_slurm_sweep(spec, opt.db.empty() ? default_database_path() : opt.db, so, opt.json,
                              out, err);
  }
  if (opt.resume && (!opt.grid.empty() || !opt.overrides.empty() || !opt.config_file.empty() ||
                     opt.seeds != 1 || opt.name != "sweep")) {
    // A resumed sweep runs the grid it was stored with: anything else would be ignored.
    throw std::invalid_argument(
        "--resume continues a stored sweep with its own grid, config and seeds: drop "
        "--grid, --set, --seeds, --name and the config file (or start a new sweep)");
  }
  // A new sweep's config and grid are read and checked before the database is opened: a
  // bad one leaves no new, empty database behind.
  std::optional<SweepSpec> spec_new;
  if (!opt.resume) {
    std::vector<SweepTrial> trials;
    spec_new = checked_spec(opt, err, &trials);
    check_trial_devices(trials);  // device=cuda without a GPU: nothing made
  }
  auto store = RunStore::open(opt.db.empty() ? default_database_path() : opt.db);
  std::unique_ptr<SweepRunner> runner;
  if (opt.resume) {
    runner = SweepRunner::resume(*store, *opt.resume, opt.parallel);
  } else {
    runner = std::make_unique<SweepRunner>(*spec_new, *store, opt.parallel);
  }
  const size_t total = runner->trials().size();
  if (const SweepRunner::Plan plan = runner->plan(); plan.blas_capped) {
    err << fmt::format(
        "fp8wb sweep: {}{} trials side by side at most here, as OpenBLAS takes {} computing "
        "threads at once (more crash it); the others wait their turn\n",
        opt.parallel > 0 ? fmt::format("--parallel {}: ", opt.parallel) : std::string(),
        plan.side_by_side, plan.blas_limit);
  }
  std::mutex mutex;
  std::atomic<size_t> done{runner->skipped()};
  if (!opt.quiet && !opt.json) {
    err << fmt::format("sweep {}: {} ({} already done)\n", runner->sweepId(),
                       counted(static_cast<int64_t>(total), "trial"), runner->skipped());
  }
  auto signals = std::make_unique<StopSignals>();  // Ctrl-C, SIGTERM, SIGHUP
  std::atomic<bool> finished{false};
  std::thread watcher([&] {
    while (!finished) {
      if (signals->requested()) {
        runner->stop();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  std::string failure;
  try {
    runner->run([&](size_t i, RunStatus s) {
      const size_t n = ++done;
      if (opt.quiet || opt.json) return;
      const std::lock_guard<std::mutex> lock(mutex);
      err << fmt::format("[{}/{}] {}: {}\n", n, total, runner->trials()[i].key, run_status_name(s));
    });
  } catch (const std::exception& e) {
    failure = e.what();
  }
  finished = true;
  watcher.join();
  const int stop_signal = signals->signal();  // 0: none came
  signals.reset();
  const auto sweep = store->sweep(runner->sweepId());
  const SweepSpec spec =
      sweep_from_json(sweep->grid_json, stored_grid_name(runner->sweepId(), store->path()));
  const std::vector<SweepPoint> points = sweep_points(*store, runner->sweepId());
  const SweepVerdict verdict = sweep_verdict(points);
  const SweepCounts counts = sweep_counts(spec, points);
  if (opt.json) {
    print_sweep_json(runner->sweepId(), *sweep, spec, points, verdict, counts, out);
  } else {
    print_sweep_summary(*store, runner->sweepId(), out);
    out << fmt::format("sweep {} {} in {}\n", runner->sweepId(), sweep_status_text(*sweep),
                       store->path());
  }
  if (!failure.empty()) {
    err << "fp8wb sweep: " << without_backtrace(failure) << "\n";
    return 1;
  }
  // Stopped by a signal: said, with how to go on, and an exit status of 128 + the signal
  // (130 for Ctrl-C), as train gives.
  if (stop_signal != 0 && sweep->status != SweepStatus::Finished) {
    err << fmt::format(
        "fp8wb sweep: interrupted by {}: sweep {} is kept as stopped with {} of {} trials "
        "finished; `fp8wb sweep --resume {} --db {}` runs the rest\n",
        stop_signal_name(stop_signal), runner->sweepId(), counts.finished, counts.trials,
        runner->sweepId(), store->path());
    return 128 + stop_signal;
  }
  return 0;
}

namespace {
const CommandRegistrar kCommand{"sweep", 80,
                                command_with<SweepOptions>(add_sweep_command, run_sweep)};
}  // namespace

}  // namespace fp8wb::cli
