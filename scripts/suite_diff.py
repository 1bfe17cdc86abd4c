"""Compare two runs of `make test` (their reports/tiers/suite.json): test ids gone, new or moved to another tier, and
how often each real component started, per component and per tier, with each tier's seconds and CPU seconds.

  python scripts/suite_diff.py BEFORE/suite.json AFTER/suite.json
Exit status 1 when a test id of BEFORE is in no tier of AFTER (pass --allow-gone to only list them).
"""

import argparse
import json
import pathlib
import sys


def load(path: pathlib.Path) -> dict:
    return json.loads(path.read_text())


def tier_of_each_test(suite: dict) -> dict:
    """{test id: [tiers that ran it]} (the outcome word dropped)."""
    where = {}
    for tier, record in suite.items():
        for line in record["tests"]:
            where.setdefault(line.split(" ", 1)[1], []).append(tier)
    return where


def component_totals(suite: dict) -> dict:
    totals = {}
    for record in suite.values():
        for name, count in record["components"].items():
            totals[name] = totals.get(name, 0) + count
    return totals


def shown(record) -> str:
    if record is None:
        return "-"
    parts = ", ".join(f"{k} x{v}" for k, v in record["components"].items())
    return f"{record['result']} {record['seconds']} s, {record['cpu_seconds']} CPU-s" + (f"; {parts}" if parts else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=pathlib.Path)
    parser.add_argument("after", type=pathlib.Path)
    parser.add_argument("--allow-gone", action="store_true", help="list the gone test ids without failing")
    args = parser.parse_args()
    before, after = load(args.before), load(args.after)
    ran_before, ran_after = tier_of_each_test(before), tier_of_each_test(after)
    gone = sorted(set(ran_before) - set(ran_after))
    new = sorted(set(ran_after) - set(ran_before))
    moved = sorted(t for t in set(ran_before) & set(ran_after) if sorted(ran_before[t]) != sorted(ran_after[t]))
    print(
        f"tests: {len(ran_before)} ids before, {len(ran_after)} after; {len(gone)} gone, {len(new)} new, "
        f"{len(moved)} in another tier"
    )
    for label, ids in (("gone", gone), ("new", new)):
        for test in ids:
            print(f"  {label}: {test} ({', '.join(ran_before.get(test) or ran_after[test])})")
    for test in moved:
        print(f"  moved: {test}: {', '.join(ran_before[test])} -> {', '.join(ran_after[test])}")
    print("\ncomponent starts (before -> after)")
    totals_before, totals_after = component_totals(before), component_totals(after)
    for name in sorted(set(totals_before) | set(totals_after)):
        print(f"  {name:16} {totals_before.get(name, 0):4} -> {totals_after.get(name, 0):4}")
    print("\ntiers (seconds, CPU seconds of its own processes, components; before -> after)")
    for tier in sorted(set(before) | set(after)):
        print(f"  {tier:26} {shown(before.get(tier))}  ->  {shown(after.get(tier))}")
    return 1 if gone and not args.allow_gone else 0


if __name__ == "__main__":
    sys.exit(main())
