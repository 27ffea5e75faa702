"""The one error type users see.

Every refusal names the file it is about and the fix, in one line, so a CI log or a terminal
shows what to do without a traceback.  The CLI turns it into ``error: <file>: <what>; fix: <fix>``
and a non-zero exit.
"""

from __future__ import annotations

from pathlib import Path


class RegistryError(Exception):
    """A refusal with a stable code, the file concerned and a one-line fix."""

    def __init__(self, code: str, file: str | Path | None, message: str, fix: str, exit_code: int = 1):
        self.code = code
        self.file = str(file) if file is not None else None
        self.message = message
        self.fix = fix
        self.exit_code = exit_code
        super().__init__(self.one_line())

    def one_line(self) -> str:
        where = f"{self.file}: " if self.file else ""
        text = f"{where}{self.message}; fix: {self.fix}"
        return " ".join(text.split())  # always one line, whatever the inputs held

    def as_dict(self) -> dict[str, str | None]:
        return {"code": self.code, "file": self.file, "message": self.message, "fix": self.fix}
