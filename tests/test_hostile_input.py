"""Captures and profiles whose chunks pass their checksums but hold malformed content: each is
read to a one-line error (exit status 2) or salvaged with a warning, never a traceback.

Each test builds its hostile input from a real recording (the chunks re-checksummed, so the
reader trusts the framing and must judge the content), then reads it through the real CLI and,
where it says more, through the reader itself."""

from __future__ import annotations

import contextlib
import io
import json
import re
import struct
import subprocess
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import HOOK_KIND_ENDS, leadline, write

from leadline import _native, cli
from leadline.capture import schema
from leadline.capture.foreign import read_collapsed, read_pprof
from leadline.capture.reader import (
    CHUNK,
    END,
    EVENTS,
    FUNCS,
    HEADER,
    MARKS,
    META,
    STACKS,
    STRINGS,
    TASKS,
    THREADS,
    Capture,
    Definitions,
)
from leadline.errors import LeadlineError
from leadline.render.encode import protobuf_message

# What these test is version-independent logic (support.HOOK_KIND_ENDS).
pytestmark = HOOK_KIND_ENDS

TRACED = """
    import threading
    import leadline

    def work(n):
        leadline.mark("step", n=n)
        return [n] * 100

    def main():
        for i in range(200):
            work(i)

    t = threading.Thread(target=main, name="helper")
    t.start()
    main()
    t.join()
"""

SAMPLED = """
    import time

    def spin(seconds):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    spin(0.3)
"""

Chunk = tuple[int, int, bytes]  # kind, stream, payload


# -- building hostile captures ---------------------------------------------------------------
def parse(data: bytes) -> tuple[bytes, list[Chunk]]:
    pos, out = HEADER.size, []
    while pos + CHUNK.size <= len(data):
        _magic, kind, _f, _r, length, _crc, stream = CHUNK.unpack_from(data, pos)
        start = pos + CHUNK.size
        out.append((kind, stream, data[start : start + length]))
        pos = start + length
    return data[: HEADER.size], out


def build(header: bytes, chunks: list[Chunk]) -> bytes:
    """A capture of these chunks, each with its right checksum."""
    out = bytearray(header)
    for kind, stream, payload in chunks:
        out += CHUNK.pack(b"LLCK", kind, 0, 0, len(payload), zlib.crc32(payload), stream)
        out += payload
    return bytes(out)


def rewrite(src: Path, dst: Path, change: Callable[[list[Chunk]], list[Chunk]]) -> Path:
    header, chunks = parse(src.read_bytes())
    dst.write_bytes(build(header, change(chunks)))
    return dst


def replace_payload(kind: int, payload: bytes) -> Callable[[list[Chunk]], list[Chunk]]:
    """Every chunk of `kind` replaced by one with `payload` (at the first one's place)."""

    def change(chunks: list[Chunk]) -> list[Chunk]:
        out: list[Chunk] = []
        done = False
        for k, stream, p in chunks:
            if k != kind:
                out.append((k, stream, p))
            elif not done:
                out.append((k, stream, payload))
                done = True
        return out

    return change


def edit_json(
    kind: int, edit: Callable[[dict[str, Any]], Any]
) -> Callable[[list[Chunk]], list[Chunk]]:
    def change(chunks: list[Chunk]) -> list[Chunk]:
        out = []
        for k, stream, p in chunks:
            if k == kind:
                p = json.dumps(edit(json.loads(p)), allow_nan=True).encode()
            out.append((k, stream, p))
        return out

    return change


def varint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("recorded")
    write(d, "traced.py", TRACED)
    write(d, "sampled.py", SAMPLED)
    leadline("trace", "-o", "trace.lead", "traced.py", cwd=d, check=True)
    leadline("run", "-q", "-r", "200", "-o", "sample.lead", "sampled.py", cwd=d, check=True)
    return {"trace": d / "trace.lead", "sample": d / "sample.lead"}


def in_process(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """`leadline ARGS` through cli.main in this process: the exit status and what it printed."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main([str(a) for a in args])
    return subprocess.CompletedProcess(list(args), status, out.getvalue(), err.getvalue())


def one_line_error(r: Any) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout[-2000:], r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("leadline: error: ")
    return str(lines[0])


def salvaged(r: Any) -> dict[str, Any]:
    """A read that kept what it could: exit 0, one warning line, the JSON report."""
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("leadline: warning:")]
    assert len(warnings) == 1, r.stderr
    data: dict[str, Any] = json.loads(r.stdout)
    return data


# -- definition chunks cut short or with absurd values -----------------------------------------
def test_funcs_cut_short_is_damage_not_a_traceback(
    recorded: dict[str, Path], tmp_path: Path
) -> None:
    """A FUNCS record that ends after its id (the reader indexed past the payload: IndexError).
    How many FUNCS chunks a trace has depends on when its writer flushed them (a busy machine
    can leave one): the first stays whole and a second one, cut one byte into its record, is
    put right after it."""
    good_funcs = [p for k, _, p in parse(recorded["trace"].read_bytes())[1] if k == FUNCS]

    def cut(chunks: list[Chunk]) -> list[Chunk]:
        out, seen = [], 0
        for k, s, p in chunks:
            out.append((k, s, p))
            if k == FUNCS and (seen := seen + 1) == 1:
                out.append((k, s, p[:1]))
        return out

    assert len(good_funcs) >= 1
    cap = rewrite(recorded["trace"], tmp_path / "cut.lead", cut)
    data = salvaged(leadline("report", cap, "--json", cwd=tmp_path))
    damage = data["summary"]["damage"]
    assert "FUNCS" in damage and "cut short" in damage
    assert data["summary"]["complete"] is False and data["summary"]["unused_bytes"] > 0
    with Capture(cap) as c:
        assert c.functions  # the first chunk's functions were kept
        assert c.damage == damage


@pytest.mark.parametrize(
    ("kind", "payload"),
    [
        (STRINGS, varint(1) + varint(50) + b"short"),  # length past the payload
        (FUNCS, varint(1)),  # the kind byte is missing
        (FUNCS, varint(1) + b"\x00" + varint(1) + varint(1) + varint(1) + varint(1_000_000)),
        (THREADS, varint(1) + varint(2)),  # a record of 3 with 2
        (STACKS, varint(1) + varint(0) + varint(1)),
        (TASKS, varint(1) + varint(2) + varint(3)),
        (MARKS, varint(10) + varint(20)),  # the kind byte is missing
        (MARKS, varint(10) + varint(20) + b"\x00" + varint(3) + varint(99) + b"x"),
        (FUNCS, b"\xff" * 20 + b"\x01"),  # a number of 147 bits
        (STRINGS, varint(1) + b"\x80" * 11 + b"\x01"),
    ],
    ids=lambda v: str(v)[:20],
)
def test_definition_chunks_malformed(kind: int, payload: bytes) -> None:
    d = Definitions()
    with pytest.raises(ValueError) as e:
        d._load(kind, payload)
    assert "cut short" in str(e.value) or "64 bits" in str(e.value)
    assert not isinstance(e.value, IndexError)


def test_every_definition_chunk_cut_short_through_the_cli(
    recorded: dict[str, Path], tmp_path: Path
) -> None:
    for src, kind in ((recorded["trace"], FUNCS), (recorded["trace"], STRINGS),
                      (recorded["trace"], THREADS), (recorded["trace"], MARKS),
                      (recorded["sample"], STACKS), (recorded["sample"], TASKS)):  # fmt: skip
        header, chunks = parse(src.read_bytes())
        i = next(i for i, (k, _, _) in enumerate(chunks) if k == kind)
        k, s, p = chunks[i]
        chunks[i] = (k, s, p[: max(len(p) - 1, 1)] if len(p) > 2 else b"\x80")
        cap = tmp_path / f"cut-{kind}.lead"
        cap.write_bytes(build(header, chunks))
        for args in (["report", cap, "--json"], ["log", cap, "--json"]):
            r = leadline(*args, cwd=tmp_path)
            assert r.returncode in (0, 2) and "Traceback" not in r.stderr, (kind, r.stderr)
            if r.returncode == 2:
                one_line_error(r)  # e.g. a sampling capture with no stacks left to show


def test_stack_chain_that_loops_is_damage_not_a_hang(
    recorded: dict[str, Path], tmp_path: Path
) -> None:
    """Stack 2 whose parent is 3 and 3 whose parent is 2: the profile loader followed the chain
    a million frames deep for every sample (a hang); a parent must be an earlier stack."""
    loop = varint(2) + varint(3) + varint(1) + varint(0) + varint(3) + varint(2) + varint(1)
    loop += varint(0)
    cap = rewrite(recorded["sample"], tmp_path / "loop.lead", replace_payload(STACKS, loop))
    r = leadline("report", cap, "--json", cwd=tmp_path, timeout=60)
    assert r.returncode in (0, 2) and "Traceback" not in r.stderr
    assert "not an earlier stack" in r.stderr


# -- META and END ----------------------------------------------------------------------------
def test_deeply_nested_meta_is_a_one_line_error(recorded: dict[str, Path], tmp_path: Path) -> None:
    """json.loads on 100,000 nested lists raised RecursionError out of the reader."""
    nested = b'{"mode": "trace", "options": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    cap = rewrite(recorded["trace"], tmp_path / "nested.lead", replace_payload(META, nested))
    assert "nested too deeply" in one_line_error(leadline("report", cap, cwd=tmp_path))
    # Deeper than the writer ever nests, though shallow enough for json to parse: refused too.
    deep: Any = 0
    for _ in range(20):
        deep = [deep]
    shallow = json.dumps({"mode": "trace", "options": {"x": deep}})
    cap = rewrite(recorded["trace"], tmp_path / "n2.lead", replace_payload(META, shallow.encode()))
    assert "nested too deeply" in one_line_error(leadline("log", cap, cwd=tmp_path))


@pytest.mark.parametrize("end", [b"[]", b"3", b'"done"', b"null", b"{", b"\xff\xfe"])
def test_end_that_is_not_an_object_is_salvaged(
    recorded: dict[str, Path], tmp_path: Path, end: bytes
) -> None:
    """END is written last: everything before it is readable without it, so a malformed one is
    damage (the report says incomplete) and not an error; it was AttributeError on `.get`."""
    cap = rewrite(recorded["trace"], tmp_path / "end.lead", replace_payload(END, end))
    data = salvaged(leadline("report", cap, "--json", cwd=tmp_path))
    assert "END" in data["summary"]["damage"] and data["summary"]["complete"] is False
    assert data["functions"] and data["threads"]
    scap = rewrite(recorded["sample"], tmp_path / "send.lead", replace_payload(END, end))
    data = salvaged(leadline("report", scap, "--json", cwd=tmp_path))
    assert data["samples"] > 0 and data["complete"] is False


# Each: how META is spoiled, and the field the error must name.
BAD_META: list[tuple[str, Callable[[dict[str, Any]], Any], str]] = [
    ("tick_ns text", lambda m: {**m, "tick_ns": "fast"}, "tick_ns"),
    ("tick_ns inf", lambda m: {**m, "tick_ns": float("inf")}, "finite"),
    ("tick_ns nan", lambda m: {**m, "tick_ns": float("nan")}, "finite"),
    ("tick_ns 1e999", lambda m: {**m, "tick_ns": "__RAW:1e999__"}, "finite"),
    ("tick_ns zero", lambda m: {**m, "tick_ns": 0}, "tick_ns"),
    ("tick_ns huge", lambda m: {**m, "tick_ns": 10**400}, "tick_ns"),
    ("t_start negative", lambda m: {**m, "t_start": -5}, "t_start"),
    ("t_start huge", lambda m: {**m, "t_start": 2**70}, "t_start"),
    ("t_start digits", lambda m: {**m, "t_start": "__RAW:" + "9" * 5000 + "__"}, "META"),
    ("page_size zero", lambda m: {**m, "page_size": 0}, "page_size"),
    ("page_size float", lambda m: {**m, "page_size": 4096.5}, "page_size"),
    ("pid text", lambda m: {**m, "pid": "1234"}, "pid"),
    ("argv numbers", lambda m: {**m, "argv": [1, 2]}, "argv"),
    ("argv string", lambda m: {**m, "argv": "app.py"}, "argv"),
    ("mode number", lambda m: {**m, "mode": 1}, "mode"),
    ("options list", lambda m: {**m, "options": []}, "options"),
    ("rate zero", lambda m: {**m, "options": {**m["options"], "rate_hz": 0}}, "rate_hz"),
    ("rate tiny", lambda m: {**m, "options": {**m["options"], "rate_hz": 1e-300}}, "rate_hz"),
    ("memory text", lambda m: {**m, "options": {**m["options"], "memory": "yes"}}, "memory"),
    ("not an object", lambda m: [m], "not a JSON object"),
]


@pytest.mark.parametrize(
    ("spoil", "field"), [(b[1], b[2]) for b in BAD_META], ids=[b[0] for b in BAD_META]
)
def test_meta_fields_of_the_wrong_type_or_range(
    recorded: dict[str, Path], tmp_path: Path, spoil: Callable[[dict[str, Any]], Any], field: str
) -> None:
    """Each was a traceback in some reader (OverflowError converting ticks or a rate to
    nanoseconds, ValueError/TypeError from int() or a join, AttributeError), or a wrong
    number; now one line naming the field, from every command alike (in-process here, for
    speed; the real CLI once)."""
    for name, src in recorded.items():
        header, chunks = parse(src.read_bytes())
        out = []
        for k, s, p in chunks:
            if k == META:
                text = json.dumps(spoil(json.loads(p)), allow_nan=True)
                p = re.sub(r'"__RAW:(.*?)__"', r"\1", text).encode()
            out.append((k, s, p))
        cap = tmp_path / f"{name}.lead"
        cap.write_bytes(build(header, out))
        o = str(tmp_path / "o.json")
        for args in (["report", cap], ["report", cap, "--json"], ["log", cap],
                     ["report", cap, "--html", "-o", o],
                     ["export", cap, "--format", "chrome", "-o", o],
                     ["export", cap, "--format", "speedscope", "-o", o],
                     ["diff", cap, cap]):  # fmt: skip
            msg = one_line_error(in_process(*args))
            assert "not a readable capture" in msg and field in msg, msg
    one_line_error(leadline("report", cap, cwd=tmp_path))


BAD_END: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("t_end text", lambda e: {**e, "t_end": "later"}),
    ("t_end inf", lambda e: {**e, "t_end": float("inf")}),
    ("tick_ns nan", lambda e: {**e, "tick_ns": float("nan")}),
    ("tick_ns huge", lambda e: {**e, "tick_ns": 1e300}),
    ("events negative", lambda e: {**e, "events": -1}),
    ("threads list", lambda e: {**e, "threads": ["MainThread"]}),
    ("thread name number", lambda e: {**e, "threads": {"1": 7}}),
    ("thread_tids nested", lambda e: {**e, "thread_tids": {"1": {"name": "x"}}}),
    ("missed float", lambda e: {**e, "missed": 1.5}),
    ("coarse_from text", lambda e: {**e, "coarse_from": "soon"}),
    ("locals not a list", lambda e: {**e, "locals": {"x": "1"}}),
    ("local without repr", lambda e: {**e, "locals": [{"serial": 1, "frame": 0, "name": "x"}]}),
    (
        "local repr number",
        lambda e: {
            **e,
            "locals": [{"serial": 1, "frame": 0, "name": "x", "type": "int", "repr": 1}],
        },
    ),
]


@pytest.mark.parametrize("spoil", [b[1] for b in BAD_END], ids=[b[0] for b in BAD_END])
def test_end_fields_of_the_wrong_type_are_salvaged(
    recorded: dict[str, Path], tmp_path: Path, spoil: Callable[[dict[str, Any]], Any]
) -> None:
    for name, src in recorded.items():
        cap = rewrite(src, tmp_path / f"{name}.lead", edit_json(END, spoil))
        data = salvaged(in_process("report", cap, "--json"))
        summary = data["summary"] if name == "trace" else data
        assert summary["complete"] is False
        for args in (["report", cap], ["log", cap], ["diff", cap, cap, "--json"]):
            r = in_process(*args)
            assert r.returncode == 0 and "END" in r.stderr, r.stderr


def test_probe_capture_with_malformed_probes(tmp_path: Path) -> None:
    write(tmp_path, "p.py", "x = 0\nfor i in range(10):\n    x += i\n")
    leadline("probe", "-q", "--count", "loop=p.py:3", "-o", "probe.lead", "p.py",
             cwd=tmp_path, check=True)  # fmt: skip
    src = tmp_path / "probe.lead"
    spoiled = edit_json(META, lambda m: {**m, "options": {**m["options"], "probes": [{"spec": 1}]}})
    cap = rewrite(src, tmp_path / "bad.lead", spoiled)
    msg = one_line_error(leadline("report", cap, cwd=tmp_path))
    assert "probes" in msg and "name" in msg
    counts = edit_json(END, lambda e: {**e, "counts": {"loop": "many"}, "seconds": -1})
    cap = rewrite(src, tmp_path / "bad-end.lead", counts)
    r = leadline("report", cap, cwd=tmp_path)
    assert r.returncode == 0 and "END" in r.stderr and "Traceback" not in r.stderr
    assert "incomplete capture" in r.stdout


def test_schema_units() -> None:
    assert schema.load_json(b'{"a": [1, {"b": 2}]}', "X") == {"a": [1, {"b": 2}]}
    for bad, why in ((b'{"a": NaN}', "finite"), (b'{"a": -Infinity}', "finite"),
                     (b'{"a": 1e400}', "finite"), (b"[" * 5000 + b"]" * 5000, "nested"),
                     (b"\xc3\x28", "UTF-8"), (b'{"a": ' + b"1" * 5000 + b"}", "X:")):  # fmt: skip
        with pytest.raises(schema.Malformed, match=why):
            schema.load_json(bad, "X")
    ok = {"tick_ns": 0.3, "t_start": 0, "argv": ["a"], "options": {"rate_hz": 100}}
    assert schema.check_fields(ok, schema.META_FIELDS) is None
    assert (
        schema.check_fields({"pid": True}, schema.META_FIELDS)
        == "'pid': not an integer from 0 to 2^64-1"
    )
    # Fields a newer minor version may add are kept as they are.
    assert schema.check_fields({"future": [1, "x"]}, schema.META_FIELDS) is None


# -- mark fields -----------------------------------------------------------------------------
def test_mark_fields_nested_or_not_finite_read_as_empty(
    recorded: dict[str, Path], tmp_path: Path
) -> None:
    def mark(fields: bytes) -> bytes:
        rec = varint(1) + varint(2) + b"\x00" + varint(3)
        for text in (b"m", b"f.py", fields):
            rec += varint(len(text)) + text
        return rec

    payload = mark(b"[" * 50_000 + b"]" * 50_000) + mark(b'{"v": NaN}') + mark(b'{"ok": 1}')
    cap = rewrite(recorded["trace"], tmp_path / "marks.lead", replace_payload(MARKS, payload))
    r = leadline("log", cap, "--json", cwd=tmp_path)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    fields = [row["fields"] for row in rows if row.get("mark") == "m"]
    assert fields == [{}, {}, {"ok": 1}]


# -- the C decoder ---------------------------------------------------------------------------
def test_aggregator_rss_changes_at_the_extremes() -> None:
    """RSS deltas that sum past INT64 (signed overflow in C) and a change of INT64_MIN (whose
    llabs() is undefined): the sums wrap as documented instead of being undefined behaviour."""
    base = varint(100) + varint(0) + varint(0) + varint(0)
    rss_min = varint((1 << 64) - 1)  # zig-zag of INT64_MIN
    events = b""
    for _ in range(4):
        events += bytes([0 | 8]) + varint(1) + varint(1) + rss_min  # CALL, RSS follows
        events += bytes([1 | 8]) + varint(1) + varint(1) + rss_min  # RETURN, RSS follows
    decoded = _native.decode_events(base + events)
    assert len(decoded) == 8
    agg = _native.Aggregator(b"", b"")
    for _ in range(30):
        assert agg.feed(1, base + events) == 8
    nodes, movers, threads = agg.finish()
    assert nodes[0][4] == 120 and threads[0][3] == 240
    assert all(isinstance(m[4], int) for m in movers)


def test_aggregator_rejects_truncated_and_wrong_kinds() -> None:
    base = varint(100) + varint(0) + varint(0) + varint(0)
    for bad in (b"", base[:2], base + b"\x07", base + b"\x80", base + b"\x00" + b"\xff" * 12):
        with pytest.raises(ValueError):
            _native.decode_events(bad)
        with pytest.raises(ValueError):
            _native.Aggregator(b"", b"").feed(1, bad)
    # A timeline of odd lengths is cut to whole values, never read past.
    _native.Aggregator(b"\x01" * 13, b"\x02" * 7).finish()


# -- collapsed stacks: a sample per "\n" -----------------------------------------------------
NAMES = ["a\u2028b", "c\u2029d", "e\x85f", "g\x0ch", "i\x0bj", "k\x1cl", "m\x1dn", "o\x1ep"]


def test_collapsed_lines_end_at_newline_only() -> None:
    text = "".join(f"main;{n} (f.py:1) {i + 1}\n" for i, n in enumerate(NAMES))
    prof = read_collapsed("x.txt", text)
    leaves = {frames[-1].name: w for frames, w in prof.stacks}
    assert leaves == {n: float(i + 1) for i, n in enumerate(NAMES)}
    # Windows line ends and blank separators are still fine.
    assert read_collapsed("x.txt", "a;b 2\r\n\r\n# c\r\na 1\r\n").stacks[0][1] == 2.0


def test_collapsed_counts_too_large_for_a_count() -> None:
    with pytest.raises(LeadlineError, match="line 2: the count is too large"):
        read_collapsed("x.txt", "a 1\nb " + "9" * 400 + "\n")


def test_collapsed_line_numbers_of_thousands_of_digits() -> None:
    """int() refuses strings of more than 4,300 digits (ValueError): a frame label's line
    number longer than a line number can be is read as part of its file's name."""
    digits = "9" * 5000
    ((frames, weight),) = read_collapsed("x.txt", f"main;f (x.py:{digits}) 3\n").stacks
    assert frames[-1].name == "f" and frames[-1].file == f"x.py:{digits}" and weight == 3.0
    ((frames, _),) = read_collapsed("x.txt", "main;f (x.py:12) 3\n").stacks
    assert (frames[-1].file, frames[-1].line) == ("x.py", 12)


U2028_PROGRAM = """
    import time

    def spin(seconds):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    # A name no `def` can spell, as generated code or a renamed function may have.
    weird = "spin\\u2028line\\u2029para\\x85nel"
    code = spin.__code__.replace(co_name=weird)
    if hasattr(code, "co_qualname"):
        code = code.replace(co_qualname=weird)
    spin.__code__ = code
    spin(0.3)
"""


def test_u2028_names_round_trip_through_collapsed_export_and_import(tmp_path: Path) -> None:
    """The collapsed reader split lines with str.splitlines(), which also breaks at U+2028,
    U+2029 and U+0085: a name holding one made the export unreadable ('line 2 is not a folded
    stack', or no profile found at all)."""
    write(tmp_path, "prog.py", U2028_PROGRAM)
    leadline("run", "-q", "-r", "500", "-o", "w.lead", "prog.py", cwd=tmp_path, check=True)
    leadline("export", "w.lead", "--format", "collapsed", "-o", "w.txt", cwd=tmp_path, check=True)
    text = (tmp_path / "w.txt").read_text(encoding="utf-8")
    weird = "spin\u2028line\u2029para\x85nel"
    assert weird in text
    assert len(text.splitlines()) > text.count("\n")  # what splitlines() made of it
    r = leadline("diff", "w.txt", "w.txt", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    names = {f["name"] for f in json.loads(r.stdout)["functions"]}
    assert weird in names
    # And against the capture itself: the same function on both sides.
    r = leadline("diff", "w.lead", "w.txt", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    both = [f for f in json.loads(r.stdout)["functions"] if f["name"] == weird]
    assert len(both) == 1 and both[0]["status"] == "both"


MARKUP_PROGRAM = """
    import time

    def spin(seconds):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    weird = "[/]spin[bold red]"
    code = spin.__code__.replace(co_name=weird)
    if hasattr(code, "co_qualname"):
        code = code.replace(co_qualname=weird)
    spin.__code__ = code
    spin(0.3)
"""


def test_names_that_look_like_terminal_markup_are_printed_as_they_are(tmp_path: Path) -> None:
    """The terminal tables (rich) read "[/]" in a function name as a closing tag: MarkupError
    (found by the `report` fuzz target), and "[red]" would have coloured the rest."""
    write(tmp_path, "prog.py", MARKUP_PROGRAM)
    leadline("run", "-q", "-r", "500", "-o", "w.lead", "prog.py", cwd=tmp_path, check=True)
    for args in (["report", "w.lead"], ["report", "w.lead", "--callers", "*spin*"],
                 ["diff", "w.lead", "w.lead"]):  # fmt: skip
        r = leadline(*args, cwd=tmp_path)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        assert "[/]spin[bold red]" in r.stdout, r.stdout


# -- pprof -----------------------------------------------------------------------------------
def _pprof(values: list[int], type_name: str = "samples") -> bytes:
    strings = ["", type_name, "count", "main", "f.py"]
    p = protobuf_message()
    p.message(1, protobuf_message().scalar(1, 1).scalar(2, 2))
    for v in values:
        p.message(2, protobuf_message().packed(1, [1]).packed(2, [v]))
    p.message(4, protobuf_message().scalar(1, 1).message(4, protobuf_message().scalar(1, 1)))
    p.message(5, protobuf_message().scalar(1, 1).scalar(2, 3).scalar(4, 4))
    for s in strings:
        p.raw(6, s.encode())
    return bytes(p.data)


def test_pprof_that_expands_far_beyond_its_size_is_refused() -> None:
    """A location holding many lines, named many times by a sample: a few kilobytes described
    stacks of millions of frames (memory, and a diff quadratic in the depth)."""

    def profile(locs: list[int], lines_per_location: int) -> bytes:
        p = protobuf_message()
        p.message(1, protobuf_message().scalar(1, 1).scalar(2, 2))
        p.message(2, protobuf_message().packed(1, locs).packed(2, [1]))
        loc = protobuf_message().scalar(1, 1)
        for i in range(lines_per_location):
            loc.message(4, protobuf_message().scalar(1, 1).scalar(2, i + 1))
        p.message(4, loc)
        p.message(5, protobuf_message().scalar(1, 1).scalar(2, 3).scalar(4, 4))
        for text in ("", "samples", "count", "main", "f.py"):
            p.raw(6, text.encode())
        return bytes(p.data)

    assert len(read_pprof("ok.pb", profile([1] * 100, 3)).stacks[0][0]) == 300
    deep = profile([1] * 3000, 3)  # 9,000 frames from 3 KB
    with pytest.raises(LeadlineError, match="9,000 frames deep"):
        read_pprof("deep.pb", deep)
    one = profile([1] * 80, 100)  # 8,000 frames from 80 location ids, allowed alone
    wide = protobuf_message()
    wide.data += one
    for _ in range(100):  # and again: 808,000 frames from 9 KB
        wide.message(2, protobuf_message().packed(1, [1] * 80).packed(2, [1]))
    assert len(read_pprof("one.pb", one).stacks[0][0]) == 8000
    with pytest.raises(LeadlineError, match="more frames than its size allows"):
        read_pprof("wide.pb", bytes(wide.data))


def test_pprof_with_negative_values_is_refused(tmp_path: Path) -> None:
    """A profile difference (pprof -diff_base) has negative values: a negative variance made
    `math.sqrt` raise ValueError in the comparison."""
    assert read_pprof("ok.pb", _pprof([5, 3])).stacks
    with pytest.raises(LeadlineError, match="negative values"):
        read_pprof("neg.pb", _pprof([5, -3]))
    (tmp_path / "neg.pb").write_bytes(_pprof([5, -3]))
    (tmp_path / "ok.pb").write_bytes(_pprof([5, 3]))
    assert "negative values" in one_line_error(leadline("diff", "ok.pb", "neg.pb", cwd=tmp_path))


def test_error_messages_quoting_untrusted_text_stay_one_line(tmp_path: Path) -> None:
    """A sample type named with line breaks, quoted by the 'no sample type' error."""
    (tmp_path / "nl.pb").write_bytes(_pprof([5], type_name="cpu\nnow\u2028later"))
    msg = one_line_error(leadline("diff", "nl.pb", "nl.pb", "--sample-type", "x", cwd=tmp_path))
    assert "cpu\\nnow\\u2028later" in msg
    assert str(LeadlineError("a\rb\x85c")) == "a\\rb\\x85c"


def test_readers_refuse_what_the_writer_never_writes(tmp_path: Path) -> None:
    """A header-only capture, and one whose only chunk is an EVENTS chunk: no metadata."""
    header = struct.pack("<8sHHI", b"LEADLINE", 1, 2, 0)
    (tmp_path / "h.lead").write_bytes(header)
    assert "no metadata" in one_line_error(leadline("report", "h.lead", cwd=tmp_path))
    (tmp_path / "e.lead").write_bytes(build(header, [(EVENTS, 1, b"\x00\x00\x00\x00")]))
    assert "no metadata" in one_line_error(leadline("log", "e.lead", cwd=tmp_path))
