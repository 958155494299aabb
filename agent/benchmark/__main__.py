"""`python -m agent.benchmark SPEC.json` (or `-`: the spec on standard input) prints the report
as one JSON object; `--out FILE` writes it there too."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agent.benchmark import BadSpec, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent.benchmark")
    parser.add_argument("spec", help="the benchmark spec (a JSON file, or - for standard input)")
    parser.add_argument("--out", type=Path, help="also write the report here")
    args = parser.parse_args(argv)
    try:
        text = sys.stdin.read() if args.spec == "-" else Path(args.spec).read_text()
        report = run(json.loads(text))
    except (OSError, ValueError, BadSpec) as exc:
        print(f"benchmark: {exc}", file=sys.stderr)
        return 2
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
