#include "commands/runs_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "command_registry.h"
#include "fp8wb/core/checkpoint/file_io.h"
#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/sweep/final_loss.h"
#include "run_command_common.h"
#include "same_file.h"
#include "table_text.h"

namespace fp8wb::cli {

using nlohmann::json;

CLI::App* add_runs_command(CLI::App& app, RunsOptions& opt) {
  auto* c = app.add_subcommand(
      "runs", "List, show, export or delete stored runs, or import another database's");
  opt.action = "list";  // `fp8wb runs` alone lists them
  c->add_option("action", opt.action, "list, show, export, delete or import (default: list)")
      ->check(CLI::IsMember({"list", "show", "export", "delete", "import"}));
  c->add_option("run", opt.target,
                "The run's id (show, export, delete), or the run database to import from "
                "(import: its runs are added; runs already here are not copied again)");
  c->add_option("--db", opt.db, "Run database (default: " + default_database_path() + ")")
      ->check(kDatabasePath);
  c->add_option("--format", opt.format,
                "export: csv (the step series), json (everything), or stats-csv (the tensor "
                "statistics, a row each)")
      ->check(CLI::IsMember({"csv", "json", "stats-csv"}));
  c->add_option("-o,--out", opt.out_file, "export: write to this file (default: stdout)");
  c->add_flag("--json", opt.json, "list/show as JSON");
  c->add_flag("-y,--yes", opt.yes, "confirm the deletion (without it, delete refuses)");
  return c;
}

namespace {

double last_value(const RunStore& s, int64_t id, const char* series) {
  const auto v = s.series(id, series);
  return v.empty() ? NAN : v.back().value;
}

// The run's final loss and loss gap (final_loss.h), as JSON.
json final_json(const RunStore& s, const RunInfo& r) {
  const FinalLoss f = final_loss(s, r);
  return {{"loss", num(f.loss)},        {"ref_loss", num(f.ref_loss)},
          {"loss_gap", num(f.gap)},     {"ref_broken", f.ref_broken},
          {"from_step", f.from_step},   {"to_step", f.to_step},
          {"steps_averaged", f.points}, {"definition", kFinalLossDefinition}};
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

// A run's FP8 settings from its stored config, as the GUI's Runs list gives them: recipe,
// scaling, margin and window as the config spells them; a run without FP8 has the recipe
// "no FP8" and none of the others; a config without a field (or not JSON) gives "".
struct RunSettings {
  std::string model, recipe, scaling, margin, window;
  bool fp8 = true;
};
RunSettings settings_of(const RunInfo& r) {
  const json c = config_of(r);
  RunSettings s;
  if (!c.is_object()) return s;
  auto text = [&c](const char* key) {
    const auto it = c.find(key);
    if (it == c.end() || it->is_null()) return std::string();
    return it->is_string() ? it->get<std::string>() : it->dump();
  };
  s.model = text("model");
  const auto fp8 = c.find("fp8");
  s.fp8 = fp8 == c.end() || !fp8->is_boolean() || fp8->get<bool>();
  if (!s.fp8) {
    s.recipe = "no FP8";
    return s;
  }
  s.recipe = text("recipe");
  s.scaling = text("scaling");
  s.margin = text("margin");
  s.window = text("window");
  return s;
}

// A JSON string, or null where the config does not say.
json text_or_null(const std::string& s) {
  return s.empty() ? json() : json(s);
}

// Why `-o path` must not be written: an existing, non-empty file that is not an earlier
// export (text beginning as the CSV formats' "step" header or the JSON format's "{" does),
// as inspect --export and --save-weights keep a file that is not a safetensors file.
// Empty where the path may be written.
std::string export_replace_refusal(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return {};  // none, or refused on writing
  if (std::filesystem::file_size(path, ec) == 0 || ec) return {};
  std::ifstream f(path, std::ios::binary);
  std::string head(4096, '\0');
  f.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(f.gcount()));
  const bool text = head.find('\0') == std::string::npos;
  if (text && (head.rfind("step", 0) == 0 || head.rfind("{", 0) == 0)) return {};
  return "-o " + path +
         " exists and is not an export of a run (CSV or JSON): writing there would replace it; "
         "give another path, or remove the file first";
}

void export_run(const RunStore& s, const RunInfo& r, const std::string& format, std::ostream& o) {
  if (format == "csv") {
    write_run_csv(s, r.id, o);
    return;
  }
  if (format == "stats-csv") {
    write_tensor_stats_csv(s, r.id, o);
    return;
  }
  json j;
  j["run"] = {{"id", r.id},
              {"name", r.name},
              {"status", run_status_text(r)},
              {"message", r.message},
              {"device", r.device},
              {"started_at", r.started_at},
              {"ended_at", r.ended_at},
              {"source", run_kind_text(r)},
              {"config", config_of(r)}};
  j["final"] = final_json(s, r);
  const RunSpeed sp = run_speed(s, r.id);
  j["tokens_per_s"] = {{"median", num(sp.median)},
                       {"last", num(sp.last)},
                       {"steps", sp.steps},
                       {"definition", kSpeedDefinition}};
  const RunSpeed wall = run_speed(s, r.id, "wall_tokens_per_s");
  j["wall_tokens_per_s"] = {{"median", num(wall.median)},
                            {"steps", wall.steps},
                            {"definition",
                             "per wall-clock step of the whole run (its reference, statistics and "
                             "storing included), the median over the run's stored steps"}};
  json series = json::object();
  for (const auto& n : s.series_names(r.id)) {
    json points = json::array();
    for (const SeriesPoint& p : s.series(r.id, n)) points.push_back({p.step, num(p.value)});
    series[n] = std::move(points);
  }
  j["series"] = std::move(series);
  json ts = json::array();
  for (const TensorMetrics& t : s.tensor_stats(r.id)) {
    json row = {{"step", t.step}, {"layer", t.layer}, {"role", role_name(t.role)}};
    for (const TensorStatField& f : kTensorStatFields) {
      switch (f.type) {
        case TensorStatField::Type::Count: row[f.name] = t.raw.*f.count; break;
        case TensorStatField::Type::Sum:
        case TensorStatField::Type::Value: row[f.name] = num(stat_value(t, f)); break;
        case TensorStatField::Type::Histogram: break;  // in the database, not the export
      }
    }
    ts.push_back(std::move(row));
  }
  j["tensor_stats"] = std::move(ts);
  // A data-parallel run: every rank's amax and scale (empty for a run of one process).
  json rs = json::array();
  for (const RankScale& k : s.rank_scales(r.id)) {
    rs.push_back({{"step", k.step},
                  {"layer", k.layer},
                  {"role", role_name(k.role)},
                  {"rank", k.rank},
                  {"amax", num(k.amax)},
                  {"scale", num(k.scale)}});
  }
  j["rank_scales"] = std::move(rs);
  json ev = json::array();
  for (const auto& e : s.events(r.id)) {
    ev.push_back({{"step", e.step}, {"kind", run_event_kind_text(e)}, {"message", e.message}});
  }
  j["events"] = std::move(ev);
  o << dump(j) << "\n";
}

}  // namespace

namespace {

int import_runs(const RunsOptions& opt, std::ostream& out, std::ostream& err) {
  if (opt.target.empty()) {
    err << "fp8wb runs import: which database? (fp8wb runs import OTHER.sqlite)\n";
    return 1;
  }
  // The target is opened for writing (created where there is none); the source only read,
  // and looked for first, so that a mistyped source leaves no new, empty target behind.
  std::error_code ec;
  if (!std::filesystem::exists(opt.target, ec)) {
    const std::string link = link_problem(opt.target);
    err << "fp8wb: no run database at " << opt.target << (link.empty() ? "" : ": it is " + link)
        << "\n";
    return 1;
  }
  // Importing a database into itself would copy nothing and hold both ends of one file.
  if (const std::string db = db_path(opt.db); !same_file_as(opt.target, {db}).empty()) {
    err << "fp8wb runs import: " << opt.target << " is the run database itself (--db " << db
        << "): a database cannot be imported into itself; give another database to import\n";
    return 1;
  }
  auto store = RunStore::open(db_path(opt.db));
  const ImportReport r = store->import_runs(opt.target);
  if (opt.json) {
    out << dump(json{{"added", r.added},
                     {"updated", r.updated},
                     {"unchanged", r.unchanged},
                     {"runs", r.run_ids},
                     {"db", store->path()}})
        << "\n";
  } else {
    out << fmt::format("imported from {}: {} new, {} updated, {} already here; database: {}\n",
                       opt.target, r.added, r.updated, r.unchanged, store->path());
  }
  return 0;
}

// `runs list`: every run, a line each (or --json).
int list_runs(RunStore& store, const RunsOptions& opt, std::ostream& out) {
  const auto runs = store.runs();
  if (opt.json) {
    json j = json::array();
    for (const auto& r : runs) {
      const FinalLoss f = final_loss(store, r);
      const RunSettings set = settings_of(r);
      // margin and window as numbers, as the config holds them.
      auto number = [](const std::string& v) {
        return v.empty() ? json() : json::parse(v, nullptr, false);
      };
      j.push_back({{"id", r.id},
                   {"name", r.name},
                   {"model", text_or_null(set.model)},
                   {"fp8", set.fp8},
                   {"recipe", set.fp8 ? text_or_null(set.recipe) : json()},
                   {"scaling", text_or_null(set.scaling)},
                   {"margin", number(set.margin)},
                   {"window", number(set.window)},
                   {"status", run_status_text(r)},
                   {"steps", r.last_step + 1},
                   {"loss", num(last_value(store, r.id, "loss"))},  // the last step's
                   {"final_loss", num(f.loss)},
                   {"loss_gap", num(f.gap)},
                   // the reference diverged or blew up: the gap is no comparison
                   {"ref_broken", f.ref_broken},
                   {"tokens_per_s", num(run_speed(store, r.id).median)},  // the median
                   {"device", r.device},
                   {"started_at", r.started_at},
                   {"source", run_kind_text(r)}});
    }
    out << dump(j) << "\n";
    return 0;
  }
  if (runs.empty()) {
    out << "no runs in " << store.path() << "\n";
    return 0;
  }
  // The column as wide as the longest name up to kRunNameWidth, counted in terminal
  // columns (a CJK character or an emoji takes two), not bytes; a longer name is cut in
  // the middle (two sweep trials may differ only at the end: `runs show` and --json
  // give it whole); a name stored elsewhere with a control character shows it escaped.
  constexpr size_t kRunNameWidth = 48;
  size_t width = 24;
  for (const auto& r : runs)
    width = std::max(width, std::min(kRunNameWidth, text_width(shown_text(r.name))));
  auto padded = [&](const std::string& s) {
    const std::string t = cut_middle(shown_text(s), width);
    return t + std::string(width - text_width(t), ' ');
  };
  // The FP8 settings, as the GUI's Runs list gives them ("-" where a run has none).
  auto cell = [](const std::string& v) { return v.empty() ? std::string("-") : shown_text(v); };
  out << fmt::format(
      "{:>5}  {} {:<12} {:<10} {:<8} {:>6} {:>6} {:>7} {:>10} {:>9} {:>11}  {:<8} {:<20} {}\n",
      "id", padded("name"), "status", "recipe", "scaling", "margin", "window", "steps",
      "final loss", "loss gap", "tokens/s", "device", "started", "source");
  bool broken = false;
  for (const auto& r : runs) {
    // None for a diverged run, and no gap without a finite reference loss: "-". A gap
    // against a reference that diverged or blew up is marked "!" (the footnote says why).
    const FinalLoss f = final_loss(store, r);
    const double tps = run_speed(store, r.id).median;
    std::string gap = std::isfinite(f.gap) ? fmt::format("{:+.4f}", f.gap) : std::string("-");
    if (f.ref_broken) {
      gap += "!";
      broken = true;
    }
    const RunSettings set = settings_of(r);
    out << fmt::format(
        "{:>5}  {} {:<12} {:<10} {:<8} {:>6} {:>6} {:>7} {:>10} {:>9} {:>11}  {:<8} {:<20} {}\n",
        r.id, padded(r.name), run_status_text(r), cell(set.recipe), cell(set.scaling),
        cell(set.margin), cell(set.window), r.last_step + 1,
        std::isfinite(f.loss) ? fmt::format("{:.4f}", f.loss) : std::string("-"), gap,
        std::isfinite(tps) ? fmt::format("{:.0f}", tps) : std::string("-"), r.device, r.started_at,
        run_kind_text(r));
  }
  if (broken)
    out << "! the high-precision reference of that run diverged or blew up: its loss gap is "
           "no comparison (`fp8wb runs show ID` says where)\n";
  out << "(" << kFinalLossDefinition << "; " << kSpeedDefinition << ")\n";
  return 0;
}

// `runs show ID`: the run's status, losses, speed, memory, events and config (or --json).
void show_run(RunStore& store, const RunInfo& r, const RunsOptions& opt, std::ostream& out) {
  if (opt.json) {
    export_run(store, r, "json", out);
    return;
  }
  out << fmt::format("run {}: {} ({})\nstatus   {}{}\ndevice   {}\nstarted  {}\nended    {}\n",
                     r.id, r.name, run_kind_text(r), run_status_text(r),
                     r.message.empty() ? "" : " - " + r.message, r.device, r.started_at,
                     r.ended_at.empty() ? "-" : r.ended_at);
  out << "steps    " << r.last_step + 1 << "\n";
  const FinalLoss f = final_loss(store, r);
  if (r.status == RunStatus::Diverged) {
    out << "final loss    none (the run diverged)\n";
  } else if (std::isfinite(f.loss)) {
    out << fmt::format("final loss    {:.6g} (mean over {})\n", f.loss,
                       step_range_text(f.from_step, f.to_step));
    if (std::isfinite(f.gap))
      out << fmt::format("loss gap      {:+.6g} (the reference's final loss {:.6g})\n", f.gap,
                         f.ref_loss);
    else
      out << "loss gap      none (no finite reference loss at each of those steps)\n";
    if (f.ref_broken) {
      const ReferenceTrouble t = reference_trouble(store.series(r.id, "ref_loss"));
      out << "              ! no comparison: the high-precision reference "
          << (t.diverged
                  ? fmt::format("diverged (a loss that is not finite at step {})", t.diverged_step)
                  : fmt::format("blew up (up {:.3g} from its lowest {:.3g} at step {})", t.rise,
                                t.low, t.step))
          << "\n";
    }
    out << "              " << kFinalLossDefinition << "\n";
  }
  const double grad_norm = last_value(store, r.id, "grad_norm");
  if (std::isfinite(grad_norm))
    out << fmt::format("{:<14}{:.6g} (last step)\n", "grad norm", grad_norm);
  // The figure `runs list` gives, named as such.
  if (const RunSpeed sp = run_speed(store, r.id); sp.steps > 0) {
    out << fmt::format(
        "{:<14}{:.0f} (median over {} stored steps, as `runs list` gives it; "
        "the last step {:.0f}): one model's step, the FP8 model's alone\n",
        "tokens/s", sp.median, sp.steps, sp.last);
  }
  if (const RunSpeed w = run_speed(store, r.id, "wall_tokens_per_s"); w.steps > 0) {
    out << fmt::format(
        "{:<14}{:.0f} tokens/s per wall-clock step (median over {}): the whole run, its "
        "reference, statistics and storing included\n",
        "wall-clock", w.median, w.steps);
  }
  const double mem_fp8 = last_value(store, r.id, "mem_fp8");
  const double mem_ref = last_value(store, r.id, "mem_ref");
  const double rss = last_value(store, r.id, "peak_rss");
  if (std::isfinite(mem_fp8)) {
    out << fmt::format("peak memory   FP8 model {:.3f} GB", mem_fp8 / 1e9);
    if (std::isfinite(mem_ref)) out << fmt::format(", reference {:.3f} GB", mem_ref / 1e9);
    out << " (GPU: the allocator's peak while each model stepped, with its parameters and "
           "optimizer state)\n";
  }
  if (std::isfinite(rss)) {
    out << fmt::format(
        "run memory    {:.3f} GB (resident memory the run added to its process: the "
        "largest resident set since it started, less the one at its start)\n",
        rss / 1e9);
  }
  const auto ts = store.tensor_stats(r.id);
  out << "tensor statistics: " << ts.size() << " rows\n";
  out << "events:\n";
  for (const auto& e : store.events(r.id))
    out << fmt::format("  step {:>6}  {:<10} {}\n", e.step, run_event_kind_text(e), e.message);
  out << "config:\n" << r.config_json << "\n";
}

// `runs export ID`: to stdout, or to -o's file, refused over the database, any SQLite file
// or a file that is no earlier export.
int export_run_file(RunStore& store, const RunInfo& r, const RunsOptions& opt,
                    const std::string& path, std::ostream& out, std::ostream& err) {
  if (opt.out_file.empty()) {
    export_run(store, r, opt.format, out);
  } else {
    // Written over the database (or its write-ahead log), the export would replace every
    // run in it.
    if (const std::string in = same_file_as(opt.out_file, {path, path + "-wal", path + "-shm"});
        !in.empty()) {
      err << "fp8wb runs export: -o " << opt.out_file << " is the same file as "
          << (in == path ? "the run database " : "the run database's companion file ") << in
          << ": the export would replace it; give another path\n";
      return 1;
    }
    // Nor over another run database (or any SQLite file).
    if (const std::string no = sqlite_refusal("-o", opt.out_file); !no.empty()) {
      err << "fp8wb runs export: " << no << "\n";
      return 1;
    }
    // Nor over any other file that is not an earlier export (a checkpoint, say).
    if (const std::string no = export_replace_refusal(opt.out_file); !no.empty()) {
      err << "fp8wb runs export: " << no << "\n";
      return 1;
    }
    // All or nothing: a full disk leaves no truncated file, a device is not replaced.
    write_file_atomically(opt.out_file,
                          [&](std::ostream& f) { export_run(store, r, opt.format, f); });
    out << "wrote run " << r.id << " to " << opt.out_file << "\n";
  }
  return 0;
}

// `runs delete ID --yes`: not a run being written.
int delete_stored_run(RunStore& store, const RunInfo& r, const RunsOptions& opt, std::ostream& out,
                      std::ostream& err) {
  if (r.live) {
    err << "fp8wb: run " << r.id << " (" << r.name
        << ") is being written now (live): stop it first where it was started, then delete it\n";
    return 1;
  }
  if (!opt.yes) {
    err << "fp8wb: deleting run " << r.id << " (" << r.name << ") needs --yes\n";
    return 1;
  }
  store.delete_run(r.id);
  out << "deleted run " << r.id << "\n";
  return 0;
}

}  // namespace

int run_runs(const RunsOptions& opt, std::ostream& out, std::ostream& err) {
  check_db_folder(opt.db);  // as train: a mistyped --db makes no folders
  if (opt.action == "import") return import_runs(opt, out, err);
  if (opt.action == "list" && !opt.target.empty()) {
    // `list` shows every run: a word after it is a mistake, not a run id to check.
    err << "fp8wb runs list: '" << opt.target
        << "' is not expected: list takes no run (it shows them all; `fp8wb runs show ID` "
           "shows one)\n";
    return 2;
  }
  // The run's id, checked before the database is opened.
  int64_t id = 0;
  const char* end = opt.target.data() + opt.target.size();
  if (const auto [at, e] = std::from_chars(opt.target.data(), end, id);
      !opt.target.empty() && (e != std::errc() || at != end || id <= 0)) {
    // One message for a word, a fraction, 0, a negative number or one too large: ids start
    // at 1.
    err << "fp8wb runs " << opt.action << ": run id must be a positive whole number (1 to "
        << INT64_MAX << "), not '" << opt.target << "' (`fp8wb runs list` shows the ids)\n";
    return 1;
  }
  // Reading creates nothing (no folder, no file, no -wal): a missing database is an error.
  // Only delete writes, and only to a database that exists.
  const std::string path = db_path(opt.db);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    // Said as `train` says it.
    err << "fp8wb: run database " << path << " is a folder, not a database file\n";
    return 1;
  }
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) {
    // A FIFO, a device: said as the GUI says it, not as no database at all.
    err << "fp8wb: run database " << path << " is not a regular file, not a database file\n";
    return 1;
  }
  if (!std::filesystem::is_regular_file(path, ec)) {
    const std::string link = link_problem(path);
    err << "fp8wb: no run database at " << path << (link.empty() ? "" : ": it is " + link) << "\n";
    return 1;
  }
  auto store = opt.action == "delete" ? RunStore::open(path) : RunStore::open_read_only(path);
  if (opt.action == "list") return list_runs(*store, opt, out);
  if (opt.target.empty()) {
    err << "fp8wb runs " << opt.action << ": which run? (give its id; `fp8wb runs list`)\n";
    return 1;
  }
  const auto r = store->run(id);
  if (!r) {
    err << "fp8wb: no run " << id << " in " << store->path() << "\n";
    return 1;
  }
  if (opt.action == "show") {
    show_run(*store, *r, opt, out);
    return 0;
  }
  if (opt.action == "export") return export_run_file(*store, *r, opt, path, out, err);
  return delete_stored_run(*store, *r, opt, out, err);  // delete
}

namespace {
const CommandRegistrar kCommand{"runs", 50, command_with<RunsOptions>(add_runs_command, run_runs)};
}  // namespace

}  // namespace fp8wb::cli
