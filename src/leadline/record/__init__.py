"""Recording: running the program as Python would and starting and stopping what records it
(the tracer's hooks, the stack sampler, probes, marks).  The hot work is native
(`leadline._native`); this package is its Python API.  Every recording writes one capture file
(`leadline.capture`)."""
