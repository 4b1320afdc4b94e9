#include "slurm_sweep.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "fp8wb/core/file_io.h"
#include "fp8wb/core/run_config.h"
#include "sweep_command.h"

extern char** environ;

namespace fp8wb::cli {

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

constexpr const char* kManifest = "sweep.json";
constexpr const char* kManifestFormat = "fp8wb Slurm sweep";

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\n')) ++i;
  return s.substr(i);
}

// A word for a POSIX shell, quoted.
std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string this_program() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("fp8wb") : p.string();
}

void write_text(const fs::path& path, const std::string& text) {
  write_file_atomically(path.string(), [&](std::ostream& o) { o << text; });
}

// The folder's files, removed again when sbatch does not take the job.
struct Written {
  std::vector<fs::path> files, folders;
  void undo() {
    std::error_code ec;
    for (auto it = files.rbegin(); it != files.rend(); ++it) fs::remove(*it, ec);
    for (auto it = folders.rbegin(); it != folders.rend(); ++it) fs::remove(*it, ec);
  }
};

// Where Slurm's own words say more than its exit status: the first lines of its error.
std::string slurm_words(const ProgramResult& r) {
  std::string s = trim(r.err.empty() ? r.out : r.err);
  if (s.size() > 400) s = s.substr(0, 400) + "...";
  return s.empty() ? "exit status " + std::to_string(r.status) : s;
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

// The last lines of a task's log, on one line.
std::string log_tail(const fs::path& log) {
  std::ifstream in(log);
  if (!in) return {};
  std::vector<std::string> lines;
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

std::string failure_reason(const std::optional<TaskState>& t, const fs::path& log) {
  std::string s;
  if (t) {
    s = "Slurm: " + t->state;
    if (!t->exit_code.empty()) s += ", exit code " + t->exit_code;
    if (!t->reason.empty() && t->reason != "None") s += ", reason " + t->reason;
  } else {
    s = "the task ended without writing its trial";
  }
  const std::string tail = log_tail(log);
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
  const fs::path file = dir / kManifest;
  if (!fs::exists(file, ec)) {
    throw std::runtime_error(dir.string() + " holds no " + kManifest +
                             ": not a folder that `fp8wb sweep --slurm` submitted");
  }
  Manifest m;
  try {
    const std::string text = read_regular_file(file.string(), 64 << 20);
    const json j = json::parse(text);
    if (j.value("format", "") != kManifestFormat) throw std::runtime_error("not a sweep's file");
    m.sweep_uuid = j.at("sweep_uuid").get<std::string>();
    m.sweep_name = j.at("sweep_name").get<std::string>();
    m.sweep_id = j.at("sweep_id").get<int64_t>();
    m.db = j.at("db").get<std::string>();
    m.job = j.at("job").get<std::string>();
    for (const json& t : j.at("trials")) {
      m.trials.push_back({t.at("key").get<std::string>(), t.at("name").get<std::string>(),
                          t.at("uuid").get<std::string>(), t.at("config").dump()});
    }
  } catch (const std::exception& e) {
    throw std::runtime_error(file.string() +
                             " cannot be read as a sweep's description: " + e.what());
  }
  return m;
}

}  // namespace

int submit_slurm_sweep(const SweepSpec& spec, RunStore& store, const SlurmOptions& opt,
                       bool as_json, std::ostream& out, std::ostream& err) {
  const std::vector<SweepTrial> trials = expand_sweep(spec);  // validated before anything
  if (trials.empty()) throw std::invalid_argument("the sweep has no trials");
  std::error_code ec;
  fs::path dir = opt.dir.empty() ? fs::current_path() / ("fp8wb-sweep-" + new_uuid().substr(0, 8))
                                 : fs::path(opt.dir);
  dir = fs::absolute(dir).lexically_normal();
  if (fs::exists(dir / kManifest, ec)) {
    throw std::runtime_error(dir.string() + " already holds a sweep (" + kManifest +
                             "): give another --slurm-dir");
  }
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
    throw std::runtime_error(dir.string() + " exists and is not a folder");
  }
  Written written;
  for (const fs::path& f : {dir, dir / "trials", dir / "logs"}) {
    if (!fs::exists(f, ec)) {
      if (!fs::create_directory(f, ec)) {
        written.undo();
        throw std::runtime_error("cannot create " + f.string() + ": " + ec.message());
      }
      written.folders.push_back(f);
    }
  }
  std::vector<std::string> uuids;
  try {
    for (size_t i = 0; i < trials.size(); ++i) {
      const fs::path base = dir / "trials" / std::to_string(i);
      uuids.push_back(new_uuid());
      write_text(base.string() + ".json", run_config_json(trials[i].config) + "\n");
      written.files.emplace_back(base.string() + ".json");
      write_text(base.string() + ".uuid", uuids.back() + "\n");
      written.files.emplace_back(base.string() + ".uuid");
    }
    const std::string program = opt.program.empty() ? this_program() : opt.program;
    // sbatch wants a `#!` line first; each task trains its own trial into its own file.
    write_text(dir / "job.sh",
               "#!/bin/sh\n"
               "# One trial of an fp8wb sweep a task: trials/<task>.json into "
               "trials/<task>.sqlite.\n"
               "set -eu\n"
               "dir=" +
                   shell_quote(dir.string()) +
                   "\n"
                   "i=\"$SLURM_ARRAY_TASK_ID\"\n"
                   "db=\"$dir/trials/$i.sqlite\"\n"
                   "# A task that runs again (requeued) trains its trial afresh.\n"
                   "rm -f \"$db\" \"$db-wal\" \"$db-shm\"\n"
                   "read -r uuid < \"$dir/trials/$i.uuid\"\n"
                   "exec " +
                   shell_quote(program) +
                   " train \"$dir/trials/$i.json\" --db \"$db\" --run-uuid \"$uuid\" --quiet\n");
    written.files.push_back(dir / "job.sh");
  } catch (...) {
    written.undo();
    throw;
  }
  std::vector<std::string> sbatch = {"sbatch",
                                     "--parsable",
                                     "--array=0-" + std::to_string(trials.size() - 1),
                                     "--job-name=fp8wb-" + spec.name.substr(0, 40),
                                     "--output=" + (dir / "logs" / "%a.log").string(),
                                     "--chdir=" + dir.string()};
  if (!opt.partition.empty()) sbatch.push_back("--partition=" + opt.partition);
  const int gpus = opt.gpus_per_trial >= 0 ? opt.gpus_per_trial
                                           : (spec.base.device.rfind("cuda", 0) == 0 ? 1 : 0);
  if (gpus > 0) sbatch.push_back("--gres=gpu:" + std::to_string(gpus));
  if (opt.cpus_per_trial > 0)
    sbatch.push_back("--cpus-per-task=" + std::to_string(opt.cpus_per_trial));
  if (!opt.time.empty()) sbatch.push_back("--time=" + opt.time);
  sbatch.push_back((dir / "job.sh").string());
  const ProgramResult r = run_program(sbatch);
  if (!r.started) {
    written.undo();
    throw std::runtime_error(
        "sbatch cannot be run (" + r.err +
        "): submitting a sweep to Slurm needs Slurm's commands on PATH (on a cluster's login "
        "node; here, Debian's slurm-client), and nothing was submitted");
  }
  if (r.status != 0) {
    written.undo();
    throw std::runtime_error("sbatch refused the job: " + slurm_words(r) +
                             " (nothing was submitted or stored)");
  }
  const std::string job = trim(r.out.substr(0, r.out.find(';')));
  if (job.empty() || job.find_first_not_of("0123456789") != std::string::npos) {
    written.undo();
    throw std::runtime_error("sbatch gave no job id (it said: " + slurm_words(r) + ")");
  }
  // The job is in; now the sweep is recorded, and the folder says which it is.
  int64_t sweep_id = 0;
  try {
    sweep_id = store.create_sweep(spec.name, sweep_json(spec));
    json m;
    m["format"] = kManifestFormat;
    m["sweep_uuid"] = store.sweep(sweep_id)->uuid;
    m["sweep_id"] = sweep_id;
    m["sweep_name"] = spec.name;
    m["db"] = fs::absolute(store.path()).lexically_normal().string();
    m["job"] = job;
    m["trials"] = json::array();
    for (size_t i = 0; i < trials.size(); ++i) {
      m["trials"].push_back({{"key", trials[i].key},
                             {"name", trials[i].config.name},
                             {"uuid", uuids[i]},
                             {"config", json::parse(run_config_json(trials[i].config))}});
    }
    write_text(dir / kManifest, m.dump(2) + "\n");
  } catch (const std::exception& e) {
    run_program({"scancel", job});
    throw std::runtime_error(std::string("the sweep could not be recorded (") + e.what() +
                             "); job " + job + " was cancelled");
  }
  if (as_json) {
    out << json{{"sweep", sweep_id},
                {"job", job},
                {"trials", trials.size()},
                {"dir", dir.string()},
                {"db", store.path()}}
               .dump(2)
        << "\n";
  } else {
    out << fmt::format("sweep {}: {} trials submitted to Slurm as job array {}\n", sweep_id,
                       trials.size(), job);
    out << fmt::format("trials and logs: {}\n", dir.string());
    out << fmt::format("collect (any time, again as tasks finish): fp8wb sweep --collect {}\n",
                       dir.string());
  }
  (void)err;
  return 0;
}

int collect_slurm_sweep(const std::string& dir_text, const std::string& db, bool as_json,
                        std::ostream& out, std::ostream& err) {
  const fs::path dir = fs::absolute(dir_text).lexically_normal();
  const Manifest m = read_manifest(dir);
  auto store = RunStore::open(db.empty() ? m.db : db);
  std::optional<SweepInfo> sweep;
  for (const SweepInfo& s : store->sweeps()) {
    if (s.uuid == m.sweep_uuid) sweep = s;
  }
  if (!sweep) {
    throw std::runtime_error("the sweep of " + dir.string() + " (\"" + m.sweep_name +
                             "\", submitted from " + m.db + ") is not in " + store->path() +
                             ": collect it into the database it was submitted from (--db)");
  }
  std::map<std::string, RunInfo> have;  // by identity
  for (RunInfo& r : store->runs()) have.emplace(r.uuid, std::move(r));
  const SlurmView slurm = ask_slurm(m.job);

  struct Row {
    std::string key, state, message;
    int64_t run = 0;
  };
  std::vector<Row> rows;
  std::vector<std::string> problems;
  int added = 0, waiting = 0;
  for (size_t i = 0; i < m.trials.size(); ++i) {
    const Manifest::Trial& t = m.trials[i];
    Row row{t.key, "", "", 0};
    const fs::path trial_db = dir / "trials" / (std::to_string(i) + ".sqlite");
    const fs::path log = dir / "logs" / (std::to_string(i) + ".log");
    std::optional<TaskState> task;
    if (const auto it = slurm.tasks.find(static_cast<long>(i)); it != slurm.tasks.end())
      task = it->second;
    const bool task_active = task && active_state(task->state);
    const bool task_ended = slurm.asked && !task_active;
    const auto existing = have.find(t.uuid);
    auto done = [&](const RunInfo& r) {
      return r.status == RunStatus::Finished || r.status == RunStatus::Stopped ||
             r.status == RunStatus::Diverged;
    };
    if (existing != have.end() && done(existing->second)) {
      row.state = "collected before";
      row.run = existing->second.id;
      rows.push_back(row);
      continue;
    }
    std::error_code ec;
    if (fs::exists(trial_db, ec)) {
      std::optional<RunInfo> run;
      try {
        auto trial = RunStore::open_read_only(trial_db.string());
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
        io.parent_sweep = sweep->id;
        io.name = t.name;
        const bool ended = run->status != RunStatus::Running && run->status != RunStatus::Paused &&
                           run->status != RunStatus::Interrupted;
        if (!ended) {
          if (!task_ended) {
            row.state = task ? "running" : "running?";
            row.message = fmt::format("{} steps done", run->last_step + 1);
            ++waiting;
            rows.push_back(row);
            continue;
          }
          // The cluster ended the task before the trial ended its run (a time limit, a
          // node lost, the task killed).
          io.status = RunStatus::Failed;
          io.message = "the trial did not finish on the cluster: " + failure_reason(task, log);
        }
        if (existing != have.end() && !io.status && run->status == existing->second.status &&
            run->last_step <= existing->second.last_step) {
          row.state = "collected before";
          row.run = existing->second.id;
          rows.push_back(row);
          continue;
        }
        const ImportReport rep = store->import_runs(trial_db.string(), io);
        row.run = rep.run_ids.empty() ? 0 : rep.run_ids.front();
        const bool changed = rep.added + rep.updated > 0;
        added += changed ? 1 : 0;
        const RunStatus st = io.status ? *io.status : run->status;
        row.state = changed ? std::string(run_status_name(st)) : "collected before";
        if (st == RunStatus::Failed) row.message = io.status ? io.message : run->message;
      } catch (const std::exception& e) {
        if (task_active) {
          // A task that has only begun its database, or one written on another node that
          // this one cannot read while it is written: judged when the task has ended.
          row.state = "running";
          row.message = std::string("not readable yet: ") + e.what();
          ++waiting;
        } else {
          row.state = "error";
          row.message = trial_db.string() + ": " + e.what();
          problems.push_back("trial " + std::to_string(i) + " (" + t.key + "): " + row.message);
        }
      }
      rows.push_back(row);
      continue;
    }
    // No trial database (yet).
    if (existing != have.end()) {
      row.state = "collected before";  // recorded as failed by an earlier collection
      row.run = existing->second.id;
      row.message = existing->second.message;
    } else if (task_active) {
      row.state = task->state == "PENDING" ? "pending" : "running";
      if (!task->reason.empty() && task->reason != "None") row.message = task->reason;
      ++waiting;
    } else if (!slurm.asked) {
      row.state = "unknown";
      row.message = "no trial database yet, and Slurm cannot be asked here";
      ++waiting;
    } else {
      // The task ended without a trial: recorded as a failed run with Slurm's reason.
      const std::string reason = failure_reason(task, log);
      RunConfig cfg = parse_run_config(t.config_json);
      row.run =
          store->create_run(t.name, "sweep-trial", run_config_json(cfg), "", sweep->id, t.uuid);
      store->set_status(row.run, RunStatus::Failed, reason);
      store->flush();
      row.state = "failed";
      row.message = reason;
      ++added;
    }
    rows.push_back(row);
  }
  // Every trial has its result: the sweep is complete.
  const std::string status = waiting == 0 ? "finished" : "running";
  if (sweep->status != status) store->set_sweep_status(sweep->id, status);
  store->flush();

  if (as_json) {
    json j;
    j["sweep"] = sweep->id;
    j["job"] = m.job;
    j["status"] = status;
    j["collected"] = added;
    j["waiting"] = waiting;
    j["trials"] = json::array();
    for (const Row& r : rows) {
      j["trials"].push_back({{"key", r.key},
                             {"state", r.state},
                             {"run", r.run ? json(r.run) : json()},
                             {"message", r.message}});
    }
    j["problems"] = problems;
    out << j.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  } else {
    out << fmt::format("sweep {} (\"{}\"), Slurm job {}: {} trials{}\n", sweep->id, m.sweep_name,
                       m.job, m.trials.size(),
                       slurm.asked ? " (states from " + slurm.source + ")" : "");
    out << fmt::format("{:<34} {:<17} {:>6}  {}\n", "trial", "state", "run", "");
    for (const Row& r : rows) {
      out << fmt::format("{:<34} {:<17} {:>6}  {}\n", r.key.substr(0, 34), r.state,
                         r.run ? std::to_string(r.run) : "-", r.message.substr(0, 300));
    }
    bool any = false;
    for (const Row& r : rows) any = any || r.run != 0;
    if (any) {  // the grid's figures so far, as `fp8wb sweep` prints them
      out << "\n";
      print_sweep_summary(*store, sweep->id, out);
    }
    out << fmt::format("{} collected now, {} still to come; sweep {} {} in {}\n", added, waiting,
                       sweep->id, status, store->path());
  }
  for (const std::string& p : problems) err << "fp8wb sweep --collect: " << p << "\n";
  return problems.empty() ? 0 : 1;
}

}  // namespace fp8wb::cli
