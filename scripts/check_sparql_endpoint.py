"""`locus sparql serve` against Python's SPARQLWrapper (issue 62, requirement 4).

Runs SELECT, ASK and CONSTRUCT through SPARQLWrapper by GET, by POST with a
form and by POST with an application/sparql-query body, INSERT DATA and
DELETE WHERE by POST (form and application/sparql-update body), in every result
format it offers that Locus serves (JSON, XML, CSV, TSV; Turtle for graphs),
and checks the errors it maps from status codes (400 for a syntax error, 401
without the bearer token). The data is scripts/test-sparql-endpoint's five
triples. Exits non-zero, naming the check, on the first difference.

Usage: SPARQL_TOKEN=T check_sparql_endpoint.py URL
"""

import csv
import io
import os
import sys

import rdflib
from SPARQLWrapper import CSV, GET, JSON, POST, POSTDIRECTLY, TSV, TURTLE, URLENCODED, XML, SPARQLWrapper
from SPARQLWrapper.SPARQLExceptions import QueryBadFormed, Unauthorized

EX = "http://example.org/"
KNOWS = f"SELECT ?s ?o WHERE {{ ?s <{EX}knows> ?o }} ORDER BY ?s"
WANT_KNOWS = [(f"{EX}alice", f"{EX}bob"), (f"{EX}bob", f"{EX}carol")]


def client(url, token, method=GET, request=URLENCODED, fmt=JSON):
    s = SPARQLWrapper(url)
    s.setTimeout(60)
    if token is not None:
        s.addCustomHttpHeader("Authorization", f"Bearer {token}")
    s.setMethod(method)
    s.setRequestMethod(request)
    s.setReturnFormat(fmt)
    return s


def check(name, got, want):
    if got != want:
        sys.exit(f"{name}: got {got!r}, want {want!r}")
    print(f"ok  {name}")


def main():
    url, token = sys.argv[1], os.environ["SPARQL_TOKEN"]
    ways = [("GET", GET, URLENCODED), ("POST form", POST, URLENCODED), ("POST body", POST, POSTDIRECTLY)]
    for way, method, request in ways:
        s = client(url, token, method, request, JSON)
        s.setQuery(KNOWS)
        r = s.query().convert()
        rows = [(b["s"]["value"], b["o"]["value"]) for b in r["results"]["bindings"]]
        check(f"SELECT as JSON by {way}", rows, WANT_KNOWS)

        s = client(url, token, method, request, XML)
        s.setQuery(KNOWS)
        doc = s.query().convert()
        uris = [u.firstChild.data for u in doc.getElementsByTagName("uri")]
        check(f"SELECT as XML by {way}", uris, [x for row in WANT_KNOWS for x in row])

    s = client(url, token, fmt=CSV)
    s.setQuery(KNOWS)
    rows = list(csv.reader(io.StringIO(s.query().convert().decode())))
    check("SELECT as CSV", rows, [["s", "o"]] + [list(r) for r in WANT_KNOWS])

    s = client(url, token, fmt=TSV)
    s.setQuery(f'SELECT ?s ?n WHERE {{ ?s <{EX}name> ?n }} ORDER BY ?s')
    lines = s.query().convert().decode().splitlines()
    check("SELECT as TSV", lines, ["?s\t?n", f'<{EX}alice>\t"Alice"', f'<{EX}bob>\t"Bob"@en'])

    for fmt in (JSON, XML):
        s = client(url, token, fmt=fmt)
        s.setQuery(f"ASK {{ <{EX}carol> <{EX}age> 42 }}")
        r = s.query().convert()
        got = r["boolean"] if fmt == JSON else r.getElementsByTagName("boolean")[0].firstChild.data == "true"
        check(f"ASK as {fmt}", got, True)

    for way, method, request in ways:
        s = client(url, token, method, request, TURTLE)
        s.setQuery(f"CONSTRUCT {{ ?o <{EX}knownBy> ?s }} WHERE {{ ?s <{EX}knows> ?o }}")
        g = rdflib.Graph().parse(data=s.query().convert(), format="turtle")
        got = sorted((str(a), str(b), str(c)) for a, b, c in g)
        want = sorted((o, f"{EX}knownBy", s_) for s_, o in WANT_KNOWS)
        check(f"CONSTRUCT as Turtle by {way}", got, want)

    for way, request in [("POST form", URLENCODED), ("POST body", POSTDIRECTLY)]:
        dave = f"{EX}dave-{request}"
        s = client(url, token, POST, request)
        s.setQuery(f"INSERT DATA {{ <{dave}> <{EX}knows> <{EX}alice> }}")
        s.query()
        s = client(url, token, fmt=JSON)
        s.setQuery(f"ASK {{ <{dave}> <{EX}knows> <{EX}alice> }}")
        check(f"INSERT DATA by {way}, then seen by a query", s.query().convert()["boolean"], True)
        s = client(url, token, POST, request)
        s.setQuery(f"DELETE WHERE {{ <{dave}> ?p ?o }}")
        s.query()
        s = client(url, token, fmt=JSON)
        s.setQuery(f"ASK {{ <{dave}> ?p ?o }}")
        check(f"DELETE WHERE by {way}, then gone", s.query().convert()["boolean"], False)

    s = client(url, token)
    s.setQuery("SELECT ?s WHERE { ?s ")
    try:
        s.query()
        sys.exit("a syntax error: no exception")
    except QueryBadFormed as e:
        check("a syntax error is 400 (QueryBadFormed) with the parser's message", "SPARQL syntax" in str(e), True)

    s = client(url, None)
    s.setQuery(KNOWS)
    try:
        s.query()
        sys.exit("no token: no exception")
    except Unauthorized:
        check("no token is 401 (Unauthorized)", True, True)
    s = client(url, token + "x")
    s.setQuery(KNOWS)
    try:
        s.query()
        sys.exit("a wrong token: no exception")
    except Unauthorized:
        check("a wrong token is 401 (Unauthorized)", True, True)
    print("all checks passed")


if __name__ == "__main__":
    main()
