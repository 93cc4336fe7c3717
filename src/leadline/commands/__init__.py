"""One module per subcommand; the CLI is built from this list."""

from . import attach, diff, export, log, probe, report, run, sweep, trace

COMMANDS = [trace, run, attach, probe, sweep, report, diff, log, export]
