"""The one exception type that reaches the user as a single line."""


class MatvizError(Exception):
    """A problem the user can fix: bad input, a bad file, no GPU, a CUDA fault.

    The CLI prints ``matviz: error: <message>`` and exits with code 2; the GUI shows the
    message in a dialog. Messages are one line and say what to do where possible.
    """


class RefusedConfiguration(MatvizError):
    """A kernel's own rule refuses these parameters or this shape. The GUI translates the
    rule's ``template`` (the message of a description's Constraint or ShapeRule) and fills in
    ``values``; the line itself stays English."""

    def __init__(self, kernel: str, template: str, values: dict) -> None:
        super().__init__(f"kernel {kernel}: {template.format(**values)}")
        self.template, self.values = template, values
