//! N-Triples and Turtle input: a validated [`Dataset`] (dictionary +
//! encoded triples), all or nothing.
//!
//! Lines are fed one at a time to `oxttl`'s N-Triples parser (maintained,
//! W3C test suite) so every error names its own line: a syntax error, a term
//! over the dictionary's limits, or a line that does not finish its triple
//! (N-Triples puts each triple on one line, ending with `.`). Turtle goes
//! through `oxttl`'s Turtle parser whole (its statements span lines); its
//! errors carry the parser's own position, reported as a 1-based line.
//! Nothing is returned unless the whole input is valid.

use std::io::{BufRead, Read};
use std::path::Path;

use oxrdf::vocab::rdf;
use oxrdf::{NamedOrBlankNode, Term, Triple};
use oxttl::{NTriplesParser, TurtleParseError, TurtleParser};

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
    /// `(subject, predicate pt, object)`, sorted, without duplicates (an RDF graph is a set).
    pub triples: Vec<[u32; 3]>,
    /// The pt of `rdf:type`, if the data uses it.
    pub type_pt: Option<u32>,
}

impl Dataset {
    /// An empty dataset.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one triple; `Err(reason)` if a term breaks a limit.
    pub fn add(&mut self, t: &Triple) -> std::result::Result<(), String> {
        let s = match &t.subject {
            NamedOrBlankNode::NamedNode(n) => Term::NamedNode(n.clone()),
            NamedOrBlankNode::BlankNode(b) => Term::BlankNode(b.clone()),
        };
        let s = self.dict.intern(&s)?;
        let p = self.dict.intern(&Term::NamedNode(t.predicate.clone()))?;
        let o = self.dict.intern(&t.object)?;
        self.add_ids([s, p, o], t.predicate == rdf::TYPE)
    }

    /// Adds the triple of interned term ids `[s, p, o]` (`is_type`: `p` is `rdf:type`).
    pub(crate) fn add_ids(
        &mut self,
        [s, p, o]: [u32; 3],
        is_type: bool,
    ) -> std::result::Result<(), String> {
        let ppt = self.dict.intern_predicate(p)?;
        if is_type {
            self.type_pt = Some(ppt);
            self.dict.intern_type(o)?;
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
        Self::parse_lines(input, name, progress, true)
    }

    /// [`Dataset::parse`] with every line through the full parser (the
    /// reference the fast path is tested against).
    pub fn parse_full(input: impl Read, name: &str, progress: &dyn Progress) -> Result<Dataset> {
        Self::parse_lines(input, name, progress, false)
    }

    fn parse_lines(
        input: impl Read,
        name: &str,
        progress: &dyn Progress,
        fast: bool,
    ) -> Result<Dataset> {
        let mut lines = FastLines::default();
        let mut reader = std::io::BufReader::with_capacity(1 << 20, input);
        let mut d = Dataset::new();
        let mut parser = NTriplesParser::new().low_level();
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
            while let Some(r) = parser.parse_next() {
                let t = r.map_err(|e| syntax(number, e.message().to_string()))?;
                d.add(&t).map_err(|e| syntax(number, e))?;
                got += 1;
            }
            let text = line.trim_ascii();
            if got == 0 && !text.is_empty() && text[0] != b'#' {
                return Err(syntax(
                    number,
                    "the triple does not end on this line (N-Triples: one triple per line, ending with '.')"
                        .into(),
                ));
            }
        }
        parser.end();
        if let Some(Err(e)) = parser.parse_next() {
            return Err(syntax(number.max(1), e.message().to_string()));
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
        let mut d = Dataset::new();
        for r in TurtleParser::new().for_reader(counted) {
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
            d.add(&t).map_err(|message| RdfError::Syntax {
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

    /// Parses the file at `path`: Turtle if its name ends in `.ttl`,
    /// N-Triples otherwise.
    pub fn parse_file(path: &Path, progress: &dyn Progress) -> Result<Dataset> {
        let f = std::fs::File::open(path).map_err(|source| RdfError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let name = path.display().to_string();
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("ttl"))
        {
            Self::parse_turtle(f, &name, progress)
        } else {
            Self::parse(f, &name, progress)
        }
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
