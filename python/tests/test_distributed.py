"""The torch.distributed backend "kungfu": an unmodified DistributedDataParallel script trains to
the same parameters as on "gloo" from the same seed, under kfrun and with torchrun's variables;
its other collectives, futures and Work objects work; what it does not support says so."""

import re

import pytest

from conftest import check_ok, run_kfrun, spawn_torchrun_style


def params_of(output: str) -> dict:
    out = {}
    for line in output.splitlines():
        m = re.search(r"rank (\d+) params (.*)$", line)
        if m:
            out[int(m.group(1))] = [float(v) for v in m.group(2).split()]
    return out


def close(a, b, tol=1e-5):
    return len(a) == len(b) and all(abs(x - y) <= tol * max(1.0, abs(y)) for x, y in zip(a, b))


@pytest.mark.parametrize("np_", [2, 3])
def test_ddp_on_kungfu_matches_gloo(np_):
    runs = {}
    for backend in ("kungfu", "gloo"):
        r = run_kfrun(np_, "ddp.py", backend, "8", timeout=300)
        check_ok(r)
        runs[backend] = params_of(r.stdout)
        assert sorted(runs[backend]) == list(range(np_)), r.stdout
    for rank in range(np_):
        assert close(runs["kungfu"][rank], runs["gloo"][rank]), (rank, runs)
        assert runs["kungfu"][rank] == runs["kungfu"][0]  # replicas identical


def test_ddp_on_kungfu_with_torchruns_variables():
    procs = spawn_torchrun_style(2, "ddp.py", "kungfu", "3")
    outs = [p.communicate(timeout=300)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out
    assert params_of(outs[0])[0] == params_of(outs[1])[1]


def test_works_wait_time_out_and_keep_their_tensors_when_dropped():
    r = run_kfrun(2, "works.py")
    check_ok(r)
    assert r.stdout.count("OK") == 2, r.stdout


def test_unsupported_calls_raise_naming_the_call():
    r = run_kfrun(2, "ddp_unsupported.py")
    check_ok(r)
    assert r.stdout.count("OK") == 6, r.stdout
