"""Errors a user can cause: printed as one line by the CLI, exit code 2."""


class UserError(Exception):
    """Bad input from the user (a broken task file, a bad URL, a missing tool).

    The CLI prints ``str(error)`` on one line and exits with ``exit_code``.
    """

    exit_code = 2
