// The run store's file opened (for writing, or reading only): what a file is before it is
// trusted (empty, ours, another program's; views, triggers and hidden columns refused by
// name), the writer of a run still alive or not, the switch to WAL and the waits for locks.
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fp8wb/core/checkpoint/file_io.h"
#include "run_store_sql.h"

namespace fp8wb {
namespace store {

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

namespace {

// When process `pid` started, in seconds since the epoch (the boot time of /proc/stat and
// the start of /proc/PID/stat, in clock ticks since boot); -1 where it cannot be read.
int64_t process_start_time(int64_t pid) {
  std::string stat;
  {
    std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
    if (!f) return -1;
    char buf[1024];
    const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    stat.assign(buf, n);
  }
  // The command's name, in parentheses, may hold anything: the fields follow the last ')'.
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return -1;
  const char* p = stat.c_str() + paren + 1;
  // Fields 3 (the state) to 22 (the start time): 19 fields to skip.
  for (int field = 3; field < 22; ++field) {
    while (*p == ' ') ++p;
    while (*p && *p != ' ') ++p;
  }
  char* end = nullptr;
  const unsigned long long ticks = std::strtoull(p, &end, 10);
  if (end == p) return -1;
  int64_t boot = -1;
  if (std::FILE* f = std::fopen("/proc/stat", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
      long long b = 0;
      if (std::sscanf(line, "btime %lld", &b) == 1) boot = b;
    }
    std::fclose(f);
  }
  const long hz = sysconf(_SC_CLK_TCK);
  if (boot < 0 || hz <= 0) return -1;
  return boot + static_cast<int64_t>(ticks / static_cast<unsigned long long>(hz));
}

// "2026-01-01T12:00:00Z" in seconds since the epoch; -1 for anything else.
int64_t utc_seconds(const std::string& text) {
  std::tm tm{};
  const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (!end || *end) return -1;
  return static_cast<int64_t>(timegm(&tm));
}

}  // namespace

bool writer_alive(const std::string& host, int64_t pid, const std::string& started_at,
                  bool other_hosts_alive) {
  if (host != host_name()) return other_hosts_alive && !host.empty();
  if (pid <= 0 || pid > std::numeric_limits<pid_t>::max()) return false;
  if (kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
  // A live process of that number: the writer only where it started before the run. The
  // slack covers the clock's rounding and a small step of the wall clock; a number reused
  // after a restart or after its writer ended belongs to a process started later still.
  constexpr int64_t kSlackSeconds = 60;
  const int64_t run_start = utc_seconds(started_at);
  const int64_t process_start = process_start_time(pid);
  if (run_start < 0 || process_start < 0) return true;  // cannot tell: the number alone
  return process_start <= run_start + kSlackSeconds;
}

// Ours: a user_version set (every migration sets it in the transaction that makes the
// tables) and a runs table with fp8wb's config_json column. A file with tables but no
// user_version, or whose runs table is not fp8wb's, is another program's, however its
// tables are named: it is read (never written) to tell.
// The tables are read before the version: a migration by another process between the two
// reads then shows as tables and the version it set, never as tables without a version.
FileKind file_kind(const Db& db, std::vector<std::string>* tables) {
  std::vector<std::string> names;
  bool runs = false;
  {
    Stmt q(db,
           "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' "
           "ESCAPE '\\' ORDER BY name");
    while (q.step()) {
      if (q.s(0) == "runs") runs = true;
      names.push_back(q.s(0));
    }
  }
  const int v = user_version(db);
  if (names.empty()) return v > 0 ? FileKind::Ours : FileKind::Empty;
  if (v > 0 && runs && has_column(db, "runs", "config_json")) return FileKind::Ours;
  if (tables) *tables = std::move(names);
  return FileKind::Foreign;
}

std::string foreign_file_text(const std::string& path, const std::vector<std::string>& tables) {
  constexpr size_t kNamed = 5;
  std::string names;
  for (size_t i = 0; i < tables.size() && i < kNamed; ++i) {
    names += (i ? ", " : "") + tables[i].substr(0, 40);
  }
  if (tables.size() > kNamed) names += ", ... (" + std::to_string(tables.size()) + " in all)";
  return path + " is an SQLite database of another program (it has the table" +
         (tables.size() == 1 ? " " : "s ") + names + "; no FP8 Workbench runs)";
}

void check_schema(const Db& db, const std::string& path) {
  auto quoted = [](const std::string& name) {
    return "'" + (name.size() > 60 ? name.substr(0, 60) + "..." : name) + "'";
  };
  const std::string not_ours = path + " is not a run database as fp8wb writes it: ";
  std::vector<std::string> tables;
  {
    Stmt q(db, "SELECT type, name, IFNULL(sql, '') FROM sqlite_master");
    while (q.step()) {
      const std::string type = q.s(0), name = q.s(1);
      if (type == "view" || type == "trigger") {
        throw StoreError(not_ours + "it has a " + type + " " + quoted(name) +
                         " (a run database has tables and indexes only)");
      }
      if (type != "table") continue;
      std::string head = q.s(2).substr(0, 40);
      for (char& c : head) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      head.erase(std::unique(head.begin(), head.end(),
                             [](char a, char b) { return std::isspace(a) && std::isspace(b); }),
                 head.end());
      if (head.rfind("CREATE VIRTUAL TABLE", 0) == 0) {
        throw StoreError(not_ours + "its table " + quoted(name) +
                         " is a virtual table (a run database has plain tables only)");
      }
      tables.push_back(name);
    }
  }
  for (const std::string& t : tables) {
    if (t.rfind("sqlite_", 0) == 0) continue;
    std::string escaped;
    for (char c : t) escaped += c == '"' ? std::string("\"\"") : std::string(1, c);
    Stmt q(db, ("PRAGMA table_xinfo(\"" + escaped + "\")").c_str());
    while (q.step()) {
      if (q.i(6) != 0) {  // 2, 3: a generated column (virtual, stored); 1: hidden
        throw StoreError(not_ours + "its table " + quoted(t) + " has a " +
                         (q.i(6) == 1 ? "hidden" : "generated") + " column " + quoted(q.s(1)) +
                         " (a run database stores every value it gives)");
      }
    }
  }
}

}  // namespace store

using namespace store;

namespace {

// The switch to WAL needs the file to itself for a moment: SQLite does not always call the
// busy handler there (a lock upgrade that could deadlock fails at once), so it is retried
// for as long as a lock is waited for.
void switch_to_wal(const Db& db, const std::string& path, std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
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
    db.fail();
  }
}

// Runs whose writing process is gone: on this host when its pid no longer exists, and
// always when the file was written on another host (a copied database).
void mark_interrupted(const Db& db) {
  auto gone_runs = [&] {
    Stmt q(db,
           "SELECT id, owner_host, owner_pid, started_at FROM runs "
           "WHERE status IN ('running', 'paused')");
    std::vector<int64_t> gone;
    while (q.step()) {
      if (!writer_alive(q.s(1), q.i(2), q.s(3), false)) gone.push_back(q.i(0));
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

// How long a lock held by another connection is waited for (RunStore::kLockWaitSeconds;
// FP8WB_STORE_LOCK_WAIT_S, in seconds, for tests).
std::chrono::milliseconds lock_wait() {
  if (const char* s = std::getenv("FP8WB_STORE_LOCK_WAIT_S"); s && *s) {
    const double v = std::strtod(s, nullptr);
    if (v > 0 && v < 1e6) return std::chrono::milliseconds(static_cast<int64_t>(v * 1000));
  }
  return std::chrono::seconds(RunStore::kLockWaitSeconds);
}

// `fn` (a write transaction that rolls itself back) tried again with backoff while another
// connection holds the database, for up to `wait`.
template <class F>
void while_locked(const F& fn, std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  auto backoff = std::chrono::milliseconds(20);
  for (;;) {
    try {
      fn();
      return;
    } catch (const BusyError&) {
      if (std::chrono::steady_clock::now() >= deadline) throw;
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
    }
  }
}

bool writable(const std::string& path) {
  return access(path.c_str(), W_OK) == 0;
}

std::string folder_of(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

}  // namespace

// A reading connection that changes nothing on disk. A WAL database needs its -shm file,
// which SQLite creates (owned by the reader) where it may and fails where it may not (a
// read-only folder or mount, another user's folder): with no -wal there is nothing but
// the file to read, so it is read as it stands (immutable); with one (a live writer) the
// reader shares its -shm, or, where that cannot be opened, reads the file as it stands.
std::unique_ptr<Db> store::open_reader(const std::string& path) {
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

RunStore::RunStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

namespace {

// A folder (or a FIFO, a device) where the database should be: said as such, not as
// whatever SQLite makes of it, nor as no database at all.
void refuse_other_than_file(const std::string& path) {
  // A loop of links is no missing file (which open() would create): said as what it is.
  if (const std::string link = link_problem(path); link.rfind("a loop", 0) == 0)
    throw StoreError("run database " + path + " is " + link + ", not a database file");
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st)) {
    throw StoreError("run database " + path + " is " +
                     (std::filesystem::is_directory(st) ? "a folder" : "not a regular file") +
                     ", not a database file");
  }
}

}  // namespace

std::unique_ptr<RunStore> RunStore::open(const std::string& path) {
  refuse_other_than_file(path);
  {
    // A file, or a folder, this process cannot write: refused before SQLite opens it. SQLite
    // would open the file read-only without a word (writes failing later) and leave the
    // -wal and -shm files it made beside it.
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) {
      if (!writable(path)) {
        throw StoreError("run database " + path + " is read-only: the file cannot be written");
      }
      if (!writable(folder_of(path))) {
        throw StoreError("run database " + path + " is read-only: its folder " + folder_of(path) +
                         " cannot be written (SQLite keeps its -wal and -shm files there)");
      }
    } else if (std::filesystem::is_directory(folder_of(path), ec) && !writable(folder_of(path))) {
      throw StoreError("cannot create run database " + path + ": its folder " + folder_of(path) +
                       " cannot be written");
    }
  }
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
  // Another program's file is left as it is: the switch to WAL alone rewrites its header.
  if (std::vector<std::string> tables; file_kind(w, &tables) == FileKind::Foreign) {
    throw StoreError(foreign_file_text(path, tables) +
                     ": give a new file or an FP8 Workbench database");
  }
  check_schema(w, path);
  impl->lock_wait = lock_wait();
  switch_to_wal(w, path, impl->lock_wait);
  w.exec("PRAGMA synchronous = NORMAL");
  // A run sampling statistics every step writes 2.4 MB a step (a GPT of 12 layers: 144
  // tensors, each with its 16 KB error map). With SQLite's default 2 MB page cache the
  // writer read its B-trees' pages back from the WAL for every insert, and checkpointed
  // every 4 MB. A 16 MiB cache (what it adds to a process's peak; CliImport holds an
  // import's memory to its blob's 2.4 times) and a checkpoint every 64 MiB of WAL
  // (docs/performance.md).
  w.exec("PRAGMA cache_size = -16384");
  w.exec("PRAGMA wal_autocheckpoint = 16384");
  while_locked([&] { migrate(w, path); }, impl->lock_wait);
  while_locked([&] { mark_interrupted(w); }, impl->lock_wait);
  // A cap on the file's size for this process (pages of 4 KiB): the tests' full disk.
  if (const char* cap = std::getenv("FP8WB_STORE_MAX_PAGES"); cap && *cap) {
    w.exec(("PRAGMA max_page_count = " + std::to_string(std::strtoll(cap, nullptr, 10))).c_str());
  }
  impl->reader = std::make_unique<Db>(path, true);
  impl->has_uuid = has_column(*impl->reader, "runs", "uuid");
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->loop(); });
  return std::unique_ptr<RunStore>(new RunStore(std::move(impl)));
}

std::unique_ptr<RunStore> RunStore::open_read_only(const std::string& path) {
  refuse_other_than_file(path);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    const std::string link = link_problem(path);
    throw StoreError("no run database at " + path + (link.empty() ? "" : ": it is " + link));
  }
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->read_only = true;
  impl->reader = open_reader(path);
  const int v = user_version(*impl->reader);
  std::vector<std::string> tables;
  switch (file_kind(*impl->reader, &tables)) {
    case FileKind::Foreign:
      throw StoreError(foreign_file_text(path, tables) + ": not an FP8 Workbench database");
    case FileKind::Empty:
      // A 0-byte file or an SQLite file with no tables: a run database with no runs yet, as
      // open() would make it.
      impl->empty = true;
      return std::unique_ptr<RunStore>(new RunStore(std::move(impl)));
    case FileKind::Ours: break;
  }
  check_schema(*impl->reader, path);
  impl->has_uuid = v >= 1 && has_column(*impl->reader, "runs", "uuid");
  if (v > kSchemaVersion) {
    throw StoreError("run database " + path + " has schema version " + std::to_string(v) +
                     ", newer than this fp8wb reads");
  }
  // A file of version 1 lacks only the identities, which are derived as it is read.
  if (v < kSchemaVersion && v < tensor_stats_schema_version()) {
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

RunStore::~RunStore() {
  impl_->stop();
  // The read-only connection closes first, so that the writer's close is the last one
  // and checkpoints the WAL into the database file (which then stands alone).
  impl_->reader.reset();
  impl_->writer.reset();
}

const std::string& RunStore::path() const {
  return impl_->path;
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
