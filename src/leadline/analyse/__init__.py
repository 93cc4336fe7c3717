"""Analysis, in Python, over what `leadline.capture` reads: per-function totals and call trees
of a trace, sampling profiles, the diff of two runs, sweeps and the cost table."""
