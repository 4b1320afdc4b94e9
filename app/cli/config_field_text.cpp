#include "config_field_text.h"

#include <string_view>

#include "fp8wb/core/config/run_config_fields.h"

namespace fp8wb::cli {

namespace {

// Text for a roff text line or a quoted macro argument: a backslash written as \e, every
// hyphen as \- (options, negative bounds and compound words alike, as the page writes
// them), and a leading '.' or '\'' made text with \&.
std::string roff_text(std::string_view s) {
  std::string r;
  for (const char c : s) {
    if (c == '\\') {
      r += "\\e";
    } else if (c == '-') {
      r += "\\-";
    } else if (c == '"') {
      r += "\\(dq";
    } else {
      r += c;
    }
  }
  if (!r.empty() && (r[0] == '.' || r[0] == '\'')) r.insert(0, "\\&");
  return r;
}

// The models a field applies to, as the page names them ("the GPT and the llama"); empty
// for a field of every model.
std::string models_text(const RunConfigField& f) {
  if (f.models == kAllModels) return "";
  std::string s;
  for (const ModelKindEntry& m : kModelKinds) {
    if (!f.applies_to(m.value)) continue;
    std::string_view name;
    switch (m.value) {
      case ModelKind::Gpt: name = "the GPT"; break;
      case ModelKind::Mlp: name = "the MLP"; break;
      case ModelKind::Llama: name = "the llama"; break;
    }
    s += (s.empty() ? "" : " and ") + std::string(name);
  }
  return s;
}

}  // namespace

std::string field_takes_text(const RunConfigField& f) {
  if (!f.names.empty()) {
    std::string names;
    for (std::string_view n : f.names) (names += names.empty() ? "" : "|") += n;
    return "(" + names + ")";
  }
  if (f.type == FieldType::Boolean) return "(true|false)";
  return field_bounds_text(f);
}

std::string config_fields_roff() {
  std::string s;
  for (const FieldGroupEntry& g : kFieldGroups) {
    s += ".SS \"" + roff_text(g.name) + "\"\n";
    for (const RunConfigField& f : run_config_fields()) {
      if (f.group != g.value) continue;
      s += ".TP\n";
      const std::string takes = field_takes_text(f);
      if (takes.empty()) {
        s += ".B " + roff_text(f.key) + "\n";
      } else {
        s += ".BR " + roff_text(f.key) + " \" " + roff_text(takes) + "\"\n";
      }
      std::string text(f.help);
      if (const std::string models = models_text(f); !models.empty()) {
        text += " (" + models + ")";
      }
      s += roff_text(text) + ".\n";
    }
  }
  return s;
}

}  // namespace fp8wb::cli
