"""Checks that a launch went to the stream it was given, for the GPU tests.

A read that synchronises, or the legacy default stream, orders a launch after earlier work whichever
stream it went to, so "the output is right after synchronising" cannot tell one stream from another.
Here the given stream is held busy first (a GPU-side sleep), the launch is queued, and the output is
read from the default stream, which does not wait for the (non-blocking) held stream: it must still be
unwritten; once the held stream is synchronised, it must be written. A launch on any stream the default
stream waits for (itself, a blocking stream, a stream synchronised by the read) would have written it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: about half a second at 2 GHz: far longer than queueing a launch and reading a small output
HOLD_CYCLES = 1_000_000_000

_SPIN = r'''
extern "C" __global__ void buildtile_test_spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
}
'''


class TorchHold:
    """Holds a ``torch.cuda.Stream`` (PyTorch's streams are non-blocking)."""

    def __init__(self, torch, stream) -> None:
        self.torch, self.stream = torch, stream

    def hold(self) -> None:
        self.stream.wait_stream(self.torch.cuda.current_stream())   # the inputs are ready first
        with self.torch.cuda.stream(self.stream):
            self.torch.cuda._sleep(HOLD_CYCLES)

    def peek(self, tensor) -> np.ndarray:
        with self.torch.cuda.stream(self.torch.cuda.default_stream()):
            return tensor.cpu().numpy()

    def busy(self) -> bool:
        return not self.stream.query()

    def poison(self, tensor) -> None:
        tensor.fill_(float("nan") if tensor.dtype.is_floating_point else -1)
        self.torch.cuda.synchronize()

    def synchronize(self) -> None:
        self.stream.synchronize()


class CupyHold:
    """Holds a non-blocking ``cupy.cuda.Stream``."""

    def __init__(self, cupy, stream) -> None:
        self.cupy, self.stream = cupy, stream
        self._spin = cupy.RawKernel(_SPIN, "buildtile_test_spin")

    def hold(self) -> None:
        self.cupy.cuda.Device().synchronize()                         # the inputs are ready first
        self._spin((1,), (1,), (np.int64(HOLD_CYCLES),), stream=self.stream)

    def peek(self, array) -> np.ndarray:
        with self.cupy.cuda.Stream.null:
            return self.cupy.asnumpy(array)

    def busy(self) -> bool:
        return not self.stream.done

    def poison(self, array) -> None:
        array.fill(np.nan if array.dtype.kind == "f" else -1)
        self.cupy.cuda.Device().synchronize()

    def synchronize(self) -> None:
        self.stream.synchronize()


def launched_on(held: TorchHold | CupyHold, output, launch: Callable[[], object],
                synchronize: Callable[[], object] | None = None) -> np.ndarray:
    """Run ``launch()`` while ``held``'s stream is held; the output must be untouched until that stream
    is synchronised (by ``synchronize()``, the held stream's own by default). Returns the output.

    The launch runs once first, unheld: the first launch of a kernel in a context loads its module,
    and loading a module waits for the whole device, held stream included. The output is poisoned
    again before the held launch."""
    launch()
    (synchronize or held.synchronize)()
    held.poison(output)
    before = held.peek(output)
    held.hold()
    launch()
    seen = held.peek(output)
    assert held.busy(), ("the held stream was idle again before the output was read, so the check proves "
                         "nothing: the launch blocked the host, or HOLD_CYCLES is too short for this GPU")
    assert seen.tobytes() == before.tobytes(), \
        "the output was written while the stream it was given was held: the launch went to another stream"
    (synchronize or held.synchronize)()
    assert not held.busy()
    return held.peek(output)
