"""A Model's files in the operator's containers: ``stage`` downloads them into a folder, verified (the
prefetch Job's first container); ``verify-files`` checks them where they lie against the digests given
(the serving Pod's init container ``modelseal-verify``, last, before the runtime starts).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from modelseal.cli.key_values import key_values
from modelseal.cli.progress import ProgressBar
from modelseal.cli.registry_access import say
from modelseal.errors import UsageError
from modelseal.text import printable

__all__ = ["add_stage", "add_verify_files"]


def add_stage(st: argparse.ArgumentParser) -> None:
    """``stage``'s arguments (the prefetch Job's downloader)."""
    st.add_argument(
        "files", nargs="*", metavar="FILE", help="spec.files entries (relative to --source, or URLs)"
    )
    st.add_argument("--to", required=True, metavar="DIR", help="the staging folder")
    st.add_argument("--source", metavar="SRC", help="spec.source: a URL, hf://org/repo[@rev] or a local path")
    st.add_argument("--sha256", metavar="HEX", help="spec.sha256 (a single file)")
    st.add_argument("--file-sha256", action="append", metavar="FILE=HEX", help="spec.fileSha256 entries")
    st.add_argument(
        "--download-concurrency", type=int, default=1, metavar="N", help="files at once (1-16, default 1)"
    )
    st.add_argument("--download-max-in-flight", metavar="SIZE", help="cap on bytes in flight, e.g. 90Gi")
    st.add_argument("--retries", type=int, default=5, metavar="N", help="retries per file (default 5)")
    st.add_argument("--json", action="store_true", help="print the staged files as JSON")
    st.add_argument(
        "--no-fsync", dest="fsync", action="store_false",
        help="do not flush each file to disk before it is renamed into place (for a folder that"
        " does not outlive its node, such as the prefetch Job's emptyDir)",
    )  # fmt: skip
    st.set_defaults(handler=stage_cmd)


def stage_cmd(args: argparse.Namespace) -> int:
    """``modelseal stage``: exit 0 staged, 1 a digest mismatch or bad input, 3 a source failed."""
    from modelseal.publish.stage.sources import parse_quantity, plan_stage
    from modelseal.publish.stage.stager import Stager

    if not 1 <= args.download_concurrency <= 16:
        raise UsageError("--download-concurrency must be between 1 and 16")
    pins = key_values(args.file_sha256, "--file-sha256", "FILE=HEX")
    plans = plan_stage(args.source, args.files, sha256=args.sha256, file_sha256=pins)
    cap = parse_quantity(args.download_max_in_flight) if args.download_max_in_flight else None
    token = os.environ.get("HF_TOKEN") or None
    with ProgressBar("staging", lines=True) as bar, Stager(
        Path(args.to), concurrency=args.download_concurrency, max_in_flight=cap, retries=args.retries,
        hf_token=token, progress=bar.advance, on_retry=say, fsync=args.fsync,
    ) as stager:  # fmt: skip
        staged = stager.stage(plans)
    if args.json:
        print(json.dumps([{"path": s.dest, "size": s.size, "sha256": s.sha256, "restarts": s.restarts,
                           "skipped": s.skipped} for s in staged], indent=2))  # fmt: skip
    else:
        for s in staged:
            print(f"{s.sha256}  {s.size:>12}  {printable(s.dest)}{'  (already staged)' if s.skipped else ''}")
    return 0


_VERIFY_FILES = (
    "Check that each PATH is a regular file, reached without symlinks and with one name, whose SHA-256 is"
    " the one given, and that each --exact folder holds the expected files under it and nothing else but"
    " directories. Files are read once, in parallel. Exit 0 all verified, 1 refused (the first problem,"
    " named), 2 usage."
)


class _HelpAlone(argparse._HelpAction):
    """``verify-files``' ``-h``/``--help``, taken alone only: its exit 0 lets the serving runtime
    start, so among a check's arguments (one word more in the command built: a file name turned
    flag) it is a usage error, never the help page and exit 0 with no file looked at."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        if len(getattr(parser, "given", ())) > 1:
            raise UsageError(
                "-h/--help is taken alone: among a check's arguments it would check nothing and exit 0"
            )
        super().__call__(parser, namespace, values, option)


def add_verify_files(parser: argparse.ArgumentParser) -> None:
    """``verify-files``' arguments (the contract the operator's init container is built against)."""
    parser.description = _VERIFY_FILES
    parser.add_argument("-h", "--help", action=_HelpAlone, help="show this help message and exit")
    parser.add_argument(
        "--exact", action="append", default=[], metavar="DIR",
        help="an absolute folder that must hold only the expected files under it (and folders); repeatable",
    )  # fmt: skip
    parser.add_argument(
        "--expect", action="append", nargs=2, required=True, metavar=("SHA256", "PATH"),
        help="an absolute PATH that must be a regular file with this SHA-256 (64 lowercase hex); repeatable",
    )  # fmt: skip
    parser.add_argument(
        "--size", action="append", nargs=2, default=[], metavar=("BYTES", "PATH"),
        help="an expected PATH's size in bytes, checked before it is read; repeatable",
    )  # fmt: skip
    parser.set_defaults(handler=verify_files_cmd)


def verify_files_cmd(args: argparse.Namespace) -> int:
    """``modelseal verify-files``: exit 0 every file verified; a refusal raises (exit 1)."""
    import time

    from modelseal.attest.digests.expected import check_files, plan

    start = time.monotonic()
    checked = check_files(plan([(sha, path) for sha, path in args.expect], args.exact, args.size))
    took = time.monotonic() - start
    print(f"verified {checked.files} file(s), {checked.bytes} bytes, in {took:.2f} s")
    return 0
