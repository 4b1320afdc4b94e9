#include "commands/replay_command.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "command_registry.h"
#include "fp8wb/core/checkpoint/file_io.h"
#include "fp8wb/core/replay/replay_run.h"
#include "run_command_common.h"

namespace fp8wb::cli {

using nlohmann::json;

CLI::App* add_replay_command(CLI::App& app, ReplayCliOptions& opt) {
  auto* c = app.add_subcommand(
      "replay",
      "Replay a run's recorded amax under other delayed-scaling settings (margin, window, "
      "amax algorithm) without training again: where each would saturate, how much headroom it "
      "keeps, the estimated underflow; cells ranked");
  c->add_option("run", opt.run, "The run's id (`fp8wb runs list` shows them)")->required();
  c->add_option("--grid", opt.grid,
                "An axis and its values: margin=0,1,2,4, window=1,16,128,1024, "
                "amax_algo=max,most_recent (an axis left out takes the run's own value)")
      ->take_all();
  c->add_option("--tensor", opt.tensor,
                "Only this FP8 tensor: a layer (its three roles) or LAYER/ROLE, e.g. "
                "blocks.0.mlp.fc1/input");
  c->add_option("--db", opt.db, "Run database (default: " + default_database_path() + ")")
      ->check(kDatabasePath);
  c->add_flag("--json", opt.json, "The cells, the ranking and the checks as JSON");
  c->add_flag("--sampled", opt.sampled,
              "For a run made before per-step amax was recorded: replay the amax of its sampled "
              "steps as if they were consecutive (an approximation)");
  return c;
}

namespace {

std::string setting_text(const ReplayCellSetting& s) {
  return fmt::format("margin {}, window {}, {}", s.margin, s.window, amax_algo_name(s.algo));
}

json figures_json(const ReplayFigures& f) {
  return {{"steps", f.steps},
          {"saturating_steps", f.saturating_steps},
          {"worst_over_binades", f.saturating_steps > 0 ? num(f.worst_over_binades) : json()},
          {"median_headroom_binades", num(f.median_headroom_binades)},
          {"min_headroom_binades", num(f.min_headroom_binades)},
          {"est_underflow_pct", num(f.est_underflow_pct)},
          {"est_saturated_pct", num(f.est_saturated_pct)},
          {"sampled", f.sampled}};
}

// `replay --json`: the run's own setting and its check, the best cell, every cell with
// each tensor's figures, and the notes.
void print_replay_json(int64_t id, const ReplayRun& run, const ReplayResult& res,
                       const ReplayCell& best, const ReplayGridEdge& edge, bool checked,
                       std::ostream& out) {
  const auto tensor_name = [&](size_t t) { return amax_tensor_label(run.input.tensors.at(t)); };
  json j;
  j["run"] = id;
  j["name"] = run.name;
  j["steps"] = run.input.step_count();
  j["tensors"] = json::array();
  for (size_t t = 0; t < run.input.tensor_count(); ++t) j["tensors"].push_back(tensor_name(t));
  j["run_setting"] = {
      {"scaling", run.run.delayed ? "delayed" : "current"},
      {"margin", run.run.config.margin},
      {"window", run.run.delayed ? json(run.run.config.window) : json()},
      {"amax_algo",
       run.run.delayed ? json(std::string(amax_algo_name(run.run.config.algo))) : json()}};
  json own = {{"matches_stored_scales", checked ? json(res.own.matches) : json()},
              {"compared", res.own.compared}};
  if (checked && !res.own.matches) {
    own["first_difference"] = {{"step", res.own.first_step},
                               {"tensor", tensor_name(res.own.first_tensor)},
                               {"stored", res.own.stored},
                               {"replayed", res.own.replayed}};
  }
  j["own_settings_check"] = own;
  j["from_sampled_steps"] = run.from_sampled_steps;
  j["rule"] = ReplayResult::kRule;
  j["best"] = {{"margin", best.setting.margin},
               {"window", best.setting.window},
               {"amax_algo", std::string(amax_algo_name(best.setting.algo))},
               {"saturates", best.all.saturating_steps > 0},
               // Whether it keeps kSafeHeadroomBinades at its closest approach.
               {"safe", best.all.saturating_steps == 0 &&
                            best.all.min_headroom_binades >= ReplayResult::kSafeHeadroomBinades},
               // The axes whose smallest or largest value it takes ("margin_max", "window_max"):
               // the grid does not show what lies beyond.
               {"at_grid_edge", edge.names()},
               {"grid_edge_note", edge.any() ? json(edge.text(best.setting)) : json()}};
  j["cells"] = json::array();
  for (const ReplayCell& c : res.cells) {
    json cj = {{"margin", c.setting.margin},
               {"window", c.setting.window},
               {"amax_algo", std::string(amax_algo_name(c.setting.algo))},
               {"rank", c.rank}};
    cj.update(figures_json(c.all));
    if (c.is_run_setting && checked) {
      cj["matches_stored_scales"] = res.own.matches;
      if (!res.own.matches) cj["first_difference"] = own["first_difference"];
    }
    json per = json::array();
    for (size_t t = 0; t < c.tensors.size(); ++t) {
      json tj = {{"tensor", tensor_name(t)}};
      tj.update(figures_json(c.tensors[t]));
      per.push_back(tj);
    }
    cj["tensors"] = per;
    j["cells"].push_back(cj);
  }
  j["notes"] = run.notes;
  out << dump(j, 1) << "\n";
}

}  // namespace

int run_replay(const ReplayCliOptions& opt, std::ostream& out, std::ostream& err) {
  int64_t id = 0;
  const char* end = opt.run.data() + opt.run.size();
  if (const auto [at, e] = std::from_chars(opt.run.data(), end, id);
      e != std::errc() || at != end || id <= 0) {
    err << "fp8wb replay: run id must be a positive whole number, not '" << opt.run
        << "' (`fp8wb runs list` shows the ids)\n";
    return 1;
  }
  const std::string path = db_path(opt.db);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    const std::string link = link_problem(path);
    err << "fp8wb: no run database at " << path << (link.empty() ? "" : ": it is " + link) << "\n";
    return 1;
  }
  try {
    ReplayGrid grid;
    for (const std::string& g : opt.grid) parse_replay_axis(g, grid);
    const auto store = RunStore::open_read_only(path);
    const ReplayRun run = load_replay_run(*store, id, opt.tensor, opt.sampled);
    // An axis left out takes the run's own value.
    if (grid.margins.empty()) grid.margins = {run.run.config.margin};
    if (grid.windows.empty()) grid.windows = {run.run.config.window};
    if (grid.algos.empty()) grid.algos = {run.run.config.algo};
    ReplayOptions ro;
    ro.run = run.run;
    ro.samples = run.samples;
    ro.stored = run.stored;
    // Every tensor's median where one is asked for, or the JSON lists each tensor.
    ro.per_tensor_median = !opt.tensor.empty() || opt.json;
    const ReplayResult res = replay_amax(run.input, grid, ro);
    const ReplayCell& best = res.cells[res.ranking.front()];
    // A best at the grid's edge: what lies beyond it is unseen.
    const ReplayGridEdge edge = replay_grid_edge(grid, best.setting, best.all);
    const bool checked = !run.from_sampled_steps && res.own.compared > 0;
    const std::string own_text =
        run.run.delayed
            ? "delayed, " +
                  setting_text({run.run.config.margin, run.run.config.window, run.run.config.algo})
            : fmt::format("current scaling, margin {}", run.run.config.margin);
    const auto tensor_name = [&](size_t t) { return amax_tensor_label(run.input.tensors.at(t)); };
    if (opt.json) {
      print_replay_json(id, run, res, best, edge, checked, out);
      return 0;
    }
    out << fmt::format("run {} \"{}\": {} steps x {} FP8 tensor{}; its own scaling: {}\n", id,
                       run.name, run.input.step_count(), run.input.tensor_count(),
                       run.input.tensor_count() == 1 ? "" : "s", own_text);
    if (checked) {
      if (res.own.matches) {
        out << fmt::format(
            "own settings replayed: the stored scales reproduced bit for bit ({} sampled scales)\n",
            res.own.compared);
      } else {
        out << fmt::format(
            "own settings replayed: the stored scales NOT reproduced: first at step {}, {} "
            "(stored {:.9g}, replayed {:.9g})\n",
            res.own.first_step, tensor_name(res.own.first_tensor), res.own.stored,
            res.own.replayed);
      }
    }
    out << fmt::format(
        "{:>4}  {:>6}  {:>6}  {:<11}  {:>10}  {:>10}  {:>8}  {:>8}  {:>10}  {:>10}\n", "rank",
        "margin", "window", "amax_algo", "saturating", "worst over", "headroom", "closest",
        "underflow~", "saturated~");
    const auto pct = [](double v) { return std::isfinite(v) ? fmt::format("{:.3g}%", v) : "-"; };
    for (size_t r : res.ranking) {
      const ReplayCell& c = res.cells[r];
      out << fmt::format(
          "{:>4}  {:>6}  {:>6}  {:<11}  {:>10}  {:>10}  {:>8}  {:>8}  {:>10}  {:>10}{}\n", c.rank,
          c.setting.margin, c.setting.window, amax_algo_name(c.setting.algo),
          c.all.saturating_steps,
          c.all.saturating_steps > 0 ? fmt::format("{:.2f} b", c.all.worst_over_binades) : "-",
          std::isfinite(c.all.median_headroom_binades)
              ? fmt::format("{:.2f} b", c.all.median_headroom_binades)
              : "-",
          std::isfinite(c.all.min_headroom_binades)
              ? fmt::format("{:.2f} b", c.all.min_headroom_binades)
              : "-",
          pct(c.all.est_underflow_pct), pct(c.all.est_saturated_pct),
          c.is_run_setting ? "  (the run's own)" : "");
    }
    if (best.all.saturating_steps > 0) {
      out << "every cell saturates; the least: " << setting_text(best.setting);
    } else if (best.all.min_headroom_binades >= ReplayResult::kSafeHeadroomBinades) {
      out << "best: " << setting_text(best.setting);
    } else {
      out << fmt::format(
          "no cell keeps {} binade of headroom at its closest approach; the most: {} ({:.2f} "
          "b: an amax a little above the run's would saturate)",
          ReplayResult::kSafeHeadroomBinades, setting_text(best.setting),
          best.all.min_headroom_binades);
    }
    if (edge.any()) out << "; " << edge.text(best.setting);
    out << "\nrule: " << ReplayResult::kRule << "\n"
        << "saturating: (step, tensor) pairs whose amax x scale rounds beyond the format's max; "
           "worst over and headroom (the median step's) in binades (b) of the format's max; "
           "closest: the headroom at the step nearest the max\n";
    for (const std::string& n : run.notes) out << "note: " << n << "\n";
    return 0;
  } catch (const ReplayError& e) {
    err << "fp8wb replay: " << e.what() << "\n";
    return 1;
  }
}

namespace {
const CommandRegistrar kCommand{"replay", 90,
                                command_with<ReplayCliOptions>(add_replay_command, run_replay)};
}  // namespace

}  // namespace fp8wb::cli
