// Torch translation unit: the ranks of a data-parallel run (distributed.h,
// distributed_group.h): where this process stands, from the environment, and its process
// group through LibTorch's c10d (TCPStore rendezvous; ProcessGroupGloo for CPU tensors,
// ProcessGroupNCCL for CUDA tensors where the LibTorch has it).
#include "fp8wb/core/train/distributed.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "distributed_group.h"
#include "fp8wb/core/config/run_config.h"

// The c10d headers declare their process groups only where the LibTorch was built with
// them; Debian's and PyTorch's LibTorch both ship Gloo (its headers: Debian's libgloo-dev).
#if __has_include(<gloo/context.h>)
#define FP8WB_C10D_GLOO 1
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#if defined(FP8WB_TORCH_CUDA) && __has_include(<nccl.h>) && \
    __has_include(<torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>)
#define FP8WB_C10D_NCCL 1
#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace fp8wb {
namespace {

int env_int(const std::function<const char*(const char*)>& getenv, const char* name, int lo, int hi,
            int fallback) {
  const char* v = getenv(name);
  if (!v || !*v) return fallback;
  errno = 0;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (errno != 0 || *end != '\0' || n < lo || n > hi) {
    throw std::invalid_argument(std::string("the environment variable ") + name + " is \"" + v +
                                "\"; it must be a whole number from " + std::to_string(lo) +
                                " to " + std::to_string(hi));
  }
  return static_cast<int>(n);
}

// Slurm's leading count of a per-node list such as "2(x3),1".
int leading_count(const char* v, int fallback) {
  if (!v) return fallback;
  const int n = std::atoi(v);
  return n > 0 ? n : fallback;
}

bool loopback(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

std::string cause(const std::exception& e) {
  if (const auto* c = dynamic_cast<const c10::Error*>(&e))
    return without_backtrace(c->what_without_backtrace());
  return without_backtrace(e.what());
}

// The store's making gave up on: the message is the whole story.
struct StoreWaitError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The TCPStore, made on a thread of its own. A rank that reached a port where something
// other than rank 0 listens waits in the store's handshake for an answer that never comes,
// past the store's own timeout and deaf to signals; and rank 0 waits there for the others.
// The caller gives up after `limit`, or as soon as `stop` is set, and leaves the thread to
// the process's exit.
c10::intrusive_ptr<c10d::Store> open_store(const RankInfo& info, const c10d::TCPStoreOptions& so,
                                           std::chrono::milliseconds limit,
                                           const std::atomic<bool>* stop,
                                           const std::string& where) {
  struct State {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    c10::intrusive_ptr<c10d::Store> store;
    std::exception_ptr error;
  };
  auto st = std::make_shared<State>();
  std::thread([st, addr = info.master_addr, so] {
    c10::intrusive_ptr<c10d::Store> s;
    std::exception_ptr e;
    try {
      s = c10::make_intrusive<c10d::TCPStore>(addr, so);
    } catch (...) {
      e = std::current_exception();
    }
    const std::lock_guard<std::mutex> lock(st->m);
    st->store = std::move(s);
    st->error = e;
    st->done = true;
    st->cv.notify_all();
  }).detach();
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::unique_lock<std::mutex> lock(st->m);
  while (!st->done) {
    if (stop && stop->load()) {
      throw StoreWaitError("rank " + std::to_string(info.rank) +
                           ": stopped while waiting for the other ranks at " + where);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      const std::string seconds = std::to_string(limit.count() / 1000) + " s";
      throw StoreWaitError(info.rank == 0
                               ? "rank 0 waited " + seconds + " at " + where +
                                     " for the other ranks, which neither came nor failed"
                               : "rank " + std::to_string(info.rank) + " reached " + where +
                                     " but got no answer from rank 0 within " + seconds +
                                     ": another program may be listening on that port; give the "
                                     "ranks a free one with MASTER_PORT (or --master-port)");
    }
    st->cv.wait_for(lock, std::chrono::milliseconds(100));
  }
  if (st->error) std::rethrow_exception(st->error);
  return st->store;
}

// Ranks that disagree on how many there are, or on their config: said by each of them, in
// those words.
struct WorldSizeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::vector<uint8_t> bytes_of(const std::string& s) {
  return {s.begin(), s.end()};
}

std::vector<uint8_t> bytes_of(int n) {
  return bytes_of(std::to_string(n));
}

std::string text_of(const std::vector<uint8_t>& v) {
  return std::string(v.begin(), v.end());
}

int int_of(const std::vector<uint8_t>& v) {
  return std::atoi(text_of(v).c_str());
}

// A config value as a message shows it: JSON, cut to 40 bytes.
std::string shown_value(const nlohmann::json& v) {
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 40) + "...";
  return s;
}

// The fields where two configs (JSON objects) differ, "steps 20 at rank 1, 10 at rank 0"
// (`a_is`, `b_is`: "here", "at rank 1"), at most five, in the fields' order; empty where
// they agree.
std::string config_difference(const std::string& a, const std::string& b, const std::string& a_is,
                              const std::string& b_is) {
  if (a == b) return {};
  const auto ja = nlohmann::json::parse(a, nullptr, false);
  const auto jb = nlohmann::json::parse(b, nullptr, false);
  if (!ja.is_object() || !jb.is_object()) return "the configs differ";
  std::vector<std::string> keys;
  for (const auto& [k, v] : ja.items()) {
    if (!jb.contains(k) || jb[k] != v) keys.push_back(k);
  }
  for (const auto& [k, v] : jb.items()) {
    if (!ja.contains(k)) keys.push_back(k);
  }
  if (keys.empty()) return {};
  std::string out;
  for (size_t i = 0; i < keys.size() && i < 5; ++i) {
    const std::string& k = keys[i];
    out += (i ? "; " : "") + k + " " + (ja.contains(k) ? shown_value(ja[k]) : "(none)") + " " +
           a_is + ", " + (jb.contains(k) ? shown_value(jb[k]) : "(none)") + " " + b_is;
  }
  if (keys.size() > 5) out += "; and " + std::to_string(keys.size() - 5) + " more";
  return out;
}

// Before the process group forms (where ranks of different world sizes fail inside Gloo's
// address exchange, in words about byte counts, or wait for a rank that never comes; and
// ranks of different models or batches abort inside Gloo, or train apart): every other
// rank puts its config and world size in the store and compares rank 0's with them; rank
// 0 compares theirs with its own. Each wait is bounded by the ranks' timeout.
void check_world_size(c10d::Store& store, const RankInfo& info, std::chrono::milliseconds timeout,
                      const std::string& config) {
  const bool slurm = info.source == "SLURM_PROCID";
  const auto with = [slurm](int n) {
    return (slurm ? "a task count of " : "WORLD_SIZE=") + std::to_string(n);
  };
  const std::string fix =
      std::string(": start every rank with the same ") + (slurm ? "task count" : "WORLD_SIZE");
  const std::string same_config =
      ": start every rank with the same config (fields, --set and config file)";
  const std::string rank0_key = "fp8wb/world_size/0", rank0_config = "fp8wb/config/0";
  if (info.rank == 0) {
    store.set(rank0_config, bytes_of(config));
    store.set(rank0_key, bytes_of(info.world));
    // One rank at a time, so that a rank that disagrees is named without waiting for
    // ranks that it did not count.
    for (int r = 1; r < info.world; ++r) {
      const std::string key = "fp8wb/world_size/" + std::to_string(r);
      store.wait({key}, timeout);
      const int theirs = int_of(store.get(key));
      if (theirs != info.world) {
        throw WorldSizeError("rank 0: rank " + std::to_string(r) + " was started with " +
                             with(theirs) + " but this rank with " + std::to_string(info.world) +
                             fix);
      }
      // Put there before the world size (which says the rank's keys are all there).
      const std::string differs =
          config_difference(text_of(store.get("fp8wb/config/" + std::to_string(r))), config,
                            "at rank " + std::to_string(r), "here");
      if (!differs.empty()) {
        throw WorldSizeError("rank 0: rank " + std::to_string(r) +
                             "'s config differs from this rank's: " + differs + same_config);
      }
    }
    return;
  }
  // Rank 0's first (it waits for rank 0 to put it there), then this rank's own: rank 0,
  // which may stop as soon as it reads this one, cannot take the store away before it.
  const int rank0 = int_of(store.get(rank0_key));
  const std::string config0 = text_of(store.get(rank0_config));
  store.set("fp8wb/config/" + std::to_string(info.rank), bytes_of(config));
  store.set("fp8wb/world_size/" + std::to_string(info.rank), bytes_of(info.world));
  if (rank0 != info.world) {
    throw WorldSizeError("rank " + std::to_string(info.rank) + ": this rank was started with " +
                         with(info.world) + " but rank 0 with " + std::to_string(rank0) + fix);
  }
  const std::string differs = config_difference(config, config0, "here", "at rank 0");
  if (!differs.empty()) {
    throw WorldSizeError("rank " + std::to_string(info.rank) +
                         ": this rank's config differs from rank 0's: " + differs + same_config);
  }
}

}  // namespace

RankInfo rank_info_from_env(const std::function<const char*(const char*)>& getenv) {
  constexpr int kMaxRanks = 65536;
  RankInfo r;
  const char* rank = getenv("RANK");
  const char* world = getenv("WORLD_SIZE");
  // Slurm describes a job step's tasks (srun); its batch script is step "batch" and no rank.
  const char* step = getenv("SLURM_STEP_ID") ? getenv("SLURM_STEP_ID") : getenv("SLURM_STEPID");
  const bool slurm = getenv("SLURM_PROCID") && step && std::string(step) != "4294967294" &&
                     std::string(step) != "batch";
  if ((rank && *rank) || (world && *world)) {
    if (!(rank && *rank) || !(world && *world)) {
      throw std::invalid_argument(
          std::string("the environment sets ") +
          (rank && *rank ? "RANK but not WORLD_SIZE" : "WORLD_SIZE but not RANK") +
          "; a launcher sets both");
    }
    r.world = env_int(getenv, "WORLD_SIZE", 1, kMaxRanks, 1);
    r.rank = env_int(getenv, "RANK", 0, r.world - 1, 0);
    r.local_rank = env_int(getenv, "LOCAL_RANK", 0, r.world - 1, r.rank);
    r.local_world = env_int(getenv, "LOCAL_WORLD_SIZE", 1, r.world, r.world);
    r.source = "RANK";
  } else if (slurm) {
    r.world = env_int(getenv, "SLURM_STEP_NUM_TASKS", 1, kMaxRanks,
                      env_int(getenv, "SLURM_NTASKS", 1, kMaxRanks, 1));
    r.rank = env_int(getenv, "SLURM_PROCID", 0, r.world - 1, 0);
    r.local_rank = env_int(getenv, "SLURM_LOCALID", 0, r.world - 1, 0);
    r.local_world = std::min(r.world, leading_count(getenv("SLURM_STEP_TASKS_PER_NODE"), r.world));
    r.source = "SLURM_PROCID";
    if (const char* a = getenv("SLURM_LAUNCH_NODE_IPADDR"); a && *a) r.master_addr = a;
  } else {
    return r;
  }
  if (const char* a = getenv("MASTER_ADDR"); a && *a) r.master_addr = a;
  r.master_port = env_int(getenv, "MASTER_PORT", 1, 65535, r.master_port);
  return r;
}

RankInfo rank_info_from_env() {
  return rank_info_from_env([](const char* n) { return std::getenv(n); });
}

bool distributed_backend_available(const std::string& backend) {
#if defined(FP8WB_C10D_GLOO)
  if (backend == "gloo") return true;
#endif
#if defined(FP8WB_C10D_NCCL)
  if (backend == "nccl") return true;
#endif
  (void)backend;
  return false;
}

namespace dist {

struct RankGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  // The process group's allreduce (c10d's base class differs between LibTorch versions:
  // ProcessGroup in 1.13, Backend since 2.0; the concrete groups have the same calls).
  std::function<c10::intrusive_ptr<c10d::Work>(std::vector<at::Tensor>&,
                                               const c10d::AllreduceOptions&)>
      allreduce;
  std::function<c10::intrusive_ptr<c10d::Work>(std::vector<std::vector<at::Tensor>>&,
                                               std::vector<at::Tensor>&,
                                               const c10d::AllgatherOptions&)>
      allgather;
  const char* backend = "";
  std::chrono::milliseconds timeout{0};
};

RankGroup::RankGroup(RankInfo info, std::unique_ptr<Impl> impl)
    : info_(std::move(info)), impl_(std::move(impl)) {}

RankGroup::~RankGroup() = default;

std::unique_ptr<RankGroup> RankGroup::connect(const RankInfo& info, const torch::Device& device,
                                              std::chrono::milliseconds timeout,
                                              const std::atomic<bool>* stop,
                                              const std::string& config) {
  auto impl = std::make_unique<Impl>();
  impl->timeout = timeout;
  const std::string where = info.master_addr + ":" + std::to_string(info.master_port);
  const std::string seconds = std::to_string(timeout.count() / 1000) + " s";
  // The first meeting's bound: the store waits up to `timeout` for every rank to reach
  // rank 0 (and then lets rank 0 go on), the group's formation up to `timeout` again.
  const std::string met =
      std::to_string(2 * timeout.count() / 1000) + " s (the ranks' timeout of " + seconds +
      " twice: once for every rank to reach rank 0, once for the group to form)";
  const std::string me = "rank " + std::to_string(info.rank);
  if (device.is_cuda()) {
#if !defined(FP8WB_C10D_NCCL)
    throw std::runtime_error(
        me + ": ranks on GPUs exchange gradients through NCCL, which this build's LibTorch " +
        "does not have; use device=cpu (Gloo)");
#else
    if (!torch::cuda::is_available() || torch::cuda::device_count() == 0)
      throw std::runtime_error(me + ": NCCL was asked for (device " + device.str() +
                               "), but no GPU is visible; use device=cpu (Gloo)");
#endif
  }
#if !defined(FP8WB_C10D_GLOO)
  if (!device.is_cuda()) {
    throw std::runtime_error(me +
                             ": ranks on CPUs exchange gradients through Gloo, whose headers "
                             "this build did not have (Debian: libgloo-dev); rebuild with them");
  }
#endif
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(info.master_port);
  so.isServer = info.rank == 0;
  so.numWorkers = static_cast<size_t>(info.world);
  so.waitWorkers = true;
  so.timeout = timeout;
  try {
    // The store's own waits (connecting, then every rank joining) take up to about twice
    // its timeout; past that, and some slack, it is stuck.
    impl->store = open_store(info, so, 2 * timeout + std::chrono::seconds(10), stop, where);
  } catch (const StoreWaitError&) {
    throw;
  } catch (const std::exception& e) {
    const std::string why = cause(e);
    if (info.rank == 0) {
      const bool in_use = why.find("already in use") != std::string::npos ||
                          why.find("EADDRINUSE") != std::string::npos;
      throw std::runtime_error(
          "rank 0 cannot listen for the other ranks at " + where + ": " +
          (in_use ? "the port is in use by another process; choose a free one with "
                    "MASTER_PORT (or --master-port)"
                  : why + " (waited " + seconds + " for " + std::to_string(info.world - 1) +
                        " other rank(s))"));
    }
    throw std::runtime_error(me + " could not reach rank 0 at " + where + " within " + seconds +
                             ": " + why);
  }
  try {
    check_world_size(*impl->store, info, timeout, config);
  } catch (const WorldSizeError&) {
    throw;
  } catch (const std::exception& e) {
    throw std::runtime_error(me + ": the process group of " + std::to_string(info.world) +
                             " ranks could not be formed within " + met + ": " + cause(e));
  }
  try {
    if (device.is_cuda()) {
#if defined(FP8WB_C10D_NCCL)
      auto opts = c10d::ProcessGroupNCCL::Options::create();
      opts->timeout = timeout;
      auto pg =
          c10::make_intrusive<c10d::ProcessGroupNCCL>(impl->store, info.rank, info.world, opts);
      impl->backend = "nccl";
      impl->allreduce = [pg](std::vector<at::Tensor>& t, const c10d::AllreduceOptions& o) {
        return pg->allreduce(t, o);
      };
      impl->allgather = [pg](std::vector<std::vector<at::Tensor>>& out, std::vector<at::Tensor>& in,
                             const c10d::AllgatherOptions& o) { return pg->allgather(out, in, o); };
#endif
    } else {
#if defined(FP8WB_C10D_GLOO)
      auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
      const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
      if (ifname && *ifname) {
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
      } else if (loopback(info.master_addr)) {
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      } else {
        opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      }
      auto pg =
          c10::make_intrusive<c10d::ProcessGroupGloo>(impl->store, info.rank, info.world, opts);
      impl->backend = "gloo";
      impl->allreduce = [pg](std::vector<at::Tensor>& t, const c10d::AllreduceOptions& o) {
        return pg->allreduce(t, o);
      };
      impl->allgather = [pg](std::vector<std::vector<at::Tensor>>& out, std::vector<at::Tensor>& in,
                             const c10d::AllgatherOptions& o) { return pg->allgather(out, in, o); };
#endif
    }
  } catch (const std::exception& e) {
    throw std::runtime_error(me + ": the process group of " + std::to_string(info.world) +
                             " ranks could not be formed within " + met + ": " + cause(e));
  }
  return std::unique_ptr<RankGroup>(new RankGroup(info, std::move(impl)));
}

namespace {

void reduce(RankGroup::Impl& impl, const RankInfo& info, std::vector<at::Tensor>& tensors,
            c10d::ReduceOp op, const char* what) {
  c10d::AllreduceOptions o;
  o.reduceOp = op;
  o.timeout = impl.timeout;
  try {
    impl.allreduce(tensors, o)->wait();
  } catch (const std::exception& e) {
    throw std::runtime_error("rank " + std::to_string(info.rank) + ": exchanging " + what +
                             " with the other ranks failed (a rank ended or stopped answering "
                             "within " +
                             std::to_string(impl.timeout.count() / 1000) + " s): " + cause(e));
  }
}

}  // namespace

void RankGroup::sum(std::vector<at::Tensor>& tensors, const char* what) {
  reduce(*impl_, info_, tensors, c10d::ReduceOp::SUM, what);
}

void RankGroup::max(at::Tensor& t, const char* what) {
  std::vector<at::Tensor> v{t};
  reduce(*impl_, info_, v, c10d::ReduceOp::MAX, what);
}

void RankGroup::all_gather(const at::Tensor& in, std::vector<at::Tensor>& out, const char* what) {
  std::vector<at::Tensor> inputs{in.contiguous()};
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int r = 0; r < info_.world; ++r) outputs[0].push_back(at::empty_like(inputs[0]));
  c10d::AllgatherOptions o;
  o.timeout = impl_->timeout;
  try {
    impl_->allgather(outputs, inputs, o)->wait();
  } catch (const std::exception& e) {
    throw std::runtime_error("rank " + std::to_string(info_.rank) + ": gathering " + what + " (" +
                             std::string(c10::toString(in.scalar_type())) +
                             ") from the other ranks failed: " + cause(e));
  }
  out = std::move(outputs[0]);
}

const char* RankGroup::backend() const {
  return impl_->backend;
}

}  // namespace dist
}  // namespace fp8wb
