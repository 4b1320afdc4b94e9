#include "fp8wb/views/common/background_job.h"

#include <QThread>
#include <algorithm>

namespace fp8wb {

QThreadPool* background_pool() {
  // Jobs mostly wait (on a disk, a lock, a sweep's trials): more threads than cores, and
  // never fewer than the few kinds of job the views run at once.
  static QThreadPool pool;
  static const bool sized = [] {
    pool.setMaxThreadCount(std::max(8, QThread::idealThreadCount()));
    return true;
  }();
  (void)sized;
  return &pool;
}

BackgroundJob::BackgroundJob(QObject* owner) : owner_(owner), state_(std::make_shared<State>()) {}

BackgroundJob::~BackgroundJob() {
  drop();
  wait();
}

unsigned BackgroundJob::begin() {
  const std::lock_guard<std::mutex> lock(state_->mutex);
  ++state_->running;
  state_->pending = true;
  return ++state_->generation;
}

bool BackgroundJob::take(State& s, unsigned g) {
  const std::lock_guard<std::mutex> lock(s.mutex);
  if (g != s.generation || !s.pending) return false;
  s.pending = false;
  return true;
}

void BackgroundJob::ended(State& s) {
  const std::lock_guard<std::mutex> lock(s.mutex);
  --s.running;
  s.idle.notify_all();
}

bool BackgroundJob::busy() const {
  const std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->pending;
}

void BackgroundJob::drop() {
  const std::lock_guard<std::mutex> lock(state_->mutex);
  ++state_->generation;
  state_->pending = false;
}

void BackgroundJob::wait() {
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->idle.wait(lock, [this] { return state_->running == 0; });
}

}  // namespace fp8wb
