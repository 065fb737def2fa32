// The C++ API example of the README, compiled and run under kfrun by multiprocess_test so the
// documentation cannot rot.
#include <cstdio>
#include <string>
#include <vector>

#include "launch/peer.h"

int main() {
  kf::Peer peer = kf::Peer::from_env();  // kfrun, torchrun, mpirun, srun, or alone
  std::vector<float> grad(1 << 20, 1.0f);
  if (kf::Status s = peer.allreduce(std::span<float>(grad), kf::ReduceOp::avg); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.to_string().c_str());  // names the operation and the peer
    return 1;
  }
  std::vector<float> weights(1000, static_cast<float>(peer.rank()));
  kf::Handle h = peer.broadcast_async(kf::BufferView::of(std::span<float>(weights), kf::DType::f32),
                                      /*root=*/0);
  // ... overlap other work ...
  if (auto s = h.wait_for(std::chrono::seconds(10)); !s || !s->ok()) return 1;
  const std::string model = "resnet-50 v3";
  bool same = false;
  (void)peer.consensus(kf::ConstBufferView(reinterpret_cast<const std::byte*>(model.data()),
                                           model.size(), kf::DType::u8),
                       &same);
  std::printf("rank %d of %d: grad[0] = %g, weights[0] = %g, same model: %d\n", peer.rank(),
              peer.size(), grad[0], weights[0], same);
  return peer.barrier().ok() ? 0 : 1;
}
