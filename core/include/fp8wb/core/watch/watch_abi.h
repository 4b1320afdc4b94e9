/* defines: the C ABI of libfp8wb_watch.so, which the fp8wb Python package loads with
 * ctypes: a watched run (fp8wb_watch_*: the run store and the project's quantize kernels
 * behind plain pointers and codes) and one quantization's statistics
 * (fp8wb_quantize_stats). No C++ types cross it and no torch is in it: the caller passes
 * a tensor's data pointer, its dtype and shape codes, and its device, so that the one
 * library serves any PyTorch. Every function that can fail returns a negative number or
 * NULL and leaves the reason in fp8wb_last_error() (this thread's). */
#ifndef FP8WB_CORE_WATCH_ABI_H
#define FP8WB_CORE_WATCH_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FP8WB_ABI __attribute__((visibility("default")))

/* Bumped whenever a declaration below changes. */
#define FP8WB_WATCH_ABI_VERSION 3

enum fp8wb_dtype { FP8WB_DTYPE_FLOAT32 = 0, FP8WB_DTYPE_BFLOAT16 = 1 };
enum fp8wb_device { FP8WB_DEVICE_CPU = 0, FP8WB_DEVICE_CUDA = 1 };
enum fp8wb_role { FP8WB_ROLE_INPUT = 0, FP8WB_ROLE_WEIGHT = 1, FP8WB_ROLE_GRAD_OUTPUT = 2 };
/* How a run ends (the run store's statuses of the same names). */
enum fp8wb_end {
  FP8WB_END_FINISHED = 0,
  FP8WB_END_STOPPED = 1,
  FP8WB_END_FAILED = 2,
  FP8WB_END_INTERRUPTED = 3
};

enum fp8wb_error {
  FP8WB_ERROR_ARGUMENT = -1, /* a bad argument or setting, named in the message */
  FP8WB_ERROR_STORE = -2,    /* the run database (unreadable, newer schema, full disk) */
  FP8WB_ERROR_OTHER = -3
};

/* A row-major rows x cols tensor (K = cols): data on `device` (CUDA: device_index, and
 * `stream` a cudaStream_t, NULL for the default stream). */
typedef struct fp8wb_tensor {
  const void* data;
  int32_t dtype;
  int32_t device;
  int32_t device_index;
  int32_t reserved;
  int64_t rows;
  int64_t cols;
  void* stream;
} fp8wb_tensor;

#define FP8WB_HIST_BINS 66

/* One quantization's statistics (numerics.md, "Statistics"): the run store's
 * tensor_stats fields. */
typedef struct fp8wb_stats {
  float amax;
  float scale; /* the first group's */
  uint64_t numel, zeros, nonfinite, underflow, subnormal, saturated;
  double sq_err, sq_sum;
  uint64_t hist[FP8WB_HIST_BINS];
} fp8wb_stats;

typedef struct fp8wb_watch fp8wb_watch;

FP8WB_ABI int fp8wb_abi_version(void);
/* Why the last failing call of this thread failed ("" if none), and what kind of failure
 * it was: FP8WB_ERROR_* (the failing call returns the same negative number). */
FP8WB_ABI const char* fp8wb_last_error(void);
FP8WB_ABI int fp8wb_last_error_code(void);
/* The run database a run goes to when none is named (the GUI's and the CLI's default). */
FP8WB_ABI const char* fp8wb_default_database(void);
/* The devices this build's kernels run on: bit 0 the CPU, bit 1 CUDA. */
FP8WB_ABI int fp8wb_devices(void);

/* Starts a run in the run database at db_path (created if need be). settings_json:
 * {"recipe", "formats", "scaling", "window", "margin", "amax_algo", "stats_interval"} (each
 * optional); config_json: the script's own settings, stored as given; model: its class;
 * device: "cpu", "cuda:0". NULL on failure. */
FP8WB_ABI fp8wb_watch* fp8wb_watch_open(const char* db_path, const char* name,
                                        const char* settings_json, const char* config_json,
                                        const char* model, const char* device);
FP8WB_ABI int64_t fp8wb_watch_run_id(const fp8wb_watch* w);
/* The step being observed, and whether it samples the statistics (1) or not (0). */
FP8WB_ABI int64_t fp8wb_watch_step(const fp8wb_watch* w);
FP8WB_ABI int fp8wb_watch_sampling(const fp8wb_watch* w);
/* Whether observing a tensor between samples does anything (1): delayed scaling's history,
 * or a tensorwise recipe's amax of every step; else (0) only sampled steps need tensors. */
FP8WB_ABI int fp8wb_watch_records_amax(const fp8wb_watch* w);
/* A layer's role at the current step. 0, or -1. A CUDA tensor (where fp8wb_devices() has
 * bit 1) stays on its GPU: its amax is gathered on `stream` and read back without waiting,
 * a sampled step's statistics are taken there; the caller keeps the tensor alive, or lets
 * its allocator reuse it only in the stream's order (PyTorch's caching allocator does). */
FP8WB_ABI int fp8wb_watch_observe(fp8wb_watch* w, const char* layer, int32_t role,
                                  const fp8wb_tensor* x);
/* n tensors of the current step at once, as n calls of fp8wb_watch_observe in order: the
 * caller gathers a step's tensors between samples and hands them over a batch at a time,
 * one call instead of one a tensor. layers[i], roles[i] and xs[i] describe the i-th. */
FP8WB_ABI int fp8wb_watch_observe_many(fp8wb_watch* w, int32_t n, const char* const* layers,
                                       const int32_t* roles, const fp8wb_tensor* xs);
/* A step's scalars (the current step, or an earlier one whose values came later):
 * names[i] = values[i]; "loss", "lr", "grad_norm", "step_ms", ... fill the run's step
 * series, "tokens" gives tokens/s, any other name is stored as the series "scalar/<name>". */
FP8WB_ABI int fp8wb_watch_scalars(fp8wb_watch* w, int64_t step, const char* const* names,
                                  const double* values, int32_t count);
/* Ends the current step: the statistics it took go to the store. */
FP8WB_ABI int fp8wb_watch_next_step(fp8wb_watch* w);
/* An event of the run at the current step: `kind` as the store names it ("started",
 * "layers", "notice": kRunEventKinds in metrics.h); a kind not in that table is stored as
 * given (shown as "unknown (KIND)"). */
FP8WB_ABI int fp8wb_watch_event(fp8wb_watch* w, const char* kind, const char* message);
/* Ends the run (enum fp8wb_end) and waits until the store has it. */
FP8WB_ABI int fp8wb_watch_end(fp8wb_watch* w, int32_t how, const char* message);
/* Frees the watch; a run not ended ends 'interrupted'. */
FP8WB_ABI void fp8wb_watch_close(fp8wb_watch* w);

/* One quantization of x with the project's kernels: scaling ("tensorwise", "rowwise",
 * "1x128", "128x128", "mx") and format ("e4m3fn", "e5m2", ...) by name; scale > 0 quantizes
 * tensorwise with that scale (delayed scaling's), else the recipe's current scaling. */
FP8WB_ABI int fp8wb_quantize_stats(const fp8wb_tensor* x, const char* scaling, const char* format,
                                   int32_t margin, float scale, fp8wb_stats* out);

#ifdef __cplusplus
}
#endif

#endif
