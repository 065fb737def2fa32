"""Processes and ports for the chaos driver: the driver adopts every orphan (a child
subreaper), so that whatever a run starts, workers whose runner was killed included, stays its
descendant and is found, killed by pid and reaped; and a leased block of ports, the contract of
tests/port_lease.h, so that the campaign never meets a test running beside it."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from pathlib import Path
from typing import Iterable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import port_lease  # noqa: E402  (tests/port_lease.py, shared with the C++ and shell tests)

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Orphaned descendants (a worker whose kfrun was killed) are re-parented to this process
    instead of init, so that descendants() still finds them."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _stat(pid: int) -> Optional[tuple[str, int]]:
    """(state letter, parent pid) of a process, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[1])


def state(pid: int) -> Optional[str]:
    """The process's state letter (R, S, T, Z, ...) or None when it is gone."""
    s = _stat(pid)
    return s[0] if s else None


def alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    s = state(pid)
    return s is not None and s not in ("Z", "X")


def descendants(root: Optional[int] = None) -> list[int]:
    """Every live process below `root` (default: this process), zombies included."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        s = _stat(int(entry))
        if s is not None:
            children.setdefault(s[1], []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def reap(pids: Iterable[int]) -> None:
    """Collects the exit status of these children if they have exited (adopted orphans; never
    a subprocess.Popen's own child, whose status Popen must read)."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def reap_adopted(exclude: Iterable[int]) -> None:
    """Reaps the zombies among this process's children that are not in `exclude` (orphans it
    adopted as subreaper, which no subprocess.Popen waits for)."""
    exclude, me = set(exclude), os.getpid()
    for pid in descendants():
        s = _stat(pid)
        if s is not None and s[0] == "Z" and s[1] == me and pid not in exclude:
            reap([pid])


def kill_all(keep: Iterable[int] = ()) -> list[int]:
    """SIGKILLs every descendant except `keep` (a SIGSTOPped one dies too) and returns the pids
    that were still alive (not zombies) before the kill."""
    keep = set(keep)
    killed = []
    for pid in descendants():
        if pid in keep:
            continue
        if alive(pid):
            killed.append(pid)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return killed


def wait_gone(pids: Iterable[int], seconds: float) -> list[int]:
    """Waits up to `seconds` for the processes to exit; returns those still alive."""
    pids = list(pids)
    deadline = time.monotonic() + seconds
    while True:
        left = [p for p in pids if alive(p)]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)


def signal_pid(pid: int, sig: int) -> bool:
    """Sends `sig` to one live process; False when it is gone or a zombie."""
    if not alive(pid):
        return False
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def lease_ports(n: int) -> int:
    """The first of n consecutive ports leased to this process until it exits: tests/port_lease.py."""
    return port_lease.lease_ports(n)
