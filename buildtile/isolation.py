"""Run calls in child processes of their own, so that one that kills its process is reported.

LLVM answers some inputs with a fatal error or a failed assertion: it prints
a line such as ``LLVM ERROR: ...`` and calls ``abort()``, which no exception
handler survives. Each call therefore runs in a forked child, with its
standard error captured: a child that returns hands its result back, one
that raises hands back the exception, and one that dies is reported as
:class:`Died` with what it wrote, while the other calls carry on.

Forking copies the parent as it is, so calls need not be picklable (their
results and exceptions must be). Where the platform cannot fork, calls run
in line, unprotected.
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

CAN_FORK = "fork" in multiprocessing.get_all_start_methods()


@dataclass(frozen=True)
class Returned:
    value: Any


@dataclass(frozen=True)
class Raised:
    error: BaseException


@dataclass(frozen=True)
class Died:
    """A call whose process ended before it could return or raise."""

    how: str       # "was killed by SIGABRT", "exited with status 1"
    stderr: str    # what the process wrote to standard error


Outcome = Returned | Raised | Died


def run_isolated(calls: Sequence[Callable[[], Any]], workers: int) -> Iterator[tuple[int, Outcome]]:
    """Run each call in a child process, ``workers`` at a time; yield ``(index, outcome)`` as each ends.

    Closing the iterator early (or an exception in the consumer) kills the
    children still running.
    """
    if not CAN_FORK:
        for index, call in enumerate(calls):
            try:
                yield index, Returned(call())
            except Exception as exc:
                yield index, Raised(exc)
        return
    context = multiprocessing.get_context("fork")
    queue = list(enumerate(calls))[::-1]
    running: dict[multiprocessing.connection.Connection, tuple[int, Any, Any]] = {}
    try:
        while queue or running:
            while queue and len(running) < max(workers, 1):
                index, call = queue.pop()
                running.update(_start(context, index, call))
            for reader in multiprocessing.connection.wait(list(running)):
                index, process, stderr = running.pop(reader)
                yield index, _finish(reader, process, stderr)
    finally:
        for reader, (_, process, stderr) in running.items():
            process.kill()
            process.join()
            reader.close()
            stderr.close()


def _start(context, index: int, call: Callable[[], Any]) -> dict:
    stderr = tempfile.TemporaryFile()
    reader, writer = context.Pipe(duplex=False)
    # what the parent buffered would otherwise be written again by the child
    sys.stdout.flush()
    sys.stderr.flush()
    process = context.Process(target=_child, args=(call, writer, stderr.fileno()), daemon=True)
    process.start()
    writer.close()   # the child holds the only writer: its death reads as end of file
    return {reader: (index, process, stderr)}


def _child(call: Callable[[], Any], writer, stderr_fd: int) -> None:
    os.dup2(stderr_fd, 2)
    # the parent reports a child that dies; Python's stack of it would only bury LLVM's message
    faulthandler.disable()
    try:
        outcome: Outcome = Returned(call())
    except BaseException as exc:  # everything goes back to the parent, which decides
        outcome = Raised(exc)
    try:
        writer.send(outcome)
    except Exception as exc:   # a result or an exception that cannot be pickled
        writer.send(Raised(RuntimeError(f"{type(exc).__name__} while returning a result: {exc}")))


def _finish(reader, process, stderr) -> Outcome:
    try:
        outcome = reader.recv()
    except EOFError:
        outcome = None
    except Exception as exc:   # sent, but it cannot be rebuilt here
        outcome = Raised(RuntimeError(f"{type(exc).__name__} while reading a result back: {exc}"))
    finally:
        reader.close()
    process.join()
    stderr.seek(0)
    text = stderr.read().decode(errors="replace")
    stderr.close()
    if outcome is None:
        return Died(_how(process.exitcode), text)
    if text:
        sys.stderr.write(text)   # warnings of a call that went well still reach the user
    return outcome


def _how(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"was killed by signal {-exitcode}"
    return f"exited with status {exitcode}"
