"""The ``modelseal`` command. The only place that prints or exits.

Exit codes: 0 success (for ``verify``: verified and admitted, or refused in
warn mode); 1 refused, failed verification or bad input; 2 usage error;
3 operational failure (I/O, network, registry) or an internal error (a bug:
one line, no traceback). ``verify`` follows socair and uses 1 for every
failure that is not a usage error.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import NoReturn

from modelseal import __version__
from modelseal.cli import attest_commands, operator_commands, publish_commands
from modelseal.errors import Error, UsageError
from modelseal.text import printable

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing and exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, usage=self.format_usage().strip())


def build_parser() -> argparse.ArgumentParser:
    """The whole command tree."""
    parser = _Parser(
        prog="modelseal",
        description="Verify, sign and publish open-weight AI models for Kubernetes.",
    )
    parser.add_argument("--version", action="version", version=f"modelseal {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens to stderr")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    attest_commands.register(commands)
    publish_commands.register(commands)
    publish_commands.register_stage(commands)
    operator_commands.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit code (``sys.exit(main())`` in the entry point)."""
    parser = build_parser()
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:2] == ["publish", "inspect"]:
        args_list = ["publish-inspect", *args_list[2:]]
    command = args_list[0] if args_list and not args_list[0].startswith("-") else None
    try:
        args = parser.parse_args(args_list)
        logging.basicConfig(
            level=logging.DEBUG if args.verbose else logging.WARNING,
            format="%(levelname)s %(name)s: %(message)s",
        )
        # httpx logs whole URLs, and a signed download URL carries its credential in the query
        for noisy in ("httpx", "httpcore"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
        handler = getattr(args, "handler", None)
        if handler is None:
            parser.print_help(sys.stderr)
            return 2
        code: int = handler(args)
        return code
    except UsageError as e:
        print(f"error: {printable(str(e))}", file=sys.stderr)
        if e.usage:
            print(e.usage, file=sys.stderr)
        return 2
    except Error as e:
        print(f"error: {printable(str(e))}", file=sys.stderr)
        return 1 if command == "verify" else e.exit_code
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except Exception as e:  # a bug: one line naming its type (its text may quote the input), exit 3
        print(f"error: internal error ({type(e).__name__}); this is a bug in modelseal", file=sys.stderr)
        return 3


def entry() -> NoReturn:
    """The console-script entry point."""
    sys.exit(main())
