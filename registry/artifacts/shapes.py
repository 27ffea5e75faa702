"""How a file's tensors differ from the ones its metadata calls for, by name and shape (pure)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

Shapes = Mapping[str, tuple[int, ...]]


@dataclass(frozen=True)
class ShapeDifferences:
    """Sorted tensor names: wanted but absent, present but not wanted, present with another shape."""

    missing: list[str]
    unexpected: list[str]
    wrong: list[str]


def shape_differences(want: Shapes, found: Shapes) -> ShapeDifferences:
    return ShapeDifferences(
        missing=sorted(set(want) - set(found)),
        unexpected=sorted(set(found) - set(want)),
        wrong=sorted(n for n in set(want) & set(found) if want[n] != found[n]),
    )


def shape_findings(want: Shapes, found: Shapes, missing: str, unexpected: str, wrong: str) -> Iterator[str]:
    """One sentence for each kind of difference, about its first tensor, in each caller's words:
    ``missing`` may use ``{name}`` and ``{count}``, ``unexpected`` ``{name}``, ``wrong`` ``{name}``,
    ``{found}`` and ``{want}``."""
    differ = shape_differences(want, found)
    if differ.missing:
        yield missing.format(name=differ.missing[0], count=len(differ.missing))
    if differ.unexpected:
        yield unexpected.format(name=differ.unexpected[0])
    if differ.wrong:
        name = differ.wrong[0]
        yield wrong.format(name=name, found=found[name], want=want[name])
