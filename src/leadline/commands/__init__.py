"""One module per subcommand; the CLI is built from this list."""

from . import attach, diff, export, log, overhead, probe, report, run, sweep, trace

COMMANDS = [trace, run, attach, probe, sweep, overhead, report, diff, log, export]
