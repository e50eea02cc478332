"""``key gen``, ``sign``, ``attest`` and ``digest``; ``verify`` is :mod:`modelseal.cli.verify_commands`."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelseal.cli import bundle_commands
from modelseal.cli.image_commands import IMAGE_HELP, attest_image, is_image
from modelseal.cli.progress import ProgressBar
from modelseal.cli.registry_access import registry_options
from modelseal.errors import InputError, KeyFileError, UsageError
from modelseal.files import read_limited, write_atomic
from modelseal.text import printable

if TYPE_CHECKING:
    from modelseal.attest.digests.digest import DirectoryDigest

# Commands import what they use when they run, so that `modelseal digest`
# starts without loading pydantic and the crypto bindings.

#: a predicate type to show in advice: a URI of the user's own naming what they attest
EXAMPLE_PREDICATE_TYPE = "https://example.com/model-review/v1"

__all__ = [
    "EXAMPLE_PREDICATE_TYPE",
    "add_attest",
    "add_digest",
    "add_key",
    "add_sign",
    "hash_path",
    "skipped_json",
]


def add_key(key: argparse.ArgumentParser) -> None:
    """``key``'s commands (``key gen``)."""
    key_commands = key.add_subparsers(dest="key_command", metavar="COMMAND", parser_class=type(key))
    gen = key_commands.add_parser("gen", help="generate a key pair (<prefix>.key, <prefix>.pub)")
    gen.add_argument("--out", required=True, metavar="PREFIX", help="write PREFIX.key and PREFIX.pub")
    gen.add_argument("--issuer", metavar="NAME", help="the issuer name reports signed with it carry")
    gen.add_argument(
        "--algorithm",
        default="ed25519",
        help="ed25519 (the default; socair's), ecdsa-p256, ecdsa-p384 or rsa-3072",
    )
    gen.add_argument(
        "--force",
        action="store_true",
        help="replace PREFIX.key and PREFIX.pub if they exist (the old key is lost)",
    )
    gen.set_defaults(handler=key_gen)


def add_sign(sign: argparse.ArgumentParser) -> None:
    """``sign``'s arguments."""
    sign.add_argument("model", nargs="?", metavar="MODEL", help="--format oms: the model directory or file")
    sign.add_argument(
        "--key",
        required=True,
        help="private key: a PKCS#8 PEM file (mode 0600) or a signer URI (file:, envvar:, hsm:, ...)",
    )
    sign.add_argument("--report", help="the report JSON (socair scan output)")
    bundle_commands.add_sign_flags(sign)
    sign.add_argument("--out", help="default: the report's name with .dsse.json; MODEL/model.sig for oms")
    sign.set_defaults(handler=sign_cmd)


def add_attest(attest: argparse.ArgumentParser) -> None:
    """``attest``'s arguments."""
    attest.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help=f"files or model directories, or one image: {IMAGE_HELP}",
    )
    attest.add_argument("--key", action="append", required=True, help="private key; repeat to co-sign")
    attest.add_argument(
        "--predicate-type",
        metavar="URI",
        help="required for files: a URI naming what you attest (e.g. https://example.com/model-review/v1);"
        " verify then needs the same --predicate-type. An image's lists its files",
    )
    attest.add_argument("--predicate", metavar="FILE", help="predicate JSON object (default {})")
    attest.add_argument("--out", help="write the envelope here (default: stdout)")
    attest.add_argument(
        "--attach", action="store_true", help="for an image: push the envelope beside it as an OCI referrer"
    )
    attest.add_argument(
        "--bundle",
        action="store_true",
        help="for an image: a Sigstore bundle (v0.3, one key, no transparency log) rather than a bare"
        " envelope; --attach pushes it as cosign does (artifactType"
        " application/vnd.dev.sigstore.bundle.v0.3+json)",
    )
    registry_options(attest)
    attest.set_defaults(handler=attest_cmd)


def add_digest(digest: argparse.ArgumentParser) -> None:
    """``digest``'s arguments."""
    digest.add_argument("path", metavar="PATH", help="a file, or a model directory")
    digest.add_argument("--jobs", type=int, metavar="N", help="files hashed at once (default: cores)")
    digest.add_argument("--json", action="store_true", help="print the digest and files as JSON")
    digest.set_defaults(handler=digest_cmd)


def key_gen(args: argparse.Namespace) -> int:
    """``modelseal key gen``."""
    from modelseal.attest.signing.private_keys import generate_key, valid_issuer, write_key_pair

    if args.issuer is not None:
        valid_issuer(args.issuer)
    there = [p for p in (f"{args.out}.key", f"{args.out}.pub") if os.path.lexists(p)]
    if there and not args.force:
        # a usage matter, not a failure of the machine (issue 31, point 6)
        raise UsageError(
            f"{' and '.join(there)} already exist{'s' if len(there) == 1 else ''}: give another --out,"
            " or --force to replace them"
        )
    key = generate_key(args.algorithm, issuer=args.issuer or None)
    priv, pub = write_key_pair(args.out, key, replace=args.force)
    print(f"key id {key.public.keyid}")
    print(f"  private: {printable(str(priv))} (keep it secret; mode 0600)")
    print(f"  public:  {printable(str(pub))} (share it; verifiers list it in their trusted keys)")
    if key.issuer:
        print(f"  issuer:  {printable(key.issuer)} (reports signed with this key name it as their issuer)")
    else:
        print("  no issuer name: reports signed with it name the key id; pass --issuer to name who signs")
    return 0


def hash_path(path: str, jobs: int | None = None) -> tuple[str, DirectoryDigest | None]:
    """Hash a file or directory; for a directory, say on stderr what socair's rules left out."""
    from modelseal.attest.digests.digest import digest_path, total_size

    total = total_size(path) if ProgressBar.wanted() else 0  # sizing a directory walks it once more
    with ProgressBar(f"hashing {printable(Path(path).name)}", total) as bar:
        digest, directory = digest_path(path, workers=jobs, progress=bar.advance)
    if directory is not None and directory.skip_summary:
        print(f"note: {directory.skip_summary}", file=sys.stderr)
    return digest, directory


def skipped_json(directory: DirectoryDigest | None) -> dict[str, Any]:
    return {"skipped": [s.to_json() for s in directory.skipped]} if directory is not None else {}


def sign_cmd(args: argparse.Namespace) -> int:
    """``modelseal sign``."""
    from modelseal.attest.dsse import gojson
    from modelseal.attest.dsse.envelope import MAX_ENVELOPE_BYTES
    from modelseal.attest.signing.sign import sign_report
    from modelseal.attest.signing.signer_uris import shown
    from modelseal.attest.signing.signers import load_signer

    if args.format == "oms":
        return bundle_commands.sign_oms(args)
    if args.report is None or args.model is not None:
        model = shlex.quote(args.model) if args.model is not None else "MODEL"
        raise UsageError(
            "sign signs a Socair report (--report FILE) or an OMS bundle (--format oms MODEL);"
            " to attest your own model without socair: modelseal attest --key"
            f" {shlex.quote(args.key)} --predicate-type {EXAMPLE_PREDICATE_TYPE}"
            f" --out model.dsse.json {model}"
        )
    key = load_signer(args.key)
    if key.public.algorithm != "ed25519":  # the key as shown: a URI's query is never repeated
        raise KeyFileError(f"{shown(args.key)} is not an Ed25519 key")
    data = read_limited(args.report, MAX_ENVELOPE_BYTES, what="report")
    try:
        report = gojson.loads(data)
    except gojson.JSONFormatError as e:
        raise InputError(f"{args.report} is not a report document: {e}") from None
    if not isinstance(report, dict):
        raise InputError(f"{args.report} is not a report document: not a JSON object")
    envelope, doc = sign_report(report, key)
    out = args.out or args.report.removesuffix(".json") + ".dsse.json"
    write_atomic(out, envelope.to_json())
    sha, short = doc["artifact"]["sha256"], key.public.short_id
    print(f"signed {printable(args.report)} for artifact {sha} with key {short}")
    print(f"  {printable(out)}")
    return 0


def attest_cmd(args: argparse.Namespace) -> int:
    """``modelseal attest``."""
    from modelseal.attest.dsse import gojson
    from modelseal.attest.dsse.envelope import MAX_ENVELOPE_BYTES
    from modelseal.attest.signing.sign import make_statement, sign_payload
    from modelseal.attest.signing.signers import load_signer

    if not any(is_image(p) for p in args.paths) and (args.attach or args.bundle or not args.predicate_type):
        flag = "--attach" if args.attach else "--bundle" if args.bundle else None
        raise UsageError(
            f"{flag} is for an image (oci://...)"
            if flag
            else "files need --predicate-type URI, a URI naming what you attest (for example"
            f" --predicate-type {EXAMPLE_PREDICATE_TYPE}); verify then takes the same one"
        )
    if args.bundle and len(args.key) != 1:
        raise UsageError("--bundle: a Sigstore bundle carries one signature; give one --key")
    keys = [load_signer(k) for k in args.key]
    predicate: Any = {}
    if args.predicate:
        try:
            predicate = gojson.loads(read_limited(args.predicate, MAX_ENVELOPE_BYTES, what="predicate"))
        except gojson.JSONFormatError as e:
            raise InputError(f"predicate {args.predicate} is not JSON: {e}") from None
        if not isinstance(predicate, dict):
            raise InputError(f"predicate {args.predicate} is not a JSON object")
    if any(is_image(p) for p in args.paths):
        return attest_image(args, keys, predicate if args.predicate else None)
    subjects: list[tuple[str, str]] = []
    files: dict[str, dict[str, str]] = {}
    for p in args.paths:
        name, (digest, directory) = Path(p).resolve().name, hash_path(p)
        subjects.append((name, digest))
        if directory is not None:
            files[name] = {f.path: f.sha256 for f in directory.files}
    try:
        statement = make_statement(subjects, args.predicate_type, predicate, files=files)
    except gojson.JSONFormatError as e:  # a --predicate-type or path that is not UTF-8
        raise InputError(f"cannot encode the statement: {e}") from None
    envelope = sign_payload(statement, keys)
    if args.out:
        write_atomic(args.out, envelope.to_json())
        print(f"attested {len(subjects)} subject(s) with {len(keys)} key(s)", file=sys.stderr)
        print(f"  {printable(args.out)}", file=sys.stderr)
    else:
        sys.stdout.write(envelope.to_json().decode() + "\n")
    return 0


def digest_cmd(args: argparse.Namespace) -> int:
    """``modelseal digest``."""
    if args.jobs is not None and not 1 <= args.jobs <= 64:
        raise UsageError("--jobs must be between 1 and 64")
    digest, directory = hash_path(args.path, args.jobs)
    if args.json:
        out: dict[str, Any] = {"path": args.path, "sha256": digest}
        if directory is not None:
            out.update(
                kind="socair.modeldir/v1",
                size=directory.size,
                files=[{"path": f.path, "sha256": f.sha256, "size": f.size} for f in directory.files],
                **skipped_json(directory),
            )
        else:
            out.update(kind="file", size=os.path.getsize(args.path))
        print(json.dumps(out, indent=2))
    else:
        print(f"{digest}  {printable(args.path)}")
    return 0
