"""``python -m privgames.analysis`` is the ``privgames`` command."""

from privgames.analysis.cli import command

command()
