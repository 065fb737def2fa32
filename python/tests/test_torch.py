"""kungfu.torch: optimizers, broadcasts and monitors on real processes, against serial references
(S-SGD on n workers equals one batch n times as large; SMA follows its formula; AdaSGD ends with
one model; pair averaging pulls replicas together; the noise scale and variance match the
formulas on the same gradients)."""

import pytest

from conftest import check_ok, run_kfrun


@pytest.mark.parametrize("np_", [1, 2, 4])
def test_optimizers_broadcasts_and_monitors(np_):
    r = run_kfrun(np_, "optimizers.py", timeout=300)
    check_ok(r)
    assert r.stdout.count(" ok") == 6 * np_, r.stdout
