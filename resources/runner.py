"""The ``Runner`` Dagster resource: runs generated experiment code in the sandbox
(resources/sandbox/: what is enforced and why, in its package docstring) or, when the topic or
the environment chooses it, on a remote backend (``REMOTE_BACKENDS``: resources/ray_backend.py).

Only the resource and its backend choice live here; the sandbox's own names (``ProcessResult``,
``prepare_workspace``, ``run_sandboxed``, ...) are imported from resources.sandbox.
"""
from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg
import pydantic

from resources.sandbox import (
    DEFAULT_DISK_FILES,
    DEFAULT_DISK_MB,
    ProcessResult,
    SandboxLimits,
    default_hidden_paths,
    prepare_workspace,
    run_in_sandbox,
    workspace_bounds,
)
from resources.settings import settings
from resources.timing_log import EXPERIMENT as SPAN_EXPERIMENT
from resources.timing_log import log_span

if TYPE_CHECKING:
    from schemas.topic import ExecutionSpec

__all__ = ["REMOTE_BACKENDS", "UNSANDBOXED_ENV", "Runner", "chosen_backend", "execution_kwargs", "remote_backend",
           "unsandboxed_by_environment"]

UNSANDBOXED_ENV = "RESEARCHLOOP_UNSANDBOXED"


def unsandboxed_by_environment() -> bool:
    """The one switch that turns the sandbox off: RESEARCHLOOP_UNSANDBOXED=1 in the environment
    of the process that runs the code, read at each run (never run config, which the UI's
    launchpad could set)."""
    return settings().unsandboxed


def chosen_backend(execution: ExecutionSpec | None = None) -> str:
    """Where an attempt runs: the topic's `execution.backend` when it names one, else
    RESEARCHLOOP_BACKEND (read at each run; default local). Neither is run config: the UI's
    launchpad cannot move attempts, nor switch their sandbox off (see unsandboxed_by_environment)."""
    return (execution.backend if execution is not None else None) or settings().backend


# Where an attempt may run besides the local sandbox: backend name -> "module:function", a function
# with run_on_ray's signature, imported only when an attempt goes there (so the backend module, which
# builds on resources/sandbox/ like this one, is never imported by it and Ray only when chosen).
REMOTE_BACKENDS: dict[str, str] = {"ray": "resources.ray_backend:run_on_ray"}


def remote_backend(name: str) -> Callable[..., ProcessResult] | None:
    """The run function of backend `name`, None for the local sandbox (any name not in REMOTE_BACKENDS)."""
    target = REMOTE_BACKENDS.get(name)
    if target is None:
        return None
    module, _, func = target.partition(":")
    run_function: Callable[..., ProcessResult] = getattr(importlib.import_module(module), func)
    return run_function


def execution_kwargs(execution: ExecutionSpec | None) -> dict:
    """Runner.run's `execution` keyword for a topic's block, empty when the topic has none (so
    runners written before the keyword, such as test fakes, keep working for those topics)."""
    return {"execution": execution} if execution is not None else {}


class Runner(dg.ConfigurableResource):
    """Runs generated experiment code: bubblewrap sandbox, rlimits, memory watchdog, timeout,
    disk quota. Whether it sandboxes is not configurable here: see unsandboxed_by_environment."""

    memory_mb: int = pydantic.Field(
        default=4096, description="anonymous + shared memory of the whole process tree (watchdog kill)")
    disk_mb: int = pydantic.Field(default=DEFAULT_DISK_MB, description="disk use of one workspace (watchdog kill)")
    disk_files: int = pydantic.Field(default=DEFAULT_DISK_FILES, description="files and folders in one workspace")
    max_procs: int = pydantic.Field(default=256, description="RLIMIT_NPROC (processes+threads)")
    max_file_mb: int = pydantic.Field(default=512, description="RLIMIT_FSIZE (also caps logs)")
    limit_address_space: bool = pydantic.Field(
        default=True, description="RLIMIT_AS = 2 x memory_mb per process; turn off for CUDA")

    def run(self, command: list[str], workdir: str | Path, timeout_s: float,
            env: dict[str, str] | None = None, memory_mb: int | None = None,
            hide: Sequence[Path | str] = (), execution: ExecutionSpec | None = None) -> ProcessResult:
        """memory_mb overrides the resource's limit for this run (e.g. a topic's budget); `hide`
        adds dirs to the default hidden ones (e.g. a topic folder holding a scorer's labels).
        `execution`: the topic's `execution:` block (None: the environment decides, see
        `chosen_backend`). On the ray backend the attempt runs as a Ray task under the same sandbox
        on a worker, asking for the block's cpus / gpus / resources (each empty one: the environment's),
        its workspace changes and logs brought back (resources/ray_backend.py)."""
        t0 = time.time()
        remote = remote_backend(chosen_backend(execution))
        if remote is not None:
            res = remote(list(command), Path(workdir), timeout_s=timeout_s, memory_mb=memory_mb or self.memory_mb,
                         env=env, hide=hide, limit_address_space=self.limit_address_space,
                         limits={"max_procs": self.max_procs, "max_file_mb": self.max_file_mb,
                                 "sandbox": self.sandboxed(), "disk_mb": self.disk_mb,
                                 "disk_files": self.disk_files},
                         execution=execution)
        else:
            res = run_in_sandbox(list(command), Path(workdir), limits=self.limits(timeout_s, memory_mb),
                                 env=env, sandbox=self.sandboxed(),
                                 hide=[*default_hidden_paths(), *hide] if hide else None)
        # RESEARCHLOOP_TIMING_LOG (resources/timing_log.py): the run's time, for the effectiveness bench
        log_span(SPAN_EXPERIMENT, time.time() - t0, workdir=str(workdir), exit_code=res.exit_code)
        return res

    def limits(self, timeout_s: float, memory_mb: int | None = None) -> SandboxLimits:
        """This resource's limits for one run; memory_mb overrides its own."""
        return SandboxLimits(timeout_s=timeout_s, memory_mb=memory_mb or self.memory_mb, max_procs=self.max_procs,
                             max_file_mb=self.max_file_mb, limit_address_space=self.limit_address_space,
                             disk_mb=self.disk_mb, disk_files=self.disk_files)

    def sandboxed(self) -> bool:
        return not unsandboxed_by_environment()

    def prepare_workspace(self, template_dir: str | Path, dest: str | Path) -> Path:
        return prepare_workspace(Path(template_dir), Path(dest), bounds=workspace_bounds(self.disk_mb, self.disk_files))
