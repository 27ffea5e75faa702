"""How a file's tensors differ from the ones its metadata calls for, by name and shape (pure)."""

from __future__ import annotations

from collections.abc import Mapping
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
