"""Workload: many calls through a @retry-decorated function (retrying).

Every call constructs a fresh Retrying object.  In retrying >= 1.3.5
Retrying.__init__ attaches a new logging.NullHandler to the shared
module logger on every construction (groodt/retrying issue #20).
"""

import importlib.metadata

from retrying import retry

N_CALLS = 12000


@retry(stop_max_attempt_number=3, wait_fixed=0)
def checksum(payload):
    # a little real work per call so the old version is not pure overhead
    acc = 0
    for i, ch in enumerate(payload):
        acc = (acc * 31 + ord(ch) + i) % 1000003
    return acc


def main():
    payloads = [f"record-{i:05d}-" * 100 for i in range(64)]
    total = 0
    for i in range(N_CALLS):
        total += checksum(payloads[i % len(payloads)])
    print("total", total)


if __name__ == "__main__":
    main()
    print(importlib.metadata.version("retrying"))
