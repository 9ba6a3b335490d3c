"""CUDA samples' ``BlackScholes``: European call and put prices, the cumulative normal by the
polynomial approximation of Abramowitz and Stegun, one option per thread in a grid-stride loop."""

import math

from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32, i32

A1 = 0.31938153
A2 = -0.356563782
A3 = 1.781477937
A4 = -1.821255978
A5 = 1.330274429
RSQRT2PI = 0.39894228040143267793994605993438


@simt.device
def cnd(d: f32) -> f32:
    """The cumulative normal distribution at d."""
    k = 1.0 / (1.0 + 0.2316419 * math.fabs(d))
    c = RSQRT2PI * math.exp(-0.5 * d * d) * (k * (A1 + k * (A2 + k * (A3 + k * (A4 + k * A5)))))
    if d > 0:
        c = 1.0 - c
    return c


@simt.device
def black_scholes_body(s: f32, x: f32, t: f32, r: f32, v: f32) -> tuple[f32, f32]:
    sqrt_t = 1.0 / math.rsqrt(t)
    d1 = (math.log(s / x) + (r + 0.5 * v * v) * t) / (v * sqrt_t)
    d2 = d1 - v * sqrt_t
    cndd1 = cnd(d1)
    cndd2 = cnd(d2)
    exp_rt = math.exp(-r * t)
    call = s * cndd1 - x * exp_rt * cndd2
    put = x * exp_rt * (1.0 - cndd2) - s * (1.0 - cndd1)
    return call, put


@simt.kernel(block=128, requires=["len(d_call) == opt_n", "len(d_put) == opt_n", "len(d_stock) == opt_n",
                                  "len(d_strike) == opt_n", "len(d_years) == opt_n"])
def black_scholes_gpu(d_call: DisjointSlice[f32], d_put: DisjointSlice[f32], d_stock: Slice[f32],
                      d_strike: Slice[f32], d_years: Slice[f32], riskfree: f32, volatility: f32, opt_n: i32):
    tid = simt.block_dim.x * simt.block_idx.x + simt.thread_idx.x
    thread_n = simt.block_dim.x * simt.grid_dim.x
    opt = tid
    while opt < opt_n:
        call, put = black_scholes_body(d_stock[opt], d_strike[opt], d_years[opt], riskfree, volatility)
        d_call[opt] = call
        d_put[opt] = put
        opt += thread_n
