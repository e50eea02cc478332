"""The ``modelseal`` command. The only place that prints or exits.

Exit codes: 0 success (and help: ``modelseal`` or a group such as ``modelseal operator``
alone prints its help to stdout); for ``verify``: verified and admitted, or refused in
warn mode); 1 refused, failed verification or bad input; 2 usage error;
3 operational failure (I/O, network, registry) or an internal error (a bug:
one line, no traceback). ``verify`` follows socair and uses 1 for every
failure that is not a usage error, and so does ``verify-files``.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Collection, Sequence
from typing import Any, NoReturn

# httpx imports its own command-line client (rich, click, pygments: 40 ms of the 0.18 s a
# ``modelseal stage`` spent starting) whenever those are installed, and falls back to a stub when
# that import fails: none of modelseal's commands runs httpx's client, so it is never loaded
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

from modelseal import __version__  # noqa: E402 - after the line above, before anything imports httpx
from modelseal.errors import Error, UsageError  # noqa: E402
from modelseal.text import clip, printable  # noqa: E402

__all__ = ["main"]


#: commands reached by another spelling (``publish inspect``), left out of help and choice lists
_HIDDEN_COMMANDS = frozenset({"publish-inspect"})
VERBOSE_HELP = "log what happens to stderr (accepted before or after the command)"


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing and exiting; it keeps the words it was given
    (``given``: a command's parser, those after the command), for an action that must see them all."""

    given: Sequence[str] = ()

    def error(self, message: str) -> NoReturn:
        # the command's --help is named by main(), which knows the command when argparse does not
        # (an unrecognized argument is reported by the top level)
        raise UsageError(_with_fix(message))

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self.given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # a mistyped command lists the commands a user can type, not the hidden ones
        choices = action.choices
        if isinstance(action, argparse._SubParsersAction) and choices is not None and value not in choices:
            import difflib  # only for a mistyped command

            shown = [c for c in choices if c not in _HIDDEN_COMMANDS]
            close = difflib.get_close_matches(str(value), shown, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            listed = ", ".join(repr(c) for c in shown)
            raise argparse.ArgumentError(action, f"invalid choice: {value!r}{hint} (choose from {listed})")
        super()._check_value(action, value)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parsers of ``parser``'s commands, by name (none for a leaf command)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _finish(parser: argparse.ArgumentParser) -> None:
    """Hide the hidden commands from help, and let every command take ``-v`` wherever it stands."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            action.help = action.help or "one of these; COMMAND --help says more"
            action._choices_actions = [a for a in action._choices_actions if a.dest not in _HIDDEN_COMMANDS]
    subs = _subcommands(parser)
    for sub in subs.values():
        _finish(sub)
    if not subs and parser.prog != "modelseal":
        # SUPPRESS as the default: absent here, the value parsed before the command stands
        parser.add_argument(
            "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP
        )


#: the commands in the order help lists them, each with its line of help
_COMMANDS: tuple[tuple[str, str], ...] = (
    ("key", "manage signing keys"),
    ("sign", "sign a Socair report (as socair sign), or a model (--format oms)"),
    ("attest", "sign an in-toto Statement over files or an image (for CI)"),
    ("verify", "verify and admit an attestation (as socair verify)"),
    ("digest", "SHA-256 of a file, socair's digest of a directory"),
    ("verify-files", "check files in place against SHA-256 digests (the serving Pod's init container)"),
    ("bom", "write a CycloneDX 1.6 ML-BOM for a model folder or image"),
    (
        "publish",
        "push model files as an ImageVolume-mountable OCI image or a ModelPack artifact"
        " (publish inspect reads either)",
    ),
    ("publish-inspect", argparse.SUPPRESS),
    ("stage", "download a Model's files into a folder, verified (for publish)"),
    ("operator", "run the Kubernetes operator (LLMKube Models)"),
)
_NAMES = frozenset(name for name, _ in _COMMANDS)
#: commands that add their own -h/--help (verify-files: taken alone only, as exit 0 starts a runtime)
_OWN_HELP = frozenset({"verify-files"})


def _add_arguments(name: str, parser: argparse.ArgumentParser) -> None:
    """Add command ``name``'s arguments and handler. Its module is imported here, when the command
    is parsed: a run loads its own command's module, not every command's (issue 21, part 4)."""
    if name == "verify":
        from modelseal.cli.verify_commands import add_verify

        add_verify(parser)
    elif name in ("key", "sign", "attest", "digest"):
        from modelseal.cli import attest_commands as a

        {"key": a.add_key, "sign": a.add_sign, "attest": a.add_attest, "digest": a.add_digest}[name](parser)
    elif name in ("publish", "publish-inspect"):
        from modelseal.cli.publish_commands import add_inspect, add_publish

        (add_publish if name == "publish" else add_inspect)(parser)
    elif name == "bom":
        from modelseal.cli.bom_commands import add_bom

        add_bom(parser)
    elif name in ("stage", "verify-files"):
        from modelseal.cli.files_commands import add_stage, add_verify_files

        (add_stage if name == "stage" else add_verify_files)(parser)
    else:
        from modelseal.cli.operator_commands import add_operator

        add_operator(parser)


def build_parser(only: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The command tree; with ``only``, the other commands by name and help alone (not parsable)."""
    parser = _Parser(
        prog="modelseal",
        description="Verify, sign and publish open-weight AI models for Kubernetes.",
    )
    parser.add_argument("--version", action="version", version=f"modelseal {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, line in _COMMANDS:
        command = commands.add_parser(name, help=line, add_help=name not in _OWN_HELP)
        if only is None or name in only:
            _add_arguments(name, command)
    _finish(parser)
    return parser


#: what the top level takes before a command
_TOP_LEVEL_FLAGS = frozenset({"-h", "--help", "--version", "-v", "--verbose"})


def _option_name(arg: str) -> str | None:
    """The option ``arg`` gives, as a message may name it (never a value joined to it, as in
    ``--key=K`` or ``-kK``); None for the top level's own (argparse also takes a long one's prefix)."""
    if arg == "--":
        return None
    if arg.startswith("--"):
        name = arg.split("=", 1)[0]
        return None if any(f.startswith(name) for f in _TOP_LEVEL_FLAGS if f.startswith("--")) else name
    # a cluster of short options (-vh), then one that may carry its value (-kVALUE)
    letter = next((ch for ch in arg[1:] if f"-{ch}" not in _TOP_LEVEL_FLAGS), None)
    return None if letter is None else f"-{letter}"


def _command_named(parser: argparse.ArgumentParser, words: list[str]) -> tuple[str, argparse.ArgumentParser]:
    """The command ``words`` name after a flag's value (``k.pub verify ...``, ``k key gen``), as typed,
    and its parser (a group's when no command of the group follows); ``("", parser)`` for none."""
    commands = {n: p for n, p in _subcommands(parser).items() if n not in _HIDDEN_COMMANDS}
    at = next((i for i, w in enumerate(words) if w in commands), None)
    if at is None:
        return "", parser
    if words[at : at + 2] == ["publish", "inspect"]:
        return "publish inspect", _subcommands(parser)["publish-inspect"]
    path, current = [words[at]], commands[words[at]]
    for word in words[at + 1 :]:
        subs = _subcommands(current)
        if word not in subs or word in _HIDDEN_COMMANDS:
            break
        path, current = [*path, word], subs[word]
    return " ".join(path), current


def _flags_before_the_command(parser: argparse.ArgumentParser, before: list[str], rest: list[str]) -> None:
    """A command's flag given before the command (``modelseal --trusted k verify ...``) is
    named as such, rather than its value being read as an unknown command; its value never is."""
    name = next((n for n in map(_option_name, before) if n is not None), None)
    if name is None:
        return
    command, its = _command_named(parser, rest)
    if not command or _subcommands(its):  # no command, or a group's without its command
        usage = " ".join(filter(None, ("modelseal", command, "COMMAND --help")))
        raise UsageError(f"unrecognized option {name} (a command's options go after it: {usage})")
    options = its._option_string_actions
    if name in options or (name.startswith("--") and any(o.startswith(name) for o in options)):
        raise UsageError(f"{name} goes after the command: modelseal {command} {name} ...")
    raise UsageError(
        f"unrecognized option {name}: modelseal {command} does not take it either"
        f" (modelseal {command} --help)"
    )


def _with_fix(message: str) -> str:
    """argparse's ``message`` with what to do about it, where argparse leaves that out."""
    both = re.fullmatch(r"argument (\S+?)(?:/\S+)?: not allowed with argument (\S+?)(?:/\S+)?", message)
    if both:
        return f"{both[1]} and {both[2]} exclude each other: give one of them"
    if message.startswith("ambiguous option: "):
        return f"{message}: spell the option out"
    return message


def _did_you_mean(message: str, its: argparse.ArgumentParser) -> str:
    """An unrecognized option named with the option of ``its`` it is closest to."""
    if not message.startswith("unrecognized arguments: "):
        return message
    import difflib  # only for a mistyped option

    options = [o for o in its._option_string_actions if o.startswith("--")]
    for word in message.removeprefix("unrecognized arguments: ").split():
        name = word.split("=", 1)[0]
        close = difflib.get_close_matches(name, options, n=1, cutoff=0.75) if word.startswith("-") else []
        if close:
            return f"{message}; did you mean {close[0]}?"
    return message


def _help_line(parser: argparse.ArgumentParser, words: list[str]) -> tuple[str, argparse.ArgumentParser]:
    """``modelseal COMMAND --help`` for the command ``words`` name (the top level's when none), and
    that command's parser."""
    shown = ["publish", "inspect", *words[1:]] if words[:1] == ["publish-inspect"] else words
    command, its = _command_named(parser, shown)
    return " ".join(filter(None, ("modelseal", command, "--help"))), its


def _unpinned(message: str, argv: Sequence[str]) -> str:
    """``message`` with every argument that carries a PIN (``pin-value=`` in a signer URI given where
    no ``--key`` is taken, so argparse quotes it back) cut to the form a message may show.

    ``message`` is escaped; argparse quotes an argument as it is (``unrecognized arguments``) or
    with ``repr`` (``invalid choice``), whose own escapes of a backslash, quote or control
    character the message's escaping then doubles: both forms are cut."""
    from modelseal.attest.signing.signer_uris import pin_attributes, shown

    for arg in sorted(argv, key=len, reverse=True):
        if pin_attributes(arg):
            for form in sorted({printable(arg), printable(repr(arg)[1:-1])}, key=len, reverse=True):
                message = message.replace(form, shown(arg) + "...")
    return message


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit code (``sys.exit(main())`` in the entry point)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    # the top level takes only flags without values: the first other word is the command
    at = next((i for i, a in enumerate(args_list) if not a.startswith("-")), len(args_list))
    if args_list[at : at + 2] == ["publish", "inspect"]:
        args_list[at : at + 2] = ["publish-inspect"]
    command = args_list[at] if at < len(args_list) else None
    # only the command given is built in full, unless a flag before it asks which command takes it
    flag_first = any(_option_name(a) is not None for a in args_list[:at])
    parser = build_parser(None if flag_first else [c for c in (command,) if c in _NAMES])
    try:
        _flags_before_the_command(parser, args_list[:at], args_list[at:])
        args = parser.parse_args(args_list)
        logging.basicConfig(
            level=logging.DEBUG if args.verbose else logging.WARNING,
            format="%(levelname)s %(name)s: %(message)s",
        )
        # httpx logs whole URLs, and a signed download URL carries its credential in the query
        for noisy in ("httpx", "httpcore"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
        # securesystemslib logs a failed KMS call with the service's own text (and the key's name):
        # a signer's failure is modelseal's one line naming its type
        logging.getLogger("securesystemslib").setLevel(logging.DEBUG if args.verbose else logging.CRITICAL)
        handler = getattr(args, "handler", None)
        if handler is None:  # `modelseal` or a group such as `modelseal operator`: its help, asked for
            _subcommands(parser).get(args.command or "", parser).print_help(sys.stdout)
            return 0
        code: int = handler(args)
        return code
    except UsageError as e:
        # one line: what is wrong, what to do, and where to read more (issue 31, point 5)
        help_line, its = _help_line(parser, args_list[at:])
        message = _did_you_mean(str(e), its)
        # a message that shows a command line already says what to type
        more = "" if "--help" in message or "modelseal " in message else f" ({help_line})"
        print(f"error: {clip(_unpinned(printable(message), args_list))}{more}", file=sys.stderr)
        return 2
    except Error as e:
        print(f"error: {clip(_unpinned(printable(str(e)), args_list))}", file=sys.stderr)
        return 1 if command in ("verify", "verify-files") else e.exit_code
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
