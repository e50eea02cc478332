"""``modelseal bom``: a CycloneDX 1.6 ML-BOM for a model folder, a file, or an image, ready to attach."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from modelseal.errors import UsageError
from modelseal.files import write_atomic
from modelseal.text import printable

__all__ = ["add_bom"]


def add_bom(bom: argparse.ArgumentParser) -> None:
    """``bom``'s arguments."""
    from modelseal.cli.image_commands import IMAGE_HELP

    bom.add_argument("target", metavar="PATH|REF", help=f"a model folder or file, or an image: {IMAGE_HELP}")
    bom.add_argument("--name", help="the model's name (default: the folder's or repository's)")
    bom.add_argument("--model-version", metavar="TEXT", help="the model's version")
    bom.add_argument("--source", metavar="URL", help="where the model comes from (default for an image: it)")
    bom.add_argument("--out", metavar="FILE", help="write the BOM here (default: stdout)")
    bom.add_argument("--jobs", type=int, metavar="N", help="files hashed at once (default: cores)")
    from modelseal.cli.registry_access import registry_options

    registry_options(bom)
    bom.set_defaults(handler=bom_cmd)


def _folder(args: argparse.Namespace) -> tuple[str, str, list[Any], str | None]:
    from modelseal.attest.bom import BomFile
    from modelseal.cli.attest_commands import hash_path

    path = Path(args.target)
    digest, directory = hash_path(args.target, args.jobs)
    if directory is None:
        files = [BomFile(path.name, digest, path.stat().st_size)]
    else:
        files = [BomFile(f.path, f.sha256, f.size) for f in directory.files]
    return path.resolve().name, digest, files, args.source


def _image(args: argparse.Namespace) -> tuple[str, str, list[Any], str | None]:
    from modelseal.attest.bom import BomFile
    from modelseal.cli.image_commands import _warn_tag, image_reference
    from modelseal.cli.registry_access import registry_client
    from modelseal.publish.image.contents import served_files
    from modelseal.publish.referrers.attestations import read_subject

    ref = image_reference(args.target, "bom")
    with registry_client(ref, args, push=False) as client:
        info, subject = read_subject(client, ref)
        # every layer's bytes read and hashed (refused where they disagree with its annotations):
        # the BOM lists what was read, not what the annotations say
        served = served_files(client, info)
    _warn_tag(ref, subject.digest, "described")
    if not served:
        raise UsageError(
            f"{printable(ref.oci)}: the image records no files: publish it with `modelseal publish`"
        )
    files = [BomFile(f.path, f.sha256, f.size, f.layer) for f in served]
    pinned = ref.pinned(subject.digest).oci
    source = args.source or pinned
    return ref.repository.rsplit("/", 1)[-1], subject.digest, files, source


def bom_cmd(args: argparse.Namespace) -> int:
    """``modelseal bom``: exit 0 written, 1 bad input, 3 I/O or registry failure."""
    from modelseal.attest.bom import model_bom
    from modelseal.cli.image_commands import is_image

    name, digest, files, source = _image(args) if is_image(args.target) else _folder(args)
    doc = model_bom(args.name or name, digest, files, version=args.model_version, source=source)
    text = json.dumps(doc, indent=2) + "\n"
    if args.out:
        write_atomic(args.out, text.encode())
        print(f"wrote an ML-BOM of {len(files)} file(s) to {printable(args.out)}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
