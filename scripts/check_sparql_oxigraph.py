#!/usr/bin/env python3
"""Checks `locus sparql` against pyoxigraph on generated LUBM data.

For each LUBM size: generate the data with `locus rdf generate-lubm`, answer
Wukong's LUBM Q1-Q7 (crates/rdf/queries/lubm) and random 2-4 pattern
queries drawn from the data with `locus sparql --json` (one load, every
query), answer the same queries with pyoxigraph, and compare the rows as
multisets. Exits 1 naming the first query whose rows differ.

usage: check_sparql_oxigraph.py LOCUS_BINARY [--universities 1,5] [--random 40] [--seed 1]
"""
import argparse
import collections
import json
import pathlib
import random
import subprocess
import sys
import tempfile

import pyoxigraph

ROOT = pathlib.Path(__file__).resolve().parent.parent
QUERIES = ROOT / "crates" / "rdf" / "queries" / "lubm"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"


def term_json(t):
    """A pyoxigraph term in the W3C JSON results format."""
    if isinstance(t, pyoxigraph.NamedNode):
        return {"type": "uri", "value": t.value}
    if isinstance(t, pyoxigraph.BlankNode):
        return {"type": "bnode", "value": t.value}
    d = {"type": "literal", "value": t.value}
    if t.language:
        d["xml:lang"] = t.language
    elif t.datatype.value != "http://www.w3.org/2001/XMLSchema#string":
        d["datatype"] = t.datatype.value
    return d


def rows_of(doc):
    vars_ = doc["head"]["vars"]
    rows = collections.Counter()
    for b in doc["results"]["bindings"]:
        rows[tuple(json.dumps(b.get(v), sort_keys=True) for v in vars_)] += 1
    return vars_, rows


def oxigraph_rows(store, text):
    res = store.query(text)
    vars_ = [v.value for v in res.variables]
    rows = collections.Counter()
    for sol in res:
        rows[tuple(json.dumps(term_json(sol[v]) if sol[v] is not None else None, sort_keys=True) for v in vars_)] += 1
    return vars_, rows


def nt(term):
    return f"<{term}>" if not term.startswith('"') else term


def random_queries(triples, by_subject, n, rng):
    """Connected 2-4 pattern queries: a walk over the data, some ends made variables."""
    out = []
    while len(out) < n:
        s, p, o = rng.choice(triples)
        patterns = [(s, p, o)]
        want = rng.randint(2, 4)
        tries = 0
        while len(patterns) < want and tries < 20:
            tries += 1
            a, _, b = rng.choice(patterns)
            node = rng.choice([a, b])
            nxt = by_subject.get(node)
            if nxt:
                t = rng.choice(nxt)
                if t not in patterns:
                    patterns.append(t)
        # Every node a variable but one constant (an anchor, as Wukong's light queries
        # have): the answer stays small enough to compare. Classes may stay constant too.
        nodes = []
        for s_, _, o_ in patterns:
            for x in (s_, o_):
                if x not in nodes:
                    nodes.append(x)
        anchor = rng.choice([x for x in nodes if not x.startswith('"')])
        names = {x: (nt(x) if x == anchor else f"?v{i}") for i, x in enumerate(nodes)}
        body = []
        for s_, p_, o_ in patterns:
            o_name = nt(o_) if p_ == RDF_TYPE and rng.random() < 0.7 else names[o_]
            body.append(f"{names[s_]} <{p_}> {o_name} .")
        vars_ = sorted({v for v in names.values() if v.startswith("?")})
        if not vars_:
            continue
        distinct = "DISTINCT " if rng.random() < 0.3 else ""
        proj = " ".join(rng.sample(vars_, rng.randint(1, len(vars_))))
        out.append(f"SELECT {distinct}{proj} WHERE {{ {' '.join(body)} }}")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("locus")
    ap.add_argument("--universities", default="1,5")
    ap.add_argument("--random", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--machines", type=int, default=4)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    failures = 0
    checked = 0
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(x) for x in a.universities.split(",")]:
            data = pathlib.Path(tmp) / f"lubm{n}.nt"
            subprocess.run([a.locus, "rdf", "generate-lubm", "--universities", str(n),
                            "--seed", str(a.seed), "--out", str(data)], check=True)
            store = pyoxigraph.Store()
            store.bulk_load(path=str(data), format=pyoxigraph.RdfFormat.N_TRIPLES)
            triples, by_subject = [], collections.defaultdict(list)
            for q in store.quads_for_pattern(None, None, None):
                o = q.object.value if not isinstance(q.object, pyoxigraph.Literal) else str(q.object)
                t = (q.subject.value, q.predicate.value, o)
                triples.append(t)
                by_subject[t[0]].append(t)
            named = [(f"LUBM-{n} {p.stem}", p.read_text()) for p in sorted(QUERIES.glob("q*.rq"))]
            named += [(f"LUBM-{n} random {i}", q) for i, q in enumerate(random_queries(triples, by_subject, a.random, rng))]
            qfiles = []
            for i, (_, text) in enumerate(named):
                f = pathlib.Path(tmp) / f"q{n}_{i}.rq"
                f.write_text(text)
                qfiles.append(str(f))
            args = [a.locus, "sparql", "--data", str(data), "--json", "--machines", str(a.machines)]
            for f in qfiles:
                args += ["--query", f]
            out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
            docs = json.loads(out)
            if len(named) == 1:
                docs = [docs]
            for (name, text), doc in zip(named, docs):
                checked += 1
                lv, lrows = rows_of(doc)
                ov, orows = oxigraph_rows(store, text)
                if lv != ov or lrows != orows:
                    failures += 1
                    print(f"MISMATCH {name}: locus {sum(lrows.values())} rows, pyoxigraph {sum(orows.values())} rows\n{text}")
                    extra = list((lrows - orows).keys())[:3]
                    missing = list((orows - lrows).keys())[:3]
                    print(f"  only in locus: {extra}\n  only in pyoxigraph: {missing}")
                elif name.split()[-1].startswith("q"):
                    print(f"ok {name}: {sum(lrows.values())} rows")
    print(f"{checked - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
