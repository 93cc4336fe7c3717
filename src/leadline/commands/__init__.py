"""One module per subcommand; the CLI is built from this list."""

from . import attach, export, log, report, run, trace

COMMANDS = [trace, run, attach, report, log, export]
