from buildtile import simt
from buildtile.types import DisjointSlice, Slice, f32, f64, i32, u8

COEFFS = (1.0, 2.5, 3.0, -0.5)
WEIGHTS = (1, 4, 6, 4, 1)
SCALE = 2
SCALED = (SCALE * 1.5, SCALE + 0.25)


@simt.kernel(block=128)
def polynomial(x: Slice[f32], y: DisjointSlice[f32]):
    """Horner's rule over a constant array, indexed at run time."""
    i = simt.index_1d()
    if i < len(x):
        acc = 0.0
        for k in range(len(COEFFS) - 1, -1, -1):
            acc = acc * x[i] + COEFFS[k]
        y[i] = acc + COEFFS[0] + COEFFS[-1] + SCALED[1]


@simt.kernel(block=128)
def binomial_blur(x: Slice[f64], y: DisjointSlice[f64], taps: DisjointSlice[i32], codes: DisjointSlice[u8]):
    """A 5-tap stencil with integer weights read as f64, i32 and u8 elements."""
    i = simt.index_1d()
    if i < len(x):
        s = 0.0
        for k in range(5):
            j = i + k - 2
            if j >= 0 and j < len(x):
                s += WEIGHTS[k] * x[j]
        y[i] = s / 16.0
        taps[i] = WEIGHTS[i % 5]
        codes[i] = WEIGHTS[i % len(WEIGHTS)]
