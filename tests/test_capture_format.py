"""The capture format as a contract: an independent encoder written from docs/format.md must
round-trip through the native decoder, and arbitrary bytes must never crash it."""

from __future__ import annotations

import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from leadline import _native


def varint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def zigzag(v: int) -> int:
    return (v << 1) ^ (v >> 63)


event = st.tuples(
    st.integers(0, 4),  # kind
    st.integers(1, 1 << 30),  # func
    st.integers(0, 1 << 40),  # dt
    st.integers(0, 1000),  # gap
    st.integers(-(1 << 20), 1 << 20),  # drss pages
    st.integers(0, 1 << 40),  # dheap
    st.integers(-1, 1 << 16),  # offset
)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 1 << 50),
    st.integers(0, 1 << 24),
    st.integers(0, 1 << 40),
    st.integers(0, 1 << 30),
    st.lists(event, max_size=200),
)
def test_events_round_trip(
    t0: int, rss0: int, heap0: int, n0: int, events: list[tuple[int, int, int, int, int, int, int]]
) -> None:
    payload = bytearray(varint(t0) + varint(rss0) + varint(heap0) + varint(n0))
    expected = []
    t, rss, heap, n = t0, rss0, heap0, n0
    for kind, func, dt, gap, drss, dheap, off in events:
        head = kind
        body = varint(func) + varint(dt)
        if gap:
            head |= 0x20
            body += varint(gap)
        if drss:
            head |= 0x08
            body += varint(zigzag(drss))
        if dheap:
            head |= 0x10
            body += varint(dheap)
        if off >= 0:
            head |= 0x40
            body += varint(off)
        payload += bytes([head]) + body
        t += dt
        rss += drss
        heap += dheap
        n += gap + 1
        expected.append((n, kind, func, t, rss % (1 << 64), heap, off))
    assert _native.decode_events(bytes(payload)) == expected


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300))
def test_garbage_never_crashes(data: bytes) -> None:
    try:
        _native.decode_events(data)
    except ValueError:
        pass
    agg = _native.Aggregator(b"", b"")
    try:
        agg.feed(1, data)
    except ValueError:
        pass
    agg.finish()


def test_aggregator_builds_the_tree() -> None:
    # CALL 1, CALL 2, RETURN 2, CALL 2, RETURN 2, RETURN 1 with RSS rising inside the 2nd call
    def ev(kind: int, func: int, dt: int, drss: int = 0) -> bytes:
        head = kind | (0x08 if drss else 0)
        return bytes([head]) + varint(func) + varint(dt) + (varint(zigzag(drss)) if drss else b"")

    payload = varint(1000) + varint(10) + varint(0) + varint(0)
    payload += ev(0, 1, 5) + ev(0, 2, 5) + ev(1, 2, 10) + ev(0, 2, 5) + ev(1, 2, 20, drss=3)
    payload += ev(1, 1, 5)
    agg = _native.Aggregator(b"", b"")
    assert agg.feed(7, payload) == 6
    nodes, movers, threads = agg.finish()
    by_func = {n[2]: n for n in nodes}
    # (id, parent, func, thread, calls, incl_t, self_t, incl_rss, self_rss, ...)
    root, child = by_func[1], by_func[2]
    assert root[1] == -1 and child[1] == root[0] and root[3] == child[3] == 7
    assert child[4] == 2 and root[4] == 1
    assert child[5] == 30 and root[5] == 45 and root[6] == 15
    assert child[7] == 3 and root[7] == 3 and root[8] == 0
    assert movers[0][0] in (1, 2) and threads == [(7, 1005, 1050, 6, 0)]


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=5000), st.integers(0, 200))
def test_chunk_crc_is_zlibs(data: bytes, cut: int) -> None:
    """The writer's CRC-32 (by carry-less multiplication over whole 16-byte blocks where the CPU
    has it, zlib for the rest) is zlib's, for every length and alignment: readers check chunks
    with zlib.crc32 (docs/format.md)."""
    for piece in (data, data[cut:], data[: len(data) - cut], bytes(cut) + data):
        assert _native.crc32(piece) == zlib.crc32(piece), len(piece)
    assert _native.crc32(memoryview(data)[cut:]) == zlib.crc32(data[cut:])
