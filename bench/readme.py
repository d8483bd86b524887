"""Put the benches' last printed results into docs/benchmarks.md.

    .venv/bin/python -m bench.readme

Every bench keeps what it printed in bench/results/<bench>.<database>.md (bench.common.run). The
That page marks where each goes with `<!-- bench/results/<file> -->` and `<!-- end of results -->`;
this replaces what lies between with the file, so its tables are the ones a bench printed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "benchmarks.md"
END = "<!-- end of results -->"
MARKER = re.compile(r"<!-- (bench/results/[\w.-]+\.md) -->\n.*?" + re.escape(END), re.DOTALL)


def main() -> int:
    text = PAGE.read_text()
    missing = []

    def results(match: re.Match[str]) -> str:
        path = ROOT / match.group(1)
        if not path.exists():
            missing.append(match.group(1))
            return match.group(0)
        return f"<!-- {match.group(1)} -->\n{path.read_text()}{END}"

    updated = MARKER.sub(results, text)
    PAGE.write_text(updated)
    for name in missing:
        print(f"no results yet: {name} (run its bench)", file=sys.stderr)
    unplaced = {f"bench/results/{path.name}" for path in (ROOT / "bench" / "results").glob("*.md")} - set(
        MARKER_NAMES.findall(updated)
    )
    for name in sorted(unplaced):
        print(f"not in docs/benchmarks.md: {name} (add its markers)", file=sys.stderr)
    return 1 if missing or unplaced else 0


MARKER_NAMES = re.compile(r"<!-- (bench/results/[\w.-]+\.md) -->")

if __name__ == "__main__":
    sys.exit(main())
