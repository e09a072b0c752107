"""Keywords to command-line arguments.

Every function of this package passes its keywords to the Rust core as the arguments of the
matching ``raidforge`` command, which parses them with the CLI's own definitions: the same
defaults, the same checks, the same error messages. A keyword is the option's name with
dashes as underscores (``member_size=`` is ``--member-size``); ``None`` leaves an option at the
CLI's default.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Dict, List, Mapping, NamedTuple, Tuple

from . import _native


class Option(NamedTuple):
    """One option of a CLI command, as clap defines it."""

    keyword: str
    flag: str
    kind: str  # "flag", "list", "csv", "positional" or "value"
    help: str
    defaults: Tuple[str, ...]
    required: bool


@functools.lru_cache(maxsize=None)
def options(command: str) -> Dict[str, Option]:
    """The options of ``command`` (``sim``, ``layout_show``, ...), by keyword."""
    return {
        o[0]: Option(o[0], o[1], o[2], o[3], tuple(o[4]), o[5]) for o in _native.options(command)
    }


def _text(value: Any) -> str:
    if isinstance(value, bool):
        raise TypeError(f"{value!r} is a switch value where the option takes a value")
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return str(value)


def argv(command: str, func: str, kwargs: Mapping[str, Any]) -> List[str]:
    """The arguments of ``raidforge <command>`` for these keywords.

    Raises ``TypeError`` (as Python does) for a keyword the command does not have; values
    are checked by the CLI's parser, whose message a ``RaidforgeError`` carries.
    """
    known = options(command)
    args: List[str] = []
    positional: List[str] = []
    for key, value in kwargs.items():
        opt = known.get(key)
        if opt is None:
            raise TypeError(
                f"{func}() got an unexpected keyword argument {key!r}; "
                f"it takes: {', '.join(sorted(known))}"
            )
        if value is None:
            continue
        if opt.kind == "flag":
            if not isinstance(value, bool):
                raise TypeError(f"{func}(): {key} is a switch: pass True or False, not {value!r}")
            if value:
                args.append(opt.flag)
        elif opt.kind == "positional":
            positional.append(_text(value))
        elif opt.kind == "csv":
            if isinstance(value, (list, tuple, range)):
                if len(value) == 0:
                    continue
                value = ",".join(_text(v) for v in value)
            args += [opt.flag, _text(value)]
        elif opt.kind == "list":
            values = value if isinstance(value, (list, tuple)) else [value]
            for v in values:
                args += [opt.flag, _text(v)]
        else:
            args += [opt.flag, _text(value)]
    return positional + args


def doc_table(command: str, skip: Tuple[str, ...] = ()) -> str:
    """The keywords of ``command`` with the CLI's help text, for docstrings."""
    lines = []
    for o in options(command).values():
        if o.keyword in skip:
            continue
        default = f" (default {', '.join(o.defaults)})" if o.defaults else ""
        help_text = " ".join(o.help.split())
        lines.append(f"    {o.keyword}: {help_text}{default}")
    return "\n".join(lines)
