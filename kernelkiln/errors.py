"""Errors a user can cause: printed as one line by the CLI, exit code 2."""


class UserError(Exception):
    """Bad input from the user (a broken task file, a bad URL, a missing tool).

    The CLI prints ``str(error)`` on one line and exits with ``exit_code``.
    """

    exit_code = 2


def described(exc: BaseException) -> str:
    """``exc`` as one line: its type and the first line of its message (``KeyError: 'w0'``)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__
