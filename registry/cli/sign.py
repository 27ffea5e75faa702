"""``registry sign``, and the options of publish, pull and verify-remote that check its signature."""

from __future__ import annotations

from pathlib import Path

import click

from .app import REGISTRY_OPT, main
from .output import json_option, output

EXISTING_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)
PUBLIC_KEY_OPT = click.option(
    "--public-key",
    type=EXISTING_FILE,
    metavar="SIGNER.pub",
    help="The signer's PEM public key: model.sig is checked against it.",
)
REQUIRE_SIGNATURE_OPT = click.option(
    "--require-signature",
    is_flag=True,
    help="Refuse unless model.sig signs exactly these files and verifies against --public-key.",
)


@main.command("sign")
@click.option(
    "--key", required=True, type=EXISTING_FILE, metavar="KEY.pem", help="The signer's unencrypted EC private key (PEM)."
)
@REGISTRY_OPT
@json_option
def sign_cmd(key: Path, registry: Path) -> None:
    """Sign every published file into model.sig (OpenSSF Model Signing), recording the signer in index.json.

    Stock `model_signing verify key` accepts it. It is made from SHA256SUMS without reading the weights, records the
    signer's key fingerprint in index.json and the verify command on the card. Needs the sign extra: pip install
    'rwkv-registry[sign]'.
    """
    from ..ops.sign import sign

    signed = sign(registry, key)
    output().result(
        signed.as_dict(), f"signed {signed.files} file(s) into {signed.path} (key sha256:{signed.fingerprint})"
    )
