// The workbench's vocabularies (roles, recipes, format pairings, sweep metrics, run kinds,
// sweep statuses, event kinds): every value round-trips through its one name, unknown
// names are refused, and a config with an unknown recipe or formats names the field and
// lists the allowed values from the table.
#include <gtest/gtest.h>

#include <cctype>
#include <set>
#include <stdexcept>
#include <string>

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/metrics.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/sweep/sweep.h"

namespace fp8wb {
namespace {

// Every entry parses back to its own value; names are distinct; the list for messages
// holds each name once, in the table's order; names are exact (no case folding).
template <class T, size_t N>
void expect_round_trips(const T (&table)[N], const std::string& listed) {
  std::set<std::string_view> names;
  std::string joined;
  for (const T& e : table) {
    EXPECT_EQ(table_name(table, e.value), e.name);
    const auto parsed = parse_table_name(table, e.name);
    ASSERT_TRUE(parsed.has_value()) << e.name;
    EXPECT_EQ(*parsed, e.value) << e.name;
    EXPECT_TRUE(names.insert(e.name).second) << e.name << " named twice";
    std::string upper(e.name);
    for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    if (upper != e.name) {
      EXPECT_FALSE(parse_table_name(table, upper).has_value()) << upper;
    }
    joined += (joined.empty() ? "" : ", ") + std::string(e.name);
  }
  EXPECT_EQ(table_names(table), joined);
  EXPECT_EQ(table_names(table), listed);
  EXPECT_FALSE(parse_table_name(table, "").has_value());
  EXPECT_FALSE(parse_table_name(table, "no such name").has_value());
  using E = decltype(T::value);
  EXPECT_THROW(table_name(table, static_cast<E>(N)), std::out_of_range);
}

TEST(Vocabulary, RolesRoundTrip) {
  expect_round_trips(kRoles, "input, weight, grad_output");
  EXPECT_EQ(role_names(), "input, weight, grad_output");
  EXPECT_EQ(kRoleCount, 3u);
  for (const RoleEntry& r : kRoles) {
    EXPECT_EQ(parse_role(role_name(r.value)), r.value);
    EXPECT_EQ(kRoles[role_index(r.value)].value, r.value);
  }
  EXPECT_FALSE(parse_role("activation").has_value());
  // A config and a probe answer by role, as their members say.
  Float8LinearConfig c;
  c.grad_output.margin = 3;
  EXPECT_EQ(&c.recipe(Role::Input), &c.input);
  EXPECT_EQ(&c.recipe(Role::Weight), &c.weight);
  EXPECT_EQ(c.recipe(Role::GradOutput).margin, 3);
  Float8Probe p;
  p.weight.scale = 2;
  EXPECT_EQ(p.stats(Role::Weight).scale, 2);
  EXPECT_EQ(&p.stats(Role::GradOutput), &p.grad_output);
}

TEST(Vocabulary, RecipesRoundTripThroughConfigs) {
  expect_round_trips(kFloat8Recipes, "tensorwise, rowwise, blockwise, mx");
  for (const Float8RecipeEntry& r : kFloat8Recipes) {
    RunConfig c;
    c.scaling = ScalingMode::Current;
    apply_override(c, "recipe=" + std::string(r.name));
    EXPECT_EQ(c.recipe, r.value);
    EXPECT_EQ(parse_run_config(run_config_json(c)).recipe, r.value);
    const Float8LinearConfig f = float8_config_of(c);
    EXPECT_EQ(f.input.kind, r.activations);
    EXPECT_EQ(f.grad_output.kind, r.activations);
    EXPECT_EQ(f.weight.kind, r.weight);
    EXPECT_EQ(float8_recipe_name(r.value), r.name);
  }
}

TEST(Vocabulary, FormatPairingsRoundTripThroughConfigs) {
  expect_round_trips(kFormatPairings, "hybrid, e4m3, hybrid_fnuz, e4m3_fnuz");
  for (const FormatPairingEntry& p : kFormatPairings) {
    RunConfig c;
    apply_override(c, "formats=" + std::string(p.name));
    EXPECT_EQ(c.formats, p.value);
    EXPECT_EQ(parse_run_config(run_config_json(c)).formats, p.value);
    const Float8LinearConfig f = float8_config_of(c);
    EXPECT_EQ(f.input.format, p.input);
    EXPECT_EQ(f.weight.format, p.weight);
    EXPECT_EQ(f.grad_output.format, p.grad_output);
    EXPECT_EQ(format_pairing_name(p.value), p.name);
  }
  // The pairings as their names promise: fnuz ones in fnuz formats, hybrid ones E5M2 for dy.
  const FormatPairingEntry& h = kFormatPairings[static_cast<size_t>(FormatPairing::HybridFnuz)];
  EXPECT_EQ(h.input, Format::E4M3FNUZ);
  EXPECT_EQ(h.grad_output, Format::E5M2FNUZ);
}

TEST(Vocabulary, SweepMetricsRoundTripAndReadTheirFigure) {
  expect_round_trips(kSweepMetrics,
                     "final_loss, loss_gap, spike, saturated_pct, underflow_pct, diverged");
  SweepPoint p;
  p.final_loss = 1.5;
  p.loss_gap = 0.25;
  p.saturated_pct = 3;
  p.underflow_pct = 4;
  p.diverged = 2;
  p.spike = 7;
  EXPECT_EQ(sweep_metric(p, SweepMetric::FinalLoss), 1.5);
  EXPECT_EQ(sweep_metric(p, SweepMetric::Spike), 7);
  EXPECT_EQ(sweep_metric(p, SweepMetric::LossGap), 0.25);
  EXPECT_EQ(sweep_metric(p, SweepMetric::SaturatedPct), 3);
  EXPECT_EQ(sweep_metric(p, SweepMetric::UnderflowPct), 4);
  EXPECT_EQ(sweep_metric(p, SweepMetric::Diverged), 2);
  for (const SweepMetricEntry& m : kSweepMetrics) {
    EXPECT_FALSE(m.label.empty()) << m.name;
    EXPECT_EQ(parse_sweep_metric(sweep_metric_name(m.value)), m.value);
  }
}

// The store's words: run kinds, sweep statuses and event kinds, each its one name as the
// database holds it; the kinds of a run status's events are named as the status.
TEST(Vocabulary, RunKindsSweepStatusesAndEventKindsRoundTrip) {
  expect_round_trips(kRunKinds, "train, sweep-trial, python, bench");
  expect_round_trips(kSweepStatuses, "running, finished, stopped");
  expect_round_trips(kRunEventKinds,
                     "started, layers, skipped, weights, paused, resumed, finished, stopped, "
                     "diverged, failed, interrupted, notice");
  for (const RunStatusEntry& st : kRunStatuses) {
    const RunEventKind k = run_event_kind_of(st.value);
    RunStatus back = RunStatus::Running;
    if (st.value == RunStatus::Running) {
      EXPECT_EQ(k, RunEventKind::Resumed);
      EXPECT_FALSE(run_status_of(k, back));
      continue;
    }
    EXPECT_EQ(run_event_kind_name(k), st.name);
    ASSERT_TRUE(run_status_of(k, back)) << st.name;
    EXPECT_EQ(back, st.value);
  }
  for (RunEventKind k : {RunEventKind::Started, RunEventKind::Layers, RunEventKind::Notice}) {
    RunStatus back = RunStatus::Running;
    EXPECT_FALSE(run_status_of(k, back)) << run_event_kind_name(k);
  }
  const RunEvent known = stored_run_event(3, "layers", "a, b");
  EXPECT_EQ(known.kind, RunEventKind::Layers);
  EXPECT_TRUE(known.unknown_kind.empty());
  EXPECT_EQ(run_event_kind_stored(known), "layers");
  const RunEvent newer = stored_run_event(3, "checkpoint", "saved");
  EXPECT_EQ(newer.unknown_kind, "checkpoint");
  EXPECT_EQ(run_event_kind_stored(newer), "checkpoint");
  EXPECT_EQ(run_event_kind_text(newer), "unknown (checkpoint)");
}

// An unknown recipe or formats, from a config file's JSON or from --set, names the field
// and lists every allowed value (from the table), as one_of() did for strings.
TEST(Vocabulary, ConfigsWithUnknownNamesAreRefusedListingTheAllowedOnes) {
  struct Case {
    const char* json;
    const char* override_text;
    const char* field;
    const char* allowed;
  };
  const Case cases[] = {
      {R"({"recipe": "perchannel"})", "recipe=perchannel", "'recipe'",
       "\"perchannel\" is not one of tensorwise, rowwise, blockwise, mx"},
      {R"({"formats": "e5m2"})", "formats=e5m2", "'formats'",
       "\"e5m2\" is not one of hybrid, e4m3, hybrid_fnuz, e4m3_fnuz"},
      {R"({"recipe": "Tensorwise"})", "recipe=Tensorwise", "'recipe'", "is not one of tensorwise"},
  };
  for (const Case& k : cases) {
    for (int how = 0; how < 2; ++how) {
      try {
        if (how == 0) {
          parse_run_config(k.json);
        } else {
          RunConfig c;
          apply_override(c, k.override_text);
        }
        ADD_FAILURE() << "accepted: " << k.json;
      } catch (const std::invalid_argument& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find(k.field), std::string::npos) << m;
        EXPECT_NE(m.find(k.allowed), std::string::npos) << m;
      }
    }
  }
  // A value of the wrong type is refused as before, naming the field.
  try {
    parse_run_config(R"({"recipe": 3})");
    ADD_FAILURE() << "a number was taken as a recipe";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'recipe'"), std::string::npos) << e.what();
  }
  // A long unknown value is quoted short.
  try {
    parse_run_config(R"({"formats": ")" + std::string(5000, 'x') + R"("})");
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_LT(std::string(e.what()).size(), 200u) << e.what();
  }
}

}  // namespace
}  // namespace fp8wb
