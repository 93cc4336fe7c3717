"""One module per subcommand; the CLI is built from this list."""

from . import export, log, report, trace

COMMANDS = [trace, report, log, export]
