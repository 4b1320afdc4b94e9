#include "commands/train_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "command_registry.h"
#include "config_field_text.h"
#include "fp8wb/core/backend/backend_info.h"
#include "fp8wb/core/backend/default_formats.h"
#include "fp8wb/core/checkpoint/file_io.h"
#include "fp8wb/core/checkpoint/safetensors.h"
#include "fp8wb/core/config/run_config_fields.h"
#include "fp8wb/core/counted.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/sweep/final_loss.h"
#include "fp8wb/core/train/distributed.h"
#include "fp8wb/core/train/run_start.h"
#include "fp8wb/core/train/trainer.h"
#include "rank_launcher.h"
#include "run_command_common.h"
#include "same_file.h"
#include "stop_signals.h"

namespace fp8wb::cli {
namespace {

using nlohmann::json;

std::string fmt_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{:02}:{:02}", s / 60, s % 60);
}

// The time left, at the pace since the first step was recorded (`done_at_start` steps
// done then): the first step, with its warm-up, is left out. None before 3 steps are
// done, when one step's pace would say little.
std::optional<double> eta_seconds(int64_t done, int64_t total, int64_t done_at_start,
                                  double elapsed) {
  if (done < 3 || done <= done_at_start) return std::nullopt;
  return elapsed / static_cast<double>(done - done_at_start) *
         static_cast<double>(std::max<int64_t>(0, total - done));
}

// The progress: on a terminal a bar, one line redrawn at most five times a second, with
// the ETA (from the third step on); elsewhere (a file, a pipe, a job's log, where
// carriage returns would pile up) a plain line at each tenth of the run, at least every
// 30 s, and at the last step.
class Console : public MetricConsumer {
 public:
  Console(std::ostream& err, int64_t steps, bool quiet, bool terminal)
      : err_(err), steps_(steps), quiet_(quiet), terminal_(terminal) {}
  void consume(const MetricBatch& b) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (const RunEvent& e : b.events) {
      if (e.kind == RunEventKind::Started || e.kind == RunEventKind::Skipped ||
          e.kind == RunEventKind::Diverged) {
        if (!quiet_)
          err_ << (terminal_ ? "\r\033[K" : "") << run_event_kind_name(e.kind) << ": " << e.message
               << "\n";
      }
    }
    if (b.steps.empty()) return;
    last_ = b.steps.back();
    any_ = true;
    const auto now = std::chrono::steady_clock::now();
    if (!started_) {
      start_ = now;
      started_at_ = last_.step + 1;
      started_ = true;
    }
    if (quiet_) return;
    const bool last_step = last_.step + 1 >= steps_;
    const int64_t tenth = (last_.step + 1) * 10 / std::max<int64_t>(1, steps_);
    if (terminal_) {
      if (now - drawn_ < std::chrono::milliseconds(200) && !last_step) return;
    } else if (tenth <= tenth_ && now - drawn_ < std::chrono::seconds(30) && !last_step) {
      return;
    }
    if (!terminal_ && last_step && drew_last_) return;
    drawn_ = now;
    tenth_ = tenth;
    drew_last_ = last_step;
    const double done = static_cast<double>(last_.step + 1) / static_cast<double>(steps_);
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    // A count of the steps done ("10/10 steps" at the end), where summaries name a step
    // by its index (the first is step 0).
    std::string figures =
        fmt::format("{}/{} steps, loss {:.4f}", last_.step + 1, steps_, last_.loss);
    if (std::isfinite(last_.ref_loss)) figures += fmt::format(" (ref {:.4f})", last_.ref_loss);
    figures += fmt::format(" {:.0f} tok/s", last_.tokens_per_s);
    if (const auto eta = eta_seconds(last_.step + 1, steps_, started_at_, elapsed))
      figures += " ETA " + fmt_duration(*eta);
    if (!terminal_) {
      err_ << figures << "\n" << std::flush;
      return;
    }
    const int width = 30;
    const int fill = static_cast<int>(done * width);
    err_ << "\r[" << std::string(static_cast<size_t>(fill), '#')
         << std::string(static_cast<size_t>(width - fill), '.') << "] " << figures << std::flush;
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
  bool quiet_, terminal_;
  bool started_ = false, any_ = false;
  int64_t started_at_ = 0;  // the steps done when the first was recorded (start_)
  int64_t tenth_ = 0;       // the tenths of the run a line has been written for
  bool drew_last_ = false;  // the last step's line is written
  std::chrono::steady_clock::time_point start_, drawn_;
  StepMetrics last_;
};

// Whether the config file or an override sets the field `key` ("formats", "name").
bool names_field(const TrainOptions& opt, const std::string& key) {
  for (const auto& o : opt.overrides) {
    if (override_key(o) == key) return true;
  }
  if (opt.config_file.empty()) return false;
  const auto j = nlohmann::json::parse(read_regular_file(opt.config_file, kMaxConfigBytes));
  return j.is_object() && j.contains(key);
}

}  // namespace

// The fields the name's start already says (or that say nothing of the run's numerics).
constexpr std::string_view kNamedByStem[] = {"name", "model", "fp8", "recipe", "scaling", "device"};

std::string default_run_name(const RunConfig& cfg, const std::vector<std::string>& overrides) {
  const nlohmann::json j = nlohmann::json::parse(run_config_json(cfg));
  auto text = [&j](const char* key) {
    const auto it = j.find(key);
    if (it == j.end()) return std::string();
    return it->is_string() ? it->get<std::string>() : it->dump();
  };
  std::string name = text("model") + (cfg.fp8 ? " " + text("recipe") + " " + text("scaling")
                                              : std::string(", no FP8"));
  std::vector<std::string> given;
  for (const auto& o : overrides) {
    const std::string key = o.substr(0, o.find('='));
    if (std::find(std::begin(kNamedByStem), std::end(kNamedByStem), key) != std::end(kNamedByStem))
      continue;
    // The value as the config holds it ("lr=0.002", "margin=2"), each field once.
    const std::string field = key + "=" + text(key.c_str());
    given.erase(std::remove_if(given.begin(), given.end(),
                               [&key](const std::string& g) { return g.rfind(key + "=", 0) == 0; }),
                given.end());
    given.push_back(field);
  }
  constexpr size_t kNamed = 4;
  for (size_t i = 0; i < std::min(given.size(), kNamed); ++i)
    name += (i == 0 ? ": " : ", ") + given[i];
  if (given.size() > kNamed) name += fmt::format(" and {} more", given.size() - kNamed);
  return name;
}

namespace {

// A rank's share of this machine's cores.
int compute_threads_per_rank(const RankInfo& r) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, r.local_world));
}

// Trains until the run ends: Ctrl-C, SIGTERM or SIGHUP stop it after the step in progress
// (the run kept), `on_stop` called then, once. Returns the signal that stopped it; 0: none.
int train_until_done(Trainer& trainer, const std::function<void()>& on_stop) {
  const StopSignals signals;
  trainer.start();
  bool asked = false;
  while (trainer.status() == RunStatus::Running || trainer.status() == RunStatus::Paused) {
    if (signals.requested() && !asked) {
      trainer.stop();
      asked = true;
      on_stop();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  trainer.join();
  return signals.signal();
}

// A rank other than 0: the same training, nothing written (rank 0 keeps the run); a
// failure is reported with the rank's number.
int run_other_rank(const RunConfig& cfg, const RankInfo& ranks, std::ostream& err) {
  Trainer trainer(cfg, nullptr);
  trainer.setRanks(ranks);
  trainer.setComputeThreads(compute_threads_per_rank(ranks));
  // The signal that stopped this rank (0: none); a stop is agreed on by all ranks after a
  // step.
  const int stop_signal = train_until_done(trainer, [] {});
  if (trainer.status() == RunStatus::Failed) {
    err << "fp8wb: rank " << ranks.rank
        << ": the run failed: " << without_backtrace(trainer.message()) << "\n";
    return 1;
  }
  if (trainer.status() == RunStatus::Stopped && stop_signal != 0 && !started_by_launch_ranks()) {
    err << fmt::format(
        "fp8wb: rank {}: interrupted by {}: stopped after {} (rank 0 keeps the run)\n", ranks.rank,
        stop_signal_name(stop_signal), counted(trainer.steps_done(), "step"));
    return 128 + stop_signal;
  }
  return trainer.status() == RunStatus::Diverged ? 2 : 0;
}

}  // namespace

namespace {

// Every config field by group, with what it takes (run_config_fields.h): "window [1, 65536]",
// "scaling (delayed|current)"; fields apart by "; ".
std::string fields_help() {
  std::string s = "Fields (a config file's keys, or --set key=value), by group:";
  for (const FieldGroupEntry& g : kFieldGroups) {
    std::string line;
    for (const RunConfigField& f : run_config_fields()) {
      if (f.group != g.value) continue;
      std::string item(f.key);
      if (const std::string takes = field_takes_text(f); !takes.empty()) item += " " + takes;
      line += (line.empty() ? "" : "; ") + item;
    }
    s += "\n  " + std::string(g.name) + ": " + line;
  }
  return s;
}

}  // namespace

CLI::App* add_train_command(CLI::App& app, TrainOptions& opt) {
  auto* c = app.add_subcommand("train", "Train a model with FP8 linear layers, keeping the run");
  c->add_option("config", opt.config_file, "A JSON file of config fields (optional)");
  c->add_option("--set", opt.overrides, "Override a field: key=value (repeatable)");
  c->add_option("--db", opt.db, "Run database (default: " + default_database_path() + ")")
      ->check(kDatabasePath);
  c->add_option("--device", opt.device, "cpu, cuda or cuda:N (overrides the config)");
  c->add_option("--save-weights", opt.weights,
                "Write the final weights here (.safetensors; fp8wb inspect reads it)");
  c->add_option("--run-uuid", opt.run_uuid,
                "The run's identity (a UUID), where it is chosen beforehand: a sweep's trial on "
                "a cluster, collected by `fp8wb sweep --collect`");
  c->add_flag("-q,--quiet", opt.quiet,
              "No progress (a bar on a terminal, else a line at each tenth of the run)");
  c->add_option("--nproc", opt.nproc,
                "Ranks to start on this machine, each the same model on its share of every "
                "batch (Gloo on CPUs, NCCL with one GPU each); the batch is the global one")
      ->check(CLI::Range(1, 1024));
  c->add_option("--master-port", opt.master_port,
                "The ranks' rendezvous port (default: MASTER_PORT, else a free one)")
      ->check(CLI::Range(1, 65535));
  c->add_flag("--json", opt.json, "Print the result as JSON");
  c->footer(fields_help());
  return c;
}

namespace {

// The weights written over the run database (or the config file read) would replace it:
// refused, as is any SQLite file or a file that is no safetensors file written before.
void check_weights_path(const TrainOptions& opt, const RunConfig& cfg) {
  if (cfg.weights.empty()) return;
  // Named as the user gave it: the option, or the field of the config file or --set.
  const std::string given = opt.weights.empty() ? "config field 'weights':" : "--save-weights";
  const std::string db = db_path(opt.db);
  std::vector<std::string> inputs{db, db + "-wal", db + "-shm"};
  if (!opt.config_file.empty()) inputs.push_back(opt.config_file);
  if (const std::string in = same_file_as(cfg.weights, inputs); !in.empty()) {
    throw std::invalid_argument(given + " " + cfg.weights + " is the same file as " +
                                (in == opt.config_file ? "the config file " : "the run database ") +
                                in + ": the weights would replace it; give another path");
  }
  if (const std::string no = sqlite_refusal(given, cfg.weights); !no.empty()) {
    throw std::invalid_argument(no);
  }
  // Said before the run rather than when its weights are written at the end.
  if (const std::string no = safetensors_replace_refusal(cfg.weights); !no.empty()) {
    throw std::invalid_argument(given + " " + no);
  }
}

// --nproc N on one machine: the batch split, the ranks' backend, GPUs and memory checked,
// then N processes started (launch_ranks()); returns their exit status.
int launch_local_ranks(const TrainOptions& opt, const RunConfig& cfg, const std::string& device,
                       std::ostream& err) {
  if (cfg.batch % opt.nproc != 0) {
    throw std::invalid_argument(fmt::format(
        "config field 'batch': {} does not split evenly across {} ranks (the batch is the "
        "global one)",
        cfg.batch, opt.nproc));
  }
  if (device != "cpu" && !distributed_backend_available("nccl")) {
    throw std::invalid_argument(
        "ranks on GPUs exchange gradients through NCCL, which this build's LibTorch does not "
        "have; use --device cpu (Gloo)");
  }
  if (device != "cpu" && opt.nproc > Trainer::cuda_device_count()) {
    throw std::invalid_argument(
        fmt::format("--nproc {} asks for more ranks than the {} GPU(s) visible: with NCCL each "
                    "rank needs a GPU of its own (or use --device cpu)",
                    opt.nproc, Trainer::cuda_device_count()));
  }
  // Every rank a process with LibTorch and its own copy of the model: refused before any
  // starts where they cannot all fit.
  RunConfig per_rank = cfg;
  per_rank.batch = cfg.batch / opt.nproc;
  if (const std::string no =
          ranks_refusal("--nproc", opt.nproc, estimate_run_memory(per_rank).total,
                        device == "cpu" ? run_memory_limit() : 0, process_limit());
      !no.empty()) {
    throw std::invalid_argument(no);
  }
  LaunchOptions lo;
  lo.nproc = opt.nproc;
  lo.master_port = opt.master_port;
  // Rank 0 gives its run this identity, by which the launcher finds the run afterwards.
  lo.db = db_path(opt.db);
  lo.run_uuid = opt.run_uuid.empty() ? new_uuid() : opt.run_uuid;
  return launch_ranks(lo, err);
}

// The run's result: its status, the last step's losses, the final loss and gap, tokens/s
// (as `runs list` gives them), the message and the database; --json: the same as JSON.
void print_train_result(RunStore& store, int64_t id, RunStatus st, int64_t steps_done,
                        const std::string& message, const std::optional<StepMetrics>& last,
                        const TrainOptions& opt, std::ostream& out) {
  // The run's final loss and gap as `runs show`, `runs list` and the GUI give them (the last
  // step's loss is not the run's result); none where the store cannot be read back.
  FinalLoss fin;
  RunSpeed speed;  // tokens/s as `runs list` and `runs show` give it
  try {
    if (const auto info = store.run(id)) fin = final_loss(store, *info);
    speed = run_speed(store, id);
  } catch (const StoreError&) {
  }
  if (opt.json) {
    json j;
    j["run"] = id;
    j["status"] = run_status_name(st);
    j["steps"] = steps_done;
    j["loss"] = last ? num(last->loss) : json();
    j["ref_loss"] = last ? num(last->ref_loss) : json();
    j["final_loss"] = num(fin.loss);
    j["loss_gap"] = num(fin.gap);
    j["tokens_per_s"] = num(speed.median);  // the median over the stored steps
    j["message"] = message;
    j["db"] = store.path();
    out << dump(j) << "\n";
  } else {
    out << fmt::format("run {} {} after {}", id, run_status_name(st), counted(steps_done, "step"));
    if (last) {
      out << fmt::format(": loss {:.4f}", last->loss);
      if (std::isfinite(last->ref_loss)) out << fmt::format(", reference {:.4f}", last->ref_loss);
      out << " at the last step";
      if (std::isfinite(fin.loss)) {
        out << fmt::format("; final loss {:.4f}", fin.loss);
        if (std::isfinite(fin.gap)) out << fmt::format(", gap {:+.4g}", fin.gap);
        out << " (mean over " << step_range_text(fin.from_step, fin.to_step) << ")";
      }
      if (speed.steps > 0) {
        out << fmt::format("; {:.0f} tokens/s (median over {})", speed.median,
                           counted(static_cast<int64_t>(speed.steps), "stored step"));
      }
    }
    out << "\n";
    if (!message.empty()) out << message << "\n";
    out << "database: " << store.path() << "\n";
  }
}

}  // namespace

int run_train(const TrainOptions& opt, std::ostream& out, std::ostream& err) {
  check_db_folder(opt.db);
  RunConfig cfg;
  if (!opt.config_file.empty()) cfg = read_run_config_file(opt.config_file);
  apply_overrides(cfg, opt.overrides);  // a field given twice refused
  // Not "run" for every run: named after its settings, as the GUI names a run after its
  // preset and the fields changed.
  if (!names_field(opt, "name")) cfg.name = default_run_name(cfg, opt.overrides);
  if (!opt.device.empty()) cfg.device = opt.device;
  if (!opt.weights.empty()) cfg.weights = opt.weights;
  resolve_hf_config(cfg);  // hf=DIR: the model's shape from its config.json, stored with the run
  // A run on a GPU whose config names no formats takes the GPU's own (hybrid_fnuz on AMD).
  if (cfg.device != "cpu" && !names_field(opt, "formats"))
    cfg.formats = default_run_formats(probe_backend(), cfg);
  validate_run_config(cfg);
  check_weights_path(opt, cfg);
  if (!opt.run_uuid.empty() && !is_uuid(opt.run_uuid)) {
    throw std::invalid_argument("--run-uuid takes a UUID (8-4-4-4-12 hex digits), not \"" +
                                opt.run_uuid.substr(0, 40) + "\"");
  }
  const std::string device = Trainer::resolve_device(cfg.device);
  const RankInfo ranks = rank_info_from_env();
  // --nproc starts ranks of its own; a process that the environment already makes one rank
  // of a run (variables a launcher left behind) would join that run instead, ignoring it.
  if (opt.nproc > 1 && ranks.distributed() && !started_by_launch_ranks()) {
    const bool slurm = ranks.source == "SLURM_PROCID";
    throw std::invalid_argument(fmt::format(
        "--nproc {} starts ranks of its own, but the environment makes this process rank {} "
        "of {} already ({}): unset {} to start --nproc's ranks, or drop --nproc to run as "
        "that rank",
        opt.nproc, ranks.rank, ranks.world,
        slurm ? fmt::format("SLURM_PROCID={} of a Slurm job step", ranks.rank)
              : fmt::format("RANK={}, WORLD_SIZE={}", ranks.rank, ranks.world),
        slurm ? "the SLURM_ variables (or run outside srun)" : "RANK and WORLD_SIZE"));
  }
  check_master_addr(ranks);  // a host name that does not resolve: said now, not after retries
  if (opt.nproc > 1 && !ranks.distributed()) return launch_local_ranks(opt, cfg, device, err);
  if (ranks.distributed()) stop_with_launcher();
  if (ranks.distributed() && ranks.rank != 0) return run_other_rank(cfg, ranks, err);

  auto store = RunStore::open(db_path(opt.db));
  auto console = std::make_shared<Console>(err, cfg.steps, opt.quiet || opt.json, opt.terminal);
  RunStartOptions how;
  how.uuid = opt.run_uuid.empty() && ranks.distributed() ? launcher_run_uuid() : opt.run_uuid;
  how.consumers = {console};
  StartedRun started = start_run(*store, cfg, how);
  const int64_t id = started.id;
  Trainer& trainer = *started.trainer;
  if (ranks.distributed()) {
    trainer.setRanks(ranks);
    trainer.setComputeThreads(compute_threads_per_rank(ranks));
  }

  const int stop_signal = train_until_done(trainer, [&] {  // 0: none
    if (!opt.quiet)
      err << (opt.terminal ? "\n" : "")
          << "interrupted: stopping after this step (the run is kept)\n";
  });
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
  if (!opt.quiet && !opt.json && opt.terminal) err << "\n";  // below the bar

  print_train_result(*store, id, st, trainer.steps_done(), message, console->last(), opt, out);
  if (st == RunStatus::Failed) {
    err << "fp8wb: the run failed: " << message << "\n";
    return 1;
  }
  // Stopped by a signal: said, with what was kept, and an exit status of 128 + the signal
  // (130 for Ctrl-C), as a shell gives a command the signal ended; so do the ranks that
  // torchrun or srun started, for them to see. A rank that `train --nproc` started ends as
  // a stopped run does (its launcher says how the ranks ended, and gives 128 + the signal).
  if (st == RunStatus::Stopped && stop_signal != 0 &&
      !(ranks.distributed() && started_by_launch_ranks())) {
    err << fmt::format(
        "fp8wb: interrupted by {}: run {} is kept as stopped after {}, with all it recorded, in "
        "{}{}\n",
        stop_signal_name(stop_signal), id, counted(trainer.steps_done(), "step"), store->path(),
        cfg.weights.empty() ? ""
                            : "; no weights were written to " + cfg.weights +
                                  " (they are written at a run's last step)");
    return 128 + stop_signal;
  }
  return st == RunStatus::Diverged ? 2 : 0;
}

namespace {
const CommandRegistrar kCommand{
    "train", 40,
    command_with<TrainOptions>(add_train_command, [](TrainOptions& opt, const CliContext& ctx,
                                                     std::ostream& out, std::ostream& err) {
      opt.terminal = ctx.err_terminal;
      return run_train(opt, out, err);
    })};
}  // namespace

}  // namespace fp8wb::cli
