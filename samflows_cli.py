"""The argument parser shared by the command lines of ``flows``, ``analysis`` and ``figures``.

It lives below all three, in a module of its own, because importing it must not import JAX:
the :mod:`analysis` and :mod:`figures` packages load their modules on first use, so
``python -m analysis --help`` and ``python -m figures --help`` answer at once, while
``import flows`` loads JAX (to enable float64). It imports nothing of the packages, so every
command line can use it without an import that runs back up the layers. Not part of the user
API.

A user error on a command line (an unknown flag, a bad value, an output path that
cannot be written) ends with one line on stderr, ``<prog>: error: <message>``, and
exit status 2, before any computing is done: no usage block, no traceback. Ctrl-C
ends a command with one line, ``<prog>: interrupted``, and exit status 130
(128 + SIGINT, the shell's convention) (:func:`run_command`).
"""

import argparse
import itertools
import re
import sys

# A word that starts with "-" and then a digit, or "-." and a digit ("-1", "-1e-3",
# "-1:3:32", "-.5,2"), is a value, not a flag: argparse's own rule takes only plain
# numbers, so `--alpha -1:3:32` read "-1:3:32" as an unknown flag. None of these
# parsers has a flag of that shape. (argparse matches this pattern against each word.)
_VALUE = re.compile(r"^-\.?\d.*$", re.S)
_MISSING_VALUE = re.compile(r"argument (-[-\w]+)(?:/-[-\w]+)*: expected one argument")


class ArgumentParser(argparse.ArgumentParser):
    """:class:`argparse.ArgumentParser` whose errors are one line (``--help`` is unchanged).

    A value that starts with a minus sign and a digit (``--alpha -1:3:32``) is read as
    the flag's value; any other value that starts with ``-`` is written ``--flag=VALUE``,
    as the error for it says. Subparsers made with ``add_subparsers`` are of this class
    too (argparse's default).
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = _VALUE
        self._words: list[str] = []

    def parse_known_args(self, args=None, namespace=None):
        self._words = [str(w) for w in (sys.argv[1:] if args is None else args)]
        return super().parse_known_args(args, namespace)

    def error(self, message: str):
        """Print ``<prog>: error: <message> (see <prog> --help)`` on one line and exit 2."""
        message = message.rstrip().rstrip(".")
        missing = _MISSING_VALUE.search(message)
        if missing and self._dash_value_after(missing.group(1)):
            flag = missing.group(1)
            message += f" (a value that starts with '-' is written {flag}=VALUE)"
        line = " ".join(f"{self.prog}: error: {message} (see {self.prog} --help)".split())
        print(line, file=sys.stderr)
        sys.exit(2)

    def _dash_value_after(self, flag: str) -> bool:
        """Whether ``flag`` is followed, in the words parsed, by a word that starts with '-'."""
        pairs = itertools.pairwise(self._words)
        return any(word == flag and value.startswith("-") for word, value in pairs)


def positive_int(text: str) -> int:
    """An integer >= 1, as argparse's ``type``: its ``ValueError`` is argparse's one-line
    usage error (``invalid positive_int value``)."""
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


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
