// defines: BackgroundJob, background_pool(): the one way the views leave the GUI thread.
// Work that can wait on a disk, a lock or the CPU (a read of the run store, a checkpoint's
// analysis, a sweep) runs on a pool thread; its result, or its error message, is handed
// to the job's owner on the owner's thread. A newer job supersedes an older one, whose
// result is dropped; nothing is delivered once the owner is gone.
#pragma once

#include <QMetaObject>
#include <QObject>
#include <QString>
#include <QThreadPool>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>

namespace fp8wb {

// The pool jobs run on: a pool of their own, so that a long job (a sweep, an analysis)
// never keeps a short one (the list of runs) waiting for a thread.
QThreadPool* background_pool();

class BackgroundJob {
 public:
  // owner: where results go (its thread). The job is a member of the owner, so that the
  // owner outlives every delivery.
  explicit BackgroundJob(QObject* owner);
  // Drops what is still to come and waits until running work has returned (so work may
  // use what the owner holds until then).
  ~BackgroundJob();
  BackgroundJob(const BackgroundJob&) = delete;
  BackgroundJob& operator=(const BackgroundJob&) = delete;

  // Runs work() on the pool; then, on the owner's thread, done(result), or failed(message)
  // where work threw. Supersedes the job before it: that one's result is dropped.
  template <class Work, class Done, class Failed>
  void run(Work work, Done done, Failed failed);

  // A job's result is still to come.
  bool busy() const;
  // Drops the current job's result (its work runs on to its end).
  void drop();
  // Blocks until no work of this job runs (for destructors: after telling it to stop).
  void wait();

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable idle;
    int running = 0;          // work functions on the pool now
    unsigned generation = 0;  // bumped by every run() and drop()
    bool pending = false;     // the current generation's result is still to come
  };
  // Starts a generation; returns it.
  unsigned begin();
  // Called on the owner's thread: whether generation `g` still delivers (and, if so, that
  // nothing more is pending).
  static bool take(State& s, unsigned g);
  static void ended(State& s);
  QObject* owner_;
  std::shared_ptr<State> state_;
};

template <class Work, class Done, class Failed>
void BackgroundJob::run(Work work, Done done, Failed failed) {
  using T = std::invoke_result_t<Work&>;
  const unsigned g = begin();
  std::shared_ptr<State> state = state_;
  QObject* owner = owner_;
  auto w = std::make_shared<Work>(std::move(work));
  auto d = std::make_shared<Done>(std::move(done));
  auto f = std::make_shared<Failed>(std::move(failed));
  background_pool()->start([state, g, owner, w, d, f] {
    auto result = std::make_shared<std::optional<T>>();
    QString error;
    try {
      result->emplace((*w)());
    } catch (const std::exception& e) {
      error = QString::fromStdString(e.what());
      if (error.isEmpty()) error = QStringLiteral("failed");
    } catch (...) {
      error = QStringLiteral("failed (an unknown error)");
    }
    // The owner is alive: its job's destructor waits for ended() below.
    QMetaObject::invokeMethod(
        owner,
        [state, g, result, error, d, f] {
          if (!take(*state, g)) return;  // superseded or dropped
          if (result->has_value()) {
            (*d)(std::move(**result));
          } else {
            (*f)(error);
          }
        },
        Qt::QueuedConnection);
    ended(*state);
  });
}

}  // namespace fp8wb
