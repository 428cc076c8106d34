#!/usr/bin/python3
"""Holds manifests/schema.json and the C++ validator to the same verdicts.

Every manifests/examples/*/*.yaml must pass the schema, and every example folder must pass the
validator (a folder is one manifest: its files may refer to each other). Every fixture in
tests/manifests/invalid/ must be rejected by both, and the validator's output must contain the
text of the fixture's first line, "# expect: <text>".

Uses only the standard library, jsonschema and PyYAML (/usr/bin/python3).
"""
import argparse
import glob
import json
import os
import subprocess
import sys

import jsonschema
import yaml


def schema_errors(validator, path):
    with open(path, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
            for e in validator.iter_errors(data)]


def undocumented(schema, where="#"):
    """Properties without a description, or without a default where their description does not
    say what leaving them out means ("Default: ..." or "Required ..."): editors complete from
    both, and a default the program does not apply would be a lie (docs/manifest.md is made from
    them)."""
    missing = []
    if isinstance(schema, dict):
        for name, prop in schema.get("properties", {}).items():
            desc = prop.get("description", "")
            if not desc:
                missing.append(f"{where}/properties/{name} has no description")
            if "default" not in prop and "Default:" not in desc and "Required" not in desc:
                missing.append(f"{where}/properties/{name} has no default, and its description "
                               "does not say what leaving it out means")
        for key, value in schema.items():
            if key not in ("allOf", "if", "then", "else", "not"):  # rules, not properties
                missing += undocumented(value, f"{where}/{key}")
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            missing += undocumented(value, f"{where}/{i}")
    return missing


def probe(probe_path, path):
    run = subprocess.run([probe_path, path], capture_output=True, text=True, timeout=60)
    return run.returncode, run.stdout + run.stderr


def expected_text(path):
    with open(path, encoding="utf-8") as f:
        first = f.readline().strip()
    prefix = "# expect:"
    return first[len(prefix):].strip() if first.startswith(prefix) else None


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--schema", required=True)
    parser.add_argument("--examples", required=True, help="manifests/examples")
    parser.add_argument("--invalid", required=True, help="tests/manifests/invalid")
    parser.add_argument("--probe", required=True, help="manifest_validate_probe executable")
    args = parser.parse_args()

    with open(args.schema, encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft7Validator.check_schema(schema)
    validator = jsonschema.Draft7Validator(schema)
    failures = undocumented(schema)

    examples = sorted(glob.glob(os.path.join(args.examples, "*", "*.yaml")) +
                      glob.glob(os.path.join(args.examples, "*", "*.yml")))
    if not examples:
        failures.append(f"no examples found under {args.examples}/*/")
    for path in examples:
        errors = schema_errors(validator, path)
        if errors:
            failures.append(f"{path}: the schema rejects a valid example:\n  " + "\n  ".join(errors))
        else:
            print(f"ok   schema accepts    {path}")
    for folder in sorted({os.path.dirname(p) for p in examples}):
        rc, out = probe(args.probe, folder)
        if rc != 0:
            failures.append(f"{folder}: the validator rejects a valid example:\n{out}")
        else:
            print(f"ok   validator accepts {folder}")

    fixtures = sorted(glob.glob(os.path.join(args.invalid, "*.yaml")))
    if not fixtures:
        failures.append(f"no invalid fixtures found in {args.invalid}")
    for path in fixtures:
        name = os.path.basename(path)
        if not schema_errors(validator, path):
            failures.append(f"{path}: the schema accepts an invalid fixture")
        rc, out = probe(args.probe, path)
        if rc != 1:
            failures.append(f"{path}: the validator exited {rc} (want 1):\n{out}")
        want = expected_text(path)
        if want is None:
            failures.append(f"{path}: first line must be '# expect: <diagnostic text>'")
        elif want not in out:
            failures.append(f"{path}: validator output lacks {want!r}:\n{out}")
        else:
            print(f"ok   both reject       {name}: {want}")

    for failure in failures:
        print("FAIL " + failure, file=sys.stderr)
    print(f"{len(examples)} example files, {len(fixtures)} invalid fixtures, "
          f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
