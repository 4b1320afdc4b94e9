// fp8wb replay, in-process: a tiny delayed-scaling run trained and replayed over a grid;
// --json marks the run's own cell as reproducing its stored scales, ranks every cell and
// names the best by the stated rule; bad input is refused with the problem named.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_run.h"
#include "temp_dir.h"

namespace {

using fp8wb::test::run;

class CliReplay : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = std::filesystem::temp_directory_path() / ("fp8wb-cli-replay-" + std::to_string(getpid()));
    fp8wb::test::remove_tree(dir.string());
    std::filesystem::create_directories(dir);
    db = (dir / "runs.sqlite").string();
  }
  void TearDown() override { fp8wb::test::remove_tree(dir.string()); }
  std::filesystem::path dir;
  std::string db;
};

TEST_F(CliReplay, JsonRanksCellsAndReproducesTheRunsOwnScales) {
  auto r = run({"train", "--db", db, "--set", "model=mlp", "--set", "steps=40", "--set",
                "reference=false", "--set", "stats_interval=5", "--set", "window=16", "--set",
                "margin=0", "-q"});
  ASSERT_EQ(r.rc, 0) << r.err;
  r = run({"replay", "1", "--db", db, "--grid", "margin=0,1,2", "--grid", "window=1,16", "--grid",
           "amax_algo=max,most_recent", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.at("cells").size(), 12u);
  EXPECT_EQ(j.at("steps"), 40);
  EXPECT_EQ(j.at("tensors").size(), 9u);
  EXPECT_EQ(j.at("own_settings_check").at("matches_stored_scales"), true);
  int own = 0;
  std::vector<int> ranks;
  nlohmann::json first;
  for (const auto& c : j.at("cells")) {
    ranks.push_back(c.at("rank"));
    if (c.at("rank") == 1) first = c;
    if (c.contains("matches_stored_scales")) {
      ++own;
      EXPECT_EQ(c.at("matches_stored_scales"), true);
      EXPECT_EQ(c.at("margin"), 0);
      EXPECT_EQ(c.at("window"), 16);
      EXPECT_EQ(c.at("amax_algo"), "max");
    }
    EXPECT_EQ(c.at("tensors").size(), 9u);
    // Each tensor's own median headroom where it was ever unsaturated and nonzero.
    for (const auto& t : c.at("tensors"))
      EXPECT_TRUE(t.at("median_headroom_binades").is_number()) << t.dump();
  }
  EXPECT_EQ(own, 1);
  std::sort(ranks.begin(), ranks.end());
  for (size_t i = 0; i < ranks.size(); ++i) EXPECT_EQ(ranks[i], static_cast<int>(i + 1));
  // The rule: safe cells (no saturation, 0.5 binade at the closest approach) first, the
  // least median headroom first; then the other unsaturated cells, the most room at their
  // closest approach first; then the saturating ones.
  const auto group = [](const nlohmann::json& c) {
    if (c.at("saturating_steps") > 0) return 2;
    return c.at("min_headroom_binades").get<double>() >= 0.5 ? 0 : 1;
  };
  for (const auto& a : j.at("cells")) {
    EXPECT_LE(a.at("min_headroom_binades").get<double>(),
              a.at("median_headroom_binades").get<double>())
        << a.dump();
    for (const auto& b : j.at("cells")) {
      if (a.at("rank") >= b.at("rank")) continue;
      EXPECT_LE(group(a), group(b)) << a.dump() << " before " << b.dump();
      if (group(a) != group(b)) continue;
      if (group(a) == 0) {
        EXPECT_LE(a.at("median_headroom_binades").get<double>(),
                  b.at("median_headroom_binades").get<double>());
      } else if (group(a) == 1) {
        EXPECT_GE(a.at("min_headroom_binades").get<double>(),
                  b.at("min_headroom_binades").get<double>());
      }
    }
  }
  EXPECT_EQ(j.at("best").at("margin"), first.at("margin"));
  EXPECT_EQ(j.at("best").at("window"), first.at("window"));
  // A best at the grid's edge says so where beyond it could rank better: a safe best at
  // the smallest margin or window (window 1 has none below); one that is not safe at the
  // largest (a window only for the history's largest amax).
  std::vector<std::string> edges;
  const bool max_algo = first.at("amax_algo") == "max";
  if (group(first) == 0) {
    if (first.at("margin") == 0) edges.push_back("margin_min");
  } else {
    if (first.at("margin") == 2) edges.push_back("margin_max");
    if (first.at("window") == 16 && max_algo) edges.push_back("window_max");
  }
  EXPECT_EQ(j.at("best").at("at_grid_edge").get<std::vector<std::string>>(), edges) << j.at("best");
  if (!edges.empty()) {
    EXPECT_NE(
        j.at("best").at("grid_edge_note").get<std::string>().find("at the edge of the grid ("),
        std::string::npos);
  } else {
    EXPECT_TRUE(j.at("best").at("grid_edge_note").is_null());
  }
  // Text: the table, the best, the assumption.
  r = run({"replay", "1", "--db", db, "--grid", "margin=0,1", "--tensor", "layers.0"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("reproduced bit for bit"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3 FP8 tensors"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("does not depend on the setting"), std::string::npos) << r.out;
}

TEST_F(CliReplay, BadInputIsRefusedByName) {
  auto r = run({"train", "--db", db, "--set", "model=mlp", "--set", "steps=3", "--set",
                "reference=false", "--set", "scaling=current", "-q"});
  ASSERT_EQ(r.rc, 0) << r.err;
  // A current-scaling run replays as delayed, with the caveat.
  r = run({"replay", "1", "--db", db, "--grid", "window=1,4", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("used current scaling"), std::string::npos) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("own_settings_check").at("matches_stored_scales"),
            true);
  // Over 10,000 cells.
  std::string margins = "margin=", windows = "window=";
  for (int m = -50; m <= 50; ++m) margins += std::to_string(m) + (m < 50 ? "," : "");
  for (int w = 1; w <= 100; ++w) windows += std::to_string(w) + (w < 100 ? "," : "");
  r = run({"replay", "1", "--db", db, "--grid", margins, "--grid", windows});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("10100 cells, over the 10000"), std::string::npos) << r.err;
  r = run({"replay", "1", "--db", db, "--grid", "window=0"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("window"), std::string::npos) << r.err;
  r = run({"replay", "1", "--db", db, "--grid", "lr=1"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("unknown axis 'lr'"), std::string::npos) << r.err;
  r = run({"replay", "1", "--db", db, "--tensor", "nope"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("no FP8 tensor 'nope'"), std::string::npos) << r.err;
  r = run({"replay", "7", "--db", db});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("no run 7"), std::string::npos) << r.err;
  r = run({"replay", "x", "--db", db});
  EXPECT_EQ(r.rc, 1);
}

}  // namespace
