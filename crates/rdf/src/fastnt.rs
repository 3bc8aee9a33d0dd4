//! A fast path for the N-Triples lines almost every dataset is made of:
//! ASCII IRIs, simple blank-node labels and literals without escapes.
//!
//! The full parser validates every IRI of every line and builds owned terms
//! for each triple; most of a large file repeats a small set of terms. Here
//! a line is cut into its three raw tokens, each token's bytes are looked up
//! in a table of tokens already seen, and only a token never seen before is
//! validated and turned into a term (by `oxrdf`'s own constructors, which
//! check what `oxttl` checks). Any line this path is not sure of (an escape,
//! a non-ASCII IRI, an uppercase language tag, a constructor's refusal,
//! anything unexpected) is handed back to the full parser, which then names
//! the error exactly; so the fast path changes speed, never what is accepted
//! or what it means. `tests` compares both paths term by term.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use oxrdf::vocab::rdf;
use oxrdf::{BlankNode, Literal, NamedNode, Term};

use crate::ntriples::Dataset;

/// FNV-1a: tokens are short and trusted not to be adversarial for speed
/// only (a collision costs a comparison, never a wrong id).
#[derive(Default)]
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h ^= b as u64;
            h = h.wrapping_mul(0x100_0000_01b3);
        }
        self.0 = h;
    }
}

/// Raw tokens already turned into term ids.
#[derive(Default)]
pub(crate) struct FastLines {
    ids: HashMap<Box<[u8]>, u32, BuildHasherDefault<Fnv>>,
    /// The term id of `rdf:type`, once seen.
    rdf_type: Option<u32>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Iri,
    Blank,
    Literal,
}

/// What a line came to.
pub(crate) enum Outcome {
    /// The triple was added (or the line is blank or a comment).
    Done,
    /// Not sure: let the full parser read this line.
    Fallback,
    /// A term breaks the dictionary's limits (the reason).
    Limit(String),
}

fn is_ws(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn skip_ws(line: &[u8], mut at: usize) -> usize {
    while at < line.len() && is_ws(line[at]) {
        at += 1;
    }
    at
}

/// Bytes an IRI may hold here: printable ASCII except `<>"{}|^`\`.
fn iri_byte(b: u8) -> bool {
    b > 0x20
        && b < 0x7f
        && !matches!(
            b,
            b'<' | b'>' | b'"' | b'{' | b'}' | b'|' | b'^' | b'`' | b'\\'
        )
}

/// The end of the IRI token starting at `line[at] == b'<'`.
fn iri_end(line: &[u8], at: usize) -> Option<usize> {
    let mut i = at + 1;
    while i < line.len() && line[i] != b'>' {
        if !iri_byte(line[i]) {
            return None;
        }
        i += 1;
    }
    (i < line.len() && i > at + 1).then_some(i + 1)
}

/// The next token at `at`: its kind and end.
fn token(line: &[u8], at: usize) -> Option<(Kind, usize)> {
    match line.get(at)? {
        b'<' => Some((Kind::Iri, iri_end(line, at)?)),
        b'_' if line.get(at + 1) == Some(&b':') => {
            let mut i = at + 2;
            while i < line.len()
                && (line[i].is_ascii_alphanumeric() || matches!(line[i], b'_' | b'-'))
            {
                i += 1;
            }
            (i > at + 2).then_some((Kind::Blank, i))
        }
        b'"' => {
            let mut i = at + 1;
            while i < line.len() && line[i] != b'"' {
                if matches!(line[i], b'\\' | b'\n' | b'\r') {
                    return None;
                }
                i += 1;
            }
            if i >= line.len() {
                return None;
            }
            i += 1;
            match line.get(i) {
                Some(b'@') => {
                    let start = i + 1;
                    i = start;
                    while i < line.len()
                        && (line[i].is_ascii_lowercase()
                            || line[i].is_ascii_digit()
                            || line[i] == b'-')
                    {
                        i += 1;
                    }
                    // Uppercase or odd tags go to the full parser (it normalises them).
                    if i == start || line.get(i).is_some_and(|&b| !is_ws(b) && b != b'.') {
                        return None;
                    }
                }
                Some(b'^') if line.get(i + 1) == Some(&b'^') && line.get(i + 2) == Some(&b'<') => {
                    i = iri_end(line, i + 2)?;
                }
                _ => {}
            }
            Some((Kind::Literal, i))
        }
        _ => None,
    }
}

/// The term a raw token stands for, by `oxrdf`'s validating constructors.
fn term(kind: Kind, raw: &[u8]) -> Option<Term> {
    let text = std::str::from_utf8(raw).ok()?;
    match kind {
        Kind::Iri => NamedNode::new(&text[1..text.len() - 1])
            .ok()
            .map(Term::NamedNode),
        Kind::Blank => BlankNode::new(&text[2..]).ok().map(Term::BlankNode),
        Kind::Literal => {
            let close = text[1..].find('"')? + 1;
            let value = &text[1..close];
            let rest = &text[close + 1..];
            let lit = if let Some(lang) = rest.strip_prefix('@') {
                Literal::new_language_tagged_literal(value, lang).ok()?
            } else if let Some(dt) = rest.strip_prefix("^^") {
                Literal::new_typed_literal(value, NamedNode::new(&dt[1..dt.len() - 1]).ok()?)
            } else {
                Literal::new_simple_literal(value)
            };
            Some(Term::Literal(lit))
        }
    }
}

impl FastLines {
    /// The id of the raw token `line[from..to]`, interning it if new.
    fn id(&mut self, d: &mut Dataset, kind: Kind, raw: &[u8]) -> Result<Option<u32>, String> {
        if let Some(&id) = self.ids.get(raw) {
            return Ok(Some(id));
        }
        let Some(t) = term(kind, raw) else {
            return Ok(None);
        };
        let id = d.dict.intern(&t)?;
        if matches!(&t, Term::NamedNode(n) if n.as_ref() == rdf::TYPE) {
            self.rdf_type = Some(id);
        }
        self.ids.insert(raw.into(), id);
        Ok(Some(id))
    }

    /// Reads one line (with or without its newline) into `d`.
    pub(crate) fn line(&mut self, d: &mut Dataset, line: &[u8]) -> Outcome {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let at = skip_ws(line, 0);
        if at == line.len() || line[at] == b'#' {
            return Outcome::Done;
        }
        let mut toks = [(Kind::Iri, 0usize, 0usize); 3];
        let mut at = at;
        for (n, tok) in toks.iter_mut().enumerate() {
            let Some((kind, end)) = token(line, at) else {
                return Outcome::Fallback;
            };
            let fits = match n {
                0 => kind != Kind::Literal,
                1 => kind == Kind::Iri,
                _ => true,
            };
            // Tokens are separated by white space (the full parser judges the rest).
            if !fits || (n < 2 && !line.get(end).copied().is_some_and(is_ws)) {
                return Outcome::Fallback;
            }
            *tok = (kind, at, end);
            at = skip_ws(line, end);
        }
        if line.get(at) != Some(&b'.') {
            return Outcome::Fallback;
        }
        let at = skip_ws(line, at + 1);
        if at != line.len() && line[at] != b'#' {
            return Outcome::Fallback;
        }
        let mut ids = [0u32; 3];
        for (k, &(kind, from, to)) in toks.iter().enumerate() {
            match self.id(d, kind, &line[from..to]) {
                Ok(Some(id)) => ids[k] = id,
                Ok(None) => return Outcome::Fallback,
                Err(reason) => return Outcome::Limit(reason),
            }
        }
        match d.add_ids(ids, Some(ids[1]) == self.rdf_type) {
            Ok(()) => Outcome::Done,
            Err(reason) => Outcome::Limit(reason),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both paths on `text`: the same terms, in the same triples.
    fn same(text: &str) {
        let fast = Dataset::parse(text.as_bytes(), "t.nt", &()).unwrap();
        let full = Dataset::parse_full(text.as_bytes(), "t.nt", &()).unwrap();
        let decode = |d: &Dataset| -> Vec<String> {
            let mut v: Vec<String> = d
                .triples
                .iter()
                .map(|t| {
                    let p = d.dict.pt(t[1]).unwrap().1;
                    format!(
                        "{} {} {}",
                        d.dict.term(t[0]).unwrap(),
                        d.dict.term(p).unwrap(),
                        d.dict.term(t[2]).unwrap()
                    )
                })
                .collect();
            v.sort();
            v
        };
        assert_eq!(decode(&fast), decode(&full), "{text}");
        assert_eq!(fast.type_pt.is_some(), full.type_pt.is_some());
        assert_eq!(fast.dict.len(), full.dict.len());
    }

    #[test]
    fn the_fast_path_reads_what_the_full_parser_reads() {
        same(
            "<http://ex/a> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://ex/C> .\n\
             <http://ex/a> <http://ex/p> \"plain\" .\n\
             <http://ex/a> <http://ex/p> \"tagged\"@en-gb .\n\
             <http://ex/a> <http://ex/p> \"Tagged\"@EN .\n\
             <http://ex/a> <http://ex/p> \"7\"^^<http://www.w3.org/2001/XMLSchema#integer> .\n\
             <http://ex/a> <http://ex/p> \"s\"^^<http://www.w3.org/2001/XMLSchema#string> .\n\
             <http://ex/a> <http://ex/p> \"s\" .\n\
             _:b1 <http://ex/p> _:b-2 .\n\
             <http://ex/a>\t<http://ex/p>\t<http://ex/b>.# comment\n\
             <http://ex/a> <http://ex/p> \"esc\\\"aped\\n\" .\n\
             <http://ex/%C3%A9> <http://ex/p> \"caf\u{e9}\" .\n\
             <http://ex/\u{e9}> <http://ex/p> <http://ex/b> .\n\
             <http://ex/a> <http://ex/p> \"\\u00e9\" .\n\
             # only a comment\n\
             \n",
        );
    }

    #[test]
    fn plain_lines_take_the_fast_path_and_escapes_do_not() {
        let mut f = FastLines::default();
        let mut d = Dataset::new();
        let fast = [
            "<http://ex/a> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://ex/C> .\n",
            "<http://ex/a> <http://ex/p> \"tagged\"@en-gb .\n",
            "_:b1 <http://ex/p> \"7\"^^<http://www.w3.org/2001/XMLSchema#integer> .",
            "   # comment\n",
        ];
        for l in fast {
            assert!(matches!(f.line(&mut d, l.as_bytes()), Outcome::Done), "{l}");
        }
        assert_eq!(d.triples.len(), 3);
        assert!(d.type_pt.is_some());
        let slow = [
            "<http://ex/a> <http://ex/p> \"esc\\\"\" .\n",
            "<http://ex/\u{e9}> <http://ex/p> <http://ex/b> .\n",
            "<http://ex/a> <http://ex/p> \"T\"@EN .\n",
            "<rel> <http://ex/p> <http://ex/b> .\n",
            "<http://ex/a> <http://ex/p> <http://ex/b> <http://ex/c> .\n",
        ];
        for l in slow {
            assert!(
                matches!(f.line(&mut d, l.as_bytes()), Outcome::Fallback),
                "{l}"
            );
        }
        assert_eq!(d.triples.len(), 3, "a line handed back adds nothing");
        let long = format!(
            "<http://ex/a> <http://ex/p> \"{}\" .",
            "x".repeat(crate::dict::TERM_BYTES_MAX + 1)
        );
        assert!(matches!(f.line(&mut d, long.as_bytes()), Outcome::Limit(_)));
    }

    #[test]
    fn bad_lines_fall_back_and_keep_their_line_numbers() {
        let cases = [
            ("<http://ex/a> <http://ex/p> <http://ex/b> .\n<rel> <http://ex/p> <http://ex/b> .\n", 2),
            ("<http://ex/a> <http://ex/p> \"x\"@ .\n", 1),
            ("<http://ex/a> <http://ex/p> <http://ex/b> <http://ex/c> .\n", 1),
            ("<http://ex/a> <http://ex/p> <http://ex/b>\n", 1),
            ("\"lit\" <http://ex/p> <http://ex/b> .\n", 1),
        ];
        for (text, line) in cases {
            match Dataset::parse(text.as_bytes(), "t.nt", &()) {
                Err(crate::RdfError::Syntax { line: l, .. }) => assert_eq!(l, line, "{text:?}"),
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }
}
