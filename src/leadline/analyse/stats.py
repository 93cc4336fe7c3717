"""Small statistics the diff needs, without a numerical library: the spread of repeated runs,
Yuen's two-sample comparison of trimmed means (Welch's, made robust) and Student's t
distribution's tail, so a threshold given in
standard deviations of a normal (``--sigma``) means the same chance of a false flag when the
noise is estimated from a few runs instead of known."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

TRIM = 0.2  # the fraction of runs left out at each end of a side's values (Yuen)


@dataclass(frozen=True)
class Comparison:
    """The difference of two sides' (trimmed) means, each side a sample of runs."""

    diff: float  # new's trimmed mean - base's
    se: float  # its standard error
    dof: float  # its degrees of freedom (Welch-Satterthwaite; inf when the spread is 0)


def _trimmed(values: Sequence[float], trim: float) -> tuple[float, float, int]:
    """The trimmed mean of at least two values, the squared standard error of it (from the
    winsorized variance), and how many values it kept."""
    x = sorted(values)
    n = len(x)
    g = int(trim * n)
    kept = x[g : n - g]
    h = len(kept)
    mean = math.fsum(kept) / h
    wins = [kept[0]] * g + kept + [kept[-1]] * g
    wmean = math.fsum(wins) / n
    wvar = math.fsum((v - wmean) ** 2 for v in wins) / (n - 1)
    return mean, (n - 1) * wvar / (h * (h - 1)) if h > 1 else 0.0, h


def compare_runs(
    base: Sequence[float], new: Sequence[float], trim: float = TRIM, paired: bool = False
) -> Comparison:
    """Yuen's two-sample comparison of trimmed means (Welch's of means when `trim` is 0): the
    difference, its standard error and degrees of freedom.  Trimming `trim` of the values at
    each end keeps one run that a busy host disturbed from moving a side or widening its
    spread (a run whose thread clock counted four times the others' CPU time held a function at
    three quarters of its share in the nine others).

    `paired`: the i-th runs of both sides were recorded one after the other (interleaved), so
    the comparison is of their differences, round by round (the trimmed mean of the
    differences): what drifts over the rounds (the host's phases, which moved one function's
    share by a quarter from the first run to the last of ten) falls on both and cancels."""
    if paired:
        m, d, h = _trimmed([n - b for b, n in zip(base, new, strict=True)], trim)
        return Comparison(m, math.sqrt(d), h - 1 if d > 0 else math.inf)
    (mb, db, hb), (mn, dn, hn) = _trimmed(base, trim), _trimmed(new, trim)
    se2 = db + dn
    if se2 <= 0:
        return Comparison(mn - mb, 0.0, math.inf)
    denominator = db * db / (hb - 1) + dn * dn / (hn - 1)
    return Comparison(
        mn - mb, math.sqrt(se2), se2 * se2 / denominator if denominator > 0 else math.inf
    )


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        for num in (
            m * (b - m) * x / ((a + m2 - 1) * (a + m2)),
            -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_two_sided(t: float, dof: float) -> float:
    """The chance that Student's t with `dof` degrees of freedom is beyond +-t."""
    if math.isinf(dof):
        return math.erfc(abs(t) / math.sqrt(2))
    return _betainc(dof / 2, 0.5, dof / (dof + t * t))


def t_threshold(sigma: float, dof: float) -> float:
    """The t that Student's distribution with `dof` degrees of freedom exceeds (either way) as
    rarely as a normal exceeds `sigma` standard deviations: 4 sigma is 5.2 at 18 degrees of
    freedom, 7.6 at 8."""
    if math.isinf(dof) or dof > 1e6:
        return sigma
    p = math.erfc(sigma / math.sqrt(2))
    lo, hi = sigma, sigma
    while t_two_sided(hi, dof) > p:
        hi *= 2
        if hi > 1e9:
            return math.inf
    for _ in range(100):
        mid = (lo + hi) / 2
        if t_two_sided(mid, dof) > p:
            lo = mid
        else:
            hi = mid
    return hi


def chi2_ratio(dof: float, p: float) -> float:
    """The `p` quantile of a chi-square with `dof` degrees of freedom, over `dof` (how much a
    variance measured with `dof` degrees of freedom exceeds the true one that often), by
    Wilson and Hilferty's cube-root normal approximation (within 1% from 3 degrees of freedom
    at the median and the 99th percentile); 1 for infinite `dof`."""
    if not math.isfinite(dof) or dof <= 0:
        return 1.0
    z = _normal_quantile(p)
    a = 2.0 / (9.0 * dof)
    return max(1.0 - a + z * math.sqrt(a), 0.0) ** 3


def _normal_quantile(p: float) -> float:
    """The standard normal's `p` quantile (bisection of its distribution function)."""
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if 0.5 * math.erfc(-mid / math.sqrt(2)) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2
