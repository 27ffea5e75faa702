"""Strict inputs: finite JSON numbers, bounded JSON files, plain names, LF-only SHA256SUMS, card
markers kept out of index text, a private folder that is a file, and --data-sums that is not a file.

Every refusal is one line on stderr, exit 3, with the registry byte-identical and nothing staged.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import unicodedata
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from pydantic import ValidationError

from registry.artifacts.synthetic import make_adapter_file, make_state_file
from registry.card.handwritten import END, START
from registry.cli import main
from registry.core.atomic import transaction
from registry.core.errors import RegistryError
from registry.core.models import MAX_NOTES_CHARS, Score
from registry.core.names import JOURNAL_NAME
from registry.core.repo import Repo, render_index
from registry.core.schemas import MAX_JSON_BYTES, MAX_JSON_DEPTH, read_json
from registry.core.sums import MAX_SUMS_BYTES, parse_sums, render_sums
from registry.ops.add import AddRequest, add_weight
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.score import add_score

from .conftest import SMALL, sha256_of, snapshot

DATA = "ab" * 32
DOCS = Path(__file__).resolve().parent.parent / "docs" / "formats.md"


def train_json(path: Path, data_sha: str = DATA, **extra) -> Path:
    body = {
        "trainer": {"name": "rwkv_state_tune", "version": "1.8.1"},
        "hyperparameters": {"lr_init": 0.01},
        "command": "rwkv_state_tune --lr_init 0.01",
        "data_sha256": data_sha,
        **extra,
    }
    path.write_text(json.dumps(body))
    return path


def base_name(path: Path) -> str:
    return path.name[: -len(".pth")]


@pytest.fixture
def registry_with_base(empty_registry, small_base):
    add_base(
        empty_registry,
        BaseRequest(
            path=small_base, filename=small_base.name, source="BlinkDL/rwkv7-g1", vocab="rwkv_vocab_v20230424.txt"
        ),
    )
    return empty_registry


@pytest.fixture
def registry_with_entry(registry_with_base, small_base, tmp_path):
    """A registry with one State entry that carries one score (value 46.9)."""
    (tmp_path / "inputs").mkdir()
    state = make_state_file(tmp_path / "inputs" / "s.pth", SMALL)
    entry = add_weight(
        registry_with_base,
        AddRequest(state, base_name(small_base), "state", "v1.41", train_json(tmp_path / "inputs" / "t.json")),
    )
    add_score(
        registry_with_base,
        entry.path,
        Score(benchmark="exam", value=46.9, date="2026-10-16", backend="rwkv_lightning 1.8.1"),
    )
    return registry_with_base, entry.path


def staged(root: Path) -> list[str]:
    staging = root / ".registry" / "staging"
    return sorted(p.name for p in staging.iterdir()) if staging.is_dir() else []


def assert_refused(
    result: Result, root: Path, before: dict[str, bytes], code: str | None = None, fix: str | None = None
) -> str:
    """Exit 3, exactly one ``error: …; fix: …`` line, no traceback, the registry byte-identical, nothing staged."""
    assert result.exit_code == 3, (result.exit_code, result.output, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "; fix: " in lines[0], result.stderr
    assert "Traceback" not in result.output
    assert snapshot(root) == before
    assert staged(root) == []
    if fix is not None:
        assert fix in lines[0], lines[0]
    if code is not None:
        assert (
            json.loads(CliRunner().invoke(main, [*result_args(result), "--json"]).stdout)["problems"][0]["code"] == code
        )
    return lines[0]


_ARGS: dict[int, list[str]] = {}


def result_args(result: Result) -> list[str]:
    return _ARGS[id(result)]


def run(*args: str) -> Result:
    """Invoke the CLI and remember the arguments, so assert_refused can repeat it with --json for the code."""
    argv = [str(a) for a in args]
    result = CliRunner().invoke(main, argv)
    _ARGS[id(result)] = argv
    return result


def add_args(
    root: Path, file: Path, base: str, train: Path, *extra: str, data_version: str = "v1.41", method: str = "state"
) -> list[str]:
    return [
        "add",
        str(file),
        "-C",
        str(root),
        "--base",
        base,
        "--method",
        method,
        "--data-version",
        data_version,
        "--train-json",
        str(train),
        *extra,
    ]


def problem_codes(result: Result) -> set[str]:
    return {line.split(" ", 1)[0] for line in result.stdout.splitlines() if re.match(r"^[a-z]+\.[a-z-]+ ", line)}


# ----------------------------------------------------------------------------------------------
# 1. Strict JSON in and out: finite numbers, bounded depth and size


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e309", "-1e309", "NaN", "Infinity"])
def test_score_value_not_finite_is_refused(registry_with_entry, value):
    root, path = registry_with_entry
    before = snapshot(root)
    result = run(
        "score", path, "-C", root, "--benchmark", "exam", "--value", value, "--date", "2026-10-17", "--backend", "b"
    )
    line = assert_refused(result, root, before, code="args.not-finite")
    assert "--value" in line
    assert "NaN" not in (root / "index.json").read_text() and "Infinity" not in (root / "index.json").read_text()


def test_score_model_refuses_non_finite_values():
    for value in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValidationError):
            Score(benchmark="exam", value=value, date="2026-10-16", backend="b")


def test_score_with_empty_benchmark_is_one_line(registry_with_entry):
    root, path = registry_with_entry
    before = snapshot(root)
    result = run("score", path, "-C", root, "--benchmark", "", "--value", "1", "--date", "2026-10-17", "--backend", "b")
    assert "--benchmark" in assert_refused(result, root, before, code="args.invalid")


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"])
def test_index_with_non_finite_number_is_refused_when_read(registry_with_entry, token):
    root, path = registry_with_entry
    index = root / "index.json"
    text = index.read_text()
    assert text.count("46.9") == 1
    index.write_text(text.replace("46.9", token))
    before = snapshot(root)
    checked = run("validate", root)
    assert checked.exit_code == 1 and "json.malformed" in checked.stdout and "Traceback" not in checked.output
    result = run(
        "score", path, "-C", root, "--benchmark", "exam", "--value", "1", "--date", "2026-10-17", "--backend", "b"
    )
    assert_refused(result, root, before, code="json.malformed")
    assert_refused(run("list", "-C", root), root, before, code="json.malformed")


@pytest.mark.parametrize("token", ["NaN", "Infinity", "1e999"])
def test_train_json_with_non_finite_number_is_refused(registry_with_base, small_base, tmp_path, token):
    state = make_state_file(tmp_path / "s.pth", SMALL)
    train = tmp_path / "t.json"
    train.write_text(
        json.dumps(
            {
                "trainer": {"name": "t", "version": "1"},
                "hyperparameters": {"lr_init": 12345.5},
                "command": "c",
                "data_sha256": DATA,
            }
        ).replace("12345.5", token)
    )
    before = snapshot(registry_with_base)
    assert_refused(
        run(*add_args(registry_with_base, state, base_name(small_base), train)),
        registry_with_base,
        before,
        code="json.malformed",
    )


def test_train_json_in_registry_with_huge_number_is_reported(registry_with_entry):
    root, _ = registry_with_entry
    train = next(root.rglob("train.json"))
    train.write_text(train.read_text().replace("0.01", "1e999"))
    result = run("validate", root)
    assert result.exit_code == 1 and "json.malformed" in problem_codes(result), result.output


def test_render_index_never_writes_a_non_finite_number(registry_with_entry):
    root, _ = registry_with_entry
    index = Repo.open(root).load_index()
    index.entries[0].scores[0].value = math.nan  # no validation on assignment: only a bug could do this
    with pytest.raises(RegistryError) as err:
        render_index(index)
    assert err.value.code == "json.not-finite"


def test_read_json_refuses_what_python_json_accepts(tmp_path):
    for text in ("NaN", '{"a": Infinity}', '{"a": -Infinity}', '{"a": 1e999}', "[1E400]"):
        (tmp_path / "x.json").write_text(text)
        with pytest.raises(RegistryError) as err:
            read_json(tmp_path / "x.json")
        assert err.value.code == "json.malformed", text
    (tmp_path / "x.json").write_text('{"a": 1e308, "b": -1e-999}')
    assert read_json(tmp_path / "x.json") == {"a": 1e308, "b": -0.0}


def test_nesting_depth_is_bounded(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH)
    assert read_json(path) is not None
    path.write_text("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1))
    with pytest.raises(RegistryError) as err:
        read_json(path)
    assert err.value.code == "json.too-deep"


def test_deeply_nested_index_json_is_one_line_not_a_traceback(registry_with_base):
    root = registry_with_base
    (root / "index.json").write_text("[" * 100_000)
    before = snapshot(root)
    checked = run("validate", root)
    assert checked.exit_code == 1 and "json.too-deep" in problem_codes(checked) and "Traceback" not in checked.output
    assert_refused(run("list", "-C", root), root, before, code="json.too-deep")
    assert_refused(run("card", root), root, before, code="json.too-deep")


def test_deeply_nested_train_json_is_one_line_not_a_traceback(registry_with_base, small_base, tmp_path):
    state = make_state_file(tmp_path / "s.pth", SMALL)
    train = tmp_path / "t.json"
    deep = "[" * 100_000 + "]" * 100_000
    train.write_text(
        f'{{"trainer": {{"name": "t", "version": "1"}}, "hyperparameters": {{"x": {deep}}}, "command": "c", '
        f'"data_sha256": "{DATA}"}}'
    )
    before = snapshot(registry_with_base)
    assert_refused(
        run(*add_args(registry_with_base, state, base_name(small_base), train)),
        registry_with_base,
        before,
        code="json.too-deep",
    )


def test_oversized_index_json_is_refused_before_it_is_read(registry_with_base):
    root = registry_with_base
    with open(root / "index.json", "r+b") as handle:  # sparse: costs no disk and would cost 64 MiB to read
        handle.truncate(MAX_JSON_BYTES["index"] + 1)
    before = snapshot(root)
    checked = run("validate", root)
    assert checked.exit_code == 1 and "json.too-large" in problem_codes(checked)
    assert_refused(run("list", "-C", root), root, before, code="json.too-large")


def test_oversized_train_json_is_refused(registry_with_base, small_base, tmp_path):
    state = make_state_file(tmp_path / "s.pth", SMALL)
    train = train_json(tmp_path / "t.json")
    train.write_text(train.read_text() + " " * MAX_JSON_BYTES["train"])  # valid JSON, just too large
    before = snapshot(registry_with_base)
    assert_refused(
        run(*add_args(registry_with_base, state, base_name(small_base), train)),
        registry_with_base,
        before,
        code="json.too-large",
    )


def test_notes_are_bounded(registry_with_entry, small_base, tmp_path):
    root, path = registry_with_entry
    before = snapshot(root)
    state = make_state_file(tmp_path / "s2.pth", SMALL, seed=7)
    long_notes = "x" * (MAX_NOTES_CHARS + 1)
    assert_refused(
        run(*add_args(root, state, base_name(small_base), tmp_path / "inputs" / "t.json", "--notes", long_notes)),
        root,
        before,
        code="args.too-long",
    )
    result = run(
        "score",
        path,
        "-C",
        root,
        "--benchmark",
        "exam",
        "--value",
        "1",
        "--date",
        "2026-10-17",
        "--backend",
        "b",
        "--notes",
        long_notes,
    )
    assert_refused(result, root, before, code="args.too-long")
    # the same bound holds for train.json's notes, read from a file
    train = train_json(tmp_path / "long-notes.json", notes=long_notes)
    assert_refused(
        run(*add_args(root, state, base_name(small_base), train, data_version="v1.42")),
        root,
        before,
        code="schema.invalid",
    )


def test_bounds_are_documented():
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("## Bounds on JSON files") :]
    for stated in (
        f"{MAX_JSON_DEPTH} levels",
        f"{MAX_JSON_BYTES['index'] >> 20} MiB",
        f"{MAX_JSON_BYTES['train'] >> 20} MiB",
        f"{MAX_NOTES_CHARS >> 10} KiB",
        f"{MAX_SUMS_BYTES >> 20} MiB",
    ):
        assert stated in section, stated


# ----------------------------------------------------------------------------------------------
# 2. Names are refused before anything is staged


BAD_NAMES = ["s\n.pth", "s.pth\n", "s\t.pth", "s\x1b[31m.pth", "s\r.pth", "s\x85.pth", "s\\x.pth", " s.pth", "s.pth "]


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
def test_add_refuses_a_bad_file_name_before_staging(registry_with_base, small_base, tmp_path, name):
    state = make_state_file(tmp_path / name, SMALL)
    before = snapshot(registry_with_base)
    line = assert_refused(
        run(*add_args(registry_with_base, state, base_name(small_base), train_json(tmp_path / "t.json"))),
        registry_with_base,
        before,
        code="args.bad-name",
    )
    assert "file name" in line
    assert state.exists()


@pytest.mark.parametrize(
    "option,value",
    [
        ("--run", "r1\n"),
        ("--run", "r\t1"),
        ("--run", " r1"),
        ("--run", "r1 "),
        ("--run", "r\\1"),
        ("--base", "\n"),
        ("--base", " "),
    ],
    ids=repr,
)
def test_add_refuses_bad_run_and_base_names(registry_with_base, small_base, tmp_path, option, value):
    state = make_state_file(tmp_path / "s.pth", SMALL)
    name = base_name(small_base)
    if option == "--base":  # the real base's name with the bad character appended
        args = add_args(registry_with_base, state, name + value, train_json(tmp_path / "t.json"))
    else:
        args = add_args(registry_with_base, state, name, train_json(tmp_path / "t.json"), "--run", value)
    before = snapshot(registry_with_base)
    assert_refused(run(*args), registry_with_base, before, code="args.bad-name")


@pytest.mark.parametrize("version", ["v1.41\n", "v1.41 ", " v1.41", "v1\t41", "v1.41\r"], ids=repr)
def test_add_refuses_bad_data_versions(registry_with_base, small_base, tmp_path, version):
    state = make_state_file(tmp_path / "s.pth", SMALL)
    before = snapshot(registry_with_base)
    result = run(
        *add_args(
            registry_with_base, state, base_name(small_base), train_json(tmp_path / "t.json"), data_version=version
        )
    )
    assert_refused(result, registry_with_base, before, code="args.bad-data-version")


def test_add_base_refuses_a_name_with_a_newline(empty_registry):
    before = snapshot(empty_registry)
    result = run("add-base", "rwkv7-tiny\n.pth", "-C", empty_registry, "--metadata-only", "--sha256", "ab" * 32)
    assert_refused(result, empty_registry, before, code="args.bad-name")
    result = run("add-base", "rwkv7-tiny.pth\n", "-C", empty_registry, "--metadata-only", "--sha256", "ab" * 32)
    assert result.exit_code == 3 and snapshot(empty_registry) == before


def test_plain_names_with_inner_spaces_are_still_files(registry_with_base, small_base, tmp_path):
    """Only names that would break a SHA256SUMS line or a path are refused: an inner space is a fine file name."""
    state = make_state_file(tmp_path / "state v141.pth", SMALL)
    result = run(*add_args(registry_with_base, state, base_name(small_base), train_json(tmp_path / "t.json")))
    assert result.exit_code == 0, result.output
    assert run("validate", registry_with_base).exit_code == 0


# ----------------------------------------------------------------------------------------------
# 3. SHA256SUMS with CRLF line ends


def test_parse_sums_refuses_crlf_and_splits_on_lf_only():
    good = render_sums({"a/b.pth": "12" * 32, "index.json": "34" * 32})
    assert parse_sums(good) == {"a/b.pth": "12" * 32, "index.json": "34" * 32}
    with pytest.raises(RegistryError) as err:
        parse_sums(good.replace(b"\n", b"\r\n"))
    assert err.value.code == "sums.malformed" and "CR" in err.value.message and err.value.file == "SHA256SUMS:1"
    with pytest.raises(RegistryError):
        parse_sums(good.replace(b"\n", b"\r\n", 1))  # only the first line
    # one line per LF, as sha256sum reads it (str.splitlines would also split at U+2028 or a form feed)
    assert parse_sums(("12" * 32 + "  a\u2028b\x0cc.pth\n").encode()) == {"a\u2028b\x0cc.pth": "12" * 32}


@pytest.mark.parametrize("command", [["validate"], ["sums", "--check"]])
def test_crlf_sums_are_reported(registry_with_entry, command):
    root, _ = registry_with_entry
    sums = root / "SHA256SUMS"
    assert run(*command, root).exit_code == 0
    sums.write_bytes(sums.read_bytes().replace(b"\n", b"\r\n"))
    result = run(*command, root)
    assert result.exit_code == 1, result.output
    assert "sums.malformed" in problem_codes(result) and "CR" in result.stdout and "Traceback" not in result.output


# ----------------------------------------------------------------------------------------------
# 4. The card's hand-written-section markers in index text


@pytest.mark.parametrize("marker", [START, END])
def test_add_notes_with_a_card_marker_are_refused(registry_with_base, small_base, tmp_path, marker):
    state = make_state_file(tmp_path / "s.pth", SMALL)
    before = snapshot(registry_with_base)
    result = run(
        *add_args(
            registry_with_base,
            state,
            base_name(small_base),
            train_json(tmp_path / "t.json"),
            "--notes",
            f"see below\n{marker}\n",
        )
    )
    line = assert_refused(result, registry_with_base, before, code="args.card-marker")
    assert "--notes" in line and "marker" in line


@pytest.mark.parametrize("option", ["--notes", "--benchmark", "--backend"])
def test_score_text_with_a_card_marker_is_refused(registry_with_entry, option):
    root, path = registry_with_entry
    values = {"--benchmark": "exam", "--backend": "b", "--notes": ""}
    values[option] = f"x {START} y"
    before = snapshot(root)
    result = run(
        "score", path, "-C", root, "--value", "1", "--date", "2026-10-17", *[a for pair in values.items() for a in pair]
    )
    assert option in assert_refused(result, root, before, code="args.card-marker")


def test_index_text_with_a_card_marker_is_refused_by_card_and_reported_by_validate(registry_with_entry):
    root, _ = registry_with_entry
    index = root / "index.json"
    data = json.loads(index.read_text())
    data["entries"][0]["notes"] = f"hand-edited {END}"
    index.write_text(json.dumps(data, indent=2))
    before = snapshot(root)
    line = assert_refused(run("card", root), root, before, code="card.marker-in-index")
    assert "$.entries[0].notes" in line
    checked = run("validate", root)
    assert checked.exit_code == 1 and "card.marker-in-index" in problem_codes(checked)
    # the card itself was never damaged: once the text is fixed it renders again
    data["entries"][0]["notes"] = "hand-edited"
    index.write_text(json.dumps(data, indent=2))
    assert run("sums", root).exit_code == 0  # take the hand-edited index.json into SHA256SUMS
    result = run("card", root)
    assert result.exit_code == 0, result.output


# ----------------------------------------------------------------------------------------------
# 5. .registry is a regular file


def test_private_folder_that_is_a_file_is_a_one_line_refusal(registry_with_base, small_base, tmp_path):
    root = registry_with_base
    private = root / ".registry"
    for child in sorted(private.rglob("*"), reverse=True):
        child.rmdir() if child.is_dir() else child.unlink()
    private.rmdir()
    private.write_text("not a folder\n")
    before = snapshot(root)
    fix = "remove or rename the file .registry"
    assert_refused(run("sums", root), root, before, code="fs.private-not-dir", fix=fix)
    state = make_state_file(tmp_path / "s.pth", SMALL)
    assert_refused(
        run(*add_args(root, state, base_name(small_base), train_json(tmp_path / "t.json"))),
        root,
        before,
        code="fs.private-not-dir",
        fix=fix,
    )
    assert private.read_text() == "not a folder\n"


# ----------------------------------------------------------------------------------------------
# 6. --data-sums that is not a regular file


@pytest.fixture
def alarm():
    """Fail a test that blocks (a FIFO opened for reading) instead of hanging the suite."""

    def expired(signum, frame):
        raise TimeoutError("blocked opening a FIFO")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_data_sums_device_fifo_and_huge_file_are_refused(registry_with_base, small_base, tmp_path, alarm):
    state = make_state_file(tmp_path / "s.pth", SMALL)
    train = train_json(tmp_path / "t.json")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    huge = tmp_path / "SHA256SUMS"
    with open(huge, "wb") as handle:
        handle.truncate(MAX_SUMS_BYTES + 1)  # sparse
    before = snapshot(registry_with_base)
    for source, code in ((Path("/dev/zero"), "sums.not-a-file"), (fifo, "sums.not-a-file"), (huge, "sums.too-large")):
        result = run(*add_args(registry_with_base, state, base_name(small_base), train, "--data-sums", str(source)))
        line = assert_refused(result, registry_with_base, before, code=code)
        assert str(source) in line
    assert state.exists()


def test_data_sums_regular_file_still_checked(registry_with_base, small_base, tmp_path):
    state = make_state_file(tmp_path / "s.pth", SMALL)
    sums = tmp_path / "SHA256SUMS"
    sums.write_bytes(render_sums({"v1.41/train.jsonl": DATA}))
    result = run(
        *add_args(
            registry_with_base, state, base_name(small_base), train_json(tmp_path / "t.json"), "--data-sums", str(sums)
        )
    )
    assert result.exit_code == 0, result.output


# ----------------------------------------------------------------------------------------------
# No hangs: a FIFO where a weight belongs is refused at once


@pytest.mark.parametrize("command", ["add-base", "export-hf"])
def test_a_fifo_as_the_base_is_refused_at_once(registry_with_base, small_base, tmp_path, alarm, command):
    fifo = tmp_path / "rwkv7-fifo-20260101.pth"
    os.mkfifo(fifo)
    args = {
        "add-base": ["add-base", fifo, "-C", registry_with_base],
        "export-hf": ["export-hf", "--base", base_name(small_base), "--base-file", fifo, "-C", registry_with_base],
    }[command]
    before = snapshot(registry_with_base)
    line = assert_refused(run(*args), registry_with_base, before, code="args.not-a-file")
    assert line.startswith(f"error: {fifo}: ") and "not a regular file" in line


# ----------------------------------------------------------------------------------------------
# Names add accepts are names validate accepts: weight suffixes, and nothing that reads or lands as another name


@pytest.mark.parametrize("name", ["s.bin", "s", "train.json", "s.pth.txt"])
def test_add_refuses_a_name_validate_would_reject(registry_with_base, small_base, tmp_path, name):
    state = make_state_file(tmp_path / name, SMALL)
    before = snapshot(registry_with_base)
    line = assert_refused(
        run(*add_args(registry_with_base, state, base_name(small_base), train_json(tmp_path / "t.json"))),
        registry_with_base,
        before,
        code="args.not-a-weight-name",
    )
    assert line.startswith(f"error: {state}: ") and "end in .pth or .safetensors" in line
    assert run("validate", registry_with_base).exit_code == 0  # and every later write command still works
    assert (
        run(
            *add_args(registry_with_base, state.rename(tmp_path / "s1.pth"), base_name(small_base), tmp_path / "t.json")
        ).exit_code
        == 0
    )


@pytest.mark.parametrize(
    "name", ["x\u202egnp.pth", "s\u200b.pth", "\ufeffs.pth", "s\u2066.pth", "s\u200d.pth"], ids=ascii
)
def test_add_refuses_bidi_and_zero_width_characters(registry_with_base, small_base, tmp_path, name):
    state = make_state_file(tmp_path / name, SMALL)
    before = snapshot(registry_with_base)
    line = assert_refused(
        run(*add_args(registry_with_base, state, base_name(small_base), train_json(tmp_path / "t.json"))),
        registry_with_base,
        before,
        code="args.bad-name",
    )
    assert "bidi control or zero-width" in line


NFC, NFD = unicodedata.normalize("NFC", "café.pth"), unicodedata.normalize("NFD", "café.pth")


@pytest.mark.parametrize(
    "first,second", [(NFC, NFD), (NFD, NFC), ("a.pth", "A.pth"), ("State.pth", "state.pth")], ids=ascii
)
def test_add_refuses_a_name_that_is_another_on_macos_and_windows(
    registry_with_base, small_base, tmp_path, first, second
):
    (tmp_path / "1").mkdir(), (tmp_path / "2").mkdir()
    train = train_json(tmp_path / "t.json")
    assert (
        run(
            *add_args(
                registry_with_base, make_state_file(tmp_path / "1" / first, SMALL, seed=1), base_name(small_base), train
            )
        ).exit_code
        == 0
    )
    before = snapshot(registry_with_base)
    twin = make_state_file(tmp_path / "2" / second, SMALL, seed=2)
    line = assert_refused(
        run(*add_args(registry_with_base, twin, base_name(small_base), train)),
        registry_with_base,
        before,
        code="args.name-collision",
    )
    assert "differ only in case or Unicode normalization" in line and ascii(second)[1:-1] in line


def test_add_refuses_a_run_that_differs_only_in_case(registry_with_base, small_base, tmp_path):
    train = train_json(tmp_path / "t.json")
    base_sha = sha256_of(small_base)

    def args(f, run_name):
        return add_args(registry_with_base, f, base_name(small_base), train, "--run", run_name, method="miss")

    assert run(*args(make_adapter_file(tmp_path / "a1.pth", SMALL, base_sha, seed=1), "r16")).exit_code == 0
    before = snapshot(registry_with_base)
    line = assert_refused(
        run(*args(make_adapter_file(tmp_path / "a2.pth", SMALL, base_sha, seed=2), "R16")),
        registry_with_base,
        before,
        code="args.name-collision",
    )
    assert "/R16'" in line and "/r16'" in line


def test_validate_reports_twins_and_invisible_names(registry_with_entry, tmp_path):
    root, path = registry_with_entry
    folder = (root / path).parent
    (folder / (root / path).name.upper()).write_bytes((root / path).read_bytes())
    (folder / NFC).write_bytes(b"x")
    (folder / NFD).write_bytes(b"y")
    (folder / "z\u202egnp.pth").write_bytes(b"z")
    result = run("validate", root, "--json")
    problems = json.loads(result.stdout)["problems"]
    collisions = sorted(p["message"] for p in problems if p["code"] == "layout.name-collision")
    assert result.exit_code == 1 and len(collisions) == 2, problems
    assert (
        "/S.PTH' and " in collisions[0]
        and "/cafe\\u0301.pth' and " in collisions[1]
        and "/caf\\xe9.pth' differ" in collisions[1]
    )
    assert any(p["code"] == "layout.bad-name" and "U+202E" in p["message"] for p in problems)


def test_a_run_name_longer_than_a_file_system_holds_is_refused_leaving_nothing(
    registry_with_base, small_base, tmp_path
):
    adapter = make_adapter_file(tmp_path / "a.pth", SMALL, sha256_of(small_base))
    args = add_args(
        registry_with_base,
        adapter,
        base_name(small_base),
        train_json(tmp_path / "t.json"),
        "--run",
        "r" * 300,
        method="miss",
    )
    before = snapshot(registry_with_base)
    dirs = sorted(p for p in registry_with_base.rglob("*") if p.is_dir())
    line = assert_refused(run(*args), registry_with_base, before, code="args.bad-name")
    assert "bytes long; a file or directory name holds at most 255" in line
    assert sorted(p for p in registry_with_base.rglob("*") if p.is_dir()) == dirs  # no empty folder left behind


def test_a_transaction_refuses_a_too_long_name_before_its_journal(registry_with_base):
    with pytest.raises(RegistryError) as refused, transaction(registry_with_base) as txn:
        txn.write(f"{'d' * 256}/x.json", b"{}")
    assert refused.value.code == "fs.name-too-long"
    assert (
        not (registry_with_base / ".registry" / JOURNAL_NAME).exists()
        and run("validate", registry_with_base).exit_code == 0
    )


def test_a_malformed_train_json_in_a_hand_made_folder_is_said_once(small_base, tmp_path):
    """Issue 38: adopt printed the malformed train.json's line twice (two checks read it)."""

    folder = tmp_path / "hand-made"
    entry = folder / base_name(small_base) / "state" / "v1"
    entry.mkdir(parents=True)
    make_state_file(entry / "s.pth", SMALL)
    (entry / "train.json").write_text('{"a": 1,\n')
    base = tmp_path / "bases" / small_base.name
    base.parent.mkdir()
    shutil.copy(small_base, base)
    result = run("adopt", str(folder), "--base-file", str(base), "--dry-run")
    lines = result.stderr.splitlines()
    assert (
        result.exit_code == 3
        and len(lines) == len(set(lines)) == 1
        and lines[0].startswith(f"error: {base_name(small_base)}/state/v1/train.json:2:1: malformed JSON")
    )


def test_a_refusal_prints_one_line_per_problem_and_no_count_line(registry_with_entry):
    """Issue 38: "SHA256SUMS: 1 file(s) differ from SHA256SUMS: …" came before the one problem."""
    root, _ = registry_with_entry
    train = next(root.rglob("train.json"))
    train.write_bytes(train.read_bytes().replace(b"{", b"{ ", 1))
    before = snapshot(root)
    line = assert_refused(run("set", "title", "Another title", "-C", root), root, before, code="sums.mismatch")
    assert line.startswith(f"error: {train.relative_to(root).as_posix()}: sha256 is ")
