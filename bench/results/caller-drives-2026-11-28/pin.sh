#!/bin/bash
# Runs a worker on core RANK mod the core count, all its threads (kfrun sets RANK).
exec taskset -c $((RANK % $(nproc))) "$@"
