"""One module per subcommand; the CLI is built from this list."""

from . import attach, diff, export, log, probe, report, run, trace

COMMANDS = [trace, run, attach, probe, report, diff, log, export]
