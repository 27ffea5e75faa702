"""Signed releases (issue 31): ``registry sign`` writes model.sig that stock ``model_signing verify key``
accepts; any changed, added or re-indexed file fails it, and fails ``registry pull --require-signature``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from huggingface_hub import HfApi

from registry.artifacts.signature import fingerprint
from registry.artifacts.synthetic import TinySpec, make_base_checkpoint
from registry.core.hashing import engine
from registry.core.names import SIGNATURE_NAME
from registry.core.repo import Repo

from .conftest import snapshot
from .keys import write_key
from .test_crash import STRACE, _kill_at, an_hour_old, kill_points, traced_renames
from .test_publish import REPO, add_state, publish_args, weight_path

pytest_plugins = ["tests.hubserver", "tests.publish_fixtures"]  # the Hub fixtures; publish's registry and cli fixtures

MODEL_SIGNING = shutil.which("model_signing") or str(Path(sys.executable).parent / "model_signing")


@pytest.fixture
def keys(tmp_path) -> tuple[Path, Path]:
    return write_key(tmp_path, "signer")


def stock_verify(root: Path, public: Path) -> subprocess.CompletedProcess[str]:
    """The stock CLI of the model_signing package, as the card tells users to run it."""
    command = [
        MODEL_SIGNING,
        "verify",
        "key",
        str(root),
        "--signature",
        str(root / SIGNATURE_NAME),
        "--public_key",
        str(public),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def flip_last_byte(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))


def test_stock_model_signing_verify_accepts_registry_sign(registry, keys, cli):
    private, public = keys
    signed = cli.json("sign", "--key", private, "-C", registry, "--json")

    assert signed["fingerprint"] == fingerprint(public.read_bytes())
    index = json.loads((registry / "index.json").read_text())
    assert index["registry"]["signer"] == {"method": "key", "fingerprint": signed["fingerprint"]}
    card = (registry / "README.md").read_text(encoding="utf-8")
    assert (
        signed["fingerprint"] in card
        and "model_signing verify key . --signature model.sig --public_key signer.pub" in card
    )
    cli("validate", "-C", registry)  # model.sig is no registry file that SHA256SUMS or the layout must know
    result = stock_verify(registry, public)
    assert result.returncode == 0 and "Verification succeeded" in result.stdout, result.stderr
    assert stock_verify(registry, write_key(registry.parent, "other")[1]).returncode == 1  # another key


def test_sign_reads_no_weight(registry, keys, cli, monkeypatch):
    old = time.time() - 60  # older than the racy window, so that the stat cache vouches for every file
    for path in registry.rglob("*"):
        os.utime(path, (old, old))
    cli("sums", "-C", registry)
    read: list = []
    monkeypatch.setattr(engine, "hash_file", lambda path, progress=None: read.append(path))
    cli("sign", "--key", keys[0], "-C", registry)
    assert read == [] and stock_verify(registry, keys[1]).returncode == 0


@pytest.mark.parametrize("change", ["weight", "index", "added", "sums"])
def test_a_changed_byte_an_added_file_or_a_changed_index_fails_stock_verify(registry, keys, cli, change):
    cli("sign", "--key", keys[0], "-C", registry)
    if change == "weight":
        flip_last_byte(registry / weight_path(registry))
    elif change == "index":
        index = registry / "index.json"
        index.write_text(index.read_text().replace('"title": "Publish test"', '"title": "Publish test!"'))
    elif change == "added":
        (registry / weight_path(registry)).with_name("unsigned.bin").write_bytes(b"not signed")
    else:
        (registry / "SHA256SUMS").write_bytes((registry / "SHA256SUMS").read_bytes() + b"\n")

    result = stock_verify(registry, keys[1])

    assert result.returncode == 1 and "Verification failed" in result.stderr


def test_sign_refuses_a_registry_whose_files_changed_and_changes_nothing(registry, keys, cli):
    flip_last_byte(registry / weight_path(registry))
    before = snapshot(registry)
    result = cli("sign", "--key", keys[0], "-C", registry, code=3)
    assert weight_path(registry) in result.output and snapshot(registry) == before


def test_sign_refuses_a_key_that_is_not_an_ec_private_key(registry, tmp_path, cli):
    bad = tmp_path / "key.pem"
    bad.write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    before = snapshot(registry)
    assert "error: " in cli("sign", "--key", bad, "-C", registry, code=3).output and snapshot(registry) == before


def sign_for(registry: Path, key: Path, cli) -> None:
    cli("set", "repo-id", REPO, "-C", registry)  # recorded before signing: publish must not change index.json after
    cli("sign", "--key", key, "-C", registry)


def test_publish_requires_a_valid_signature_and_sends_it_in_the_same_commit(hub_server, registry, keys, tmp_path, cli):
    private, public = keys
    assert "--public-key" in cli(*publish_args(registry, "--require-signature"), code=3).output
    refused = cli.json(*publish_args(registry, "--require-signature", "--public-key", public, "--json"), code=3)
    assert [p["code"] for p in refused["problems"]] == ["sign.missing"] and hub_server.commits_made == 0

    sign_for(registry, private, cli)
    cli(*publish_args(registry, "--require-signature", "--public-key", public))

    assert (
        hub_server.commits_made == 1
        and hub_server.files(REPO)[SIGNATURE_NAME] == (registry / SIGNATURE_NAME).read_bytes()
    )
    report = cli.json(
        "verify-remote", "--repo-id", REPO, "-C", registry, "--require-signature", "--public-key", public, "--json"
    )
    assert report["ok"]
    cli("pull", "--repo-id", REPO, tmp_path / "pulled", "--require-signature", "--public-key", public)
    assert stock_verify(tmp_path / "pulled", public).returncode == 0  # a pulled registry (with .registry/) verifies too


def test_publish_refuses_a_stale_signature(hub_server, registry, keys, tmp_path, cli):
    sign_for(registry, keys[0], cli)
    cli("set", "title", "Retitled after signing", "-C", registry)

    result = cli.json(*publish_args(registry, "--json"), code=3)

    assert {(p["code"], p["file"]) for p in result["problems"]} >= {
        ("sign.mismatch", "index.json"),
        ("sign.mismatch", "SHA256SUMS"),
    }
    assert hub_server.commits_made == 0


@pytest.mark.parametrize(
    ("change", "finding"), [("weight", "sign.mismatch"), ("index", "sign.mismatch"), ("added", "sign.unsigned-file")]
)
def test_pull_require_signature_refuses_a_release_changed_after_signing(
    hub_server, registry, keys, tmp_path, cli, change, finding
):
    """Someone with write access changes the release and keeps SHA256SUMS true: only the signature tells."""
    private, public = keys
    sign_for(registry, private, cli)
    cli(*publish_args(registry, "--require-signature", "--public-key", public))
    changed = weight = weight_path(registry)
    if change == "weight":
        flip_last_byte(registry / weight)
        assert (
            "stale signature" in cli("validate", "-C", registry, "--allow-rewrite", "swapped", code=1).output
        )  # validate reads model.sig
    elif change == "index":
        cli("set", "title", "Changed after signing", "-C", registry)
        changed = "index.json"
    else:
        changed = add_state(registry, tmp_path, "s1374", seed=4).path  # a well-formed entry, added without signing
    for path in sorted({"index.json", "README.md", "SHA256SUMS", changed}):
        HfApi().upload_file(path_or_fileobj=(registry / path).read_bytes(), path_in_repo=path, repo_id=REPO)

    for flags in ([], ["--require-signature", "--public-key", public]):  # a present model.sig is always checked
        target = tmp_path / f"pulled{len(flags)}"
        result = cli.json("pull", "--repo-id", REPO, target, *flags, "--json", code=3)
        assert (finding, changed) in {(p["code"], p["file"]) for p in result["problems"]} and not target.exists()
    verify = cli.json(
        "verify-remote",
        "--repo-id",
        REPO,
        "-C",
        registry,
        "--require-signature",
        "--public-key",
        public,
        "--json",
        code=1,
    )
    assert (finding, changed) in {(p["code"], p["file"]) for p in verify["problems"]}


def test_a_signature_by_another_key_is_refused(hub_server, registry, keys, tmp_path, cli):
    private, _ = keys
    _, other_public = write_key(tmp_path, "other")
    sign_for(registry, private, cli)
    cli(*publish_args(registry))

    result = cli.json(
        "verify-remote",
        "--repo-id",
        REPO,
        "-C",
        registry,
        "--require-signature",
        "--public-key",
        other_public,
        "--json",
        code=1,
    )

    assert [p["code"] for p in result["problems"]] == ["sign.invalid"]
    assert Repo(registry).load_index().registry.signer is not None


def test_a_kill_at_every_rename_of_sign_leaves_the_old_signature_or_the_new(registry, keys, tmp_path, cli):
    """SIGKILL at the renames of `registry sign` that leave distinct states (tests/test_crash.py's harness and
    its kill_points): the next command finds the old files with the old signature, or the new files with the
    new one (ECDSA signs with a random nonce, so the new signature is checked by verifying it, not by its bytes)."""

    if STRACE is None:
        pytest.skip("strace is not installed")
    new_private, new_public = write_key(tmp_path, "new")
    cli("sign", "--key", keys[0], "-C", registry)
    an_hour_old(registry)
    before = snapshot(registry)

    def outcome(reg: Path) -> str:
        cli("validate", "-C", reg)  # rolls an interrupted commit forward, and finds the registry consistent
        now = snapshot(reg)
        if now == before:
            assert stock_verify(reg, keys[1]).returncode == 0
            return "old"
        assert {p for p in now if now[p] != before.get(p)} == {"index.json", "README.md", "SHA256SUMS", SIGNATURE_NAME}
        assert stock_verify(reg, new_public).returncode == 0
        return "new"

    done = Path(shutil.copytree(registry, tmp_path / "done", symlinks=True))
    renames = traced_renames(["sign", "--key", new_private, "-C", done], tmp_path / "renames.log", done)
    outcomes = [outcome(done)]
    for point in kill_points(renames):
        reg = Path(shutil.copytree(registry, tmp_path / f"kill-{point.syscall}-{point.nth}", symlinks=True))
        _kill_at(["sign", "--key", new_private, "-C", reg], reg, point)
        outcomes.append(outcome(reg))
    assert outcomes[0] == "new" and "old" in outcomes[1:] and "new" in outcomes[1:], outcomes


def test_publish_refuses_to_record_a_repo_id_that_would_stale_the_signature(hub_server, registry, keys, cli):
    cli("sign", "--key", keys[0], "-C", registry)  # index.json names no repo yet: publish would record it
    before = snapshot(registry)

    result = cli.json(*publish_args(registry, "--json"), code=3)

    assert [p["code"] for p in result["problems"]] == [
        "sign.repo-id-unrecorded"
    ] and f"registry set repo-id {REPO}" in result["problems"][0]["fix"]
    assert snapshot(registry) == before and hub_server.commits_made == 0


def test_publish_refuses_to_record_an_access_that_would_stale_the_signature_and_takes_it_once_recorded(
    hub_server, registry, keys, cli
):
    cli("set", "repo-id", REPO, "-C", registry)
    cli("sign", "--key", keys[0], "-C", registry)
    before = snapshot(registry)

    result = cli.json(*publish_args(registry, "--private", "--json"), code=3)

    assert [p["code"] for p in result["problems"]] == [
        "sign.access-unrecorded"
    ] and "registry set access private" in result["problems"][0]["fix"]
    assert snapshot(registry) == before and hub_server.commits_made == 0
    # The fix, as written: record it, sign again, publish.
    cli("set", "access", "private", "-C", registry)
    cli("sign", "--key", keys[0], "-C", registry)
    assert cli.json(*publish_args(registry, "--private", "--json"))["access"] == "private"

    assert HfApi().model_info(REPO).private is True


# -- validate reads model.sig (issue 38 item 3), the light install included; writes after signing say so (issue 42) --


def without_model_signing(monkeypatch) -> None:
    """The light install: model_signing cannot be imported (cryptography is torch-free and stays)."""
    for name in [m for m in sys.modules if m == "model_signing" or m.startswith("model_signing.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "model_signing", None)


def test_validate_checks_a_good_signature_for_consistency_in_the_light_install_and_says_so(
    registry, keys, cli, monkeypatch
):
    cli("sign", "--key", keys[0], "-C", registry)
    without_model_signing(monkeypatch)
    result = cli.json("validate", "-C", registry, "--json")
    assert result["ok"] and result["signature"] == {"file": SIGNATURE_NAME, "checked": "consistency"}
    text = cli("validate", "-C", registry).stderr
    assert "model.sig: consistency checked" in text and "not authorship" in text and "--public-key" in text
    refused = cli.json(
        "validate", "-C", registry, "--public-key", keys[1], "--json", code=3
    )  # the crypto check needs the extra
    assert refused["problems"][0]["code"] == "sign.unavailable"


def test_validate_public_key_checks_authorship(registry, keys, tmp_path, cli):
    cli("sign", "--key", keys[0], "-C", registry)
    assert (
        cli.json("validate", "-C", registry, "--public-key", keys[1], "--json")["signature"]["checked"] == "public-key"
    )
    assert "verified with the public key" in cli("validate", "-C", registry, "--public-key", keys[1]).stderr
    other = write_key(tmp_path, "other")[1]
    result = cli.json("validate", "-C", registry, "--public-key", other, "--json", code=1)
    assert [p["code"] for p in result["problems"]] == ["sign.invalid"]


def _foreign(registry: Path, tmp_path: Path, cli, _template: Path) -> None:
    """model.sig of another key over these files, index.json still recording the first signer."""
    other = shutil.copytree(registry, tmp_path / "other")
    cli("sign", "--key", write_key(tmp_path, "foreign")[0], "-C", other)
    (registry / SIGNATURE_NAME).write_bytes((other / SIGNATURE_NAME).read_bytes())


def _symlinked(registry: Path, tmp_path: Path, cli, _template: Path) -> None:
    (tmp_path / "elsewhere.sig").write_bytes((registry / SIGNATURE_NAME).read_bytes())
    (registry / SIGNATURE_NAME).unlink()
    (registry / SIGNATURE_NAME).symlink_to(tmp_path / "elsewhere.sig")


BAD_SIGNATURES = {
    "garbage": (
        lambda reg, tmp, cli, _template: (reg / SIGNATURE_NAME).write_bytes(os.urandom(600)),
        {("sign.unreadable", SIGNATURE_NAME)},
    ),
    "truncated": (
        lambda reg, tmp, cli, _template: (reg / SIGNATURE_NAME).write_bytes((reg / SIGNATURE_NAME).read_bytes()[:-40]),
        {("sign.unreadable", SIGNATURE_NAME)},
    ),
    "empty": (
        lambda reg, tmp, cli, _template: (reg / SIGNATURE_NAME).write_bytes(b""),
        {("sign.unreadable", SIGNATURE_NAME)},
    ),
    "foreign-key": (
        _foreign,
        {
            ("sign.other-signer", SIGNATURE_NAME),
            ("sign.mismatch", "index.json"),
            ("sign.mismatch", "README.md"),
            ("sign.mismatch", "SHA256SUMS"),
        },
    ),
    "symlinked": (_symlinked, {("sign.not-a-file", SIGNATURE_NAME)}),
    "missing": (lambda reg, tmp, cli, _template: (reg / SIGNATURE_NAME).unlink(), {("sign.missing", SIGNATURE_NAME)}),
    "file-added": (
        lambda reg, tmp, cli, _template: (
            (reg / "docs").mkdir(),
            (reg / "docs" / "notes.md").write_text("added\n"),
            cli("sums", "-C", reg),
        ),
        {("sign.unsigned-file", "docs/notes.md"), ("sign.mismatch", "SHA256SUMS")},
    ),
}


@pytest.mark.parametrize("state", sorted(BAD_SIGNATURES))
def test_validate_refuses_a_signature_in_every_bad_state_light_install(
    registry, template, keys, tmp_path, cli, monkeypatch, state
):
    cli("sign", "--key", keys[0], "-C", registry)
    spoil, expected = BAD_SIGNATURES[state]
    spoil(registry, tmp_path, cli, template)
    without_model_signing(monkeypatch)
    result = cli.json("validate", "-C", registry, "--json", code=1)
    found = {(p["code"], p["file"]) for p in result["problems"]}
    assert found == expected, result
    stale = [p for p in result["problems"] if p["code"] in ("sign.mismatch", "sign.unsigned-file", "sign.missing-file")]
    assert all(p["message"].startswith("stale signature") and p["fix"].startswith("registry sign") for p in stale)
    line = cli("validate", "-C", registry, code=1).stdout
    assert all(line.count(f"{code} ") >= 1 for code, _ in found)


def test_an_export_written_after_signing_says_so_and_validate_calls_the_signature_stale(
    empty_registry, keys, tmp_path, cli, monkeypatch
):
    world = make_base_checkpoint(
        tmp_path / "rwkv7-tiny-w-20260101.pth", TinySpec(n_layer=2, n_embd=64, vocab_size=65536)
    )
    cli("add-base", world, "--vocab", "rwkv_vocab_v20230424.txt", "-C", empty_registry)
    cli("sign", "--key", keys[0], "-C", empty_registry)
    exported = cli("export-hf", "--base", world.stem, "--base-file", world, "-C", empty_registry)
    assert "warning: model.sig: stale signature" in exported.stderr and "fix: registry sign --key" in exported.stderr
    without_model_signing(monkeypatch)
    result = cli.json("validate", "-C", empty_registry, "--json", code=1)
    found = {(p["code"], p["file"]) for p in result["problems"]}
    assert {("sign.mismatch", "SHA256SUMS"), ("sign.mismatch", "index.json")} <= found and any(
        c == "sign.unsigned-file" and f.startswith(f"{world.stem}/hf/") for c, f in found
    ), found
    assert all(
        p["message"].startswith("stale signature") and p["fix"].startswith("registry sign") for p in result["problems"]
    )


def test_a_write_after_signing_says_the_signature_is_stale_and_signing_does_not(registry, keys, cli):
    signed = cli("sign", "--key", keys[0], "-C", registry)
    assert "stale" not in signed.stderr
    assert "stale" not in cli("card", "-C", registry).stderr  # nothing changed: still valid
    result = cli.json("set", "title", "Retitled after signing", "-C", registry, "--json")
    assert [w["code"] for w in result["warnings"]] == ["sign.stale"] and result["warnings"][0]["fix"].startswith(
        "registry sign --key"
    )
    text = cli("set", "title", "Retitled again", "-C", registry).stderr
    assert "warning: model.sig: stale signature" in text and "fix: registry sign --key KEY.pem" in text
    cli("sign", "--key", keys[0], "-C", registry)
    cli("validate", "-C", registry)


def test_publish_refuses_a_deleted_signature_of_a_recorded_signer(hub_server, registry, keys, cli):
    sign_for(registry, keys[0], cli)
    (registry / SIGNATURE_NAME).unlink()
    before = snapshot(registry)
    result = cli.json(*publish_args(registry, "--json"), code=3)
    assert ("sign.missing", SIGNATURE_NAME) in {(p["code"], p["file"]) for p in result["problems"]}
    assert hub_server.commits_made == 0 and snapshot(registry) == before
