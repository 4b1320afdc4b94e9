#include "commands/bench_command.h"

#include <fmt/format.h>

#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>

#include "command_registry.h"
#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/counted.h"
#include "fp8wb/core/median.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/train/comm_bench.h"
#include "fp8wb/core/train/distributed.h"
#include "fp8wb/core/train/trainer.h"
#include "rank_launcher.h"
#include "run_command_common.h"

namespace fp8wb::cli {

using nlohmann::json;

CLI::App* add_bench_command(CLI::App& app, BenchOptions& opt) {
  auto* c = app.add_subcommand(
      "bench", "Measure: FP8 training steps against high precision, and the run store");
  c->add_option("--device", opt.device, "cpu, cuda or cuda:N");
  c->add_option("--steps", opt.steps, "Timed steps per variant (1 to 100000)")
      ->check(CLI::Range(1, 100000));
  c->add_option("--rounds", opt.rounds,
                "Run every variant this many times, the variants in turn, so that a machine's "
                "drift moves them alike (1 to 100; the figures take every round's steps)")
      ->check(CLI::Range(1, 100));
  c->add_option("--model", opt.model, "gpt or mlp")->check(CLI::IsMember({"gpt", "mlp"}));
  c->add_option("--set", opt.overrides, "Override a model field: key=value (repeatable)");
  c->add_flag("--json", opt.json, "Print the figures as JSON");
  c->add_flag("--store-only", opt.store_only, "Only the run-store figures");
  c->add_flag("--train-only", opt.train_only, "Only the training-step figures");
  c->add_flag("--comm", opt.comm,
              "Measure the ranks' exchanges instead: an all-reduce of fp32 and an all-gather of "
              "FP8 weights (uint8 codes + fp32 row scales) against bf16, through Gloo (cpu) or "
              "NCCL (cuda); with --nproc, or under torchrun or srun");
  c->add_option("--nproc", opt.nproc, "--comm: ranks to start on this machine")
      ->check(CLI::Range(1, 1024));
  c->add_option("--master-port", opt.master_port,
                "--comm: the ranks' rendezvous port (default: MASTER_PORT, else a free one)")
      ->check(CLI::Range(1, 65535));
  c->add_option("--rows", opt.rows,
                "--comm: rows of the weight matrix each rank sends (rows x cols at most 2^30; "
                "the memory the ranks need is said before they start)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  c->add_option("--cols", opt.cols, "--comm: its columns")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  // Without --comm these would be ignored: run_bench() refuses them instead.
  c->parse_complete_callback([c, &opt] {
    opt.comm_only_given.clear();
    for (const char* name : {"--nproc", "--master-port", "--rows", "--cols"})
      if (c->count(name) > 0) opt.comm_only_given.emplace_back(name);
  });
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
  double step_ms, tokens_per_s;  // median step
  double mean_ms;                // mean step: counts the steps that gather statistics
  size_t timed_steps;            // over every round
};

// The variants' first steps warm up (allocations, the GEMMs' algorithm choice): not timed.
constexpr size_t kWarmUpSteps = 5;

struct TrainVariant {
  const char* name;
  bool fp8;
  int stats;  // stats_interval
  ScalingMode scaling;
};

// One run of a variant: its timed steps' times (past the warm-up), the tokens of a step.
struct TrainRun {
  std::vector<double> ms;
  double tokens = 0;
};

TrainRun bench_variant(const RunConfig& base, const TrainVariant& v) {
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
  TrainRun r;
  for (size_t i = kWarmUpSteps; i < col->steps.size(); ++i) {
    r.ms.push_back(col->steps[i].step_ms);
    r.tokens = col->steps[i].tokens_per_s * col->steps[i].step_ms / 1000.0;
  }
  return r;
}

std::vector<TrainFigure> bench_training(const BenchOptions& opt) {
  RunConfig base;
  base.model = opt.model == "mlp" ? ModelKind::Mlp : ModelKind::Gpt;
  base.device = opt.device;
  base.reference = false;
  base.steps = opt.steps + static_cast<int64_t>(kWarmUpSteps);
  apply_overrides(base, opt.overrides);  // a field given twice refused
  validate_run_config(base);
  constexpr ScalingMode kDelayed = ScalingMode::Delayed, kCurrent = ScalingMode::Current;
  const TrainVariant vs[] = {{"high precision", false, 0, kDelayed},
                             {"FP8 delayed, no statistics", true, 0, kDelayed},
                             {"FP8 current, no statistics", true, 0, kCurrent},
                             {"FP8 delayed, statistics every 10 steps", true, 10, kDelayed},
                             {"FP8 delayed, statistics every step", true, 1, kDelayed}};
  constexpr size_t kVariants = std::size(vs);
  // The variants in turn, round after round: each one's steps of every round together.
  std::array<TrainRun, kVariants> all;
  for (int round = 0; round < opt.rounds; ++round) {
    for (size_t i = 0; i < kVariants; ++i) {
      const TrainRun r = bench_variant(base, vs[i]);
      all[i].ms.insert(all[i].ms.end(), r.ms.begin(), r.ms.end());
      all[i].tokens = r.tokens;
    }
  }
  std::vector<TrainFigure> out;
  for (size_t i = 0; i < kVariants; ++i) {
    const std::vector<double>& ms = all[i].ms;
    const double m = median(ms);
    double sum = 0;
    for (double x : ms) sum += x;
    const double mean = ms.empty() ? 0.0 : sum / static_cast<double>(ms.size());
    out.push_back({vs[i].name, m, all[i].tokens / (m / 1000.0), mean, ms.size()});
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
    const int64_t run = store->create_run("ingest", RunKind::Bench, json::object().dump(), "cpu");
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
    const int64_t big = store->create_run("1M steps", RunKind::Bench, json::object().dump(), "cpu");
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

std::string bytes_text(double b) {
  if (b >= double(1 << 30)) return fmt::format("{:.1f} GiB", b / double(1 << 30));
  return fmt::format("{:.0f} MiB", std::ceil(b / double(1 << 20)));
}

// From this size on (16 MiB of fp32 a rank) the work takes long enough to report.
constexpr int64_t kCommProgressElements = int64_t{1} << 22;

// Rank 0's progress on a large matrix: a line as each step of the work begins and ends,
// and every 5 s within one.
class CommProgress {
 public:
  explicit CommProgress(std::ostream& err) : err_(err) {}
  void operator()(const std::string& what, int done, int total) {
    const auto now = std::chrono::steady_clock::now();
    if (what == what_ && done < total && now - shown_ < std::chrono::seconds(5)) return;
    what_ = what;
    shown_ = now;
    err_ << fmt::format("bench --comm: {}: {} of {}\n", what, done, total) << std::flush;
  }

 private:
  std::ostream& err_;
  std::string what_;
  std::chrono::steady_clock::time_point shown_;
};

int bench_comm(const BenchOptions& opt, std::ostream& out, std::ostream& err) {
  const std::string device = opt.device == "cpu" ? "cpu" : "cuda";
  if (device == "cuda" && opt.device != "cuda" && opt.device.rfind("cuda:", 0) != 0)
    throw std::invalid_argument("--device \"" + opt.device + "\": cpu (Gloo) or cuda (NCCL)");
  CommBenchOptions o;
  o.device = device;
  o.rows = opt.rows;
  o.cols = opt.cols;
  o.iters = opt.steps;
  const RankInfo ranks = rank_info_from_env();
  if (ranks.distributed()) {
    // Ranks started by another launcher (torchrun, srun) check alike; rank 0 alone says
    // what is refused, so that the message comes once.
    try {
      check_comm_bench_options(o);
    } catch (const std::invalid_argument&) {
      if (ranks.rank != 0) return 1;
      throw;
    }
  }
  if (!ranks.distributed()) {
    // Refused here, before any rank starts (then said once, not by every rank).
    check_comm_bench_options(o);
    if (opt.nproc < 2) {
      throw std::invalid_argument(
          "bench --comm measures exchanges between ranks: give --nproc 2 or more, or start it "
          "under torchrun or srun");
    }
    if (!distributed_backend_available(device == "cpu" ? "gloo" : "nccl")) {
      throw std::invalid_argument(
          device == "cpu" ? "this build has no Gloo (its headers: libgloo-dev), so CPU ranks "
                            "cannot exchange anything"
                          : "this build's LibTorch has no NCCL, so GPU ranks cannot exchange "
                            "anything; use --device cpu (Gloo)");
    }
    if (device == "cuda" && opt.nproc > Trainer::cuda_device_count()) {
      throw std::invalid_argument(
          fmt::format("--nproc {} asks for more ranks than the {} GPU(s) visible (one GPU a rank)",
                      opt.nproc, Trainer::cuda_device_count()));
    }
    // What the ranks will hold, said before they start, and refused where all of them
    // together would not fit in this machine's memory.
    // Each rank, and the launcher, is a process with LibTorch's own memory besides its work
    // (kRankProcessBytes): counted in all, so that 64 ranks of a tiny matrix are not
    // "3 MiB" (they took 3.9 GB).
    const CommBenchMemory m = estimate_comm_bench_memory(o, opt.nproc);
    const double processes = static_cast<double>(kRankProcessBytes) * (opt.nproc + 1);
    const double all = m.rank0_host + (opt.nproc - 1) * m.other_host + processes;
    const double have = static_cast<double>(run_memory_limit());
    err << fmt::format(
        "bench --comm: {} ranks, each sending a {} x {} matrix; memory: rank 0 about {}, "
        "every other rank about {}, each process about {} of LibTorch's own ({} in all{}; "
        "this machine has {})\n",
        opt.nproc, opt.rows, opt.cols, bytes_text(m.rank0_host), bytes_text(m.other_host),
        bytes_text(static_cast<double>(kRankProcessBytes)), bytes_text(all),
        device == "cuda" ? ", and " + bytes_text(m.device) + " on each GPU" : "", bytes_text(have));
    if (const std::string no = ranks_refusal("--nproc", opt.nproc, 0, 0, process_limit());
        !no.empty()) {
      throw std::invalid_argument(no);
    }
    if (all > have) {
      throw std::invalid_argument(fmt::format(
          "--rows {} x --cols {} with --nproc {} needs about {} of memory, more than this "
          "machine's {}: give a smaller matrix or fewer ranks",
          opt.rows, opt.cols, opt.nproc, bytes_text(all), bytes_text(have)));
    }
    LaunchOptions lo;
    lo.nproc = opt.nproc;
    lo.master_port = opt.master_port;
    return launch_ranks(lo, err);
  }
  if (ranks.rank == 0 && opt.rows * opt.cols >= kCommProgressElements)
    o.progress = CommProgress(err);
  const CommBenchResult r = run_comm_bench(ranks, o);
  if (ranks.rank != 0) return 0;  // rank 0 reports
  if (opt.json) {
    json j;
    j["backend"] = r.backend;
    j["device"] = r.device;
    j["ranks"] = r.world;
    j["iterations"] = opt.steps;
    j["exchanges"] = json::array();
    for (const CommFigure& f : r.figures) {
      j["exchanges"].push_back({{"op", f.op},
                                {"payload", f.payload},
                                {"dtype", f.dtype},
                                {"note", f.note},
                                {"shape", f.shape},
                                {"bytes_per_rank", f.bytes_per_rank},
                                {"bytes_result", f.bytes_result},
                                {"ms", num(f.ms)},
                                {"algbw_gb_per_s", num(f.algbw_gbs)},
                                {"busbw_gb_per_s", num(f.busbw_gbs)},
                                {"identical", f.identical},
                                {"max_abs_error", num(f.max_abs_error)}});
    }
    j["fp8_vs_bf16"] = {{"bytes", num(r.fp8_bytes_vs_bf16)}, {"time", num(r.fp8_ms_vs_bf16)}};
    out << dump(j) << "\n";
    return 0;
  }
  out << fmt::format("exchanges between {} ranks through {} on {} (median of {})\n", r.world,
                     r.backend, r.device, opt.steps);
  out << fmt::format("  {:<10} {:<11} {:<9} {:>12} {:>10} {:>11} {:>11}  {}\n", "op", "payload",
                     "sent as", "bytes/rank", "ms", "algbw GB/s", "busbw GB/s", "result");
  for (const CommFigure& f : r.figures) {
    std::string result;
    if (f.op == "all_reduce") {
      result = f.identical ? "sum bit-identical to the ranks' values added here"
                           : fmt::format("sum off by up to {:.3g}", f.max_abs_error);
    } else {
      result = f.identical ? "every rank's bytes back unchanged" : "bytes CHANGED in transit";
    }
    out << fmt::format("  {:<10} {:<11} {:<9} {:>12} {:>10.3f} {:>11.3f} {:>11.3f}  {}\n", f.op,
                       f.payload, f.dtype, f.bytes_per_rank, f.ms, f.algbw_gbs, f.busbw_gbs,
                       result);
    if (!f.note.empty()) out << "             (" << f.note << ")\n";
  }
  out << fmt::format(
      "FP8 weights (codes + scales) against bf16: {:.3f}x the bytes, {:.2f}x the time\n",
      r.fp8_bytes_vs_bf16, r.fp8_ms_vs_bf16);
  return 0;
}

}  // namespace

int run_bench(const BenchOptions& opt, std::ostream& out, std::ostream& err) {
  if (opt.comm) return bench_comm(opt, out, err);
  if (!opt.comm_only_given.empty()) {
    const auto& given = opt.comm_only_given;
    std::string names = given.front();
    for (size_t i = 1; i < given.size(); ++i)
      names += (i + 1 == given.size() ? " and " : ", ") + given[i];
    throw std::invalid_argument(fmt::format(
        "{} {} only with --comm (measuring the ranks' exchanges): add --comm, or "
        "leave {} out",
        names, given.size() == 1 ? "applies" : "apply", given.size() == 1 ? "it" : "them"));
  }
  std::vector<TrainFigure> train;
  StoreFigures store;
  if (!opt.store_only) train = bench_training(opt);
  if (!opt.train_only) store = bench_store();
  if (opt.json) {
    json j;
    j["device"] = Trainer::resolve_device(opt.device);
    j["model"] = opt.model;
    j["steps"] = opt.steps;
    j["rounds"] = opt.rounds;
    j["train"] = json::array();
    for (const auto& t : train) {
      j["train"].push_back({{"variant", t.variant},
                            {"step_ms", num(t.step_ms)},
                            {"mean_step_ms", num(t.mean_ms)},
                            {"tokens_per_s", num(t.tokens_per_s)},
                            {"vs_high_precision", num(t.step_ms / train[0].step_ms)},
                            {"mean_vs_high_precision", num(t.mean_ms / train[0].mean_ms)},
                            {"timed_steps", t.timed_steps}});
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
    const std::string rounds =
        opt.rounds > 1 ? fmt::format(" in each of {} rounds, the variants in turn", opt.rounds)
                       : "";
    out << fmt::format("training steps, {} on {} ({}{}: median, then mean)\n", opt.model,
                       Trainer::resolve_device(opt.device), counted(opt.steps, "step"), rounds);
    for (const auto& t : train) {
      out << fmt::format(
          "  {:<40} {:9.2f} ms {:11.0f} tokens/s {:6.2f}x  mean {:9.2f} ms {:6.2f}x\n", t.variant,
          t.step_ms, t.tokens_per_s, t.step_ms / train[0].step_ms, t.mean_ms,
          t.mean_ms / train[0].mean_ms);
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

namespace {
const CommandRegistrar kCommand{"bench", 60,
                                command_with<BenchOptions>(add_bench_command, run_bench)};
}  // namespace

}  // namespace fp8wb::cli
