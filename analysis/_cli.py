"""The argument parser shared by the command lines of ``flows``, ``analysis`` and ``figures``.

It lives here, not in :mod:`flows`, because importing it must not import JAX: the
:mod:`analysis` package loads its modules on first use, so ``python -m analysis --help``
and ``python -m figures --help`` answer at once (``import flows`` loads JAX to enable
float64).

A user error on a command line (an unknown flag, a bad value, an output path that
cannot be written) ends with one line on stderr, ``<prog>: error: <message>``, and
exit status 2, before any computing is done: no usage block, no traceback. Ctrl-C
ends a command with one line, ``<prog>: interrupted``, and exit status 130
(128 + SIGINT, the shell's convention) (:func:`run_command`).
"""

import argparse
import sys


class ArgumentParser(argparse.ArgumentParser):
    """:class:`argparse.ArgumentParser` whose errors are one line (``--help`` is unchanged).

    Subparsers made with ``add_subparsers`` are of this class too (argparse's default).
    """

    def error(self, message: str):
        """Print ``<prog>: error: <message> (see <prog> --help)`` on one line and exit 2."""
        message = message.rstrip().rstrip(".")
        line = " ".join(f"{self.prog}: error: {message} (see {self.prog} --help)".split())
        print(line, file=sys.stderr)
        sys.exit(2)


def run_command(prog: str, main, argv=None) -> int:
    """``main(argv)``'s exit status; on Ctrl-C one line on stderr and 130, no traceback.

    What the command finished before the interrupt stays (sweep chunks are written
    atomically); the run can be started again.
    """
    try:
        return main(argv)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr, flush=True)
        return 130
