"""What of a ``--key`` reference may be shown, and what it may not carry: a PIN.

``--key`` takes a key file path or a private-key URI
(:mod:`modelseal.attest.signing.signers`). A URI may hold more than names: RFC 7512
lets a PKCS#11 URI carry the token's PIN itself (``pin-value``, a query
attribute) or say where to read it (``pin-source``), and people copy such
URIs into ``hsm:`` ones; a KMS or ``file:`` URI may carry a query of options.
A command line is seen by shell history, process lists, CI logs and every
message that quotes it. So:

- :func:`shown` is the form every message uses: the scheme and the path up to
  the first ``;``, ``?``, ``#`` or ``&``, so no query, fragment or path attribute
  (RFC 7512 allows ``pin-value`` in the query only; one put among the path
  attributes by mistake is dropped too), and never from a ``pin-*`` name, a
  ``%`` or a space on (``hsm:pin-value=...`` has none of the separators),
  escaped for a terminal.
- :func:`refuse_pin` refuses a reference carrying any ``pin-*`` attribute
  (in the query or the path, in any case, percent-encoded or not) before
  anything else reads it, naming the attribute and never its value, and says
  where a PIN comes from: securesystemslib's ``HSMSigner`` takes no PIN from
  its URI (``hsm:[KEYID][?label=LABEL]``); it asks a callback, and
  modelseal's reads the environment variable ``MODELSEAL_HSM_PIN``.
"""

from __future__ import annotations

import re
import urllib.parse

from modelseal.errors import UsageError
from modelseal.text import printable

__all__ = ["PIN_VARIABLE", "pin_attributes", "refuse_pin", "shown"]

PIN_VARIABLE = "MODELSEAL_HSM_PIN"
_KNOWN = frozenset({"pin-value", "pin-source"})
# where a shown reference ends: a query, fragment, path attribute or "&"; a percent-escape or a
# space (either may hide what follows); and any pin-* name, wherever it stands
_CUT = re.compile(r"[;?#&%\s]|(?<![a-z0-9])pin[-_]", re.IGNORECASE)
# an attribute named pin-* (or pin_*, a slip of the hand): at the start of a component, before "=",
# a space, a separator or the end
_PIN = re.compile(r"(?<![a-z0-9])(pin[-_][a-z0-9_-]*)(?=\s|=|[;&?#]|$)", re.IGNORECASE)


def shown(ref: str) -> str:
    """``ref`` as a message may show it: no query, fragment or path attribute, nothing from a
    ``pin-*`` name or a percent-escape on; escaped."""
    return printable(_CUT.split(ref, maxsplit=1)[0])


def pin_attributes(ref: str) -> list[str]:
    """The ``pin-*`` attributes ``ref`` carries anywhere (lowercase names, each once)."""
    text, found = ref, []
    for _ in range(4):  # %2570 decodes to %70, then to p: a reader may decode more than once
        found += [m.group(1).lower() for m in _PIN.finditer(text)]
        decoded = urllib.parse.unquote(text)
        if decoded == text:
            break
        text = decoded
    return sorted(set(found))


def refuse_pin(ref: str) -> None:
    """Refuse a reference that carries a PIN (or says where to read one), never quoting it.

    Raises:
        UsageError: ``ref`` carries a ``pin-*`` attribute.
    """
    names = pin_attributes(ref)
    if names:
        # only RFC 7512's names are repeated: another "pin-..." may hold the PIN in its name
        named = [n for n in names if n in _KNOWN] + (["a pin-* attribute"] if set(names) - _KNOWN else [])
        raise UsageError(
            f"signer {shown(ref)}: a PIN never goes in a signer URI ({', '.join(named)} refused; it would"
            f" show in shell history, process lists and logs): remove it and set {PIN_VARIABLE} to the"
            " token's user PIN (from a CI secret or a Kubernetes Secret)"
        )
