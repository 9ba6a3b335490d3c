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


def graphed(torch, fn, calls: int):
    """A callable replaying ``calls`` back-to-back calls of ``fn`` captured in one CUDA graph (after
    one warm-up call outside it): the device time of a kernel whose host launch path is slower
    than the kernel, as a loop of launches captured in a graph sees it."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(calls):
                fn()
    torch.cuda.current_stream().wait_stream(stream)
    return graph.replay


def host_us(torch, fn, calls: int = 200) -> float:
    """Microseconds of host time per call of ``fn`` (launch work; the device runs behind)."""
    import time

    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6
