"""A training task: the one module a user writes so that the same model trains under kfrun (real
processes, `python3 -m kungfu.torch.train MODULE`) and inside kfsim (`workload: {torch: {module:
MODULE}}`), and so that `python3 -m kungfu.torch.profile MODULE` can measure it.

A task module is a plain Python file (or an importable module name) with these functions:

    def model() -> torch.nn.Module                       # required
    def data(train: bool) -> tuple[Tensor, Tensor]       # required
    def loss(output: Tensor, target: Tensor) -> Tensor   # optional: mean cross-entropy
    def profile() -> str                                 # optional: a profile file's path

- `model()` builds the network. The loader seeds torch (`torch.manual_seed(seed)`) just before
  calling it, so every worker that uses the same seed starts from the same parameters; it must
  not draw from any other generator.
- `data(train)` returns (inputs, labels) of the training set (`train=True`) or the test set:
  inputs a float32 tensor whose first dimension is the sample, labels an int64 tensor of one
  class index per sample. It is called once per process; it must be deterministic (no shuffling:
  each world shards and orders the samples itself, from the run's seed).
- `loss(output, target)` returns the mean loss of a batch as a scalar tensor; by default the mean
  cross-entropy of the outputs as logits.
- `profile()` names a model profile file (kfsim's format, scenarios/README.md "Profile files"),
  for instance one `python3 -m kungfu.torch.profile` wrote: kfsim then takes the simulated compute
  time of a step from it, unless the scenario names a model or a profile itself. A relative path
  is relative to the task module's directory.

Every problem with a task (a missing module or function, a function that raises, data of the
wrong type or shape) raises TaskError, whose message names the module and the function and, for
an exception inside the user's code, ends with that exception's last traceback line.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable, Optional, Tuple

import torch

__all__ = ["Task", "TaskError", "load"]


class TaskError(Exception):
    """A task module that cannot be used; the message names the module and the function."""


def _last_line(error: BaseException) -> str:
    lines = traceback.format_exception_only(type(error), error)
    return lines[-1].strip() if lines else type(error).__name__


def _import(spec: str) -> Tuple[ModuleType, Optional[Path]]:
    path = Path(spec)
    if spec.endswith(".py") or path.exists():
        if not path.is_file():
            raise TaskError(f"task module {spec}: no such file")
        name = "kungfu_task_" + path.stem
        loader = importlib.util.spec_from_file_location(name, path)
        if loader is None or loader.loader is None:
            raise TaskError(f"task module {spec}: not a Python file")
        module = importlib.util.module_from_spec(loader)
        # The module's own directory first, so that it can import its neighbours.
        sys.path.insert(0, str(path.resolve().parent))
        try:
            loader.loader.exec_module(module)
        except Exception as e:  # noqa: BLE001 - reported with the module's name
            raise TaskError(f"task module {spec}: importing it failed: {_last_line(e)}") from e
        finally:
            sys.path.pop(0)
        return module, path.resolve()
    try:
        module = importlib.import_module(spec)
    except ModuleNotFoundError as e:
        raise TaskError(f"task module {spec}: no such file or module ({_last_line(e)})") from e
    except Exception as e:  # noqa: BLE001
        raise TaskError(f"task module {spec}: importing it failed: {_last_line(e)}") from e
    file = getattr(module, "__file__", None)
    return module, Path(file).resolve() if file else None


@dataclass
class Task:
    """A loaded task module (see the module's docstring for the functions it defines)."""

    name: str  # as the user named it: a path or a module name
    module: ModuleType
    path: Optional[Path]  # the module's file, when it has one

    def _function(self, function: str, required: bool) -> Optional[Callable]:
        f = getattr(self.module, function, None)
        if f is None:
            if required:
                raise TaskError(f"task module {self.name}: it defines no function {function}()")
            return None
        if not callable(f):
            raise TaskError(f"task module {self.name}: {function} is not a function")
        return f

    def _call(self, function: str, *args):
        f = self._function(function, required=True)
        try:
            return f(*args)
        except TaskError:
            raise
        except Exception as e:  # noqa: BLE001 - reported with the module's and function's names
            raise TaskError(f"task module {self.name}: {function}() raised: {_last_line(e)}") from e

    def model(self, seed: int) -> torch.nn.Module:
        """The network, its parameters drawn after `torch.manual_seed(seed)`."""
        torch.manual_seed(seed)
        m = self._call("model")
        if not isinstance(m, torch.nn.Module):
            raise TaskError(f"task module {self.name}: model() returned {type(m).__name__}, "
                            "not a torch.nn.Module")
        if not any(p.requires_grad for p in m.parameters()):
            raise TaskError(f"task module {self.name}: model() has no trainable parameters")
        return m

    def data(self, train: bool) -> Tuple[torch.Tensor, torch.Tensor]:
        """(inputs float32 (N, ...), labels int64 (N,)) of the training or the test set."""
        which = f"data(train={train})"
        got = self._call("data", train)
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            raise TaskError(f"task module {self.name}: {which} returned {type(got).__name__}, "
                            "not a pair (inputs, labels)")
        x, y = got
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
            raise TaskError(f"task module {self.name}: {which} must return two tensors, got "
                            f"({type(x).__name__}, {type(y).__name__})")
        if x.dtype != torch.float32:
            raise TaskError(f"task module {self.name}: {which}: inputs are {x.dtype}, "
                            "not torch.float32")
        if y.dtype != torch.int64 or y.dim() != 1:
            raise TaskError(f"task module {self.name}: {which}: labels must be a 1-d int64 "
                            f"tensor, got {y.dtype} of shape {tuple(y.shape)}")
        if x.dim() < 1 or x.shape[0] != y.shape[0] or y.shape[0] == 0:
            raise TaskError(f"task module {self.name}: {which}: {tuple(x.shape)[:1]} inputs "
                            f"and {y.shape[0]} labels; expected the same number, at least one")
        if int(y.min()) < 0:
            raise TaskError(f"task module {self.name}: {which}: a negative label")
        return x.contiguous(), y.contiguous()

    def loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The mean loss of a batch: the module's loss(), else cross-entropy."""
        f = self._function("loss", required=False)
        if f is None:
            return torch.nn.functional.cross_entropy(output, target)
        try:
            value = f(output, target)
        except Exception as e:  # noqa: BLE001
            raise TaskError(f"task module {self.name}: loss() raised: {_last_line(e)}") from e
        if not isinstance(value, torch.Tensor) or value.dim() != 0:
            raise TaskError(f"task module {self.name}: loss() must return a scalar tensor, got "
                            f"{type(value).__name__}"
                            + (f" of shape {tuple(value.shape)}"
                               if isinstance(value, torch.Tensor) else ""))
        return value

    def profile(self) -> Optional[Path]:
        """The model profile file the module names, or None."""
        if self._function("profile", required=False) is None:
            return None
        got = self._call("profile")
        if not isinstance(got, (str, Path)):
            raise TaskError(f"task module {self.name}: profile() returned "
                            f"{type(got).__name__}, not a path")
        p = Path(got)
        if not p.is_absolute() and self.path is not None:
            p = self.path.parent / p
        if not p.is_file():
            raise TaskError(f"task module {self.name}: profile() names {p}, which is no file")
        return p


def load(spec: str) -> Task:
    """The task in `spec`: a Python file (examples/fashion_cnn.py) or an importable module
    name. Checks that it defines model() and data(); raises TaskError otherwise."""
    module, path = _import(spec)
    task = Task(name=spec, module=module, path=path)
    task._function("model", required=True)
    task._function("data", required=True)
    return task
