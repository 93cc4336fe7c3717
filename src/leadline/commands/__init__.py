"""One module per subcommand; the CLI is built from this list."""

from . import attach, diff, export, log, report, run, trace

COMMANDS = [trace, run, attach, report, diff, log, export]
