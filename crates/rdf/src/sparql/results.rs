//! Writing answers: [`Solutions`] as W3C SPARQL 1.1 Query Results JSON or a
//! plain table, ASK's boolean as JSON, graphs as N-Triples.

use oxrdf::vocab::xsd;
use oxrdf::Term;
use serde_json::{json, Map, Value};

use super::Solutions;

/// One term in the W3C JSON format (SPARQL 1.1 Query Results JSON, 3.2.2).
pub fn term_json(t: &Term) -> Value {
    match t {
        Term::NamedNode(n) => json!({"type": "uri", "value": n.as_str()}),
        Term::BlankNode(b) => json!({"type": "bnode", "value": b.as_str()}),
        Term::Literal(l) => {
            let mut m = Map::new();
            m.insert("type".into(), "literal".into());
            m.insert("value".into(), l.value().into());
            if let Some(lang) = l.language() {
                m.insert("xml:lang".into(), lang.into());
            } else if l.datatype() != xsd::STRING {
                m.insert("datatype".into(), l.datatype().as_str().into());
            }
            Value::Object(m)
        }
    }
}

/// The whole answer in the W3C JSON format.
pub fn to_json(s: &Solutions) -> Value {
    let bindings: Vec<Value> = s
        .rows
        .iter()
        .map(|row| {
            let mut m = Map::new();
            for (v, t) in s.vars.iter().zip(row) {
                if let Some(t) = t {
                    m.insert(v.clone(), term_json(t));
                }
            }
            Value::Object(m)
        })
        .collect();
    json!({"head": {"vars": s.vars}, "results": {"bindings": bindings}})
}

/// An ASK answer in the W3C JSON format (3.3).
pub fn boolean_json(b: bool) -> Value {
    json!({"head": {}, "boolean": b})
}

/// Triples as N-Triples, one a line.
pub fn to_ntriples(g: &[oxrdf::Triple]) -> String {
    g.iter().map(|t| format!("{t} .\n")).collect()
}

/// The answer as an aligned text table of N-Triples terms, with a row count.
pub fn to_table(s: &Solutions) -> String {
    let cells: Vec<Vec<String>> = s
        .rows
        .iter()
        .map(|r| {
            r.iter()
                .map(|t| t.as_ref().map_or(String::new(), |t| t.to_string()))
                .collect()
        })
        .collect();
    let mut width: Vec<usize> = s.vars.iter().map(|v| v.len() + 1).collect();
    for r in &cells {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cols: &mut dyn Iterator<Item = String>| {
        let cols: Vec<String> = cols.collect();
        out.push_str(cols.join(" | ").trim_end());
        out.push('\n');
    };
    line(
        &mut out,
        &mut s
            .vars
            .iter()
            .zip(&width)
            .map(|(v, &w)| format!("{:<w$}", format!("?{v}"))),
    );
    line(&mut out, &mut width.iter().map(|&w| "-".repeat(w)));
    for r in &cells {
        line(
            &mut out,
            &mut r.iter().zip(&width).map(|(c, &w)| format!("{c:<w$}")),
        );
    }
    let n = s.rows.len();
    out.push_str(&format!("({n} row{})\n", if n == 1 { "" } else { "s" }));
    out
}
