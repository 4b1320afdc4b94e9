#include "fp8wb/core/store/run_follower.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace fp8wb {

struct RunFollower::Impl {
  std::unique_ptr<RunStore> store;
  int64_t run_id = 0;
  RunCursor cursor;
  std::shared_ptr<MetricBus> bus;
  std::chrono::milliseconds interval{250};
  std::thread thread;
  std::mutex mutex;
  std::condition_variable cv;
  bool stopping = false;
  std::atomic<bool> ended{false};

  void publish_final(RunStatus status, const std::string& message) {
    MetricBatch f;
    f.run_id = run_id;
    f.final = true;
    f.status = status;
    f.message = message;
    bus->publish(std::move(f));
    ended = true;
  }

  // One look: what is new, then whether the run has ended. The status is read first, so
  // that everything committed before it changed is in the batch read after it.
  bool poll() {
    const std::optional<RunInfo> info = store->run(run_id);
    if (!info) {
      publish_final(RunStatus::Failed, "the run was deleted from the database");
      return false;
    }
    MetricBatch b = store->read_new(run_id, cursor);
    if (!b.steps.empty() || !b.tensors.empty() || !b.sqnr.empty() || !b.events.empty() ||
        !b.ranks.empty())
      bus->publish(std::move(b));
    const RunStatus status = info->status;
    if (status == RunStatus::Running || status == RunStatus::Paused) return true;
    publish_final(status, info->message);
    return false;
  }

  void loop() {
    for (;;) {
      bool go_on = false;
      try {
        go_on = poll();
      } catch (const std::exception& e) {
        // A database that went away or broke: say so, once, and stop following.
        publish_final(RunStatus::Failed, std::string("following the run failed: ") + e.what());
      }
      if (!go_on) return;
      std::unique_lock<std::mutex> lock(mutex);
      if (cv.wait_for(lock, interval, [&] { return stopping; })) return;
    }
  }
};

RunFollower::RunFollower(const std::string& path, int64_t run_id, RunCursor cursor,
                         std::shared_ptr<MetricBus> bus, std::chrono::milliseconds interval)
    : impl_(std::make_unique<Impl>()) {
  impl_->store = RunStore::open_read_only(path);
  impl_->run_id = run_id;
  impl_->cursor = cursor;
  impl_->bus = std::move(bus);
  impl_->interval = interval;
  Impl* raw = impl_.get();
  impl_->thread = std::thread([raw] { raw->loop(); });
}

RunFollower::~RunFollower() {
  stop();
}

int64_t RunFollower::run_id() const {
  return impl_->run_id;
}

bool RunFollower::ended() const {
  return impl_->ended;
}

void RunFollower::stop() {
  {
    const std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace fp8wb
