#include "runtime/collectives.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "runtime/gather_collective.h"
#include "runtime/graph_collective.h"
#include "runtime/halving_doubling.h"
#include "runtime/op_helpers.h"
#include "runtime/recursive_doubling.h"
#include "runtime/ring_collective.h"
#include "topology/forest.h"

namespace kf {

namespace {

// The problem with a same-shaped (input, output) pair, if any.
std::optional<std::string> shape_problem(ConstBufferView input, BufferView output) {
  if (input.dtype() != output.dtype()) {
    return fmt::format("input is {} but output is {}", dtype_name(input.dtype()),
                       dtype_name(output.dtype()));
  }
  if (input.count() != output.count()) {
    return fmt::format("input has {} elements but output has {}", input.count(), output.count());
  }
  if (input.is_phantom() != output.is_phantom())
    return "input and output must both be phantom or neither";
  return std::nullopt;
}

std::optional<std::string> root_problem(const Engine& engine, int root) {
  if (root < 0 || root >= engine.size()) {
    return fmt::format("root {} outside 0..{}", root, engine.size() - 1);
  }
  return std::nullopt;
}

std::optional<std::string> op_problem(ReduceOp op, DType t) {
  if (!reduce_op_supports(op, t)) {
    return fmt::format("{} is not defined for {}", reduce_op_name(op), dtype_name(t));
  }
  return std::nullopt;
}

void start_with_timeout(Engine& engine, std::unique_ptr<Operation> op, Duration timeout) {
  op->timeout = timeout;
  engine.start(std::move(op));
}

}  // namespace

AutoChoice auto_allreduce_choice(const EngineOptions& options, int size, int hosts,
                                 std::size_t bytes) {
  const bool spans_hosts = hosts > 1;
  const std::size_t doubling =
      size == 2 ? std::max(options.auto_doubling_bytes, options.auto_pair_doubling_bytes)
                : options.auto_doubling_bytes;
  if (doubling > 0 && bytes <= doubling) return AutoChoice::doubling;
  const bool core_each = options.host_cores <= 0 || size <= options.host_cores;
  const std::size_t part =
      spans_hosts || !core_each ? options.auto_ring_part_bytes : options.auto_local_ring_part_bytes;
  if (bytes / static_cast<std::size_t>(size) < part) return AutoChoice::graphs;
  // Halving-doubling's partners ignore hosts: with several ranks on a host, its steps between
  // hosts carry more than the ring's one edge out of each host does.
  const bool power_of_two = size >= 4 && (size & (size - 1)) == 0;
  if (hosts == size && power_of_two && bytes <= options.auto_halving_doubling_bytes)
    return AutoChoice::halving_doubling;
  return AutoChoice::ring;
}

void allreduce(Engine& engine, AllreduceOptions o, DoneCallback done) {
  auto problem = shape_problem(o.input, o.output);
  if (!problem) problem = op_problem(o.op, o.output.dtype());
  // An explicit strategy comes from Engine::compile, which checked it against the cluster.
  auto strategy = o.strategy ? o.strategy : engine.strategy();
  if (problem) {
    engine.reject(std::move(done), bad_argument("allreduce", o.name, engine.rank(), *problem));
    return;
  }
  bool doubling = false;
  bool halving_doubling = false;
  if (strategy->algorithm() == Algorithm::by_size) {
    switch (auto_allreduce_choice(engine.options(), engine.size(), engine.cluster().host_count(),
                                  o.output.size_bytes())) {
      case AutoChoice::doubling:
        doubling = true;
        break;
      case AutoChoice::ring:
        strategy = engine.over_ring(strategy);
        break;
      case AutoChoice::halving_doubling:
        halving_doubling = true;
        break;
      case AutoChoice::graphs:
        strategy = engine.over_graphs(strategy);
        break;
    }
  }
  // A ring cuts the buffer into n parts; with fewer than n elements some parts are empty, and
  // the ring would still pass 2(n - 1) messages per rank, most of them empty (2 million for a
  // policy's one number at 1,024 workers). Such a buffer goes over the strategy's own trees:
  // 2(n - 1) messages in all. Every rank sees the same count, so every rank decides alike.
  const bool ring = strategy->algorithm() == Algorithm::ring_rs_ag ||
                    strategy->algorithm() == Algorithm::ring_rs_ag_bidir;
  if (ring && o.output.count() < static_cast<std::size_t>(engine.size())) {
    strategy = engine.over_graphs(strategy);
  }
  std::unique_ptr<Operation> op;
  if (doubling) {
    op = std::make_unique<RecursiveDoublingAllreduce>(engine, std::move(o.name), o.input, o.output,
                                                      o.op, std::move(done));
    start_with_timeout(engine, std::move(op), o.timeout);
    return;
  }
  if (halving_doubling) {
    op = std::make_unique<HalvingDoublingAllreduce>(engine, std::move(o.name), o.input, o.output,
                                                    o.op, std::move(done));
    start_with_timeout(engine, std::move(op), o.timeout);
    return;
  }
  switch (strategy->algorithm()) {
    case Algorithm::ring_rs_ag:
    case Algorithm::ring_rs_ag_bidir:
      op = std::make_unique<RingAllreduce>(
          engine, std::move(o.name), o.input, o.output, o.op, std::move(done),
          strategy->algorithm() == Algorithm::ring_rs_ag_bidir ? RingDirections::both
                                                               : RingDirections::one);
      break;
    case Algorithm::halving_doubling:
      op = std::make_unique<HalvingDoublingAllreduce>(engine, std::move(o.name), o.input, o.output,
                                                      o.op, std::move(done));
      break;
    case Algorithm::graph_pairs:
    case Algorithm::by_size:  // resolved above
      op = std::make_unique<GraphCollective>(engine, std::move(o.name), "allreduce",
                                             GraphMode::allreduce, o.input, o.output, o.op,
                                             std::move(strategy), std::move(done));
      break;
  }
  start_with_timeout(engine, std::move(op), o.timeout);
}

void broadcast(Engine& engine, BroadcastOptions o, DoneCallback done) {
  auto problem = root_problem(engine, o.root);
  if (!problem && engine.rank() == o.root) problem = shape_problem(o.input, o.output);
  if (problem) {
    engine.reject(std::move(done), bad_argument("broadcast", o.name, engine.rank(), *problem));
    return;
  }
  auto op = std::make_unique<GraphCollective>(
      engine, std::move(o.name), "broadcast", GraphMode::broadcast, o.input, o.output,
      ReduceOp::sum, engine.rooted(o.root), std::move(done));
  start_with_timeout(engine, std::move(op), o.timeout);
}

void reduce(Engine& engine, ReduceOptions o, DoneCallback done) {
  auto problem = root_problem(engine, o.root);
  if (!problem) problem = shape_problem(o.input, o.output);
  if (!problem) problem = op_problem(o.op, o.output.dtype());
  if (problem) {
    engine.reject(std::move(done), bad_argument("reduce", o.name, engine.rank(), *problem));
    return;
  }
  auto op = std::make_unique<GraphCollective>(engine, std::move(o.name), "reduce",
                                              GraphMode::reduce, o.input, o.output, o.op,
                                              engine.rooted(o.root), std::move(done));
  start_with_timeout(engine, std::move(op), o.timeout);
}

void gather(Engine& engine, GatherOptions o, DoneCallback done) {
  auto problem = root_problem(engine, o.root);
  if (!problem && engine.rank() == o.root) {
    if (o.input.dtype() != o.output.dtype() ||
        o.output.count() != o.input.count() * static_cast<std::size_t>(engine.size())) {
      problem = fmt::format("the root's output must hold {} x {} {} elements", engine.size(),
                            o.input.count(), dtype_name(o.input.dtype()));
    }
  }
  if (problem) {
    engine.reject(std::move(done), bad_argument("gather", o.name, engine.rank(), *problem));
    return;
  }
  auto op = std::make_unique<Gather>(engine, std::move(o.name), o.input, o.output, o.root,
                                     std::move(done));
  start_with_timeout(engine, std::move(op), o.timeout);
}

void allgather(Engine& engine, AllgatherOptions o, DoneCallback done) {
  if (o.input.dtype() != o.output.dtype() ||
      o.output.count() != o.input.count() * static_cast<std::size_t>(engine.size())) {
    engine.reject(std::move(done),
                  bad_argument("allgather", o.name, engine.rank(),
                               fmt::format("output must hold {} x {} {} elements", engine.size(),
                                           o.input.count(), dtype_name(o.input.dtype()))));
    return;
  }
  auto op = std::make_unique<RingAllgather>(engine, std::move(o.name), o.input, o.output,
                                            std::move(done));
  start_with_timeout(engine, std::move(op), o.timeout);
}

void barrier(Engine& engine, const std::string& name, DoneCallback done) {
  // A one-byte allreduce: no peer's result is complete before every peer has contributed.
  auto token = std::make_shared<std::byte>();
  BufferView view(token.get(), 1, DType::u8);
  allreduce(engine,
            {.name = "kf.barrier/" + name, .input = view, .output = view, .op = ReduceOp::max},
            [token, done = std::move(done)](Status s) { done(std::move(s)); });
}

void consensus(Engine& engine, const std::string& name, ConstBufferView bytes,
               ConsensusCallback done) {
  if (bytes.is_phantom()) {
    engine.reject(
        [done](Status s) { done(std::move(s), false); },
        bad_argument("consensus", name, engine.rank(), "phantom bytes cannot be compared"));
    return;
  }
  // Equal everywhere <=> the elementwise minimum equals the maximum, first of the lengths, then
  // of the bytes. Every peer computes the same minima and maxima, so every peer gets one answer.
  struct State {
    std::vector<std::uint64_t> len_min, len_max;
    std::vector<std::uint8_t> mine, min, max;
    int pending = 2;
    Status error;
  };
  auto st = std::make_shared<State>();
  st->len_min = st->len_max = {bytes.size_bytes()};
  st->mine.resize(bytes.size_bytes());
  if (bytes.size_bytes() > 0) std::memcpy(st->mine.data(), bytes.data(), bytes.size_bytes());
  st->min = st->max = st->mine;
  auto shared_done = std::make_shared<ConsensusCallback>(std::move(done));
  Engine* e = &engine;

  auto compare_bytes = [st, shared_done, e, name] {
    st->pending = 2;
    auto both = [st, shared_done](Status s) {
      if (!s.ok() && st->error.ok()) st->error = s;
      if (--st->pending > 0) return;
      (*shared_done)(st->error, st->error.ok() && st->min == st->max);
    };
    const auto view = [](std::vector<std::uint8_t>& v) {
      return BufferView(reinterpret_cast<std::byte*>(v.data()), v.size(), DType::u8);
    };
    allreduce(*e,
              {.name = "kf.consensus/" + name + "/min",
               .input = view(st->mine),
               .output = view(st->min),
               .op = ReduceOp::min},
              both);
    allreduce(*e,
              {.name = "kf.consensus/" + name + "/max",
               .input = view(st->mine),
               .output = view(st->max),
               .op = ReduceOp::max},
              both);
  };
  auto lengths = [st, shared_done, compare_bytes](Status s) {
    if (!s.ok() && st->error.ok()) st->error = s;
    if (--st->pending > 0) return;
    if (!st->error.ok()) {
      (*shared_done)(st->error, false);
    } else if (st->len_min != st->len_max) {
      (*shared_done)(Status{}, false);
    } else {
      compare_bytes();
    }
  };
  const auto len_view = [](std::vector<std::uint64_t>& v) {
    return BufferView(reinterpret_cast<std::byte*>(v.data()), 1, DType::u64);
  };
  auto len_in = std::make_shared<std::vector<std::uint64_t>>(st->len_min);
  allreduce(engine,
            {.name = "kf.consensus/" + name + "/len-min",
             .input = len_view(*len_in),
             .output = len_view(st->len_min),
             .op = ReduceOp::min},
            [len_in, lengths](Status s) { lengths(std::move(s)); });
  allreduce(engine,
            {.name = "kf.consensus/" + name + "/len-max",
             .input = len_view(*len_in),
             .output = len_view(st->len_max),
             .op = ReduceOp::max},
            [len_in, lengths](Status s) { lengths(std::move(s)); });
}

void subset_allreduce(Engine& engine, SubsetAllreduceOptions o, DoneCallback done) {
  auto problem = shape_problem(o.input, o.output);
  if (!problem) problem = op_problem(o.op, o.output.dtype());
  if (!problem && static_cast<int>(o.forest.size()) != engine.size()) {
    problem = fmt::format("forest has {} nodes, the cluster has {} workers", o.forest.size(),
                          engine.size());
  }
  std::shared_ptr<const CompiledStrategy> strategy;
  if (!problem) {
    try {
      strategy = engine.compile(Strategy{.name = "FOREST",
                                         .algorithm = Algorithm::graph_pairs,
                                         .pairs = {graph_pair_from_forest(o.forest)}});
    } catch (const GraphError& e) {
      problem = e.what();
    }
  }
  if (problem) {
    engine.reject(std::move(done),
                  bad_argument("subset_allreduce", o.name, engine.rank(), *problem));
    return;
  }
  auto op = std::make_unique<GraphCollective>(engine, std::move(o.name), "subset_allreduce",
                                              GraphMode::allreduce, o.input, o.output, o.op,
                                              std::move(strategy), std::move(done));
  start_with_timeout(engine, std::move(op), o.timeout);
}

std::uint64_t save_blob(Engine& engine, const std::string& name, ConstBufferView data,
                        std::optional<std::uint64_t> version) {
  if (data.is_phantom()) throw std::invalid_argument("save_blob '" + name + "': phantom data");
  return engine.blobs().save(
      name, std::vector<std::byte>(data.data(), data.data() + data.size_bytes()), version);
}

void request_blob(Engine& engine, RequestOptions o, BlobCallback done) {
  if (o.peer < 0 || o.peer >= engine.size() || o.peer == engine.rank()) {
    engine.reject([done](Status s) { done(std::move(s), Blob{}); },
                  bad_argument("request", o.name, engine.rank(),
                               fmt::format("peer {} is not another rank of 0..{}", o.peer,
                                           engine.size() - 1)));
    return;
  }
  auto result = std::make_shared<Blob>();
  auto op = std::make_unique<P2PRequest>(
      engine, engine.next_request_id(), o.peer, std::move(o.name), o.version, result,
      [result, done = std::move(done)](Status s) { done(std::move(s), std::move(*result)); });
  start_with_timeout(engine, std::move(op), o.timeout);
}

void ping(Engine& engine, PingOptions o, PingCallback done) {
  if (o.peer < 0 || o.peer >= engine.size() || o.peer == engine.rank()) {
    engine.reject([done](Status s) { done(std::move(s), Duration::zero()); },
                  bad_argument("ping", "", engine.rank(),
                               fmt::format("peer {} is not another rank of 0..{}", o.peer,
                                           engine.size() - 1)));
    return;
  }
  auto rtt = std::make_shared<Duration>(Duration::zero());
  auto op = std::make_unique<PingOp>(engine, engine.next_request_id(), o.peer, rtt,
                                     [rtt, done = std::move(done)](Status s) { done(s, *rtt); });
  start_with_timeout(engine, std::move(op), o.timeout);
}

}  // namespace kf
