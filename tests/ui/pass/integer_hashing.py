from buildtile import simt
from buildtile.types import DisjointSlice, Slice, u32, u64

GOLDEN = 0x9E3779B9


@simt.device
def fmix64(k: u64) -> u64:
    """MurmurHash3's 64-bit finalizer."""
    k ^= k >> u64(33)
    k *= u64(0xFF51AFD7ED558CCD)
    k ^= k >> u64(33)
    k *= u64(0xC4CEB9FE1A85EC53)
    k ^= k >> u64(33)
    return k


@simt.device
def xorshift32(x: u32) -> u32:
    x ^= x << u32(13)
    x ^= x >> u32(17)
    x ^= x << u32(5)
    return x


@simt.kernel(block=256, requires=["len(keys) == len(out)"])
def hash_keys(keys: Slice[u64], out: DisjointSlice[u64]):
    i = simt.index_1d()
    if i < len(out):
        out[i] = fmix64(keys[i] + u64(i))


@simt.kernel(block=256)
def random_bits(seed: u32, out: DisjointSlice[u32]):
    i = simt.index_1d()
    if i < len(out):
        state = seed ^ (u32(i) * u32(GOLDEN))
        for _ in range(4):
            state = xorshift32(state)
        out[i] = (state & u32(0xFFFF)) | (~state & u32(0xFFFF0000))
