// Torch translation units only: the process group of a data-parallel run's ranks
// (c10d: Gloo for CPU tensors, NCCL for CUDA tensors; rendezvous through rank 0's
// TCPStore). The c10d headers stay in distributed.cpp.
#pragma once

#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "fp8wb/core/train/distributed.h"

namespace fp8wb::dist {

class RankGroup {
 public:
  // Rank 0 listens at master_addr:master_port, the others connect; then the process
  // group for `device` (Gloo on the CPU, NCCL on a CUDA device). Every collective that
  // waits longer than `timeout` ends with an error. Throws std::runtime_error with a
  // message naming the rank, the address and the cause (a port in use, rank 0 never
  // reached, NCCL without GPUs, no answer from the port, `stop` set while waiting).
  // `config` (a JSON object: what every rank must share, e.g. the run's config) is
  // compared at the first meeting, before any collective: a rank whose config differs
  // from rank 0's is refused by every rank that sees it, naming the fields (ranks that
  // disagree on the model or batch would otherwise fail inside Gloo, or train apart).
  static std::unique_ptr<RankGroup> connect(const RankInfo& info, const torch::Device& device,
                                            std::chrono::milliseconds timeout,
                                            const std::atomic<bool>* stop = nullptr,
                                            const std::string& config = {});
  ~RankGroup();
  RankGroup(const RankGroup&) = delete;
  RankGroup& operator=(const RankGroup&) = delete;

  const RankInfo& info() const { return info_; }
  // In place, over every rank; `what` names the exchange in an error.
  void sum(std::vector<at::Tensor>& tensors, const char* what);
  void max(at::Tensor& t, const char* what);
  // Every rank's `in` (the same shape and dtype on every rank) into `out`, one tensor a
  // rank, allocated here like `in`. Throws std::runtime_error naming the exchange, or the
  // dtype where the backend has no such type.
  void all_gather(const at::Tensor& in, std::vector<at::Tensor>& out, const char* what);
  // "gloo" or "nccl".
  const char* backend() const;

  struct Impl;

 private:
  RankGroup(RankInfo info, std::unique_ptr<Impl> impl);
  RankInfo info_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fp8wb::dist
