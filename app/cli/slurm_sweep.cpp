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
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "commands/sweep_command.h"
#include "fp8wb/core/checkpoint/file_io.h"
#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/counted.h"
#include "fp8wb/core/sweep/sweep_collect.h"
#include "table_text.h"

extern char** environ;

namespace fp8wb::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

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

// A database that is not there yet: whether it could be made, said before anything is
// submitted (it is made only once the job is taken). Its folder may be made too, as
// RunStore::open() makes it: the nearest folder that is there must take new files.
void check_can_create(const std::string& db) {
  std::error_code ec;
  fs::path at = fs::absolute(db, ec).parent_path();
  while (!at.empty() && !fs::exists(at, ec) && at != at.parent_path()) at = at.parent_path();
  if (!fs::is_directory(at, ec)) {
    throw std::runtime_error("the run database " + db + " cannot be created: " + at.string() +
                             " is not a folder (nothing was submitted)");
  }
  if (::access(at.c_str(), W_OK | X_OK) != 0) {
    throw std::runtime_error("the run database " + db + " cannot be created: " + at.string() +
                             " is not writable (" + std::strerror(errno) +
                             "; nothing was submitted)");
  }
}

// Where Slurm's own words say more than its exit status: the first lines of its error.
std::string slurm_words(const ProgramResult& r) {
  std::string s = trim(r.err.empty() ? r.out : r.err);
  if (s.size() > 400) s = s.substr(0, 400) + "...";
  return s.empty() ? "exit status " + std::to_string(r.status) : s;
}

}  // namespace

int submit_slurm_sweep(const SweepSpec& spec, const std::string& db, const SlurmOptions& opt,
                       bool as_json, std::ostream& out, std::ostream& err) {
  const std::vector<SweepTrial> trials = expand_sweep(spec);  // validated before anything
  if (trials.empty()) throw std::invalid_argument("the sweep has no trials");
  std::error_code ec;
  // A database that is there is opened now (a damaged file or a folder is refused before
  // anything is submitted); one that is not is created only once sbatch has taken the job.
  std::unique_ptr<RunStore> store;
  const bool db_existed = fs::exists(db, ec) || fs::is_symlink(db, ec);
  if (db_existed) {
    store = RunStore::open(db);
  } else {
    check_can_create(db);
  }
  fs::path dir = opt.dir.empty() ? fs::current_path() / ("fp8wb-sweep-" + new_uuid().substr(0, 8))
                                 : fs::path(opt.dir);
  dir = fs::absolute(dir).lexically_normal();
  if (fs::exists(dir / kSweepManifest, ec)) {
    throw std::runtime_error(dir.string() + " already holds a sweep (" + kSweepManifest +
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
    if (!store) store = RunStore::open(db);
    sweep_id = store->create_sweep(spec.name, sweep_json(spec));
    json m;
    m["format"] = kSweepManifestFormat;
    m["sweep_uuid"] = store->sweep(sweep_id)->uuid;
    m["sweep_id"] = sweep_id;
    m["sweep_name"] = spec.name;
    m["db"] = fs::absolute(store->path()).lexically_normal().string();
    m["job"] = job;
    m["trials"] = json::array();
    for (size_t i = 0; i < trials.size(); ++i) {
      m["trials"].push_back({{"key", trials[i].key},
                             {"name", trials[i].config.name},
                             {"uuid", uuids[i]},
                             {"config", json::parse(run_config_json(trials[i].config))}});
    }
    write_text(dir / kSweepManifest, m.dump(2) + "\n");
  } catch (const std::exception& e) {
    run_program({"scancel", job});
    if (!db_existed) {  // a database made for this sweep goes with it
      store.reset();
      for (const char* ext : {"", "-wal", "-shm", "-journal"}) fs::remove(db + ext, ec);
    }
    throw std::runtime_error(std::string("the sweep could not be recorded (") + e.what() +
                             "); job " + job + " was cancelled");
  }
  if (as_json) {
    out << json{{"sweep", sweep_id},
                {"job", job},
                {"trials", trials.size()},
                {"dir", dir.string()},
                {"db", store->path()}}
               .dump(2)
        << "\n";
  } else {
    out << fmt::format("sweep {}: {} submitted to Slurm as job array {}\n", sweep_id,
                       counted(static_cast<int64_t>(trials.size()), "trial"), job);
    out << fmt::format("trials and logs: {}\n", dir.string());
    out << fmt::format("collect (any time, again as tasks finish): fp8wb sweep --collect {}\n",
                       dir.string());
  }
  (void)err;
  return 0;
}

int collect_slurm_sweep(const std::string& dir_text, const std::string& db, bool as_json,
                        std::ostream& out, std::ostream& err) {
  const SweepCollection c = collect_sweep_folder(dir_text, db);
  if (as_json) {
    json j;
    j["sweep"] = c.sweep_id;
    j["job"] = c.job;
    j["status"] = std::string(sweep_status_name(c.status));
    j["collected"] = c.added;
    j["waiting"] = c.waiting;
    j["trials"] = json::array();
    for (const CollectedTrial& r : c.trials) {
      j["trials"].push_back({{"key", r.key},
                             {"state", r.state},
                             {"run", r.run ? json(r.run) : json()},
                             {"message", r.message}});
    }
    j["problems"] = c.problems;
    out << j.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  } else {
    out << fmt::format("sweep {} (\"{}\"), Slurm job {}: {}{}\n", c.sweep_id, c.sweep_name, c.job,
                       counted(static_cast<int64_t>(c.trials.size()), "trial"),
                       c.slurm_asked ? " (states from " + c.slurm_source + ")" : "");
    out << fmt::format("{:<34} {:<17} {:>6}  {}\n", "trial", "state", "run", "");
    for (const CollectedTrial& r : c.trials) {
      out << fmt::format("{} {:<17} {:>6}  {}\n", fit_column(r.key, 34), r.state,
                         r.run ? std::to_string(r.run) : "-", cut_text(r.message, 300));
    }
    bool any = false;
    for (const CollectedTrial& r : c.trials) any = any || r.run != 0;
    if (any) {  // the grid's figures so far, as `fp8wb sweep` prints them
      out << "\n";
      auto store = RunStore::open_read_only(c.db);
      print_sweep_summary(*store, c.sweep_id, out);
    }
    out << fmt::format("{} collected now, {} still to come; sweep {} {} in {}\n", c.added,
                       c.waiting, c.sweep_id, sweep_status_name(c.status), c.db);
  }
  for (const std::string& p : c.problems) err << "fp8wb sweep --collect: " << p << "\n";
  return c.problems.empty() ? 0 : 1;
}

}  // namespace fp8wb::cli
