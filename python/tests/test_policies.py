"""kungfu.torch.PolicyRunner: C++ policies by name and Python policies in one stack, through the
agreement round of kfsim and kftrain (workers/policies.py has the checks)."""

import re

import pytest

from conftest import check_ok, run_kfrun
from test_elastic import run_elastic


@pytest.mark.parametrize("np_", [1, 3])
def test_policies_agree_switch_and_apply_settings(np_):
    r = run_kfrun(np_, "policies.py", "agree", "switch", "settings", timeout=180)
    check_ok(r)
    for check in ("agree", "switch", "settings"):
        assert r.stdout.count(f"{check} ok") == np_, r.stdout


def test_a_policy_that_decides_from_local_metrics_is_an_error_not_a_hang():
    r = run_kfrun(2, "policies.py", "disagree", timeout=120)
    check_ok(r)
    assert r.stdout.count("disagree ok") == 2, r.stdout


def test_resize_outside_kfrun_w_is_a_clear_error():
    r = run_kfrun(2, "policies.py", "not-elastic", timeout=120)
    check_ok(r)
    assert r.stdout.count("not-elastic ok") == 2, r.stdout


def test_bad_input():
    r = run_kfrun(1, "policies.py", "bad-input", timeout=120)
    check_ok(r)
    assert "bad-input ok" in r.stdout, r.stdout


def test_scheduled_resize_through_the_elastic_state():
    # 2 workers; scheduled_resize grows to 3 before step 3 and shrinks to 1 before step 6.
    r = run_elastic(2, 3, "policies.py", "elastic", timeout=240)
    check_ok(r)
    synced = [(int(m[1]), int(m[2])) for m in re.finditer(r"synced: size (\d+) step (\d+)",
                                                          r.stdout)]
    assert synced == [(2, 0), (3, 3), (1, 6)], r.stdout
    assert r.stdout.count("trained 8 steps") == 1, r.stdout
