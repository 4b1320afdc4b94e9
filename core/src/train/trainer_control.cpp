// Trainer's controls (trainer.h), which include no torch: construction, start, pause,
// resume and stop between steps, the status other threads read, the final batch every
// run ends with; and the loop's host-side helpers (the weights' path, the resident memory
// a run adds, the allocator's thresholds). The loop itself is the torch translation unit
// trainer.cpp.
#include <sys/stat.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>

#include "trainer_impl.h"

namespace fp8wb {

void Trainer::Impl::finish(RunStatus s, const std::string& msg, std::vector<RunEvent> events) {
  {
    const std::lock_guard<std::mutex> lock(mutex);
    message = msg;
  }
  status = s;
  MetricBatch b;
  b.run_id = run_id;
  b.final = true;
  b.status = s;
  b.message = msg;
  b.events = std::move(events);
  b.events.push_back({steps.load(), run_event_kind_of(s), msg, {}});
  // Every consumer gets the final batch; one that cannot take it (the run store, failed
  // already) has said so, and the run's status says it: nothing leaves the thread.
  try {
    if (bus && ranks.rank == 0) bus->publish(std::move(b));
  } catch (const std::exception&) {
  }
}

void Trainer::Impl::publish(MetricBatch& b) {
  b.run_id = run_id;
  if (bus && ranks.rank == 0) bus->publish(std::move(b));
}

bool Trainer::Impl::wait_if_paused(int64_t step) {
  if (!pause_flag) return !stop_flag;
  status = RunStatus::Paused;
  MetricBatch p;
  p.events.push_back({step, RunEventKind::Paused, "", {}});
  publish(p);
  std::unique_lock<std::mutex> lock(mutex);
  cv.wait(lock, [&] { return !pause_flag || stop_flag; });
  lock.unlock();
  if (stop_flag) return false;
  status = RunStatus::Running;
  MetricBatch r;
  r.events.push_back({step, RunEventKind::Resumed, "", {}});
  publish(r);
  return true;
}

Trainer::Trainer(RunConfig config, std::shared_ptr<MetricBus> bus, int64_t run_id)
    : impl_(std::make_unique<Impl>()) {
  validate_run_config(config);
  impl_->cfg = std::move(config);
  impl_->bus = std::move(bus);
  impl_->run_id = run_id;
}

Trainer::~Trainer() {
  stop();
  join();
}

void Trainer::start() {
  if (impl_->thread.joinable()) throw std::logic_error("the run has already started");
  impl_->thread = std::thread([this] { run(); });
}

void Trainer::pause() {
  impl_->pause_flag = true;
}

void Trainer::resume() {
  {
    const std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->pause_flag = false;
  }
  impl_->cv.notify_all();
}

void Trainer::stop() {
  {
    const std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stop_flag = true;
  }
  impl_->cv.notify_all();
}

void Trainer::setComputeThreads(int threads) {
  impl_->compute_threads = threads;
}

void Trainer::setRanks(const RankInfo& ranks) {
  impl_->ranks = ranks;
}

void Trainer::join() {
  if (impl_->thread.joinable()) impl_->thread.join();
}

RunStatus Trainer::status() const {
  return impl_->status;
}

std::string Trainer::message() const {
  const std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->message;
}

int64_t Trainer::steps_done() const {
  return impl_->steps;
}

const RunConfig& Trainer::config() const {
  return impl_->cfg;
}

namespace train {

namespace {

// VmRSS and VmHWM of /proc/self/status, in bytes (NaN where absent).
std::pair<double, double> resident_and_peak() {
  std::ifstream in("/proc/self/status");
  double rss = NAN, hwm = NAN;
  std::string line;
  while (std::getline(in, line)) {
    const auto kib = [&](const char* key, double& out) {
      if (line.rfind(key, 0) == 0)
        out = std::strtod(line.c_str() + std::strlen(key), nullptr) * 1024;
    };
    kib("VmRSS:", rss);
    kib("VmHWM:", hwm);
  }
  return {rss, hwm};
}

}  // namespace

// A sanitizer's allocator is not glibc's (GCC says so by __SANITIZE_*__, clang by
// __has_feature).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FP8WB_SANITIZED_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FP8WB_SANITIZED_ALLOCATOR 1
#endif
#endif

bool keep_freed_host_memory() {
#if defined(__GLIBC__) && !defined(FP8WB_SANITIZED_ALLOCATOR)
  static const bool kept = [] {
    for (const char* own : {"MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_"})
      if (std::getenv(own)) return false;
    return mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, 128 << 20) == 1;
  }();
  return kept;
#else
  return false;
#endif
}

RunResidentMemory::RunResidentMemory() {
  // "5" resets the peak resident set to the current one (Linux 4.0 and later).
  if (std::ofstream clear{"/proc/self/clear_refs"}) clear << "5" << std::flush;
  const auto [rss, hwm] = resident_and_peak();
  start_ = rss;
  // Reset, the peak is the resident set (a few pages grown since, at most); where it is
  // not, the peak is the process's history and only the samples count.
  peak_reset_ = std::isfinite(hwm) && hwm <= rss + 4.0 * (1 << 20);
}

double RunResidentMemory::growth() {
  if (!std::isfinite(start_)) return NAN;
  const auto [rss, hwm] = resident_and_peak();
  if (std::isfinite(rss)) max_ = std::max(max_, rss - start_);
  if (peak_reset_ && std::isfinite(hwm)) max_ = std::max(max_, hwm - start_);
  return max_;
}

// Where --save-weights will write: its folder must exist and the path be a regular file
// or nothing (the writer refuses to replace anything else).
void check_weights_path(const std::string& path) {
  if (path.empty()) return;
  const size_t slash = path.find_last_of('/');
  const std::string folder =
      slash == std::string::npos ? "." : path.substr(0, std::max<size_t>(slash, 1));
  struct stat st {};
  if (stat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw std::invalid_argument("weights: the folder of " + path + " does not exist");
  }
  if (access(folder.c_str(), W_OK) != 0) {
    throw std::invalid_argument("weights: cannot write into the folder of " + path + ": " +
                                std::strerror(errno));
  }
  if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    throw std::invalid_argument("weights: " + path + " exists and is not a regular file");
  }
}

}  // namespace train

}  // namespace fp8wb
