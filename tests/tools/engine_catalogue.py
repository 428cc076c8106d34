#!/usr/bin/python3
"""Generate berth's flag catalogue of one serving engine from that engine's own source.

    engine_catalogue.py ENGINE --src DIR --release TAG --commit SHA -o planners/servers/catalogue/ENGINE.json

ENGINE is vllm, sglang, llama_server or trtllm. DIR holds the engine's source files under their
paths in the engine's repository (SOURCES below names the files each engine needs; a file may be
an excerpt as long as what is kept is copied verbatim). Nothing here lists flags by hand: every
flag, alias, value rule, choice list and table is read out of those files, with the engine's own
derivation rules (cited below where berth has to re-implement one, e.g. vLLM's get_kwargs).

How to regenerate (the files checked in were made from the commits in their "commit" field; see
docs/engines.md for the exact commands):
  1. Put the files of SOURCES[ENGINE] at the release you check against under DIR, e.g. with
     `git show <commit>:<path>` from a clone of the engine.
  2. Run this script for the engine; diff the JSON; run the catalogue tests
     (ctest -R 'engine_catalogue|Catalogue').
  --source-commit PATH=SHA records files taken from another commit than --commit.

Python 3 standard library only.
"""

import argparse
import ast
import json
import re
import sys
from pathlib import Path

SOURCES = {
    "vllm": [
        "vllm/engine/arg_utils.py",
        "vllm/entrypoints/openai/cli_args.py",
        "vllm/config/cache.py",
        "vllm/config/speculative.py",
        "vllm/model_executor/models/registry.py",
        "vllm/entrypoints/openai/tool_parsers/__init__.py",
        "vllm/reasoning/__init__.py",
    ],
    "sglang": [
        "python/sglang/srt/server_args.py",
        "python/sglang/cli/main.py",
        "python/sglang/srt/function_call/function_call_parser.py",
        "python/sglang/srt/parser/reasoning_parser.py",
    ],
    "llama_server": ["common/arg.cpp", "tools/server/server.cpp", "tools/fit-params/fit-params.cpp"],
    "trtllm": ["tensorrt_llm/commands/serve.py"],
}

# argparse / click actions that consume no value.
NO_VALUE_ACTIONS = {"store_true", "store_false", "store_const", "count", "help", "version"}


from catalogue_common import CatalogueError, add_flag, first_sentence, is_deprecated_text, new_flag, read_py  # noqa: E402,F401
from catalogue_cpp import parse_llama_server  # noqa: E402,F401


def const_str(node):
    """A string constant, implicit concatenations and "a" + "b" included; f-strings give their
    constant parts. None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = const_str(node.left), const_str(node.right)
        if left is not None or right is not None:
            return (left or "") + (right or "")
    if isinstance(node, ast.Tuple) and node.elts:
        parts = [const_str(e) for e in node.elts]
        if all(p is not None for p in parts):
            return "".join(parts)
    return None


def dotted(node):
    """'a.b.c' for a Name/Attribute chain, '' otherwise."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def call_kwargs(call):
    return {k.arg: k.value for k in call.keywords if k.arg is not None}


def module_constants(trees):
    """NAME = [..] / (..) / {..} of constants and NAME = OTHER aliases at module level."""
    out = {}
    for tree in trees:
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target = stmt.targets[0]
                if isinstance(target, ast.Name):
                    out[target.id] = stmt.value
    return out


def const_list(node, env, tables=None, depth=0):
    """Evaluates a choices expression to a list of strings, or None where it is not static."""
    if depth > 20 or node is None:
        return None
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        vals = []
        for e in node.elts:
            if isinstance(e, ast.Constant) and isinstance(e.value, (str, int)):
                vals.append(str(e.value))
            else:
                return None
        return vals
    if isinstance(node, ast.Name):
        if node.id in env:
            return const_list(env[node.id], env, tables, depth + 1)
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = const_list(node.left, env, tables, depth + 1)
        right = const_list(node.right, env, tables, depth + 1)
        if left is None or right is None:
            return None
        return left + right
    if isinstance(node, ast.Call) and dotted(node.func) == "list" and len(node.args) == 1:
        return const_list(node.args[0], env, tables, depth + 1)
    # Registry.keys() / list(Registry): the table the engine fills from that registry.
    if tables is not None:
        name = dotted(node.func) if isinstance(node, ast.Call) else dotted(node)
        for attr, table in tables.items():
            if attr in name.split("."):
                return list(table) if table is not None else None
    return None


def dict_keys(tree, name):
    """String keys of a dict literal assigned to `name` (module or class level)."""
    for node in ast.walk(tree):
        value = None
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            value = node.value
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == name
        ):
            value = node.value
        if isinstance(value, ast.Dict):
            return [k.value for k in value.keys if isinstance(k, ast.Constant)]
    return None


def find_class(trees, name):
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name == name:
                return node
    return None


def find_function(node, name):
    for sub in ast.walk(node):
        if isinstance(sub, ast.FunctionDef) and sub.name == name:
            return sub
    return None


# --------------------------------------------------------------------------------------------
# Type hints (vLLM and SGLang both derive flags from dataclass annotations)
# --------------------------------------------------------------------------------------------


def flatten_hint(node, aliases, depth=0):
    """The set of leaves of a type hint: Unions (X | Y, Optional, Union) and Annotated are
    unwrapped, type aliases (X = Literal[...]) resolved. Literal leaves come back as
    ("Literal", [values]); other leaves as their dotted name ("bool", "str", "None", ...)."""
    out = []
    if depth > 20 or node is None:
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return flatten_hint(node.left, aliases, depth + 1) + flatten_hint(
            node.right, aliases, depth + 1
        )
    if isinstance(node, ast.Constant) and node.value is None:
        return ["None"]
    if isinstance(node, ast.Subscript):
        base = dotted(node.value).split(".")[-1]
        inner = node.slice
        elts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
        if base in ("Optional",):
            return flatten_hint(elts[0], aliases, depth + 1) + ["None"]
        if base == "Union":
            for e in elts:
                out += flatten_hint(e, aliases, depth + 1)
            return out
        if base in ("Annotated", "A", "SkipValidation"):
            return flatten_hint(elts[0], aliases, depth + 1)
        if base == "Literal":
            return [("Literal", literal_values(node, aliases))]
        return [base]
    name = dotted(node)
    if name in aliases and depth < 20:
        return flatten_hint(aliases[name], aliases, depth + 1)
    return [name.split(".")[-1] if name else "?"]


def literal_values(node, aliases, depth=0):
    """The values of Literal[...], nested Literal aliases flattened, in source order."""
    vals = []
    if depth > 20:
        return vals
    if isinstance(node, ast.Subscript) and dotted(node.value).split(".")[-1] == "Literal":
        inner = node.slice
        for e in inner.elts if isinstance(inner, ast.Tuple) else [inner]:
            vals += literal_values(e, aliases, depth + 1)
        return vals
    if isinstance(node, ast.Constant):
        return [node.value]
    name = dotted(node)
    if name in aliases:
        return literal_values(aliases[name], aliases, depth + 1)
    return vals


def literal_aliases(trees):
    out = {}
    for tree in trees:
        for stmt in tree.body:
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, (ast.Subscript, ast.BinOp))
            ):
                out[stmt.targets[0].id] = stmt.value
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                if dotted(stmt.annotation) == "TypeAlias" and stmt.value is not None:
                    out[stmt.target.id] = stmt.value
    return out


def class_fields(cls):
    """[(name, annotation, default, docstring)] of a dataclass body, in order."""
    fields = []
    body = cls.body
    for i, stmt in enumerate(body):
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            doc = ""
            if i + 1 < len(body):
                nxt = body[i + 1]
                if isinstance(nxt, ast.Expr):
                    doc = const_str(nxt.value) or ""
            fields.append((stmt.target.id, stmt.annotation, stmt.value, doc))
    return fields


# --------------------------------------------------------------------------------------------
# vLLM
# --------------------------------------------------------------------------------------------


def vllm_kwargs_rule(hint, aliases):
    """vLLM's own rule, vllm/engine/arg_utils.py `_compute_kwargs` (what `get_kwargs` returns for a
    config dataclass field): a bool field gets argparse.BooleanOptionalAction (so --x and --no-x,
    no value); a Literal field gets choices=sorted(values) unless str is also allowed (then only a
    metavar); Optional adds "None" to the choices; everything else takes one value (or nargs for
    list/tuple/set). Dataclass-typed fields take a JSON value. Returns (takes_value, choices,
    negatable)."""
    leaves = flatten_hint(hint, aliases)
    names = {leaf for leaf in leaves if isinstance(leaf, str)}
    literals = [leaf[1] for leaf in leaves if isinstance(leaf, tuple)]
    if "bool" in names:
        return False, None, True
    if literals:
        if "str" in names:
            return True, None, False
        values = []
        for lv in literals:
            values += [str(v) for v in lv]
        choices = sorted(set(values))
        if "None" in names:
            choices.append("None")
        return True, choices, False
    return True, None, False


def parse_vllm(src):
    trees = {rel: read_py(src, rel) for rel in SOURCES["vllm"]}
    all_trees = list(trees.values())
    aliases = literal_aliases(all_trees)

    tables = {}
    archs = []
    for stmt in trees["vllm/model_executor/models/registry.py"].body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Dict):
            target = stmt.targets[0]
            if isinstance(target, ast.Name) and target.id.endswith("_MODELS"):
                archs += [k.value for k in stmt.value.keys if isinstance(k, ast.Constant)]
    tables["architectures"] = sorted(set(archs))
    tables["tool_call_parsers"] = registry_names(
        trees["vllm/entrypoints/openai/tool_parsers/__init__.py"],
        "_TOOL_PARSERS_TO_REGISTER",
        "ToolParserManager",
    )
    tables["reasoning_parsers"] = registry_names(
        trees["vllm/reasoning/__init__.py"], "_REASONING_PARSERS_TO_REGISTER", "ReasoningParserManager"
    )
    if "SpeculativeMethod" not in aliases:
        raise CatalogueError("vllm/config/speculative.py: no SpeculativeMethod Literal")
    tables["speculative_methods"] = [str(v) for v in literal_values(aliases["SpeculativeMethod"], aliases)]
    mtp_types = set(str(v) for v in literal_values(aliases.get("MTPModelTypes"), aliases))
    model_types, archs_mtp = vllm_mtp_sources(trees["vllm/config/speculative.py"], mtp_types)
    tables["mtp_model_types"] = model_types
    tables["mtp_architectures"] = archs_mtp
    if "CacheDType" not in aliases:
        raise CatalogueError("vllm/config/cache.py: no CacheDType Literal")
    tables["kv_cache_dtypes"] = [str(v) for v in literal_values(aliases["CacheDType"], aliases)]

    # Field annotations: the config classes present in the sources, and EngineArgs, whose fields
    # name the config field they mirror (`kv_cache_dtype: CacheDType = CacheConfig.cache_dtype`).
    hints = {}
    for tree in all_trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for name, ann, _, doc in class_fields(node):
                    hints[(node.name, name)] = (ann, doc)
    engine_args = find_class(all_trees, "EngineArgs")
    if engine_args is None:
        raise CatalogueError("vllm/engine/arg_utils.py: no class EngineArgs")
    for name, ann, default, doc in class_fields(engine_args):
        ref = None
        if isinstance(default, ast.Attribute):
            ref = (dotted(default.value), default.attr)
        elif isinstance(default, ast.Call) and dotted(default.func) == "get_field" and len(default.args) == 2:
            ref = (dotted(default.args[0]), const_str(default.args[1]))
        if ref and ref not in hints:
            hints[ref] = (ann, doc)

    flags = {}
    registry_tables = {"reasoning_parsers": tables["reasoning_parsers"]}
    for cls_name in ("EngineArgs", "AsyncEngineArgs", "FrontendArgs"):
        cls = find_class(all_trees, cls_name)
        fn = find_function(cls, "add_cli_args") if cls else None
        if fn is None:
            raise CatalogueError(f"vLLM sources: no {cls_name}.add_cli_args")
        vllm_walk(fn.body, {}, {}, hints, aliases, registry_tables, flags)
    make = None
    for tree in all_trees:
        make = make or next(
            (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "make_arg_parser"), None
        )
    if make is None:
        raise CatalogueError("vllm/entrypoints/openai/cli_args.py: no make_arg_parser")
    vllm_walk(make.body, {}, {}, hints, aliases, registry_tables, flags)
    return flags, tables


def registry_names(tree, dict_name, manager):
    """Parser names: keys of the lazy-registration dict, plus names given to
    @Manager.register_module("name" | ["a", "b"]) decorators."""
    names = list(dict_keys(tree, dict_name) or [])
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and dotted(node.func).endswith(f"{manager}.register_module"):
            for arg in node.args[:1]:
                vals = const_list(arg, {}) if not isinstance(arg, ast.Constant) else [arg.value]
                names += [v for v in vals or [] if isinstance(v, str)]
    if not names:
        raise CatalogueError(f"no {dict_name} entries nor {manager}.register_module names")
    return sorted(set(names))


def vllm_mtp_sources(tree, mtp_types):
    """SpeculativeConfig.hf_config_override rewrites a target's config into its MTP draft config:
    `if hf_config.model_type in (...)/== "x": hf_config.model_type = "<mtp type>"`, and the same
    keyed on hf_config.architectures[0]. The model types and architectures so rewritten are the
    ones for which method "mtp" resolves; any other target raises vLLM's
    "Unsupported speculative method"."""
    fn = find_function(tree, "hf_config_override")
    if fn is None:
        raise CatalogueError("vllm/config/speculative.py: no hf_config_override")
    model_types, archs = set(), set()
    for node in ast.walk(fn):
        if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
            continue
        sets_mtp = False
        for stmt in ast.walk(ast.Module(body=node.body, type_ignores=[])):
            if isinstance(stmt, ast.Assign) and any(dotted(t).endswith(".model_type") for t in stmt.targets):
                value = const_str(stmt.value)
                sets_mtp = sets_mtp or (value in mtp_types)
        if not sets_mtp:
            continue
        left = node.test.left
        right = node.test.comparators[0]
        values = const_list(right, {}) if isinstance(right, (ast.Tuple, ast.List)) else [const_str(right)]
        values = [v for v in values or [] if v]
        if dotted(left).endswith(".model_type"):
            model_types.update(v for v in values if v not in mtp_types)
        elif isinstance(left, ast.Subscript) and dotted(left.value).endswith(".architectures"):
            archs.update(values)
    return sorted(model_types), sorted(archs)


def vllm_walk(body, kwargs_vars, env, hints, aliases, registry_tables, flags):
    """Follows add_cli_args: `x_kwargs = get_kwargs(Config)`, `group.add_argument(...)`, and the two
    loops vLLM uses (`for arg, type in [...]` and `for key, value in x_kwargs.items()`)."""
    for stmt in body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
            if dotted(stmt.value.func) == "get_kwargs" and stmt.value.args:
                for t in stmt.targets:
                    if isinstance(t, ast.Name):
                        kwargs_vars[t.id] = dotted(stmt.value.args[0])
        if isinstance(stmt, ast.For):
            vllm_for(stmt, kwargs_vars, env, hints, aliases, registry_tables, flags)
            continue
        if isinstance(stmt, (ast.If, ast.With)):
            vllm_walk(stmt.body, kwargs_vars, env, hints, aliases, registry_tables, flags)
            if isinstance(stmt, ast.If):
                vllm_walk(stmt.orelse, kwargs_vars, env, hints, aliases, registry_tables, flags)
            continue
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and dotted(node.func).endswith("add_argument"):
                vllm_add_argument(node, kwargs_vars, env, hints, aliases, registry_tables, flags)


def vllm_for(stmt, kwargs_vars, env, hints, aliases, registry_tables, flags):
    it = stmt.iter
    # for key, value in x_kwargs.items(): add_argument(f"--{key.replace('_', '-')}", **value)
    # (vllm/entrypoints/openai/cli_args.py FrontendArgs.add_cli_args): one flag per field of the
    # config class, named "--" + field name with "_" -> "-".
    if (
        isinstance(it, ast.Call)
        and isinstance(it.func, ast.Attribute)
        and it.func.attr == "items"
        and dotted(it.func.value) in kwargs_vars
    ):
        cls_name = kwargs_vars[dotted(it.func.value)]
        fields = [(f, h) for (c, f), h in hints.items() if c == cls_name]
        if not fields:
            raise CatalogueError(f"vLLM sources: fields of {cls_name} not found")
        for field, (ann, doc) in fields:
            takes_value, choices, negatable = vllm_kwargs_rule(ann, aliases)
            name = "--" + field.replace("_", "-")
            names = [name] + (["--no-" + field.replace("_", "-")] if negatable else [])
            add_flag(flags, names, takes_value=takes_value, choices=choices,
                     deprecated=is_deprecated_text(doc), help_text=doc)
        return
    # for arg, type in [("--a", str), ...]: add_argument(arg, type=type, ...)
    if isinstance(it, (ast.List, ast.Tuple)) and isinstance(stmt.target, ast.Tuple):
        names = [t.id for t in stmt.target.elts if isinstance(t, ast.Name)]
        for item in it.elts:
            if isinstance(item, ast.Tuple) and len(item.elts) == len(names):
                loop_env = dict(env)
                loop_env.update(zip(names, item.elts))
                vllm_walk(stmt.body, kwargs_vars, loop_env, hints, aliases, registry_tables, flags)
        return
    vllm_walk(stmt.body, kwargs_vars, env, hints, aliases, registry_tables, flags)


def vllm_add_argument(call, kwargs_vars, env, hints, aliases, registry_tables, flags):
    names = []
    for a in call.args:
        if isinstance(a, ast.Name) and a.id in env:
            a = env[a.id]
        s = const_str(a)
        if s is not None:
            names.append(s)
    if not any(n.startswith("-") for n in names):
        return  # a positional (model_tag)
    kw = {k.arg: k.value for k in call.keywords if k.arg is not None}
    splat = [k.value for k in call.keywords if k.arg is None]
    takes_value, choices, negatable, help_text = True, None, False, ""
    deprecated = False
    for s in splat:
        # **x_kwargs["field"]: what get_kwargs derives for that field of the config class.
        if isinstance(s, ast.Subscript) and dotted(s.value) in kwargs_vars:
            field = const_str(s.slice)
            ref = (kwargs_vars[dotted(s.value)], field)
            if ref not in hints:
                # EngineArgs fields without a config default (`io_processor_plugin: str | None =
                # None`) carry the same name as the config field.
                ref = ("EngineArgs", field)
            if ref not in hints:
                raise CatalogueError(f"vLLM sources: no annotation for {ref[0]}.{ref[1]}")
            ann, doc = hints[ref]
            takes_value, choices, negatable = vllm_kwargs_rule(ann, aliases)
            help_text = doc
            deprecated = deprecated or is_deprecated_text(doc)
    if "action" in kw:
        action = kw["action"]
        action_name = const_str(action) or dotted(action).split(".")[-1]
        if action_name == "BooleanOptionalAction":
            takes_value, negatable = False, True
        elif action_name in NO_VALUE_ACTIONS:
            takes_value, negatable = False, False
    elif "type" in kw or "nargs" in kw:
        takes_value = True
        if "type" in kw and dotted(kw["type"]) == "bool" or (
            isinstance(kw.get("type"), ast.Name)
            and kw["type"].id in env
            and dotted(env[kw["type"].id]) == "bool"
        ):
            takes_value = True  # type=bool still consumes a value in argparse
    if "choices" in kw:
        choices = const_list(kw["choices"], env, registry_tables)
    if "help" in kw:
        help_text = const_str(kw["help"]) or help_text
    if "deprecated" in kw and isinstance(kw["deprecated"], ast.Constant) and kw["deprecated"].value:
        deprecated = True
    deprecated = deprecated or is_deprecated_text(help_text)
    if negatable:
        names += ["--no-" + n[2:] for n in names if n.startswith("--")]
    add_flag(flags, names, takes_value=takes_value, choices=choices, deprecated=deprecated,
             help_text=help_text)


# --------------------------------------------------------------------------------------------
# SGLang
# --------------------------------------------------------------------------------------------


def parse_sglang(src):
    trees = {rel: read_py(src, rel) for rel in SOURCES["sglang"]}
    all_trees = list(trees.values())
    consts = module_constants(all_trees)
    aliases = literal_aliases(all_trees)

    tool = dict_keys(trees["python/sglang/srt/function_call/function_call_parser.py"], "ToolCallParserEnum")
    reasoning = dict_keys(trees["python/sglang/srt/parser/reasoning_parser.py"], "DetectorMap")
    if not tool or not reasoning:
        raise CatalogueError("SGLang sources: ToolCallParserEnum or DetectorMap not found")
    tables = {"tool_call_parsers": tool, "reasoning_parsers": reasoning}
    registry_tables = {"ToolCallParserEnum": tool, "DetectorMap": reasoning}

    cls = find_class(all_trees, "ServerArgs")
    if cls is None:
        raise CatalogueError("python/sglang/srt/server_args.py: no class ServerArgs")
    flags = {}
    spec_help = ""
    for name, ann, _, _ in class_fields(cls):
        info = sglang_field(name, ann, consts, aliases)
        if info is None:
            continue
        names, kw = info
        add_flag(flags, names, **kw)
        if name == "speculative_algorithm":
            spec_help = kw["help_text"]
    fn = find_function(cls, "add_cli_args")
    if fn is None:
        raise CatalogueError("python/sglang/srt/server_args.py: no ServerArgs.add_cli_args")
    env = dict(consts)
    for stmt in fn.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            env[stmt.targets[0].id] = stmt.value
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and dotted(node.func).endswith("add_argument"):
                sglang_manual(node, env, registry_tables, flags)

    # The speculative_algorithm field has no choices; its help names the builtin algorithms
    # ("Builtins: EAGLE, EAGLE3, ... Or any name registered ...").
    m = re.search(r"Builtins:\s*([A-Z0-9_, ]+)", spec_help)
    if not m:
        raise CatalogueError("SGLang sources: speculative_algorithm help lists no builtins")
    tables["speculative_methods"] = [s.strip() for s in m.group(1).split(",") if s.strip()]
    kv = flags.get("--kv-cache-dtype")
    if not kv or not kv["choices"]:
        raise CatalogueError("SGLang sources: --kv-cache-dtype has no choices")
    tables["kv_cache_dtypes"] = list(kv["choices"])
    subcommands = []
    for node in ast.walk(trees["python/sglang/cli/main.py"]):
        if isinstance(node, ast.Call) and dotted(node.func).endswith("add_parser") and node.args:
            s = const_str(node.args[0])
            if s:
                subcommands.append(s)
    if "serve" not in subcommands:
        raise CatalogueError("python/sglang/cli/main.py: no `serve` subcommand")
    tables["subcommands"] = subcommands
    return flags, tables


def sglang_field(name, ann, consts, aliases):
    """SGLang's rule, python/sglang/srt/arg_groups/arg_utils.py `add_cli_args_from_dataclass`
    (sgl-project/sglang 7643e393952a3c8895bd5f1f43de99909758c260): a field annotated
    A[T, "help"] or A[T, Arg(...)] becomes "--" + name with "_" -> "-" (or Arg.cli_name) plus
    Arg.aliases; fields with neither, or with Arg(no_cli=True), get no flag; Arg.action wins;
    else Optional is unwrapped, Literal gives choices, List gives nargs "+", bool gives
    store_true (no value), any other type takes one value."""
    if not isinstance(ann, ast.Subscript) or dotted(ann.value).split(".")[-1] not in ("A", "Annotated"):
        return None
    elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
    inner, meta = elts[0], None
    for e in elts[1:]:
        if isinstance(e, ast.Call) and dotted(e.func).split(".")[-1] == "Arg":
            meta = call_kwargs(e)
            break
        s = const_str(e)
        if s is not None:
            meta = {"help": e}
            break
    if meta is None:
        return None
    if isinstance(meta.get("no_cli"), ast.Constant) and meta["no_cli"].value:
        return None
    cli_name = const_str(meta["cli_name"]) if "cli_name" in meta else None
    names = [cli_name or "--" + name.replace("_", "-")]
    names += const_list(meta.get("aliases"), consts) or []
    help_text = const_str(meta["help"]) if "help" in meta else ""
    help_text = help_text or ""
    choices = const_list(meta.get("choices"), consts) if "choices" in meta else None
    kw = {"help_text": help_text, "deprecated": is_deprecated_text(help_text)}
    if "action" in meta:
        action = const_str(meta["action"]) or dotted(meta["action"]).split(".")[-1]
        if action == "BooleanOptionalAction":
            names += ["--no-" + n[2:] for n in names if n.startswith("--")]
            return names, dict(kw, takes_value=False, choices=None)
        return names, dict(kw, takes_value=action not in NO_VALUE_ACTIONS, choices=choices)
    leaves = [leaf for leaf in flatten_hint(inner, aliases) if leaf != "None"]
    literals = [leaf[1] for leaf in leaves if isinstance(leaf, tuple)]
    if len(leaves) == 1 and literals:
        values = [str(v) for v in literals[0] if v is not None]
        return names, dict(kw, takes_value=True, choices=choices or values)
    if leaves == ["bool"]:
        return names, dict(kw, takes_value=False, choices=None)
    return names, dict(kw, takes_value=True, choices=choices)


def sglang_manual(call, env, registry_tables, flags):
    names = [const_str(a) for a in call.args]
    names = [n for n in names if n]
    kw = call_kwargs(call)
    help_text = const_str(kw["help"]) if "help" in kw else ""
    action = None
    if "action" in kw:
        action = const_str(kw["action"]) or dotted(kw["action"]).split(".")[-1]
    takes_value = True
    if action is not None and "type" not in kw and "choices" not in kw and "nargs" not in kw:
        takes_value = not (
            action in NO_VALUE_ACTIONS
            or action == "BooleanOptionalAction"
            or action.endswith("StoreTrueAction")
            or action.endswith("StoreConstAction")
            or action == "DeprecatedAction"
        )
    choices = const_list(kw["choices"], env, registry_tables) if "choices" in kw else None
    deprecated = bool(action and action.startswith("Deprecated")) or is_deprecated_text(help_text or "")
    add_flag(flags, names, takes_value=takes_value, choices=choices, deprecated=deprecated,
             help_text=help_text or "")


# --------------------------------------------------------------------------------------------
# llama.cpp (C++): common/arg.cpp's common_arg({...}) entries
# --------------------------------------------------------------------------------------------


def parse_trtllm(src):
    tree = read_py(src, "tensorrt_llm/commands/serve.py")
    serve = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "serve"), None)
    if serve is None:
        raise CatalogueError("tensorrt_llm/commands/serve.py: no serve command")
    flags = {}
    for dec in serve.decorator_list:
        if not isinstance(dec, ast.Call) or dotted(dec.func) != "click.option":
            continue
        names = [const_str(a) for a in dec.args]
        names = [n for n in names if n]
        kw = call_kwargs(dec)
        is_flag = isinstance(kw.get("is_flag"), ast.Constant) and bool(kw["is_flag"].value)
        choices = None
        t = kw.get("type")
        if isinstance(t, ast.Call):
            kind = dotted(t.func).split(".")[-1]
            if kind in ("Choice", "ChoiceWithAlias") and t.args:
                choices = const_list(t.args[0], {})
                if choices is not None and kind == "ChoiceWithAlias" and len(t.args) > 1:
                    extra = t.args[1]
                    if isinstance(extra, ast.Dict):
                        choices += [k.value for k in extra.keys if isinstance(k, ast.Constant)]
        help_text = const_str(kw["help"]) if "help" in kw else ""
        add_flag(flags, names, takes_value=not is_flag, choices=choices,
                 deprecated=is_deprecated_text(help_text or ""), help_text=help_text or "")
    if not flags:
        raise CatalogueError("tensorrt_llm/commands/serve.py: serve has no click options")
    return flags, {}


PARSERS = {
    "vllm": parse_vllm,
    "sglang": parse_sglang,
    "llama_server": parse_llama_server,
    "trtllm": parse_trtllm,
}


def build(engine, src, release, commit, source_commits=()):
    if engine not in PARSERS:
        raise CatalogueError(f"unknown engine {engine!r} (one of {', '.join(PARSERS)})")
    if not re.fullmatch(r"[0-9a-f]{40}", commit or ""):
        raise CatalogueError(f"--commit {commit!r} is not a 40-hex commit")
    flags, tables = PARSERS[engine](src)
    generated_by = (
        f"tests/tools/engine_catalogue.py {engine} --release {release} --commit {commit}"
    )
    for sc in source_commits:
        generated_by += f" --source-commit {sc}"
    return {
        "engine": engine,
        "release": release,
        "commit": commit,
        "generated_by": generated_by,
        "sources": list(SOURCES[engine]),
        "flags": {name: flags[name] for name in sorted(flags)},
        "tables": tables,
    }


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("engine", choices=sorted(PARSERS))
    p.add_argument("--src", required=True, help="folder with the engine's source files")
    p.add_argument("--release", required=True, help="the engine release the sources are from")
    p.add_argument("--commit", required=True, help="the 40-hex commit of that release")
    p.add_argument("--source-commit", action="append", default=[], metavar="PATH=SHA",
                   help="a source file taken from another commit (recorded in generated_by)")
    p.add_argument("-o", "--output", required=True)
    a = p.parse_args(argv)
    try:
        cat = build(a.engine, a.src, a.release, a.commit, a.source_commit)
    except CatalogueError as e:
        print(f"engine_catalogue: {a.engine}: {e}", file=sys.stderr)
        return 1
    text = json.dumps(cat, indent=1, ensure_ascii=True) + "\n"
    Path(a.output).write_text(text, encoding="ascii")
    print(f"{a.output}: {len(cat['flags'])} flags, tables {sorted(cat['tables'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
