"""llama.cpp's common/arg.cpp for the engine catalogue generator (engine_catalogue.py): a small
C++ tokenizer that reads each common_arg({...}) entry llama-server accepts. Python 3 standard
library only."""

import re
from pathlib import Path

from catalogue_common import CatalogueError, add_flag, first_sentence, is_deprecated_text, new_flag


def cpp_skip(text, i):
    """If a string/char literal, raw string or comment starts at i, the index after it."""
    c = text[i]
    if text.startswith("//", i):
        j = text.find("\n", i)
        return len(text) if j < 0 else j
    if text.startswith("/*", i):
        j = text.find("*/", i + 2)
        return len(text) if j < 0 else j + 2
    m = re.match(r'R"([^()\\ ]{0,16})\(', text[i:])
    if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
        end = text.find(")" + m.group(1) + '"', i + m.end())
        if end < 0:
            raise CatalogueError("unterminated raw string literal")
        return end + len(m.group(1)) + 2
    if c in "\"'":
        j = i + 1
        while j < len(text) and text[j] != c:
            j += 2 if text[j] == "\\" else 1
        if j >= len(text):
            raise CatalogueError("unterminated literal")
        return j + 1
    return None


def cpp_balanced(text, open_at):
    """Index of the bracket closing the one at open_at (literals and comments skipped)."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    stack = [pairs[text[open_at]]]
    i = open_at + 1
    while i < len(text):
        skip = cpp_skip(text, i)
        if skip is not None:
            i = skip
            continue
        c = text[i]
        if c in pairs:
            stack.append(pairs[c])
        elif c in ")}]":
            if c != stack.pop():
                raise CatalogueError(f"unbalanced {c!r} at offset {i}")
            if not stack:
                return i
        i += 1
    raise CatalogueError(f"unclosed bracket at offset {open_at}")


def cpp_split_args(text):
    """Splits a C++ argument list at its top-level commas."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        skip = cpp_skip(text, i)
        if skip is not None:
            i = skip
            continue
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
        i += 1
    if text[start:].strip():
        parts.append(text[start:].strip())
    return parts


def cpp_strings(text):
    """The string literals of an expression, unescaped (adjacent literals stay separate)."""
    out = []
    i = 0
    while i < len(text):
        if text[i] == '"' and not text.startswith("//", i):
            j = cpp_skip(text, i)
            out.append(bytes(text[i + 1 : j - 1], "utf-8").decode("unicode_escape", "replace"))
            i = j
            continue
        skip = cpp_skip(text, i)
        i = skip if skip is not None else i + 1
    return out


def cpp_leading_text(expr):
    """The help text an expression starts with: its leading adjacent string literals."""
    m = re.match(r'\s*(?:string_format\s*\(\s*)?((?:"(?:[^"\\]|\\.)*"\s*)+)', expr)
    if not m:
        strings = cpp_strings(expr)
        return strings[0] if strings else ""
    return "".join(cpp_strings(m.group(1)))


def parse_llama_server(src):
    path = Path(src) / "common/arg.cpp"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise CatalogueError(f"{path}: {e.strerror}") from e

    # ggml_type_name(GGML_TYPE_Q8_0) is "q8_0": the enum name without its prefix, lower case
    # (ggml/src/ggml.c type_traits .type_name).
    m = re.search(r"kv_cache_types\s*=\s*\{", text)
    if not m:
        raise CatalogueError(f"{path}: no kv_cache_types list")
    body = text[m.end() : cpp_balanced(text, m.end() - 1)]
    kv_types = [t.lower() for t in re.findall(r"GGML_TYPE_(\w+)", body)]

    named_lists = {}
    for lm in re.finditer(r"std::initializer_list<enum llama_example>\s+(\w+)\s*=\s*\{", text):
        end = cpp_balanced(text, lm.end() - 1)
        named_lists[lm.group(1)] = set(re.findall(r"LLAMA_EXAMPLE_\w+", text[lm.end() : end]))

    flags = {}
    count = 0
    for am in re.finditer(r"\badd_opt\s*\(\s*common_arg\s*\(", text):
        open_paren = am.end() - 1
        close = cpp_balanced(text, open_paren)
        add_close = cpp_balanced(text, text.index("(", am.start()))
        args = cpp_split_args(text[open_paren + 1 : close])
        chain = text[close + 1 : add_close]
        count += 1
        llama_entry(args, chain, named_lists, kv_types, flags, path, text.count("\n", 0, am.start()) + 1)
    if count == 0:
        raise CatalogueError(f"{path}: no add_opt(common_arg(...)) entries")
    return flags, {"kv_cache_dtypes": kv_types}


def llama_entry(args, chain, named_lists, kv_types, flags, path, line):
    """One common_arg: {args}, optional {args_neg}, optional value hints, help, handler.
    llama-server gets it when its examples include LLAMA_EXAMPLE_SERVER or LLAMA_EXAMPLE_COMMON
    (the default) and its excludes do not name LLAMA_EXAMPLE_SERVER (the add_opt filter of
    common_params_parser_init). A void or bool handler consumes no value; the others one."""
    lists = []
    while args and args[0].startswith("{"):
        lists.append(cpp_strings(args.pop(0)))
    if not lists or not args or not args[-1].lstrip().startswith("["):
        raise CatalogueError(f"{path}:{line}: common_arg shape not understood")
    handler = args.pop()
    rest = args  # [value_hint, [value_hint_2,]] help
    hint = cpp_strings(rest[0])[0] if len(rest) >= 2 and cpp_strings(rest[0]) else None
    help_text = cpp_leading_text(rest[-1]) if rest else ""
    sig = re.match(r"\s*\[[^\]]*\]\s*\(([^)]*)\)", handler)
    params = [p.strip() for p in sig.group(1).split(",")] if sig else []
    takes_value = len(params) > 1 and not re.match(r"bool\b", params[1])

    examples = {"LLAMA_EXAMPLE_COMMON"}
    excludes = set()
    for cm in re.finditer(r"\.set_(examples|excludes)\s*\(", chain):
        end = cpp_balanced(chain, cm.end() - 1)
        inner = chain[cm.end() : end].strip()
        values = set(re.findall(r"LLAMA_EXAMPLE_\w+", inner))
        if not values and inner in named_lists:
            values = named_lists[inner]
        if cm.group(1) == "examples":
            examples = values
        else:
            excludes = values
    if not (examples & {"LLAMA_EXAMPLE_SERVER", "LLAMA_EXAMPLE_COMMON"}) or "LLAMA_EXAMPLE_SERVER" in excludes:
        return

    choices = None
    if takes_value and hint:
        hm = re.fullmatch(r"\{([\w.+-]+(?:,\s*[\w.+-]+)+)\}", hint) or re.fullmatch(
            r"[\[<]([\w.+-]+(?:\|[\w.+-]+)+)[\]>]", hint
        )
        if hm:
            choices = [c.strip() for c in re.split(r"[,|]", hm.group(1))]
    if takes_value and "get_all_kv_cache_types()" in rest[-1]:
        choices = list(kv_types)
    names = lists[0] + (lists[1] if len(lists) > 1 else [])
    add_flag(flags, names, takes_value=takes_value, choices=choices,
             deprecated=is_deprecated_text(help_text), help_text=help_text)


# --------------------------------------------------------------------------------------------
# TensorRT-LLM: trtllm-serve's click options
# --------------------------------------------------------------------------------------------
