"""The process group: joining an MPI job, this process's index, and ending the job on failure.

Under `mpiexec` (or a cluster launcher) every process joins MPI's world communicator through
mpi4py. Alone, a process is a job of one: with mpi4py installed MPI starts as a singleton,
without it no MPI is needed at all (collectives are then identities).
"""
from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from types import TracebackType
from typing import Any

# Variables that MPI launchers (MPICH/Hydra, Open MPI, PMIx, Intel MPI) set in each process.
_LAUNCHER_VARS = ("PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS")


class _Group:
    """The state of this process in the job (filled by `initialize`)."""

    initialized = False
    comm: Any = None
    rank = 0
    size = 1


_GROUP = _Group()
_LOCK = threading.Lock()


def _launched_by_mpi() -> bool:
    return any(name in os.environ for name in _LAUNCHER_VARS)


def _import_mpi() -> Any:
    """mpi4py's MPI module (importing it initializes MPI), or None when a process started
    alone has no mpi4py."""
    try:
        from mpi4py import MPI
    except ImportError:
        if _launched_by_mpi():
            raise RuntimeError(
                "fgrad.distributed: this process was started by an MPI launcher "
                "(mpiexec/srun), but mpi4py is not installed, so it cannot join the job. "
                "Install the extra: pip install 'fgrad[distributed]' (mpi4py and MPICH), "
                "or pip install mpi4py against your cluster's MPI.") from None
        return None
    return MPI


def initialize() -> None:
    """Join the job: under `mpiexec` this process becomes one of `process_count()`
    processes; alone it is a 1-process job. Idempotent; every other function of
    `fgrad.distributed` calls it first, so an explicit call is optional.

    In a job of several processes, an unhandled exception in any of them prints its
    traceback naming the process, and ends the whole job (MPI_Abort, non-zero exit) so that
    no other process waits forever in a collective."""
    with _LOCK:
        if _GROUP.initialized:
            return
        MPI = _import_mpi()
        if MPI is not None:
            _GROUP.comm = MPI.COMM_WORLD
            _GROUP.rank = _GROUP.comm.Get_rank()
            _GROUP.size = _GROUP.comm.Get_size()
        _GROUP.initialized = True
        if _GROUP.size > 1:
            _install_abort_on_error()


def process_index() -> int:
    """This process's index in the job, 0 .. process_count() - 1 (its MPI rank)."""
    initialize()
    return _GROUP.rank


def process_count() -> int:
    """The number of processes in the job (1 when not started by `mpiexec`)."""
    initialize()
    return _GROUP.size


def communicator() -> Any:
    """The mpi4py communicator of the job, or None in a 1-process job without mpi4py."""
    initialize()
    return _GROUP.comm


def barrier() -> None:
    """Wait until every process of the job has reached this call."""
    if process_count() > 1:
        _GROUP.comm.Barrier()


def failure_message(rank: int, size: int, exc: BaseException) -> str:
    """The line printed when process `rank` fails (its traceback precedes it)."""
    return (f"fgrad.distributed: process {rank} of {size} failed with an unhandled "
            f"{type(exc).__name__}: {exc}; aborting all {size} processes of the job")


def _report_and_abort(exc_type: type[BaseException], exc: BaseException,
                      tb: TracebackType | None) -> None:
    try:
        sys.stdout.flush()
        text = "".join(traceback.format_exception(exc_type, exc, tb))
        prefix = f"[process {_GROUP.rank}] "
        sys.stderr.write("".join(prefix + line + "\n" for line in text.splitlines()))
        sys.stderr.write(failure_message(_GROUP.rank, _GROUP.size, exc) + "\n")
        sys.stderr.flush()
        _wait_until_read(sys.stderr)
    finally:
        _GROUP.comm.Abort(1)
        os._exit(1)  # MPI_Abort may return before the launcher ends this process


def _wait_until_read(stream: Any, limit_s: float = 2.0) -> None:
    """Wait (at most `limit_s`) until the launcher has read what this process wrote to `stream`.

    Launchers forward a process's output through a pipe; MPI_Abort ends the job at once, and
    a report still in the pipe would be lost. Not a pipe (a file, a terminal): no wait.
    """
    try:
        import fcntl
        import stat
        import termios

        fd = stream.fileno()
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return
        pending = bytearray(4)
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            fcntl.ioctl(fd, termios.FIONREAD, pending)
            if not int.from_bytes(pending, sys.byteorder):
                break
            time.sleep(0.01)
        time.sleep(0.05)  # the launcher passes what it read on to its own output
    except (OSError, ValueError, AttributeError, ImportError):
        return


def _install_abort_on_error() -> None:
    """Route unhandled exceptions (main thread and other threads) to `_report_and_abort`;
    KeyboardInterrupt too, so Ctrl-C on one process does not leave the others waiting."""
    previous = sys.excepthook

    def hook(exc_type: type[BaseException], exc: BaseException,
             tb: TracebackType | None) -> None:
        if _GROUP.size > 1:
            _report_and_abort(exc_type, exc, tb)
        else:
            previous(exc_type, exc, tb)

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_value is not None and not isinstance(args.exc_value, SystemExit):
            hook(args.exc_type, args.exc_value, args.exc_traceback)

    sys.excepthook = hook
    threading.excepthook = thread_hook
