"""``publish`` and ``publish inspect``."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelseal.cli.image_commands import IMAGE_HELP, image_reference
from modelseal.cli.key_values import key_values
from modelseal.cli.progress import ProgressBar, human_bytes
from modelseal.cli.registry_access import registry_client, registry_options
from modelseal.cli.result_file import write_result
from modelseal.errors import InputError, OperationalError, UsageError
from modelseal.files import write_atomic
from modelseal.text import printable

if TYPE_CHECKING:
    from modelseal.attest.digests.walk import ModelDir
    from modelseal.attest.signing.signers import KeySigner
    from modelseal.publish.image.modelpack import ModelPackShape

__all__ = ["add_inspect", "add_publish"]

_HEX64 = re.compile(r"[0-9a-f]{64}")


def add_publish(pub: argparse.ArgumentParser) -> None:
    """``publish``'s arguments."""
    pub.description = (
        "Push model files as one OCI image (one tar layer per file, files at the image root),"
        " or with --format modelpack as a CNCF ModelPack v1 artifact (one layer per file, typed by its"
        " role). Also: modelseal publish inspect REF. An image is named REGISTRY/REPO:TAG or"
        " REGISTRY/REPO@sha256:..., with or without oci:// (the pinned oci:// form is what publish prints)"
    )
    pub.add_argument("files", nargs="*", metavar="FILE", help="LOCAL, or IMAGE/PATH=LOCAL")
    pub.add_argument(
        "--image",
        required=True,
        metavar="REGISTRY/REPO:TAG",
        help="where to publish: a tag (the oci:// prefix is optional); prints the pinned oci://...@sha256:",
    )
    pub.add_argument("--from", dest="from_dir", metavar="DIR", help="publish every file under DIR")
    pub.add_argument(
        "--follow-symlinks",
        action="store_true",
        help="with --from: follow symlinks that lead out of DIR (a Hugging Face cache snapshot)",
    )
    pub.add_argument("--primary", metavar="PATH", help="the primary file's image path (listed first)")
    pub.add_argument("--source", metavar="URL", help="where the files came from (an image annotation)")
    pub.add_argument("--platform", default="linux/amd64", metavar="OS/ARCH", help="default: linux/amd64")
    pub.add_argument(
        "--format",
        choices=("image", "modelpack"),
        default="image",
        help="image: ImageVolume-mountable image (containerd, CRI-O); modelpack: CNCF ModelPack v1"
        " artifact (CRI-O, modctl, Harbor, Dragonfly; KitOps after v1.7.0). Default: image",
    )
    pub.add_argument(
        "--layers",
        choices=("tar", "raw"),
        help="with --format modelpack: tar (default) or raw (each layer the file itself, its digest"
        " the file's SHA-256)",
    )
    pub.add_argument(
        "--role",
        action="append",
        metavar="PATH=ROLE",
        help="with --format modelpack: the role of a file (weight, weight.config, doc, code, dataset)"
        " rather than the one its name gives",
    )
    pub.add_argument("--model-name", metavar="NAME", help="with --format modelpack: the config's name")
    pub.add_argument(
        "--reuse-from",
        action="append",
        metavar="REF",
        help="an earlier image whose layers to reuse: REGISTRY/REPO:TAG or REGISTRY/REPO@sha256:...,"
        " oci:// optional",
    )
    pub.add_argument(
        "--chunk-size-mib", type=int, default=512, metavar="N", help="upload chunk size (default 512)"
    )
    pub.add_argument("--json", action="store_true", help="print the result as JSON")
    pub.add_argument(
        "--result-file", metavar="PATH", help="also write the JSON result here (/dev/termination-log)"
    )
    pub.add_argument(
        "--sign-key",
        action="append",
        metavar="KEY",
        help="sign the pushed image's digest with this private key or signer URI (envvar:NAME, hsm:, ...)"
        " and attach it (repeat to co-sign)",
    )
    pub.add_argument(
        "--attestation-file",
        metavar="PATH",
        help="with --sign-key: also write the signed envelope here (an attestation ConfigMap's content)",
    )
    registry_options(pub)
    pub.set_defaults(handler=publish_cmd)


def add_inspect(inspect: argparse.ArgumentParser) -> None:
    """``publish inspect``'s arguments (the hidden command ``publish-inspect``)."""
    inspect.prog = "modelseal publish inspect"
    inspect.add_argument("image", metavar="REF", help=f"the image: {IMAGE_HELP}")
    inspect.add_argument("--json", action="store_true", help="print the files as JSON")
    inspect.add_argument(
        "--sha256",
        dest="expect_sha256",
        metavar="HEX",
        help="fail (exit 1) unless the primary file's bytes have this digest (reads every layer once);"
        " a layer the registry serves with bytes other than its digest, or cannot serve, is exit 3",
    )
    inspect.add_argument("--expect-sha256", dest="expect_sha256", help=argparse.SUPPRESS)  # the old spelling
    inspect.add_argument(
        "--annotations-only",
        action="store_true",
        help="with --sha256: compare the digest the annotations record; no layer is read",
    )
    registry_options(inspect)
    inspect.set_defaults(handler=inspect_cmd)


def publish_cmd(args: argparse.Namespace) -> int:
    """``modelseal publish``."""
    from modelseal.publish.image.layout import Platform, layer_length
    from modelseal.publish.image.publisher import plan_files, publish

    destination = image_reference(args.image, "--image", require="tag")
    reuse = [image_reference(r, "--reuse-from") for r in args.reuse_from or []]
    if not 1 <= args.chunk_size_mib <= 4096:
        raise UsageError("--chunk-size-mib must be between 1 and 4096")
    if not args.files and not args.from_dir:
        raise UsageError("give the files to publish, or --from DIR")
    if args.follow_symlinks and not args.from_dir:
        raise UsageError("--follow-symlinks goes with --from DIR")
    if args.attestation_file and not args.sign_key:
        raise UsageError("--attestation-file goes with --sign-key")
    try:
        platform = Platform.parse(args.platform)
    except InputError as e:
        raise UsageError(f"--platform: {e}") from None
    shape = _shape(args)
    signing_keys = _signing_keys(args.sign_key)  # a bad key fails before anything is pushed
    for flag, target in (("--result-file", args.result_file), ("--attestation-file", args.attestation_file)):
        if target and (Path(target).is_dir() or not Path(target).parent.is_dir()):  # so does a bad path
            raise OperationalError(f"{flag} {printable(target)}: not a file in an existing folder")
    files = plan_files(args.files, _walk(args) if args.from_dir else None, args.primary)
    unknown = sorted(set(shape.roles if shape else ()) - {f.path for f in files})
    if unknown:
        raise UsageError(f"--role names {printable(unknown[0])!r}, which is not among the files to publish")
    total = 0
    for f in files:
        with contextlib.suppress(OSError):  # publish() reports a missing file
            size = f.source.stat().st_size
            total += shape.length(f.path, size) if shape else layer_length(f.path, size)
    with (
        registry_client(destination, args, args.chunk_size_mib) as client,
        ProgressBar("publishing", total, lines=True) as bar,
    ):
        result = publish(
            destination,
            files,
            client,
            source=args.source,
            platform=platform,
            reuse_from=reuse,
            progress=bar.advance,
            shape=shape,
        )
        attestation = (
            _sign_and_attach(client, result.reference, signing_keys, args.attestation_file)
            if signing_keys
            else None
        )
    doc = result.to_json()
    if attestation is not None:
        doc["attestation"] = attestation
    if args.result_file:
        write_result(Path(args.result_file), doc)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        uploaded = sum(1 for f in result.files if f.uploaded)
        size = sum(f.size for f in result.files)
        print(
            f"published {len(result.files)} file(s), {human_bytes(size)} ({uploaded} uploaded,"
            f" {len(result.files) - uploaded} already there) as {printable(str(destination))}",
            file=sys.stderr,
        )
        print(result.image)
    return 0


def _shape(args: argparse.Namespace) -> ModelPackShape | None:
    """``--format modelpack`` and its options; None for an image."""
    from modelseal.publish.image.modelpack import ModelPackShape

    if args.format != "modelpack":
        for flag, value in (
            ("--layers", args.layers),
            ("--role", args.role),
            ("--model-name", args.model_name),
        ):
            if value:
                raise UsageError(f"{flag} goes with --format modelpack")
        return None
    roles = key_values(args.role, "--role", "PATH=ROLE")
    try:
        return ModelPackShape(raw=args.layers == "raw", roles=roles, name=args.model_name)
    except InputError as e:
        raise UsageError(f"--role {e.message}") from None


def _signing_keys(keys: list[str] | None) -> list[KeySigner]:
    from modelseal.attest.signing.signers import load_signer

    return [load_signer(k) for k in keys or []]


def _sign_and_attach(
    client: Any, reference: Any, keys: list[KeySigner], envelope_file: str | None
) -> dict[str, Any]:
    """``--sign-key``: sign the image just pushed (its manifest read back by digest) and attach it."""
    from modelseal.cli.image_commands import attach_signed
    from modelseal.publish.referrers.attestations import sign_image

    # just pushed by digest: the manifest read back is this publish's own, its annotations the
    # hashes it computed while uploading, so the layers need not be read again
    signed = sign_image(client, reference, keys, read_layers=False)
    if envelope_file:  # written first: a file that cannot be written stops it before anything is attached
        write_atomic(envelope_file, signed.envelope.to_json())
    attached = attach_signed(client, signed)
    return {"referrer": attached.digest, "via": attached.via, "predicateType": signed.predicate_type,
            "keys": [k.public.keyid for k in keys]}  # fmt: skip


def _walk(args: argparse.Namespace) -> ModelDir:
    """Walk --from DIR; say which links lead out of it and what socair's rules left out."""
    from modelseal.attest.digests.walk import walk_model_dir

    walked = walk_model_dir(args.from_dir, outside_links=args.follow_symlinks)
    for f in walked.files:
        if f.outside:
            print(f"following {printable(f.path)} -> {printable(str(f.source))}", file=sys.stderr)
    summary = walked.skip_summary("the image")
    if summary:
        print(f"note: {summary}", file=sys.stderr)
    return walked


def inspect_cmd(args: argparse.Namespace) -> int:
    """``modelseal publish inspect``."""
    from modelseal.publish.image.contents import check_primary, check_served, describe, primary_file
    from modelseal.publish.image.modelpack_read import MODEL_FORMATS, served_info

    ref = image_reference(args.image, "publish inspect")
    want = (args.expect_sha256 or "").strip().lower()
    if args.expect_sha256 is not None and not _HEX64.fullmatch(want):
        raise UsageError("--sha256 must be 64 hex digits")
    if args.annotations_only and not want:
        raise UsageError("--annotations-only goes with --sha256")
    if ref.digest is None and args.expect_sha256:
        print(
            f"warning: {printable(args.image)} is not pinned by digest: a tag can move; pin it with @sha256:",
            file=sys.stderr,
        )
    with registry_client(ref, args, push=False) as client:
        info = describe(client, ref)
        served = check_served(client, info, want) if want and not args.annotations_only else None
    if args.annotations_only:
        check_primary(info, want)
        print(
            "note: compared the digest the image's annotations record (its pusher writes them);"
            " no layer was read: drop --annotations-only to check the bytes",
            file=sys.stderr,
        )
    elif served is not None:
        raw = sum(1 for f in info["files"] if f.get("raw"))
        size = human_bytes(
            sum(
                f.size
                for layer, e in zip(served, info["files"], strict=True)
                if not e.get("raw")
                for f in layer
            )
        )
        read = f"read {len(served) - raw} layer(s), {size}"
        if raw:
            read += f"; {raw} raw layer(s) bound by their digests, no byte read"
        print(
            f"verified: the primary file {primary_file(info)['path']} has SHA-256 {want} ({read})",
            file=sys.stderr,
        )
        if info.get("format") in MODEL_FORMATS:  # list the files as read: a tar layer may hold a directory
            info = served_info(info, served)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    # every name below was written by whoever pushed the image: shown escaped
    print(printable(info["image"]))
    if info.get("primary"):
        print(f"  primary  {printable(info['primary'])}")
    if info.get("source"):
        print(f"  source   {printable(info['source'])}")
    if info.get("format") == "modelpack":
        name = info.get("descriptor", {}).get("name")
        names = " (pre-CNCF names)" if info.get("names") else ""
        print(f"  format   ModelPack v1{names}" + (f", {printable(name)}" if name else ""))
    elif info.get("format") == "modelkit":
        name = info.get("package", {}).get("name")
        print("  format   KitOps ModelKit" + (f", {printable(name)}" if name else ""))
    paths = [printable(f["path"] or "(untitled)") for f in info["files"]]
    width = max([len(p) for p in paths] + [4])
    print(f"  {'FILE'.ljust(width)}  {'SIZE':>10}  SHA-256")
    for f, path in zip(info["files"], paths, strict=True):
        size = human_bytes(f["size"]) if f["size"] is not None else "?"
        role = f"  {f['role']}{' (raw)' if f.get('raw') else ''}" if f.get("role") else ""
        print(f"  {path.ljust(width)}  {size:>10}  {printable(f['sha256'] or '(not recorded)')}{role}")
    return 0
