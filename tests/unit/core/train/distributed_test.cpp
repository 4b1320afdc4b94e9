// Data-parallel runs on the CPU (Gloo): two ranks with half the batch each reproduce the
// run of one process with the whole batch step by step, with delayed and with current
// scaling, as long as the amaxes are reduced across ranks; without the reduction the
// ranks' scales part and so do the losses. Ranks here are threads of this process, each
// with a process group of its own (the CLI tests start them as processes).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/train/distributed.h"
#include "fp8wb/core/train/trainer.h"

namespace fp8wb {
namespace {

class Collect : public MetricConsumer {
 public:
  void consume(const MetricBatch& b) override {
    const std::lock_guard<std::mutex> lock(mutex);
    batches.push_back(b);
  }
  std::vector<StepMetrics> steps() {
    std::vector<StepMetrics> s;
    for (const auto& b : batches) s.insert(s.end(), b.steps.begin(), b.steps.end());
    return s;
  }
  std::vector<TensorMetrics> tensors() {
    std::vector<TensorMetrics> s;
    for (const auto& b : batches) s.insert(s.end(), b.tensors.begin(), b.tensors.end());
    return s;
  }
  std::vector<RankScale> ranks() {
    std::vector<RankScale> s;
    for (const auto& b : batches) s.insert(s.end(), b.ranks.begin(), b.ranks.end());
    return s;
  }
  std::mutex mutex;
  std::vector<MetricBatch> batches;
};

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

RunConfig tiny(const std::string& scaling, int batch) {
  RunConfig c;
  c.d_model = 32;
  c.layers = 1;
  c.heads = 2;
  c.context = 32;
  c.batch = batch;
  c.steps = 50;
  c.warmup = 5;
  c.scaling = parse_table_name(kScalingModes, scaling).value();
  c.stats_interval = 5;
  c.sqnr_interval = 0;
  c.reference = false;
  c.rank_timeout = 60;
  return c;
}

struct RankRun {
  RunStatus status = RunStatus::Running;
  std::string message;
  std::shared_ptr<Collect> col = std::make_shared<Collect>();
};

// `world` ranks as threads; rank 0's batches are collected (and written to `store`).
std::vector<RankRun> run_ranks(const RunConfig& c, int world, RunStore* store = nullptr,
                               int64_t run_id = 0) {
  std::vector<RankRun> out(static_cast<size_t>(world));
  const int port = free_port();
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto bus = std::make_shared<MetricBus>();
      bus->add(out[static_cast<size_t>(r)].col);
      if (store && r == 0) bus->add(store->consumer());
      Trainer t(c, bus, run_id);
      RankInfo info;
      info.rank = r;
      info.world = world;
      info.local_rank = r;
      info.local_world = world;
      info.master_port = port;
      if (world > 1) t.setRanks(info);
      t.run();
      out[static_cast<size_t>(r)].status = t.status();
      out[static_cast<size_t>(r)].message = t.message();
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

using Key = std::tuple<int64_t, std::string, Role>;

class TwoRanks : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!distributed_backend_available("gloo")) GTEST_SKIP() << "built without Gloo";
  }
};

TEST_P(TwoRanks, WithHalfTheBatchEachReproduceOneRankStepByStep) {
  const std::string scaling = GetParam();
  const auto one = run_ranks(tiny(scaling, 8), 1);
  ASSERT_EQ(one[0].status, RunStatus::Finished) << one[0].message;

  const std::string path = (std::filesystem::temp_directory_path() /
                            ("fp8wb-ranks-" + scaling + std::to_string(getpid()) + ".sqlite"))
                               .string();
  for (const char* ext : {"", "-wal", "-shm"}) std::filesystem::remove(path + ext);
  auto store = RunStore::open(path);
  const RunConfig c2 = tiny(scaling, 8);
  const int64_t id =
      store->create_run("two ranks", fp8wb::RunKind::Train, run_config_json(c2), "cpu");
  const auto two = run_ranks(c2, 2, store.get(), id);
  ASSERT_EQ(two[0].status, RunStatus::Finished) << two[0].message;
  ASSERT_EQ(two[1].status, RunStatus::Finished) << two[1].message;
  store->flush();

  // The loss of the global batch, step by step. Exact but for fp32 rounding while the
  // arithmetic is the same: the sums over the batch (weight gradients, the loss) add the
  // two halves in another order, and after some steps one such last-bit difference moves
  // an FP8 value across a rounding boundary, after which the runs differ in the fourth
  // decimal (docs/numerics.md, "Ranks"); they do not drift apart. Which step that is
  // depends on the order the BLAS kernel sums in, which differs between processors (step
  // 6 on an AMD EPYC with AVX-512): the first steps, 0-5 as for the scales below, agree
  // to 1e-5.
  const auto s1 = one[0].col->steps(), s2 = two[0].col->steps();
  ASSERT_EQ(s1.size(), 50u);
  ASSERT_EQ(s2.size(), 50u);
  for (size_t i = 0; i < s1.size(); ++i) {
    const double tol = i <= 5 ? 1e-5 : 1e-3;
    EXPECT_NEAR(s2[i].loss, s1[i].loss, tol * std::abs(s1[i].loss)) << "step " << i;
    EXPECT_NEAR(s2[i].grad_norm, s1[i].grad_norm, 10 * tol * std::abs(s1[i].grad_norm))
        << "step " << i;
  }
  // Rank 1 publishes nothing: rank 0 keeps the run.
  EXPECT_TRUE(two[1].col->steps().empty());

  // Every rank quantized with the same scale (bit for bit: the reduced amax is the same
  // number everywhere, and so are the weights); in the first steps that is the one-rank
  // run's scale, and the largest rank's amax its amax.
  std::map<Key, TensorMetrics> ref;
  for (const TensorMetrics& t : one[0].col->tensors()) ref[{t.step, t.layer, t.role}] = t;
  const auto ranks = two[0].col->ranks();
  ASSERT_EQ(ranks.size(), 2 * ref.size());  // every layer's three roles, both ranks
  std::map<Key, std::map<int, RankScale>> by_key;
  for (const RankScale& r : ranks) by_key[{r.step, r.layer, r.role}][r.rank] = r;
  for (const auto& [k, rs] : by_key) {
    ASSERT_TRUE(ref.count(k)) << std::get<1>(k);
    ASSERT_EQ(rs.size(), 2u);
    const std::string what = std::get<1>(k) + " " + std::string(role_name(std::get<2>(k))) +
                             " step " + std::to_string(std::get<0>(k));
    EXPECT_EQ(rs.at(0).scale, rs.at(1).scale) << what;
    if (std::get<0>(k) > 5) continue;
    const TensorMetrics& t = ref[k];
    EXPECT_NEAR(rs.at(0).scale, t.scale, 1e-6 * t.scale) << what;
    EXPECT_NEAR(std::max(rs.at(0).amax, rs.at(1).amax), t.amax, 1e-6 * t.amax) << what;
  }

  // The store holds what rank 0 gathered.
  const auto stored = store->rank_scales(id);
  ASSERT_EQ(stored.size(), ranks.size());
  std::map<std::tuple<int64_t, std::string, Role, int>, RankScale> by;
  for (const RankScale& r : ranks) by[{r.step, r.layer, r.role, r.rank}] = r;
  for (const RankScale& r : stored) {
    const RankScale& w = by.at({r.step, r.layer, r.role, r.rank});
    EXPECT_EQ(r.amax, w.amax);
    EXPECT_EQ(r.scale, w.scale);
  }
  size_t weight_rows = 0;
  for (const RankScale& r : ranks)
    weight_rows += r.layer == ranks.front().layer && r.role == Role::Weight;
  EXPECT_EQ(store->rank_scales(id, ranks.front().layer, "weight").size(), weight_rows);
  EXPECT_GT(weight_rows, 0u);
  store.reset();
  for (const char* ext : {"", "-wal", "-shm"}) std::filesystem::remove(path + ext);
}

TEST_P(TwoRanks, WithoutTheAmaxReductionScalesPartAndTheRunDoesNotReproduce) {
  const std::string scaling = GetParam();
  const auto one = run_ranks(tiny(scaling, 8), 1);
  RunConfig c = tiny(scaling, 8);
  c.amax_reduction = false;
  const auto two = run_ranks(c, 2);
  ASSERT_EQ(two[0].status, RunStatus::Finished) << two[0].message;
  ASSERT_EQ(two[1].status, RunStatus::Finished) << two[1].message;

  std::map<Key, std::map<int, float>> scales;
  for (const RankScale& r : two[0].col->ranks())
    scales[{r.step, r.layer, r.role}][r.rank] = r.scale;
  int differ = 0;
  for (const auto& [k, s] : scales) {
    ASSERT_EQ(s.size(), 2u);
    if (s.at(0) != s.at(1)) ++differ;
  }
  EXPECT_GT(differ, 0) << "the ranks' scales never differed";
  // Each rank's inputs and gradients are quantized with their own scales: the global
  // batch no longer computes what one process computes, from the first steps on.
  const auto s1 = one[0].col->steps(), s2 = two[0].col->steps();
  ASSERT_EQ(s1.size(), s2.size());
  double worst = 0;
  for (size_t i = 0; i < 10; ++i)
    worst = std::max(worst, std::abs(s2[i].loss - s1[i].loss) / std::abs(s1[i].loss));
  EXPECT_GT(worst, 1e-5) << "without the reduction the two ranks still matched one";
}

INSTANTIATE_TEST_SUITE_P(Scaling, TwoRanks, ::testing::Values("delayed", "current"));

TEST(Ranks, AStopOnOneRankEndsEveryRankAfterTheSameStep) {
  if (!distributed_backend_available("gloo")) GTEST_SKIP() << "built without Gloo";
  RunConfig c = tiny("delayed", 8);
  c.steps = 100000;
  const int port = free_port();
  auto bus0 = std::make_shared<MetricBus>();
  auto col = std::make_shared<Collect>();
  bus0->add(col);
  Trainer t0(c, bus0), t1(c, nullptr);
  RankInfo info;
  info.world = 2;
  info.master_port = port;
  t0.setRanks(info);
  info.rank = info.local_rank = 1;
  t1.setRanks(info);
  t0.start();
  t1.start();
  while (t0.steps_done() < 3 && t0.status() == RunStatus::Running)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  t1.stop();  // only rank 1 is asked
  t0.join();
  t1.join();
  EXPECT_EQ(t0.status(), RunStatus::Stopped) << t0.message();
  EXPECT_EQ(t1.status(), RunStatus::Stopped) << t1.message();
  EXPECT_EQ(t0.steps_done(), t1.steps_done());
}

TEST(Ranks, ABatchThatDoesNotSplitFailsTheRunNamingTheField) {
  if (!distributed_backend_available("gloo")) GTEST_SKIP() << "built without Gloo";
  RunConfig c = tiny("delayed", 7);
  const auto two = run_ranks(c, 2);
  EXPECT_EQ(two[0].status, RunStatus::Failed);
  EXPECT_NE(two[0].message.find("batch"), std::string::npos) << two[0].message;
}

TEST(RankInfo, ReadsTorchrunsAndSlurmsVariables) {
  auto env = [](std::map<std::string, std::string> m) {
    return [m](const char* n) -> const char* {
      const auto it = m.find(n);
      return it == m.end() ? nullptr : it->second.c_str();
    };
  };
  RankInfo r = rank_info_from_env(env({}));
  EXPECT_EQ(r.world, 1);
  EXPECT_FALSE(r.distributed());
  r = rank_info_from_env(env({{"RANK", "3"},
                              {"WORLD_SIZE", "4"},
                              {"LOCAL_RANK", "1"},
                              {"LOCAL_WORLD_SIZE", "2"},
                              {"MASTER_ADDR", "node7"},
                              {"MASTER_PORT", "12345"}}));
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.world, 4);
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.local_world, 2);
  EXPECT_EQ(r.master_addr, "node7");
  EXPECT_EQ(r.master_port, 12345);
  r = rank_info_from_env(env({{"SLURM_PROCID", "5"},
                              {"SLURM_NTASKS", "8"},
                              {"SLURM_LOCALID", "1"},
                              {"SLURM_STEP_ID", "0"},
                              {"SLURM_STEP_TASKS_PER_NODE", "4(x2)"},
                              {"SLURM_LAUNCH_NODE_IPADDR", "10.0.0.1"}}));
  EXPECT_EQ(r.rank, 5);
  EXPECT_EQ(r.world, 8);
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.local_world, 4);
  EXPECT_EQ(r.master_addr, "10.0.0.1");
  EXPECT_EQ(r.master_port, 29500);
  // A batch script's environment (no job step) is not a rank.
  r = rank_info_from_env(env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}}));
  EXPECT_EQ(r.world, 1);
  // Bad values name the variable.
  for (const auto& bad : std::vector<std::map<std::string, std::string>>{
           {{"RANK", "2"}, {"WORLD_SIZE", "2"}},
           {{"RANK", "x"}, {"WORLD_SIZE", "2"}},
           {{"RANK", "0"}},
           {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}}) {
    try {
      rank_info_from_env(env(bad));
      ADD_FAILURE() << "accepted";
    } catch (const std::invalid_argument& e) {
      const std::string m = e.what();
      EXPECT_TRUE(m.find("RANK") != std::string::npos ||
                  m.find("WORLD_SIZE") != std::string::npos ||
                  m.find("MASTER_PORT") != std::string::npos)
          << m;
    }
  }
}

}  // namespace
}  // namespace fp8wb
