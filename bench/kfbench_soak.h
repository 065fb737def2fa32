// kfbench soak: every collective of kf::Peer, mixed, over and over for a fixed time, each result
// checked. A soak is judged from outside (bench/soak.py samples each worker's resident memory and
// open descriptors); this is the load it watches.
#pragma once

#include <cstddef>
#include <ostream>

#include "launch/peer.h"
#include "runtime/time.h"

namespace kf::bench {

struct SoakBench {
  // How long to run. Each rank compares its own clock with its own deadline at the end of every
  // round and the ranks agree through an allreduce (max) of that flag, so all stop after the same
  // round.
  Duration duration = std::chrono::minutes(1);
  // Payload sizes: min_bytes, then times `factor` (or plus `step` when it is not 0) up to
  // max_bytes; round r uses the (r mod count)-th.
  std::size_t min_bytes = 8;
  std::size_t max_bytes = std::size_t{4} << 20;
  double factor = 2;
  std::size_t step = 0;
  bool json = false;  // rank 0 prints one JSON object at the end instead of the table
  // Rank 0 prints a progress line this often (its own counts; the final report has every rank's).
  Duration progress_every = std::chrono::seconds(60);
};

// Runs rounds until the agreed stop. A round takes its size, its allreduce strategy (the 11 named
// strategies, and a STAR forest rooted at a rotating rank), its dtype and op (7 pairs) and its
// root from its number (every combination once every sizes x 12 x 7 x n rounds), then runs:
// allreduce (out of place on even rounds, in place on odd ones), broadcast, reduce, allgather,
// gather, three concurrent named allreduces, a consensus (every 8th round on bytes that differ by
// rank, which must disagree), an allreduce within pairs of ranks (subset_allreduce over a
// forest), a versioned blob saved and fetched from the next rank, a barrier and the stop-flag
// allreduce. Automatic names grow with every call; explicit ones are reused every round, as a
// training loop reuses its tensors' names.
//
// Rank 0 prints the report (a table, or one JSON object with -json): rounds, seconds, collectives
// and wrong elements per operation summed over the ranks, and each rank's round count. Returns 0,
// or 1 when any rank found a wrong result; a failed operation throws std::runtime_error naming the
// round and the operation.
int run_soak(Peer& peer, const SoakBench& soak, std::ostream& out);

}  // namespace kf::bench
