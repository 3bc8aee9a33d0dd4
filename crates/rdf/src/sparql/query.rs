//! From `spargebra`'s algebra to the engine's [`Query`]: the supported subset
//! is taken apart, everything else is refused naming the feature.
//!
//! Accepted shape, outermost first: `Slice` (LIMIT/OFFSET), `Distinct` or
//! `Reduced`, `Project`, then `Filter`s over a basic graph pattern (or a
//! `Join` of basic graph patterns, which is one bigger pattern).

use oxrdf::Term;
use spargebra::algebra::{Expression, GraphPattern};
use spargebra::term::{NamedNodePattern, TermPattern, TriplePattern};

use crate::{RdfError, Result};

/// One end of a triple pattern.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum End {
    /// A variable (or a blank node, which acts as one).
    Var(usize),
    /// A constant term.
    Const(Term),
}

/// A triple pattern with a constant predicate.
#[derive(Debug, Clone)]
pub(crate) struct Pattern {
    pub s: End,
    pub p: oxrdf::NamedNode,
    pub o: End,
    /// The pattern as written, for messages.
    pub text: String,
}

/// A FILTER run inside exploration: its expression and the variables it reads.
#[derive(Debug, Clone)]
pub(crate) struct Filter {
    pub expr: Expression,
    pub vars: Vec<usize>,
}

impl Filter {
    /// `expr` with its variables given indexes in `q`.
    pub fn new(q: &mut Query, expr: Expression) -> Filter {
        let mut names = Vec::new();
        super::eval::expr::vars(&expr, &mut names);
        let names: Vec<String> = names.into_iter().map(str::to_string).collect();
        let vars = names.into_iter().map(|n| q.var(n)).collect();
        Filter { expr, vars }
    }
}

/// A SELECT query over one basic graph pattern.
#[derive(Debug, Clone, Default)]
pub(crate) struct Query {
    /// Every variable by index (blank nodes as `_:name`).
    pub vars: Vec<String>,
    pub patterns: Vec<Pattern>,
    pub filters: Vec<Filter>,
    /// Projected variables, in order.
    pub projection: Vec<usize>,
    pub distinct: bool,
    pub offset: usize,
    pub limit: Option<usize>,
    /// The graphs whose merge the patterns match (`None` in the list: the
    /// store's default graph); `None`: the store's default graph alone.
    pub graphs: Option<Vec<Option<u32>>>,
}

impl Query {
    /// The graphs the patterns match in ([`Query::graphs`]).
    pub(crate) fn active_graphs(&self) -> &[Option<u32>] {
        self.graphs.as_deref().unwrap_or(&[None])
    }
}

impl Query {
    pub(crate) fn var(&mut self, name: String) -> usize {
        if let Some(i) = self.vars.iter().position(|v| *v == name) {
            return i;
        }
        self.vars.push(name);
        self.vars.len() - 1
    }

    /// Parses SPARQL text into the supported subset.
    pub fn parse(text: &str) -> Result<Query> {
        let q = spargebra::SparqlParser::new()
            .parse_query(text)
            .map_err(|e| RdfError::QuerySyntax(e.to_string()))?;
        match q {
            spargebra::Query::Select {
                dataset: None,
                pattern,
                ..
            } => Query::from_pattern(pattern),
            spargebra::Query::Select { .. } => Err(unsupported("FROM and FROM NAMED (datasets)")),
            spargebra::Query::Construct { .. } => Err(unsupported("CONSTRUCT queries")),
            spargebra::Query::Describe { .. } => Err(unsupported("DESCRIBE queries")),
            spargebra::Query::Ask { .. } => Err(unsupported("ASK queries")),
        }
    }

    /// The supported subset of a SELECT's algebra (the exploration's fast
    /// path); `Unsupported` sends the query to the evaluator.
    pub fn from_pattern(pattern: GraphPattern) -> Result<Query> {
        let mut q = Query::default();
        let mut p = pattern;
        if let GraphPattern::Slice {
            inner,
            start,
            length,
        } = p
        {
            q.offset = start;
            q.limit = length;
            p = *inner;
        }
        match p {
            GraphPattern::Distinct { inner } => {
                q.distinct = true;
                p = *inner;
            }
            // REDUCED allows but does not require removing duplicates.
            GraphPattern::Reduced { inner } => p = *inner,
            other => p = other,
        }
        let projection = match p {
            GraphPattern::Project { inner, variables } => {
                p = *inner;
                Some(variables)
            }
            other => {
                p = other;
                None
            }
        };
        q.where_clause(p, true)?;
        q.projection = match projection {
            Some(vs) => vs
                .into_iter()
                .map(|v| q.var(v.as_str().to_string()))
                .collect(),
            None => (0..q.vars.len())
                .filter(|&i| !q.vars[i].starts_with("_:"))
                .collect(),
        };
        Ok(q)
    }

    fn where_clause(&mut self, p: GraphPattern, top: bool) -> Result<()> {
        match p {
            GraphPattern::Bgp { patterns } => {
                for t in patterns {
                    let t = self.triple(t)?;
                    self.patterns.push(t);
                }
                Ok(())
            }
            GraphPattern::Filter { expr, inner } if top => {
                if super::eval::expr::has_exists(&expr) {
                    return Err(unsupported("EXISTS and NOT EXISTS"));
                }
                if let Some(f) = super::eval::expr::unsupported(&expr) {
                    return Err(unsupported(&f));
                }
                let f = Filter::new(self, expr);
                self.filters.push(f);
                self.where_clause(*inner, true)
            }
            GraphPattern::Filter { .. } => Err(unsupported("FILTER inside a nested group")),
            GraphPattern::Join { left, right } => {
                self.where_clause(*left, false)?;
                self.where_clause(*right, false)
            }
            GraphPattern::Path { .. } => Err(unsupported("property paths")),
            GraphPattern::LeftJoin { .. } => Err(unsupported("OPTIONAL")),
            GraphPattern::Union { .. } => Err(unsupported("UNION")),
            GraphPattern::Graph { .. } => Err(unsupported("GRAPH")),
            GraphPattern::Extend { inner, .. } if matches!(*inner, GraphPattern::Group { .. }) => {
                Err(unsupported("GROUP BY and aggregates"))
            }
            GraphPattern::Extend { .. } => Err(unsupported("BIND and expressions in SELECT")),
            GraphPattern::Minus { .. } => Err(unsupported("MINUS")),
            GraphPattern::Values { .. } => Err(unsupported("VALUES")),
            GraphPattern::OrderBy { .. } => Err(unsupported("ORDER BY")),
            GraphPattern::Group { .. } => Err(unsupported("GROUP BY and aggregates")),
            GraphPattern::Service { .. } => Err(unsupported("SERVICE")),
            GraphPattern::Project { .. }
            | GraphPattern::Distinct { .. }
            | GraphPattern::Reduced { .. }
            | GraphPattern::Slice { .. } => Err(unsupported("subqueries")),
            #[allow(unreachable_patterns)]
            _ => Err(unsupported("this graph pattern")),
        }
    }

    fn end(&mut self, t: TermPattern) -> Result<End> {
        Ok(match t {
            TermPattern::NamedNode(n) => End::Const(Term::NamedNode(n)),
            TermPattern::Literal(l) => End::Const(Term::Literal(l)),
            TermPattern::BlankNode(b) => End::Var(self.var(format!("_:{}", b.as_str()))),
            TermPattern::Variable(v) => End::Var(self.var(v.as_str().to_string())),
            #[allow(unreachable_patterns)]
            _ => return Err(unsupported("quoted triples")),
        })
    }

    fn triple(&mut self, t: TriplePattern) -> Result<Pattern> {
        let text = t.to_string();
        let p = match t.predicate {
            NamedNodePattern::NamedNode(n) => n,
            NamedNodePattern::Variable(v) => {
                return Err(unsupported(&format!(
                "variable predicates (?{} in {text}; graph exploration needs a constant predicate)",
                v.as_str()
            )))
            }
        };
        Ok(Pattern {
            s: self.end(t.subject)?,
            p,
            o: self.end(t.object)?,
            text,
        })
    }
}

fn unsupported(what: &str) -> RdfError {
    RdfError::Unsupported(what.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_supported_shape_is_taken_apart() {
        let q = Query::parse(
            "PREFIX ex: <http://ex/> SELECT DISTINCT ?x ?n WHERE { ?x a ex:C ; ex:name ?n . _:b ex:knows ?x FILTER(?n != \"a\" && ?n < \"z\") } LIMIT 5 OFFSET 2",
        )
        .unwrap();
        assert!(q.distinct);
        assert_eq!((q.offset, q.limit), (2, Some(5)));
        assert_eq!(q.patterns.len(), 3);
        assert_eq!(q.filters.len(), 1);
        assert_eq!(q.projection.len(), 2);
        assert!(q.vars.iter().any(|v| v.starts_with("_:")));
        let star = Query::parse("SELECT * WHERE { ?s <http://ex/p> _:o }").unwrap();
        assert_eq!(
            star.projection.len(),
            1,
            "blank nodes are not projected by *"
        );
    }

    #[test]
    fn unsupported_features_are_named() {
        let cases = [
            ("SELECT ?s WHERE { ?s ?p ?o }", "variable predicates"),
            (
                "SELECT ?s WHERE { ?s <http://ex/p> ?o OPTIONAL { ?o <http://ex/q> ?z } }",
                "OPTIONAL",
            ),
            (
                "SELECT ?s WHERE { { ?s <http://ex/p> ?o } UNION { ?s <http://ex/q> ?o } }",
                "UNION",
            ),
            ("SELECT ?s WHERE { ?s <http://ex/p>+ ?o }", "property paths"),
            (
                "SELECT ?s WHERE { ?s <http://ex/p> ?o } ORDER BY ?s",
                "ORDER BY",
            ),
            (
                "SELECT (COUNT(*) AS ?c) WHERE { ?s <http://ex/p> ?o }",
                "aggregates",
            ),
            (
                "SELECT ?s WHERE { ?s <http://ex/p> ?o FILTER(<http://ex/f>(?o)) }",
                "the function <http://ex/f>",
            ),
            (
                "SELECT ?s WHERE { ?s <http://ex/p> ?o FILTER NOT EXISTS { ?o <http://ex/q> ?s } }",
                "EXISTS",
            ),
            ("ASK { ?s <http://ex/p> ?o }", "ASK"),
        ];
        for (text, feature) in cases {
            let e = Query::parse(text).unwrap_err().to_string();
            assert!(
                e.contains("unsupported") && e.contains(feature),
                "{text}: {e}"
            );
        }
        // Functions and arithmetic run inside exploration.
        Query::parse(
            "SELECT ?s WHERE { ?s <http://ex/p> ?o FILTER(REGEX(?o, \"x\") && ?o + 1 > 2) }",
        )
        .unwrap();
        let e = Query::parse("SELEC ?s WHERE").unwrap_err().to_string();
        assert!(e.starts_with("SPARQL syntax"), "{e}");
    }
}
