import math

from buildtile import simt
from buildtile.types import DisjointSlice, DisjointTensor, Slice, Tensor, i8, i16, i32, u8, u16, f32


@simt.kernel(block=256)
def brighten(pixels: Slice[u8], out: DisjointSlice[u8], gain: u16, bias: i16):
    """u8 pixels through u16/i16 arithmetic, clamped back to 0..255."""
    i = simt.index_1d()
    if i < len(pixels):
        scaled = u16(pixels[i]) * gain // 16
        shifted = i16(scaled) + bias
        out[i] = u8(max(min(shifted, 255), 0))


@simt.kernel(block=(16, 16))
def quantize(x: Tensor[f32, 2], q: DisjointTensor[i8, 2], scale: f32):
    """f32 to i8 with rounding and saturation to -127..127."""
    row, col = simt.index_2d()
    if row < x.shape[0] and col < x.shape[1]:
        v = math.round(x[row, col] / scale)
        q[row, col] = i8(max(min(v, 127.0), -127.0))


@simt.kernel(block=128)
def widen(a: Slice[i8], b: Slice[u16], wide: DisjointSlice[i32], low: DisjointSlice[i16], bits: DisjointSlice[u8]):
    """Sign and zero extension, wrapping arithmetic and bitwise operators at 8 and 16 bits."""
    i = simt.index_1d()
    if i < len(a) and i < len(b):
        x = a[i]
        y: i8 = x * 3 + 1
        wide[i] = i32(y) + i32(b[i])
        low[i] = i16(b[i]) >> 2
        z: u8 = u8(b[i]) ^ 0xA5
        bits[i] = (z << 1) | (z >> 7)
