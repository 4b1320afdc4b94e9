// The collection of a cluster sweep's trials (sweep_collect.h): what Slurm says of the
// array's tasks (sacct, else scontrol), each trial database checked and imported with
// RunStore::import_runs(), tasks that ended without a trial recorded as failed runs.
#include "fp8wb/core/sweep/sweep_collect.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "config/json_fields.h"
#include "fp8wb/core/checkpoint/file_io.h"
#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/counted.h"
#include "fp8wb/core/store/run_store.h"

extern char** environ;

namespace fp8wb {

namespace fs = std::filesystem;
using nlohmann::json;

ProgramResult run_program(const std::vector<std::string>& argv) {
  ProgramResult r;
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return r;
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return r;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc == 0) {
    pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
    std::string* sinks[2] = {&r.out, &r.err};
    int open_fds = 2;
    while (open_fds > 0) {
      if (poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      for (int k = 0; k < 2; ++k) {
        if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        char buf[4096];
        const ssize_t n = read(fds[k].fd, buf, sizeof buf);
        if (n > 0) {
          sinks[k]->append(buf, static_cast<size_t>(n));
        } else if (n == 0 || errno != EINTR) {
          fds[k].fd = -1;
          --open_fds;
        }
      }
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    r.started = true;
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  } else {
    r.err = std::strerror(rc);
  }
  close(out_pipe[0]);
  close(err_pipe[0]);
  return r;
}

namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\n')) ++i;
  return s.substr(i);
}

bool active_state(const std::string& state) {
  for (const char* s : {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING",
                        "SUSPENDED", "REQUEUE_HOLD", "REQUEUE_FED", "SIGNALING", "STAGE_OUT"}) {
    if (state == s) return true;
  }
  return false;
}

struct TaskState {
  std::string state, exit_code, reason;
};

// What Slurm says of the array's tasks: sacct where accounting is there, else scontrol
// (which knows a finished job for MinJobAge, 300 s by default).
struct SlurmView {
  bool asked = false;  // Slurm answered (possibly: no such job any more)
  std::string source;  // "sacct" or "scontrol"
  std::map<long, TaskState> tasks;
};

// "3", "2-5", "2-5%1", "1,3,7-8": the task ids.
std::vector<long> task_ids(std::string text) {
  std::vector<long> out;
  if (const size_t pct = text.find('%'); pct != std::string::npos) text.resize(pct);
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    try {
      const size_t dash = part.find('-');
      const long a = std::stol(part.substr(0, dash));
      const long b = dash == std::string::npos ? a : std::stol(part.substr(dash + 1));
      for (long i = a; i <= b && out.size() < 1000000; ++i) out.push_back(i);
    } catch (const std::exception&) {
    }
  }
  return out;
}

SlurmView ask_slurm(const std::string& job) {
  SlurmView v;
  const ProgramResult acct =
      run_program({"sacct", "-j", job, "-X", "-n", "-P", "-o", "JobID,State,ExitCode,Reason"});
  if (acct.started && acct.status == 0 && !trim(acct.out).empty()) {
    v.asked = true;
    v.source = "sacct";
    std::stringstream ss(acct.out);
    std::string line;
    while (std::getline(ss, line)) {
      std::vector<std::string> f;
      std::stringstream ls(line);
      std::string cell;
      while (std::getline(ls, cell, '|')) f.push_back(cell);
      if (f.size() < 3) continue;
      const size_t us = f[0].find('_');
      if (us == std::string::npos) continue;
      std::string ids = f[0].substr(us + 1);
      if (!ids.empty() && ids.front() == '[') ids = ids.substr(1, ids.find(']') - 1);
      const std::string state = f[1].substr(0, f[1].find(' '));  // "CANCELLED by 0"
      for (long i : task_ids(ids)) v.tasks[i] = {state, f[2], f.size() > 3 ? f[3] : ""};
    }
    return v;
  }
  const ProgramResult ctl = run_program({"scontrol", "-o", "show", "job", job});
  if (!ctl.started) return v;
  if (ctl.status != 0) {
    // A job Slurm no longer knows (purged after MinJobAge) has ended.
    v.asked = ctl.err.find("Invalid job id") != std::string::npos;
    v.source = "scontrol";
    return v;
  }
  v.asked = true;
  v.source = "scontrol";
  std::stringstream ss(ctl.out);
  std::string line;
  while (std::getline(ss, line)) {
    std::map<std::string, std::string> kv;
    std::stringstream ls(line);
    std::string word;
    while (ls >> word) {
      const size_t eq = word.find('=');
      if (eq != std::string::npos) kv[word.substr(0, eq)] = word.substr(eq + 1);
    }
    for (long i : task_ids(kv["ArrayTaskId"])) {
      v.tasks[i] = {kv["JobState"], kv["ExitCode"], kv["Reason"]};
    }
  }
  return v;
}

// Why a file of the sweep folder (`p`, under `root`, the folder's real path) is not read:
// it leads, through links, outside the folder. Empty where it stays inside (or is not
// there: its reader says so).
std::string outside_folder(const fs::path& root, const fs::path& p) {
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(p, ec);
  if (ec) return {};
  const fs::path rel = real.lexically_relative(root);
  if (!rel.empty() && *rel.begin() != "..") return {};
  return p.string() + " leads outside the sweep folder " + root.string() + " (to " + real.string() +
         "): not read";
}

// A task's log is read only from its end: at most this much of it.
constexpr uint64_t kLogTailBytes = 64 << 10;

// The last lines of a task's log, on one line. Read only where it is a regular file inside
// the folder, and only its last kLogTailBytes: a FIFO is never waited on, a link to
// /dev/zero never read. `why` says why a log that is there was not read.
std::string log_tail(const fs::path& root, const fs::path& log, std::string& why) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(log, ec))) return {};
  if (why = outside_folder(root, log); !why.empty()) return {};
  std::string text;
  try {
    const int fd = open_regular_file(log.string());
    struct stat st {};
    const uint64_t size = fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    const uint64_t from = size > kLogTailBytes ? size - kLogTailBytes : 0;
    text.resize(static_cast<size_t>(size - from));
    try {
      text.resize(static_cast<size_t>(read_at(fd, from, text.data(), text.size(), log.string())));
    } catch (...) {
      close(fd);
      throw;
    }
    close(fd);
    // A cut first line is no line.
    if (from > 0) {
      const size_t nl = text.find('\n');
      text.erase(0, nl == std::string::npos ? text.size() : nl + 1);
    }
  } catch (const FileError& e) {
    why = e.what();
    return {};
  }
  std::vector<std::string> lines;
  std::stringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    // The progress bar's redraws: only what follows the last carriage return.
    if (const size_t cr = line.rfind('\r'); cr != std::string::npos) line = line.substr(cr + 1);
    line = trim(line);
    if (line.empty()) continue;
    lines.push_back(line.substr(0, 200));
    if (lines.size() > 5) lines.erase(lines.begin());
  }
  std::string s;
  for (const std::string& l : lines) s += (s.empty() ? "" : " / ") + l;
  return s;
}

std::string failure_reason(const std::optional<TaskState>& t, const fs::path& root,
                           const fs::path& log) {
  std::string s;
  if (t) {
    s = "Slurm: " + t->state;
    if (!t->exit_code.empty()) s += ", exit code " + t->exit_code;
    if (!t->reason.empty() && t->reason != "None") s += ", reason " + t->reason;
  } else {
    s = "the task ended without writing its trial";
  }
  std::string why;
  const std::string tail = log_tail(root, log, why);
  if (!why.empty()) return s + " (log " + log.string() + " not read: " + why + ")";
  s += tail.empty() ? " (no log at " + log.string() + ")" : "; log: " + tail;
  return s;
}

struct Manifest {
  std::string sweep_uuid, sweep_name, db, job;
  int64_t sweep_id = 0;
  struct Trial {
    std::string key, name, uuid, config_json;
  };
  std::vector<Trial> trials;
};

Manifest read_manifest(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw std::runtime_error("no sweep folder at " + dir.string());
  if (!fs::is_directory(dir, ec)) {
    throw std::runtime_error(dir.string() + " is not a folder (give the folder `fp8wb sweep " +
                             "--slurm` wrote)");
  }
  const fs::path file = dir / kSweepManifest;
  if (!fs::exists(file, ec)) {
    throw std::runtime_error(dir.string() + " holds no " + kSweepManifest +
                             ": not a folder that `fp8wb sweep --slurm` submitted");
  }
  Manifest m;
  // Every problem in words that name the field: "sweep.json cannot be read as a sweep's
  // description: field 'trials[2].uuid' is a number, not text".
  const std::string text = read_regular_file(file.string(), 64 << 20);
  try {
    namespace jf = json_fields;
    const json j = jf::parse(text);
    const auto format = j.find("format");
    if (format == j.end() || !format->is_string() ||
        format->get<std::string>() != kSweepManifestFormat) {
      throw std::invalid_argument(std::string("its field 'format' is not \"") +
                                  kSweepManifestFormat +
                                  "\": not a file `fp8wb sweep --slurm` wrote");
    }
    m.sweep_uuid = jf::text(j, "sweep_uuid");
    m.sweep_name = jf::text(j, "sweep_name");
    m.sweep_id = jf::whole(j, "sweep_id");
    m.db = jf::text(j, "db");
    m.job = jf::text(j, "job");
    const json& trials = jf::items(j, "trials");
    for (size_t i = 0; i < trials.size(); ++i) {
      const std::string at = "trials[" + std::to_string(i) + "]";
      const json& config = jf::field(trials[i], "config", at);
      try {
        parse_run_config(config.dump());  // read when its task fails: checked now
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument("field '" + at + ".config': " + e.what());
      }
      m.trials.push_back({jf::text(trials[i], "key", at), jf::text(trials[i], "name", at),
                          jf::text(trials[i], "uuid", at), config.dump()});
    }
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(file.string() +
                             " cannot be read as a sweep's description: " + e.what());
  }
  return m;
}

// Without --db, the database sweep.json names (the one the sweep was submitted from) is
// collected into only where it is there already, an SQLite database: a path written in
// the folder never makes folders or a database anywhere.
void check_named_database(const fs::path& dir, const Manifest& m) {
  std::error_code ec;
  const std::string named = m.db.size() > 200 ? m.db.substr(0, 200) + "…" : m.db;
  const std::string manifest = (dir / kSweepManifest).string();
  if (m.db.empty() || !fs::path(m.db).is_absolute()) {
    throw std::runtime_error(manifest + " names the database '" + named +
                             "', not an absolute path: give the database to collect into "
                             "(--db); nothing was created");
  }
  if (!fs::exists(m.db, ec)) {
    throw std::runtime_error(manifest + " names the database " + named +
                             ", which is not there: give the database the sweep was submitted "
                             "from (--db); nothing was created");
  }
  if (sqlite_database_at(m.db) != m.db) {
    throw std::runtime_error(manifest + " names the database " + named +
                             ", which is not an SQLite database: give the database the sweep "
                             "was submitted from (--db); nothing was written");
  }
}

bool run_done(const RunInfo& r) {
  return r.status == RunStatus::Finished || r.status == RunStatus::Stopped ||
         r.status == RunStatus::Diverged;
}

// One collection: the folder, its sweep in the database, the runs there, what Slurm says;
// collect() looks at every trial, into `c`.
struct Collector {
  fs::path dir, root;
  Manifest m;
  std::unique_ptr<RunStore> store;
  SweepInfo sweep;
  std::map<std::string, RunInfo> have;  // by identity
  SlurmView slurm;
  SweepCollection c;

  // A trial as it stands, with its paths and its task.
  struct Trial {
    size_t i = 0;
    const Manifest::Trial* t = nullptr;
    fs::path db, log;
    std::optional<TaskState> task;
    bool task_active = false, task_ended = false;
    const RunInfo* existing = nullptr;  // the database's run of its identity
  };

  void collect(const std::function<void(size_t, size_t)>& progress);
  CollectedTrial collect_trial(const Trial& tr);
  CollectedTrial import_trial(const Trial& tr);
  CollectedTrial without_database(const Trial& tr);
  void problem(const Trial& tr, const std::string& what) {
    c.problems.push_back("trial " + std::to_string(tr.i) + " (" + tr.t->key + "): " + what);
  }
};

void Collector::collect(const std::function<void(size_t, size_t)>& progress) {
  for (size_t i = 0; i < m.trials.size(); ++i) {
    if (progress && i > 0) progress(i, m.trials.size());
    Trial tr;
    tr.i = i;
    tr.t = &m.trials[i];
    tr.db = dir / "trials" / (std::to_string(i) + ".sqlite");
    tr.log = dir / "logs" / (std::to_string(i) + ".log");
    if (const auto it = slurm.tasks.find(static_cast<long>(i)); it != slurm.tasks.end())
      tr.task = it->second;
    tr.task_active = tr.task && active_state(tr.task->state);
    tr.task_ended = slurm.asked && !tr.task_active;
    if (const auto it = have.find(tr.t->uuid); it != have.end()) tr.existing = &it->second;
    c.trials.push_back(collect_trial(tr));
  }
}

CollectedTrial Collector::collect_trial(const Trial& tr) {
  CollectedTrial row{tr.t->key, "", "", 0};
  if (tr.existing && run_done(*tr.existing)) {
    row.state = "collected before";
    row.run = tr.existing->id;
    return row;
  }
  // The trial's database is read only inside the folder (a link out of it is refused,
  // naming it), and only where it is a regular file.
  std::error_code ec;
  std::string refused = outside_folder(root, tr.db);
  if (refused.empty() && fs::exists(tr.db, ec) && !fs::is_regular_file(tr.db, ec))
    refused = tr.db.string() + " is not a regular file: not read";
  if (!refused.empty()) {
    row.state = "error";
    row.message = refused;
    problem(tr, refused);
    return row;
  }
  if (fs::exists(tr.db, ec)) return import_trial(tr);
  return without_database(tr);
}

// A trial's database: its run imported where it ended (or its task did), else waited for.
CollectedTrial Collector::import_trial(const Trial& tr) {
  const Manifest::Trial& t = *tr.t;
  CollectedTrial row{t.key, "", "", 0};
  try {
    std::optional<RunInfo> run;
    auto trial = RunStore::open_read_only(tr.db.string());
    const std::vector<RunInfo> runs = trial->runs();
    for (const RunInfo& r : runs) {
      if (r.uuid == t.uuid) run = r;
    }
    if (!run) {
      std::string held = runs.empty() ? "no run" : "run \"" + runs.front().name + "\"";
      throw std::runtime_error("it holds " + held + ", not this sweep's trial " + t.key +
                               " (a database from another sweep?)");
    }
    ImportOptions io;
    io.uuid = t.uuid;
    io.parent_sweep = sweep.id;
    io.name = t.name;
    const bool ended = run->status != RunStatus::Running && run->status != RunStatus::Paused &&
                       run->status != RunStatus::Interrupted;
    if (!ended) {
      if (!tr.task_ended) {
        row.state = tr.task ? "running" : "running?";
        row.message = counted(run->last_step + 1, "step") + " done";
        ++c.waiting;
        return row;
      }
      // The cluster ended the task before the trial ended its run (a time limit, a
      // node lost, the task killed).
      io.status = RunStatus::Failed;
      io.message =
          "the trial did not finish on the cluster: " + failure_reason(tr.task, root, tr.log);
    }
    if (tr.existing && !io.status && run->status == tr.existing->status &&
        run->last_step <= tr.existing->last_step) {
      row.state = "collected before";
      row.run = tr.existing->id;
      return row;
    }
    const ImportReport rep = store->import_runs(tr.db.string(), io);
    row.run = rep.run_ids.empty() ? 0 : rep.run_ids.front();
    const bool changed = rep.added + rep.updated > 0;
    c.added += changed ? 1 : 0;
    const RunStatus st = io.status ? *io.status : run->status;
    row.state = changed ? std::string(run_status_name(st)) : "collected before";
    if (st == RunStatus::Failed) row.message = io.status ? io.message : run->message;
  } catch (const std::exception& e) {
    if (tr.task_active) {
      // A task that has only begun its database, or one written on another node that
      // this one cannot read while it is written: judged when the task has ended.
      row.state = "running";
      row.message = std::string("not readable yet: ") + e.what();
      ++c.waiting;
    } else {
      row.state = "error";
      row.message = tr.db.string() + ": " + e.what();
      problem(tr, row.message);
    }
  }
  return row;
}

// No trial database (yet): collected before, still to come, or a task that ended without
// a trial, recorded as a failed run with Slurm's reason.
CollectedTrial Collector::without_database(const Trial& tr) {
  const Manifest::Trial& t = *tr.t;
  CollectedTrial row{t.key, "", "", 0};
  if (tr.existing) {
    row.state = "collected before";  // recorded as failed by an earlier collection
    row.run = tr.existing->id;
    row.message = tr.existing->message;
  } else if (tr.task_active) {
    row.state = tr.task->state == "PENDING" ? "pending" : "running";
    if (!tr.task->reason.empty() && tr.task->reason != "None") row.message = tr.task->reason;
    ++c.waiting;
  } else if (!slurm.asked) {
    row.state = "unknown";
    row.message = "no trial database yet, and Slurm cannot be asked here";
    ++c.waiting;
  } else {
    const std::string reason = failure_reason(tr.task, root, tr.log);
    RunConfig cfg = parse_run_config(t.config_json);
    row.run =
        store->create_run(t.name, RunKind::SweepTrial, run_config_json(cfg), "", sweep.id, t.uuid);
    store->set_status(row.run, RunStatus::Failed, reason);
    store->flush();
    row.state = "failed";
    row.message = reason;
    ++c.added;
  }
  return row;
}

}  // namespace

SweepNotInDatabase::SweepNotInDatabase(std::string folder_, std::string sweep_name_,
                                       std::string submitted_from_, std::string database_)
    : std::runtime_error("the sweep of " + folder_ + " (\"" + sweep_name_ + "\", submitted from " +
                         submitted_from_ + ") is not in " + database_ +
                         ": collect it into the database it was submitted from (--db)"),
      folder(std::move(folder_)),
      sweep_name(std::move(sweep_name_)),
      submitted_from(std::move(submitted_from_)),
      database(std::move(database_)) {}

SweepCollection collect_sweep_folder(const std::string& dir_text, const std::string& db,
                                     const std::function<void(size_t, size_t)>& progress) {
  Collector k;
  k.dir = fs::absolute(dir_text).lexically_normal();
  k.m = read_manifest(k.dir);
  std::error_code ec;
  k.root = fs::canonical(k.dir, ec);
  if (ec)
    throw std::runtime_error("cannot read the sweep folder " + k.dir.string() + ": " +
                             ec.message());
  if (db.empty()) check_named_database(k.dir, k.m);
  k.store = RunStore::open(db.empty() ? k.m.db : db);
  std::optional<SweepInfo> sweep;
  for (const SweepInfo& s : k.store->sweeps()) {
    if (s.uuid == k.m.sweep_uuid) sweep = s;
  }
  if (!sweep) throw SweepNotInDatabase(k.dir.string(), k.m.sweep_name, k.m.db, k.store->path());
  k.sweep = *sweep;
  for (RunInfo& r : k.store->runs()) k.have.emplace(r.uuid, std::move(r));
  k.slurm = ask_slurm(k.m.job);
  k.collect(progress);
  // Every trial has its result: the sweep is complete. A trial whose database could not be
  // read (damaged, another sweep's) has none yet: it can be run again and collected.
  SweepCollection& c = k.c;
  const SweepStatus status =
      c.waiting == 0 && c.problems.empty() ? SweepStatus::Finished : SweepStatus::Running;
  if (k.sweep.status != status || !k.sweep.unknown_status.empty())
    k.store->set_sweep_status(k.sweep.id, status);
  k.store->flush();

  if (progress) progress(k.m.trials.size(), k.m.trials.size());
  c.sweep_id = k.sweep.id;
  c.sweep_name = k.m.sweep_name;
  c.job = k.m.job;
  c.status = status;
  c.db = k.store->path();
  c.slurm_asked = k.slurm.asked;
  c.slurm_source = k.slurm.source;
  return std::move(c);
}

}  // namespace fp8wb
