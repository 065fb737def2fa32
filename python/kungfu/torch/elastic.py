"""Elastic training for PyTorch under `kfrun -w`, in the style of Horovod's elastic API.

    state = kungfu.torch.elastic.State(model, optimizer, epoch=0, step=0, samples=0)

    @kungfu.torch.elastic.run
    def train(state):
        while state.epoch < epochs:
            sampler = ElasticSampler(len(data), batch, seed=1, epoch=state.epoch, start=state.samples)
            for batch_indices in sampler:
                ...                                   # one step on this worker's batch
                state.samples += sampler.step_samples
                state.step += 1
                if state.step in schedule:
                    state.resize(schedule[state.step])    # every worker, the same step
            state.epoch, state.samples = state.epoch + 1, 0

    train(state)

A resize is KungFu's protocol (kungfu.resize): rank 0 proposes the new size to kfrun's config
server, kfrun starts the workers the new cluster adds (kungfu.joining() is True in them) and the
ones it drops leave. State.resize then unwinds the training function; run() syncs every worker of
the new cluster from rank 0 (the model, the optimizer, the progress counters and any registered
object such as a PolicyRunner or a learning-rate scheduler) and calls the function again, so the
data sampler is rebuilt for the new rank and size and resumes at the same place of the epoch. A
worker the new cluster dropped returns from run() with None and should exit with code 0.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, Iterator, List, Optional, TypeVar

import torch

import kungfu
from kungfu import _core
from kungfu.torch.ops import broadcast_object, broadcast_optimizer_state, broadcast_parameters

__all__ = ["State", "run", "ElasticSampler", "ClusterResized", "WorkerDetached"]


class ClusterResized(Exception):
    """Raised by State.resize when the cluster changed: run() catches it, syncs, and calls the
    training function again."""


class WorkerDetached(Exception):
    """Raised by State.resize on a worker the new cluster does not have: run() returns None."""


class State:
    """What every worker must hold alike across resizes: the model, the optimizer, progress
    counters given as keyword arguments (read and set as attributes: state.epoch, state.step),
    and registered objects with state_dict() / load_state_dict()."""

    def __init__(self, model: torch.nn.Module,
                 optimizer: Optional[torch.optim.Optimizer] = None, **progress: Any):
        reserved = {"model", "optimizer", "sync", "resize", "register",
                    "register_reset_callbacks", "progress"}
        clash = reserved.intersection(progress)
        if clash:
            raise ValueError(f"kungfu.torch.elastic.State: progress names {sorted(clash)} are "
                             "taken by State itself")
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "optimizer", optimizer)
        object.__setattr__(self, "_progress", dict(progress))
        object.__setattr__(self, "_objects", [])
        object.__setattr__(self, "_reset_callbacks", [])
        object.__setattr__(self, "_syncs", 0)
        object.__setattr__(self, "_strategy_before_resize", None)

    def __getattr__(self, name: str) -> Any:
        progress = self.__dict__.get("_progress", {})
        if name in progress:
            return progress[name]
        raise AttributeError(f"kungfu.torch.elastic.State has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._progress:
            self._progress[name] = value
        else:
            object.__setattr__(self, name, value)

    @property
    def progress(self) -> Dict[str, Any]:
        """The progress counters, as a dict (a copy)."""
        return dict(self._progress)

    def register(self, obj: Any) -> None:
        """Syncs `obj` too (anything with state_dict() and load_state_dict(): a PolicyRunner,
        a learning-rate scheduler, a GradScaler)."""
        if not (hasattr(obj, "state_dict") and hasattr(obj, "load_state_dict")):
            raise TypeError(f"kungfu.torch.elastic.State.register: {type(obj).__name__} has no "
                            "state_dict() / load_state_dict()")
        self._objects.append(obj)

    def register_reset_callbacks(self, callbacks: List[Callable[[], None]]) -> None:
        """Functions called on every worker after each sync that follows a resize (e.g. to scale
        the learning rate with the new size)."""
        self._reset_callbacks.extend(callbacks)

    def sync(self) -> None:
        """Every worker takes rank 0's model, optimizer state, progress, collective strategy and
        registered objects.
        A collective: every worker of the cluster calls it, joiners included."""
        # A resize puts every worker on init's strategy (joiners start on it); rank 0's choice
        # from before the resize comes back first, so that the rest runs on it.
        wanted = self._strategy_before_resize or _core.named_strategy()
        strategy = broadcast_object(wanted, 0, name="kungfu.elastic/strategy")
        if strategy != _core.named_strategy():
            _core.set_strategy(strategy)
        object.__setattr__(self, "_strategy_before_resize", None)
        progress = broadcast_object(self._progress, 0, name="kungfu.elastic/progress")
        self._progress.clear()
        self._progress.update(progress)
        broadcast_parameters(self.model.state_dict())
        if self.optimizer is not None:
            broadcast_optimizer_state(self.optimizer)
        for i, obj in enumerate(self._objects):
            state = broadcast_object(obj.state_dict(), 0, name=f"kungfu.elastic/object.{i}")
            if kungfu.rank() != 0:
                obj.load_state_dict(state)
        object.__setattr__(self, "_syncs", self._syncs + 1)

    def resize(self, n: Optional[int] = None) -> bool:
        """Every worker, at the same point: resizes the cluster to `n` workers (or adopts the
        config server's proposal when None). Returns False when nothing changed; otherwise raises
        ClusterResized (or WorkerDetached on a worker that left), which run() handles."""
        object.__setattr__(self, "_strategy_before_resize", _core.named_strategy())
        changed, detached = kungfu.resize(n)
        if detached:
            raise WorkerDetached()
        if changed:
            raise ClusterResized()
        object.__setattr__(self, "_strategy_before_resize", None)
        return False

    def _reset(self) -> None:
        for callback in self._reset_callbacks:
            callback()


R = TypeVar("R")


def run(fn: Callable[..., R]) -> Callable[..., Optional[R]]:
    """Decorates a training function fn(state, *args, **kwargs): syncs the state, calls fn, and
    after each resize it raises syncs again and calls fn anew; returns fn's result, or None on a
    worker that the cluster dropped."""

    @functools.wraps(fn)
    def wrapper(state: State, *args: Any, **kwargs: Any) -> Optional[R]:
        resized = False
        while True:
            state.sync()
            if resized:
                state._reset()
            try:
                return fn(state, *args, **kwargs)
            except ClusterResized:
                resized = True
            except WorkerDetached:
                return None

    return wrapper


class ElasticSampler:
    """This worker's batches of one epoch, such that every step the cluster consumes the next
    window of size x batch_size indices of the epoch's order (one permutation from seed and
    epoch) and this worker takes its rank's slice. `start` is how many samples the cluster has
    consumed this epoch, so a sampler rebuilt after a resize (with the new rank and size)
    resumes where the cluster left off: within an epoch no sample is seen twice or skipped,
    except the tail that does not fill a whole window."""

    def __init__(self, length: int, batch_size: int, seed: int = 0, epoch: int = 0,
                 start: int = 0, rank: Optional[int] = None, size: Optional[int] = None):
        if batch_size < 1:
            raise ValueError(f"kungfu.torch.elastic.ElasticSampler: batch_size {batch_size}: "
                             "at least 1")
        if not 0 <= start <= length:
            raise ValueError(f"kungfu.torch.elastic.ElasticSampler: start {start} outside "
                             f"0..{length}")
        self.length, self.batch_size, self.seed = length, batch_size, seed
        self.epoch, self.start = epoch, start
        self.rank = kungfu.rank() if rank is None else rank
        self.size = kungfu.size() if size is None else size

    @property
    def step_samples(self) -> int:
        """Samples the whole cluster consumes per step: size x batch_size."""
        return self.size * self.batch_size

    def __len__(self) -> int:
        return (self.length - self.start) // self.step_samples

    def __iter__(self) -> Iterator[List[int]]:
        order = torch.randperm(self.length, generator=torch.Generator().manual_seed(
            self.seed * 1_000_003 + self.epoch))
        for k in range(len(self)):
            first = self.start + k * self.step_samples + self.rank * self.batch_size
            yield order[first:first + self.batch_size].tolist()
