"""Workload: Punkt sentence splitting of a few long documents (nltk).

Uses an untrained PunktSentenceTokenizer (no data download needed).
NLTK 3.6.6 (ReDoS fix) routes _slices_from_text through the new
_match_potential_end_contexts(), which slices text[:match.start()] and calls
str.rsplit for every candidate period -> quadratic in document length
(nltk/nltk issue #3013).
"""

import importlib.metadata

from nltk.tokenize.punkt import PunktSentenceTokenizer

SENTENCES = [
    "The committee met on Tuesday to review the budget.",
    "Dr. Smith presented the results of the new trial!",
    "Were the numbers consistent with last year's report?",
    "Most members agreed; a few asked for more detail.",
    "The vote was postponed until the next session.",
    "Mr. Jones noted that the deadline is in March.",
]


def make_doc(n, offset):
    return " ".join(SENTENCES[(i + offset) % len(SENTENCES)] for i in range(n))


def main():
    tok = PunktSentenceTokenizer()
    docs = [make_doc(10000, k) for k in range(2)]
    total = 0
    for _ in range(3):
        for d in docs:
            total += len(tok.tokenize(d))
    print("sentences", total)


if __name__ == "__main__":
    main()
    print(importlib.metadata.version("nltk"))
