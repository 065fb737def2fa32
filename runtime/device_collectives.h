// Collectives on device buffers, written against the Device interface (runtime/device.h), so the
// runtime stays free of CUDA.
//
// Device strategies (the `-strategy` names of device-buffer allreduce, parsed case-insensitively):
//   NCCL               NCCL's own allreduce over a communicator of every worker
//                      (gpu/; 16-bit integers go through an NCCL allgather and a fold).
//   NCCL_HIERARCHICAL  NCCL reduce inside each host to its master, the runtime's allreduce across
//                      the host masters over TCP (a binary tree over the masters, as
//                      BINARY_TREE_STAR does across hosts) through pinned host staging, then NCCL
//                      broadcast inside each host: the path KungFu found fastest on multi-GPU
//                      hosts.
//   STAGED             the runtime's own strategy (the engine's current one) on pinned host copies:
//                      device -> host, allreduce over TCP / Unix sockets, host -> device.
//   STAGED:<S>, or any runtime strategy name S (RING_RS_AG, BINARY_TREE_STAR, ...): STAGED with S.
//
// The staged pipeline cuts a buffer into pieces (4 MiB by default): every piece's device -> host
// copy is queued at once on one stream, each piece's host collective starts as soon as its copy
// has landed (while later pieces still copy), and each piece goes back host -> device on a second
// stream as soon as its collective is done, so both copy directions overlap with communication.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/buffer.h"
#include "runtime/device.h"
#include "runtime/engine.h"
#include "runtime/reduce.h"
#include "topology/strategy.h"

namespace kf {

enum class DevicePath : std::uint8_t { nccl, nccl_hierarchical, staged };

struct DeviceStrategy {
  DevicePath path = DevicePath::staged;
  std::optional<StrategyName> host_strategy;  // staged: unset = the engine's current strategy
  bool operator==(const DeviceStrategy&) const = default;
};

// "NCCL", "NCCL_HIERARCHICAL", "STAGED", "STAGED:RING_RS_AG", or a runtime strategy name (staged
// with it). nullopt for anything else.
std::optional<DeviceStrategy> parse_device_strategy(std::string_view name);
std::string device_strategy_name(const DeviceStrategy& s);  // canonical: "STAGED:RING_RS_AG"
// Every name parse_device_strategy accepts, for error messages ("NCCL, NCCL_HIERARCHICAL, ...").
std::string device_strategy_names();

// An allreduce of device memory.
struct DeviceAllreduceOptions {
  std::string name;
  const void* input = nullptr;  // device memory, count elements of dtype
  void* output = nullptr;       // device memory; may be input
  std::size_t count = 0;
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;
  Duration timeout{0};  // each host collective's deadline (zero: the engine's default)
};

// Runs queued device phases in ticket order: a piece takes a ticket when its first phase is
// queued, and its last phase is queued only after every earlier ticket's. Keeps collective calls
// on a shared communicator (or copies on a shared stream) in the same order on every rank.
class PhaseSequencer {
 public:
  std::uint64_t take() { return next_ticket_++; }
  // Runs `phase` now if every earlier ticket's phase has run, else once they have.
  void ready(std::uint64_t ticket, std::function<void()> phase);

 private:
  std::uint64_t next_ticket_ = 0;
  std::uint64_t next_run_ = 0;
  std::map<std::uint64_t, std::function<void()>> waiting_;
};

// The generic device pipeline behind STAGED and NCCL_HIERARCHICAL: per piece,
//   before (device work on `down`) -> [device -> host copy on `down`] -> wait for `down` ->
//   host collective on the staged bytes (a phantom when not staging) ->
//   in ticket order: [host -> device copy on `up`] -> after (device work on `up`) -> wait for `up`.
struct DevicePipeline {
  DeviceAllreduceOptions op;
  std::string_view kind = "allreduce";  // for messages
  std::size_t piece_bytes = std::size_t{4} << 20;
  bool stage = true;               // this rank moves its bytes through pinned host memory
  bool stage_from_output = false;  // copy down from the output (written by `before`), not the input
  DeviceStream* down = nullptr;
  DeviceStream* up = nullptr;
  PhaseSequencer* sequencer = nullptr;  // null: the pipeline's own (pieces in order)
  // Optional device phases; `first` and `count` are the piece's elements.
  std::function<Status(std::size_t first, std::size_t count, DeviceStream& down)> before;
  std::function<Status(std::size_t first, std::size_t count, DeviceStream& up)> after;
  // The host collective of one piece (required). `host` holds the piece's staged bytes (input
  // and output), or is a phantom when not staging.
  std::function<void(Engine& engine, const std::string& name, BufferView host, DoneCallback done)>
      host_collective;
  // How to wait for a stream (default: Device::notify); e.g. one that also watches an NCCL
  // communicator for asynchronous errors and a deadline.
  std::function<Status(DeviceStream& stream, Executor& executor, std::function<void(Status)> done)>
      notify;
};

// Everything one peer's staged device collectives share: the device, two copy streams and the
// pinned pool. Use on the engine's executor; destroy only once no
// operation is pending (the destructor waits for the streams).
class DeviceStaging {
 public:
  static Status create(Device& device, std::unique_ptr<DeviceStaging>* out);
  ~DeviceStaging();

  Device& device() { return device_; }
  DeviceStream& down() { return *down_; }
  DeviceStream& up() { return *up_; }
  PinnedPool& pool() { return pool_; }
  std::size_t piece_bytes = std::size_t{4} << 20;

 private:
  explicit DeviceStaging(Device& device) : device_(device), pool_(device) {}
  Device& device_;
  std::unique_ptr<DeviceStream> down_, up_;
  PinnedPool pool_;
};

// Runs `pipeline` (on the engine's executor); `done` once every piece is back on the device (or
// with the first error: device errors name the device call, the operation and the rank). A
// device error does not stop the host collectives, so peers are not left waiting.
void run_device_pipeline(Engine& engine, DeviceStaging& staging, DevicePipeline pipeline,
                         DoneCallback done);

// STAGED: the runtime's strategy (`strategy`, or the engine's current one) on pinned host copies.
void staged_allreduce(Engine& engine, DeviceStaging& staging, DeviceAllreduceOptions options,
                      std::shared_ptr<const CompiledStrategy> strategy, DoneCallback done);

// "allreduce 'grads' on rank 2: <what>" as an error status with the given code.
Status device_op_error(std::string_view kind, const std::string& name, int rank,
                       const Status& cause);

}  // namespace kf
