"""kungfu's core: collectives, handles and errors on real processes (kfrun, or torchrun's
variables set by hand), against serial references."""

from __future__ import annotations

import subprocess

import pytest

from conftest import PYTHON, WORKERS, check_ok, run_kfrun, spawn_torchrun_style, worker_env


def test_a_single_process_without_a_launcher_is_a_cluster_of_one():
    code = ("import kungfu, numpy as np; kungfu.init(); "
            "assert (kungfu.rank(), kungfu.size(), kungfu.local_rank(), kungfu.local_size()) "
            "== (0, 1, 0, 1); "
            "x = np.arange(5.0); assert (kungfu.allreduce(x) == x).all(); "
            "assert kungfu.allgather(x).shape == (1, 5); print('ok')")
    r = subprocess.run([PYTHON, "-c", code], env=worker_env(), capture_output=True, text=True,
                       timeout=60)
    check_ok(r)


@pytest.mark.parametrize("np_", [1, 2, 3, 4])
def test_every_collective_dtype_and_mode_matches_the_reference(np_):
    r = run_kfrun(np_, "collectives.py", timeout=300)
    check_ok(r)
    assert r.stdout.count("checks passed") == np_, r.stdout


@pytest.mark.parametrize("drives", ["1", "0"])
def test_blocking_calls_match_the_reference_whether_or_not_their_caller_drives(drives):
    """With KUNGFU_CALLER_DRIVES=1 a blocking call (kungfu.allreduce, not its _async form) is
    posted for its caller, whose wait runs the runtime's loop; with 0 the loop's thread does it."""
    r = run_kfrun(3, "collectives.py", timeout=300, extra_env={"KUNGFU_CALLER_DRIVES": drives})
    check_ok(r)
    assert r.stdout.count("checks passed") == 3, r.stdout


def test_a_driving_wait_still_ends_with_the_collectives_timeout():
    """A driven wait runs the loop in slices: a collective that cannot complete (names that
    differ) still fails with its timeout on every rank."""
    r = run_kfrun(3, "errors.py", "names-differ", timeout=60,
                  extra_env={"KUNGFU_CALLER_DRIVES": "1"})
    check_ok(r)
    assert r.stdout.count("CollectiveTimeoutError after") == 3, r.stdout


def test_workers_started_with_torchruns_variables_find_each_other():
    procs = spawn_torchrun_style(3, "collectives.py")
    outs = [p.communicate(timeout=300)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out
        assert "of 3:" in out and "checks passed" in out, out


def test_async_handles_callbacks_and_kept_alive_memory():
    r = run_kfrun(3, "handles.py")
    check_ok(r)
    assert r.stdout.count("handles ok") == 3, r.stdout


def test_bad_input_raises_an_error_naming_the_call():
    r = run_kfrun(2, "errors.py", "bad-input")
    check_ok(r)
    assert r.stdout.count("OK rank") == 2 * 8, r.stdout


def test_ctrl_c_ends_a_blocking_wait_and_the_runtime_keeps_its_memory():
    """A signal ends a blocking call's wait within moments though its peer has not joined; the
    array it reads and writes stays alive (the runtime holds it) until the call completes."""
    r = run_kfrun(2, "errors.py", "interrupted", timeout=120)
    check_ok(r)
    assert r.stdout.count("OK rank 0") == 3 and r.stdout.count("OK rank 1") == 3, r.stdout


def test_names_that_differ_across_ranks_are_an_error_within_the_timeout_not_a_hang():
    r = run_kfrun(3, "errors.py", "names-differ", timeout=60)
    check_ok(r)
    assert r.stdout.count("CollectiveTimeoutError after") == 3, r.stdout


def test_a_size_mismatch_across_ranks_fails_every_rank():
    r = run_kfrun(3, "errors.py", "size-mismatch", timeout=60)
    check_ok(r)
    assert "expected 40 bytes, got 48" in r.stdout, r.stdout
    assert r.stdout.count("OK rank") == 3, r.stdout


def test_a_killed_peer_is_named_by_every_survivor():
    procs = spawn_torchrun_style(3, "errors.py", "kill-peer")
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert procs[1].returncode == 3, outs[1]
    for r in (0, 2):
        assert procs[r].returncode == 0, outs[r]
        assert "PeerLostError after" in outs[r] and "rank 1" in outs[r], outs[r]


def test_upstream_kungfu_names_initialise_at_import():
    r = run_kfrun(3, "upstream_names.py")
    check_ok(r)
    assert r.stdout.count("upstream names ok") == 3, r.stdout
