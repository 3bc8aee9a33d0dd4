//! N-Triples, Turtle, N-Quads and TriG input: a validated [`Dataset`]
//! (dictionary + encoded triples), all or nothing.
//!
//! Lines are fed one at a time to `oxttl`'s N-Triples parser (maintained,
//! W3C test suite) so every error names its own line: a syntax error, a term
//! over the dictionary's limits, or a line that does not finish its triple
//! (N-Triples puts each triple on one line, ending with `.`). Turtle goes
//! through `oxttl`'s Turtle parser whole (its statements span lines); its
//! errors carry the parser's own position, reported as a 1-based line.
//! N-Quads goes line by line as N-Triples does, TriG whole as Turtle does.
//! A triple of a named graph is stored under its predicate's pt in that
//! graph ([`crate::dict`]), so a triple's pt carries its graph.
//! Nothing is returned unless the whole input is valid.

use std::io::{BufRead, Read};
use std::path::Path;

use oxrdf::vocab::rdf;
use oxrdf::{GraphName, NamedOrBlankNode, Quad, Term, Triple};
use oxttl::nquads::LowLevelNQuadsParser;
use oxttl::ntriples::LowLevelNTriplesParser;
use oxttl::{NQuadsParser, NTriplesParser, TriGParser, TurtleParseError, TurtleParser};

use crate::dict::Dictionary;
use crate::fastnt::{FastLines, Outcome};
use crate::{Progress, RdfError, Result};

/// Bytes of one line at most (longer lines are refused, naming the line).
pub const LINE_BYTES_MAX: usize = 1 << 20;

/// A parsed dataset: its dictionary and its triples as ids, duplicates removed.
#[derive(Debug, Clone, Default)]
pub struct Dataset {
    /// Terms and pt ids.
    pub dict: Dictionary,
    /// `(subject, predicate pt, object)`, sorted, without duplicates (an RDF
    /// graph is a set); the pt names the triple's graph ([`Dictionary::pt_graph`]).
    pub triples: Vec<[u32; 3]>,
    /// The pt of `rdf:type` in the default graph, if the data uses it there.
    pub type_pt: Option<u32>,
}

impl Dataset {
    /// An empty dataset.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one triple to the default graph; `Err(reason)` if a term breaks a limit.
    pub fn add(&mut self, t: &Triple) -> std::result::Result<(), String> {
        self.add_in(t, None)
    }

    /// Adds one quad (its triple to its graph); `Err(reason)` if a term breaks a limit.
    pub fn add_quad(&mut self, q: &Quad) -> std::result::Result<(), String> {
        let g = match &q.graph_name {
            GraphName::DefaultGraph => None,
            GraphName::NamedNode(n) => Some(self.dict.intern(&Term::NamedNode(n.clone()))?),
            GraphName::BlankNode(b) => Some(self.dict.intern(&Term::BlankNode(b.clone()))?),
        };
        let t = Triple::new(q.subject.clone(), q.predicate.clone(), q.object.clone());
        self.add_in(&t, g)
    }

    fn add_in(&mut self, t: &Triple, graph: Option<u32>) -> std::result::Result<(), String> {
        let s = match &t.subject {
            NamedOrBlankNode::NamedNode(n) => Term::NamedNode(n.clone()),
            NamedOrBlankNode::BlankNode(b) => Term::BlankNode(b.clone()),
        };
        let s = self.dict.intern(&s)?;
        let p = self.dict.intern(&Term::NamedNode(t.predicate.clone()))?;
        let o = self.dict.intern(&t.object)?;
        self.add_ids_in([s, p, o], t.predicate == rdf::TYPE, graph)
    }

    /// Adds the triple of interned term ids `[s, p, o]` (`is_type`: `p` is `rdf:type`).
    pub(crate) fn add_ids(
        &mut self,
        [s, p, o]: [u32; 3],
        is_type: bool,
    ) -> std::result::Result<(), String> {
        self.add_ids_in([s, p, o], is_type, None)
    }

    /// [`Dataset::add_ids`] into `graph` (`None`: the default graph).
    fn add_ids_in(
        &mut self,
        [s, p, o]: [u32; 3],
        is_type: bool,
        graph: Option<u32>,
    ) -> std::result::Result<(), String> {
        let ppt = self.dict.intern_predicate_in(p, graph)?;
        if is_type {
            if graph.is_none() {
                self.type_pt = Some(ppt);
            }
            self.dict.intern_type_in(o, graph)?;
        }
        self.triples.push([s, ppt, o]);
        Ok(())
    }

    /// Sorts and removes duplicate triples; call once after the last [`Dataset::add`].
    pub fn finish(&mut self) {
        self.triples.sort_unstable();
        self.triples.dedup();
    }

    /// Parses N-Triples from `input`; `name` is what errors call it.
    pub fn parse(input: impl Read, name: &str, progress: &dyn Progress) -> Result<Dataset> {
        Self::parse_lines(input, name, progress, Lines::Fast)
    }

    /// Parses N-Quads from `input` (a line without a graph is a triple of
    /// the default graph); `name` is what errors call it.
    pub fn parse_nquads(input: impl Read, name: &str, progress: &dyn Progress) -> Result<Dataset> {
        Self::parse_lines(input, name, progress, Lines::Quads)
    }

    /// [`Dataset::parse`] with every line through the full parser (the
    /// reference the fast path is tested against).
    pub fn parse_full(input: impl Read, name: &str, progress: &dyn Progress) -> Result<Dataset> {
        Self::parse_lines(input, name, progress, Lines::Full)
    }

    fn parse_lines(
        input: impl Read,
        name: &str,
        progress: &dyn Progress,
        how: Lines,
    ) -> Result<Dataset> {
        let fast = how == Lines::Fast;
        let mut lines = FastLines::default();
        let mut reader = std::io::BufReader::with_capacity(1 << 20, input);
        let mut d = Dataset::new();
        let mut parser = match how {
            Lines::Quads => LowLevel::Quads(NQuadsParser::new().low_level()),
            _ => LowLevel::Triples(NTriplesParser::new().low_level()),
        };
        let mut line = Vec::new();
        let mut number = 0u64;
        let syntax = |line: u64, message: String| RdfError::Syntax {
            file: name.to_string(),
            line,
            message,
        };
        loop {
            line.clear();
            let n = (&mut reader)
                .take(LINE_BYTES_MAX as u64 + 1)
                .read_until(b'\n', &mut line)
                .map_err(|source| RdfError::Io {
                    path: name.into(),
                    source,
                })?;
            if n == 0 {
                break;
            }
            number += 1;
            progress.inc(n as u64);
            if n > LINE_BYTES_MAX {
                return Err(syntax(
                    number,
                    format!("the line is longer than {LINE_BYTES_MAX} bytes"),
                ));
            }
            if fast {
                match lines.line(&mut d, &line) {
                    Outcome::Done => continue,
                    Outcome::Limit(reason) => return Err(syntax(number, reason)),
                    Outcome::Fallback => {}
                }
            }
            if line.last() != Some(&b'\n') {
                line.push(b'\n');
            }
            parser.extend_from_slice(&line);
            let mut got = 0;
            while let Some(r) = parser.parse_next(&mut d) {
                r.map_err(|e| syntax(number, e))?;
                got += 1;
            }
            let text = line.trim_ascii();
            if got == 0 && !text.is_empty() && text[0] != b'#' {
                let why = match how {
                    Lines::Quads => "the quad does not end on this line (N-Quads: one triple or quad per line, ending with '.')",
                    _ => "the triple does not end on this line (N-Triples: one triple per line, ending with '.')",
                };
                return Err(syntax(number, why.into()));
            }
        }
        parser.end();
        if let Some(Err(e)) = parser.parse_next(&mut d) {
            return Err(syntax(number.max(1), e));
        }
        if d.triples.is_empty() {
            return Err(RdfError::Empty {
                file: name.to_string(),
            });
        }
        d.finish();
        Ok(d)
    }

    /// Parses Turtle from `input`; `name` is what errors call it.
    pub fn parse_turtle(input: impl Read, name: &str, progress: &dyn Progress) -> Result<Dataset> {
        let counted = Counted {
            inner: input,
            progress,
        };
        let quads = TurtleParser::new()
            .for_reader(counted)
            .map(|r| r.map(|t| t.in_graph(GraphName::DefaultGraph)));
        Self::parse_statements(quads, name)
    }

    /// Parses TriG from `input`; `name` is what errors call it.
    pub fn parse_trig(input: impl Read, name: &str, progress: &dyn Progress) -> Result<Dataset> {
        let counted = Counted {
            inner: input,
            progress,
        };
        Self::parse_statements(TriGParser::new().for_reader(counted), name)
    }

    /// Turtle's and TriG's statements, each error at the parser's line.
    fn parse_statements(
        quads: impl Iterator<Item = std::result::Result<Quad, TurtleParseError>>,
        name: &str,
    ) -> Result<Dataset> {
        let mut d = Dataset::new();
        for r in quads {
            let t = match r {
                Ok(t) => t,
                Err(TurtleParseError::Syntax(e)) => {
                    return Err(RdfError::Syntax {
                        file: name.to_string(),
                        line: e.location().start.line + 1,
                        message: e.message().to_string(),
                    })
                }
                Err(TurtleParseError::Io(source)) => {
                    return Err(RdfError::Io {
                        path: name.into(),
                        source,
                    })
                }
            };
            // A term past the dictionary's limits: the statement is not
            // located by the parser's iterator, so the error names the term.
            d.add_quad(&t).map_err(|message| RdfError::Syntax {
                file: name.to_string(),
                line: 0,
                message: format!("in the triple {t}: {message}"),
            })?;
        }
        if d.triples.is_empty() {
            return Err(RdfError::Empty {
                file: name.to_string(),
            });
        }
        d.finish();
        Ok(d)
    }

    /// Parses the file at `path` by its name's ending: `.ttl` Turtle, `.nq`
    /// N-Quads, `.trig` TriG, anything else N-Triples.
    pub fn parse_file(path: &Path, progress: &dyn Progress) -> Result<Dataset> {
        let f = std::fs::File::open(path).map_err(|source| RdfError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let name = path.display().to_string();
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        match ext.as_deref() {
            Some("ttl") => Self::parse_turtle(f, &name, progress),
            Some("nq" | "nquads") => Self::parse_nquads(f, &name, progress),
            Some("trig") => Self::parse_trig(f, &name, progress),
            _ => Self::parse(f, &name, progress),
        }
    }
}

/// How [`Dataset::parse_lines`] reads each line.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lines {
    /// N-Triples, the fast path first.
    Fast,
    /// N-Triples, every line through the full parser.
    Full,
    /// N-Quads.
    Quads,
}

/// The line parser of N-Triples or of N-Quads.
enum LowLevel {
    Triples(LowLevelNTriplesParser),
    Quads(LowLevelNQuadsParser),
}

impl LowLevel {
    fn extend_from_slice(&mut self, b: &[u8]) {
        match self {
            LowLevel::Triples(p) => p.extend_from_slice(b),
            LowLevel::Quads(p) => p.extend_from_slice(b),
        }
    }
    fn end(&mut self) {
        match self {
            LowLevel::Triples(p) => p.end(),
            LowLevel::Quads(p) => p.end(),
        }
    }
    /// The next statement added to `d`; `Err` the parser's or a limit's message.
    fn parse_next(&mut self, d: &mut Dataset) -> Option<std::result::Result<(), String>> {
        Some(match self {
            LowLevel::Triples(p) => match p.parse_next()? {
                Ok(t) => d.add(&t),
                Err(e) => Err(e.message().to_string()),
            },
            LowLevel::Quads(p) => match p.parse_next()? {
                Ok(q) => d.add_quad(&q),
                Err(e) => Err(e.message().to_string()),
            },
        })
    }
}

/// A reader that reports the bytes it reads.
struct Counted<'a, R> {
    inner: R,
    progress: &'a dyn Progress,
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.inc(n as u64);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Dataset> {
        Dataset::parse(s.as_bytes(), "t.nt", &())
    }

    #[test]
    fn valid_lines_comments_and_duplicates() {
        let d = parse(
            "# a comment\n\
             <http://ex/a> <http://ex/p> <http://ex/b> .\n\
             \n\
             <http://ex/a> <http://ex/p> <http://ex/b> .\n\
             _:x <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://ex/C> .   # trailing\n\
             <http://ex/b> <http://ex/name> \"B\"@en .\n\
             <http://ex/b> <http://ex/age> \"7\"^^<http://www.w3.org/2001/XMLSchema#integer> .",
        )
        .unwrap();
        assert_eq!(d.triples.len(), 4, "the duplicate is dropped");
        assert_eq!(d.dict.len(), 10);
        assert!(d.type_pt.is_some());
    }

    #[test]
    fn errors_name_the_line() {
        let cases = [
            ("<http://ex/a> <http://ex/p> <http://ex/b> .\n<http://ex/a> <http://ex/p> .\n", 2),
            ("<http://ex/a> <http://ex/p> <http://ex/b>\n<http://ex/a> <http://ex/p> <http://ex/b> .\n", 1),
            ("\n\n<a> <http://ex/p> <http://ex/b> .\n", 3),
            ("<http://ex/a> <http://ex/p> \"unterminated .\n", 1),
            ("<http://ex/a> \"lit\" <http://ex/b> .\n", 1),
        ];
        for (text, line) in cases {
            match parse(text) {
                Err(RdfError::Syntax { line: l, file, .. }) => {
                    assert_eq!((l, file.as_str()), (line, "t.nt"), "{text:?}")
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn turtle_reads_prefixes_and_lists_of_objects_and_names_a_bad_line() {
        let ttl = "@prefix ex: <http://ex/> .\n\
                   ex:a a ex:C ;\n\
                   \tex:p ex:b, ex:c ;\n\
                   \tex:name \"A\"@en .\n";
        let d = Dataset::parse_turtle(ttl.as_bytes(), "t.ttl", &()).unwrap();
        assert_eq!(d.triples.len(), 4);
        assert!(d.type_pt.is_some(), "`a` is rdf:type");
        let nt =
            "<http://ex/a> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://ex/C> .\n\
                  <http://ex/a> <http://ex/p> <http://ex/b> .\n\
                  <http://ex/a> <http://ex/p> <http://ex/c> .\n\
                  <http://ex/a> <http://ex/name> \"A\"@en .\n";
        let same = parse(nt).unwrap();
        assert_eq!(d.triples.len(), same.triples.len());
        assert_eq!(d.dict.len(), same.dict.len());
        let bad = "@prefix ex: <http://ex/> .\nex:a ex:p ex:b .\nex:a ex:p nope:x .\n";
        match Dataset::parse_turtle(bad.as_bytes(), "t.ttl", &()) {
            Err(RdfError::Syntax { line, file, .. }) => {
                assert_eq!((line, file.as_str()), (3, "t.ttl"))
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            Dataset::parse_turtle("@prefix ex: <http://ex/> .\n".as_bytes(), "t.ttl", &()),
            Err(RdfError::Empty { .. })
        ));
    }

    #[test]
    fn nquads_and_trig_put_a_graph_s_triples_under_its_own_pts_and_name_a_bad_line() {
        let nq = "<http://ex/a> <http://ex/p> <http://ex/b> .\n\
                  <http://ex/a> <http://ex/p> <http://ex/b> <http://ex/g> .\n\
                  <http://ex/a> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://ex/C> <http://ex/g> .\n\
                  <http://ex/a> <http://ex/p> <http://ex/b> <http://ex/g> .\n";
        let d = Dataset::parse_nquads(nq.as_bytes(), "t.nq", &()).unwrap();
        assert_eq!(
            d.triples.len(),
            3,
            "one default, two in g (a duplicate dropped)"
        );
        assert_eq!(d.type_pt, None, "rdf:type only in a named graph");
        let g = d
            .dict
            .id(&oxrdf::NamedNode::new("http://ex/g").unwrap().into());
        assert_eq!(d.dict.graphs(), &[g.unwrap()]);
        let graphs: Vec<_> = d.triples.iter().map(|t| d.dict.pt_graph(t[1])).collect();
        assert_eq!(graphs.iter().filter(|x| x.is_none()).count(), 1);
        let trig = "@prefix ex: <http://ex/> .\n\
                    ex:a ex:p ex:b .\n\
                    ex:g { ex:a ex:p ex:b . ex:a a ex:C . }\n";
        let t = Dataset::parse_trig(trig.as_bytes(), "t.trig", &()).unwrap();
        assert_eq!(t.triples, d.triples);
        assert_eq!(t.dict.graphs().len(), 1);
        // Errors name the file and line.
        let bad = "<http://ex/a> <http://ex/p> <http://ex/b> <http://ex/g> .\n\
                   <http://ex/a> <http://ex/p> <http://ex/b> \"lit\" .\n";
        match Dataset::parse_nquads(bad.as_bytes(), "t.nq", &()) {
            Err(RdfError::Syntax { line, file, .. }) => {
                assert_eq!((line, file.as_str()), (2, "t.nq"))
            }
            other => panic!("{other:?}"),
        }
        let split = "<http://ex/a> <http://ex/p>\n<http://ex/b> <http://ex/g> .\n";
        match Dataset::parse_nquads(split.as_bytes(), "t.nq", &()) {
            Err(RdfError::Syntax { line, message, .. }) => {
                assert_eq!(line, 1, "{message}")
            }
            other => panic!("{other:?}"),
        }
        // A quad is not N-Triples.
        assert!(matches!(
            Dataset::parse(bad.as_bytes(), "t.nt", &()),
            Err(RdfError::Syntax { line: 1, .. })
        ));
        let bad = "@prefix ex: <http://ex/> .\nex:g {\n ex:a ex:p ex:b .\n ex:a ex:p nope:x .\n}\n";
        match Dataset::parse_trig(bad.as_bytes(), "t.trig", &()) {
            Err(RdfError::Syntax { line, file, .. }) => {
                assert_eq!((line, file.as_str()), (4, "t.trig"))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn limits_and_empty_input() {
        assert!(matches!(parse("# nothing\n"), Err(RdfError::Empty { .. })));
        let long = format!(
            "<http://ex/a> <http://ex/p> \"{}\" .\n",
            "x".repeat(crate::dict::TERM_BYTES_MAX + 1)
        );
        let e = parse(&long).unwrap_err().to_string();
        assert!(e.starts_with("t.nt:1:") && e.contains("exceeds"), "{e}");
        let huge = format!(
            "<http://ex/a> <http://ex/p> \"{}\" .\n",
            "x".repeat(LINE_BYTES_MAX)
        );
        let e = parse(&huge).unwrap_err().to_string();
        assert!(e.contains("longer than"), "{e}");
        // Invalid UTF-8 is a syntax error, not a panic.
        let e = Dataset::parse(
            &b"<http://ex/a> <http://ex/p> \"\xff\" .\n"[..],
            "t.nt",
            &(),
        );
        assert!(matches!(e, Err(RdfError::Syntax { line: 1, .. })), "{e:?}");
    }
}
