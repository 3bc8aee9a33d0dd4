//! What the evaluator refuses, found before the query reads anything, so
//! no feature it lacks can give a silently wrong answer.

use spargebra::algebra::{Expression, GraphPattern, OrderExpression};

use super::{aggregate, expr};
use crate::{RdfError, Result};

/// Refuses what the evaluator does not implement, naming it, before any read.
pub(crate) fn check(p: &GraphPattern) -> Result<()> {
    use GraphPattern as G;
    let no = |what: String| Err(RdfError::Unsupported(what));
    let e = |x: &Expression| match expr::unsupported(x) {
        Some(f) => no(f),
        None => check_exists(x),
    };
    match p {
        G::Bgp { .. } | G::Path { .. } | G::Values { .. } => Ok(()),
        G::Join { left, right } | G::Union { left, right } | G::Minus { left, right } => {
            check(left)?;
            check(right)
        }
        G::LeftJoin {
            left,
            right,
            expression,
        } => {
            check(left)?;
            check(right)?;
            expression.as_ref().map_or(Ok(()), e)
        }
        G::Filter { expr, inner } => {
            e(expr)?;
            check(inner)
        }
        G::Extend {
            inner, expression, ..
        } => {
            e(expression)?;
            check(inner)
        }
        G::OrderBy { inner, expression } => {
            for o in expression {
                match o {
                    OrderExpression::Asc(x) | OrderExpression::Desc(x) => e(x)?,
                }
            }
            check(inner)
        }
        G::Project { inner, .. }
        | G::Distinct { inner }
        | G::Reduced { inner }
        | G::Slice { inner, .. } => check(inner),
        G::Group {
            inner, aggregates, ..
        } => {
            for (_, a) in aggregates {
                if let Some(f) = aggregate::unsupported(a) {
                    return no(f);
                }
            }
            check(inner)
        }
        G::Graph { inner, .. } => check(inner),
        G::Service { .. } => no("SERVICE (federated queries)".into()),
        #[allow(unreachable_patterns)]
        _ => no(format!("the graph pattern {p}")),
    }
}

/// EXISTS patterns inside an expression are checked too.
fn check_exists(e: &Expression) -> Result<()> {
    let mut found = Vec::new();
    exists_patterns(e, &mut found);
    found.into_iter().try_for_each(check)
}

fn exists_patterns<'e>(e: &'e Expression, out: &mut Vec<&'e GraphPattern>) {
    use Expression as E;
    match e {
        E::Exists(p) => out.push(p),
        E::NamedNode(_) | E::Literal(_) | E::Variable(_) | E::Bound(_) => {}
        E::Or(a, b)
        | E::And(a, b)
        | E::Equal(a, b)
        | E::SameTerm(a, b)
        | E::Greater(a, b)
        | E::GreaterOrEqual(a, b)
        | E::Less(a, b)
        | E::LessOrEqual(a, b)
        | E::Add(a, b)
        | E::Subtract(a, b)
        | E::Multiply(a, b)
        | E::Divide(a, b) => {
            exists_patterns(a, out);
            exists_patterns(b, out);
        }
        E::UnaryPlus(a) | E::UnaryMinus(a) | E::Not(a) => exists_patterns(a, out),
        E::If(a, b, c) => {
            exists_patterns(a, out);
            exists_patterns(b, out);
            exists_patterns(c, out);
        }
        E::In(a, l) => {
            exists_patterns(a, out);
            l.iter().for_each(|x| exists_patterns(x, out));
        }
        E::Coalesce(l) | E::FunctionCall(_, l) => l.iter().for_each(|x| exists_patterns(x, out)),
    }
}
