"""Crash atomicity and concurrency of the writing commands, on real processes.

Each writing command is killed with SIGKILL at its rename(2) calls (counted under strace, killed
by an audit hook as it makes the chosen one), and at random instants during a long copy; the next command must find the
registry's public files byte-identical to before the command or to after it, finish an
interrupted commit itself, and leave no staging debris once it has taken the lock.  Concurrent
writers must each land their change or refuse cleanly.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from registry.artifacts.synthetic import TinySpec, make_base_checkpoint, make_state_file
from registry.cli import main
from registry.core.names import JOURNAL_NAME, PRIVATE_DIR, STAGING_NAME
from registry.core.published import record_published
from registry.core.repo import Repo
from registry.core.sums import parse_sums
from registry.dataset.models import wire_hash
from registry.dataset.synthetic import SEED_002, build_version

from .conftest import SMALL, snapshot
from .test_migrate import to_format_1

STRACE = shutil.which("strace")
pytestmark = pytest.mark.skipif(
    STRACE is None,
    reason="strace is not installed (apt-get install strace): the crash tests inject SIGKILL at rename(2) with it",
)

CLI = [sys.executable, "-m", "registry"]
# A bound that only a hung command reaches: smoke on the gate's tiny model takes seconds on an idle
# machine, and minutes beside seven other developers' builds (300 s was reached there).
COMMAND_TIMEOUT = 1200
BIG = TinySpec(n_layer=4, n_embd=512, vocab_size=65536)  # a ~90 MB checkpoint: long enough to be killed mid-copy


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str


def registry(*args: str | Path, check: bool = True) -> Ran:
    """The tool run in this process (click's runner): the commands around a killed one, which build
    its registry and then find what it left, need not be processes of their own; the killed command
    and the concurrent writers are (CLI)."""
    result = CliRunner().invoke(main, [*map(str, args)])
    if check:
        assert result.exit_code == 0, (result.stderr, result.exception)
    return Ran(result.exit_code, result.stdout, result.stderr)


def train_json(path: Path) -> Path:
    path.write_text(
        json.dumps(
            {
                "trainer": {"name": "rwkv_state_tune", "version": "1.8.1"},
                "hyperparameters": {"lr_init": 0.01},
                "command": "rwkv_state_tune",
                "data_sha256": "ab" * 32,
            }
        )
    )
    return path


@dataclass
class Scenario:
    name: str
    prepare: Callable[[Path, Path], None]  # (registry, inputs) -> None: the state before the command
    command: Callable[[Path, Path], list[str | Path]]  # (registry, inputs) -> arguments


def _base(reg: Path, inputs: Path) -> None:
    registry("init", reg)
    registry("add-base", inputs / "rwkv7-crash-20260101.pth", "-C", reg)


def _with_full(reg: Path, inputs: Path) -> None:
    _base(reg, inputs)
    registry(
        "add",
        inputs / "full.pth",
        "-C",
        reg,
        "--base",
        "rwkv7-crash-20260101",
        "--method",
        "full",
        "--data-version",
        "v1.0",
        "--train-json",
        inputs / "train.json",
    )


STATE_PATH = "rwkv7-crash-20260101/state/v1.41/s1.pth"


def _with_state(reg: Path, inputs: Path) -> None:
    _base(reg, inputs)
    registry(
        "add",
        inputs / "s1.pth",
        "-C",
        reg,
        "--base",
        "rwkv7-crash-20260101",
        "--method",
        "state",
        "--data-version",
        "v1.41",
        "--train-json",
        inputs / "train.json",
    )


GATE = TinySpec(n_layer=2, n_embd=128, vocab_size=65536)  # the gate tokenizes real prompts: the world vocabulary
GATE_STATE_PATH = "rwkv7-crashgate-20260101/state/v1.41/g1.pth"


def _with_gate_state(reg: Path, inputs: Path) -> None:
    registry("init", reg)
    registry("add-base", inputs / "rwkv7-crashgate-20260101.pth", "-C", reg)
    registry(
        "add",
        inputs / "g1.pth",
        "-C",
        reg,
        "--base",
        "rwkv7-crashgate-20260101",
        "--method",
        "state",
        "--data-version",
        "v1.41",
        "--train-json",
        inputs / "train.json",
    )


def _with_gate_base(reg: Path, inputs: Path) -> None:
    registry("init", reg)
    registry("add-base", inputs / "rwkv7-crashgate-20260101.pth", "-C", reg)


def _published_then_changed(reg: Path, inputs: Path) -> None:
    """A registry as publish leaves it, then a published train.json edited (and accepted into SHA256SUMS)."""
    _with_state(reg, inputs)
    record_published(Repo(reg), parse_sums((reg / "SHA256SUMS").read_bytes()))
    train = reg / Path(STATE_PATH).parent / "train.json"
    train.write_text(train.read_text().replace("rwkv_state_tune", "rwkv_state_tune (typo fixed)"))
    registry("sums", "-C", reg)


def _hand_made(reg: Path, inputs: Path) -> None:
    """A seed-001-shaped repo made by hand (cp, a hand-written index.json and README, sha256sum), for adopt."""
    version = reg / "rwkv7-crash-20260101" / "state" / "v1.41"
    version.mkdir(parents=True)
    shutil.copy(inputs / "s1.pth", version / "s1.pth")
    shutil.copy(inputs / "train.json", version / "train.json")
    (reg / "index.json").write_text(
        json.dumps({"entries": [{"path": STATE_PATH, "recommended": True, "sha256sum": "see SHA256SUMS"}]})
    )
    (reg / "README.md").write_text("# Hand-made\n\nState 推荐\n")
    # The shell creates SHA256SUMS as the pipeline starts, so find may or may not list it: never let it.
    subprocess.run(
        "find * -type f ! -name SHA256SUMS | sort | xargs sha256sum > SHA256SUMS", shell=True, cwd=reg, check=True
    )


def _format_1(reg: Path, inputs: Path) -> None:
    """A registry of the previous format_version (tests/test_migrate.py builds it), for migrate."""

    _with_state(reg, inputs)
    to_format_1(reg)


DATA_SPEC = SEED_002[0]  # seed 002's v1.41, tiny


def _dataset_add(reg: Path, inputs: Path) -> list[str | Path]:
    folder = inputs / "final-20261013"
    trained = f"dataset/train/{DATA_SPEC.trained_name}"
    sha = json.loads((folder / "release-manifest.json").read_text())["files"][trained]
    return [
        "dataset",
        "add",
        folder,
        "-C",
        reg,
        "--version",
        DATA_SPEC.version,
        "--date",
        "2026-10-13",
        "--thinking",
        DATA_SPEC.thinking,
        "--teacher",
        "DeepSeek v4 Flash",
        "--trained-file",
        trained,
        "--trained-sha256",
        sha,
        "--train-rows",
        str(DATA_SPEC.train_rows),
        "--validation-rows",
        str(DATA_SPEC.validation_rows),
        "--wire-canonical",
        DATA_SPEC.wire_canonical,
        "--wire-hash",
        wire_hash(DATA_SPEC.wire_canonical),
        "--vocab",
        "rwkv_vocab_v20230424.txt",
    ]


SCENARIOS = [
    Scenario(
        "add-base",
        lambda reg, inputs: registry("init", reg),
        lambda reg, inputs: ["add-base", inputs / "rwkv7-crash-20260101.pth", "-C", reg],
    ),
    Scenario(
        "add-state",
        _base,
        lambda reg, inputs: [
            "add",
            inputs / "s1.pth",
            "-C",
            reg,
            "--base",
            "rwkv7-crash-20260101",
            "--method",
            "state",
            "--data-version",
            "v1.41",
            "--train-json",
            inputs / "train.json",
        ],
    ),
    Scenario(
        "add-full",
        _base,
        lambda reg, inputs: [
            "add",
            inputs / "full.pth",
            "-C",
            reg,
            "--base",
            "rwkv7-crash-20260101",
            "--method",
            "full",
            "--data-version",
            "v1.0",
            "--train-json",
            inputs / "train.json",
        ],
    ),
    Scenario(
        "convert-3-shards",
        _with_full,
        lambda reg, inputs: ["convert", "rwkv7-crash-20260101/full/v1.0/full.pth", "-C", reg, "--shard-size", "450KB"],
    ),
    Scenario(
        "score",
        _with_full,
        lambda reg, inputs: [
            "score",
            "rwkv7-crash-20260101/full/v1.0/full.pth",
            "-C",
            reg,
            "--benchmark",
            "exam",
            "--value",
            "46.9",
            "--date",
            "2026-10-16",
            "--backend",
            "rwkv 0.8.32",
        ],
    ),
    Scenario("card", _base, lambda reg, inputs: ["card", "-C", reg]),
    Scenario("sums", _base, lambda reg, inputs: ["sums", "-C", reg]),
    Scenario(
        "smoke",
        _with_gate_state,
        lambda reg, inputs: [
            "smoke",
            GATE_STATE_PATH,
            "-C",
            reg,
            "--device",
            "cpu",
            "--base-file",
            inputs / "rwkv7-crashgate-20260101.pth",
        ],
    ),
    Scenario(
        "export-gguf",
        _with_gate_base,
        lambda reg, inputs: [
            "export-gguf",
            "--base",
            "rwkv7-crashgate-20260101",
            "--base-file",
            inputs / "rwkv7-crashgate-20260101.pth",
            "--type",
            "q8_0",
            "-C",
            reg,
        ],
    ),
    Scenario("set", _base, lambda reg, inputs: ["set", "title", "Crash test title", "-C", reg]),
    Scenario(
        "describe",
        _with_state,
        lambda reg, inputs: ["describe", STATE_PATH, "-C", reg, "--lang", "en", "--notes", "the recommended State"],
    ),
    Scenario(
        "validate-allow-rewrite",
        _published_then_changed,
        lambda reg, inputs: ["validate", "-C", reg, "--allow-rewrite", "fixed a typo"],
    ),
    Scenario(
        "adopt", _hand_made, lambda reg, inputs: ["adopt", reg, "--base-file", inputs / "rwkv7-crash-20260101.pth"]
    ),
    Scenario("dataset-add", lambda reg, inputs: registry("dataset", "init", reg), _dataset_add),
    Scenario("migrate", _format_1, lambda reg, inputs: ["migrate", "-C", reg]),
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("crash-inputs")
    make_base_checkpoint(directory / "rwkv7-crash-20260101.pth", SMALL)
    make_base_checkpoint(directory / "full.pth", SMALL)
    make_state_file(directory / "s1.pth", SMALL)
    make_base_checkpoint(directory / "rwkv7-crashgate-20260101.pth", GATE)
    make_state_file(directory / "g1.pth", GATE)
    train_json(directory / "train.json")
    build_version(directory / "final-20261013", DATA_SPEC)
    an_hour_old(directory)  # as the registries' files are: the user's hash cache keeps them too
    return directory


def _prepared(scenario: Scenario, inputs: Path, root: Path) -> Path:
    reg = root / "reg"
    scenario.prepare(reg, inputs)
    if scenario.name == "card":  # give card something to do: a new title, the card not yet rendered
        index = json.loads((reg / "index.json").read_text())
        index["registry"]["title"] = "Crash test"
        (reg / "index.json").write_text(json.dumps(index, indent=2, ensure_ascii=False) + "\n")
        registry("sums", "-C", reg)
    if scenario.name == "sums":  # and sums: a hand edit of the card's hand-written section
        card = reg / "README.md"
        card.write_text(card.read_text(encoding="utf-8").replace("这一段由人维护", "edited by hand"), encoding="utf-8")
    an_hour_old(reg)
    return reg


def an_hour_old(root: Path) -> None:
    """Date every file under root an hour back.  The stat caches skip files younger than
    RACY_SECONDS, so with fresh files whether a run saves a cache (one more rename) would depend
    on how fast the machine is, and the kill points counted on one run would miss on the next."""
    an_hour_ago = time.time() - 3600
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            os.utime(path, (an_hour_ago, an_hour_ago))


RENAMES = ("rename", "renameat", "renameat2")
# strace stops a traced process at every syscall unless a seccomp filter leaves all but the traced
# ones alone (a CPU gate run: 13.2 s traced without it, 4.0 s with it, 3.9 s untraced): the run
# that counts the renames uses it (where the kernel has no seccomp-bpf, strace says so and stops at
# every syscall as before).
COUNTED = [STRACE or "strace", "-f", "--seccomp-bpf", "-qq"]

# The CLI with an audit hook (PEP 578: CPython raises "os.rename" for os.rename and os.replace,
# before the call) that counts the renames as traced_renames does, appends each to a log (argv[2],
# or "-" for none) and SIGKILLs the process at the chosen one (argv[3], argv[4]; "-" 0: none),
# before the kernel sees it: where strace's inject=<syscall>:signal=SIGKILL:when=<k> stopped it,
# without strace stopping the process at every syscall (strace 6.1 delivers no injected signal
# under --seccomp-bpf), which cost ~9 s a kill of smoke.  The counting run uses it too, and its
# log must equal what strace saw: a rename the hook cannot see fails the test, not the proof.
AT_RENAMES = """
import os, signal, sys
root, log, kill_syscall, kill_nth = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
made = {"rename": 0, "renameat": 0}
def at_rename(event, args):
    if event != "os.rename":
        return
    _, target, source_dir_fd, target_dir_fd = args
    syscall = "rename" if source_dir_fd == -1 and target_dir_fd == -1 else "renameat"
    if syscall == "rename" and not os.fsdecode(target).startswith(root + "/"):
        return
    made[syscall] += 1
    if log != "-":
        with open(log, "a") as renames:
            renames.write(syscall + "\\n")
    if syscall == kill_syscall and made[syscall] == kill_nth:
        os.kill(os.getpid(), signal.SIGKILL)
sys.addaudithook(at_rename)
from registry.cli import main
main(sys.argv[5:])
"""


def _at_renames(root: Path, cmd: list[str | Path], log: str = "-", kill: Rename | None = None) -> list[str]:
    """The command run on the registry ``root`` through AT_RENAMES."""
    point = [kill.syscall, str(kill.nth)] if kill else ["-", "0"]
    return [sys.executable, "-c", AT_RENAMES, str(root), log, *point, *map(str, cmd)]


def _kill_at(cmd: list[str | Path], root: Path, point: Rename) -> subprocess.CompletedProcess[str]:
    """The command run on the registry ``root``, killed (SIGKILL) as it makes the rename ``point``."""
    return subprocess.run(_at_renames(root, cmd, kill=point), capture_output=True, text=True, timeout=COMMAND_TIMEOUT)


@dataclass(frozen=True)
class Rename:
    """One rename a command made: its syscall, which call of that syscall it was (strace's
    ``inject=…:when=``), and its kind: ``journal`` (a commit's journal written), ``move`` (a staged
    file renamed into place), ``removal`` (a file moved into staging to be removed), ``private``
    (any other: the tool's caches, gate receipts, the stat cache)."""

    syscall: str
    nth: int
    kind: str


def classify(syscall: str, arguments: str) -> str:
    """The kind of a rename from strace's ``-y`` line arguments (directories decoded as ``fd</path>``)."""
    staging = f"/{PRIVATE_DIR}/{STAGING_NAME}"
    if syscall == "rename":
        target = re.findall(r'"([^"]*)"', arguments)[-1]
        return "journal" if Path(target).name == JOURNAL_NAME else "private"
    source_dir, target_dir = re.findall(r"\d+<([^>]*)>", arguments)[:2]
    if source_dir.endswith(staging) and not target_dir.endswith(staging):
        return "move"
    return "removal" if target_dir.endswith(staging) else "private"


def traced_renames(cmd: list[str | Path], log: Path, root: Path) -> list[Rename]:
    """Run the command on the registry ``root`` to the end under strace: every rename it made
    there, in order.  A rename outside the root (a user cache under ``$XDG_CACHE_HOME``, filled
    once) is left out of the count: the killed runs that follow find those caches filled."""
    seen = log.with_suffix(".hook.log")
    traced = subprocess.run(
        [*COUNTED, "-y", "-o", str(log), "-e", f"trace={','.join(RENAMES)}", *_at_renames(root, cmd, str(seen))],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
    )
    assert traced.returncode == 0, traced.stderr[-2000:]
    renames: list[Rename] = []
    for line in log.read_text().splitlines():
        if not (m := re.match(r"(?:\d+\s+)?(rename|renameat|renameat2)\((.*)\)\s+=", line)):
            continue
        if m[1] == "rename" and not re.findall(r'"([^"]*)"', m[2])[-1].startswith(f"{root}/"):
            continue
        nth = 1 + sum(r.syscall == m[1] for r in renames)
        renames.append(Rename(m[1], nth, classify(m[1], m[2])))
    # What the killed runs count by (AT_RENAMES) saw every rename strace saw, in the same order.
    assert (seen.read_text().split() if seen.exists() else []) == [r.syscall for r in renames], renames
    return renames


def kill_points(renames: list[Rename]) -> list[Rename]:
    """The renames to kill at: one instant per kind of state a kill can leave, not every rename.

    Before a commit's journal is written nothing public has changed, and each private write is an
    atomic rename of a cache or receipt: a kill at the journal's rename has all of them behind it
    and proves what a kill at any of them would.  Once the journal is written, a kill at the first
    move leaves none moved and the next command must roll the whole commit forward; a kill at a
    later move leaves some moved and the rest rolled forward the same way, which every command
    shares (``tests/test_transaction.py`` kills a transaction at every one of its renames), so it
    proves nothing new about the command.  Removals likewise.  Private writes after the journal
    (the stat cache saved after the commit) leave the public files complete.  A command that writes
    no journal: the last of each run of its private writes."""
    journalled = any(r.kind == "journal" for r in renames)
    points: list[Rename] = []
    for position, rename in enumerate(renames):
        previous = renames[position - 1].kind if position else None
        following = renames[position + 1].kind if position + 1 < len(renames) else None
        if rename.kind == "journal" or (rename.kind in ("move", "removal") and previous != rename.kind):
            points.append(rename)
        elif rename.kind == "private" and not journalled and following != "private":
            points.append(rename)
    return points


def test_kill_points_are_one_instant_per_distinct_state():
    def made(*kinds: str) -> list[Rename]:
        renames: list[Rename] = []
        for kind in kinds:
            syscall = "rename" if kind in ("journal", "private") else "renameat"
            renames.append(Rename(syscall, 1 + sum(r.syscall == syscall for r in renames), kind))
        return renames

    # export-gguf's run: a gate receipt, the stat cache, the journal, six moves, the stat cache after the commit
    renames = made("private", "private", "journal", *["move"] * 6, "private")
    assert [(r.syscall, r.nth) for r in kill_points(renames)] == [("rename", 3), ("renameat", 1)]
    assert [r.kind for r in kill_points(made("journal", "move", "move", "move", "removal"))] == [
        "journal",
        "move",
        "removal",
    ]
    two_commits = made("private", "journal", "move", "move", "private", "journal", "removal", "private")
    assert [(r.kind, r.nth) for r in kill_points(two_commits)] == [
        ("journal", 2),
        ("move", 1),
        ("journal", 4),
        ("removal", 3),
    ]
    assert [r.nth for r in kill_points(made("private", "private"))] == [2]
    assert kill_points([]) == []
    assert classify("rename", '"/r/.registry/.journal.json.x.tmp", "/r/.registry/journal.json"') == "journal"
    assert classify("rename", '"/r/.registry/.statcache.json.x.tmp", "/r/.registry/statcache.json"') == "private"
    staged = f"4</r/{PRIVATE_DIR}/{STAGING_NAME}>"
    assert classify("renameat", f'{staged}, ".index.json.x.tmp", 5</r>, "index.json"') == "move"
    assert classify("renameat", f'5</r/old>, "stale.bin", {staged}, "trash-0"') == "removal"


class Completed:
    """The registry an uninterrupted run leaves.  Commands stamp receipts, gate summaries and history
    with today's UTC date, so a run after midnight completes to another state than one before it:
    each new day seen gets its own uninterrupted run, and a killed run may match any of them."""

    def __init__(self, run: Callable[[str], tuple[Path, list[Rename]]]):
        self._run = run
        self._day = ""
        self.states: list[dict] = []
        self.renames: list[Rename] = []  # the first run's: the kill points are counted on it
        self.refresh()

    def refresh(self) -> None:
        """Runs the command once more when the UTC day changed since the last run."""
        day = datetime.now(UTC).date().isoformat()
        if day != self._day:
            self._day = day
            done, renames = self._run(f"done-{day}")
            self.renames = self.renames or renames
            self.states.append(snapshot(done))


def test_a_run_across_midnight_is_compared_with_the_uninterrupted_run_of_each_day(tmp_path, monkeypatch):
    """Commands date what they write (receipts, gate summaries, history): a killed run that ends
    after midnight is compared with an uninterrupted run of the new day as well as the old one."""
    moments = ["2026-12-06T23:59:58+00:00", "2026-12-06T23:59:59+00:00", "2026-12-07T00:00:01+00:00"]
    clock = iter([datetime.fromisoformat(moment) for moment in moments])

    class Clock:
        @staticmethod
        def now(tz):
            return next(clock)

    monkeypatch.setattr(sys.modules[__name__], "datetime", Clock)
    runs: list[str] = []

    def uninterrupted(name: str) -> tuple[Path, list[Rename]]:
        runs.append(name)
        folder = tmp_path / name
        folder.mkdir()
        (folder / "index.json").write_text(name)
        return folder, [Rename("rename", len(runs), "journal")]

    completed = Completed(uninterrupted)
    completed.refresh()  # the same day: nothing runs again
    assert runs == ["done-2026-12-06"] and len(completed.states) == 1
    completed.refresh()  # past midnight: the new day's run, the kill points still the first run's
    assert runs == ["done-2026-12-06", "done-2026-12-07"] and completed.renames == [Rename("rename", 1, "journal")]
    assert [state["index.json"] for state in completed.states] == [b"done-2026-12-06", b"done-2026-12-07"]


def _assert_old_or_new_then_clean(reg: Path, before: dict, completed: Completed) -> str:
    checked = registry(
        "validate", "-C", reg, check=False
    )  # the next command: rolls an interrupted commit forward first
    completed.refresh()
    now = snapshot(reg)
    assert now == before or now in completed.states, sorted(set(now) ^ set(completed.states[-1]))
    assert not (reg / PRIVATE_DIR / JOURNAL_NAME).exists()
    if now != before:
        assert checked.returncode == 0, checked.stdout
    # Any command that takes the lock removes staging debris, even one that then refuses.
    refused = registry(
        "score",
        "no/such/entry.pth",
        "-C",
        reg,
        "--benchmark",
        "b",
        "--value",
        "1",
        "--date",
        "2026-01-01",
        "--backend",
        "b",
        check=False,
    )
    assert refused.returncode == 3 and list((reg / PRIVATE_DIR / STAGING_NAME).iterdir()) == []
    assert snapshot(reg) == now
    return "before" if now == before else "after"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_a_kill_at_every_rename_leaves_the_registry_old_or_new(scenario, inputs, tmp_path):
    template = _prepared(scenario, inputs, tmp_path / "template")
    before = snapshot(template)

    def fresh(name: str) -> Path:
        return Path(shutil.copytree(template, tmp_path / name / "reg", symlinks=True))

    def uninterrupted(name: str) -> tuple[Path, list[Rename]]:
        done = fresh(name)
        return done, traced_renames(scenario.command(done, inputs), tmp_path / f"{name}.renames.log", done)

    # Kill at the renames of an uninterrupted run that leave distinct states (kill_points).  strace
    # counts each syscall apart: the journal is renamed with rename(2), the files with
    # renameat(2) (renameat2 where the architecture has no renameat).  A run may rename once
    # more or less than the counted one (e.g. whether the stat cache is saved): a kill point it
    # does not reach lets it finish, and it must then be complete.
    completed = Completed(uninterrupted)
    renames = completed.renames
    assert completed.states[0] != before and any(r.kind == "journal" for r in renames), renames
    outcomes = []
    for point in kill_points(renames):
        reg = fresh(f"kill-{point.syscall}-{point.nth}")
        killed = _kill_at(scenario.command(reg, inputs), reg, point)
        if killed.returncode == 0:
            completed.refresh()
            assert snapshot(reg) in completed.states
            continue
        assert killed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), (point, killed.stderr[-500:])
        outcomes.append(_assert_old_or_new_then_clean(reg, before, completed))
    # Before the journal is written the old registry stands; once it is written, the new one.
    assert "before" in outcomes and "after" in outcomes, outcomes


def test_kills_at_random_instants_during_a_long_copy(inputs, tmp_path):
    make_base_checkpoint(inputs / "rwkv7-big-20260101.pth", BIG)
    big = inputs / "rwkv7-big-20260101.pth"
    template = tmp_path / "template" / "reg"
    registry("init", template)
    registry("add-base", big, "-C", template)
    before = snapshot(template)
    cmd = [
        "add",
        big,
        "--base",
        "rwkv7-big-20260101",
        "--method",
        "full",
        "--data-version",
        "v1.0",
        "--train-json",
        inputs / "train.json",
    ]

    def uninterrupted(name: str) -> tuple[Path, list[Rename]]:
        done = Path(shutil.copytree(template, tmp_path / name / "reg"))
        registry(*cmd, "-C", done)
        return done, []

    started = time.perf_counter()
    completed = Completed(uninterrupted)
    duration = time.perf_counter() - started
    chooser = random.Random(16)
    for trial in range(5):
        reg = Path(shutil.copytree(template, tmp_path / f"trial-{trial}" / "reg"))
        process = subprocess.Popen(
            [*CLI, *map(str, cmd), "-C", str(reg)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        time.sleep(chooser.uniform(0.3, 0.9) * duration)
        process.send_signal(signal.SIGKILL)
        process.wait()
        _assert_old_or_new_then_clean(reg, before, completed)


@pytest.mark.parametrize("writers", [2, 3])
def test_concurrent_adds_lose_no_entry(inputs, tmp_path, writers):
    states = [make_state_file(inputs / f"c{writers}-{i}.pth", SMALL, seed=10 + i) for i in range(writers)]
    template = tmp_path / "template"
    _base(template, inputs)  # built once, copied for each trial
    for trial in range(6):
        reg = Path(shutil.copytree(template, tmp_path / f"trial-{trial}" / "reg", symlinks=True))
        procs = [
            subprocess.Popen(
                [
                    *CLI,
                    "add",
                    str(s),
                    "-C",
                    str(reg),
                    "--base",
                    "rwkv7-crash-20260101",
                    "--method",
                    "state",
                    "--data-version",
                    "v1.41",
                    "--train-json",
                    str(inputs / "train.json"),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for s in states
        ]
        results = [(p.wait(timeout=COMMAND_TIMEOUT), p.stderr.read() if p.stderr else "") for p in procs]
        index = json.loads((reg / "index.json").read_text())
        registered = {Path(e["path"]).name for e in index["entries"]}
        for state, (code, stderr) in zip(states, results, strict=True):
            if code == 0:
                assert state.name in registered, (trial, stderr)
            else:  # a clean refusal: the lock was busy for too long
                assert code == 3 and "fs.locked" not in stderr and "lock" in stderr and state.name not in registered, (
                    stderr
                )
        assert registry("validate", "-C", reg).returncode == 0


def test_an_index_json_symlinked_outside_the_root_is_never_read(inputs, tmp_path):
    reg = tmp_path / "reg"
    _base(reg, inputs)
    outside = tmp_path / "outside-index.json"
    outside.write_bytes((reg / "index.json").read_bytes())
    (reg / "index.json").unlink()
    (reg / "index.json").symlink_to(outside)
    before = snapshot(reg)
    for args in (
        ["list"],
        ["card"],
        ["card", "--check"],
        ["score", "x.pth", "--benchmark", "b", "--value", "1", "--date", "2026-01-01", "--backend", "b"],
    ):
        result = registry(*args, "-C", reg, check=False)
        assert result.returncode in (1, 3) and "symlink" in result.stdout + result.stderr, (args, result.stderr)
    assert snapshot(reg) == before and outside.read_bytes() == (tmp_path / "outside-index.json").read_bytes()


def test_bytes_swapped_behind_the_index_are_refused_before_anything_runs(inputs, tmp_path):
    reg = tmp_path / "reg"
    _with_state(reg, inputs)
    rel = STATE_PATH
    other = make_state_file(tmp_path / "other.pth", SMALL, seed=7)  # a valid State, other bytes
    shutil.copyfile(other, reg / rel)
    before = snapshot(reg)
    for args in (
        ["convert", rel, "--force"],
        ["smoke", rel, "--device", "cpu", "--base-file", inputs / "rwkv7-crash-20260101.pth"],
    ):
        result = registry(*args, "-C", reg, check=False)
        assert (
            result.returncode == 3
            and f"error: {rel}: sha256 is" in result.stderr
            and "index.json says" in result.stderr
        ), result.stderr
    assert snapshot(reg) == before and not list((reg / PRIVATE_DIR / "gates").glob("*.json"))


def test_a_kill_at_every_rename_of_init_leaves_nothing_or_a_registry(tmp_path):
    done = tmp_path / "done"
    renames = traced_renames(["init", done, "--title", "Crash"], tmp_path / "renames.log", done)
    after = snapshot(done)
    outcomes = []
    for point in kill_points(renames):  # the journal's rename, the first and the last file moved into place
        target = tmp_path / f"kill-{point.syscall}-{point.nth}"
        killed = _kill_at(["init", target, "--title", "Crash"], target, point)
        if killed.returncode == 0:  # a run that renamed less than the counted one: it must be complete
            assert snapshot(target) == after
            continue
        assert killed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), killed.stderr[-500:]
        if (target / PRIVATE_DIR / JOURNAL_NAME).exists():
            registry("validate", "-C", target)  # the next command completes the interrupted init
            outcomes.append("after")
        else:
            assert snapshot(target) == {}  # nothing public; init runs again on the same folder
            registry("init", target, "--title", "Crash")
            outcomes.append("before")
        assert snapshot(target) == after and list((target / PRIVATE_DIR / STAGING_NAME).iterdir()) == []
    assert "before" in outcomes and "after" in outcomes, outcomes
