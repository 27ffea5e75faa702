"""docs/commands.md is the commands' --help texts (registry/cli/reference.py): it cannot drift."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from registry.cli import main
from registry.cli.reference import REGENERATE, WIDTH, reference

PAGE = Path(__file__).resolve().parent.parent / "docs" / "commands.md"


def test_the_command_reference_is_the_help_texts():
    assert PAGE.read_text(encoding="utf-8") == reference(), f"docs/commands.md is stale; fix: run `{REGENERATE}`"


def test_the_reference_holds_every_command_and_changes_with_a_help_text(monkeypatch):
    page = reference()
    commands = [*main.commands, *(f"dataset {name}" for name in main.commands["dataset"].commands)]  # type: ignore[attr-defined]
    assert [c for c in commands if f"\n## registry {c}\n" not in page] == []
    for path in (["add"], ["dataset", "add"], ["publish"]):  # what `registry … --help` prints, at the page's width
        shown = CliRunner().invoke(
            main, [*path, "--help"], prog_name="registry", terminal_width=WIDTH, max_content_width=WIDTH
        )
        assert shown.exit_code == 0 and f"```text\n{shown.output.rstrip()}\n```" in page, path
    monkeypatch.setattr(main.commands["sums"], "help", "Recompute SHA256SUMS, said otherwise.")
    assert reference() != page and "said otherwise" in reference()


def test_the_architecture_page_names_every_room_and_every_composing_command():
    """docs/architecture.md stays true as rooms and composing commands come and go."""
    from .test_floors import COMMANDS_COMPOSED, FLOORS

    text = (PAGE.parent / "architecture.md").read_text(encoding="utf-8")
    rooms = [r for r in FLOORS if r != "__main__"]
    assert [r for r in rooms if f"**`{r}/`**" not in text] == []
    assert [m for m in COMMANDS_COMPOSED if f"`{m.removeprefix('registry.ops.')}`" not in text] == []
