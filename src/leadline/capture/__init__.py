"""Reading: the capture file (docs/format.md), streamed with bounded memory, and the other
formats a profile can come from (pprof, collapsed stacks)."""
