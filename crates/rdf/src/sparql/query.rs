//! From `spargebra`'s algebra to the engine's [`Query`]: the supported subset
//! is taken apart, everything else is refused naming the feature.
//!
//! Accepted shape, outermost first: `Slice` (LIMIT/OFFSET), `Distinct` or
//! `Reduced`, `Project`, then `Filter`s over a basic graph pattern (or a
//! `Join` of basic graph patterns, which is one bigger pattern).

use oxrdf::{Literal, Term};
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

/// A FILTER expression of the supported kind.
#[derive(Debug, Clone)]
pub(crate) enum Expr {
    Var(usize),
    Term(Term),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Cmp(Cmp, Box<Expr>, Box<Expr>),
    SameTerm(Box<Expr>, Box<Expr>),
    Bound(usize),
    In(Box<Expr>, Vec<Expr>),
}

/// A comparison operator (`!=` is `Not(Eq)` in the algebra).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cmp {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Expr {
    /// Variables the expression reads.
    pub fn vars(&self, out: &mut Vec<usize>) {
        match self {
            Expr::Var(v) | Expr::Bound(v) => out.push(*v),
            Expr::Term(_) => {}
            Expr::And(a, b) | Expr::Or(a, b) | Expr::Cmp(_, a, b) | Expr::SameTerm(a, b) => {
                a.vars(out);
                b.vars(out);
            }
            Expr::Not(a) => a.vars(out),
            Expr::In(a, list) => {
                a.vars(out);
                list.iter().for_each(|e| e.vars(out));
            }
        }
    }
}

/// A SELECT query over one basic graph pattern.
#[derive(Debug, Clone, Default)]
pub(crate) struct Query {
    /// Every variable by index (blank nodes as `_:name`).
    pub vars: Vec<String>,
    pub patterns: Vec<Pattern>,
    pub filters: Vec<Expr>,
    /// Projected variables, in order.
    pub projection: Vec<usize>,
    pub distinct: bool,
    pub offset: usize,
    pub limit: Option<usize>,
}

impl Query {
    fn var(&mut self, name: String) -> usize {
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
        let pattern = match q {
            spargebra::Query::Select {
                dataset, pattern, ..
            } => {
                if dataset.is_some() {
                    return Err(unsupported("FROM and FROM NAMED (datasets)"));
                }
                pattern
            }
            spargebra::Query::Construct { .. } => return Err(unsupported("CONSTRUCT queries")),
            spargebra::Query::Describe { .. } => return Err(unsupported("DESCRIBE queries")),
            spargebra::Query::Ask { .. } => return Err(unsupported("ASK queries")),
        };
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
                let e = self.expr(expr)?;
                self.filters.push(e);
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

    fn expr(&mut self, e: Expression) -> Result<Expr> {
        let b = |q: &mut Query, e: Expression| q.expr(e).map(Box::new);
        Ok(match e {
            Expression::NamedNode(n) => Expr::Term(Term::NamedNode(n)),
            Expression::Literal(l) => Expr::Term(Term::Literal(l)),
            Expression::Variable(v) => Expr::Var(self.var(v.as_str().to_string())),
            Expression::And(x, y) => Expr::And(b(self, *x)?, b(self, *y)?),
            Expression::Or(x, y) => Expr::Or(b(self, *x)?, b(self, *y)?),
            Expression::Not(x) => Expr::Not(b(self, *x)?),
            Expression::Equal(x, y) => Expr::Cmp(Cmp::Eq, b(self, *x)?, b(self, *y)?),
            Expression::Less(x, y) => Expr::Cmp(Cmp::Lt, b(self, *x)?, b(self, *y)?),
            Expression::LessOrEqual(x, y) => Expr::Cmp(Cmp::Le, b(self, *x)?, b(self, *y)?),
            Expression::Greater(x, y) => Expr::Cmp(Cmp::Gt, b(self, *x)?, b(self, *y)?),
            Expression::GreaterOrEqual(x, y) => Expr::Cmp(Cmp::Ge, b(self, *x)?, b(self, *y)?),
            Expression::SameTerm(x, y) => Expr::SameTerm(b(self, *x)?, b(self, *y)?),
            Expression::Bound(v) => Expr::Bound(self.var(v.as_str().to_string())),
            Expression::In(x, list) => Expr::In(
                b(self, *x)?,
                list.into_iter()
                    .map(|e| self.expr(e))
                    .collect::<Result<_>>()?,
            ),
            Expression::FunctionCall(f, _) => {
                return Err(unsupported(&format!("the function {f} in FILTER")))
            }
            Expression::Add(..)
            | Expression::Subtract(..)
            | Expression::Multiply(..)
            | Expression::Divide(..)
            | Expression::UnaryPlus(..)
            | Expression::UnaryMinus(..) => return Err(unsupported("arithmetic in FILTER")),
            Expression::Exists(_) => return Err(unsupported("EXISTS and NOT EXISTS")),
            Expression::If(..) => return Err(unsupported("IF in FILTER")),
            Expression::Coalesce(_) => return Err(unsupported("COALESCE in FILTER")),
            #[allow(unreachable_patterns)]
            _ => return Err(unsupported("this FILTER expression")),
        })
    }
}

fn unsupported(what: &str) -> RdfError {
    RdfError::Unsupported(what.to_string())
}

/// A literal's numeric value, if its datatype is one of XSD's numeric types.
pub(crate) fn numeric(l: &Literal) -> Option<f64> {
    let dt = l
        .datatype()
        .as_str()
        .strip_prefix("http://www.w3.org/2001/XMLSchema#")?;
    match dt {
        "integer" | "decimal" | "double" | "float" | "int" | "long" | "short" | "byte"
        | "nonNegativeInteger" | "positiveInteger" | "negativeInteger" | "nonPositiveInteger"
        | "unsignedInt" | "unsignedLong" | "unsignedShort" | "unsignedByte" => {
            l.value().trim().parse::<f64>().ok()
        }
        _ => None,
    }
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
                "SELECT ?s WHERE { ?s <http://ex/p> ?o FILTER(REGEX(?o, \"x\")) }",
                "function",
            ),
            ("ASK { ?s <http://ex/p> ?o }", "ASK"),
            (
                "SELECT ?s WHERE { ?s <http://ex/p> ?o FILTER(?o + 1 > 2) }",
                "arithmetic",
            ),
        ];
        for (text, feature) in cases {
            let e = Query::parse(text).unwrap_err().to_string();
            assert!(
                e.contains("unsupported") && e.contains(feature),
                "{text}: {e}"
            );
        }
        let e = Query::parse("SELEC ?s WHERE").unwrap_err().to_string();
        assert!(e.starts_with("SPARQL syntax"), "{e}");
    }
}
