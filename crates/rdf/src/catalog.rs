//! [`Catalog`]: what a query needs besides the lists themselves (the
//! dictionary, the key layout, the pt of `rdf:type` and the planner's
//! statistics), and [`Lists`]: every key's list of a dataset in Wukong's
//! layout, built once for whichever store receives them (an embedded
//! [`crate::RdfStore`] or a cluster through the client protocol).
//!
//! A catalog is persisted with the data it describes: in a cluster, as the
//! directory `rdf/` beside the cluster file, holding `dict` (the dictionary's
//! checksummed format, [`crate::dict`]) and `catalog.json` (the store's
//! slot count the keys are packed by, the type pt and the statistics; no
//! machine count: any number of servers reads it, [`crate::layout`]). Both are written to a temporary name,
//! synced and renamed, the dictionary first, so a catalog is whole or absent.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use locus_store::VertexId;

use crate::dict::Dictionary;
use crate::layout::{Layout, IN, OUT};
use crate::ntriples::Dataset;
use crate::{RdfError, Result};

/// Per predicate-or-type sizes the planner estimates fan-out with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Triples per predicate pt (0 for type pts).
    pub triples: Vec<u64>,
    /// Distinct subjects per predicate pt; instances per type pt.
    pub subjects: Vec<u64>,
    /// Distinct objects per predicate pt.
    pub objects: Vec<u64>,
}

/// Which store slots' index parts of each `(pt, dir)` hold anything (or
/// did: an update that empties a part leaves its bit), so an index read
/// skips the empty parts of its up to `slots` without reading them: a
/// predicate with ten subjects costs at most ten reads, not one per slot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Parts {
    /// Bits per slot, `slots.div_ceil(64)` words per lane `2 * pt + dir`.
    lanes: Vec<Vec<u64>>,
}

impl Parts {
    /// Marks the part of `slot` of index `(pt, dir)` as holding something.
    pub fn mark(&mut self, slot: u32, pt: u32, dir: u32, slots: u32) {
        let lane = 2 * pt as usize + dir as usize;
        if self.lanes.len() <= lane {
            self.lanes.resize(lane + 1, Vec::new());
        }
        let words = &mut self.lanes[lane];
        words.resize((slots as usize).div_ceil(64), 0);
        words[slot as usize / 64] |= 1 << (slot % 64);
    }

    /// The slots whose part of index `(pt, dir)` may hold something, ascending.
    pub fn slots(&self, pt: u32, dir: u32) -> impl Iterator<Item = u32> + '_ {
        let words = self
            .lanes
            .get(2 * pt as usize + dir as usize)
            .map_or(&[][..], |w| &w[..]);
        words.iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let b = w.trailing_zeros();
                    w &= w - 1;
                    i as u32 * 64 + b
                })
            })
        })
    }

    /// Whether the part of `slot` of index `(pt, dir)` may hold something.
    pub fn holds(&self, slot: u32, pt: u32, dir: u32) -> bool {
        self.lanes
            .get(2 * pt as usize + dir as usize)
            .and_then(|w| w.get(slot as usize / 64))
            .is_some_and(|w| w >> (slot % 64) & 1 == 1)
    }
}

/// The dictionary, layout, type pt and statistics of one stored dataset.
#[derive(Debug, Clone)]
pub struct Catalog {
    dict: Dictionary,
    layout: Layout,
    type_pt: Option<u32>,
    stats: Stats,
    parts: Parts,
}

/// `catalog.json`: everything but the dictionary.
#[derive(Debug, Serialize, Deserialize)]
struct Header {
    format: u32,
    /// The store's slot count the keys are packed by.
    slots: u32,
    type_pt: Option<u32>,
    triples: u64,
    stats: Stats,
    /// The layout's pt capacity (reserved for updates).
    pts_capacity: u64,
    /// The index parts that hold anything.
    parts: Parts,
    /// The layout's first store vertex (format 4; 0 in format 3).
    #[serde(default)]
    vertex_base: u64,
}

/// Format 4 packs keys by store slot from a base past the graph ids
/// ([`crate::layout`]); format 3 packed them the same way from vertex 0, and
/// is read as that. Formats 1 and 2 packed them by machine (`term %
/// machines`, an index part per machine): their keys are not where this
/// build looks, so they are refused.
const FORMAT: u32 = 4;
/// Format 5 is format 4 whose dictionary has named graphs' pts: written
/// only then, so a build without graphs refuses it by its format instead
/// of answering from a default graph that lacks the named graphs.
const FORMAT_GRAPHS: u32 = 5;

/// Just the format, read first so an old file gets the error that names it.
#[derive(Deserialize)]
struct Version {
    format: u32,
}

impl Catalog {
    /// The dictionary.
    pub fn dict(&self) -> &Dictionary {
        &self.dict
    }
    /// The key layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }
    /// The pt of `rdf:type`, if the data has type triples.
    pub fn type_pt(&self) -> Option<u32> {
        self.type_pt
    }
    /// Sizes for planning.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }
    /// The index parts that hold anything (an index read skips the others).
    pub fn parts(&self) -> &Parts {
        &self.parts
    }
    /// The named graphs that hold a triple now (term ids, ascending): a
    /// graph whose triples were all deleted is no graph of the dataset,
    /// though its pts stay in the dictionary.
    pub fn graphs_with_triples(&self) -> Vec<u32> {
        let d = &self.dict;
        let mut out: Vec<u32> = (0..d.pts())
            .filter(|&pt| self.stats.triples.get(pt as usize).is_some_and(|&n| n > 0))
            .filter_map(|pt| d.pt_graph(pt))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Notes that `key` holds something (an update's first entry of it).
    pub(crate) fn note_key(&mut self, key: VertexId) {
        if let (Err(slot), pt, dir) = self.layout.decode(key) {
            self.parts.mark(slot, pt, dir, self.layout.slots());
        }
    }

    /// Everything an update changes: the dictionary, the layout (its term
    /// count), the pt of `rdf:type` and the statistics.
    pub(crate) fn parts_mut(
        &mut self,
    ) -> (&mut Dictionary, &mut Layout, &mut Option<u32>, &mut Stats) {
        (
            &mut self.dict,
            &mut self.layout,
            &mut self.type_pt,
            &mut self.stats,
        )
    }

    /// The first store vertex of the dataset whose catalog is in `dir`, if
    /// there is one: a graph's vertex ids must stay below it to share the
    /// cluster (0: the dataset takes the whole id space).
    pub fn vertex_base_in(dir: &Path) -> Result<Option<u64>> {
        if !dir.join("catalog.json").exists() {
            return Ok(None);
        }
        Catalog::load(dir).map(|c| Some(c.layout.base()))
    }

    /// The catalog directory of a cluster described by `cluster_file`.
    pub fn dir_beside(cluster_file: &Path) -> PathBuf {
        cluster_file.parent().unwrap_or(Path::new(".")).join("rdf")
    }

    /// Writes the catalog into `dir` (created if missing).
    pub fn save(&self, dir: &Path) -> Result<()> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| RdfError::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        self.dict.save(&dir.join("dict"))?;
        let triples = self.stats.triples.iter().sum();
        let header = Header {
            format: if self.dict.graphs().is_empty() {
                FORMAT
            } else {
                FORMAT_GRAPHS
            },
            slots: self.layout.slots(),
            type_pt: self.type_pt,
            triples,
            stats: self.stats.clone(),
            pts_capacity: self.layout.pts_capacity(),
            parts: self.parts.clone(),
            vertex_base: self.layout.base(),
        };
        let path = dir.join("catalog.json");
        let tmp = dir.join("catalog.json.tmp");
        let bytes = serde_json::to_vec_pretty(&header).expect("a catalog serialises");
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            std::fs::File::open(dir)?.sync_all()
        };
        write().map_err(io(&path))
    }

    /// Reads a catalog written by [`Catalog::save`], for any number of
    /// servers (the keys are packed by store slot); a catalog of an older
    /// format or a damaged file is an error naming it.
    pub fn load(dir: &Path) -> Result<Catalog> {
        let path = dir.join("catalog.json");
        let bytes = std::fs::read(&path).map_err(|source| RdfError::Io {
            path: path.clone(),
            source,
        })?;
        let bad = |message: String| RdfError::Dictionary {
            path: path.clone(),
            message,
        };
        let v: Version = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
        if v.format == 1 || v.format == 2 {
            return Err(bad(format!(
                "format {}: the data was laid out by machine (term % machines), this build lays it out by store slot (format {FORMAT}) so it stays readable when servers are added or removed; load the dataset again into a new cluster",
                v.format
            )));
        }
        if !(3..=FORMAT_GRAPHS).contains(&v.format) {
            return Err(bad(format!(
                "format {}, this build reads 3 to {FORMAT_GRAPHS}",
                v.format
            )));
        }
        let h: Header = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
        let dict = Dictionary::load(&dir.join("dict"))?;
        if (v.format == FORMAT_GRAPHS) == dict.graphs().is_empty() {
            return Err(bad(format!(
                "format {} with a dictionary of {} named graphs: the catalog and its dictionary disagree",
                v.format,
                dict.graphs().len()
            )));
        }
        let pts = dict.pts() as usize;
        let s = &h.stats;
        if s.triples.len() != pts || s.subjects.len() != pts || s.objects.len() != pts {
            return Err(bad(format!(
                "statistics for {} pts, the dictionary has {pts}",
                s.triples.len()
            )));
        }
        if h.type_pt.is_some_and(|t| t as usize >= pts) {
            return Err(bad(format!("type pt {:?} is not a pt", h.type_pt)));
        }
        let cap = h.pts_capacity;
        if cap < pts as u64 {
            return Err(bad(format!(
                "pt capacity {cap} below the dictionary's {pts} pts"
            )));
        }
        let layout = Layout::new_at(dict.len() as u64, cap, h.slots, h.vertex_base)?;
        Ok(Catalog {
            dict,
            layout,
            type_pt: h.type_pt,
            stats: h.stats,
            parts: h.parts,
        })
    }
}

/// Every key's sorted list of a dataset, grouped by key.
#[derive(Debug, Clone)]
pub struct Lists {
    /// (key, neighbour) pairs, sorted by key then neighbour, without duplicates.
    pub pairs: Vec<(VertexId, u32)>,
    /// `pairs[i..j]` of each key, in key order.
    pub groups: Vec<(usize, usize)>,
    /// Triples the lists came from.
    pub triples: u64,
}

impl Lists {
    /// Key and list of group `g`.
    pub fn group(&self, g: usize) -> (VertexId, impl ExactSizeIterator<Item = u32> + '_) {
        let (i, j) = self.groups[g];
        (self.pairs[i].0, self.pairs[i..j].iter().map(|p| p.1))
    }
}

/// Every (key, neighbour) pair of a dataset in the layout, sorted, without duplicates.
fn pairs(d: &Dataset, l: &Layout) -> Vec<(VertexId, u32)> {
    let mut out = Vec::with_capacity(d.triples.len() * 4);
    let type_term = d.dict.id(&oxrdf::vocab::rdf::TYPE.into());
    for &[s, p, o] in &d.triples {
        let (hs, ho) = (l.slot(s), l.slot(o));
        out.push((l.normal(s, p, OUT), o));
        out.push((l.index(hs, p, OUT), s));
        out.push((l.index(ho, p, IN), o));
        // rdf:type by its term: in a named graph it has that graph's pt.
        let is_type = type_term.is_some() && d.dict.pt(p).map(|x| x.1) == type_term;
        if is_type {
            let c = d
                .dict
                .type_pt_in(o, d.dict.pt_graph(p))
                .expect("every rdf:type object has a type pt in its graph");
            out.push((l.index(hs, c, OUT), s));
        } else {
            out.push((l.normal(o, p, IN), s));
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Lays `d` out for a store of `slots` slots: its catalog and every key's list.
pub fn build(d: Dataset, slots: u32) -> Result<(Catalog, Lists)> {
    let layout = Layout::with_headroom(d.dict.len() as u64, d.dict.pts() as u64, slots)?;
    let pairs = pairs(&d, &layout);
    let pts = d.dict.pts() as usize;
    let mut stats = Stats {
        triples: vec![0; pts],
        subjects: vec![0; pts],
        objects: vec![0; pts],
    };
    for &[_, p, _] in &d.triples {
        stats.triples[p as usize] += 1;
    }
    let mut groups = Vec::new();
    let mut parts = Parts::default();
    let mut i = 0;
    while i < pairs.len() {
        let key = pairs[i].0;
        let mut j = i;
        while j < pairs.len() && pairs[j].0 == key {
            j += 1;
        }
        if let (Err(slot), pt, dir) = layout.decode(key) {
            parts.mark(slot, pt, dir, layout.slots());
            let n = (j - i) as u64;
            match dir {
                OUT => stats.subjects[pt as usize] += n,
                _ => stats.objects[pt as usize] += n,
            }
        }
        groups.push((i, j));
        i = j;
    }
    let triples = d.triples.len() as u64;
    Ok((
        Catalog {
            dict: d.dict,
            layout,
            type_pt: d.type_pt,
            stats,
            parts,
        },
        Lists {
            pairs,
            groups,
            triples,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATA: &str = r#"
<http://ex/a> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://ex/C> .
<http://ex/a> <http://ex/p> <http://ex/b> .
<http://ex/b> <http://ex/p> "x" .
"#;

    #[test]
    fn a_saved_catalog_loads_back_and_refuses_a_catalog_laid_out_by_machine_or_damage() {
        let d = Dataset::parse(DATA.as_bytes(), "t.nt", &()).unwrap();
        let (c, lists) = build(d, 4096).unwrap();
        assert!(lists.groups.len() >= 5);
        let dir = tempfile::tempdir().unwrap();
        c.save(dir.path()).unwrap();
        let back = Catalog::load(dir.path()).unwrap();
        assert_eq!(back.stats(), c.stats());
        assert_eq!(back.type_pt(), c.type_pt());
        assert_eq!(back.dict().len(), c.dict().len());
        assert_eq!(*back.layout(), *c.layout());
        assert_eq!(back.layout().slots(), 4096);
        assert_eq!(back.parts(), c.parts());
        // Three index lists of `p` and the type index's one part.
        let l = c.layout();
        let p = c
            .dict()
            .predicate_pt(
                c.dict()
                    .id(&oxrdf::NamedNode::new("http://ex/p").unwrap().into())
                    .unwrap(),
            )
            .unwrap();
        let a = c
            .dict()
            .id(&oxrdf::NamedNode::new("http://ex/a").unwrap().into())
            .unwrap();
        assert_eq!(
            c.parts().slots(p, OUT).collect::<Vec<_>>().len(),
            2,
            "a and b"
        );
        assert!(c.parts().holds(l.slot(a), p, OUT));
        assert!(!c.parts().holds(l.slot(a), p, IN), "a is no object of p");
        let path = dir.path().join("catalog.json");
        let json = std::fs::read_to_string(&path).unwrap();
        assert!(
            json.contains("\"slots\": 4096") && !json.contains("machines"),
            "{json}"
        );
        // Format 4 records the base past the graph ids; format 3 (no base) is
        // read as packed from vertex 0.
        assert_eq!(c.layout().base(), Layout::shared_base(4096));
        assert_eq!(
            Catalog::vertex_base_in(dir.path()).unwrap(),
            Some(Layout::shared_base(4096))
        );
        let base = format!("\"vertex_base\": {}", Layout::shared_base(4096));
        assert!(
            json.contains("\"format\": 4") && json.contains(&base),
            "{json}"
        );
        let mut v3: serde_json::Value = serde_json::from_str(&json).unwrap();
        v3["format"] = 3.into();
        v3.as_object_mut().unwrap().remove("vertex_base");
        std::fs::write(&path, v3.to_string()).unwrap();
        assert_eq!(Catalog::vertex_base_in(dir.path()).unwrap(), Some(0));
        assert_eq!(
            Catalog::vertex_base_in(&dir.path().join("none")).unwrap(),
            None
        );
        // A catalog of the layout by machine (formats 1 and 2) is refused by name.
        let old = json
            .replace("\"format\": 4", "\"format\": 2")
            .replace("\"slots\": 4096", "\"machines\": 3");
        std::fs::write(&path, old).unwrap();
        let e = Catalog::load(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("laid out by machine")
                && e.contains("load the dataset again")
                && e.contains("catalog.json"),
            "{e}"
        );
        std::fs::write(&path, b"{\"format\": 1").unwrap();
        let e = Catalog::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("catalog.json"), "{e}");
        let e = Catalog::load(&dir.path().join("none"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("none"), "{e}");
    }
}
