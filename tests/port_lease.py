"""Ports for Python tests and drivers, leased so that no two tests running at once (C++, Python
or shell) meet: the contract of tests/port_lease.h and tests/port_lease.sh. Blocks of 64 ports in
20000-32767, below Linux's ephemeral range; each block is held by an exclusive flock on
/tmp/kf-test-ports/<first>.lock for the life of the leasing process (the kernel drops it even on
SIGKILL), and a block is taken only when every port asked for can be bound now."""

from __future__ import annotations

import fcntl
import os
import random
import socket
from pathlib import Path
from typing import Optional

FIRST, END, BLOCK = 20000, 32768, 64
LEASE_DIR = Path("/tmp/kf-test-ports")
_held: list[int] = []  # lock fds kept open until this process exits: the leases


def _can_bind(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the runtime binds
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _lock_block(first_port: int) -> Optional[int]:
    fd = os.open(LEASE_DIR / f"{first_port}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd
    except OSError:
        os.close(fd)
        return None


def lease_ports(n: int) -> int:
    """The first of n consecutive ports (p .. p+n-1) leased to this process until it exits.
    Raises RuntimeError when every block is taken."""
    if n < 1:
        raise ValueError(f"lease_ports: n must be at least 1, got {n}")
    LEASE_DIR.mkdir(exist_ok=True)
    try:
        os.chmod(LEASE_DIR, 0o1777)  # every user's tests share it
    except PermissionError:
        pass
    blocks = (n + BLOCK - 1) // BLOCK
    starts = (END - FIRST) // BLOCK - blocks + 1
    offset = random.randrange(starts)
    for i in range(starts):
        first = (offset + i) % starts
        held = []
        for b in range(first, first + blocks):
            fd = _lock_block(FIRST + b * BLOCK)
            if fd is None:
                break
            held.append(fd)
        base = FIRST + first * BLOCK
        if len(held) == blocks and all(_can_bind(p) for p in range(base, base + n)):
            _held.extend(held)
            return base
        for fd in held:
            os.close(fd)
    raise RuntimeError(f"lease_ports: every port block in {FIRST}-{END - 1} is taken")
