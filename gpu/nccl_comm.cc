#include "gpu/nccl_comm.h"

#include <fmt/format.h>

namespace kf::gpu {

Status nccl_status(ncclResult_t r, std::string_view call, std::string_view where, ncclComm_t comm) {
  if (r == ncclSuccess || r == ncclInProgress) return Status{};
  const char* last = ncclGetLastError(comm);
  return Status(ErrorCode::device,
                fmt::format("{} on {}: {} (code {}){}{}", call, where, ncclGetErrorString(r),
                            static_cast<int>(r), last != nullptr && *last != 0 ? ": " : "",
                            last != nullptr ? last : ""));
}

std::optional<ncclDataType_t> nccl_dtype(DType t) {
  switch (t) {
    case DType::u8:
      return ncclUint8;
    case DType::i8:
      return ncclInt8;
    case DType::u32:
      return ncclUint32;
    case DType::i32:
      return ncclInt32;
    case DType::u64:
      return ncclUint64;
    case DType::i64:
      return ncclInt64;
    case DType::f16:
      return ncclFloat16;
    case DType::bf16:
      return ncclBfloat16;
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::u16:
    case DType::i16:
      return std::nullopt;
  }
  return std::nullopt;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::prod:
      return ncclProd;
    case ReduceOp::min:
      return ncclMin;
    case ReduceOp::max:
      return ncclMax;
    case ReduceOp::avg:
      return ncclAvg;
  }
  return ncclSum;
}

NcclComm::~NcclComm() {
  if (comm_ == nullptr) return;
  (void)cudaSetDevice(ordinal_);
  // Local only: ncclCommFinalize would wait for the group to be globally quiescent, which hangs
  // when a peer has already gone. The owner synchronizes the comm's stream first.
  (void)ncclCommDestroy(comm_);
  comm_ = nullptr;
}

std::string NcclComm::where() const {
  std::string ranks;
  for (std::size_t i = 0; i < members_.size(); ++i) {
    if (i > 0) ranks += ",";
    if (i == 8 && members_.size() > 9) {
      ranks += fmt::format("... {} in all", members_.size());
      break;
    }
    ranks += std::to_string(members_[i]);
  }
  return fmt::format("{} communicator (ranks {}) on cuda:{}", label_, ranks, ordinal_);
}

void NcclComm::abort() {
  if (comm_ == nullptr) return;
  (void)cudaSetDevice(ordinal_);
  (void)ncclCommAbort(comm_);
  comm_ = nullptr;
}

Status NcclComm::async_error() const {
  if (comm_ == nullptr) return Status(ErrorCode::device, where() + ": aborted");
  ncclResult_t async = ncclSuccess;
  if (Status s = nccl_status(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError", where(),
                             comm_);
      !s.ok())
    return s;
  return nccl_status(async, "NCCL (asynchronous error)", where(), comm_);
}

Status init_nccl_comm(int ordinal, const ncclUniqueId& id, int nranks, int rank,
                      std::string_view where, ncclComm_t* out) {
  *out = nullptr;
  const cudaError_t e = cudaSetDevice(ordinal);
  if (e != cudaSuccess) {
    return Status(ErrorCode::device, fmt::format("cudaSetDevice({}) for {}: {}", ordinal, where,
                                                 cudaGetErrorString(e)));
  }
  return nccl_status(ncclCommInitRank(out, nranks, id, rank),
                     fmt::format("ncclCommInitRank(rank {} of {})", rank, nranks), where);
}

}  // namespace kf::gpu
