//! The SPARQL 1.1 Protocol (W3C Recommendation, 2013) as a function from a
//! request to a response, without I/O: a driver (`locus sparql serve`) reads
//! the HTTP request, calls [`handle`] and writes what it returns, so every
//! rule here is tested without a socket.
//!
//! ```text
//! request ──▶ auth (bearer, constant time) ──▶ route /sparql ──▶ method ──▶ body size
//!         ──▶ parameters (GET query string | POST form | POST sparql-query/-update body)
//!         ──▶ Service::query / Service::update (time limit) ──▶ result size
//!         ──▶ content negotiation (format=, Accept) ──▶ JSON | XML | CSV | TSV | N-Triples | Turtle
//! ```
//!
//! | status | when |
//! |--------|------|
//! | 200 | an answer, or an update done |
//! | 400 | a syntax error (the parser's message), no `query`, both `query` and `update`, an update by GET, a bad form encoding |
//! | 401 | a token is required and the request has no `Authorization: Bearer` with it |
//! | 403 | a LOAD of a file outside the endpoint's load directory (or any LOAD without one) |
//! | 404 | a path other than `/sparql` |
//! | 405 | a method other than GET and POST |
//! | 406 | no result format the request accepts fits the answer |
//! | 413 | a body over the limit |
//! | 415 | a POST body that is neither a form, `application/sparql-query` nor `application/sparql-update` |
//! | 500 | the store failed underneath |
//! | 501 | a feature the engine does not implement (the message names it) |
//! | 503 | a limit of the server: the time limit, the result size, intermediate rows |

use std::time::{Duration, Instant};

use oxrdf::NamedNode;
use sha2::{Digest, Sha256};
use spargebra::algebra::QueryDataset;

use locus_fabric::Fabric;
use locus_store::Worker;

use super::{results, Answer, Clock, Engine, Source, Timed};
use crate::catalog::Catalog;
use crate::store::RdfStore;
use crate::{RdfError, Result};

/// What the endpoint allows.
#[derive(Debug, Clone)]
pub struct Limits {
    /// A query or update runs at most this long (checked at each store read).
    pub timeout_ms: u64,
    /// An answer holds at most this many rows (or triples); a larger one is
    /// refused rather than cut short, so no client takes a part for the whole.
    pub rows_max: usize,
    /// A request body holds at most this many bytes.
    pub body_bytes_max: usize,
    /// When set, every request must carry `Authorization: Bearer TOKEN`.
    pub token: Option<String>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout_ms: 30_000,
            rows_max: 100_000,
            body_bytes_max: 1 << 20,
            token: None,
        }
    }
}

/// An HTTP request as the driver read it. `body` may hold one byte more than
/// [`Limits::body_bytes_max`] (the driver reads no further), which is refused.
#[derive(Debug, Clone, Default)]
pub struct Request<'a> {
    /// `GET`, `POST`, ...
    pub method: &'a str,
    /// The request target: path and query string (`/sparql?query=...`).
    pub url: &'a str,
    /// The `Content-Type` header.
    pub content_type: Option<&'a str>,
    /// The `Accept` header.
    pub accept: Option<&'a str>,
    /// The `Authorization` header.
    pub authorization: Option<&'a str>,
    /// The body.
    pub body: &'a [u8],
}

/// The response to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The HTTP status code.
    pub status: u16,
    /// The `Content-Type` header.
    pub content_type: &'static str,
    /// Other headers.
    pub headers: Vec<(&'static str, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    fn text(status: u16, message: impl Into<String>) -> Response {
        let mut body = message.into().into_bytes();
        body.push(b'\n');
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            headers: Vec::new(),
            body,
        }
    }

    fn with(mut self, name: &'static str, value: impl Into<String>) -> Response {
        self.headers.push((name, value.into()));
        self
    }

    /// The body as text (errors are text), for logs and tests.
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// What the endpoint runs queries and updates on.
pub trait Service {
    /// Answers the SPARQL query `text`, failing with [`RdfError::Timeout`]
    /// once past `deadline` (the instant and the limit in ms).
    fn query(&mut self, text: &str, deadline: (Instant, u64)) -> Result<Answer>;
    /// Runs the SPARQL update `text`; returns a line saying what it did.
    fn update(&mut self, text: &str, deadline: (Instant, u64)) -> Result<String>;
}

/// A [`Service`] over an [`Engine`] whose sources stop at the deadline
/// (a running cluster's data through its client). Updates are refused:
/// this service only reads.
pub struct ReadService<'a, S: Source> {
    engine: Engine<'a, Timed<S>>,
    clock: Clock,
}

impl<'a, S: Source> ReadService<'a, S> {
    /// A service over `catalog`'s data read through `sources` (one per machine).
    pub fn new(catalog: &'a Catalog, sources: Vec<S>) -> Result<Self> {
        let clock = Clock::default();
        let sources = sources
            .into_iter()
            .map(|s| Timed::new(s, clock.clone()))
            .collect();
        Ok(ReadService {
            engine: Engine::with_sources(catalog, sources)?,
            clock,
        })
    }
}

impl<S: Source> Service for ReadService<'_, S> {
    fn query(&mut self, text: &str, deadline: (Instant, u64)) -> Result<Answer> {
        self.clock.set(Some(deadline));
        let a = self.engine.answer(text);
        self.clock.set(None);
        Ok(a?.0)
    }

    fn update(&mut self, _text: &str, _deadline: (Instant, u64)) -> Result<String> {
        Err(RdfError::Unsupported(
            "SPARQL Update on this endpoint: it serves a running cluster's data read-only (updates run on an embedded store: locus sparql serve --data)".into(),
        ))
    }
}

/// A [`Service`] over an embedded store that also updates it
/// ([`RdfStore::update`]): each request builds its engine over the
/// current catalog, so a query sees every update before it.
pub struct StoreService<'a, F: Fabric> {
    rdf: &'a mut RdfStore<F>,
    readers: Vec<Worker<F>>,
    writers: Vec<Worker<F>>,
    clock: Clock,
    /// Intermediate rows a query or an update's WHERE may keep at most.
    pub rows_max: usize,
    /// LOAD reads files under this directory only (none without it).
    pub load_dir: Option<std::path::PathBuf>,
}

impl<'a, F: Fabric> StoreService<'a, F> {
    /// A service over `rdf`.
    pub fn new(rdf: &'a mut RdfStore<F>) -> Result<Self> {
        Ok(StoreService {
            readers: rdf.workers()?,
            writers: rdf.workers()?,
            rdf,
            clock: Clock::default(),
            rows_max: super::ROWS_MAX,
            load_dir: None,
        })
    }
}

impl<F: Fabric> Service for StoreService<'_, F> {
    fn query(&mut self, text: &str, deadline: (Instant, u64)) -> Result<Answer> {
        self.clock.set(Some(deadline));
        let sources = self
            .readers
            .iter_mut()
            .map(|w| Timed::new(w, self.clock.clone()))
            .collect();
        let mut engine = Engine::with_sources(self.rdf.catalog(), sources)?;
        engine.rows_max = self.rows_max;
        let a = engine.answer(text);
        self.clock.set(None);
        Ok(a?.0)
    }

    fn update(&mut self, text: &str, deadline: (Instant, u64)) -> Result<String> {
        crate::update::check_loads(text, self.load_dir.as_deref())?;
        self.clock.set(Some(deadline));
        let mut readers: Vec<Timed<&mut Worker<F>>> = self
            .readers
            .iter_mut()
            .map(|w| Timed::new(w, self.clock.clone()))
            .collect();
        let r = self
            .rdf
            .update(text, &mut readers, &mut self.writers, self.rows_max);
        self.clock.set(None);
        Ok(r?.to_string())
    }
}

/// The result formats, each with the media type it is sent as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Xml,
    Csv,
    Tsv,
    NTriples,
    Turtle,
}

impl Format {
    fn media_type(self) -> &'static str {
        match self {
            Format::Json => "application/sparql-results+json",
            Format::Xml => "application/sparql-results+xml",
            Format::Csv => "text/csv; charset=utf-8",
            Format::Tsv => "text/tab-separated-values; charset=utf-8",
            Format::NTriples => "application/n-triples",
            Format::Turtle => "text/turtle",
        }
    }
}

/// Media types (and their aliases) each answer kind offers, the default first.
const SOLUTION_TYPES: &[(&str, Format)] = &[
    ("application/sparql-results+json", Format::Json),
    ("application/json", Format::Json),
    ("application/sparql-results+xml", Format::Xml),
    ("application/xml", Format::Xml),
    ("text/xml", Format::Xml),
    ("text/csv", Format::Csv),
    ("text/tab-separated-values", Format::Tsv),
];
const BOOLEAN_TYPES: &[(&str, Format)] = &[
    ("application/sparql-results+json", Format::Json),
    ("application/json", Format::Json),
    ("application/sparql-results+xml", Format::Xml),
    ("application/xml", Format::Xml),
    ("text/xml", Format::Xml),
];
const GRAPH_TYPES: &[(&str, Format)] = &[
    ("text/turtle", Format::Turtle),
    ("application/x-turtle", Format::Turtle),
    ("application/n-triples", Format::NTriples),
    ("text/plain", Format::NTriples),
];

/// The `format` parameter's short names.
fn format_name(name: &str) -> Option<&'static str> {
    Some(match name.to_ascii_lowercase().as_str() {
        "json" | "srj" => "application/sparql-results+json",
        "xml" | "srx" => "application/sparql-results+xml",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "nt" | "ntriples" | "n-triples" => "application/n-triples",
        // N-Triples and Turtle are N3 too (SPARQLWrapper asks for n3).
        "ttl" | "turtle" | "n3" | "text/n3" => "text/turtle",
        _ => return None,
    })
}

/// The quality `accept` gives `media` (RFC 9110 12.5.1: the most specific
/// range that matches decides; no header accepts everything).
fn quality(accept: &str, media: &str) -> f32 {
    let (mtype, _) = media.split_once('/').unwrap_or((media, ""));
    let mut best: Option<(u8, f32)> = None;
    for range in accept.split(',') {
        let mut parts = range.split(';');
        let r = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let mut q = 1.0f32;
        for p in parts {
            if let Some(v) = p.trim().strip_prefix("q=") {
                q = v.trim().parse().unwrap_or(0.0);
            }
        }
        let specificity = if r == media {
            3
        } else if r == format!("{mtype}/*") {
            2
        } else if r == "*/*" || r == "*" {
            1
        } else {
            continue;
        };
        if best.is_none_or(|(s, _)| specificity > s) {
            best = Some((specificity, q));
        }
    }
    best.map_or(0.0, |(_, q)| q)
}

/// Picks the format of an answer: the `format` parameter when given, else
/// the offered type `accept` rates highest (ties: the offer's order).
fn negotiate(
    offered: &[(&str, Format)],
    accept: Option<&str>,
    formats: &[&str],
) -> std::result::Result<Format, Response> {
    let names = || {
        let mut v: Vec<&str> = offered.iter().map(|o| o.0).collect();
        v.dedup();
        v.join(", ")
    };
    if !formats.is_empty() {
        // The first value that fits this answer.
        return formats
            .iter()
            .find_map(|f| {
                let media = format_name(f).unwrap_or(f);
                offered.iter().find(|o| o.0.eq_ignore_ascii_case(media))
            })
            .map(|o| o.1)
            .ok_or_else(|| {
                Response::text(
                    406,
                    format!(
                        "format={} does not fit this answer; it can be sent as {}",
                        formats.join(","),
                        names()
                    ),
                )
            });
    }
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok(offered[0].1);
    };
    let mut best: Option<(f32, Format)> = None;
    for &(media, f) in offered {
        let q = quality(accept, media);
        if q > 0.0 && best.is_none_or(|(b, _)| q > b) {
            best = Some((q, f));
        }
    }
    best.map(|b| b.1).ok_or_else(|| {
        Response::text(
            406,
            format!(
                "Accept: {accept} admits no format of this answer; it can be sent as {}",
                names()
            ),
        )
    })
}

/// Decodes one `application/x-www-form-urlencoded` component.
fn decode(s: &str) -> std::result::Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = b
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| format!("bad percent escape at byte {i} of {s:?}"))?;
                out.push(hex);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| format!("{s:?} does not decode to UTF-8"))
}

/// `name=value` pairs of a query string or form body, decoded.
fn params(s: &str) -> std::result::Result<Vec<(String, String)>, String> {
    s.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            Ok((decode(k)?, decode(v)?))
        })
        .collect()
}

/// Equal tokens, compared in time that does not depend on where they differ
/// or on their lengths: both are hashed and the digests compared in full.
fn token_matches(given: &str, token: &str) -> bool {
    let (a, b) = (
        Sha256::digest(given.as_bytes()),
        Sha256::digest(token.as_bytes()),
    );
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

/// The status an error of the engine is answered with.
fn status_of(e: &RdfError) -> u16 {
    match e {
        RdfError::QuerySyntax(_) => 400,
        RdfError::Forbidden(_) => 403,
        RdfError::Unsupported(_) => 501,
        RdfError::Timeout { .. }
        | RdfError::TooManyRows { .. }
        | RdfError::TooManySolutions { .. } => 503,
        _ => 500,
    }
}

/// Answers one request of the SPARQL 1.1 Protocol.
pub fn handle(req: &Request, limits: &Limits, service: &mut dyn Service) -> Response {
    match handle_inner(req, limits, service) {
        Ok(r) | Err(r) => r.with("Vary", "Accept"),
    }
}

fn handle_inner(
    req: &Request,
    limits: &Limits,
    service: &mut dyn Service,
) -> std::result::Result<Response, Response> {
    if let Some(token) = &limits.token {
        let given = req
            .authorization
            .and_then(|a| a.trim().strip_prefix("Bearer "))
            .map(str::trim);
        if !given.is_some_and(|g| token_matches(g, token)) {
            return Err(Response::text(
                401,
                "this endpoint needs the header Authorization: Bearer TOKEN (the --token it was started with)",
            )
            .with("WWW-Authenticate", "Bearer realm=\"locus\""));
        }
    }
    let (path, query_string) = req.url.split_once('?').unwrap_or((req.url, ""));
    if path != "/sparql" {
        return Err(Response::text(
            404,
            format!("no resource at {path}; the SPARQL endpoint is /sparql"),
        ));
    }
    if req.body.len() > limits.body_bytes_max {
        return Err(Response::text(
            413,
            format!(
                "the request body is over the limit of {} bytes (--body-bytes-max)",
                limits.body_bytes_max
            ),
        ));
    }
    let bad = |m: String| Response::text(400, m);
    let mut ps = params(query_string).map_err(|m| bad(format!("query string: {m}")))?;
    let body =
        || std::str::from_utf8(req.body).map_err(|_| bad("the request body is not UTF-8".into()));
    let post = match req.method {
        "GET" => false,
        "POST" => true,
        m => {
            return Err(Response::text(
                405,
                format!("method {m} is not allowed; query by GET or POST, update by POST"),
            )
            .with("Allow", "GET, POST"))
        }
    };
    if post {
        let ct = req.content_type.unwrap_or("");
        let media = ct
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match media.as_str() {
            "application/x-www-form-urlencoded" => {
                ps.extend(params(body()?).map_err(|m| bad(format!("form body: {m}")))?)
            }
            "application/sparql-query" => ps.push(("query".into(), body()?.to_string())),
            "application/sparql-update" => ps.push(("update".into(), body()?.to_string())),
            _ => return Err(Response::text(
                415,
                format!(
                    "POST body of type {ct:?}: send application/x-www-form-urlencoded, application/sparql-query or application/sparql-update"
                ),
            )),
        }
    }
    let one = |name: &str| -> std::result::Result<Option<&str>, Response> {
        let mut vs = ps
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str());
        let first = vs.next();
        if vs.next().is_some() {
            return Err(bad(format!("more than one {name} parameter")));
        }
        Ok(first)
    };
    let query = one("query")?;
    let update = one("update")?;
    // Clients repeat `format` in the spellings of several servers
    // (SPARQLWrapper sends `tsv` and `text/tab-separated-values`).
    let formats: Vec<&str> = ps
        .iter()
        .filter(|(k, _)| k == "format")
        .map(|(_, v)| v.as_str())
        .collect();
    // A dataset by protocol parameters (2.1.4, 2.2.3) is written into the
    // request as FROM / FROM NAMED (or USING / USING NAMED) before it runs.
    let iris = |name: &str| -> std::result::Result<Vec<NamedNode>, Response> {
        ps.iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| NamedNode::new(v.as_str()).map_err(|e| bad(format!("{name} {v:?}: {e}"))))
            .collect()
    };
    let (default, named) = (iris("default-graph-uri")?, iris("named-graph-uri")?);
    let (using, using_named) = (iris("using-graph-uri")?, iris("using-named-graph-uri")?);
    let query = match query {
        Some(q) if !default.is_empty() || !named.is_empty() => {
            Some(std::borrow::Cow::Owned(with_dataset(q, default, named)?))
        }
        q => q.map(std::borrow::Cow::Borrowed),
    };
    let update = match update {
        Some(u) if !using.is_empty() || !using_named.is_empty() => {
            Some(std::borrow::Cow::Owned(with_using(u, using, using_named)?))
        }
        u => u.map(std::borrow::Cow::Borrowed),
    };
    let deadline = (
        Instant::now() + Duration::from_millis(limits.timeout_ms),
        limits.timeout_ms,
    );
    let failed = |e: RdfError| Response::text(status_of(&e), e.to_string());
    match (query, update) {
        (Some(_), Some(_)) => Err(bad("both query and update given; send one".into())),
        (None, None) => Err(bad(
            "no query: send ?query=... by GET, or POST a form with query= or update=, or a body of type application/sparql-query or application/sparql-update".into(),
        )),
        (None, Some(_)) if !post => Err(bad(
            "an update must be sent by POST (SPARQL 1.1 Protocol 2.2)".into(),
        )),
        (None, Some(u)) => {
            let done = service.update(&u, deadline).map_err(failed)?;
            Ok(Response::text(200, done))
        }
        (Some(q), None) => {
            let answer = service.query(&q, deadline).map_err(failed)?;
            render(&answer, req.accept, &formats, limits.rows_max)
        }
    }
}

/// `query` with the protocol's dataset in place of its own (2.1.4: the
/// parameters take precedence over FROM and FROM NAMED).
fn with_dataset(
    query: &str,
    default: Vec<NamedNode>,
    named: Vec<NamedNode>,
) -> std::result::Result<String, Response> {
    let mut q = spargebra::SparqlParser::new()
        .parse_query(query)
        .map_err(|e| Response::text(400, format!("SPARQL syntax: {e}")))?;
    let ds = Some(QueryDataset {
        default,
        named: (!named.is_empty()).then_some(named),
    });
    match &mut q {
        spargebra::Query::Select { dataset, .. }
        | spargebra::Query::Ask { dataset, .. }
        | spargebra::Query::Construct { dataset, .. }
        | spargebra::Query::Describe { dataset, .. } => *dataset = ds,
    }
    Ok(q.to_string())
}

/// `update` with the protocol's USING dataset on each DELETE/INSERT; an
/// operation with its own USING or WITH is a 400 (2.2.3).
fn with_using(
    update: &str,
    default: Vec<NamedNode>,
    named: Vec<NamedNode>,
) -> std::result::Result<String, Response> {
    let mut u = spargebra::SparqlParser::new()
        .parse_update(update)
        .map_err(|e| Response::text(400, format!("SPARQL syntax: {e}")))?;
    for op in &mut u.operations {
        if let spargebra::GraphUpdateOperation::DeleteInsert { using, .. } = op {
            if using.is_some() {
                return Err(Response::text(
                    400,
                    "using-graph-uri or using-named-graph-uri with an update that has USING or WITH (SPARQL 1.1 Protocol 2.2.3)",
                ));
            }
            *using = Some(QueryDataset {
                default: default.clone(),
                named: Some(named.clone()),
            });
        }
    }
    Ok(u.to_string())
}

/// The answer in the negotiated format, or 503 if it is over `rows_max`.
fn render(
    answer: &Answer,
    accept: Option<&str>,
    formats: &[&str],
    rows_max: usize,
) -> std::result::Result<Response, Response> {
    let (offered, size) = match answer {
        Answer::Solutions(s) => (SOLUTION_TYPES, s.rows.len()),
        Answer::Boolean(_) => (BOOLEAN_TYPES, 1),
        Answer::Graph(g) => (GRAPH_TYPES, g.len()),
    };
    if size > rows_max {
        return Err(Response::text(
            503,
            format!("the answer has {size} rows, more than the limit of {rows_max} (--max-rows); add a LIMIT"),
        ));
    }
    let f = negotiate(offered, accept, formats)?;
    let body = match (answer, f) {
        (Answer::Solutions(s), Format::Json) => results::to_json(s).to_string(),
        (Answer::Solutions(s), Format::Xml) => results::to_xml(s),
        (Answer::Solutions(s), Format::Csv) => results::to_csv(s),
        (Answer::Solutions(s), Format::Tsv) => results::to_tsv(s),
        (Answer::Boolean(b), Format::Json) => results::boolean_json(*b).to_string(),
        (Answer::Boolean(b), Format::Xml) => results::boolean_xml(*b),
        (Answer::Graph(g), Format::NTriples) => results::to_ntriples(g),
        (Answer::Graph(g), Format::Turtle) => results::to_turtle(g),
        _ => unreachable!("negotiate picks from the answer's own offers"),
    };
    Ok(Response {
        status: 200,
        content_type: f.media_type(),
        headers: Vec::new(),
        body: body.into_bytes(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quality_takes_the_most_specific_range() {
        assert_eq!(quality("text/*;q=0.2, text/csv;q=0.9", "text/csv"), 0.9);
        assert_eq!(
            quality("text/*;q=0.2, text/csv;q=0.9", "text/tab-separated-values"),
            0.2
        );
        assert_eq!(quality("*/*;q=0.1", "text/turtle"), 0.1);
        assert_eq!(quality("application/json", "text/turtle"), 0.0);
    }

    #[test]
    fn negotiate_prefers_quality_then_offer_order() {
        let n = |a: &str| negotiate(SOLUTION_TYPES, Some(a), &[]);
        assert_eq!(
            n("text/csv, application/sparql-results+xml;q=0.5"),
            Ok(Format::Csv)
        );
        assert_eq!(n("*/*"), Ok(Format::Json));
        assert_eq!(n("text/csv;q=0.1, */*;q=0.5"), Ok(Format::Json));
        assert_eq!(n("image/png").unwrap_err().status, 406);
        assert_eq!(
            negotiate(SOLUTION_TYPES, Some("image/png"), &["tsv"]),
            Ok(Format::Tsv)
        );
        assert_eq!(
            negotiate(GRAPH_TYPES, None, &["csv"]).unwrap_err().status,
            406
        );
    }

    #[test]
    fn decode_forms() {
        assert_eq!(decode("a+b%3F%C3%A9").unwrap(), "a b?é");
        assert!(decode("%G1").is_err());
        assert!(decode("%C3").is_err());
        assert_eq!(
            params("query=SELECT+*&format=json&").unwrap(),
            vec![
                ("query".into(), "SELECT *".into()),
                ("format".into(), "json".into())
            ]
        );
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(token_matches("s3cret", "s3cret"));
        assert!(!token_matches("s3cre", "s3cret"));
        assert!(!token_matches("s3cret ", "s3cret"));
        assert!(!token_matches("", "s3cret"));
    }
}
