// start_run(), the one way a run starts (CLI train, the GUI's Start, a sweep's trial): a
// config that cannot run stores nothing; a run's row holds the config as resolved; names
// are kept apart where asked; the store and the caller's consumers both get the steps.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>

#include "fp8wb/core/train/run_start.h"

namespace fp8wb {
namespace {

std::string temp_db(const std::string& name) {
  const auto p = std::filesystem::temp_directory_path() /
                 ("fp8wb-start-" + name + "-" + std::to_string(getpid()) + ".sqlite");
  for (const char* ext : {"", "-wal", "-shm"}) std::filesystem::remove(p.string() + ext);
  return p.string();
}

RunConfig tiny(const std::string& name) {
  RunConfig c;
  c.model = ModelKind::Mlp;
  c.steps = 3;
  c.reference = false;
  c.name = name;
  return c;
}

class Steps : public MetricConsumer {
 public:
  void consume(const MetricBatch& b) override {
    const std::lock_guard<std::mutex> lock(mutex);
    for (const StepMetrics& s : b.steps) seen.push_back(s.step);
  }
  void take(MetricBatch&& b) override {
    taken = true;
    consume(b);
  }
  std::mutex mutex;
  std::vector<int64_t> seen;
  bool taken = false;  // handed a batch to keep: the bus's last consumer
};

TEST(RunStart, AConfigThatCannotRunStoresNothing) {
  auto store = RunStore::open(temp_db("bad"));
  RunConfig c = tiny("bad");
  c.lr = -1;
  EXPECT_THROW(start_run(*store, c), std::invalid_argument);
  c = tiny("bad device");
  c.device = "tpu";
  EXPECT_THROW(start_run(*store, c), std::invalid_argument);
  store->flush();
  EXPECT_TRUE(store->runs().empty());
}

TEST(RunStart, TheRunTrainsIntoTheStoreAndTheCallersConsumers) {
  const std::string path = temp_db("trains");
  auto store = RunStore::open(path);
  auto steps = std::make_shared<Steps>();
  RunStartOptions how;
  how.consumers = {steps};
  StartedRun r = start_run(*store, tiny("mlp"), how);
  ASSERT_GT(r.id, 0);
  EXPECT_EQ(r.device, "cpu");
  r.trainer->run();
  ASSERT_EQ(r.trainer->status(), RunStatus::Finished) << r.trainer->message();
  store->flush();
  EXPECT_EQ(steps->seen, (std::vector<int64_t>{0, 1, 2}));
  // The store takes each batch (no copy of a sampled step's error maps); the caller's
  // consumers read it before.
  EXPECT_FALSE(steps->taken);
  const auto runs = store->runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].id, r.id);
  EXPECT_EQ(runs[0].name, "mlp");
  EXPECT_EQ(runs[0].kind, fp8wb::RunKind::Train);
  EXPECT_EQ(runs[0].status, RunStatus::Finished);
  EXPECT_EQ(runs[0].last_step, 2);
  EXPECT_EQ(parse_run_config(runs[0].config_json).name, "mlp");
}

TEST(RunStart, NamesKeptApartWhereAsked) {
  auto store = RunStore::open(temp_db("names"));
  RunStartOptions apart;
  apart.distinct_name = true;
  EXPECT_EQ(start_run(*store, tiny("same"), apart).config.name, "same");
  EXPECT_EQ(start_run(*store, tiny("same"), apart).config.name, "same #2");
  EXPECT_EQ(start_run(*store, tiny("same"), apart).config.name, "same #3");
  EXPECT_EQ(start_run(*store, tiny("same")).config.name, "same");  // the CLI keeps it
  EXPECT_EQ(distinct_run_name(*store, "other"), "other");
  const std::string long_name(200, 'x');
  start_run(*store, tiny(long_name));
  EXPECT_EQ(distinct_run_name(*store, long_name), std::string(197, 'x') + " #2");
}

}  // namespace
}  // namespace fp8wb
