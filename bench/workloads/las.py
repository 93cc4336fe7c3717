"""Memory-story workload: summarise a folder of LAS 2.0 well logs into HTML pages.

Two phases, run separately so that only the second is timed:

    python bench/workloads/las.py --generate DIR [--size-mb 50] [--files N] [--seed 1]
    python bench/workloads/las.py --data DIR [--out OUTDIR]

``--generate`` writes deterministic pseudo-random LAS 2.0 files (``~VERSION``, ``~WELL``,
``~CURVE``, ``~PARAMETER`` and sometimes ``~OTHER`` headers, then an ``~A`` array of numbers
with null runs) and a ``manifest.json``; it does nothing when DIR already holds a complete set
made with the same parameters.  ``--data`` reads every file with plain Python, parses the
headers and the rows into lists of floats, computes per-curve statistics with null handling,
keeps every curve's values per mnemonic for cross-well percentiles (so memory grows through the
run and is released at the end, as in the naive scripts this imitates), and writes one HTML
page per well plus ``index.html`` into OUTDIR (default: a new temporary directory).

With neither option the data set is generated into (or reused from) a cache folder under the
system temporary directory keyed by the parameters, then summarised.

At the default 50 MB the summary takes about four seconds under CPython 3.11 on a 2-core
machine and peaks at a few hundred MB of RSS.
"""

from __future__ import annotations

import argparse
import html
import json
import math
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

# ---------------------------------------------------------------------------------------------
# Generation

MANIFEST = "manifest.json"
FORMAT_VERSION = 1  # bump when the generator's output changes, so caches are rebuilt


@dataclass(frozen=True)
class CurveKind:
    mnemonic: str
    unit: str
    description: str
    low: float
    high: float
    step: float  # random-walk step, as a fraction of (high - low)
    decimals: int


CURVE_KINDS = (
    CurveKind("GR", "GAPI", "GAMMA RAY", 0.0, 250.0, 0.02, 3),
    CurveKind("DT", "US/F", "SONIC TRANSIT TIME", 40.0, 190.0, 0.01, 3),
    CurveKind("RHOB", "G/C3", "BULK DENSITY", 1.8, 3.0, 0.01, 4),
    CurveKind("NPHI", "V/V", "NEUTRON POROSITY", -0.05, 0.6, 0.015, 4),
    CurveKind("PEF", "B/E", "PHOTOELECTRIC FACTOR", 1.0, 6.0, 0.02, 3),
    CurveKind("CALI", "IN", "CALIPER", 6.0, 16.0, 0.005, 3),
    CurveKind("SP", "MV", "SPONTANEOUS POTENTIAL", -120.0, 40.0, 0.01, 2),
    CurveKind("ILD", "OHMM", "DEEP RESISTIVITY", 0.2, 2000.0, 0.002, 4),
    CurveKind("ILM", "OHMM", "MEDIUM RESISTIVITY", 0.2, 2000.0, 0.002, 4),
    CurveKind("SFLU", "OHMM", "SHALLOW RESISTIVITY", 0.2, 2000.0, 0.003, 4),
    CurveKind("DRHO", "G/C3", "DENSITY CORRECTION", -0.2, 0.3, 0.02, 4),
    CurveKind("SW", "V/V", "WATER SATURATION", 0.0, 1.0, 0.02, 4),
    CurveKind("VSH", "V/V", "SHALE VOLUME", 0.0, 1.0, 0.02, 4),
    CurveKind("TEMP", "DEGF", "BOREHOLE TEMPERATURE", 60.0, 300.0, 0.0005, 2),
)

FIELDS = ("WILDCAT", "NORTH RIDGE", "BEAR CREEK", "SALT FLAT", "OLD MILL", "RED LAKE")
COMPANIES = ("ANY OIL CO.", "PRAIRIE ENERGY LTD.", "DEEP ROCK INC.", "BLUE BASIN PETROLEUM")
SERVICES = ("ANY LOGGING CO.", "WIRELINE SERVICES", "DOWNHOLE DATA CORP.")
NULLS = ("-999.25", "-999.2500", "-9999")


def _header_line(mnemonic: str, unit: str, value: str, description: str) -> str:
    return f" {mnemonic:<4}.{unit:<8} {value:<28}: {description}"


def generate_file(path: Path, rng: random.Random, index: int, target_bytes: int) -> int:
    """Write one LAS file of about target_bytes; return the number of data rows."""
    kinds = rng.sample(CURVE_KINDS, rng.randint(5, 12))
    step = rng.choice((0.1524, 0.125, 0.25, 0.5))
    start = round(rng.uniform(150.0, 2500.0) / step) * step
    null = rng.choice(NULLS)
    newline = "\r\n" if index % 5 == 3 else "\n"
    row_bytes = 11 * (len(kinds) + 1) + len(newline)
    rows = max(10, target_bytes // row_bytes)
    stop = start + (rows - 1) * step
    well = f"{rng.choice(FIELDS).split()[0][:4]}-{index:03d}"

    lines = [
        "~VERSION INFORMATION",
        _header_line("VERS", "", "2.0", "CWLS LOG ASCII STANDARD - VERSION 2.0"),
        _header_line("WRAP", "", "NO", "ONE LINE PER DEPTH STEP"),
        "~WELL INFORMATION",
        "#MNEM.UNIT     DATA                         DESCRIPTION",
        "#----.-------- ---------------------------- -----------",
        _header_line("STRT", "M", f"{start:.4f}", "START DEPTH"),
        _header_line("STOP", "M", f"{stop:.4f}", "STOP DEPTH"),
        _header_line("STEP", "M", f"{step:.4f}", "STEP"),
        _header_line("NULL", "", null, "NULL VALUE"),
        _header_line("COMP", "", rng.choice(COMPANIES), "COMPANY"),
        _header_line("WELL", "", well, "WELL"),
        _header_line("FLD", "", rng.choice(FIELDS), "FIELD"),
        _header_line("LOC", "", f"{rng.randint(1, 36)}-{rng.randint(1, 99)}-W5M", "LOCATION"),
        _header_line("SRVC", "", rng.choice(SERVICES), "SERVICE COMPANY"),
        _header_line("DATE", "", f"{rng.randint(1, 28):02d}-MAR-19{rng.randint(70, 99)}", "DATE"),
        _header_line("UWI", "", f"1000{rng.randint(10**9, 10**10 - 1)}", "UNIQUE WELL ID"),
        "~CURVE INFORMATION",
        _header_line("DEPT", "M", "00 001 00 00", "DEPTH"),
    ]
    for kind in kinds:
        api = f"{rng.randint(0, 99):02d} {rng.randint(0, 999):03d} 00 00"
        lines.append(_header_line(kind.mnemonic, kind.unit, api, kind.description))
    lines += [
        "~PARAMETER INFORMATION",
        _header_line("BHT", "DEGC", f"{rng.uniform(30, 120):.1f}", "BOTTOM HOLE TEMPERATURE"),
        _header_line("BS", "MM", f"{rng.choice((200.0, 222.0, 311.0)):.1f}", "BIT SIZE"),
        _header_line("FD", "K/M3", f"{rng.uniform(1000, 1300):.1f}", "FLUID DENSITY"),
        _header_line("MATR", "", rng.choice(("SAND", "LIME", "DOLO")), "NEUTRON MATRIX"),
        _header_line("RMF", "OHMM", f"{rng.uniform(0.05, 2):.4f}", "MUD FILTRATE RESISTIVITY"),
    ]
    if rng.random() < 0.5:
        lines += [
            "~OTHER",
            f" Note: tool {rng.choice(('stuck', 'pulled', 'repeated'))} near "
            f"{rng.uniform(start, stop):.1f} m; values there are unreliable.",
        ]
    lines.append("~A  DEPTH " + " ".join(f"{k.mnemonic:>10}" for k in kinds))

    values = [rng.uniform(k.low, k.high) for k in kinds]
    null_left = [0] * len(kinds)
    for r in range(rows):
        cells = [f"{start + r * step:10.4f}"]
        for j, kind in enumerate(kinds):
            span = kind.high - kind.low
            # a random walk pulled gently back to the middle of the curve's range
            v = values[j] + rng.gauss(0.0, kind.step * span)
            v += 0.002 * (kind.low + span / 2 - v)
            v = min(kind.high, max(kind.low, v))
            values[j] = v
            if null_left[j] == 0 and rng.random() < 0.0005:
                null_left[j] = rng.randint(3, 120)
            if null_left[j]:
                null_left[j] -= 1
                cells.append(f"{null:>10}")
            else:
                cells.append(f"{v:10.{kind.decimals}f}")
        lines.append(" ".join(cells))
    lines.append("")
    with open(path, "w", encoding="ascii", newline="") as out:
        out.write(newline.join(lines))
    return rows


def generate(folder: Path, size_mb: float, files: int | None, seed: int) -> None:
    params = {"format": FORMAT_VERSION, "size_mb": size_mb, "files": files, "seed": seed}
    manifest = folder / MANIFEST
    if manifest.is_file():
        try:
            done = json.loads(manifest.read_text())
        except ValueError:
            done = {}
        if done.get("params") == params:
            print(f"las.py: {folder} already holds this data set")
            return
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.las"):
        old.unlink()
    manifest.unlink(missing_ok=True)

    rng = random.Random(seed)
    count = files if files is not None else rng.randint(20, 80)
    weights = [rng.lognormvariate(0.0, 0.8) for _ in range(count)]
    total = sum(weights)
    written = []
    start = time.perf_counter()
    for i, weight in enumerate(weights):
        name = f"well_{i:03d}.las"
        generate_file(folder / name, rng, i, int(size_mb * 1e6 * weight / total))
        written.append(name)
    size = sum((folder / name).stat().st_size for name in written)
    manifest.write_text(json.dumps({"params": params, "files": written, "bytes": size}, indent=1))
    elapsed = time.perf_counter() - start
    print(f"las.py: wrote {count} files, {size / 1e6:.1f} MB, to {folder} in {elapsed:.1f} s")


def cache_folder(size_mb: float, files: int | None, seed: int) -> Path:
    key = f"v{FORMAT_VERSION}-{size_mb:g}mb-{files if files is not None else 'auto'}-s{seed}"
    return Path(tempfile.gettempdir()) / "leadline-bench-las" / key


# ---------------------------------------------------------------------------------------------
# Reading


class LasError(ValueError):
    pass


@dataclass
class HeaderItem:
    mnemonic: str
    unit: str
    value: str
    description: str


@dataclass
class LasFile:
    path: Path
    sections: dict[str, list[HeaderItem]] = field(default_factory=dict)
    other: list[str] = field(default_factory=list)
    columns: list[list[float | None]] = field(default_factory=list)
    bad_rows: int = 0

    def item(self, section: str, mnemonic: str) -> HeaderItem | None:
        for it in self.sections.get(section, []):
            if it.mnemonic == mnemonic:
                return it
        return None

    def value(self, section: str, mnemonic: str, default: str = "") -> str:
        it = self.item(section, mnemonic)
        return it.value if it is not None else default


def parse_header_line(line: str) -> HeaderItem:
    """``MNEM.UNIT  VALUE : DESCRIPTION`` (the unit ends at the first space after the dot)."""
    dot = line.find(".")
    if dot < 0:
        raise LasError(f"no '.' in header line {line!r}")
    mnemonic = line[:dot].strip()
    rest = line[dot + 1 :]
    space = rest.find(" ")
    unit, rest = (rest, "") if space < 0 else (rest[:space], rest[space:])
    colon = rest.rfind(":")
    if colon < 0:
        value, description = rest.strip(), ""
    else:
        value, description = rest[:colon].strip(), rest[colon + 1 :].strip()
    return HeaderItem(mnemonic, unit, value, description)


SECTION_NAMES = {"V": "version", "W": "well", "C": "curve", "P": "parameter", "O": "other"}


def read_las(path: Path) -> LasFile:
    text = path.read_text(encoding="ascii", errors="replace")
    las = LasFile(path)
    section = ""
    null: float | None = None
    width = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("~"):
            letter = line[1:2].upper()
            if letter == "A":
                section = "A"
                null_text = las.value("well", "NULL")
                null = float(null_text) if null_text else None
                width = len(las.sections.get("curve", []))
                if width == 0:
                    raise LasError(f"{path}: ~A before any curve")
                las.columns = [[] for _ in range(width)]
            else:
                section = SECTION_NAMES.get(letter, line[1:].split()[0].lower())
                las.sections.setdefault(section, [])
            continue
        if section == "A":
            try:
                row = [float(cell) for cell in line.split()]
            except ValueError:
                las.bad_rows += 1
                continue
            if len(row) != width:
                las.bad_rows += 1
                continue
            for column, v in zip(las.columns, row, strict=True):
                column.append(None if v == null else v)
        elif section == "other":
            las.other.append(line.strip())
        elif section:
            try:
                las.sections[section].append(parse_header_line(line))
            except LasError as exc:
                raise LasError(f"{path}:{number}: {exc}") from None
    if section != "A":
        raise LasError(f"{path}: no ~A section")
    return las


# ---------------------------------------------------------------------------------------------
# Statistics


@dataclass
class CurveStats:
    mnemonic: str
    unit: str
    description: str
    count: int
    nulls: int
    low: float
    high: float
    mean: float
    std: float
    first_depth: float | None
    last_depth: float | None
    profile: list[float | None]  # mean of each of PROFILE_BINS depth bins, for the sparkline


PROFILE_BINS = 80


def curve_stats(
    item: HeaderItem, values: list[float | None], depth: list[float | None]
) -> CurveStats:
    count = nulls = 0
    total = 0.0
    low, high = math.inf, -math.inf
    first = last = None
    for i, v in enumerate(values):
        if v is None:
            nulls += 1
            continue
        count += 1
        total += v
        if v < low:
            low = v
        if v > high:
            high = v
        if first is None:
            first = i
        last = i
    mean = total / count if count else math.nan
    squares = 0.0
    for v in values:
        if v is not None:
            squares += (v - mean) * (v - mean)
    std = math.sqrt(squares / count) if count else math.nan

    profile: list[float | None] = []
    n = len(values)
    for b in range(PROFILE_BINS):
        chunk = [
            v for v in values[b * n // PROFILE_BINS : (b + 1) * n // PROFILE_BINS] if v is not None
        ]
        profile.append(sum(chunk) / len(chunk) if chunk else None)

    return CurveStats(
        item.mnemonic,
        item.unit,
        item.description,
        count,
        nulls,
        low if count else math.nan,
        high if count else math.nan,
        mean,
        std,
        depth[first] if first is not None else None,
        depth[last] if last is not None else None,
        profile,
    )


def percentile(ordered: list[float], q: float) -> float:
    if not ordered:
        return math.nan
    position = (len(ordered) - 1) * q
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


# ---------------------------------------------------------------------------------------------
# HTML

STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }
th { background: #eee; } td.t { text-align: left; }
svg { background: #fafafa; }
"""


def fmt(x: float | None, digits: int = 4) -> str:
    if x is None or math.isnan(x):
        return "&ndash;"
    return f"{x:.{digits}g}"


def sparkline(profile: list[float | None], low: float, high: float) -> str:
    width, height = 2 * len(profile), 30
    span = (high - low) or 1.0
    points = []
    for i, v in enumerate(profile):
        if v is not None:
            points.append(f"{2 * i},{height - (v - low) / span * height:.1f}")
    return (
        f'<svg width="{width}" height="{height}"><polyline fill="none" stroke="#36c" '
        f'points="{" ".join(points)}"/></svg>'
    )


def page(title: str, body: list[str]) -> str:
    return (
        f"<!doctype html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def header_table(items: list[HeaderItem]) -> str:
    rows = ["<table><tr><th>mnemonic</th><th>unit</th><th>value</th><th>description</th></tr>"]
    for it in items:
        rows.append(
            f"<tr><td class=t>{html.escape(it.mnemonic)}</td><td class=t>{html.escape(it.unit)}"
            f"</td><td class=t>{html.escape(it.value)}</td>"
            f"<td class=t>{html.escape(it.description)}</td></tr>"
        )
    rows.append("</table>")
    return "\n".join(rows)


def well_page(las: LasFile, stats: list[CurveStats], rows: int) -> str:
    name = las.value("well", "WELL", las.path.stem)
    body = [
        f"<h1>{html.escape(name)}</h1>",
        f"<p>{html.escape(las.path.name)}: {rows} rows, {len(stats)} curves, "
        f"{las.bad_rows} unreadable rows. <a href='index.html'>All wells</a></p>",
        "<h2>Curves</h2>",
        "<table><tr><th>curve</th><th>unit</th><th>values</th><th>nulls</th><th>min</th>"
        "<th>max</th><th>mean</th><th>std</th><th>first</th><th>last</th><th>profile</th></tr>",
    ]
    for s in stats:
        body.append(
            f"<tr><td class=t title='{html.escape(s.description)}'>{html.escape(s.mnemonic)}</td>"
            f"<td class=t>{html.escape(s.unit)}</td><td>{s.count}</td><td>{s.nulls}</td>"
            f"<td>{fmt(s.low)}</td><td>{fmt(s.high)}</td><td>{fmt(s.mean)}</td>"
            f"<td>{fmt(s.std)}</td><td>{fmt(s.first_depth, 6)}</td><td>{fmt(s.last_depth, 6)}"
            f"</td><td>{sparkline(s.profile, s.low, s.high)}</td></tr>"
        )
    body.append("</table>")
    for section in ("version", "well", "parameter"):
        body += [f"<h2>{section.title()}</h2>", header_table(las.sections.get(section, []))]
    if las.other:
        body += ["<h2>Other</h2>", "<pre>" + html.escape("\n".join(las.other)) + "</pre>"]
    return page(name, body)


@dataclass
class WellSummary:
    name: str
    file: str
    page: str
    bytes: int
    rows: int
    curves: int
    top: float | None
    bottom: float | None
    null_fraction: float


def index_page(wells: list[WellSummary], by_mnemonic: dict[str, list[float]]) -> str:
    body = [
        "<h1>Well logs</h1>",
        f"<p>{len(wells)} wells, {sum(w.rows for w in wells)} depth steps, "
        f"{sum(w.bytes for w in wells) / 1e6:.1f} MB of LAS.</p>",
        "<table><tr><th>well</th><th>file</th><th>MB</th><th>rows</th><th>curves</th>"
        "<th>top</th><th>bottom</th><th>nulls</th></tr>",
    ]
    for w in wells:
        body.append(
            f"<tr><td class=t><a href='{html.escape(w.page)}'>{html.escape(w.name)}</a></td>"
            f"<td class=t>{html.escape(w.file)}</td><td>{w.bytes / 1e6:.2f}</td><td>{w.rows}</td>"
            f"<td>{w.curves}</td><td>{fmt(w.top, 6)}</td><td>{fmt(w.bottom, 6)}</td>"
            f"<td>{100 * w.null_fraction:.2f}%</td></tr>"
        )
    body += [
        "</table>",
        "<h2>All wells, by curve</h2>",
        "<table><tr><th>curve</th><th>values</th><th>p1</th><th>p10</th><th>median</th>"
        "<th>p90</th><th>p99</th></tr>",
    ]
    for mnemonic in sorted(by_mnemonic):
        ordered = sorted(by_mnemonic[mnemonic])
        cells = "".join(
            f"<td>{fmt(percentile(ordered, q))}</td>" for q in (0.01, 0.1, 0.5, 0.9, 0.99)
        )
        body.append(
            f"<tr><td class=t>{html.escape(mnemonic)}</td><td>{len(ordered)}</td>{cells}</tr>"
        )
    body.append("</table>")
    return page("Well logs", body)


def summarise(folder: Path, out: Path) -> int:
    paths = sorted(folder.glob("*.las"))
    if not paths:
        print(f"las.py: no .las files in {folder}", file=sys.stderr)
        return 1
    out.mkdir(parents=True, exist_ok=True)
    wells: list[WellSummary] = []
    by_mnemonic: dict[str, list[float]] = {}
    for path in paths:
        las = read_las(path)
        curves = las.sections["curve"]
        depth = las.columns[0]
        stats = [
            curve_stats(item, col, depth)
            for item, col in zip(curves[1:], las.columns[1:], strict=True)
        ]
        for item, col in zip(curves[1:], las.columns[1:], strict=True):
            by_mnemonic.setdefault(item.mnemonic, []).extend(v for v in col if v is not None)
        rows = len(depth)
        name = las.value("well", "WELL", path.stem)
        page_name = path.stem + ".html"
        (out / page_name).write_text(well_page(las, stats, rows), encoding="utf-8")
        cells = rows * len(stats)
        wells.append(
            WellSummary(
                name,
                path.name,
                page_name,
                path.stat().st_size,
                rows,
                len(stats),
                depth[0] if depth else None,
                depth[-1] if depth else None,
                sum(s.nulls for s in stats) / cells if cells else 0.0,
            )
        )
    (out / "index.html").write_text(index_page(wells, by_mnemonic), encoding="utf-8")
    values = sum(len(v) for v in by_mnemonic.values())
    print(f"las.py: {len(wells)} wells, {values} values, pages in {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--generate", type=Path, metavar="DIR", help="only write the data set")
    mode.add_argument("--data", type=Path, metavar="DIR", help="only summarise this data set")
    parser.add_argument("--out", type=Path, help="folder for the HTML pages (default: temporary)")
    parser.add_argument("--size-mb", type=float, default=50.0, help="data set size (default 50)")
    parser.add_argument("--files", type=int, help="number of files (default: 20-80 by seed)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    if args.generate is not None:
        generate(args.generate, args.size_mb, args.files, args.seed)
        return 0
    folder: Path = args.data
    if folder is None:
        folder = cache_folder(args.size_mb, args.files, args.seed)
        generate(folder, args.size_mb, args.files, args.seed)
    out: Path = args.out or Path(tempfile.mkdtemp(prefix="las-html-"))
    start = time.perf_counter()
    code = summarise(folder, out)
    print(f"las.py: summarised in {time.perf_counter() - start:.2f} s")
    return code


if __name__ == "__main__":
    sys.exit(main())
