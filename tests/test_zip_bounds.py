"""Inspection is bounded: zip members torch.save does not write (compressed, oversized, too
many) are refused before they are read, so a 14 MB zip bomb costs megabytes, not gigabytes."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from registry.artifacts.synthetic import make_state_file
from registry.artifacts.torch_zip import MAX_ZIP_SMALL_MEMBER_BYTES, MAX_ZIP_SMALL_MEMBERS

from .conftest import SMALL

# Inspect in a fresh process; print the refusal's code and the process's peak RSS.
PROBE = """
import sys
from registry.artifacts.inspect import inspect_weights
from registry.core.errors import RegistryError
try:
    inspect_weights(sys.argv[1])
    code = "accepted"
except RegistryError as err:
    code = err.code
peak = next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(code, int(peak) // 1024, "torch" in sys.modules)
"""


def inspect_in_child(path: Path) -> tuple[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, check=True, timeout=300
    )
    code, peak_mib, torch_imported = out.stdout.split()
    assert torch_imported == "False"  # inspection reads the zip and its pickle without torch
    return code, int(peak_mib)


def _append(path: Path, name: str, size: int, compression: int = zipfile.ZIP_STORED) -> None:
    """Append a member of ``size`` zero bytes, written in 1 MiB pieces."""
    folder = zipfile.ZipFile(path).namelist()[0].split("/")[0]
    info = zipfile.ZipInfo(f"{folder}/{name}")
    info.compress_type = compression
    with zipfile.ZipFile(path, "a") as archive, archive.open(info, "w", force_zip64=True) as member:
        chunk = bytes(1 << 20)
        for _ in range(size >> 20):
            member.write(chunk)


def test_a_deflated_zip_bomb_is_refused_before_it_is_read(tmp_path):
    bomb = make_state_file(tmp_path / "bomb.pth", SMALL)
    _append(bomb, "extra", 2 << 30, zipfile.ZIP_DEFLATED)  # 2 GiB of zeros in a few MB
    assert bomb.stat().st_size < 16 << 20
    code, peak_mib = inspect_in_child(bomb)
    assert code == "weights.zip-compressed" and peak_mib < 300, (code, peak_mib)


def test_an_oversized_stored_member_is_refused_by_its_declared_size(tmp_path):
    big = make_state_file(tmp_path / "big.pth", SMALL)
    _append(big, "extra", MAX_ZIP_SMALL_MEMBER_BYTES + (1 << 20))
    code, peak_mib = inspect_in_child(big)
    assert code == "weights.zip-member-size" and peak_mib < 300, (code, peak_mib)


def test_too_many_members_are_refused(tmp_path):
    many = make_state_file(tmp_path / "many.pth", SMALL)
    folder = zipfile.ZipFile(many).namelist()[0].split("/")[0]
    with zipfile.ZipFile(many, "a") as archive:
        for i in range(MAX_ZIP_SMALL_MEMBERS):
            archive.writestr(f"{folder}/extra-{i}", b"x")
    assert inspect_in_child(many)[0] == "weights.zip-members"


def test_what_torch_save_writes_is_still_accepted(tmp_path):
    state = make_state_file(tmp_path / "ok.pth", SMALL)
    code, peak_mib = inspect_in_child(state)
    assert code == "accepted" and peak_mib < 150, (
        peak_mib
    )  # no torch: the interpreter, pydantic and the file's small members
