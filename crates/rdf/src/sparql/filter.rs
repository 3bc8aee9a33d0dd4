//! FILTER evaluation with SPARQL's three-valued logic: `None` is an error,
//! which removes the row (SPARQL 1.1, 17.2).

use std::cmp::Ordering;

use oxrdf::vocab::xsd;
use oxrdf::{Literal, Term};

use super::query::{numeric, Cmp, Expr};

/// A value during evaluation.
#[derive(Debug, Clone, Copy)]
enum Val<'a> {
    Term(&'a Term),
    Bool(bool),
}

/// Whether `e` holds for a row; `lookup(v)` gives variable `v`'s term, if bound.
pub(crate) fn holds<'a>(e: &'a Expr, lookup: &dyn Fn(usize) -> Option<&'a Term>) -> bool {
    truth(e, lookup) == Some(true)
}

fn truth<'a>(e: &'a Expr, lookup: &dyn Fn(usize) -> Option<&'a Term>) -> Option<bool> {
    match e {
        Expr::And(a, b) => match (truth(a, lookup), truth(b, lookup)) {
            (Some(false), _) | (_, Some(false)) => Some(false),
            (Some(true), Some(true)) => Some(true),
            _ => None,
        },
        Expr::Or(a, b) => match (truth(a, lookup), truth(b, lookup)) {
            (Some(true), _) | (_, Some(true)) => Some(true),
            (Some(false), Some(false)) => Some(false),
            _ => None,
        },
        Expr::Not(a) => truth(a, lookup).map(|b| !b),
        Expr::Bound(v) => Some(lookup(*v).is_some()),
        Expr::Cmp(op, a, b) => compare(*op, value(a, lookup)?, value(b, lookup)?),
        Expr::SameTerm(a, b) => match (value(a, lookup)?, value(b, lookup)?) {
            (Val::Term(x), Val::Term(y)) => Some(x == y),
            (Val::Bool(x), Val::Bool(y)) => Some(x == y),
            _ => Some(false),
        },
        Expr::In(a, list) => {
            let x = value(a, lookup)?;
            let mut error = false;
            for e in list {
                match value(e, lookup).and_then(|y| compare(Cmp::Eq, x, y)) {
                    Some(true) => return Some(true),
                    Some(false) => {}
                    None => error = true,
                }
            }
            (!error).then_some(false)
        }
        Expr::Var(_) | Expr::Term(_) => ebv(value(e, lookup)?),
    }
}

fn value<'a>(e: &'a Expr, lookup: &dyn Fn(usize) -> Option<&'a Term>) -> Option<Val<'a>> {
    match e {
        Expr::Var(v) => lookup(*v).map(Val::Term),
        Expr::Term(t) => Some(Val::Term(t)),
        other => truth(other, lookup).map(Val::Bool),
    }
}

/// Effective boolean value (SPARQL 1.1, 17.2.2).
fn ebv(v: Val<'_>) -> Option<bool> {
    match v {
        Val::Bool(b) => Some(b),
        Val::Term(Term::Literal(l)) => {
            if l.datatype() == xsd::BOOLEAN {
                match l.value() {
                    "true" | "1" => Some(true),
                    "false" | "0" => Some(false),
                    _ => Some(false),
                }
            } else if let Some(x) = numeric(l) {
                Some(x != 0.0 && !x.is_nan())
            } else if is_string(l) {
                Some(!l.value().is_empty())
            } else {
                None
            }
        }
        Val::Term(_) => None,
    }
}

fn is_string(l: &Literal) -> bool {
    l.datatype() == xsd::STRING
}

fn as_bool(v: Val<'_>) -> Option<bool> {
    match v {
        Val::Bool(b) => Some(b),
        Val::Term(Term::Literal(l)) if l.datatype() == xsd::BOOLEAN => match l.value() {
            "true" | "1" => Some(true),
            "false" | "0" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// The ordering of two values where SPARQL's operator table defines one.
fn order(x: Val<'_>, y: Val<'_>) -> Option<Ordering> {
    if let (Some(a), Some(b)) = (as_bool(x), as_bool(y)) {
        return Some(a.cmp(&b));
    }
    let (Val::Term(Term::Literal(a)), Val::Term(Term::Literal(b))) = (x, y) else {
        return None;
    };
    if let (Some(p), Some(q)) = (numeric(a), numeric(b)) {
        return p.partial_cmp(&q);
    }
    if is_string(a) && is_string(b) {
        return Some(a.value().cmp(b.value()));
    }
    if a.datatype() == xsd::DATE_TIME && b.datatype() == xsd::DATE_TIME {
        // Lexical order is time order for one fixed-width, same-zone format (as generated data is).
        return Some(a.value().cmp(b.value()));
    }
    None
}

fn compare(op: Cmp, x: Val<'_>, y: Val<'_>) -> Option<bool> {
    if op == Cmp::Eq {
        if let Some(o) = order(x, y) {
            return Some(o == Ordering::Equal);
        }
        return match (x, y) {
            (Val::Term(a), Val::Term(b)) if a == b => Some(true),
            // Two literals of types without an equality rule: a type error unless identical.
            (Val::Term(Term::Literal(_)), Val::Term(Term::Literal(_))) => None,
            (Val::Term(_), Val::Term(_)) => Some(false),
            _ => None,
        };
    }
    let o = order(x, y)?;
    Some(match op {
        Cmp::Lt => o == Ordering::Less,
        Cmp::Le => o != Ordering::Greater,
        Cmp::Gt => o == Ordering::Greater,
        Cmp::Ge => o != Ordering::Less,
        Cmp::Eq => unreachable!("handled above"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxrdf::NamedNode;

    fn int(v: &str) -> Term {
        Term::Literal(Literal::new_typed_literal(v, xsd::INTEGER))
    }

    #[test]
    fn comparisons_and_three_valued_logic() {
        let terms = [int("7"), Term::Literal(Literal::new_simple_literal("abc"))];
        let t = |e: Expr| {
            let lookup = |v: usize| terms.get(v);
            truth(&e, &lookup)
        };
        let var = |v| Box::new(Expr::Var(v));
        let c = |x: Term| Box::new(Expr::Term(x));
        assert_eq!(t(Expr::Cmp(Cmp::Lt, var(0), c(int("10")))), Some(true));
        assert_eq!(
            t(Expr::Cmp(
                Cmp::Eq,
                var(0),
                c(Term::Literal(Literal::new_typed_literal(
                    "7.0",
                    xsd::DECIMAL
                )))
            )),
            Some(true)
        );
        assert_eq!(
            t(Expr::Cmp(
                Cmp::Ge,
                var(1),
                c(Term::Literal(Literal::new_simple_literal("abd")))
            )),
            Some(false)
        );
        // Numbers and strings do not order: an error, and an error is not true.
        assert_eq!(t(Expr::Cmp(Cmp::Lt, var(0), var(1))), None);
        assert_eq!(
            t(Expr::Or(
                Box::new(Expr::Cmp(Cmp::Lt, var(0), var(1))),
                Box::new(Expr::Bound(0))
            )),
            Some(true)
        );
        assert_eq!(
            t(Expr::And(
                Box::new(Expr::Cmp(Cmp::Lt, var(0), var(1))),
                Box::new(Expr::Bound(0))
            )),
            None
        );
        assert_eq!(t(Expr::Bound(5)), Some(false));
        let iri = Term::NamedNode(NamedNode::new("http://ex/a").unwrap());
        assert_eq!(t(Expr::Cmp(Cmp::Eq, var(0), c(iri.clone()))), Some(false));
        assert_eq!(t(Expr::Cmp(Cmp::Lt, c(iri.clone()), c(iri))), None);
        assert_eq!(
            t(Expr::In(
                var(0),
                vec![Expr::Term(int("1")), Expr::Term(int("7"))]
            )),
            Some(true)
        );
    }
}
