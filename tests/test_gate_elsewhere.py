"""Gate here, publish there (docs/ci.md): a receipt signed on the gate machine counts in a publish
made by another installation only when its signature verifies under the key that publish was told
to trust, for exactly the bytes and base being published.  The gate runs for real (on CPU); the
two installations are two receipt-key folders (``XDG_CONFIG_HOME``); the Hub is tests/hubserver.py.
"""

from __future__ import annotations

import base64
import json
import shlex
import shutil
from pathlib import Path

import pytest
from huggingface_hub import HfApi

from registry.artifacts.synthetic import TinySpec, make_base_checkpoint, make_state_file
from registry.core.models import Base, Index
from registry.core.repo import Repo, render_index
from registry.gate.receipt import Receipt, receipt_path
from registry.gate.seal import sealed_here, signed
from registry.ops.add import AddRequest, add_weight
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.init import init_registry

from .conftest import sha256_of
from .keys import write_key
from .test_ops_artifacts import train_json
from .test_publish import Cli

pytest_plugins = ["tests.hubserver"]

GATE_SPEC = TinySpec(n_layer=2, n_embd=64, vocab_size=65536, seed=5)  # the gate tokenizes real prompts
REPO = "rwkv/gated-elsewhere"
BASE_SOURCE = "upstream/rwkv7-tiny"


def _publish(root: Path, *extra: object) -> list[object]:
    return ["publish", "--repo-id", REPO, "-C", root, "--allow-cpu-gate", *extra]


def errors(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    """The gate machine's inputs: a registry with one State entry (not gated), its base, two key pairs."""
    tmp = tmp_path_factory.mktemp("elsewhere")
    root = init_registry(tmp / "reg", title="Gated elsewhere").root
    base = make_base_checkpoint(tmp / "rwkv7-elsewhere-20260101.pth", GATE_SPEC)
    add_base(root, BaseRequest(path=base, filename=base.name))
    add_weight(
        root,
        AddRequest(
            make_state_file(tmp / "s.pth", GATE_SPEC, seed=2),
            base.name[:-4],
            "state",
            "v1.41",
            train_json(tmp / "t.json"),
        ),
    )
    keys = {name: write_key(tmp, name) for name in ("gate", "other")}
    return root, base, keys


@pytest.fixture(scope="module")
def gated(machine, tmp_path_factory):
    """The registry gated on the gate machine (its own receipt key) with --sign-key, then cloned as
    git carries it: the tree and the force-added .registry/gates/, nothing else of .registry/."""
    root, base, keys = machine
    tmp = tmp_path_factory.mktemp("gated")
    gate_home = tmp / "gate-machine-config"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CONFIG_HOME", str(gate_home))
        gate_side = Path(shutil.copytree(root, tmp / "gate-side"))
        Cli()("smoke", "-C", gate_side, "--device", "cpu", "--base-file", base, "--sign-key", keys["gate"][0])
    return clone(gate_side, tmp / "ci-side")


def clone(root: Path, target: Path) -> Path:
    shutil.copytree(root, target, ignore=lambda folder, names: [".registry"] if Path(folder) == root else [])
    shutil.copytree(root / ".registry" / "gates", target / ".registry" / "gates")
    return target


def the_receipt(root: Path) -> Path:
    entry = Repo(root).load_index().entries[0]
    return receipt_path(Repo(root).gates_dir, entry.sha256)


@pytest.fixture
def ci(gated, tmp_path) -> Path:
    """A fresh CI checkout; this test's own installation (another receipt key) publishes from it."""
    return Path(shutil.copytree(gated, tmp_path / "ci"))


def test_a_signed_receipt_counts_only_with_the_trusted_key(hub_server, ci, machine):
    _, _, keys = machine
    cli = Cli()
    receipt = Receipt.model_validate_json(the_receipt(ci).read_bytes())
    assert receipt.signature is not None and not sealed_here(receipt)  # another installation's seal
    untrusted = cli.json(*_publish(ci, "--dry-run", "--json"), code=1)["blockers"]
    assert [b["code"] for b in untrusted] == ["gate.untrusted-key"] and "--trust-gate-key" in untrusted[0]["fix"]
    other = cli.json(*_publish(ci, "--dry-run", "--json", "--trust-gate-key", keys["other"][1]), code=1)["blockers"]
    assert [b["code"] for b in other] == ["gate.untrusted-key"]
    cli(
        *_publish(ci, "--trust-gate-key", keys["other"][1], "--trust-gate-key", keys["gate"][1])
    )  # any one of several keys
    assert set(hub_server.files(REPO)) >= {Repo(ci).load_index().entries[0].path, "SHA256SUMS", "index.json"}
    assert not any(".registry" in path for path in hub_server.files(REPO))


def _forged(sig: str) -> str:
    """The signature with one bit of its r value flipped: still well-formed DER, never the original.
    (Replacing its first characters is no forgery when the signature already starts with them.)"""
    der = bytearray(base64.b64decode(sig))
    der[8] ^= 0x01
    return base64.b64encode(bytes(der)).decode()


def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2))


CASES = {
    # the receipt's own facts re-bound, its signature kept
    "re-bound to another file": (
        lambda ci, p: _edit(p, lambda d: d.update(file_sha256="cd" * 32)),
        "gate.bad-signature",
    ),
    "re-bound to another base": (
        lambda ci, p: _edit(p, lambda d: d.update(base_sha256="ef" * 32)),
        "gate.bad-signature",
    ),
    "re-bound to another kernel": (
        lambda ci, p: _edit(p, lambda d: d["environment"].update(kernel_source_hash="01" * 32)),
        "gate.bad-signature",
    ),
    "a CPU run made to say CUDA": (
        lambda ci, p: _edit(p, lambda d: d["environment"].update(device="cuda")),
        "gate.bad-signature",
    ),
    "a forged signature": (
        lambda ci, p: _edit(p, lambda d: d["signature"].update(sig=_forged(d["signature"]["sig"]))),
        "gate.bad-signature",
    ),
    "not base64": (
        lambda ci, p: _edit(p, lambda d: d["signature"].update(sig="not a signature!")),
        "gate.bad-signature",
    ),
    "unsigned": (lambda ci, p: _edit(p, lambda d: d.update(signature=None)), "gate.not-ours"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_forged_or_re_bound_receipt_is_refused_in_one_line(hub_server, ci, machine, case):
    _, _, keys = machine
    tamper, code = CASES[case]
    tamper(ci, the_receipt(ci))
    cli = Cli()
    blockers = cli.json(*_publish(ci, "--dry-run", "--json", "--trust-gate-key", keys["gate"][1]), code=1)["blockers"]
    assert [b["code"] for b in blockers] == [code], blockers
    refused = cli(*_publish(ci, "--trust-gate-key", keys["gate"][1]), code=3)
    assert len(errors(refused.output)) == 1 and hub_server.commits_made == 0


def test_a_receipt_signed_for_other_bytes_does_not_vouch_for_these(hub_server, ci, machine, tmp_path):
    """A genuine signed receipt, copied to the name of other bytes: signed, but not for them."""
    _, _, keys = machine
    path = the_receipt(ci)
    receipt = Receipt.model_validate_json(path.read_bytes())
    forged_for = receipt.model_copy(update={"file_sha256": "ab" * 32, "signature": None})
    genuine = signed(forged_for, keys["gate"][0])  # the gate machine really signed a receipt of other bytes
    path.write_text(genuine.model_dump_json(indent=2))
    blockers = Cli().json(*_publish(ci, "--dry-run", "--json", "--trust-gate-key", keys["gate"][1]), code=1)["blockers"]
    assert [b["code"] for b in blockers] == ["gate.stale"] and "not these bytes" in blockers[0]["message"]
    on_other_base = signed(receipt.model_copy(update={"base_sha256": "ef" * 32, "signature": None}), keys["gate"][0])
    path.write_text(on_other_base.model_dump_json(indent=2))
    blockers = Cli().json(*_publish(ci, "--dry-run", "--json", "--trust-gate-key", keys["gate"][1]), code=1)["blockers"]
    assert [b["code"] for b in blockers] == ["gate.stale"] and "base" in blockers[0]["message"]


def test_the_local_seal_still_counts_without_a_key(hub_server, machine, tmp_path):
    """A receipt this installation's gate wrote (sealed, unsigned) counts as before."""
    root, base, keys = machine
    here = Path(shutil.copytree(root, tmp_path / "here"))
    Cli()("smoke", "-C", here, "--device", "cpu", "--base-file", base)
    receipt = Receipt.model_validate_json(the_receipt(here).read_bytes())
    assert receipt.signature is None and sealed_here(receipt)
    assert Cli().json(*_publish(here, "--dry-run", "--json"))["blockers"] == []
    # signing does not break the seal: it covers every field but the seal and the signature
    assert sealed_here(signed(receipt, keys["gate"][0]))


def test_a_bad_trust_key_is_refused_in_one_line(ci, machine, tmp_path):
    _, _, keys = machine
    not_a_key = tmp_path / "gate.pub"
    not_a_key.write_text("ssh-ed25519 AAAA nothing\n")
    for key, says in [(not_a_key, "not a PEM public key"), (keys["gate"][0], "not a PEM public key")]:
        refused = Cli()(*_publish(ci, "--dry-run", "--assume-empty-remote", "--trust-gate-key", key), code=3)
        assert len(errors(refused.output)) == 1 and says in refused.output


def test_a_bad_sign_key_is_refused_before_the_gate_runs(machine, tmp_path):
    root, base, keys = machine
    here = Path(shutil.copytree(root, tmp_path / "here"))
    refused = Cli()("smoke", "-C", here, "--device", "cpu", "--base-file", base, "--sign-key", keys["gate"][1], code=3)
    assert len(errors(refused.output)) == 1 and "PEM private key" in refused.output
    assert not Repo(here).gates_dir.exists() or not list(Repo(here).gates_dir.iterdir())


# -- --fetch-base: the gate machine downloads the base the catalog names, sha256 checked ---------------------------


@pytest.fixture
def catalog(machine, tmp_path, monkeypatch) -> Path:
    """A known-bases catalog naming the test base and where it lives on the (loopback) Hub."""
    _, base, _ = machine
    path = tmp_path / "catalog.json"
    known = Base(
        name=base.name[:-4],
        filename=base.name,
        source=BASE_SOURCE,
        sha256=sha256_of(base),
        vocab="rwkv_vocab_v20230424.txt",
    )
    path.write_bytes(render_index(Index(bases=[known])))
    monkeypatch.setattr("registry.index.catalog.catalog_path", lambda: path)
    return path


def _upload_base(data: bytes, name: str) -> None:
    api = HfApi()
    api.create_repo(BASE_SOURCE, exist_ok=True)
    api.upload_file(path_or_fileobj=data, path_in_repo=name, repo_id=BASE_SOURCE)


def test_fetch_base_downloads_the_catalog_source_and_the_receipt_publishes_elsewhere(
    hub_server, machine, catalog, tmp_path, monkeypatch
):
    root, base, keys = machine
    _upload_base(base.read_bytes(), base.name)
    gate_side = Path(shutil.copytree(root, tmp_path / "gate-side"))
    with monkeypatch.context() as mp:
        mp.setenv("XDG_CONFIG_HOME", str(tmp_path / "gate-machine-config"))
        done = Cli().json(
            "smoke",
            "-C",
            gate_side,
            "--device",
            "cpu",
            "--fetch-base",
            tmp_path / "bases",
            "--sign-key",
            keys["gate"][0],
            "--json",
        )
    assert [r["passed"] for r in done] == [True] and done[0]["base_sha256"] == sha256_of(base)
    assert sha256_of(tmp_path / "bases" / base.name) == sha256_of(base)  # fetched through the Hub client
    ci = clone(gate_side, tmp_path / "ci")
    Cli()(*_publish(ci, "--trust-gate-key", keys["gate"][1]))
    assert Repo(ci).load_index().entries[0].path in hub_server.files(REPO)


def test_fetch_base_refuses_bytes_the_catalog_does_not_name(hub_server, machine, catalog, tmp_path):
    root, base, _ = machine
    data = base.read_bytes()
    _upload_base(
        data[:100] + bytes([data[100] ^ 1]) + data[101:], base.name
    )  # the Hub serves other bytes under the name
    here = Path(shutil.copytree(root, tmp_path / "here"))
    refused = Cli()("smoke", "-C", here, "--device", "cpu", "--fetch-base", tmp_path / "bases", code=3)
    assert (
        len(errors(refused.output)) == 1
        and "the catalog says" in refused.output
        and not (tmp_path / "bases" / base.name).exists()
    )
    assert not Repo(here).gates_dir.exists() or not list(Repo(here).gates_dir.iterdir())


def test_fetch_base_refuses_a_base_the_catalog_does_not_know(hub_server, machine, tmp_path, monkeypatch):
    root, _, _ = machine
    empty = tmp_path / "catalog.json"
    empty.write_bytes(render_index(Index()))
    monkeypatch.setattr("registry.index.catalog.catalog_path", lambda: empty)
    refused = Cli()(
        "smoke",
        "-C",
        Path(shutil.copytree(root, tmp_path / "here")),
        "--device",
        "cpu",
        "--fetch-base",
        tmp_path / "bases",
        code=3,
    )
    assert (
        len(errors(refused.output)) == 1
        and "not in the known-bases catalog" in refused.output
        and "--base-file" in refused.output
    )


def test_the_ci_recipe_names_only_options_that_exist():
    """docs/ci.md's "Gate on a GPU machine, publish from CI": every `registry` line parses (an unknown
    option fails before the trailing --help is reached), and the steps are the ones tested above."""
    text = (Path(__file__).resolve().parent.parent / "docs" / "ci.md").read_text(encoding="utf-8")
    section = text.split("## Gate on a GPU machine, publish from CI", 1)[1].split("\n## ", 1)[0]
    commands = [
        shlex.split(line.split("run: ", 1)[-1])[1:]
        for line in section.splitlines()
        if line.strip().removeprefix("run: ").startswith("registry ")
    ]
    assert [c[0] for c in commands] == ["smoke", "publish"]
    assert {"--fetch-base", "--sign-key"} <= set(commands[0]) and "--trust-gate-key" in commands[1]
    for command in commands:
        Cli()(*command, "--help")


def test_a_gguf_gated_with_sign_key_on_the_gate_machine_is_published_from_ci(hub_server, machine, tmp_path):
    """export-gguf's receipts travel like smoke's: signed with --sign-key, trusted with --trust-gate-key."""
    pytest.importorskip("gguf")
    pytest.importorskip("llama_cpp")
    root, base, keys = machine
    gate_side = Path(shutil.copytree(root, tmp_path / "gate-side"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CONFIG_HOME", str(tmp_path / "gate-machine-config"))
        Cli()("smoke", "-C", gate_side, "--device", "cpu", "--base-file", base, "--sign-key", keys["gate"][0])
        Cli()(
            "export-gguf",
            "--base",
            base.name[:-4],
            "--base-file",
            base,
            "--type",
            "q8_0",
            "-C",
            gate_side,
            "--sign-key",
            keys["gate"][0],
        )
    ci = clone(gate_side, tmp_path / "ci")
    cli = Cli()
    blockers = cli.json(*_publish(ci, "--dry-run", "--json"), code=1)["blockers"]
    assert {b["code"] for b in blockers} == {"gate.untrusted-key"} and any(
        b["file"].endswith(".gguf") for b in blockers
    )
    cli(*_publish(ci, "--trust-gate-key", keys["gate"][1]))
    assert any(path.endswith("-Q8_0.gguf") for path in hub_server.files(REPO))
