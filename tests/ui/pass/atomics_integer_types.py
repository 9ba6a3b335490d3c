from buildtile import simt
from buildtile.types import AtomicSlice, DisjointSlice, Slice, i32, i64, u32, u64


@simt.kernel(block=256)
def stats_i32(x: Slice[i32], acc: AtomicSlice[i32]):
    i = simt.index_1d()
    if i < len(x):
        v = x[i]
        acc.atomic_add(0, v)
        acc.atomic_min(1, v)
        acc.atomic_max(2, v)
        acc.atomic_exchange(3, v)


@simt.kernel(block=256)
def stats_u64(x: Slice[u64], acc: AtomicSlice[u64]):
    i = simt.index_1d()
    if i < len(x):
        v = x[i]
        acc.atomic_add(0, v)
        acc.atomic_min(1, v)
        acc.atomic_max(2, v)


@simt.kernel(block=128)
def claim_slots(owner: AtomicSlice[i64], won: DisjointSlice[i64]):
    """Each thread tries to claim slot i % len(owner); won[i] is 1 if it got it."""
    i = simt.index_1d()
    if i < len(won):
        slot = i % len(owner)
        previous = owner.atomic_cas(slot, -1, i)
        won[i] = 1 if previous == -1 else 0


@simt.kernel(block=128)
def ticket(counter: AtomicSlice[u32], tickets: DisjointSlice[u32], last: AtomicSlice[u64]):
    i = simt.index_1d()
    if i < len(tickets):
        t = counter.atomic_add(0, u32(1))
        tickets[i] = t
        last.atomic_exchange(0, u64(i))
        last.atomic_max(1, u64(t))
        counter.atomic_cas(1, u32(0), t)
