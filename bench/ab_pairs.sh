# Sourced by the A/B scripts under bench/results/ (run from the repository root): kfbench built
# before a change ($OLD, a kfbench binary) against the tree's, in back-to-back pairs, one case per
# job, so that this machine's slow and fast modes fall on both builds alike.
# Usage: source bench/ab_pairs.sh PAIRS OUT. Sets B, pairs, out and old, writes OUT's header
# (case,pair,build,bytes,p50_us) and defines
#   one CASE PAIR BUILD NP ARGS...   kfbench allreduce ARGS at NP ranks, BUILD old or new; its
#                                    p50 per size appended to OUT (env before it from the caller).
#   tcp CASE PAIR BUILD ARGS...      kfbench allreduce ARGS at 2 ranks on two loopback pseudo-hosts
#                                    (TCP; ports from $KF_TCP_PORT, default 31000), rank 0's p50
#                                    per size appended to OUT.
#   run_pairs FN                     for each pair, FN PAIR BUILD for both builds (the order
#                                    alternated from pair to pair), then mpi8 PAIR.
#   mpi8 PAIR                        Open MPI's 8-byte allreduce at 2 ranks through shared
#                                    memory, appended as mpi2,PAIR,mpi,8,P50: which of the
#                                    machine's modes the pair ran in.
B=build/release
pairs=${1:-20}
out=${2:?give the CSV to write}
old=${OLD:?set OLD to the kfbench built before the change}
echo "case,pair,build,bytes,p50_us" > "$out"
one() {
  local c=$1 i=$2 build=$3 np=$4; shift 4
  local bin=$PWD/$B/apps/kfbench; [ "$build" = old ] && bin=$old
  $B/apps/kfrun -np "$np" "$bin" allreduce "$@" 2>&1 | grep -E '^\S*\s+[0-9]+ ' |
    grep -v '^\[kfrun\]' | awk -v c="$c" -v i="$i" -v b="$build" '{print c "," i "," b "," $2 "," $11}' >> "$out"
}
tcp() {
  local c=$1 i=$2 build=$3 port=${KF_TCP_PORT:-31000}; shift 3
  local bin=$PWD/$B/apps/kfbench; [ "$build" = old ] && bin=$old
  local run=("$B/apps/kfrun" -np 2 -H 127.0.0.1:1,127.0.0.2:1 -port-range "$port-$((port + 9))"
             -runner-port $((port + 10)))
  timeout 120 "${run[@]}" -self 127.0.0.2 "$bin" allreduce "$@" > /dev/null 2>&1 &
  timeout 120 "${run[@]}" -self 127.0.0.1 "$bin" allreduce "$@" 2>&1 | grep -E '^\S*\s+[0-9]+ ' |
    grep -v '^\[kfrun\]' | awk -v c="$c" -v i="$i" -v b="$build" '{print c "," i "," b "," $2 "," $11}' >> "$out"
  wait
}
mpi8() {
  local us
  us=$(mpirun --allow-run-as-root -np 2 --bind-to none --mca pml ob1 --mca btl vader,self \
    $B/bench/mpi_allreduce --sizes 8 --iters 30000 --warmup 1000 | grep '^mpi,' | cut -d, -f6)
  echo "mpi2,$1,mpi,8,$us" >> "$out"
}
run_pairs() {
  local fn=$1 i b
  for i in $(seq 1 "$pairs"); do
    for b in old new; do
      [ $((i % 2)) = 0 ] && b=$([ "$b" = old ] && echo new || echo old)
      "$fn" "$i" "$b"
    done
    mpi8 "$i"
    echo "pair $i of $pairs done" >&2
  done
}
