#pragma once

namespace kf {

// The cores this process may run on: the CPUs of its affinity mask, as taskset, a container's or
// a Slurm job's cpuset and an MPI-style binding set it; the machine's count where the mask cannot
// be read. Never below 1. Workers a launcher starts on one host inherit its mask, so they count
// alike (EngineOptions::host_cores must agree across a host's workers: AUTO chooses by it).
int usable_cores();

}  // namespace kf
