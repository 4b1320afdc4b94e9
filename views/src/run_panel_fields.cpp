// defines: the run panel's field labels (kFieldLabels), the config messages in their words
// (readable()) and the number boxes' free functions (run_panel_fields.h).
#include "run_panel_fields.h"

#include <QRegularExpression>

#include "fp8wb/views/run_panel.h"

namespace fp8wb::detail {
namespace {

// The config's fields as people read them (form labels and messages); the key, as a
// config file or --set spells it, is each field's tooltip.
struct FieldLabel {
  const char* key;
  const char* label;
};
constexpr FieldLabel kFieldLabels[] = {
    {"name", "Name"},
    {"model", "Model"},
    {"d_model", "Model width (GPT, Llama)"},
    {"layers", "Layers (GPT, Llama)"},
    {"heads", "Attention heads (GPT, Llama)"},
    {"context", "Context length (GPT, Llama)"},
    {"intermediate", "SwiGLU width (Llama)"},
    {"kv_heads", "Key/value heads (Llama)"},
    {"rope_theta", "Rotary base (Llama)"},
    {"norm_eps", "RMSNorm epsilon (Llama)"},
    {"tie_embeddings", "Tied embeddings (Llama)"},
    {"vocab", "Vocabulary (Llama; 0: the data's)"},
    {"hf", "Hugging Face checkpoint (Llama)"},
    {"smooth_swiglu", "Smooth-SwiGLU (Llama)"},
    {"data", "Token file (GPT, Llama)"},
    {"eval_interval", "Held-out loss interval"},
    {"width", "Hidden width (MLP)"},
    {"depth", "Depth (MLP)"},
    {"features", "Features (MLP)"},
    {"outlier_channels", "Outlier channels (MLP)"},
    {"outlier_scale", "Outlier scale (MLP)"},
    {"target_tail", "Target noise tail (MLP)"},
    {"drift", "Input drift"},
    {"drift_period", "Drift period"},
    {"batch", "Batch size"},
    {"steps", "Steps"},
    {"lr", "Learning rate"},
    {"warmup", "Warm-up steps"},
    {"min_lr_ratio", "Final learning rate ratio"},
    {"weight_decay", "Weight decay"},
    {"grad_clip", "Gradient clipping norm (0: off)"},
    {"seed", "Seed"},
    {"device", "Device"},
    {"dtype", "Activation dtype"},
    {"fp8", "FP8 linear layers"},
    {"recipe", "Recipe"},
    {"formats", "Formats"},
    {"scaling", "Scaling"},
    {"margin", "Margin"},
    {"window", "Window"},
    {"amax_algo", "Amax algorithm"},
    {"fprop_fp8", "FP8 GEMMs"},
    {"dgrad_fp8", "FP8 GEMMs"},
    {"wgrad_fp8", "FP8 GEMMs"},
    {"stats_interval", "Statistics interval"},
    {"sqnr_interval", "SQNR interval"},
    {"reference", "High-precision reference"},
    {"on_nonfinite", "On a non-finite loss"},
    {"log_interval", "Logging interval"},
    {"weights", "Weights file"},
    {"amax_reduction", "Amax reduction across ranks"},
    {"rank_timeout", "Rank timeout (seconds)"},
};

const QRegularExpression& field_pattern() {
  static const QRegularExpression re(QStringLiteral("^config field '([^']*)': "));
  return re;
}

}  // namespace

QString field_label(const QString& key) {
  for (const FieldLabel& f : kFieldLabels) {
    if (key == QLatin1String(f.key)) return RunPanel::tr(f.label);
  }
  return key;
}

// The key a config message names ("config field 'heads': ..."), or empty.
QString field_key(const QString& message) {
  return field_pattern().match(message).captured(1);
}

// A config message with the field as the form labels it: "Attention heads (GPT): must be
// >= 1, not -5".
QString readable(const std::exception& e) {
  QString m = QString::fromStdString(e.what());
  const QRegularExpressionMatch match = field_pattern().match(m);
  if (!match.hasMatch()) return m;
  QString why = m.mid(match.capturedLength());
  // Other fields the reason names, in words too ("5 does not divide model width (GPT) 64").
  for (const FieldLabel& f : kFieldLabels) {
    const QString key = QString::fromLatin1(f.key);
    if (!key.contains(QLatin1Char('_'))) continue;
    QString label = field_label(key);
    if (label.size() > 1 && label[1].isLower()) label[0] = label[0].toLower();
    why.replace(QRegularExpression(QStringLiteral("\\b%1\\b").arg(key)), label);
  }
  return field_label(match.captured(1)) + QStringLiteral(": ") + why;
}

bool box_refused(const QAbstractSpinBox* b) {
  if (auto* i = dynamic_cast<const IntBox*>(b)) return i->refused();
  if (auto* r = dynamic_cast<const RealBox*>(b)) return r->refused();
  return false;
}

QString box_bounds(const QAbstractSpinBox* b) {
  if (auto* i = dynamic_cast<const IntBox*>(b)) return i->bounds();
  if (auto* r = dynamic_cast<const RealBox*>(b)) return r->bounds();
  return {};
}

void show_value(QAbstractSpinBox* b, double v) {
  if (auto* i = dynamic_cast<IntBox*>(b)) i->showValue(v);
  if (auto* r = dynamic_cast<RealBox*>(b)) r->showValue(v);
}

}  // namespace fp8wb::detail
