"""The one timer of the GPU benchmarks: median of CUDA-event timings after warm-up."""

from __future__ import annotations

import statistics


def time_ms(torch, fn, inner: int = 1, repeat: int = 30, warmup: int = 5) -> float:
    """Milliseconds per call of ``fn``: the median over ``repeat`` samples, each timing
    ``inner`` back-to-back calls (so host launch work overlaps the GPU, as in a real loop)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / inner)
    return statistics.median(times)


def time_checked_ms(torch, fn, out, check, **timing) -> float:
    """:func:`time_ms` of ``fn``, with ``out`` poisoned (NaN) first and ``check()`` asserted after the
    timing: the figure is of calls that did write the right result, not of a path that did nothing."""
    out.fill_(float("nan"))
    ms = time_ms(torch, fn, **timing)
    torch.cuda.synchronize()
    check()
    return ms
