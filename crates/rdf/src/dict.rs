//! The dictionary: RDF terms to dense `u32` ids and back (Wukong's string
//! server), plus the small id space of predicates and types the key layout
//! uses, and its file format.
//!
//! Term ids are dense from 0 in order of first appearance. Predicates and
//! classes (objects of `rdf:type`) also get a **pt id** from one shared
//! counter; an IRI used both as a predicate and as a class gets two pt ids,
//! so the predicate index and the type index never share a key.
//!
//! A named graph's predicates and classes get pt ids of their own, one per
//! `(predicate, graph)` and `(class, graph)` pair, so a graph's triples live
//! in keys apart from the default graph's, which keeps the pts it always had
//! (`docs/design.md`, "Named graphs"). The graphs are the graph terms of
//! those pts, listed in term-id order.
//!
//! Every term is at most [`TERM_BYTES_MAX`] bytes (value, language tag and
//! datatype together) and there are at most [`TERMS_MAX`] terms; both are
//! checked when a term is added and when a file is read.
//!
//! File format (little-endian, written by [`Dictionary::write_to`]):
//! ```text
//!  "LOCUSDIC" | version u32 = 1 or 2 | terms u32 | pts u32
//!  terms x  ( kind u8 | len u32 | value bytes | [len u32 | lang or datatype bytes] )
//!           kind 0 IRI, 1 blank node, 2 simple literal, 3 language literal, 4 typed literal
//!  pts x    ( kind u8 | term id u32 | [graph term id u32] )
//!           kind 0 predicate, 1 type (default graph); version 2 only:
//!           2 predicate in a graph, 3 type in a graph (followed by the graph's term id)
//!  checksum u64  (FNV-1a of every byte before it)
//! ```
//!
//! A dictionary without graph pts is written as version 1, byte for byte
//! as before graphs existed; version 2 only when it has them.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::Path;

use oxrdf::{BlankNode, Literal, NamedNode, Term};

use crate::{RdfError, Result};

/// Bytes of one term at most (value, language tag and datatype together).
pub const TERM_BYTES_MAX: usize = 16 << 10;
/// Terms at most (ids are `u32`; the key layout may allow fewer).
pub const TERMS_MAX: u64 = 1 << 31;
/// Predicate and type ids at most.
pub const PTS_MAX: u32 = 1 << 16;

const MAGIC: &[u8; 8] = b"LOCUSDIC";
/// The newest version this build writes and reads (it reads 1 too).
const VERSION: u32 = 2;

/// What a pt id stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PtKind {
    /// A predicate.
    Predicate,
    /// A class (object of `rdf:type`).
    Type,
}

/// Terms to ids and back; predicate and type ids.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Dictionary {
    terms: Vec<Term>,
    ids: HashMap<Term, u32>,
    /// Kind, term id and graph (`None`: the default graph) of each pt.
    pts: Vec<(PtKind, u32, Option<u32>)>,
    predicate_pt: HashMap<u32, u32>,
    type_pt: HashMap<u32, u32>,
    /// Pts of named graphs by (kind, term id, graph term id).
    graph_pt: HashMap<(PtKind, u32, u32), u32>,
    /// The named graphs' term ids, ascending.
    graphs: Vec<u32>,
}

/// Bytes a term takes against [`TERM_BYTES_MAX`].
pub fn term_bytes(t: &Term) -> usize {
    match t {
        Term::NamedNode(n) => n.as_str().len(),
        Term::BlankNode(b) => b.as_str().len(),
        Term::Literal(l) => {
            l.value().len() + l.language().map_or(0, str::len) + l.datatype().as_str().len()
        }
    }
}

impl Dictionary {
    /// An empty dictionary.
    pub fn new() -> Self {
        Self::default()
    }

    /// Terms.
    pub fn len(&self) -> usize {
        self.terms.len()
    }

    /// Whether there are no terms.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Predicate and type ids in use.
    pub fn pts(&self) -> u32 {
        self.pts.len() as u32
    }

    /// The id of `t`, adding it if new; `Err(reason)` past a limit.
    pub fn intern(&mut self, t: &Term) -> std::result::Result<u32, String> {
        if let Some(&id) = self.ids.get(t) {
            return Ok(id);
        }
        let bytes = term_bytes(t);
        if bytes > TERM_BYTES_MAX {
            return Err(format!(
                "a term of {bytes} bytes exceeds the limit of {TERM_BYTES_MAX} bytes"
            ));
        }
        if self.terms.len() as u64 >= TERMS_MAX {
            return Err(format!("more than {TERMS_MAX} distinct terms"));
        }
        let id = self.terms.len() as u32;
        self.terms.push(t.clone());
        self.ids.insert(t.clone(), id);
        Ok(id)
    }

    fn add_pt(
        &mut self,
        kind: PtKind,
        id: u32,
        graph: Option<u32>,
    ) -> std::result::Result<u32, String> {
        if let Some(pt) = self.pt_in(kind, id, graph) {
            return Ok(pt);
        }
        if self.pts.len() as u32 >= PTS_MAX {
            return Err(format!(
                "more than {PTS_MAX} distinct predicates and classes"
            ));
        }
        let pt = self.pts.len() as u32;
        self.pts.push((kind, id, graph));
        match (kind, graph) {
            (PtKind::Predicate, None) => {
                self.predicate_pt.insert(id, pt);
            }
            (PtKind::Type, None) => {
                self.type_pt.insert(id, pt);
            }
            (_, Some(g)) => {
                self.graph_pt.insert((kind, id, g), pt);
                if let Err(at) = self.graphs.binary_search(&g) {
                    self.graphs.insert(at, g);
                }
            }
        }
        Ok(pt)
    }

    fn pt_in(&self, kind: PtKind, id: u32, graph: Option<u32>) -> Option<u32> {
        match (kind, graph) {
            (PtKind::Predicate, None) => self.predicate_pt.get(&id).copied(),
            (PtKind::Type, None) => self.type_pt.get(&id).copied(),
            (_, Some(g)) => self.graph_pt.get(&(kind, id, g)).copied(),
        }
    }

    /// The pt id of predicate term `id`, adding it if new.
    pub fn intern_predicate(&mut self, id: u32) -> std::result::Result<u32, String> {
        self.add_pt(PtKind::Predicate, id, None)
    }

    /// The pt id of class term `id`, adding it if new.
    pub fn intern_type(&mut self, id: u32) -> std::result::Result<u32, String> {
        self.add_pt(PtKind::Type, id, None)
    }

    /// The pt id of predicate term `id` in `graph` (`None`: the default
    /// graph), adding it (and the graph) if new.
    pub fn intern_predicate_in(
        &mut self,
        id: u32,
        graph: Option<u32>,
    ) -> std::result::Result<u32, String> {
        self.add_pt(PtKind::Predicate, id, graph)
    }

    /// The pt id of class term `id` in `graph` (`None`: the default graph),
    /// adding it if new.
    pub fn intern_type_in(
        &mut self,
        id: u32,
        graph: Option<u32>,
    ) -> std::result::Result<u32, String> {
        self.add_pt(PtKind::Type, id, graph)
    }

    /// The pt id of predicate term `id` in `graph` (`None`: the default graph).
    pub fn predicate_pt_in(&self, id: u32, graph: Option<u32>) -> Option<u32> {
        self.pt_in(PtKind::Predicate, id, graph)
    }

    /// The pt id of class term `id` in `graph` (`None`: the default graph).
    pub fn type_pt_in(&self, id: u32, graph: Option<u32>) -> Option<u32> {
        self.pt_in(PtKind::Type, id, graph)
    }

    /// The pts of predicate term `id` in each of `graphs` that has it, with
    /// their graph: the lists whose union is the predicate's in the merge.
    pub fn predicate_pts(&self, id: u32, graphs: &[Option<u32>]) -> Vec<(u32, Option<u32>)> {
        graphs
            .iter()
            .filter_map(|&g| self.predicate_pt_in(id, g).map(|pt| (pt, g)))
            .collect()
    }

    /// The named graphs (term ids of the graphs that have a pt), ascending.
    pub fn graphs(&self) -> &[u32] {
        &self.graphs
    }

    /// The graph of pt `pt` (`None`: the default graph, or no such pt).
    pub fn pt_graph(&self, pt: u32) -> Option<u32> {
        self.pts.get(pt as usize).and_then(|p| p.2)
    }

    /// The id of `t`, if present.
    pub fn id(&self, t: &Term) -> Option<u32> {
        self.ids.get(t).copied()
    }

    /// The term of `id`.
    pub fn term(&self, id: u32) -> Option<&Term> {
        self.terms.get(id as usize)
    }

    /// The pt id of the predicate with term id `id`.
    pub fn predicate_pt(&self, id: u32) -> Option<u32> {
        self.predicate_pt.get(&id).copied()
    }

    /// The pt id of the class with term id `id`.
    pub fn type_pt(&self, id: u32) -> Option<u32> {
        self.type_pt.get(&id).copied()
    }

    /// What pt id `pt` stands for, and its term id.
    pub fn pt(&self, pt: u32) -> Option<(PtKind, u32)> {
        self.pts.get(pt as usize).map(|&(k, id, _)| (k, id))
    }

    /// Writes the dictionary in the file format of the module doc.
    pub fn write_to(&self, w: &mut impl Write) -> std::io::Result<()> {
        let mut buf = Vec::with_capacity(64 + self.terms.len() * 48);
        buf.extend_from_slice(MAGIC);
        // Version 1 unless a pt names a graph: data without graphs is
        // written as before them, and older builds read it.
        let version: u32 = if self.graphs.is_empty() { 1 } else { VERSION };
        buf.extend_from_slice(&version.to_le_bytes());
        buf.extend_from_slice(&(self.terms.len() as u32).to_le_bytes());
        buf.extend_from_slice(&(self.pts.len() as u32).to_le_bytes());
        let put = |buf: &mut Vec<u8>, s: &str| {
            buf.extend_from_slice(&(s.len() as u32).to_le_bytes());
            buf.extend_from_slice(s.as_bytes());
        };
        for t in &self.terms {
            match t {
                Term::NamedNode(n) => {
                    buf.push(0);
                    put(&mut buf, n.as_str());
                }
                Term::BlankNode(b) => {
                    buf.push(1);
                    put(&mut buf, b.as_str());
                }
                Term::Literal(l) => {
                    if let Some(lang) = l.language() {
                        buf.push(3);
                        put(&mut buf, l.value());
                        put(&mut buf, lang);
                    } else if l.datatype() == oxrdf::vocab::xsd::STRING {
                        buf.push(2);
                        put(&mut buf, l.value());
                    } else {
                        buf.push(4);
                        put(&mut buf, l.value());
                        put(&mut buf, l.datatype().as_str());
                    }
                }
            }
        }
        for &(kind, id, graph) in &self.pts {
            buf.push(match (kind, graph) {
                (PtKind::Predicate, None) => 0,
                (PtKind::Type, None) => 1,
                (PtKind::Predicate, Some(_)) => 2,
                (PtKind::Type, Some(_)) => 3,
            });
            buf.extend_from_slice(&id.to_le_bytes());
            if let Some(g) = graph {
                buf.extend_from_slice(&g.to_le_bytes());
            }
        }
        let sum = fnv1a(&buf);
        buf.extend_from_slice(&sum.to_le_bytes());
        w.write_all(&buf)
    }

    /// Writes the dictionary to `path` (through a temporary file and a rename).
    pub fn save(&self, path: &Path) -> Result<()> {
        let io = |source| RdfError::Io {
            path: path.to_path_buf(),
            source,
        };
        let tmp = path.with_extension("tmp");
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        self.write_to(&mut f).map_err(io)?;
        f.sync_all().map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// Reads a dictionary written by [`Dictionary::save`]; every count and
    /// length is checked against its limit and the bytes left before use.
    pub fn load(path: &Path) -> Result<Dictionary> {
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(|source| RdfError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        Self::decode(&bytes).map_err(|message| RdfError::Dictionary {
            path: path.to_path_buf(),
            message,
        })
    }

    /// Decodes the file format; `Err` names the byte offset of the problem.
    pub fn decode(bytes: &[u8]) -> std::result::Result<Dictionary, String> {
        if bytes.len() < MAGIC.len() + 12 + 8 {
            return Err(format!("{} bytes: too short for a dictionary", bytes.len()));
        }
        let (body, sum) = bytes.split_at(bytes.len() - 8);
        let sum = u64::from_le_bytes(sum.try_into().expect("8 bytes"));
        if &body[..8] != MAGIC {
            return Err("offset 0: not a Locus dictionary (bad magic)".into());
        }
        if fnv1a(body) != sum {
            return Err(format!(
                "offset {}: checksum mismatch (the file is damaged)",
                body.len()
            ));
        }
        let mut r = Reader { bytes: body, at: 8 };
        let version = r.u32()?;
        if version != 1 && version != VERSION {
            return Err(format!(
                "offset 8: version {version}, this build reads 1 and {VERSION}"
            ));
        }
        let terms = r.u32()? as u64;
        let pts = r.u32()?;
        if terms > TERMS_MAX || pts > PTS_MAX {
            return Err(format!(
                "offset 12: {terms} terms, {pts} pts: beyond the limits"
            ));
        }
        let mut d = Dictionary::new();
        for i in 0..terms {
            let at = r.at;
            let kind = r.u8()?;
            let value = r.str()?;
            let bad = |e: String| format!("offset {at}: term {i}: {e}");
            let t = match kind {
                0 => Term::NamedNode(NamedNode::new(value).map_err(|e| bad(e.to_string()))?),
                1 => Term::BlankNode(BlankNode::new(value).map_err(|e| bad(e.to_string()))?),
                2 => Term::Literal(Literal::new_simple_literal(value)),
                3 => {
                    let lang = r.str()?;
                    Term::Literal(
                        Literal::new_language_tagged_literal(value, lang)
                            .map_err(|e| bad(e.to_string()))?,
                    )
                }
                4 => {
                    let dt = NamedNode::new(r.str()?).map_err(|e| bad(e.to_string()))?;
                    Term::Literal(Literal::new_typed_literal(value, dt))
                }
                k => return Err(bad(format!("unknown kind {k}"))),
            };
            let id = d.intern(&t).map_err(bad)?;
            if id as u64 != i {
                return Err(bad("a duplicate of an earlier term".into()));
            }
        }
        for i in 0..pts {
            let at = r.at;
            let kind = r.u8()?;
            let id = r.u32()?;
            if id as u64 >= terms {
                return Err(format!("offset {at}: pt {i} names term {id} of {terms}"));
            }
            let (kind, graph) = match kind {
                0 => (PtKind::Predicate, None),
                1 => (PtKind::Type, None),
                2 | 3 if version >= 2 => {
                    let g = r.u32()?;
                    if g as u64 >= terms {
                        return Err(format!("offset {at}: pt {i} names graph {g} of {terms}"));
                    }
                    let k = if kind == 2 {
                        PtKind::Predicate
                    } else {
                        PtKind::Type
                    };
                    (k, Some(g))
                }
                k => return Err(format!("offset {at}: pt {i}: unknown kind {k}")),
            };
            let got = d.add_pt(kind, id, graph)?;
            if got != i {
                return Err(format!("offset {at}: pt {i} is a duplicate"));
            }
        }
        if r.at != body.len() {
            return Err(format!(
                "offset {}: {} bytes left over",
                r.at,
                body.len() - r.at
            ));
        }
        Ok(d)
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> std::result::Result<&[u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(format!("offset {}: {n} bytes wanted, file ends", self.at));
        };
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> std::result::Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> std::result::Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn str(&mut self) -> std::result::Result<String, String> {
        let at = self.at;
        let n = self.u32()? as usize;
        if n > TERM_BYTES_MAX {
            return Err(format!(
                "offset {at}: a string of {n} bytes exceeds {TERM_BYTES_MAX}"
            ));
        }
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| format!("offset {at}: not UTF-8"))
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in bytes {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Dictionary {
        let mut d = Dictionary::new();
        let terms = [
            Term::NamedNode(NamedNode::new("http://ex/a").unwrap()),
            Term::BlankNode(BlankNode::new("b0").unwrap()),
            Term::Literal(Literal::new_simple_literal("plain")),
            Term::Literal(Literal::new_language_tagged_literal("chat", "fr").unwrap()),
            Term::Literal(Literal::new_typed_literal(
                "42",
                NamedNode::new("http://www.w3.org/2001/XMLSchema#integer").unwrap(),
            )),
        ];
        for t in &terms {
            d.intern(t).unwrap();
        }
        d.intern_predicate(0).unwrap();
        d.intern_type(0).unwrap();
        d
    }

    #[test]
    fn ids_are_dense_and_stable() {
        let mut d = sample();
        assert_eq!(d.len(), 5);
        let t = d.term(3).unwrap().clone();
        assert_eq!(d.intern(&t).unwrap(), 3);
        assert_eq!(d.id(&t), Some(3));
        // One IRI as predicate and as class: two pt ids.
        assert_eq!(d.predicate_pt(0), Some(0));
        assert_eq!(d.type_pt(0), Some(1));
        assert_eq!(d.pt(1), Some((PtKind::Type, 0)));
    }

    #[test]
    fn file_round_trips() {
        let d = sample();
        let mut buf = Vec::new();
        d.write_to(&mut buf).unwrap();
        assert_eq!(Dictionary::decode(&buf).unwrap(), d);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.dict");
        d.save(&p).unwrap();
        assert_eq!(Dictionary::load(&p).unwrap(), d);
    }

    #[test]
    fn damaged_files_are_refused_never_panic() {
        let d = sample();
        let mut buf = Vec::new();
        d.write_to(&mut buf).unwrap();
        for cut in 0..buf.len() {
            assert!(Dictionary::decode(&buf[..cut]).is_err(), "cut at {cut}");
        }
        for i in 0..buf.len() {
            let mut b = buf.clone();
            b[i] ^= 0x40;
            assert!(Dictionary::decode(&b).is_err(), "flip at {i}");
        }
        let e =
            Dictionary::decode(b"LOCUSDIC\x02\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0").unwrap_err();
        assert!(e.contains("offset"), "{e}");
    }

    #[test]
    fn graph_pts_are_apart_and_only_they_make_version_2() {
        let d = sample();
        let mut buf = Vec::new();
        d.write_to(&mut buf).unwrap();
        assert_eq!(&buf[8..12], &1u32.to_le_bytes(), "no graphs: version 1");
        let mut g = d.clone();
        let gid = g
            .intern(&Term::NamedNode(NamedNode::new("http://ex/g").unwrap()))
            .unwrap();
        let p = g.intern_predicate_in(0, Some(gid)).unwrap();
        let c = g.intern_type_in(0, Some(gid)).unwrap();
        assert_ne!(
            Some(p),
            g.predicate_pt(0),
            "a graph's predicate has its own pt"
        );
        assert_eq!(g.predicate_pt_in(0, Some(gid)), Some(p));
        assert_eq!(g.predicate_pt_in(0, None), g.predicate_pt(0));
        assert_eq!(g.type_pt_in(0, Some(gid)), Some(c));
        assert_eq!(g.pt(p), Some((PtKind::Predicate, 0)));
        assert_eq!((g.pt_graph(p), g.pt_graph(0)), (Some(gid), None));
        assert_eq!(g.graphs(), &[gid]);
        assert_eq!(
            g.predicate_pts(0, &[None, Some(gid), Some(1)]),
            vec![(0, None), (p, Some(gid))]
        );
        let mut buf = Vec::new();
        g.write_to(&mut buf).unwrap();
        assert_eq!(&buf[8..12], &2u32.to_le_bytes());
        assert_eq!(Dictionary::decode(&buf).unwrap(), g);
        for cut in 0..buf.len() {
            assert!(Dictionary::decode(&buf[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn long_terms_are_refused() {
        let mut d = Dictionary::new();
        let long = Term::Literal(Literal::new_simple_literal("x".repeat(TERM_BYTES_MAX + 1)));
        let e = d.intern(&long).unwrap_err();
        assert!(e.contains("exceeds the limit"), "{e}");
        let ok = Term::Literal(Literal::new_simple_literal(
            "x".repeat(TERM_BYTES_MAX - 100),
        ));
        assert!(d.intern(&ok).is_ok());
    }
}
