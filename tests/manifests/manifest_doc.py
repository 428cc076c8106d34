#!/usr/bin/python3
"""Keeps docs/manifest.md's key tables made from manifests/schema.json, so the reference and the
schema (what editors complete from, what schema_check.py holds to the validator) never disagree.

  manifest_doc.py --schema manifests/schema.json --doc docs/manifest.md          # rewrite
  manifest_doc.py --schema manifests/schema.json --doc docs/manifest.md --check  # CTest

Each table sits between "<!-- keys: PATH -->" and "<!-- end keys -->" in the doc, PATH being a
dotted path into the schema ("host", "services.<name>", "services.<name>.vllm"; "<item>" for
the items of a list: "fleet.waves.<item>"). Standard
library only.
"""
import argparse
import json
import re
import sys

MARK = re.compile(r"<!-- keys: (?P<path>[^ ]+) -->\n.*?<!-- end keys -->", re.S)


def node_at(schema, path):
    node = schema
    for part in path.split("."):
        if part == "(root)":
            continue
        if part == "<name>":
            node = node["additionalProperties"]
        elif part == "<item>":
            node = node["items"]
        else:
            node = node["properties"][part]
    return node


def type_of(prop, definitions):
    ref = prop.get("$ref", "")
    if ref:
        name = ref.rsplit("/", 1)[-1]
        return {"size": "size", "duration": "duration"}.get(name, name)
    t = prop.get("type", "")
    if isinstance(t, list):
        t = " or ".join(t)
    if "enum" in prop:
        t = " \\| ".join(f"`{v}`" for v in prop["enum"])
    if t == "array" and isinstance(prop.get("items"), dict):
        t = f"list of {prop['items'].get('type', 'string')}"
    return t or "any"


def table(schema, path):
    node = node_at(schema, path)
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for key, prop in node.get("properties", {}).items():
        default = prop.get("default")
        if default is None:
            shown = "—"
        elif isinstance(default, (dict, list)) and not default:
            shown = "`{}`" if isinstance(default, dict) else "`[]`"
        else:
            shown = "`" + json.dumps(default, ensure_ascii=False).strip('"') + "`"
        desc = prop.get("description", "").replace("|", "\\|").replace("\n", " ")
        rows.append(f"| `{key}` | {type_of(prop, schema.get('definitions', {}))} | {shown} | {desc} |")
    return "\n".join(rows)


def render(schema, doc):
    def sub(m):
        return f"<!-- keys: {m.group('path')} -->\n{table(schema, m.group('path'))}\n<!-- end keys -->"
    return MARK.sub(sub, doc)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--schema", required=True)
    parser.add_argument("--doc", required=True)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    with open(args.schema, encoding="utf-8") as f:
        schema = json.load(f)
    with open(args.doc, encoding="utf-8") as f:
        doc = f.read()
    paths = [m.group("path") for m in MARK.finditer(doc)]
    if not paths:
        print(f"{args.doc}: no '<!-- keys: PATH -->' tables", file=sys.stderr)
        return 1
    # Every object of the schema that has properties is documented somewhere.
    wanted = []

    def collect(node, path):
        if node.get("properties"):
            wanted.append(path)
        for key, prop in node.get("properties", {}).items():
            collect(prop, f"{path}.{key}" if path != "(root)" else key)
        if isinstance(node.get("additionalProperties"), dict):
            collect(node["additionalProperties"], f"{path}.<name>")

    collect(schema, "(root)")
    missing = [p for p in wanted if p not in paths]
    try:
        fresh = render(schema, doc)
    except KeyError as e:
        print(f"{args.doc}: a table names {e}, which manifests/schema.json does not have",
              file=sys.stderr)
        return 1
    if args.check:
        problems = [f"{args.doc} has no table for '{p}' (add '<!-- keys: {p} -->' and "
                    "'<!-- end keys -->', then run manifest_doc.py without --check)" for p in missing]
        if fresh != doc:
            problems.append(f"{args.doc} is out of date with {args.schema}: run "
                            "tests/manifests/manifest_doc.py --schema manifests/schema.json "
                            "--doc docs/manifest.md")
        for p in problems:
            print("FAIL " + p, file=sys.stderr)
        print(f"{len(paths)} tables checked, {len(problems)} problems")
        return 1 if problems else 0
    with open(args.doc, "w", encoding="utf-8") as f:
        f.write(fresh)
    for p in missing:
        print(f"note: no table for '{p}' yet", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
