"""Signed releases: ``model.sig``, an OpenSSF Model Signing bundle over every published file.

The format is model_signing 1.1's: a Sigstore bundle holding a DSSE envelope over an in-toto
statement whose predicate lists every file with its sha256 (serialization ``files``, hash type
``sha256``), which is exactly how stock ``model_signing verify`` re-hashes a folder.  So the
manifest is built from the hashes the registry already holds (SHA256SUMS, kept true by validate
and the stat cache) and no weight is read to sign.  The files covered are what publish uploads:
everything SHA256SUMS lists, plus SHA256SUMS itself; ``.gitattributes`` is one of the git files
model_signing ignores, and the manifest records the paths verification must ignore
(:data:`registry.core.names.UNSIGNED`).

The key hint in the bundle is the sha256 of the signer's PEM public key; index.json records it
(``registry.signer.fingerprint``) and the card shows it with the verify command.  Checking a
signature here (:func:`signature_problems`) never re-hashes files either: the signed manifest is
compared with sha256s that were checked against the bytes (validate, the Hub's tree).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import TYPE_CHECKING

from ..core.errors import Problem, RegistryError
from ..core.hashing.digest import sha256_hex
from ..core.models import Signer
from ..core.names import GIT_DIR, INDEX_NAME, SIGNATURE_NAME, SUMS_NAME, UNSIGNED
from ..core.repo import Repo

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey
    from model_signing.manifest import Manifest
INSTALL_FIX = "pip install 'rwkv-registry[sign]'"
RESIGN_FIX = "run `registry sign --key KEY.pem` on the registry that holds the right bytes, then publish"


def signed_files(sums: Mapping[str, str], sums_bytes: bytes) -> dict[str, str]:
    """Every file a signature covers, with its sha256: SHA256SUMS's list and SHA256SUMS itself,
    less git's files (``.gitattributes``), which stock verify skips by default: SHA256SUMS, which
    the signature covers, lists their sha256."""
    listed = {path: sha for path, sha in sums.items() if not path.split("/", 1)[0].startswith(GIT_DIR)}
    return {**listed, SUMS_NAME: sha256_hex(sums_bytes)}


def _model_signing() -> tuple[ModuleType, ModuleType, ModuleType, ModuleType, ModuleType]:
    try:
        from model_signing import manifest
        from model_signing._hashing import hashing
        from model_signing._signing import sign_ec_key, sign_sigstore_pb, signing
    except ImportError as err:
        raise RegistryError("sign.unavailable", SIGNATURE_NAME, f"model_signing is not installed ({err.name})", INSTALL_FIX) from err
    return manifest, hashing, sign_ec_key, sign_sigstore_pb, signing


def _manifest(files: Mapping[str, str], name: str) -> Manifest:
    manifest, hashing, *_ = _model_signing()
    serialization = manifest._FileSerialization("sha256", allow_symlinks=False, ignore_paths=[Path(p) for p in UNSIGNED])
    items = [manifest.FileManifestItem(path=PurePosixPath(path), digest=hashing.Digest("sha256", bytes.fromhex(sha))) for path, sha in sorted(files.items())]
    return manifest.Manifest(name, items, serialization)


def _private_key(key: Path) -> EllipticCurvePrivateKey:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    try:
        private = serialization.load_pem_private_key(key.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as err:
        raise RegistryError("sign.bad-key", key, f"not an unencrypted PEM private key ({err})", "pass an EC private key in PEM, e.g. from `openssl ecparam -name prime256v1 -genkey -noout -out key.pem`") from err
    if not isinstance(private, ec.EllipticCurvePrivateKey):
        raise RegistryError("sign.bad-key", key, "not an elliptic-curve key", "pass an EC private key (P-256, P-384 or P-521)")
    return private


def public_pem(key: Path) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return _private_key(key).public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def fingerprint(public_key_pem: bytes) -> str:
    """What model_signing puts in the bundle as the key hint: sha256 of the PEM public key."""
    return sha256_hex(public_key_pem)


def sign_files(files: Mapping[str, str], key: Path, name: str) -> bytes:
    """The bytes of ``model.sig`` over ``files`` (path -> sha256), signed with the EC key at ``key``."""
    _private_key(key)  # a clear refusal for a key model_signing would choke on
    *_, sign_ec_key, _sigstore_pb, signing = _model_signing()
    signature = sign_ec_key.Signer(key).sign(signing.Payload(_manifest(files, name)))
    return signature.bundle.to_json().encode()


def _signed_manifest(data: bytes, public_key: Path | None) -> tuple[dict[str, str], str]:
    """(path -> sha256 as signed, key hint); the signature is checked against ``public_key`` when given."""
    *_, sign_ec_key, sign_sigstore_pb, signing = _model_signing()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / SIGNATURE_NAME).write_bytes(data)
        signature = sign_sigstore_pb.Signature.read(Path(tmp) / SIGNATURE_NAME)
    hint = signature.bundle.verification_material.public_key.hint or ""
    if public_key is not None:
        manifest = sign_ec_key.Verifier(public_key).verify(signature)
    else:
        manifest = signing.dsse_payload_to_manifest(json.loads(signature.bundle.dsse_envelope.payload))  # unchecked: no key
    return {str(rd.identifier): rd.digest.digest_hex for rd in manifest.resource_descriptors()}, hint


def signature_problems(data: bytes, files: Mapping[str, str], signer_fingerprint: str | None, public_key: Path | None) -> list[Problem]:
    """Why ``model.sig`` (``data``) is not a signature of exactly ``files`` by the recorded signer
    (and, given ``public_key``, by that key); empty when it is."""
    try:
        signed, hint = _signed_manifest(data, public_key)
    except RegistryError:
        raise
    except Exception as err:  # model_signing and cryptography raise many types for a bad bundle or signature
        return [Problem("sign.invalid", SIGNATURE_NAME, f"the signature does not verify ({type(err).__name__}: {err})", RESIGN_FIX)]
    problems = []
    if signer_fingerprint is None:
        problems.append(Problem("sign.no-signer", INDEX_NAME, "model.sig is present but index.json records no signer", RESIGN_FIX))
    elif hint != signer_fingerprint:
        problems.append(Problem("sign.other-signer", SIGNATURE_NAME, f"signed by key {hint[:16]}…, but index.json records signer {signer_fingerprint[:16]}…", RESIGN_FIX))
    for path in sorted(set(files) | set(signed)):
        if path not in signed:
            problems.append(Problem("sign.unsigned-file", path, "not covered by model.sig", RESIGN_FIX))
        elif path not in files:
            problems.append(Problem("sign.missing-file", path, "signed in model.sig but not in the release", RESIGN_FIX))
        elif files[path] != signed[path]:
            problems.append(Problem("sign.mismatch", path, f"sha256 {files[path][:12]}… but model.sig signed {signed[path][:12]}…", RESIGN_FIX))
    return problems


@dataclass(frozen=True)
class SignaturePolicy:
    """How publish, pull and verify-remote treat ``model.sig``: a present one must sign exactly the
    files; ``required`` also wants it present and verified against ``public_key``."""

    public_key: Path | None = None
    required: bool = False

    def __post_init__(self) -> None:
        if self.required and self.public_key is None:  # index.json's fingerprint alone is the publisher's word
            raise RegistryError("args.missing", "--public-key", "--require-signature needs the signer's public key", "pass --public-key SIGNER.pub (from the publisher; its fingerprint is on the card)")

    def problems(self, data: bytes | None, sums: Mapping[str, str], sums_bytes: bytes, signer: Signer | None) -> list[Problem]:
        """Why ``data`` (the bytes of model.sig, None: there is none) does not pass for the release
        that ``sums`` (and ``sums_bytes``, SHA256SUMS itself) describes, signed by ``signer``."""
        if data is None:
            return [Problem("sign.missing", SIGNATURE_NAME, "no model.sig, and a signature is required", RESIGN_FIX)] if self.required else []
        return signature_problems(data, signed_files(sums, sums_bytes), signer.fingerprint if signer else None, self.public_key)

    def folder_problems(self, repo: Repo, sums: Mapping[str, str]) -> list[Problem]:
        """:meth:`problems` for a registry folder whose SHA256SUMS (``sums``) was checked against its bytes."""
        path = repo.root / SIGNATURE_NAME
        if not path.is_file():  # nothing to check against a signer (a dataset registry records none)
            return self.problems(None, sums, b"", None)
        return self.problems(repo.read_bytes(path), sums, repo.read_bytes(repo.sums_path), repo.load_index().registry.signer)


# -- Detached signatures over one document (gate receipts), with the same EC key ----------------------------------
#
# DSSE's pre-authentication encoding (the envelope model_signing's bundles use): the signature covers
# the payload's type and bytes together, so a receipt's signature never verifies as anything else.


def _pae(payload_type: str, payload: bytes) -> bytes:
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def sign_document(payload_type: str, payload: bytes, key: Path) -> tuple[str, str]:
    """(base64 ECDSA-SHA256 signature of ``payload`` as ``payload_type``, fingerprint of the public key)."""
    import base64

    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    private = _private_key(key)
    public = private.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    signature = private.sign(_pae(payload_type, payload), ec.ECDSA(hashes.SHA256()))
    return base64.b64encode(signature).decode("ascii"), fingerprint(public)


@dataclass(frozen=True)
class TrustedKey:
    """A public key a command was told to trust, by its file and fingerprint."""

    path: Path
    pem: bytes

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.pem)

    @classmethod
    def read(cls, path: Path, option: str) -> TrustedKey:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec

        fix = f"pass the PEM public key of the signer to {option} (e.g. `openssl ec -in KEY.pem -pubout -out KEY.pub`)"
        try:
            pem = path.read_bytes()
            public = serialization.load_pem_public_key(pem)
        except (OSError, ValueError, TypeError) as err:
            raise RegistryError("sign.bad-key", path, f"not a PEM public key ({err})", fix) from err
        if not isinstance(public, ec.EllipticCurvePublicKey):
            raise RegistryError("sign.bad-key", path, "not an elliptic-curve public key", fix)
        return cls(path, public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))

    def verifies(self, payload_type: str, payload: bytes, signature: str) -> bool:
        """Whether ``signature`` (base64) is this key's over ``payload`` as ``payload_type``."""
        import base64
        import binascii

        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec

        public = serialization.load_pem_public_key(self.pem)
        assert isinstance(public, ec.EllipticCurvePublicKey)
        try:
            public.verify(base64.b64decode(signature, validate=True), _pae(payload_type, payload), ec.ECDSA(hashes.SHA256()))
        except (InvalidSignature, binascii.Error, ValueError):
            return False
        return True
