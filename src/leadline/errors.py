"""The one exception type that the CLI turns into a one-line message and exit status 2."""


class LeadlineError(Exception):
    """Bad usage or bad input: printed as `leadline: error: <message>`."""
