// defines: RunPreset, run_presets(), run_name_after(), run_name_from_run(): the run panel's
// presets, read from resources/presets/run_presets.json (compiled in as
// :/presets/run_presets.json). A new preset is one more entry in that file: a name and the config
// fields it sets.
#pragma once

#include <QString>
#include <QStringList>
#include <string>
#include <vector>

namespace fp8wb {

struct RunPreset {
  QString name;
  // The fields it sets, as key=value with the value as JSON ("window=16",
  // "scaling=\"delayed\""), the way apply_override() takes them. The other fields keep
  // RunConfig's defaults.
  QStringList overrides;
};

// The presets in the file's order, read once. Throws std::runtime_error naming the resource
// when it is not a list of {"name": "...", "fields": {...}} with names given once.
const std::vector<RunPreset>& run_presets();

// The name of a run made from the preset `preset_name` (whose config is `preset_json`,
// run_config_json() without name and device) with the config `now_json` (the same way):
// the preset's name where nothing differs, else what the name says (its parts after the
// first ':', but those that name a field changed, by key or former value) and the fields
// that differ, with their values, in the config's order: "Delayed scaling: window 1024,
// margin=1, steps=100" (four fields at most, then how many more); "window 1" with window
// changed: "Delayed scaling: window=1024". Where the model changes and the name names the
// preset's model, that name is dropped for the new model's: "Llama: FP8 vs BF16, margin=2".
QString run_name_after(const QString& preset_name, const std::string& preset_json,
                       const std::string& now_json);

// Whether `name` is a preset's or a run made from one: its part before the first ':' is a
// preset's ("Delayed scaling: window 1 #2").
bool preset_stem_of(const QString& name);

// The name of a run made from an opened run that came from no preset (a sweep trial "sweep:
// margin=0 window=1 seed=1", "my run") with the config `now_json`: its whole name where
// nothing differs from `run_json`, else it and the fields that differ: "sweep: margin=0
// window=1 seed=1, margin=3" (four at most, then how many more). Never the sweep's name
// with other values, which would read as another trial of the sweep.
QString run_name_from_run(const QString& run_name, const std::string& run_json,
                          const std::string& now_json);

// The fields of `now_json` that differ from `was_json` (both run_config_json() without
// name and device), in the config's order, each with the value it had: "margin=3 (was 0)".
QStringList changed_fields(const std::string& was_json, const std::string& now_json);

}  // namespace fp8wb
