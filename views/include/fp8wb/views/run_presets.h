// defines: RunPreset, run_presets(): the run panel's presets, read from
// resources/presets/run_presets.json (compiled in as :/presets/run_presets.json). A new
// preset is one more entry in that file: a name and the config fields it sets.
#pragma once

#include <QString>
#include <QStringList>
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

}  // namespace fp8wb
