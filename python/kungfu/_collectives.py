"""Collectives on numpy arrays and torch CPU tensors, blocking and async.

Every peer must call the same collectives in the same order, or give them the same explicit
`name`. Results are new arrays (tensors) of the input's kind, unless `inplace=True`, which writes
into the input and returns it. An async call returns a Handle at once; the runtime holds the
memory it uses until the collective completes, whether or not the Handle is kept.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional

import numpy as np

from kungfu import _core
from kungfu._buffers import Buffer, cpu_tensor, is_tensor, wrap, writable

_OPS = ("sum", "min", "max", "prod", "avg")


class Handle:
    """A collective in flight. wait() returns its result (or raises its error); wait_for(seconds)
    and ready() poll; add_done_callback(fn) calls fn(error_or_None) once it completes, on
    kungfu's completion thread (never the runtime's loop)."""

    def __init__(self, op: _core.Operation, result: Callable[[], Any]):
        self._op = op
        self._result = result
        self._done = False
        self._value: Any = None

    def wait(self) -> Any:
        """Blocks until the collective completes; returns its result or raises its error."""
        if not self._done:
            self._op.wait()
            self._value = self._result()
            self._done = True
        return self._value

    def wait_for(self, seconds: float) -> bool:
        """True once complete (raising its error if it failed); False if `seconds` passed."""
        if self._done:
            return True
        if not self._op.wait_for(seconds):
            return False
        self.wait()
        return True

    def ready(self) -> bool:
        """Whether the collective has completed (well or not)."""
        return self._done or self._op.ready()

    def add_done_callback(self, fn: Callable[[Optional[BaseException]], None]) -> None:
        """fn(None), or fn(the error), once complete, on kungfu's completion thread."""
        self._op.add_done_callback(fn)

    @property
    def what(self) -> str:
        """The operation and its name, e.g. "allreduce 'grad/fc1.weight'"."""
        return self._op.what


def _op_name(op: str, call: str) -> str:
    if op not in _OPS:
        raise ValueError(f"{call}: unknown op {op!r} (known: {', '.join(_OPS)})")
    return op


def _name(name: Optional[str]) -> str:
    return "" if name is None else str(name)


def _prepare(x: Any, inplace: bool, call: str,
             device_ok: bool = False) -> tuple[Buffer, Buffer]:
    src = wrap(x, call, device_ok)
    if inplace:
        writable(x, call)
        return src, src
    if src.device is not None and not is_tensor(src.array):
        raise TypeError(f"{call}: a CUDA array that is not a torch tensor: pass inplace=True "
                        "(kungfu allocates device memory only through torch)")
    return src, src.empty_like()


def _in_place_result(src: Buffer) -> Callable[[], Any]:
    def result() -> Any:
        src.write_back()
        return src.original
    return result


# The blocking forms make one call into the runtime (_core.*_wait, _core.allreduce_array), which
# starts the collective on kf::Peer's own blocking path and waits for it: where a C++ caller's
# blocking call of that size would drive the runtime's loop (kf::PeerOptions::caller_drives), so
# does the wait, and there is no Operation or Handle to make (docs/performance.md, "From
# Python"). The _async forms return a Handle over a _core.Operation.


def allreduce_async(x: Any, op: str = "sum", *, inplace: bool = False,
                    name: Optional[str] = None) -> Handle:
    """Starts an allreduce of `x` (sum, min, max, prod, or avg for floating dtypes)."""
    src, dst = _prepare(x, inplace, "kungfu.allreduce", device_ok=True)
    return _start_allreduce(src, dst, op, inplace, name)


def _start_allreduce(src: Buffer, dst: Buffer, op: str, inplace: bool,
                     name: Optional[str]) -> Handle:
    call = "kungfu.allreduce"
    if src.device is not None:
        handle = _core.device_allreduce(src.address, dst.address, src.count, src.dtype,
                                        _op_name(op, call), src.device, src.stream, _name(name),
                                        (src, dst))
    else:
        handle = _core.allreduce(src.address, dst.address, src.count, src.dtype,
                                 _op_name(op, call), _name(name), (src, dst))
    return Handle(handle, _in_place_result(src) if inplace else (lambda: dst.array))


def allreduce(x: Any, op: str = "sum", *, inplace: bool = False,
              name: Optional[str] = None) -> Any:
    """The elementwise reduction of `x` over every peer, on every peer."""
    # A numpy array as it is goes in one call (the small collectives of a training step are
    # mostly such calls); the runtime declines anything that needs a copy or raises.
    call = "kungfu.allreduce"
    if type(x) is np.ndarray:
        out = _core.allreduce_array(x, op, inplace, _name(name))
        if out is not NotImplemented:
            return out
    elif (tensor := cpu_tensor(x)) is not None:  # a CPU tensor as it is, the same way
        address, count, dtype = tensor
        out = x if inplace else sys.modules["torch"].empty_like(x)
        _core.allreduce_wait(address, out.data_ptr(), count, dtype, _op_name(op, call),
                             _name(name), (x, out))
        return out
    src, dst = _prepare(x, inplace, call, device_ok=True)
    if src.device is not None:
        return _start_allreduce(src, dst, op, inplace, name).wait()
    _core.allreduce_wait(src.address, dst.address, src.count, src.dtype, _op_name(op, call),
                         _name(name), (src, dst))
    if inplace:
        src.write_back()
        return src.original
    return dst.array


def broadcast_async(x: Any, root: int = 0, *, inplace: bool = False,
                    name: Optional[str] = None) -> Handle:
    """Starts a broadcast of root's `x` to every peer."""
    src, data = _broadcast_buffers(x, inplace, "kungfu.broadcast")
    handle = _core.broadcast(data.address, data.count, data.dtype, int(root), _name(name),
                             (src, data))
    return Handle(handle, _in_place_result(src) if inplace else (lambda: data.array))


def _broadcast_buffers(x: Any, inplace: bool, call: str) -> tuple[Buffer, Buffer]:
    """What a broadcast of `x` reads and writes: `x` itself in place, else a copy of it."""
    src = wrap(x, call)
    if inplace:
        writable(x, call)
        return src, src
    data = src.empty_like()
    data.array[...] = src.array
    return src, data


def broadcast(x: Any, root: int = 0, *, inplace: bool = False,
              name: Optional[str] = None) -> Any:
    """Root's `x`, on every peer."""
    src, data = _broadcast_buffers(x, inplace, "kungfu.broadcast")
    _core.broadcast_wait(data.address, data.count, data.dtype, int(root), _name(name),
                         (src, data))
    if inplace:
        src.write_back()
        return src.original
    return data.array


def reduce_async(x: Any, op: str = "sum", root: int = 0, *, inplace: bool = False,
                 name: Optional[str] = None) -> Handle:
    """Starts a reduction of `x` to `root`; other peers' results are unspecified."""
    call = "kungfu.reduce"
    src, dst = _prepare(x, inplace, call)
    handle = _core.reduce(src.address, dst.address, src.count, src.dtype, _op_name(op, call),
                          int(root), _name(name), (src, dst))
    return Handle(handle, _in_place_result(src) if inplace else (lambda: dst.array))


def reduce(x: Any, op: str = "sum", root: int = 0, *, inplace: bool = False,
           name: Optional[str] = None) -> Any:
    """The reduction of `x` over every peer, at `root` (elsewhere: unspecified contents)."""
    call = "kungfu.reduce"
    src, dst = _prepare(x, inplace, call)
    _core.reduce_wait(src.address, dst.address, src.count, src.dtype, _op_name(op, call),
                      int(root), _name(name), (src, dst))
    if inplace:
        src.write_back()
        return src.original
    return dst.array


def _stacked(x: Any, call: str) -> tuple[Buffer, Buffer]:
    """`x`, and a buffer for every peer's `x` stacked in rank order."""
    src = wrap(x, call)
    return src, src.stacked(_core.size())


def allgather_async(x: Any, *, name: Optional[str] = None) -> Handle:
    """Starts an allgather: every peer's `x`, stacked in rank order."""
    src, dst = _stacked(x, "kungfu.allgather")
    handle = _core.allgather(src.address, dst.address, src.count, src.dtype, _name(name),
                             (src, dst))
    return Handle(handle, lambda: dst.array)


def allgather(x: Any, *, name: Optional[str] = None) -> Any:
    """Every peer's `x`, stacked in rank order: shape (size, *x.shape)."""
    src, dst = _stacked(x, "kungfu.allgather")
    _core.allgather_wait(src.address, dst.address, src.count, src.dtype, _name(name), (src, dst))
    return dst.array


def gather_async(x: Any, root: int = 0, *, name: Optional[str] = None) -> Handle:
    """Starts a gather of every peer's `x` at `root`."""
    src, dst = _stacked(x, "kungfu.gather")
    handle = _core.gather(src.address, dst.address, src.count, src.dtype, int(root), _name(name),
                          (src, dst))
    return Handle(handle, lambda: dst.array)


def gather(x: Any, root: int = 0, *, name: Optional[str] = None) -> Any:
    """Every peer's `x` stacked in rank order at `root` (elsewhere: unspecified contents)."""
    src, dst = _stacked(x, "kungfu.gather")
    _core.gather_wait(src.address, dst.address, src.count, src.dtype, int(root), _name(name),
                      (src, dst))
    return dst.array


def consensus(x: Any, *, name: Optional[str] = None) -> bool:
    """Whether `x` holds the same bytes on every peer (a size that differs is a difference)."""
    src = wrap(x, "kungfu.consensus")
    width = src.array.element_size() if hasattr(src.array, "element_size") else src.array.itemsize
    return _core.consensus_wait(src.address, src.count * width, _name(name), src)


def barrier(name: Optional[str] = None) -> None:
    """Returns once every peer has called barrier."""
    _core.barrier_wait(_name(name))


def save(name: str, x: Any) -> int:
    """Keeps a copy of `x`'s bytes in this peer's store as the next version of `name` (the last
    three are kept) and returns that version; peers fetch it with request()."""
    src = wrap(x, "kungfu.save")
    width = src.array.element_size() if hasattr(src.array, "element_size") else src.array.itemsize
    return _core.save(str(name), src.address, src.count * width)


def request(peer: int, name: str, like: Any = None, version: int = 0) -> Optional[Any]:
    """Peer `peer`'s blob `name` (version 0: its latest) as a new array shaped and typed like
    `like` (numpy or torch), or as uint8 bytes without it; None when the peer holds none."""
    op = _core.request(int(peer), str(name), int(version))
    try:
        op.wait()
    except _core.NotFoundError:
        return None
    _, data = op.blob
    raw = np.frombuffer(data, dtype=np.uint8)
    if like is None:
        return raw.copy()
    dst = wrap(like, "kungfu.request").empty_like()
    width = dst.array.element_size() if hasattr(dst.array, "element_size") else dst.array.itemsize
    if raw.size != dst.count * width:
        raise _core.ProtocolError(f"kungfu.request: {name!r} from rank {peer} has {raw.size} "
                                  f"bytes, `like` {dst.count * width}")
    _bytes_of(dst)[:] = raw
    return dst.array


def _bytes_of(buf: Buffer) -> np.ndarray:
    """A writable uint8 view of a contiguous numpy array or CPU tensor's memory."""
    array = buf.array
    if hasattr(array, "untyped_storage") or hasattr(array, "storage"):  # torch
        import ctypes
        n = buf.count * array.element_size()
        return np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(buf.address))
    return array.reshape(-1).view(np.uint8)
