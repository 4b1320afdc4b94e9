#include "fp8wb/core/run_store.h"

#include "run_store_sql.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

namespace fp8wb {

using namespace store;  // Db, Stmt, the stored forms (run_store_sql.h)

namespace {

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

// Each step of the list takes the schema from version i to i + 1.
const char* const kMigrations[] = {
    R"(CREATE TABLE runs(
         id INTEGER PRIMARY KEY, name TEXT NOT NULL, kind TEXT NOT NULL,
         status TEXT NOT NULL, config_json TEXT NOT NULL, device TEXT NOT NULL DEFAULT '',
         started_at TEXT NOT NULL, ended_at TEXT, message TEXT NOT NULL DEFAULT '',
         parent_sweep INTEGER, owner_host TEXT, owner_pid INTEGER);
       CREATE TABLE series(
         id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
         name TEXT NOT NULL, UNIQUE(run_id, name));
       CREATE TABLE scalars(
         series_id INTEGER NOT NULL REFERENCES series(id) ON DELETE CASCADE,
         step INTEGER NOT NULL, value REAL, PRIMARY KEY(series_id, step)) WITHOUT ROWID;
       CREATE TABLE tensor_stats(
         run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, step INTEGER NOT NULL,
         layer TEXT NOT NULL, role TEXT NOT NULL, amax REAL, scale REAL, numel INTEGER,
         zeros INTEGER, underflow INTEGER, saturated INTEGER, nonfinite INTEGER,
                  subnormal INTEGER, sq_err REAL, sq_sum REAL, histogram BLOB,
         PRIMARY KEY(run_id, layer, role, step)) WITHOUT ROWID;
       CREATE TABLE blobs(
         run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, step INTEGER NOT NULL,
         layer TEXT NOT NULL, role TEXT NOT NULL, kind TEXT NOT NULL, shape TEXT NOT NULL,
         data BLOB, PRIMARY KEY(run_id, kind, layer, role, step)) WITHOUT ROWID;
       CREATE TABLE events(
         id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
         step INTEGER NOT NULL, kind TEXT NOT NULL, message TEXT NOT NULL DEFAULT '');
       CREATE INDEX events_run ON events(run_id);
       CREATE TABLE sweeps(
         id INTEGER PRIMARY KEY, name TEXT NOT NULL, grid_json TEXT NOT NULL,
         status TEXT NOT NULL, created_at TEXT NOT NULL);)"};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == RunStore::kSchemaVersion);

int user_version(const Db& db) {
  Stmt s(db, "PRAGMA user_version");
  return s.step() ? static_cast<int>(s.i(0)) : 0;
}

const char kInterruptedMessage[] = "the process writing this run ended without finishing it";

}  // namespace

// Whether the process that writes a run is still there: on this host, when its pid
// exists; a run from another host (a database on a shared or copied file) is taken as
// alive where `other_hosts_alive`, since nothing here can tell.
static bool writer_alive(const std::string& host, int64_t pid, bool other_hosts_alive) {
  if (host != host_name()) return other_hosts_alive && !host.empty();
  return pid > 0 && (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

struct RunStore::Impl {
  std::string path;
  bool read_only = false;
  std::unique_ptr<Db> reader;  // guarded by read_mutex
  mutable std::mutex read_mutex;

  // Writer thread state.
  std::unique_ptr<Db> writer;
  std::thread thread;
  std::mutex mutex;
  std::condition_variable wake, drained;
  std::deque<std::function<void()>> queue;
  uint64_t queued = 0, committed = 0;
  bool stopping = false;
  std::string error;                                              // the first failed write
  std::map<std::pair<int64_t, std::string>, int64_t> series_ids;  // writer thread only

  void enqueue(std::function<void()> job) {
    if (read_only) throw StoreError("run database " + path + " is open read-only");
    {
      const std::lock_guard<std::mutex> lock(mutex);
      if (!error.empty()) throw StoreError(error);
      queue.push_back(std::move(job));
      ++queued;
    }
    wake.notify_one();
  }

  void loop() {
    for (;;) {
      std::deque<std::function<void()>> jobs;
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [&] { return stopping || !queue.empty(); });
        if (queue.empty() && stopping) return;
        jobs.swap(queue);
      }
      // One transaction for everything queued since the last one.
      std::string failure;
      try {
        writer->exec("BEGIN IMMEDIATE");
        for (auto& j : jobs) j();
        writer->exec("COMMIT");
      } catch (const std::exception& e) {
        failure = e.what();
        sqlite3_exec(writer->get(), "ROLLBACK", nullptr, nullptr, nullptr);
        series_ids.clear();
        fail_own_runs(failure);
      }
      {
        const std::lock_guard<std::mutex> lock(mutex);
        committed += jobs.size();
        if (!failure.empty() && error.empty()) error = failure;
      }
      drained.notify_all();
    }
  }

  // After a failed write (a full disk, a damaged or read-only file): what was committed
  // stays; this process's runs end as failed with the reason, where the file still takes
  // that small update (a row updated in place needs no new page).
  void fail_own_runs(const std::string& why) {
    try {
      Stmt u(*writer,
             "UPDATE runs SET status = 'failed', ended_at = ?, message = ? "
             "WHERE status IN ('running', 'paused') AND owner_host = ? AND owner_pid = ?");
      u.bind(1, now_utc()).bind(2, "the run database could not be written: " + why);
      u.bind(3, host_name()).bind(4, static_cast<int64_t>(getpid())).run();
    } catch (const std::exception&) {
      // Left 'running': the next open marks it interrupted.
    }
  }

  int64_t series_id(int64_t run, const std::string& name) {
    const auto key = std::make_pair(run, name);
    const auto it = series_ids.find(key);
    if (it != series_ids.end()) return it->second;
    Stmt ins(*writer, "INSERT OR IGNORE INTO series(run_id, name) VALUES(?, ?)");
    ins.bind(1, run).bind(2, name).run();
    Stmt q(*writer, "SELECT id FROM series WHERE run_id = ? AND name = ?");
    q.bind(1, run).bind(2, name);
    if (!q.step()) writer->fail("series id");
    return series_ids[key] = q.i(0);
  }

  void write_batch(const MetricBatch& b) {
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
      Stmt ts(*writer,
              "INSERT OR REPLACE INTO tensor_stats VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
              "?, ?)");
      Stmt bl(*writer, "INSERT OR REPLACE INTO blobs VALUES(?, ?, ?, ?, ?, ?, ?)");
      for (const TensorMetrics& t : b.tensors) {
        const StatsBuffer& r = t.raw;
        const std::string role(role_name(t.role));  // stored as its name
        ts.bind(1, b.run_id).bind(2, t.step).bind(3, t.layer).bind(4, role);
        ts.bind(5, static_cast<double>(t.amax)).bind(6, static_cast<double>(t.scale));
        ts.bind(7, static_cast<int64_t>(r.numel)).bind(8, static_cast<int64_t>(r.zeros));
        ts.bind(9, static_cast<int64_t>(r.underflow)).bind(10, static_cast<int64_t>(r.saturated));
        ts.bind(11, static_cast<int64_t>(r.nonfinite)).bind(12, static_cast<int64_t>(r.subnormal));
        const std::vector<uint8_t> hist = pack_histogram(r.hist);
        ts.bind(13, r.sq_err).bind(14, r.sq_sum).bind_blob(15, hist.data(), hist.size()).run();
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
    if (!b.events.empty()) {
      Stmt ev(*writer, "INSERT INTO events(run_id, step, kind, message) VALUES(?, ?, ?, ?)");
      for (const RunEvent& e : b.events) {
        ev.bind(1, b.run_id).bind(2, e.step).bind(3, e.kind).bind(4, e.message).run();
      }
    }
    if (b.final) write_status(b.run_id, b.status, b.message);
  }

  void write_status(int64_t run, RunStatus s, const std::string& message) {
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

  template <class T>
  T read(const std::function<T(const Db&)>& fn) const {
    const std::lock_guard<std::mutex> lock(read_mutex);
    return fn(*reader);
  }
};

namespace {

void check_not_newer(int v, const std::string& path) {
  if (v > RunStore::kSchemaVersion) {
    throw StoreError("run database " + path + " has schema version " + std::to_string(v) +
                     ", newer than this fp8wb reads (" + std::to_string(RunStore::kSchemaVersion) +
                     "): update fp8wb");
  }
}

// Every step to the current version in one immediate transaction, the version read inside
// it: processes creating the same new file at once migrate it exactly once.
void migrate(const Db& db, const std::string& path) {
  check_not_newer(user_version(db), path);
  if (user_version(db) == RunStore::kSchemaVersion) return;
  db.exec("BEGIN IMMEDIATE");
  try {
    const int v = user_version(db);
    check_not_newer(v, path);
    for (int i = v; i < RunStore::kSchemaVersion; ++i) db.exec(kMigrations[i]);
    if (v < RunStore::kSchemaVersion) {
      db.exec(("PRAGMA user_version = " + std::to_string(RunStore::kSchemaVersion)).c_str());
    }
    db.exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

// The switch to WAL needs the file to itself for a moment: SQLite does not always call the
// busy handler there (a lock upgrade that could deadlock fails at once), so it is retried
// for as long as the busy timeout.
void switch_to_wal(const Db& db, const std::string& path) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(Db::kBusyMs);
  for (;;) {
    sqlite3_stmt* s = nullptr;
    int rc = sqlite3_prepare_v2(db.get(), "PRAGMA journal_mode = WAL", -1, &s, nullptr);
    std::string mode;
    if (rc == SQLITE_OK) {
      rc = sqlite3_step(s);
      if (rc == SQLITE_ROW) {
        const auto* t = sqlite3_column_text(s, 0);
        mode = t ? reinterpret_cast<const char*>(t) : "";
      }
    }
    sqlite3_finalize(s);
    if (rc == SQLITE_ROW) {
      if (mode != "wal") {
        throw StoreError("run database " + path + ": cannot switch to WAL (journal mode " + mode +
                         ")");
      }
      return;
    }
    const int base = rc & 0xFF;
    if ((base == SQLITE_BUSY || base == SQLITE_LOCKED) &&
        std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    db.fail("switching to WAL");
  }
}

// Runs whose writing process is gone: on this host when its pid no longer exists, and
// always when the file was written on another host (a copied database).
void mark_interrupted(const Db& db) {
  auto gone_runs = [&] {
    Stmt q(db, "SELECT id, owner_host, owner_pid FROM runs WHERE status IN ('running', 'paused')");
    std::vector<int64_t> gone;
    while (q.step()) {
      if (!writer_alive(q.s(1), q.i(2), false)) gone.push_back(q.i(0));
    }
    return gone;
  };
  if (gone_runs().empty()) return;
  // Read again inside a write transaction: another process may be marking them too.
  db.exec("BEGIN IMMEDIATE");
  try {
    Stmt u(db,
           "UPDATE runs SET status = 'interrupted', ended_at = ?, "
           "message = ? WHERE id = ?");
    for (int64_t id : gone_runs())
      u.bind(1, now_utc()).bind(2, std::string(kInterruptedMessage)).bind(3, id).run();
    db.exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

bool writable(const std::string& path) {
  return access(path.c_str(), W_OK) == 0;
}

std::string folder_of(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

// A reading connection that changes nothing on disk. A WAL database needs its -shm file,
// which SQLite creates (owned by the reader) where it may and fails where it may not (a
// read-only folder or mount, another user's folder): with no -wal there is nothing but
// the file to read, so it is read as it stands (immutable); with one (a live writer) the
// reader shares its -shm, or, where that cannot be opened, reads the file as it stands.
std::unique_ptr<Db> open_reader(const std::string& path) {
  std::error_code ec;
  const bool wal_files =
      std::filesystem::exists(path + "-wal", ec) || std::filesystem::exists(path + "-shm", ec);
  // No -wal: no writer has the file open, and everything is in the file itself.
  if (!wal_files) return std::make_unique<Db>(path, Db::Mode::Immutable);
  try {
    auto db = std::make_unique<Db>(path, Db::Mode::ReadOnly);
    Stmt probe(*db, "SELECT count(*) FROM sqlite_master");
    probe.step();
    return db;
  } catch (const StoreError&) {
    if (writable(folder_of(path))) throw;
    return std::make_unique<Db>(path, Db::Mode::Immutable);
  }
}

}  // namespace

RunStore::RunStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<RunStore> RunStore::open(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) throw StoreError("cannot create the folder for " + path + ": " + ec.message());
  }
  impl->writer = std::make_unique<Db>(path, false);
  const Db& w = *impl->writer;
  switch_to_wal(w, path);
  w.exec("PRAGMA synchronous = NORMAL");
  migrate(w, path);
  mark_interrupted(w);
  // A cap on the file's size for this process (pages of 4 KiB): the tests' full disk.
  if (const char* cap = std::getenv("FP8WB_STORE_MAX_PAGES"); cap && *cap) {
    w.exec(("PRAGMA max_page_count = " + std::to_string(std::strtoll(cap, nullptr, 10))).c_str());
  }
  impl->reader = std::make_unique<Db>(path, true);
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->loop(); });
  return std::unique_ptr<RunStore>(new RunStore(std::move(impl)));
}

std::unique_ptr<RunStore> RunStore::open_read_only(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw StoreError("no run database at " + path);
  }
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->read_only = true;
  impl->reader = open_reader(path);
  const int v = user_version(*impl->reader);
  if (v > kSchemaVersion) {
    throw StoreError("run database " + path + " has schema version " + std::to_string(v) +
                     ", newer than this fp8wb reads");
  }
  if (v < kSchemaVersion) {
    throw StoreError("run database " + path + " has schema version " + std::to_string(v) +
                     ": open it for writing once to migrate it");
  }
  return std::unique_ptr<RunStore>(new RunStore(std::move(impl)));
}

std::unique_ptr<RunStore> RunStore::open_or_read_only(const std::string& path,
                                                      std::string* why_read_only) {
  if (why_read_only) why_read_only->clear();
  try {
    return open(path);
  } catch (const StoreError& e) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) throw;
    auto store = open_read_only(path);  // throws its own reason if it cannot read either
    if (why_read_only) *why_read_only = e.what();
    return store;
  }
}

bool RunStore::read_only() const {
  return impl_->read_only;
}

void RunStore::exec_on_writer_for_testing(const std::string& sql) {
  Impl* im = impl_.get();
  im->enqueue([im, sql] { im->writer->exec(sql.c_str()); });
  flush();
}

RunStore::~RunStore() {
  if (impl_->thread.joinable()) {
    {
      const std::lock_guard<std::mutex> lock(impl_->mutex);
      impl_->stopping = true;
    }
    impl_->wake.notify_one();
    impl_->thread.join();
  }
  // The read-only connection closes first, so that the writer's close is the last one
  // and checkpoints the WAL into the database file (which then stands alone).
  impl_->reader.reset();
  impl_->writer.reset();
}

const std::string& RunStore::path() const {
  return impl_->path;
}

int64_t RunStore::create_run(const std::string& name, const std::string& kind,
                             const std::string& config_json, const std::string& device,
                             int64_t parent_sweep) {
  // The writer fills in the id; flush() orders that write before the read below.
  auto id = std::make_shared<int64_t>(0);
  Impl* im = impl_.get();
  im->enqueue([=] {
    {
      Stmt ins(*im->writer,
               "INSERT INTO runs(name, kind, status, config_json, device, started_at, "
               "parent_sweep, owner_host, owner_pid) VALUES(?, ?, 'running', ?, ?, ?, ?, ?, ?)");
      ins.bind(1, name).bind(2, kind).bind(3, config_json).bind(4, device).bind(5, now_utc());
      if (parent_sweep > 0) ins.bind(6, parent_sweep);
      ins.bind(7, host_name()).bind(8, static_cast<int64_t>(getpid()));
      ins.run();
      *id = sqlite3_last_insert_rowid(im->writer->get());
    }
  });
  flush();
  return *id;
}

void RunStore::write(const MetricBatch& batch) {
  Impl* im = impl_.get();
  im->enqueue([im, batch] { im->write_batch(batch); });
}

void RunStore::set_status(int64_t run_id, RunStatus status, const std::string& message) {
  Impl* im = impl_.get();
  im->enqueue([=] { im->write_status(run_id, status, message); });
}

void RunStore::rename_run(int64_t run_id, const std::string& name) {
  if (name.empty()) throw std::invalid_argument("a run's name must not be empty");
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
  im->enqueue([=] {
    Stmt ins(*im->writer,
             "INSERT INTO sweeps(name, grid_json, status, created_at) VALUES(?, ?, 'running', ?)");
    ins.bind(1, name).bind(2, grid_json).bind(3, now_utc()).run();
    *id = sqlite3_last_insert_rowid(im->writer->get());
  });
  flush();
  return *id;
}

void RunStore::set_sweep_status(int64_t sweep_id, const std::string& status) {
  Impl* im = impl_.get();
  im->enqueue([=] {
    Stmt u(*im->writer, "UPDATE sweeps SET status = ? WHERE id = ?");
    u.bind(1, status).bind(2, sweep_id).run();
  });
  flush();
}

std::vector<SweepInfo> RunStore::sweeps() const {
  return impl_->read<std::vector<SweepInfo>>([](const Db& db) {
    Stmt q(db, "SELECT id, name, grid_json, status, created_at FROM sweeps ORDER BY id");
    std::vector<SweepInfo> out;
    while (q.step()) out.push_back({q.i(0), q.s(1), q.s(2), q.s(3), q.s(4)});
    return out;
  });
}

std::optional<SweepInfo> RunStore::sweep(int64_t id) const {
  for (SweepInfo& s : sweeps()) {
    if (s.id == id) return s;
  }
  return std::nullopt;
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
class StoreConsumer : public MetricConsumer {
 public:
  explicit StoreConsumer(RunStore& s) : store_(s) {}
  void consume(const MetricBatch& b) override { store_.write(b); }

 private:
  RunStore& store_;
};
}  // namespace

std::shared_ptr<MetricConsumer> RunStore::consumer() {
  return std::make_shared<StoreConsumer>(*this);
}

std::vector<RunInfo> RunStore::runs() const {
  return impl_->read<std::vector<RunInfo>>([](const Db& db) {
    Stmt q(db,
           "SELECT r.id, r.name, r.kind, r.status, r.config_json, r.device, r.started_at, "
           "IFNULL(r.ended_at, ''), r.message, IFNULL(r.parent_sweep, 0), "
           "IFNULL((SELECT MAX(c.step) FROM scalars c JOIN series s ON c.series_id = s.id "
           "        WHERE s.run_id = r.id AND s.name = 'loss'), -1), "
           "IFNULL(r.owner_host, ''), IFNULL(r.owner_pid, 0) "
           "FROM runs r ORDER BY r.id");
    std::vector<RunInfo> out;
    while (q.step()) {
      RunInfo r{q.i(0), q.s(1), q.s(2), q.s(3), q.s(4), q.s(5),
                q.s(6), q.s(7), q.s(8), q.i(9), q.i(10)};
      if (r.status == "running" || r.status == "paused") {
        r.live = writer_alive(q.s(11), q.i(12), true);
        if (!r.live) {
          r.status = "interrupted";
          r.message = kInterruptedMessage;
        }
      }
      out.push_back(std::move(r));
    }
    return out;
  });
}

std::optional<RunInfo> RunStore::run(int64_t id) const {
  for (RunInfo& r : runs()) {
    if (r.id == id) return r;
  }
  return std::nullopt;
}

std::vector<std::string> RunStore::series_names(int64_t run_id) const {
  return impl_->read<std::vector<std::string>>([&](const Db& db) {
    Stmt q(db, "SELECT name FROM series WHERE run_id = ? ORDER BY id");
    q.bind(1, run_id);
    std::vector<std::string> out;
    while (q.step()) out.push_back(q.s(0));
    return out;
  });
}

std::vector<SeriesPoint> RunStore::series(int64_t run_id, const std::string& name) const {
  return impl_->read<std::vector<SeriesPoint>>([&](const Db& db) {
    Stmt q(db,
           "SELECT c.step, c.value FROM scalars c JOIN series s ON c.series_id = s.id "
           "WHERE s.run_id = ? AND s.name = ? ORDER BY c.step");
    q.bind(1, run_id).bind(2, name);
    std::vector<SeriesPoint> out;
    while (q.step()) out.push_back({q.i(0), q.null(1) ? std::nan("") : q.d(1)});
    return out;
  });
}

std::vector<TensorStatRow> RunStore::tensor_stats(int64_t run_id, const std::string& layer,
                                                  const std::string& role) const {
  return impl_->read<std::vector<TensorStatRow>>([&](const Db& db) {
    Stmt q(db,
           "SELECT step, layer, role, amax, scale, numel, zeros, underflow, saturated, "
           "nonfinite, subnormal, sq_err, sq_sum, histogram FROM tensor_stats WHERE run_id = ? "
           "AND (? = '' OR layer = ?) AND (? = '' OR role = ?) ORDER BY layer, role, step");
    q.bind(1, run_id).bind(2, layer).bind(3, layer).bind(4, role).bind(5, role);
    std::vector<TensorStatRow> out;
    while (q.step()) {
      TensorStatRow r;
      r.step = q.i(0);
      r.layer = q.s(1);
      r.role = q.s(2);
      r.amax = q.d(3);
      r.scale = q.d(4);
      r.numel = q.i(5);
      r.zeros = q.i(6);
      r.underflow = q.i(7);
      r.saturated = q.i(8);
      r.nonfinite = q.i(9);
      r.subnormal = q.i(10);
      r.sq_err = q.d(11);
      r.sq_sum = q.d(12);
      r.histogram = unpack_histogram(q.blob(13));
      out.push_back(std::move(r));
    }
    return out;
  });
}

std::vector<BlobRow> RunStore::blobs(int64_t run_id, const std::string& kind) const {
  return impl_->read<std::vector<BlobRow>>([&](const Db& db) {
    Stmt q(db,
           "SELECT step, layer, role, kind, shape, data FROM blobs WHERE run_id = ? "
           "AND (? = '' OR kind = ?) ORDER BY kind, layer, role, step");
    q.bind(1, run_id).bind(2, kind).bind(3, kind);
    std::vector<BlobRow> out;
    while (q.step()) {
      out.push_back({q.i(0), q.s(1), q.s(2), q.s(3), parse_shape(q.s(4)), q.blob(5)});
    }
    return out;
  });
}

std::vector<RunEvent> RunStore::events(int64_t run_id) const {
  return impl_->read<std::vector<RunEvent>>([&](const Db& db) {
    Stmt q(db, "SELECT step, kind, message FROM events WHERE run_id = ? ORDER BY id");
    q.bind(1, run_id);
    std::vector<RunEvent> out;
    while (q.step()) out.push_back({q.i(0), q.s(1), q.s(2)});
    return out;
  });
}

MetricBatch RunStore::read_new(int64_t run_id, RunCursor& cursor) const {
  return impl_->read<MetricBatch>([&](const Db& db) {
    MetricBatch b;
    b.run_id = run_id;
    db.exec("BEGIN");  // one snapshot for every table
    try {
      read_new_in(db, run_id, cursor, b);
      db.exec("COMMIT");
    } catch (...) {
      sqlite3_exec(db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
    return b;
  });
}

std::string RunStore::integrity_check() const {
  return impl_->read<std::string>([](const Db& db) {
    Stmt q(db, "PRAGMA integrity_check");
    std::string out;
    while (q.step()) out += (out.empty() ? "" : "; ") + q.s(0);
    return out;
  });
}

int RunStore::schema_version() const {
  return impl_->read<int>([](const Db& db) { return user_version(db); });
}

std::string default_database_path() {
  const char* xdg = std::getenv("XDG_DATA_HOME");
  if (xdg && *xdg) return std::string(xdg) + "/fp8-workbench/runs.sqlite";
  const char* home = std::getenv("HOME");
  if (home && *home) return std::string(home) + "/.local/share/fp8-workbench/runs.sqlite";
  return "runs.sqlite";
}

}  // namespace fp8wb
