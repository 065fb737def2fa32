// MPI_Allreduce (float, sum, out of place) timed as kfbench times its allreduce, for
// bench/peers.sh: one CSV row per size from rank 0 (peer_common.h has the columns and the
// definitions). Run under mpirun:
//   mpirun -np 4 mpi_allreduce --sizes 8,4K,256K --iters 20 --warmup 5 --system mpi --where host
// Exit 1 when a result is wrong, 2 on bad arguments.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <vector>

#include "bench/peers/peer_common.h"

namespace {

using Clock = std::chrono::steady_clock;

int run(const kf::peers::Options& o) {
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (rank == 0 && o.header) std::printf("%s\n", kf::peers::kCsvHeader);
  int status = 0;
  for (const std::size_t bytes : o.sizes) {
    const std::size_t count = bytes / sizeof(float);
    std::vector<float> in(count), out(count);
    kf::peers::fill_input(in, rank);
    const int c = static_cast<int>(count);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < o.warmup; ++i)
      MPI_Allreduce(in.data(), out.data(), c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    std::vector<double> seconds(static_cast<std::size_t>(o.iters));
    for (auto& s : seconds) {
      const auto t0 = Clock::now();
      MPI_Allreduce(in.data(), out.data(), c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      s = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    MPI_Allreduce(MPI_IN_PLACE, seconds.data(), o.iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    unsigned long long wrong = kf::peers::count_wrong(out, n);
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    status = std::max(status,
                      kf::peers::report_size("mpi_allreduce", o, rank, n, bytes, seconds, wrong));
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  kf::peers::Options o;
  try {
    o = kf::peers::parse_options(argc, argv, false);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi_allreduce: %s\nusage: mpirun -np N mpi_allreduce [options]\n%s",
                 e.what(), kf::peers::kUsage);
    MPI_Finalize();
    return 2;
  }
  if (o.system.empty()) o.system = "mpi";
  const int status = run(o);
  MPI_Finalize();
  return status;
}
