// defines: FifoGuard: makes a FIFO for tests of readers that must refuse it. Should a
// reader block in open() on it (waiting for a writer that never comes), the guard opens
// the other end after a grace period so that the test ends and reports the hang instead
// of waiting forever.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace fp8wb::test {

class FifoGuard {
 public:
  explicit FifoGuard(std::string path) : path_(std::move(path)) {
    ::unlink(path_.c_str());
    ok_ = ::mkfifo(path_.c_str(), 0600) == 0;
    watcher_ = std::thread([this] {
      const auto grace = std::chrono::steady_clock::now() + std::chrono::seconds(3);
      while (!done_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (std::chrono::steady_clock::now() < grace) continue;
        // Succeeds only while a reader waits in open(): that reader was blocked.
        const int fd = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK);
        if (fd >= 0) {
          blocked_ = true;
          ::close(fd);
        }
      }
    });
  }
  ~FifoGuard() {
    done_ = true;
    watcher_.join();
    ::unlink(path_.c_str());
  }
  FifoGuard(const FifoGuard&) = delete;
  FifoGuard& operator=(const FifoGuard&) = delete;
  bool made() const { return ok_; }
  // Whether a reader had to be released from a blocking open().
  bool reader_blocked() const { return blocked_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool ok_ = false;
  std::atomic<bool> done_{false}, blocked_{false};
  std::thread watcher_;
};

}  // namespace fp8wb::test
