// NCCL communicators and the checked NCCL calls of the GPU world. Every NCCL result is checked;
// errors name the call, the communicator and NCCL's own last-error text.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/reduce.h"
#include "runtime/status.h"

namespace kf::gpu {

// Status{} for ncclSuccess, else a device error "<call> on <where>: <text> (<code>)[: <last>]".
Status nccl_status(ncclResult_t r, std::string_view call, std::string_view where,
                   ncclComm_t comm = nullptr);

// NCCL's type for a dtype; nullopt for u16 and i16, which NCCL lacks.
std::optional<ncclDataType_t> nccl_dtype(DType t);
// avg -> ncclAvg (floating dtypes only: the runtime rejects avg on integers).
ncclRedOp_t nccl_op(ReduceOp op);

// One communicator: its group (`members`, global ranks in group-rank order) and this rank's place.
class NcclComm {
 public:
  NcclComm(ncclComm_t comm, int ordinal, std::string label, std::vector<int> members, int rank)
      : comm_(comm),
        ordinal_(ordinal),
        label_(std::move(label)),
        members_(std::move(members)),
        rank_(rank) {}
  ~NcclComm();  // ncclCommDestroy, or nothing after abort()
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  ncclComm_t get() const { return comm_; }
  const std::string& label() const { return label_; }
  const std::vector<int>& members() const { return members_; }
  int rank() const { return rank_; }  // in the group
  int size() const { return static_cast<int>(members_.size()); }
  // "local communicator (ranks 0,1,2,3) on cuda:0"
  std::string where() const;
  // Stops the communicator at once (peers gone, an error, a timeout); pending NCCL work fails.
  void abort();
  // ncclCommGetAsyncError: Status{} while fine (or still in progress).
  Status async_error() const;

 private:
  ncclComm_t comm_;
  int ordinal_;
  std::string label_;
  std::vector<int> members_;
  int rank_;
};

// ncclCommInitRank on the calling thread, device `ordinal` made current first. Blocks until every
// member of the group has called it.
Status init_nccl_comm(int ordinal, const ncclUniqueId& id, int nranks, int rank,
                      std::string_view where, ncclComm_t* out);

}  // namespace kf::gpu
