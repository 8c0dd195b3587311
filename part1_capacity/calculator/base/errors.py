"""The one error type the CLI turns into a one-line message and exit status 2 (never a traceback)."""


class InputError(ValueError):
    """Bad input: the message names the field and the allowed values."""
