#include "runtime/membership.h"

#include <fmt/format.h>

#include <memory>

#include "proto/cluster.pb.h"
#include "runtime/collectives.h"

namespace kf {

namespace {

struct ResizeRound {
  std::uint64_t version = 0;  // the stored proposal's, learnt by allreduce-max
  ClusterSpec next;
  std::string put_error;  // rank 0's, when the config service refused
  std::string bytes;      // the spec as read, for the consensus
};

}  // namespace

void resize_cluster(Engine& engine, Membership& membership, int workers, std::int64_t next_step,
                    ClusterCallback done) {
  auto round = std::make_shared<ResizeRound>();
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
  const auto learn_version = [round, finish, e, m, current, agree] {
    const auto view = BufferView(reinterpret_cast<std::byte*>(&round->version), 1, DType::u64);
    allreduce(*e,
              {.name = fmt::format("kf.resize.version/{}", current),
               .input = view,
               .output = view,
               .op = ReduceOp::max},
              [round, finish, m, agree, e](Status s) {
                if (s.ok() && round->version == 0) {
                  s = Status(ErrorCode::invalid_argument,
                             "resize: the config service refused the proposal" +
                                 (round->put_error.empty() ? "" : ": " + round->put_error));
                }
                if (!s.ok()) {
                  (*finish)(std::move(s), {});
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
  };
  if (engine.rank() != 0) {
    learn_version();
    return;
  }
  ClusterSpec proposal;
  try {
    proposal = membership.propose(engine.cluster(), workers);
  } catch (const std::exception& ex) {
    round->put_error = ex.what();
    learn_version();
    return;
  }
  membership.put(proposal, [round, learn_version](Status s, ClusterSpec stored) {
    if (s.ok()) {
      round->version = stored.version();
    } else {
      round->put_error = s.message();
    }
    learn_version();
  });
}

}  // namespace kf
