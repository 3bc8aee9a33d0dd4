"""Writes a weighted copy (`.wel`: `src dst weight`) of a text edge list,
each weight uniform in 1..=255 (GAPBS's range) from Python's generator
seeded with SEED, for scripts/test-fargraph-networkx.

Usage: weigh_edges.py SEED IN.txt OUT.wel
"""

import random
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    rng = random.Random(int(sys.argv[1]))
    with open(sys.argv[2]) as src, open(sys.argv[3], "w") as out:
        for line in src:
            t = line.split()
            if t and not t[0].startswith(("#", "%")):
                out.write(f"{t[0]} {t[1]} {rng.randint(1, 255)}\n")


if __name__ == "__main__":
    main()
