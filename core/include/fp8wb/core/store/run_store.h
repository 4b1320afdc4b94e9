// defines: RunInfo, SeriesPoint, BlobRow, StoreError, ImportOptions, ImportReport, RunStore: every
// run in one SQLite file (WAL). One writer thread commits queued batches in transactions; reads use
// their own connection and never block it. The schema is versioned (PRAGMA user_version) and
// migrated forward. Plain types, no torch.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fp8wb/core/metrics.h"

namespace fp8wb {

struct StoreError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Who wrote a run (runs.kind): `fp8wb train` or the GUI, a sweep's trial, a watched
// PyTorch script (the fp8wb Python package), `fp8wb bench`'s store benchmark.
enum class RunKind : uint8_t { Train, SweepTrial, Python, Bench };
struct RunKindEntry {
  RunKind value;
  std::string_view name;  // as stored in the run database and shown
};
inline constexpr RunKindEntry kRunKinds[] = {
    {RunKind::Train, "train"},
    {RunKind::SweepTrial, "sweep-trial"},
    {RunKind::Python, "python"},
    {RunKind::Bench, "bench"},
};
static_assert(names_cover_enum(kRunKinds, RunKind::Bench));
inline std::string_view run_kind_name(RunKind k) {
  return table_name(kRunKinds, k);
}

// A sweep's state (sweeps.status): its trials being run (or collected), all done, or
// stopped before the last.
enum class SweepStatus : uint8_t { Running, Finished, Stopped };
struct SweepStatusEntry {
  SweepStatus value;
  std::string_view name;  // as stored in the run database and shown
};
inline constexpr SweepStatusEntry kSweepStatuses[] = {
    {SweepStatus::Running, "running"},
    {SweepStatus::Finished, "finished"},
    {SweepStatus::Stopped, "stopped"},
};
static_assert(names_cover_enum(kSweepStatuses, SweepStatus::Stopped));
inline std::string_view sweep_status_name(SweepStatus s) {
  return table_name(kSweepStatuses, s);
}

struct RunInfo {
  int64_t id = 0;
  std::string name;
  // Parsed from its stored name, as the status is. A kind this fp8wb does not know reads
  // as Train, with the name in unknown_kind (shown as "unknown (NAME)" by run_kind_text()).
  RunKind kind = RunKind::Train;
  std::string unknown_kind;  // empty where the kind was read, else as stored
  // Parsed from its stored name. A name this fp8wb does not know reads as Failed (never as
  // finished), with the name in unknown_status and the message saying so: the run is
  // listed and can be deleted, and the other runs read as ever.
  RunStatus status = RunStatus::Running;
  std::string unknown_status;  // empty where the status was read, else as stored
  std::string config_json, device, started_at, ended_at, message;
  int64_t parent_sweep = 0;  // 0: none
  int64_t last_step = -1;    // the last step with scalars
  // status is 'running' or 'paused' and the process writing the run is alive (on this
  // host; a run written on another host counts as live while its status says so). A run
  // whose writer died without ending it reads as 'interrupted', also where the database
  // is open read-only and nothing can be marked.
  bool live = false;
  // The process that created the run (on the host that wrote it; 0 where none is stored).
  int64_t writer_pid = 0;
  // The run's identity across databases (a UUID, given when the run is created; runs of
  // a file from before identities were stored get one derived from their row): what
  // import_runs() recognises a run by.
  std::string uuid;
};

// Where a reader of a run has got to: read_new() returns only what was committed since.
struct RunCursor {
  int64_t scalar_step = -1;  // the last step read of the scalar series (losses, SQNR)
  int64_t tensor_step = -1;  // the last step read of the tensor statistics
  int64_t event_id = 0;      // the last event read
  int64_t rank_step = -1;    // the last step read of every rank's scales (data-parallel)
  int64_t amax_step = -1;    // the last step read of the per-step amax
};

struct SweepInfo {
  int64_t id = 0;
  std::string name, grid_json;
  // Parsed from its stored name. A status this fp8wb does not know reads as Stopped (never
  // as finished), with the name in unknown_status (sweep_status_text(): "unknown (NAME)").
  SweepStatus status = SweepStatus::Running;
  std::string unknown_status;  // empty where the status was read, else as stored
  std::string created_at;
  std::string uuid;  // the sweep's identity across databases
};

// What import_runs() takes from another database.
struct ImportOptions {
  std::string uuid;  // only the run with this identity (empty: every run of the file)
  // Where > 0: the imported runs become trials of this sweep of the target (their own
  // sweep, if any, is not imported), named `name` where that is not empty.
  int64_t parent_sweep = 0;
  std::string name;
  // Where set: the status the imported run ends with, and its message (a run that a
  // cluster killed reads as running in its own file).
  std::optional<RunStatus> status;
  std::string message;
};

struct ImportReport {
  int added = 0;                 // runs new to the target
  int updated = 0;               // runs the target held unfinished and the source further along
  int unchanged = 0;             // runs the target already holds
  std::vector<int64_t> run_ids;  // the target's ids of the source's runs, in its order
};

struct SeriesPoint {
  int64_t step;
  double value;
};

struct BlobRow {
  int64_t step = 0;
  std::string layer, role, kind;  // "error_map" (float per cell, row-major),
                                  // "amax_history" (float, newest first)
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

// A run's recorded per-step amax: amax[i * tensors.size() + j] is tensor j at steps[i].
struct StepAmaxTable {
  std::vector<AmaxTensor> tensors;
  std::vector<int64_t> steps;
  std::vector<float> amax;
};

class RunStore {
 public:
  // Version 2 (runs' and sweeps' identities), 3 (rank_scales: data-parallel runs), 4
  // (amax_tensors, step_amax: every step's amax), 5 (tensor_stats and blobs keyed by step
  // before layer: a step's rows append), or the newest that kTensorStatFields needs (a new
  // statistic's column).
  static constexpr int kSchemaVersion = std::max(5, tensor_stats_schema_version());

  // Opens or creates the database (parent folders too) and migrates it; runs left
  // 'running' or 'paused' by a process that is gone become 'interrupted'. Throws
  // StoreError naming the file and the problem.
  static std::unique_ptr<RunStore> open(const std::string& path);
  // Reads only: no writer thread, nothing migrated, marked or created (no folder, no
  // file; a database in a folder or on a mount this process cannot write is read as it
  // stands, leaving no -wal or -shm behind). Throws StoreError ("no run database at ...").
  static std::unique_ptr<RunStore> open_read_only(const std::string& path);
  // open() where the file can be written, else (an existing file on a read-only mount,
  // another user's file) open_read_only(); *why_read_only then says why writing failed
  // (empty when writable). For the GUI: browse what it cannot write.
  static std::unique_ptr<RunStore> open_or_read_only(const std::string& path,
                                                     std::string* why_read_only = nullptr);
  bool read_only() const;  // writes throw StoreError naming the file
  ~RunStore();             // commits what is queued
  RunStore(const RunStore&) = delete;
  RunStore& operator=(const RunStore&) = delete;

  const std::string& path() const;

  // Writes (queued to the writer thread; create_run waits for its id).
  // `uuid`: the run's identity where the caller chose it (a trial of a sweep on a
  // cluster), else a new one.
  int64_t create_run(const std::string& name, RunKind kind, const std::string& config_json,
                     const std::string& device, int64_t parent_sweep = 0,
                     const std::string& uuid = {});
  void write(const MetricBatch& batch);  // a final batch also sets the run's status
  void write(MetricBatch&& batch);       // the same, without copying the batch
  void set_status(int64_t run_id, RunStatus status, const std::string& message = {});
  // After the process `writer_pid` (on this host) that wrote the run with identity `uuid`
  // has ended: where that run ended 'failed' or 'interrupted', puts `note` in front of
  // its message ("<note>; <message>") and stores it 'failed' (an interrupted one: its
  // writer was killed), in one statement that changes nothing else. For a data-parallel
  // run's launcher, which knows how each rank ended (rank 0 wrote the run).
  // Returns whether such a run was there.
  bool note_how_run_ended(const std::string& uuid, int64_t writer_pid, const std::string& note);
  void rename_run(int64_t run_id, const std::string& name);
  int64_t create_sweep(const std::string& name, const std::string& grid_json);
  void set_sweep_status(int64_t sweep_id, SweepStatus status);
  void delete_run(int64_t run_id);
  // Copies runs from another run database (a GPU server's file) with everything they
  // recorded, and the sweeps they belong to. A run is recognised by its identity: one
  // the target holds is left as it is, unless the target's copy is unfinished (running,
  // interrupted, failed) and the source's is finished or further along, which replaces
  // it; importing the same file twice changes nothing. The source is read whole, in one
  // snapshot, before anything is written, and everything is written in one transaction:
  // a damaged or foreign source throws StoreError naming it and leaves the target as it
  // was. The source may be of an older schema; it is never written.
  ImportReport import_runs(const std::string& source_path, const ImportOptions& options = {});
  // Waits until everything queued is committed; throws StoreError if a write failed
  // (a full disk, say), and later writes keep failing with the same message. What was
  // committed before stays; nothing queued after the failure is written (a run's final
  // status never follows steps that were lost); this process's running runs are marked
  // failed with it.
  // A database that another connection holds locked is no failure: writes wait in a
  // buffer of up to kWriteBufferBytes (a write that would pass it waits for room: the run
  // waits for its database) and the writer tries again with backoff; only a lock held for
  // longer than kLockWaitSeconds fails the writes, saying so.
  void flush();
  static constexpr size_t kWriteBufferBytes = size_t{64} << 20;
  static constexpr int kLockWaitSeconds = 300;  // FP8WB_STORE_LOCK_WAIT_S overrides it
  // Tests: the buffer's size and how long a lock is waited for.
  void set_write_buffer_for_testing(size_t bytes, std::chrono::milliseconds lock_wait);
  // A consumer for the MetricBus that queues every batch here.
  std::shared_ptr<MetricConsumer> consumer();
  // Tests: SQL on the writer connection, in the writer's order ("PRAGMA query_only = 1":
  // the file turns read-only; "PRAGMA max_page_count = 1": the disk fills up). The
  // FP8WB_STORE_MAX_PAGES environment variable caps the file's pages for a whole process.
  void exec_on_writer_for_testing(const std::string& sql);

  // Reads.
  std::vector<RunInfo> runs() const;
  std::optional<RunInfo> run(int64_t id) const;
  std::vector<std::string> series_names(int64_t run_id) const;
  std::vector<SeriesPoint> series(int64_t run_id, const std::string& name) const;
  // The statistics as stored (the fields of kTensorStatFields; no maps or windows: blobs()),
  // ordered by layer, role, step.
  std::vector<TensorMetrics> tensor_stats(int64_t run_id, const std::string& layer = {},
                                          const std::string& role = {}) const;
  std::vector<BlobRow> blobs(int64_t run_id, const std::string& kind = {}) const;
  std::vector<RunEvent> events(int64_t run_id) const;
  // A data-parallel run's amax and scale of every rank (empty for a run of one process),
  // ordered by layer, role, step, rank; `layer` and `role` filter when given.
  std::vector<RankScale> rank_scales(int64_t run_id, const std::string& layer = {},
                                     const std::string& role = {}) const;
  // The amax of every FP8 tensor at every step the run recorded it (schema 4 on; runs
  // made before record none: empty tensors and steps), steps ascending.
  StepAmaxTable step_amax(int64_t run_id) const;
  // Everything of a run committed since `cursor` (from its start with a new cursor), as
  // the batches its trainer published: step scalars, tensor statistics with their maps
  // and amax windows, SQNR, events. Reads one snapshot; advances the cursor. Another
  // process may be writing the run meanwhile (WAL): this is how a run is followed live.
  MetricBatch read_new(int64_t run_id, RunCursor& cursor) const;
  std::vector<SweepInfo> sweeps() const;
  std::optional<SweepInfo> sweep(int64_t id) const;
  std::string integrity_check() const;  // "ok" when the file is sound
  int schema_version() const;

  struct Impl;

 private:
  explicit RunStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The run's status as shown to users: its name, or "unknown (<as stored>)".
std::string run_status_text(const RunInfo& run);
// The run's kind and a sweep's status, likewise.
inline std::string run_kind_text(const RunInfo& run) {
  if (run.unknown_kind.empty()) return std::string(run_kind_name(run.kind));
  return "unknown (" + run.unknown_kind + ")";
}
inline std::string sweep_status_text(const SweepInfo& sweep) {
  if (sweep.unknown_status.empty()) return std::string(sweep_status_name(sweep.status));
  return "unknown (" + sweep.unknown_status + ")";
}

// A run's scalar series as CSV: a header `step,<series>...`, then a row a step (empty
// cells where a series has no value). Throws StoreError.
void write_run_csv(const RunStore& store, int64_t run_id, std::ostream& out);
// A run's tensor statistics as CSV: a header `step,layer,role,<kTensorStatFields but the
// histogram>,<kTensorStatFigures>`, then a row a statistic (by layer, role, step).
void write_tensor_stats_csv(const RunStore& store, int64_t run_id, std::ostream& out);

// A new random identity (a version 4 UUID, lower-case hex).
std::string new_uuid();
// Whether `text` has a UUID's form (8-4-4-4-12 hex digits).
bool is_uuid(const std::string& text);

// $XDG_DATA_HOME/fp8-workbench/runs.sqlite (else ~/.local/share/..., else ./runs.sqlite).
std::string default_database_path();

}  // namespace fp8wb
