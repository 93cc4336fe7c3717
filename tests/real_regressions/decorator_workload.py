"""Workload: hot calls through functions decorated with decorator.decorator.

decorator 4.x compiles a thin wrapper with the exact signature; decorator 5.x
wraps with a generic ``fun(*args, **kw)`` that calls ``fix()`` ->
``inspect.Signature.bind`` + ``BoundArguments.apply_defaults`` on every call.
"""

import importlib.metadata

from decorator import decorator


@decorator
def counted(func, *args, **kw):
    counted.calls += 1
    return func(*args, **kw)


counted.calls = 0


@counted
def weighted_sum(values, weight, bias=0.0, scale=1.0):
    acc = bias
    for v in values:
        acc += v * weight
    return acc * scale


@counted
def clamp(x, lo=0, hi=100):
    return lo if x < lo else hi if x > hi else x


def main():
    rows = [tuple(range(i, i + 320)) for i in range(50)]
    total = 0.0
    for i in range(100000):
        r = rows[i % 50]
        total += weighted_sum(r, 0.5, scale=2.0)
        total += clamp(i % 150, hi=120)
    print(f"total {total:.1f} calls {counted.calls}")


if __name__ == "__main__":
    main()
    print(importlib.metadata.version("decorator"))
