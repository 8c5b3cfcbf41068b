"""The one exception type that reaches the user as a single line."""


class MatvizError(Exception):
    """A problem the user can fix: bad input, a bad file, no GPU, a CUDA fault.

    The CLI prints ``matviz: error: <message>`` and exits with code 2; the GUI shows the
    message in a dialog. Messages are one line and say what to do where possible.
    """
