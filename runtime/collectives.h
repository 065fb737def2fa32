// The collective operations: an options struct and a free function per operation (as in Gloo).
//
// Each function starts the operation and returns at once; `done` runs later on the engine's
// executor, exactly once, with the outcome. Buffers must stay valid until then. Call these on the
// engine's executor. Every peer must start the same operations with the same names, in any order
// and concurrently if it likes; a name must not be reused while an operation of that name is in
// flight on the same peer. Phantom buffers (size, no bytes) move through every operation with no
// data work, for simulations.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/buffer.h"
#include "runtime/engine.h"
#include "runtime/operation.h"
#include "runtime/p2p_request.h"
#include "runtime/ping.h"
#include "runtime/reduce.h"

namespace kf {

struct AllreduceOptions {
  std::string name;
  ConstBufferView input;
  BufferView output;  // same count and dtype as input; may be the same memory
  ReduceOp op = ReduceOp::sum;
  std::shared_ptr<const CompiledStrategy> strategy;  // empty: the engine's current strategy
  Duration timeout{0};                               // zero: the engine's default
};
void allreduce(Engine& engine, AllreduceOptions options, DoneCallback done);

// What AUTO (Algorithm::by_size) sends an allreduce of `bytes` by, among `size` ranks: recursive
// doubling up to auto_doubling_bytes (between two ranks up to auto_pair_doubling_bytes, if
// larger); else a ring once bytes / size reaches auto_ring_part_bytes across hosts,
// auto_local_ring_part_bytes on one host with a core per rank (host_cores), auto_ring_part_bytes
// again on one with fewer; but among a power of two of at least 4 ranks, each on a host of its
// own, halving and doubling instead of that ring up to auto_halving_doubling_bytes; else the
// strategy's graphs. `hosts`: how many hosts the `size` ranks are on. Every rank sees the same
// inputs, so every rank decides alike.
enum class AutoChoice : std::uint8_t { doubling, ring, halving_doubling, graphs };
AutoChoice auto_allreduce_choice(const EngineOptions& options, int size, int hosts,
                                 std::size_t bytes);

struct BroadcastOptions {
  std::string name;
  ConstBufferView input;  // read at the root only
  BufferView output;      // everywhere: receives the root's input
  int root = 0;
  Duration timeout{0};
};
void broadcast(Engine& engine, BroadcastOptions options, DoneCallback done);

struct ReduceOptions {
  std::string name;
  ConstBufferView input;
  BufferView output;  // the result at the root; scratch on the other ranks
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  Duration timeout{0};
};
void reduce(Engine& engine, ReduceOptions options, DoneCallback done);

struct GatherOptions {
  std::string name;
  ConstBufferView input;
  BufferView output;  // at the root: n x input.count() elements, rank order; ignored elsewhere
  int root = 0;
  Duration timeout{0};
};
void gather(Engine& engine, GatherOptions options, DoneCallback done);

struct AllgatherOptions {
  std::string name;
  ConstBufferView input;
  BufferView output;  // n x input.count() elements, rank order
  Duration timeout{0};
};
void allgather(Engine& engine, AllgatherOptions options, DoneCallback done);

// Completes on every peer only once every peer has entered it.
void barrier(Engine& engine, const std::string& name, DoneCallback done);

// Are `bytes` equal on every peer? Every peer learns the same answer.
using ConsensusCallback = std::function<void(Status, bool agreed)>;
void consensus(Engine& engine, const std::string& name, ConstBufferView bytes,
               ConsensusCallback done);

// Allreduce within each tree of a forest (forest[i] = parent of i, a root is its own parent).
// Every peer calls it with the same forest; a peer alone in its tree just copies.
struct SubsetAllreduceOptions {
  std::string name;
  ConstBufferView input;
  BufferView output;
  ReduceOp op = ReduceOp::sum;
  std::vector<int> forest;
  Duration timeout{0};
};
void subset_allreduce(Engine& engine, SubsetAllreduceOptions options, DoneCallback done);

// Saves a copy of `data` as the next version of blob `name` on this peer (the last
// BlobStore::kKeepVersions versions are kept) and returns that version.
std::uint64_t save_blob(Engine& engine, const std::string& name, ConstBufferView data,
                        std::optional<std::uint64_t> version = std::nullopt);

struct RequestOptions {
  int peer = 0;
  std::string name;
  std::uint64_t version = 0;  // 0 = the latest the peer has
  Duration timeout{0};
};
void request_blob(Engine& engine, RequestOptions options, BlobCallback done);

// Round-trip time to another peer (a latency probe; the peer's engine answers at once).
struct PingOptions {
  int peer = 0;
  Duration timeout{0};
};
using PingCallback = std::function<void(Status, Duration round_trip)>;
void ping(Engine& engine, PingOptions options, PingCallback done);

}  // namespace kf
