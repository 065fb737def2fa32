"""kungfu.resize and kungfu.propose_new_size, called as a user would. Modes:
  unreachable  (kfrun -w -config-server URL of a kfconfig whose pid is KF_TEST_KFCONFIG_PID):
               rank 0 kills the config server; a resize then raises UnavailableError on every
               worker, saying it could not be reached
  not-elastic  (plain kfrun): resize and propose_new_size raise InvalidArgumentError naming kfrun -w
  adopt        (kfrun -w, 2 workers, 3 slots): rank 0 proposes 3 workers; all adopt it with
               resize(); a second resize() changes nothing; the joiner checks joining()
"""

import sys

import kungfu


def check(cond: bool, what: str) -> None:
    if not cond:
        print(f"rank {kungfu.rank()}: FAILED {what}", file=sys.stderr, flush=True)
        sys.exit(1)


def not_elastic() -> None:
    kungfu.init()
    check(not kungfu.elastic(), "elastic() under plain kfrun")
    for call in (lambda: kungfu.resize(3), lambda: kungfu.propose_new_size(3)):
        try:
            call()
            check(False, "no error from a resize outside kfrun -w")
        except kungfu.InvalidArgumentError as e:
            check("kfrun -w" in str(e), f"message {e}")
    try:
        kungfu.resize(0)
        check(False, "resize(0) accepted")
    except ValueError as e:
        check("at least 1" in str(e), f"message {e}")
    kungfu.barrier()
    print("ok", flush=True)


def adopt() -> None:
    kungfu.init(timeout=60)
    check(kungfu.elastic(), "elastic() under kfrun -w")
    if kungfu.joining():
        check(kungfu.size() == 3, f"a joiner sees {kungfu.size()} workers")
    else:
        check(kungfu.size() == 2, f"size {kungfu.size()} at start")
        if kungfu.rank() == 0:
            kungfu.propose_new_size(3)
        kungfu.barrier()  # the proposal is stored before anyone adopts it
        changed, detached = kungfu.resize()
        check(changed and not detached, f"resize() -> {changed}, {detached}")
        check(kungfu.size() == 3, f"size {kungfu.size()} after adopting")
    changed, detached = kungfu.resize()
    check(not changed and not detached, f"a second resize() -> {changed}, {detached}")
    total = kungfu.allreduce(__import__("numpy").array([1]), "sum")
    check(int(total[0]) == 3, f"{total} workers answered")
    print(f"ok rank {kungfu.rank()} of {kungfu.size()}", flush=True)


def unreachable() -> None:
    import os
    import signal
    kungfu.init(timeout=60)
    if kungfu.rank() == 0:
        os.kill(int(os.environ["KF_TEST_KFCONFIG_PID"]), signal.SIGKILL)
    kungfu.barrier()
    try:
        kungfu.resize(3)
        check(False, "a resize with the config server gone did not fail")
    except kungfu.UnavailableError as e:
        check("could not be reached" in str(e), f"message {e}")
    print(f"ok rank {kungfu.rank()}", flush=True)


if __name__ == "__main__":
    {"not-elastic": not_elastic, "adopt": adopt, "unreachable": unreachable}[sys.argv[1]]()
