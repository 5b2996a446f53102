"""Reads the `-v` logs of run_dist_suite.py and prints, per log, passed /
skipped / failed, the skip reasons with their counts, and the failures.
With two logs (tnt, then gloo as the reference), also every test that
passed for the reference and not for the first.

    python3 summarize.py tnt.log [gloo.log]

Exit status 1 if the first log has a failure or an error, or no test
passed.
"""
import collections
import re
import sys

# unittest -v: "test_x (__main__.Class.test_x) ... ok", possibly with the
# docstring on its own line and the ranks' log lines in between.
START = re.compile(r"^(test_\w+) \(__main__\.\w+\.(?:test_\w+)\)")
END = re.compile(r"(?:^|\.\.\. )(ok|FAIL|ERROR|skipped (.*)|expected failure)"
                 r"$")


def parse(path):
    results = {}
    current = None
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = START.match(line)
            if m:
                current = m.group(1)
            e = END.search(line)
            if e and current and current not in results:
                word = e.group(1)
                if word.startswith("skipped"):
                    results[current] = ("skip", (e.group(2) or "").strip("'\""))
                elif word == "ok" or word == "expected failure":
                    results[current] = ("pass", "")
                else:
                    results[current] = ("fail", word)
                current = None
    return results


def report(name, res):
    c = collections.Counter(v[0] for v in res.values())
    print("%s: %d tests: %d passed, %d skipped, %d failed"
          % (name, len(res), c["pass"], c["skip"], c["fail"]))
    reasons = collections.Counter(v[1] for v in res.values()
                                  if v[0] == "skip")
    for why, n in reasons.most_common():
        print("  skipped %3d: %s" % (n, why))
    for t, v in sorted(res.items()):
        if v[0] == "fail":
            print("  FAILED: %s (%s)" % (t, v[1]))
    return c


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    res = parse(sys.argv[1])
    c = report(sys.argv[1], res)
    if len(sys.argv) == 3:
        ref = parse(sys.argv[2])
        report(sys.argv[2], ref)
        missing = sorted(t for t, v in ref.items()
                         if v[0] == "pass" and res.get(t, ("?",))[0] != "pass")
        print("passed for %s, not for %s: %d" % (sys.argv[2], sys.argv[1],
                                                 len(missing)))
        for t in missing:
            v = res.get(t, ("absent", ""))
            print("  %s: %s %s" % (t, v[0], v[1]))
    sys.exit(1 if c["fail"] or not c["pass"] else 0)


if __name__ == "__main__":
    main()
