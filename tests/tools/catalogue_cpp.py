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


def cpp_strip_comments(text):
    """`text` without its // and /* */ comments (literals kept as they are)."""
    out, i, start = [], 0, 0
    while i < len(text):
        skip = cpp_skip(text, i)
        if skip is None:
            i += 1
            continue
        if text.startswith("//", i) or text.startswith("/*", i):
            out.append(text[start:i])
            start = skip
        i = skip
    out.append(text[start:])
    return "".join(out).strip()


def cpp_read_file(src, rel):
    path = Path(src) / rel
    try:
        return path, path.read_text(encoding="utf-8")
    except OSError as e:
        raise CatalogueError(f"{path}: {e.strerror}") from e


def parsed_example(src, rel):
    """The LLAMA_EXAMPLE_* a tool passes to common_params_parse (its main, e.g. tools/server)."""
    path, text = cpp_read_file(src, rel)
    m = re.search(r"\bcommon_params_parse\s*\([^;]*?\b(LLAMA_EXAMPLE_\w+)", text)
    if not m:
        raise CatalogueError(f"{path}: no common_params_parse(..., LLAMA_EXAMPLE_*) call")
    return m.group(1)


# The tools whose parsers the llama_server catalogue follows: llama-server itself and
# llama-fit-params (berth's engine check hands it the model-related flags).
LLAMA_TOOLS = {"server": "tools/server/server.cpp", "fit_params": "tools/fit-params/fit-params.cpp"}


def parse_llama_server(src):
    path, text = cpp_read_file(src, "common/arg.cpp")
    examples = {tool: parsed_example(src, rel) for tool, rel in LLAMA_TOOLS.items()}

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
    # Helpers that append to a list they take by reference: {name: that parameter's position}.
    appending_helpers = {}
    for hm in re.finditer(r"^static\s+[\w:<>\s]+?\b(\w+)\s*\(", text, re.M):
        close = cpp_balanced(text, hm.end() - 1)
        bm = re.compile(r"\s*\{").match(text, close + 1)
        if not bm:
            continue
        body = text[bm.end() : cpp_balanced(text, bm.end() - 1)]
        for pos, param in enumerate(cpp_split_args(text[hm.end() : close])):
            pm = re.search(r"(?<!const )\b[\w:<>]+\s*&\s*(\w+)$", param)
            if pm and re.search(rf"\b{pm.group(1)}\.(push_back|emplace_back)\s*\(", body):
                appending_helpers[hm.group(1)] = pos
    body_open = None
    for fm in re.finditer(r"\bcommon_params_context\s+common_params_parser_init\s*\(", text):
        bm = re.compile(r"\s*\{").match(text, cpp_balanced(text, fm.end() - 1) + 1)
        if bm:
            body_open = bm.end() - 1
    if body_open is None:
        raise CatalogueError(f"{path}: no common_params_parser_init definition")
    entries = []
    llama_walk(text, body_open + 1, cpp_balanced(text, body_open), [], entries, path)
    if not entries:
        raise CatalogueError(f"{path}: no add_opt(common_arg(...)) entries")

    # Every spelling each tool accepts (llama.cpp's add_opt filter, per tool's example).
    accepted = {tool: {} for tool in examples}
    for e in entries:
        e.update(llama_entry(e, named_lists, kv_types, appending_helpers, path))
        for tool, ex in examples.items():
            if llama_accepts(e, ex, path):
                for name in e["names"]:
                    accepted[tool][name] = e
    flags = {}
    for e in {id(e): e for e in accepted["server"].values()}.values():
        add_flag(flags, e["names"], takes_value=e["values"] > 0, choices=e["choices"],
                 deprecated=is_deprecated_text(e["help"]), help_text=e["help"])
        flag = flags[next(n for n in e["names"] if n in flags)]
        flag.update({
            "values": e["values"],
            "env": e["env"],
            "negatable": bool(e["negative"]),
            "negative_aliases": e["negative"],
            "repeatable": e["repeatable"],
            "fit_params": all(n in accepted["fit_params"] for n in e["names"]),
            "only_if": e["only_if"],
        })
    return flags, {"kv_cache_dtypes": kv_types}


def llama_walk(text, i, end, conditions, entries, path):
    """Collects the add_opt(...) statements of a block, each with the if-conditions around it.
    Other statements are skipped; one that hides an add_opt where this does not look (a loop, a
    lambda) is an error, so no entry is dropped silently."""
    while i < end:
        skip = cpp_skip(text, i)
        if skip is not None:
            i = skip
            continue
        if text[i].isspace() or text[i] == ";":
            i += 1
            continue
        m = re.compile(r"(if|add_opt)\s*\(").match(text, i)
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = cpp_balanced(text, m.end() - 1)
            if m.group(1) == "add_opt":
                entries.append({"call": text[m.end() : close], "conditions": list(conditions),
                                "line": text.count("\n", 0, i) + 1})
                i = close + 1
                continue
            i = llama_if(text, m.end() - 1, close, end, conditions, entries, path)
            continue
        # Any other statement: up to its ';' at this depth (brackets skipped whole).
        j = i
        while j < end and text[j] != ";":
            s = cpp_skip(text, j)
            if s is not None:
                j = s
            elif text[j] in "([{":
                j = cpp_balanced(text, j) + 1
            else:
                j += 1
        statement = text[i:j]
        if re.search(r"\badd_opt\s*\(", statement) and not re.match(r"\s*auto\s+add_opt\s*=", statement):
            line = text.count("\n", 0, i) + 1
            raise CatalogueError(f"{path}:{line}: add_opt inside a statement not understood")
        i = j + 1


def llama_if(text, open_paren, close, end, conditions, entries, path):
    """An if statement whose condition is text[open_paren..close]: both branches walked, each
    with the condition as it holds there. The index after the statement."""
    cond = " ".join(cpp_strip_comments(text[open_paren + 1 : close]).split())
    i = llama_branch(text, close + 1, end, conditions + [(cond, True)], entries, path)
    em = re.compile(r"\s*else\b").match(text, i)
    if em:
        i = llama_branch(text, em.end(), end, conditions + [(cond, False)], entries, path)
    return i


def llama_branch(text, i, end, conditions, entries, path):
    """One branch of an if: a { block }, an else-if, or a single statement. The index after it."""
    while text[i].isspace():
        i += 1
    if text[i] == "{":
        close = cpp_balanced(text, i)
        llama_walk(text, i + 1, close, conditions, entries, path)
        return close + 1
    m = re.compile(r"if\s*\(").match(text, i)
    if m:
        close = cpp_balanced(text, m.end() - 1)
        return llama_if(text, m.end() - 1, close, end, conditions, entries, path)
    j = text.index(";", i)
    llama_walk(text, i, j + 1, conditions, entries, path)
    return j + 1


def llama_accepts(entry, example, path):
    """llama.cpp's add_opt filter for the tool parsing with `example`: the entry's examples
    include it or LLAMA_EXAMPLE_COMMON, its excludes do not name it, and the if-conditions
    around the add_opt that test `ex` hold (others, e.g. llama_supports_rpc(), are recorded in
    only_if)."""
    for cond, holds in entry["conditions"]:
        cm = re.fullmatch(r"ex\s*(==|!=)\s*(LLAMA_EXAMPLE_\w+)", cond)
        if cm:
            if ((cm.group(2) == example) == (cm.group(1) == "==")) != holds:
                return False
        elif re.search(r"\bex\b", cond):
            raise CatalogueError(f"{path}:{entry['line']}: condition not understood: {cond}")
    examples = entry["examples"]
    return (example in examples or "LLAMA_EXAMPLE_COMMON" in examples) and example not in entry["excludes"]


def llama_entry(entry, named_lists, kv_types, appending_helpers, path):
    """One add_opt(common_arg(...).set_...()) call, in the shapes of common/arg.h's constructors:
    {args}, help, void handler; {args}, {args_neg}, help, bool handler; {args}, hint, help, handler
    of one value (string or int); {args}, hint, hint_2, help, handler of two strings."""
    call, line = entry["call"], entry["line"]
    m = re.match(r"\s*common_arg\s*\(", call)
    if not m:
        raise CatalogueError(f"{path}:{line}: add_opt without common_arg(...)")
    close = cpp_balanced(call, m.end() - 1)
    args = [cpp_strip_comments(a) for a in cpp_split_args(call[m.end() : close])]
    chain = call[close + 1 :]
    lists = []
    while args and args[0].startswith("{"):
        lists.append(cpp_strings(args.pop(0)))
    if not lists or not args or not args[-1].startswith("["):
        raise CatalogueError(f"{path}:{line}: common_arg shape not understood")
    handler = args.pop()
    sig = re.match(r"\[[^\]]*\]\s*\(([^)]*)\)", handler)
    params = [p.strip() for p in sig.group(1).split(",")] if sig else []
    if len(params) == 1 or (len(params) == 2 and re.match(r"bool\b", params[1])):
        values = 0
    elif len(params) in (2, 3):
        values = len(params) - 1
    else:
        raise CatalogueError(f"{path}:{line}: handler signature not understood")
    if len(args) != values + 1 or (len(lists) == 2) != (len(params) == 2 and values == 0):
        raise CatalogueError(f"{path}:{line}: common_arg shape not understood")
    hint_strings = cpp_strings(args[0]) if values else []
    hint = hint_strings[0] if hint_strings else None
    help_text = cpp_leading_text(args[-1])

    examples, excludes, env = {"LLAMA_EXAMPLE_COMMON"}, set(), None
    for cm in re.finditer(r"\.set_(examples|excludes|env)\s*\(", chain):
        end = cpp_balanced(chain, cm.end() - 1)
        inner = chain[cm.end() : end].strip()
        if cm.group(1) == "env":
            env = (cpp_strings(inner) or [None])[0]
            continue
        found = set(re.findall(r"LLAMA_EXAMPLE_\w+", inner))
        if not found and inner in named_lists:
            found = named_lists[inner]
        if cm.group(1) == "examples":
            examples = found
        else:
            excludes = found

    choices = None
    if values == 1 and hint:
        hm = re.fullmatch(r"\{([\w.+-]+(?:,\s*[\w.+-]+)+)\}", hint) or re.fullmatch(
            r"[\[<]([\w.+-]+(?:\|[\w.+-]+)+)[\]>]", hint
        )
        if hm:
            choices = [c.strip() for c in re.split(r"[,|]", hm.group(1))]
    if values == 1 and "get_all_kv_cache_types()" in args[-1]:
        choices = list(kv_types)

    # Repeatable: the handler adds the value to a list in params (push_back, emplace_back or
    # insert, directly or through a helper of arg.cpp that does) and never clears it, so a
    # second use adds to the first instead of replacing it.
    body = handler[sig.end() :]
    appends = bool(re.search(r"\bparams\.[\w.]+\.(push_back|emplace_back|insert)\s*\(", body))
    for helper, pos in appending_helpers.items():
        for hm in re.finditer(rf"\b{helper}\s*\(", body):
            call_args = cpp_split_args(body[hm.end() : cpp_balanced(body, hm.end() - 1)])
            appends |= pos < len(call_args) and call_args[pos].startswith("params.")
    repeatable = values > 0 and bool(appends) and not re.search(r"\bparams\.[\w.]+\.clear\s*\(", body)
    only_if = [c if holds else f"!({c})" for c, holds in entry["conditions"] if not re.search(r"\bex\b", c)]
    return {
        "names": lists[0] + (lists[1] if len(lists) > 1 else []),
        "negative": lists[1] if len(lists) > 1 else [],
        "values": values,
        "hint": hint,
        "help": help_text,
        "choices": choices,
        "env": env,
        "examples": examples,
        "excludes": excludes,
        "repeatable": repeatable,
        "only_if": " && ".join(only_if) or None,
    }

