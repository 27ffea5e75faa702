"""``registry sign --key KEY.pem``: sign the release, writing ``model.sig`` (see :mod:`registry.artifacts.signature`).

The signer's fingerprint goes into index.json (and so the card and SHA256SUMS) and the signature
covers those new bytes: index.json, the card, SHA256SUMS and ``model.sig`` are written in one
journaled transaction, so a crash leaves the old signature with the old files or the new one with
the new.  The sha256s come from SHA256SUMS as the stat cache vouches for them: no weight is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..artifacts.signature import fingerprint, public_pem, sign_files, signed_files
from ..core.atomic import transaction
from ..core.models import Signer
from ..core.names import INDEX_NAME, SIGNATURE_NAME
from ..core.repo import Repo, render_index
from ..core.sums import render_sums
from ..index.derived import stage_derived
from ..index.rules import index_to_change


@dataclass(frozen=True)
class Signed:
    path: Path
    fingerprint: str
    files: int

    def as_dict(self) -> dict:
        return {"ok": True, "signature": str(self.path), "fingerprint": self.fingerprint, "files": self.files}


def sign(root: Path | str, key: Path) -> Signed:
    """Record the key's fingerprint as the signer and write ``model.sig`` over every published file."""
    repo = Repo.open(root)
    signer = Signer(fingerprint=fingerprint(public_pem(key)))
    with transaction(repo.root) as txn:
        index = index_to_change(repo)
        index.registry.signer = signer
        txn.write(INDEX_NAME, render_index(index))
        digests = stage_derived(repo, txn, index)  # SHA256SUMS as staged: its own sha256 is signed too
        files = signed_files(digests, render_sums(digests))
        txn.write(SIGNATURE_NAME, sign_files(files, key, repo.root.name))
    return Signed(repo.root / SIGNATURE_NAME, signer.fingerprint, len(files))
