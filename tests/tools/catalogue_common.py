"""What the engine catalogue generator's parsers share (engine_catalogue.py): the error, the
flag record and reading a Python source. Python 3 standard library only."""

import ast
import re
from pathlib import Path


class CatalogueError(Exception):
    pass


# --------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------


def first_sentence(text):
    text = " ".join((text or "").split())
    m = re.search(r"(?<=[.!?])\s", text)
    if m:
        text = text[: m.start()]
    return text[:240]


def is_deprecated_text(text):
    return bool(text) and "deprecated" in text.lower()


def new_flag(aliases=(), takes_value=True, choices=None, deprecated=False, help_text=""):
    return {
        "aliases": list(aliases),
        "takes_value": bool(takes_value),
        "choices": choices,
        "deprecated": bool(deprecated),
        "help": first_sentence(help_text),
    }


def add_flag(flags, names, **kw):
    """Registers option strings `names`; the first long one ("--x") is the flag's name."""
    names = [n for n in names if isinstance(n, str) and n.startswith("-")]
    if not names:
        return
    longs = [n for n in names if n.startswith("--")]
    name = longs[0] if longs else names[0]
    aliases = [n for n in names if n != name]
    flags[name] = new_flag(aliases, **kw)


def read_py(src, rel):
    path = Path(src) / rel
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise CatalogueError(f"{path}: {e.strerror}") from e
    try:
        return ast.parse(text, filename=str(path))
    except SyntaxError as e:
        raise CatalogueError(f"{path}:{e.lineno}: not Python: {e.msg}") from e
