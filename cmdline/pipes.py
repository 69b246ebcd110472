"""Standard output closed by the reader, as `validate -o sarif | head -1` closes it.

A Unix tool that writes to a pipe nobody reads any more is ended by
SIGPIPE, which the shell reports as exit status 141 (128 + 13). Python
ignores SIGPIPE and raises BrokenPipeError instead, a traceback on the
next write and again when the interpreter flushes standard output at exit.
`closed_pipe` ends the command quietly with the status the shell would
show for a Unix tool.
"""

import os
import signal
import sys

CLOSED_PIPE = 128 + signal.SIGPIPE


def closed_pipe() -> int:
    """Point standard output at /dev/null, so the flush at exit does not raise again, and
    return CLOSED_PIPE: the output was cut short, so it is neither a pass nor a failure."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return CLOSED_PIPE
