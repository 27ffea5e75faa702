"""A refusal with several reasons (every ungated entry, every mismatching file), not just the first."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import RegistryError
from ..layout import Finding


class Refused(RegistryError):
    """Reads as the first finding (plus a count) where one line is expected; ``findings`` holds them all."""

    def __init__(self, findings: Sequence[Finding], payload: dict | None = None):
        first = findings[0]
        more = f" (and {len(findings) - 1} more problem(s))" if len(findings) > 1 else ""
        super().__init__(first.code, first.file, first.message + more, first.fix)
        self.findings = list(findings)
        self.payload = payload or {}  # what the command had worked out before refusing (e.g. the plan), for --json
