"""The YAML reader for trust policy files: safe, strict about duplicate keys.

Kept apart from :mod:`modelseal.attest.policy.trust` so that PyYAML is imported only
when a policy file is read, not by every ``modelseal verify``.
"""

from __future__ import annotations

from typing import Any

import yaml

from modelseal.errors import PolicyFileError

__all__ = ["load_policy_yaml"]

MAX_NUMBER_LENGTH = 100


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader that refuses duplicate mapping keys instead of keeping the last."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node)


def _construct_int(loader: _UniqueKeyLoader, node: yaml.ScalarNode) -> Any:
    # Python refuses to read an integer past 4300 digits with a ValueError, not a YAMLError
    if len(node.value) > MAX_NUMBER_LENGTH:
        raise yaml.constructor.ConstructorError(
            None, None, f"a number of {len(node.value)} digits, too long to read", node.start_mark
        )
    return loader.construct_yaml_int(node)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
# Timestamps stay strings, so pydantic parses them and requires a time zone.
_UniqueKeyLoader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_policy_yaml(text: str | bytes, source: str) -> Any:
    """Parse a policy document.

    Raises:
        PolicyFileError: not valid YAML (with its line), or a duplicate key.
    """
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).split("\n")[0]
        raise PolicyFileError(f"{source}: not valid YAML{at}: {problem}") from None
    except RecursionError:  # PyYAML composes and constructs nested nodes recursively
        raise PolicyFileError(f"{source}: not valid YAML: nested too deeply") from None
