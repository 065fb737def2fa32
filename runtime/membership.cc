#include "runtime/membership.h"

#include <fmt/format.h>

#include <limits>
#include <memory>

#include "proto/cluster.pb.h"
#include "runtime/collectives.h"

namespace kf {

namespace {

// A rank 0 that failed contributes kFailed - its error code: above any version, so the max tells
// every worker that it failed and why (an unreachable service, a refused proposal).
constexpr std::uint64_t kFailed = std::numeric_limits<std::uint64_t>::max();
constexpr std::uint64_t kFailedCodes = 64;

struct ResizeRound {
  // The stored proposal's version, learnt by allreduce-max. Adopting, rank 0 contributes the
  // read version + 1, since a config service may hold version 0.
  std::uint64_t version = 0;
  ClusterSpec next;
  Status rank0_error;  // rank 0's, when the config service refused or could not be reached
  std::string bytes;   // the spec as read, for the consensus

  void fail(Status s) {
    version = kFailed - static_cast<std::uint64_t>(s.code());
    rank0_error = std::move(s);
  }
};

// Every worker: learn the version rank 0 wrote or read (or that it failed), read that cluster from
// the config service, and check by consensus that all read the same one. When adopting, a version
// no newer than the engine's cluster means nothing changed: the current cluster comes back.
void agree_on_cluster(const std::shared_ptr<ResizeRound>& round, Engine& engine,
                      Membership& membership, std::int64_t next_step, bool adopting,
                      ClusterCallback done) {
  auto finish = std::make_shared<ClusterCallback>(std::move(done));
  const std::uint64_t current = engine.cluster().version();
  Engine* e = &engine;
  Membership* m = &membership;

  const auto agree = [round, finish, e, m, current, next_step] {
    round->bytes = round->next.to_proto().SerializeAsString();
    const auto view = ConstBufferView(reinterpret_cast<const std::byte*>(round->bytes.data()),
                                      round->bytes.size(), DType::u8);
    consensus(*e, fmt::format("kf.resize.agree/{}", current), view,
              [round, finish, e, m, next_step](Status s, bool agreed) {
                if (s.ok() && !agreed) {
                  s = Status(ErrorCode::protocol,
                             fmt::format("resize: workers read different clusters (rank {} read "
                                         "version {})",
                                         e->rank(), round->next.version()));
                }
                if (s.ok() && e->rank() == 0) m->update_runners(round->next, next_step);
                (*finish)(std::move(s), round->next);
              });
  };
  const auto view = BufferView(reinterpret_cast<std::byte*>(&round->version), 1, DType::u64);
  allreduce(*e,
            {.name = fmt::format("kf.resize.version/{}", current),
             .input = view,
             .output = view,
             .op = ReduceOp::max},
            [round, finish, e, m, agree, current, adopting](Status s) {
              if (s.ok() && round->version > kFailed - kFailedCodes) {
                const auto code = static_cast<ErrorCode>(kFailed - round->version);
                const std::string what =
                    code == ErrorCode::unavailable
                        ? "resize: the config service could not be reached"
                        : (adopting ? "resize: the config service could not be read"
                                    : "resize: the config service refused the proposal");
                s = Status(code, what + (e->rank() == 0 ? ": " + round->rank0_error.message()
                                                        : " (rank 0 says why)"));
              }
              if (!s.ok()) {
                (*finish)(std::move(s), {});
                return;
              }
              if (adopting) --round->version;  // a success's: the read version + 1
              if (adopting && round->version <= current) {
                (*finish)(Status{}, e->cluster());
                return;
              }
              m->get([round, finish, agree, e](Status gs, ClusterSpec spec) {
                if (gs.ok() && spec.version() != round->version) {
                  gs = Status(ErrorCode::protocol,
                              fmt::format("resize: rank {} read cluster version {}, expected {}",
                                          e->rank(), spec.version(), round->version));
                }
                if (!gs.ok()) {
                  (*finish)(std::move(gs), {});
                  return;
                }
                round->next = std::move(spec);
                agree();
              });
            });
}

}  // namespace

void resize_cluster(Engine& engine, Membership& membership, int workers, std::int64_t next_step,
                    ClusterCallback done) {
  auto round = std::make_shared<ResizeRound>();
  Engine* e = &engine;
  Membership* m = &membership;
  auto then = [round, e, m, next_step, done = std::move(done)]() mutable {
    agree_on_cluster(round, *e, *m, next_step, false, std::move(done));
  };
  if (engine.rank() != 0) {
    then();
    return;
  }
  ClusterSpec proposal;
  try {
    proposal = membership.propose(engine.cluster(), workers);
  } catch (const std::exception& ex) {
    round->fail(Status(ErrorCode::invalid_argument, ex.what()));
    then();
    return;
  }
  membership.put(proposal, [round, then = std::move(then)](Status s, ClusterSpec stored) mutable {
    if (s.ok()) {
      round->version = stored.version();
    } else {
      round->fail(std::move(s));
    }
    then();
  });
}

void adopt_cluster(Engine& engine, Membership& membership, std::int64_t next_step,
                   ClusterCallback done) {
  auto round = std::make_shared<ResizeRound>();
  Engine* e = &engine;
  Membership* m = &membership;
  auto then = [round, e, m, next_step, done = std::move(done)]() mutable {
    agree_on_cluster(round, *e, *m, next_step, true, std::move(done));
  };
  if (engine.rank() != 0) {
    then();
    return;
  }
  membership.get([round, then = std::move(then)](Status s, ClusterSpec stored) mutable {
    if (s.ok()) {
      round->version = stored.version() + 1;
    } else {
      round->fail(std::move(s));
    }
    then();
  });
}

}  // namespace kf
