"""Sums Catch2's test-case counts of each test run (meson's test: a binary, or
one test file's cases in tests/tandem_tests) from meson's testlog.json and
prints "N passed, M failed, K skipped". A run that crashed or timed out
without a Catch2 summary counts as one failure; exit code 77 as one skip."""
import json
import re
import sys

passed = failed = skipped = 0
with open(sys.argv[1]) as f:
    for line in f:
        rec = json.loads(line)
        out = rec.get("stdout", "") or ""
        result = rec.get("result", "")
        if result == "SKIP":
            skipped += 1
            continue
        m = re.search(r"All tests passed \(\d+ assertions? in (\d+) test cases?\)", out)
        if m:
            passed += int(m.group(1))
            continue
        m = re.search(r"test cases:\s+(\d+) \|\s+(\d+) passed \|\s+(\d+) failed", out)
        if m:
            passed += int(m.group(2))
            failed += int(m.group(3))
        elif result != "OK":
            failed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
