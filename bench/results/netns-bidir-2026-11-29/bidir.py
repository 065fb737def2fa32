"""Both ways at once between two hosts, as a 2-rank allreduce sends: SIZE bytes each way, over one
TCP connection carrying both directions or two connections (one per direction, as kfbench's
transport has them), in PHASES sequential exchanges of SIZE / PHASES each way. Blocking sockets,
a receiving thread beside the sending one; with "loop", one thread polling both directions on
non-blocking sockets, as an event loop does (BIDIR_WRITE_CAP: bytes per write, default all the
socket takes; BIDIR_READ_CAP: per read, 1 MiB; BIDIR_READ_DRAIN=1: a read event reads until
EAGAIN). Host "a" prints one CSV line: mode,phases,bytes,p50_ms,min_ms,max_ms (over REPS
exchanges after 3).

    python3 bidir.py one|two a|b PEER_ADDRESS [SIZE] [REPS] [PHASES] [threads|loop]
"""
import os
import select
import socket
import statistics
import sys
import threading
import time

MODE, ROLE, PEER = sys.argv[1], sys.argv[2], sys.argv[3]
SIZE = int(sys.argv[4]) if len(sys.argv) > 4 else 16 << 20
REPS = int(sys.argv[5]) if len(sys.argv) > 5 else 30
PHASES = int(sys.argv[6]) if len(sys.argv) > 6 else 1
LOOP = len(sys.argv) > 7 and sys.argv[7] == "loop"  # one thread, an event loop
# The loop's reads and writes: bytes per call, and whether a read event reads until EAGAIN.
WRITE_CAP = int(os.environ.get("BIDIR_WRITE_CAP", str(1 << 40)))
READ_CAP = int(os.environ.get("BIDIR_READ_CAP", str(1 << 20)))
READ_DRAIN = os.environ.get("BIDIR_READ_DRAIN", "0") == "1"
PORT = 47000
buf_out = bytearray(SIZE)
buf_in = bytearray(SIZE)

def listen(port):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(1); c, _ = s.accept(); s.close(); return c

def connect(port):
    for _ in range(200):
        try:
            return socket.create_connection((PEER, port))
        except OSError:
            time.sleep(0.05)
    raise SystemExit("no connect")

if MODE == "one":
    s = listen(PORT) if ROLE == "a" else connect(PORT)
    tx = rx = s
else:  # two: a listens on PORT, b on PORT+1; each sends on the one it connected
    if ROLE == "a":
        rx = listen(PORT); tx = connect(PORT + 1)
    else:
        tx = connect(PORT); rx = listen(PORT + 1)
for x in (tx, rx):
    x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

mv = memoryview(buf_in)
def recv_all(size):
    got = 0
    while got < size:
        n = rx.recv_into(mv[got:], min(size - got, 1 << 20))
        if n == 0: raise SystemExit("closed")
        got += n

def event_loop(size):
    """One thread, non-blocking sockets, as an event loop sends and receives: poll both, write
    what the socket takes, read what has come."""
    out = memoryview(buf_out)[:size]
    sent = got = 0
    tx.setblocking(False)
    rx.setblocking(False)
    both = tx is rx
    while sent < size or got < size:
        poller = select.poll()
        if both:
            poller.register(rx, (select.POLLIN if got < size else 0) |
                            (select.POLLOUT if sent < size else 0))
        else:
            if sent < size:
                poller.register(tx, select.POLLOUT)
            if got < size:
                poller.register(rx, select.POLLIN)
        for fd, ev in poller.poll():
            if ev & select.POLLOUT and sent < size:
                try:
                    sent += tx.send(out[sent:sent + WRITE_CAP])
                except BlockingIOError:
                    pass
            if ev & select.POLLIN and got < size:
                while got < size:
                    try:
                        n = rx.recv_into(mv[got:], min(size - got, READ_CAP))
                    except BlockingIOError:
                        break
                    if n == 0:
                        raise SystemExit("closed")
                    got += n
                    if not READ_DRAIN:
                        break
    tx.setblocking(True)
    rx.setblocking(True)


times = []
for i in range(REPS + 3):
    # sync: one byte each way on tx/rx
    tx.sendall(b"s"); assert rx.recv(1) == b"s"
    t0 = time.perf_counter()
    part = SIZE // PHASES
    for _ in range(PHASES):
        if LOOP:
            event_loop(part)
            continue
        th = threading.Thread(target=recv_all, args=(part,)); th.start()
        tx.sendall(memoryview(buf_out)[:part])
        th.join()
    if i >= 3: times.append((time.perf_counter() - t0) * 1e3)
if ROLE == "a":
    print(f"{MODE}{'-loop' if LOOP else ''},{PHASES},{SIZE},{statistics.median(times):.2f},{min(times):.2f},{max(times):.2f}")
