// defines: RankInfo, rank_info_from_env(), distributed_backends(): where this process
// stands in a data-parallel run (its rank, the number of ranks, the rendezvous), as
// `fp8wb train --nproc N`, torchrun or Slurm's srun describe it in the environment.
// Plain structs, no torch (the process groups are in core/src/train/distributed.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace fp8wb {

struct RankInfo {
  int rank = 0;        // 0 .. world - 1; rank 0 writes the run
  int world = 1;       // the number of ranks (1: no process group)
  int local_rank = 0;  // the rank on this machine (its GPU with NCCL)
  int local_world = 1;
  std::string master_addr = "127.0.0.1";  // where rank 0's rendezvous store listens
  int master_port = 29500;
  std::string source;  // where the figures came from: "RANK", "SLURM_PROCID" or ""
  bool distributed() const { return world > 1; }
};

// Reads RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (torchrun,
// `fp8wb train --nproc`), else, inside an srun job step, SLURM_PROCID, SLURM_NTASKS,
// SLURM_LOCALID (MASTER_ADDR then defaults to SLURM_LAUNCH_NODE_IPADDR). `getenv` is the
// lookup (tests pass their own). Throws std::invalid_argument naming the variable for a
// value that is not a number or out of range. Without any of them: rank 0 of 1.
RankInfo rank_info_from_env(const std::function<const char*(const char*)>& getenv);
RankInfo rank_info_from_env();

// The process groups this build can make: "gloo" where it was built with Gloo's headers
// (Debian: libgloo-dev), "nccl" with a CUDA LibTorch and NCCL's header.
bool distributed_backend_available(const std::string& backend);

}  // namespace fp8wb
