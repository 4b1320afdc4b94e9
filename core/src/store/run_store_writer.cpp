// The run store's writer thread: every write is a job queued to one connection, which
// commits whatever is queued in one transaction; flush() waits for it.
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fp8wb/core/counted.h"
#include "fp8wb/core/name_text.h"
#include "run_store_sql.h"

namespace fp8wb {

using namespace store;  // Db, Stmt, the stored forms (run_store_sql.h)

void RunStore::Impl::enqueue(std::function<void()> job, size_t bytes) {
  if (read_only) throw StoreError("run database " + path + " is open read-only");
  {
    std::unique_lock<std::mutex> lock(mutex);
    // A full buffer (the database locked a while): the caller waits for the writer to
    // commit, as a run then waits for its database; a job larger than the whole buffer
    // goes in alone.
    room.wait(lock,
              [&] { return !error.empty() || buffered == 0 || buffered + bytes <= buffer_limit; });
    if (!error.empty()) throw StoreError(error);
    queue.push_back({std::move(job), bytes});
    ++queued;
    buffered += bytes;
  }
  wake.notify_one();
}

namespace {

std::string seconds_text(std::chrono::milliseconds ms) {
  const double s = static_cast<double>(ms.count()) / 1000.0;
  char buf[32];
  std::snprintf(buf, sizeof buf, s >= 10 || s == static_cast<int64_t>(s) ? "%.0f s" : "%.1f s", s);
  return buf;
}

}  // namespace

std::string RunStore::Impl::commit(std::deque<Job>& jobs) {
  using Clock = std::chrono::steady_clock;
  const auto started = Clock::now();
  auto backoff = std::chrono::milliseconds(20);
  std::minstd_rand jitter(static_cast<unsigned>(getpid()) ^
                          static_cast<unsigned>(started.time_since_epoch().count()));
  for (int attempt = 1;; ++attempt) {
    const auto waited =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
    try {
      // SQLite's own busy handler waits up to a second an attempt; the backoff between
      // attempts lets the other writers of the file through.
      const auto left = lock_wait - waited;
      sqlite3_busy_timeout(writer->get(),
                           static_cast<int>(std::clamp<int64_t>(left.count(), 1, 1000)));
      writer->exec("BEGIN IMMEDIATE");
      for (auto& j : jobs) j.fn();
      writer->exec("COMMIT");
      return {};
    } catch (const BusyError& e) {
      sqlite3_exec(writer->get(), "ROLLBACK", nullptr, nullptr, nullptr);
      series_ids.clear();
      const auto now =
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
      if (now >= lock_wait) {
        size_t bytes = 0;
        for (const Job& j : jobs) bytes += j.bytes;
        const std::string size = bytes < (1 << 20)
                                     ? std::to_string((bytes + 1023) >> 10) + " KiB"
                                     : std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB";
        return std::string(e.what()) + ": another connection held it for " + seconds_text(now) +
               " (" + counted(attempt, "attempt") + "), longer than the run store waits (" +
               seconds_text(lock_wait) + ", keeping up to " + std::to_string(buffer_limit >> 20) +
               " MiB of writes meanwhile); not stored: " +
               counted(static_cast<int64_t>(jobs.size()), "waiting write") + " (" + size + ")";
      }
      const auto pause =
          std::min(backoff + std::chrono::milliseconds(jitter() % 20), lock_wait - now);
      std::this_thread::sleep_for(pause);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
      // What was queued meanwhile joins the next attempt, in its order.
      const std::lock_guard<std::mutex> lock(mutex);
      for (Job& j : queue) jobs.push_back(std::move(j));
      queue.clear();
    } catch (const std::exception& e) {
      sqlite3_exec(writer->get(), "ROLLBACK", nullptr, nullptr, nullptr);
      series_ids.clear();
      return e.what();
    }
  }
}

void RunStore::Impl::loop() {
  for (;;) {
    std::deque<Job> jobs;
    bool failed_before = false;
    {
      std::unique_lock<std::mutex> lock(mutex);
      wake.wait(lock, [&] { return stopping || !queue.empty(); });
      if (queue.empty() && stopping) break;
      jobs.swap(queue);
      failed_before = !error.empty();
    }
    // After a failed write nothing more is written: a run's later steps, or its final
    // status, must not follow steps that were lost (a run stored 'finished' without them).
    if (!failed_before) {
      const std::string failure = commit(jobs);
      if (!failure.empty()) {
        {
          const std::lock_guard<std::mutex> lock(mutex);
          error = failure;
        }
        room.notify_all();  // writers waiting for room see the failure
        own_runs_marked = fail_own_runs(failure);
      }
    } else if (!own_runs_marked) {
      own_runs_marked = fail_own_runs(error);  // the lock may be gone now
    }
    size_t bytes = 0;
    for (const Job& j : jobs) bytes += j.bytes;
    {
      const std::lock_guard<std::mutex> lock(mutex);
      committed += jobs.size();
      buffered -= bytes;
    }
    drained.notify_all();
    room.notify_all();
  }
  // A failure whose runs could not be marked then (the database still locked): once more,
  // so that the stored status says what the process says.
  if (!error.empty() && !own_runs_marked) own_runs_marked = fail_own_runs(error);
}

void RunStore::Impl::stop() {
  if (!thread.joinable()) return;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  wake.notify_one();
  thread.join();
}

bool RunStore::Impl::fail_own_runs(const std::string& why) {
  try {
    sqlite3_busy_timeout(writer->get(), Db::kBusyMs);
    Stmt u(*writer,
           "UPDATE runs SET status = 'failed', ended_at = ?, message = ? "
           "WHERE status IN ('running', 'paused') AND owner_host = ? AND owner_pid = ?");
    u.bind(1, now_utc()).bind(2, "the run database could not be written: " + why);
    u.bind(3, host_name()).bind(4, static_cast<int64_t>(getpid())).run();
    return true;
  } catch (const std::exception&) {
    // Left 'running': the next open marks it interrupted.
    return false;
  }
}

int64_t RunStore::Impl::series_id(int64_t run, const std::string& name) {
  const auto key = std::make_pair(run, name);
  const auto it = series_ids.find(key);
  if (it != series_ids.end()) return it->second;
  Stmt ins(*writer, "INSERT OR IGNORE INTO series(run_id, name) VALUES(?, ?)");
  ins.bind(1, run).bind(2, name).run();
  Stmt q(*writer, "SELECT id FROM series WHERE run_id = ? AND name = ?");
  q.bind(1, run).bind(2, name);
  if (!q.step()) {
    throw StoreError("run database " + path + ": the series '" + name + "' of run " +
                     std::to_string(run) + " was not stored");
  }
  return series_ids[key] = q.i(0);
}

void RunStore::Impl::write_batch(const MetricBatch& b) {
  if (!b.steps.empty()) {
    Stmt ins(*writer, "INSERT OR REPLACE INTO scalars(series_id, step, value) VALUES(?, ?, ?)");
    for (const StepMetrics& m : b.steps) {
      for (const StepSeries& k : kStepSeries) {
        const double v = m.*k.field;
        if (std::isnan(v) && k.only_where_measured) continue;
        ins.bind(1, series_id(b.run_id, k.name)).bind(2, m.step);
        // NaN is stored as NULL (SQLite has no NaN) and read back as NaN.
        if (!std::isnan(v)) ins.bind(3, v);
        ins.run();
      }
    }
  }
  if (!b.tensors.empty()) {
    Stmt ts(*writer, tensor_stat_insert_sql().c_str());
    Stmt bl(*writer, "INSERT OR REPLACE INTO blobs VALUES(?, ?, ?, ?, ?, ?, ?)");
    for (const TensorMetrics& t : b.tensors) {
      const std::string role(role_name(t.role));  // stored as its name
      ts.bind(1, b.run_id).bind(2, t.step).bind(3, t.layer).bind(4, role);
      bind_tensor_stat_fields(ts, 5, t);
      ts.run();
      if (!t.map_rel_error.empty()) {
        bl.bind(1, b.run_id).bind(2, t.step).bind(3, t.layer).bind(4, role);
        bl.bind(5, std::string("error_map"));
        bl.bind(6, shape_text({t.map_grid.rows, t.map_grid.cols}));
        bl.bind_blob(7, t.map_rel_error.data(), t.map_rel_error.size() * sizeof(float)).run();
      }
      if (!t.amax_history.empty()) {
        bl.bind(1, b.run_id).bind(2, t.step).bind(3, t.layer).bind(4, role);
        bl.bind(5, std::string("amax_history"));
        bl.bind(6, shape_text({static_cast<int64_t>(t.amax_history.size())}));
        bl.bind_blob(7, t.amax_history.data(), t.amax_history.size() * sizeof(float)).run();
      }
    }
  }
  if (!b.ranks.empty()) {
    Stmt ins(*writer, "INSERT OR REPLACE INTO rank_scales VALUES(?, ?, ?, ?, ?, ?, ?)");
    for (const RankScale& r : b.ranks) {
      ins.bind(1, b.run_id)
          .bind(2, r.step)
          .bind(3, r.layer)
          .bind(4, std::string(role_name(r.role)));
      ins.bind(5, int64_t{r.rank});
      // NaN as NULL, read back as NaN.
      if (!std::isnan(r.amax)) ins.bind(6, double{r.amax});
      if (!std::isnan(r.scale)) ins.bind(7, double{r.scale});
      ins.run();
    }
  }
  if (!b.amax_tensors.empty()) {
    Stmt ins(*writer, "INSERT OR REPLACE INTO amax_tensors VALUES(?, ?, ?, ?, ?)");
    int64_t idx = 0;
    for (const AmaxTensor& t : b.amax_tensors) {
      ins.bind(1, b.run_id).bind(2, idx++).bind(3, t.layer);
      ins.bind(4, std::string(role_name(t.role))).bind(5, std::string(format_info(t.format).name));
      ins.run();
    }
  }
  if (!b.step_amax.empty()) {
    Stmt ins(*writer, "INSERT OR REPLACE INTO step_amax VALUES(?, ?, ?)");
    for (const StepAmax& a : b.step_amax) {
      ins.bind(1, b.run_id).bind(2, a.step);
      ins.bind_blob(3, a.amax.data(), a.amax.size() * sizeof(float)).run();
    }
  }
  if (!b.sqnr.empty()) {
    Stmt ins(*writer, "INSERT OR REPLACE INTO scalars(series_id, step, value) VALUES(?, ?, ?)");
    for (const SqnrMetrics& q : b.sqnr) {
      const std::pair<const char*, double> v[] = {
          {"fprop", q.fprop_db}, {"dgrad", q.dgrad_db}, {"wgrad", q.wgrad_db}};
      for (const auto& [gemm, db] : v) {
        ins.bind(1, series_id(b.run_id, "sqnr/" + q.layer + "/" + gemm)).bind(2, q.step);
        if (db == db) ins.bind(3, db);
        ins.run();
      }
    }
  }
  if (!b.scalars.empty()) {
    Stmt ins(*writer, "INSERT OR REPLACE INTO scalars(series_id, step, value) VALUES(?, ?, ?)");
    for (const NamedScalar& v : b.scalars) {
      ins.bind(1, series_id(b.run_id, v.name)).bind(2, v.step);
      if (!std::isnan(v.value)) ins.bind(3, v.value);
      ins.run();
    }
  }
  if (!b.events.empty()) {
    Stmt ev(*writer, "INSERT INTO events(run_id, step, kind, message) VALUES(?, ?, ?, ?)");
    for (const RunEvent& e : b.events) {
      ev.bind(1, b.run_id).bind(2, e.step).bind(3, run_event_kind_stored(e));
      ev.bind(4, e.message).run();
    }
  }
  if (b.final) write_status(b.run_id, b.status, b.message);
}

void RunStore::Impl::write_status(int64_t run, RunStatus s, const std::string& message) {
  const bool ended = s != RunStatus::Running && s != RunStatus::Paused;
  Stmt u(*writer, ended ? "UPDATE runs SET status = ?, message = ?, ended_at = ? WHERE id = ?"
                        : "UPDATE runs SET status = ?, message = ? WHERE id = ?");
  u.bind(1, std::string(run_status_name(s))).bind(2, message);
  if (ended) {
    u.bind(3, now_utc()).bind(4, run);
  } else {
    u.bind(3, run);
  }
  u.run();
}

void RunStore::exec_on_writer_for_testing(const std::string& sql) {
  Impl* im = impl_.get();
  im->enqueue([im, sql] { im->writer->exec(sql.c_str()); });
  flush();
}

int64_t RunStore::create_run(const std::string& name, RunKind kind, const std::string& config_json,
                             const std::string& device, int64_t parent_sweep,
                             const std::string& uuid) {
  // The writer fills in the id; flush() orders that write before the read below.
  auto id = std::make_shared<int64_t>(0);
  Impl* im = impl_.get();
  const std::string identity = uuid.empty() ? new_uuid() : uuid;
  if (!uuid.empty()) {
    // Checked before the write is queued: a failed write would stop this store's writes.
    const int64_t held = im->read<int64_t>([&uuid](const Db& db) {
      Stmt q(db, "SELECT id FROM runs WHERE uuid = ?");
      q.bind(1, uuid);
      return q.step() ? q.i(0) : int64_t{0};
    });
    if (held) {
      throw StoreError("run database " + im->path + " already holds a run with the identity " +
                       uuid + " (run " + std::to_string(held) + ")");
    }
  }
  im->enqueue([=] {
    {
      Stmt ins(*im->writer,
               "INSERT INTO runs(name, kind, status, config_json, device, started_at, "
               "parent_sweep, owner_host, owner_pid, uuid) "
               "VALUES(?, ?, 'running', ?, ?, ?, ?, ?, ?, ?)");
      ins.bind(1, name).bind(2, std::string(run_kind_name(kind))).bind(3, config_json);
      ins.bind(4, device).bind(5, now_utc());
      if (parent_sweep > 0) ins.bind(6, parent_sweep);
      ins.bind(7, host_name()).bind(8, static_cast<int64_t>(getpid())).bind(9, identity);
      ins.run();
      *id = sqlite3_last_insert_rowid(im->writer->get());
    }
  });
  flush();
  return *id;
}

namespace {

// What a batch holds in memory, about: what the write buffer counts.
size_t batch_bytes(const MetricBatch& b) {
  size_t n = sizeof b + b.message.size() + b.steps.size() * sizeof(StepMetrics) +
             b.ranks.size() * sizeof(RankScale);
  for (const TensorMetrics& t : b.tensors) {
    n += sizeof t + t.layer.size() + (t.map_rel_error.size() + t.amax_history.size()) * 4;
  }
  for (const SqnrMetrics& q : b.sqnr) n += sizeof q + q.layer.size();
  for (const RunEvent& e : b.events) n += sizeof e + e.unknown_kind.size() + e.message.size();
  for (const RankScale& r : b.ranks) n += r.layer.size();
  return n;
}

}  // namespace

void RunStore::write(const MetricBatch& batch) {
  Impl* im = impl_.get();
  im->enqueue([im, batch] { im->write_batch(batch); }, batch_bytes(batch));
}

void RunStore::write(MetricBatch&& batch) {
  Impl* im = impl_.get();
  const size_t bytes = batch_bytes(batch);
  im->enqueue([im, b = std::move(batch)] { im->write_batch(b); }, bytes);
}

void RunStore::set_write_buffer_for_testing(size_t bytes, std::chrono::milliseconds lock_wait) {
  const std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->buffer_limit = bytes;
  impl_->lock_wait = lock_wait;
}

void RunStore::set_status(int64_t run_id, RunStatus status, const std::string& message) {
  Impl* im = impl_.get();
  im->enqueue([=] { im->write_status(run_id, status, message); });
}

bool RunStore::note_how_run_ended(const std::string& uuid, int64_t writer_pid,
                                  const std::string& note) {
  auto noted = std::make_shared<bool>(false);
  Impl* im = impl_.get();
  im->enqueue([=] {
    // The condition and the new message in the one statement: a run that another process
    // took over meanwhile (an import replacing it) is left as it is. A run left
    // 'interrupted' (rank 0 killed, its writer gone without a word) failed: its ranks did
    // not stop, one of them died.
    Stmt u(*im->writer,
           "UPDATE runs SET message = CASE WHEN IFNULL(message, '') = '' THEN ?1 "
           "ELSE ?1 || '; ' || message END, status = 'failed' "
           "WHERE uuid = ?2 AND owner_host = ?3 AND owner_pid = ?4 "
           "AND status IN ('failed', 'interrupted')");
    u.bind(1, note).bind(2, uuid).bind(3, host_name()).bind(4, writer_pid).run();
    *noted = sqlite3_changes(im->writer->get()) > 0;
  });
  flush();
  return *noted;
}

void RunStore::rename_run(int64_t run_id, const std::string& name) {
  if (name.empty()) throw std::invalid_argument("a run's name must not be empty");
  if (const std::string why = name_problem(name); !why.empty())
    throw std::invalid_argument("a run's name must be text that can be shown: it " + why);
  if (name.size() > 200) {
    throw std::invalid_argument("a run's name has at most 200 characters, not " +
                                std::to_string(name.size()));
  }
  Impl* im = impl_.get();
  im->enqueue([=] {
    Stmt u(*im->writer, "UPDATE runs SET name = ? WHERE id = ?");
    u.bind(1, name).bind(2, run_id).run();
  });
  flush();
}

int64_t RunStore::create_sweep(const std::string& name, const std::string& grid_json) {
  auto id = std::make_shared<int64_t>(0);
  Impl* im = impl_.get();
  const std::string identity = new_uuid();
  im->enqueue([=] {
    Stmt ins(*im->writer,
             "INSERT INTO sweeps(name, grid_json, status, created_at, uuid) "
             "VALUES(?, ?, ?, ?, ?)");
    const std::string running(sweep_status_name(SweepStatus::Running));
    ins.bind(1, name).bind(2, grid_json).bind(3, running).bind(4, now_utc()).bind(5, identity);
    ins.run();
    *id = sqlite3_last_insert_rowid(im->writer->get());
  });
  flush();
  return *id;
}

void RunStore::set_sweep_status(int64_t sweep_id, SweepStatus status) {
  Impl* im = impl_.get();
  im->enqueue([=] {
    Stmt u(*im->writer, "UPDATE sweeps SET status = ? WHERE id = ?");
    u.bind(1, std::string(sweep_status_name(status))).bind(2, sweep_id).run();
  });
  flush();
}

void RunStore::delete_run(int64_t run_id) {
  // A run that a living process is writing would fail there at its next write (its rows
  // reference the run): it is stopped first, where it was started.
  if (const auto r = run(run_id); r && r->live) {
    throw StoreError("run " + std::to_string(run_id) + " (" + r->name +
                     ") is being written now (live): stop it first where it was started "
                     "(Stop in the GUI, Ctrl-C in its terminal), then delete it");
  }
  Impl* im = impl_.get();
  im->enqueue([=] {
    Stmt d(*im->writer, "DELETE FROM runs WHERE id = ?");
    d.bind(1, run_id).run();
    for (auto it = im->series_ids.begin(); it != im->series_ids.end();) {
      it = it->first.first == run_id ? im->series_ids.erase(it) : std::next(it);
    }
  });
  flush();
}

void RunStore::flush() {
  if (impl_->read_only) return;
  std::unique_lock<std::mutex> lock(impl_->mutex);
  const uint64_t target = impl_->queued;
  impl_->drained.wait(lock, [&] { return impl_->committed >= target; });
  if (!impl_->error.empty()) throw StoreError(impl_->error);
}

namespace {
// The store's consumer: a batch handed over (the bus's last consumer) is moved into the
// writer's queue, else copied.
class StoreConsumer : public MetricConsumer {
 public:
  explicit StoreConsumer(RunStore& s) : store_(s) {}
  void consume(const MetricBatch& b) override { store_.write(b); }
  void take(MetricBatch&& b) override { store_.write(std::move(b)); }

 private:
  RunStore& store_;
};
}  // namespace

std::shared_ptr<MetricConsumer> RunStore::consumer() {
  return std::make_shared<StoreConsumer>(*this);
}

}  // namespace fp8wb
