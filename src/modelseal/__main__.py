"""``python -m modelseal``."""

from modelseal.cli import entry

entry()
