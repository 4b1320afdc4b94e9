// defines: Db, Stmt (a SQLite connection and its statements, errors as StoreError), the
// stored forms of a histogram and a shape, the tensor_stats columns (from
// kTensorStatFields), the schema's migrations, read_new_in(), RunStore::Impl (the writer
// thread and the reading connection): what the run store's files share (run_store.cpp:
// the row reads; run_store_schema.cpp: opening, schema and migrations;
// run_store_writer.cpp: the writer thread; run_store_reads.cpp: read_new() and CSV).
// Internal to core.
#pragma once

#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fp8wb/core/role.h"
#include "fp8wb/core/store/run_store.h"

namespace fp8wb::store {

// "file:<path>?immutable=1": a file read as it is on disk, with no -wal or -shm (for a
// database in a folder or on a mount this process cannot write).
inline std::string immutable_uri(const std::string& path) {
  std::string uri = "file:";
  for (unsigned char c : path) {
    if (c == '%' || c == '?' || c == '#' || c < 0x20 || c >= 0x7F) {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      uri += buf;
    } else {
      uri += static_cast<char>(c);
    }
  }
  return uri + "?immutable=1";
}

// The largest text or blob a run database's reading connections take
// (SQLITE_LIMIT_LENGTH): a larger one is refused ("string or blob too big"), not read into
// memory. fp8wb's own values are far smaller (a map of 64 x 64 cells is 16 KiB).
inline constexpr int kMaxValueBytes = 64 << 20;

// Why writing `path` (a database, its -wal or -shm) failed, where the file system tells:
// SQLite says "disk I/O error" for a full disk met by its -wal or -shm file or a sync, and
// keeps no errno of it (sqlite3_system_errno() is 0 there). Empty where neither a full
// disk nor the process's file size limit is the cause.
inline std::string io_cause(const std::string& path) {
  std::string folder = path;
  const size_t slash = folder.rfind('/');
  folder = slash == std::string::npos ? "." : slash == 0 ? "/" : folder.substr(0, slash);
  struct statvfs fs {};
  if (statvfs(folder.c_str(), &fs) == 0) {
    const unsigned long long left = static_cast<unsigned long long>(fs.f_bavail) * fs.f_frsize;
    if (left < (1ULL << 20)) {
      return " (disk full: " + std::to_string(left >> 10) + " KiB left on the device of " + folder +
             ")";
    }
    if (fs.f_favail == 0 && fs.f_files > 0) return " (disk full: no free inodes left)";
  }
  struct rlimit limit {};
  if (getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    for (const char* suffix : {"", "-wal", "-shm"}) {
      struct stat st {};
      if (stat((path + suffix).c_str(), &st) == 0 &&
          static_cast<unsigned long long>(st.st_size) + (1ULL << 20) > limit.rlim_cur) {
        return " (the process's file size limit of " + std::to_string(limit.rlim_cur >> 10) +
               " KiB reached: File too large)";
      }
    }
  }
  return {};
}

// What a failed write means to whoever reads the message (`path`: the database, for a
// full disk that SQLite calls an I/O error).
inline std::string explain(int code, const std::string& path = {}) {
  if (!path.empty() && ((code & 0xFF) == SQLITE_IOERR || (code & 0xFF) == SQLITE_FULL)) {
    if (std::string cause = io_cause(path); !cause.empty()) return cause;
  }
  switch (code & 0xFF) {
    case SQLITE_FULL: return " (disk full, or the database's size limit reached)";
    case SQLITE_READONLY: return " (the database is read-only)";
    case SQLITE_CORRUPT: return " (the database file is damaged)";
    // No SQLite header: another kind of file, or a database whose first page is damaged.
    case SQLITE_NOTADB: return " (not an SQLite database, or its first page is damaged)";
    case SQLITE_IOERR: return " (an I/O error)";
    case SQLITE_TOOBIG: return " (a value in the file is larger than the 64 MiB fp8wb reads)";
    default: return "";
  }
}

// The database is locked by another connection (SQLITE_BUSY, SQLITE_LOCKED): a wait, not
// a failure. The writer thread tries again (RunStore::Impl::loop).
struct BusyError : StoreError {
  using StoreError::StoreError;
};

inline bool busy_code(int code) {
  return (code & 0xFF) == SQLITE_BUSY || (code & 0xFF) == SQLITE_LOCKED;
}

// A connection and its statements, closed on destruction.
class Db {
 public:
  enum class Mode { ReadWrite, ReadOnly, Immutable };
  Db(const std::string& path, bool read_only)
      : Db(path, read_only ? Mode::ReadOnly : Mode::ReadWrite) {}
  Db(const std::string& path, Mode mode) : path_(path) {
    int flags = mode == Mode::ReadWrite ? (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
                                        : SQLITE_OPEN_READONLY;
    std::string name = path;
    if (mode == Mode::Immutable) {
      name = immutable_uri(path);
      flags |= SQLITE_OPEN_URI;
    }
    if (sqlite3_open_v2(name.c_str(), &db_, flags | SQLITE_OPEN_FULLMUTEX, nullptr) != SQLITE_OK) {
      const std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      db_ = nullptr;
      throw StoreError("cannot open run database " + path + ": " + msg);
    }
    // Before anything that may lock: every statement below waits for other processes.
    sqlite3_busy_timeout(db_, kBusyMs);
    if (mode != Mode::ReadWrite) sqlite3_limit(db_, SQLITE_LIMIT_LENGTH, kMaxValueBytes);
    exec("PRAGMA foreign_keys = ON");
  }
  ~Db() { sqlite3_close(db_); }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  static constexpr int kBusyMs = 10000;

  sqlite3* get() const { return db_; }
  // What went wrong with which file, as its reader says it: SQLite's message and what it
  // means ("file is not a database (the database file is damaged)"), not which statement
  // of ours met it.
  [[noreturn]] void fail() const { raise(sqlite3_errmsg(db_)); }
  void exec(const char* sql) const {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      const std::string m = err ? err : "error";
      sqlite3_free(err);
      raise(m);
    }
  }

 private:
  [[noreturn]] void raise(const std::string& what) const {
    const int code = sqlite3_extended_errcode(db_);
    const std::string text = "run database " + path_ + ": " + what + explain(code, path_);
    if (busy_code(code)) throw BusyError(text);
    throw StoreError(text);
  }

  std::string path_;
  sqlite3* db_ = nullptr;
};

class Stmt {
 public:
  Stmt(const Db& db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db.get(), sql, -1, &s_, nullptr) != SQLITE_OK) db.fail();
  }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt& bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt& bind(int i, double v) {
    sqlite3_bind_double(s_, i, v);
    return *this;
  }
  Stmt& bind(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& bind_blob(int i, const void* p, size_t n) {
    sqlite3_bind_blob(s_, i, p, static_cast<int>(n), SQLITE_TRANSIENT);
    return *this;
  }
  bool step() {
    const int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    db_.fail();
  }
  void run() {
    step();
    reset();
  }
  void reset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  sqlite3_stmt* raw() const { return s_; }
  int64_t i(int c) const { return sqlite3_column_int64(s_, c); }
  double d(int c) const { return sqlite3_column_double(s_, c); }
  bool null(int c) const { return sqlite3_column_type(s_, c) == SQLITE_NULL; }
  std::string s(int c) const {
    const auto* t = sqlite3_column_text(s_, c);
    return t ? reinterpret_cast<const char*>(t) : "";
  }
  std::vector<uint8_t> blob(int c) const {
    const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(s_, c));
    return p ? std::vector<uint8_t>(p, p + sqlite3_column_bytes(s_, c)) : std::vector<uint8_t>{};
  }

 private:
  const Db& db_;
  sqlite3_stmt* s_ = nullptr;
};

// A histogram as stored: the first nonzero bin (one byte), then the counts up to the
// last nonzero bin as LEB128 varints (most bins of a tensor are empty, most counts small).
inline std::vector<uint8_t> pack_histogram(const uint64_t (&hist)[kHistBins]) {
  int first = 0, last = kHistBins - 1;
  while (first < kHistBins && hist[first] == 0) ++first;
  while (last >= first && hist[last] == 0) --last;
  std::vector<uint8_t> out(1, static_cast<uint8_t>(first));
  for (int b = first; b <= last; ++b) {
    uint64_t v = hist[b];
    do {
      out.push_back(static_cast<uint8_t>((v & 0x7F) | (v > 0x7F ? 0x80 : 0)));
      v >>= 7;
    } while (v);
  }
  return out;
}

inline std::vector<uint64_t> unpack_histogram(const std::vector<uint8_t>& blob) {
  std::vector<uint64_t> h(kHistBins, 0);
  if (blob.empty()) return h;
  size_t bin = blob[0], i = 1;
  while (i < blob.size() && bin < h.size()) {
    uint64_t v = 0;
    int shift = 0;
    while (i < blob.size() && shift < 64) {
      const uint8_t byte = blob[i++];
      v |= static_cast<uint64_t>(byte & 0x7F) << shift;
      shift += 7;
      if (!(byte & 0x80)) break;
    }
    h[bin++] = v;
  }
  return h;
}

inline std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : ",") + std::to_string(d);
  return s;
}

// A role as the database spells it; a name no Role has (a file from a newer or damaged
// writer) is refused by name.
inline Role stored_role(const std::string& name, int64_t run_id) {
  if (const auto r = parse_role(name)) return *r;
  throw StoreError("run " + std::to_string(run_id) + ": tensor statistics of an unknown role \"" +
                   name.substr(0, 40) + "\" (known: " + role_names() + ")");
}

// A rank_scales row as the query "SELECT step, layer, role, rank, amax, scale" gives it.
inline RankScale rank_scale_row(Stmt& q, int64_t run_id) {
  RankScale r;
  r.step = q.i(0);
  r.layer = q.s(1);
  r.role = stored_role(q.s(2), run_id);
  r.rank = static_cast<int>(q.i(3));
  r.amax = q.null(4) ? NAN : static_cast<float>(q.d(4));
  r.scale = q.null(5) ? NAN : static_cast<float>(q.d(5));
  return r;
}

// A blob's shape as stored ("2,3"); text that is not whole numbers and commas (a file
// written by another program) reads as no shape, which no reader takes for a map.
inline std::vector<int64_t> parse_shape(const std::string& s) {
  std::vector<int64_t> v;
  size_t i = 0;
  while (i < s.size() && v.size() < 8) {
    const size_t j = std::min(s.find(',', i), s.size());
    if (j == i || j - i > 18) return {};
    int64_t d = 0;
    for (size_t k = i; k < j; ++k) {
      if (s[k] < '0' || s[k] > '9') return {};
      d = d * 10 + (s[k] - '0');
    }
    v.push_back(d);
    i = j + 1;
  }
  return v;
}

// Everything of a run committed after `cursor`, in the batches its trainer published
// (RunStore::read_new calls it inside one read transaction).
void read_new_in(const Db& db, int64_t run_id, RunCursor& cursor, MetricBatch& b);

// The tensor_stats table, from kTensorStatFields (run_store_schema.cpp).
// "amax, scale, ...": the columns of the fields, in the table's order.
const std::string& tensor_stat_columns();
// "INSERT OR REPLACE INTO tensor_stats(run_id, step, layer, role, <fields>) VALUES(...)".
const std::string& tensor_stat_insert_sql();
// "SELECT step, layer, role, <fields> FROM tensor_stats " (the caller adds the rest).
const std::string& tensor_stat_select_sql();
// Binds t's fields from parameter `first` on, in the table's order.
void bind_tensor_stat_fields(Stmt& s, int first, const TensorMetrics& t);
// Reads t's fields from column `first` on, in the table's order (a histogram's counts,
// and the amax's bits into t.raw: the statistics as the trainer published them).
void read_tensor_stat_fields(const Stmt& s, int first, TensorMetrics& t);
// What run `run_id`'s tensor statistics were measured under, from its stored config
// (watch.h: stored_float8_config()): set_recipe() gives each row read back its role's
// recipe and the scaling mode (run_store_reads.cpp).
Float8LinearConfig stored_run_float8_config(const Db& db, int64_t run_id);
// The SQL that takes the schema from version `to` - 1 to `to`.
std::string migration_sql(int to);
// Brings the file to RunStore::kSchemaVersion: every step in one immediate transaction,
// the version read inside it; a newer file is refused (run_store_schema.cpp).
void migrate(const Db& db, const std::string& path);

// Shared by opening, writing and reading.
std::string now_utc();
std::string host_name();
// Whether the process that wrote a run (`host`, `pid`, the run's `started_at` as stored)
// is still there: on this host, a live process `pid` that started before the run did (one
// started later, a PID reused after the writer ended or the machine restarted, is not its
// writer). A run from another host (a database on a shared or copied file) is taken as
// alive where `other_hosts_alive`, since nothing here can tell.
bool writer_alive(const std::string& host, int64_t pid, const std::string& started_at,
                  bool other_hosts_alive);
int user_version(const Db& db);
// Whether `table` has `column` (a file of an older schema may lack it).
bool has_column(const Db& db, const char* table, const char* column);
// What kind of file a database of schema version 0 is, by its tables (SQLite's own aside).
enum class FileKind {
  Empty,    // no tables: a new file, a 0-byte one, an empty SQLite database
  Ours,     // a run database (an older one, or one to migrate)
  Foreign,  // another program's: tables of its own, no runs table
};
// `tables`: the foreign file's tables, for the message.
FileKind file_kind(const Db& db, std::vector<std::string>* tables = nullptr);
// "PATH is an SQLite database of another program (it has the tables a, b; no FP8
// Workbench runs)".
std::string foreign_file_text(const std::string& path, const std::vector<std::string>& tables);
// A run database as fp8wb writes it: its objects are tables and indexes only (no view,
// trigger or virtual table, which could give a small file's reader millions of rows or a
// huge value) and its tables have no generated or hidden columns. Throws StoreError
// naming the file and the object. Every file read or written as a run database is checked.
void check_schema(const Db& db, const std::string& path);
// A reading connection that changes nothing on disk (run_store_open.cpp).
std::unique_ptr<Db> open_reader(const std::string& path);
// The identity of a row written before identities were stored: a hash of what the row
// holds (its id too), the same in every copy of the file.
std::string derived_uuid(const std::string& row_text);
// The SQL expressions of a run's and a sweep's identity in a SELECT over `runs r` and
// `sweeps` (where the column is missing, the columns derived_uuid() hashes, joined: the
// reader derives it).
std::string run_uuid_sql(bool has_uuid);
std::string sweep_uuid_sql(bool has_uuid);
// What a SELECT of run_uuid_sql()/sweep_uuid_sql() gave, as the identity.
std::string stored_uuid(const std::string& column, bool has_uuid);
inline constexpr char kInterruptedMessage[] =
    "the process writing this run ended without finishing it";

}  // namespace fp8wb::store

namespace fp8wb {

// The reading connection and the writer thread (run_store_writer.cpp).
struct RunStore::Impl {
  std::string path;
  bool read_only = false;
  bool has_uuid = true;               // false: a file of schema version 1 read as it stands
  bool empty = false;                 // read-only, a file with no tables: no runs, no sweeps
  std::unique_ptr<store::Db> reader;  // guarded by read_mutex
  mutable std::mutex read_mutex;

  // Writer thread state.
  std::unique_ptr<store::Db> writer;
  std::thread thread;
  std::mutex mutex;
  std::condition_variable wake, drained, room;
  struct Job {
    std::function<void()> fn;
    size_t bytes = 0;  // what it holds in memory, about
  };
  std::deque<Job> queue;
  uint64_t queued = 0, committed = 0;
  size_t buffered = 0;  // the bytes of the jobs queued or being written
  bool stopping = false;
  std::string error;             // the first failed write
  bool own_runs_marked = false;  // after a failure: this process's runs were marked failed
  std::map<std::pair<int64_t, std::string>, int64_t> series_ids;  // writer thread only
  // The write buffer: while another connection holds the database, writes wait here, up
  // to this many bytes (a writer that would pass it waits for room), and the writer tries
  // again with backoff for up to lock_wait; a lock held longer fails the writes.
  size_t buffer_limit = RunStore::kWriteBufferBytes;
  std::chrono::milliseconds lock_wait{RunStore::kLockWaitSeconds * 1000};

  // Queues a job for the writer thread (waiting for room while the buffer is full);
  // throws StoreError when read-only or after a failed write.
  void enqueue(std::function<void()> job, size_t bytes = 256);
  // The writer thread: one transaction for everything queued since the last one; a
  // transaction that meets a lock is rolled back and tried again, with what was queued
  // meanwhile, until lock_wait has passed.
  void loop();
  // One transaction of `jobs`, tried again while the database is locked (what is queued
  // meanwhile joins it); returns why it failed (empty: committed).
  std::string commit(std::deque<Job>& jobs);
  // Ends the writer thread, committing what is queued.
  void stop();
  // After a failed write (a full disk, a damaged or read-only file, a lock held past
  // lock_wait): what was committed stays; this process's runs end as failed with the
  // reason, where the file still takes that small update (a row updated in place needs no
  // new page). Returns whether the update was made.
  bool fail_own_runs(const std::string& why);
  int64_t series_id(int64_t run, const std::string& name);
  void write_batch(const MetricBatch& b);
  void write_status(int64_t run, RunStatus s, const std::string& message);

  template <class T>
  T read(const std::function<T(const store::Db&)>& fn) const {
    const std::lock_guard<std::mutex> lock(read_mutex);
    return fn(*reader);
  }
};

}  // namespace fp8wb
