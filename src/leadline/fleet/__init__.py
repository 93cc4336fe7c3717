"""The fleet path: an in-process agent that samples continuously and pushes pprof profiles to
Grafana Pyroscope, its delivery (queue, spool, retries), and Pyroscope's query API."""
