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

/// Escapes `s` for XML text and attribute values.
fn xml_escape(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
}

/// One term in the W3C XML format (SPARQL Query Results XML Format, 2.3.1).
fn term_xml(t: &Term, out: &mut String) {
    match t {
        Term::NamedNode(n) => {
            out.push_str("<uri>");
            xml_escape(n.as_str(), out);
            out.push_str("</uri>");
        }
        Term::BlankNode(b) => {
            out.push_str("<bnode>");
            xml_escape(b.as_str(), out);
            out.push_str("</bnode>");
        }
        Term::Literal(l) => {
            out.push_str("<literal");
            if let Some(lang) = l.language() {
                out.push_str(" xml:lang=\"");
                xml_escape(lang, out);
                out.push('"');
            } else if l.datatype() != xsd::STRING {
                out.push_str(" datatype=\"");
                xml_escape(l.datatype().as_str(), out);
                out.push('"');
            }
            out.push('>');
            xml_escape(l.value(), out);
            out.push_str("</literal>");
        }
    }
}

const XML_HEAD: &str =
    "<?xml version=\"1.0\"?>\n<sparql xmlns=\"http://www.w3.org/2005/sparql-results#\">\n";

/// The whole answer in the W3C XML format.
pub fn to_xml(s: &Solutions) -> String {
    let mut out = String::from(XML_HEAD);
    out.push_str("  <head>\n");
    for v in &s.vars {
        out.push_str("    <variable name=\"");
        xml_escape(v, &mut out);
        out.push_str("\"/>\n");
    }
    out.push_str("  </head>\n  <results>\n");
    for row in &s.rows {
        out.push_str("    <result>\n");
        for (v, t) in s.vars.iter().zip(row) {
            if let Some(t) = t {
                out.push_str("      <binding name=\"");
                xml_escape(v, &mut out);
                out.push_str("\">");
                term_xml(t, &mut out);
                out.push_str("</binding>\n");
            }
        }
        out.push_str("    </result>\n");
    }
    out.push_str("  </results>\n</sparql>\n");
    out
}

/// An ASK answer in the W3C XML format (2.4).
pub fn boolean_xml(b: bool) -> String {
    format!("{XML_HEAD}  <head/>\n  <boolean>{b}</boolean>\n</sparql>\n")
}

/// The answer as SPARQL 1.1 CSV (SPARQL 1.1 Query Results CSV and TSV, 2):
/// plain values (a literal's lexical form, an IRI without brackets), fields
/// quoted when they hold a quote, comma or line break; CRLF line ends.
pub fn to_csv(s: &Solutions) -> String {
    fn field(v: &str, out: &mut String) {
        if v.contains(['"', ',', '\n', '\r']) {
            out.push('"');
            out.push_str(&v.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(v);
        }
    }
    let mut out = String::new();
    for (k, v) in s.vars.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        field(v, &mut out);
    }
    out.push_str("\r\n");
    for row in &s.rows {
        for (k, t) in row.iter().enumerate() {
            if k > 0 {
                out.push(',');
            }
            match t {
                None => {}
                Some(Term::NamedNode(n)) => field(n.as_str(), &mut out),
                Some(Term::BlankNode(b)) => field(&format!("_:{}", b.as_str()), &mut out),
                Some(Term::Literal(l)) => field(l.value(), &mut out),
            }
        }
        out.push_str("\r\n");
    }
    out
}

/// The answer as SPARQL 1.1 TSV (3): `?var` headers, terms in their
/// Turtle/N-Triples form, an empty field for unbound.
pub fn to_tsv(s: &Solutions) -> String {
    let mut out = s
        .vars
        .iter()
        .map(|v| format!("?{v}"))
        .collect::<Vec<_>>()
        .join("\t");
    out.push('\n');
    for row in &s.rows {
        let cells: Vec<String> = row
            .iter()
            // N-Triples escapes tabs and line breaks inside literals.
            .map(|t| t.as_ref().map_or(String::new(), |t| t.to_string()))
            .collect();
        out.push_str(&cells.join("\t"));
        out.push('\n');
    }
    out
}

/// Triples as Turtle (subjects grouped, no prefixes).
pub fn to_turtle(g: &[oxrdf::Triple]) -> String {
    let mut w = oxttl::TurtleSerializer::new().for_writer(Vec::new());
    for t in g {
        // Writing into a Vec cannot fail.
        w.serialize_triple(t).expect("Turtle into memory");
    }
    let bytes = w.finish().expect("Turtle into memory");
    String::from_utf8(bytes).expect("the Turtle serializer writes UTF-8")
}
