"""The one exception type that the CLI turns into a one-line message and exit status 2."""

import re

# Every character that ends a line for str.splitlines() (and so for a terminal or a log reader).
_LINE_BREAKS = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


class LeadlineError(Exception):
    """Bad usage or bad input: printed as `leadline: error: <message>`.

    Messages quote untrusted text (names from a profile, a server's answer), so line breaks in
    them are shown escaped: the message stays one line whatever it quotes."""

    def __init__(self, message: str) -> None:
        super().__init__(_LINE_BREAKS.sub(lambda m: repr(m.group())[1:-1], message))
