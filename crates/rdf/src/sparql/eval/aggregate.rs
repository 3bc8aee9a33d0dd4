//! GROUP BY and aggregates (SPARQL 1.1, 11 and 18.5): rows are grouped by
//! the group variables' ids; each aggregate folds its group's values.
//! COUNT skips errors and unbound values; SUM and AVG are an error (the
//! variable stays unbound) if any value is not a number; MIN and MAX use
//! ORDER BY's order over the values they get; an empty input is one group
//! with its keys unbound (so COUNT(*) is 0), GROUP BY or not, as the W3C
//! test `agg-empty-group` has it.

use std::collections::{HashMap, HashSet};

use oxrdf::{Literal, Term};
use oxsdatatypes::Decimal;
use spargebra::algebra::{AggregateExpression, AggregateFunction, Expression};

use super::expr::{decimal, eval};
use super::value::{self, Num};
use super::{Evaluator, Row, RowEnv};
use crate::sparql::Source;
use crate::Result;

/// Names an aggregate the evaluator does not implement.
pub(crate) fn unsupported(a: &AggregateExpression) -> Option<String> {
    match a {
        AggregateExpression::FunctionCall {
            name: AggregateFunction::Custom(n),
            ..
        } => Some(format!("the aggregate <{}>", n.as_str())),
        AggregateExpression::FunctionCall { expr, .. } => super::expr::unsupported(expr),
        AggregateExpression::CountSolutions { .. } => None,
    }
}

impl<S: Source> Evaluator<'_, S> {
    pub(super) fn group(
        &mut self,
        rows: Vec<Row>,
        by: &[spargebra::term::Variable],
        aggregates: &[(spargebra::term::Variable, AggregateExpression)],
        seed: &Row,
    ) -> Result<Vec<Row>> {
        let keys: Vec<usize> = by.iter().map(|v| self.slot(v.as_str())).collect();
        let mut order: Vec<Vec<Option<u32>>> = Vec::new();
        let mut groups: HashMap<Vec<Option<u32>>, Vec<Row>> = HashMap::new();
        for r in rows {
            let k: Vec<Option<u32>> = keys.iter().map(|&s| r.get(s).copied().flatten()).collect();
            let g = groups.entry(k.clone()).or_insert_with(|| {
                order.push(k);
                Vec::new()
            });
            g.push(r);
        }
        if order.is_empty() {
            order.push(Vec::new());
            groups.insert(Vec::new(), Vec::new());
        }
        let mut out = Vec::with_capacity(order.len());
        for k in order {
            let members = groups.remove(&k).expect("every key has a group");
            let mut r = seed.clone();
            for (&s, v) in keys.iter().zip(&k) {
                if let Some(id) = v {
                    super::path::bind(&mut r, super::path::End::Slot(s), *id);
                }
            }
            for (var, agg) in aggregates {
                let slot = self.slot(var.as_str());
                if let Some(t) = self.aggregate(agg, &members)? {
                    let id = self.terms.id(&t);
                    super::path::bind(&mut r, super::path::End::Slot(slot), id);
                }
            }
            out.push(r);
        }
        Ok(out)
    }

    /// The values of `e` over `rows` (`None`: an error or unbound).
    fn values(
        &mut self,
        e: &Expression,
        rows: &[Row],
        distinct: bool,
    ) -> Result<Vec<Option<Term>>> {
        let mut out = Vec::with_capacity(rows.len());
        let mut seen = HashSet::new();
        for r in rows {
            let mut env = RowEnv { ev: self, row: r };
            let v = eval(e, &mut env);
            if let Some(err) = self.error.take() {
                return Err(err);
            }
            if distinct && !seen.insert(v.clone()) {
                continue;
            }
            out.push(v);
        }
        Ok(out)
    }

    fn aggregate(&mut self, a: &AggregateExpression, rows: &[Row]) -> Result<Option<Term>> {
        let (name, expr, distinct) = match a {
            AggregateExpression::CountSolutions { distinct } => {
                let n = if *distinct {
                    let set: HashSet<&[Option<u32>]> = rows.iter().map(super::trim).collect();
                    set.len()
                } else {
                    rows.len()
                };
                return Ok(Some(count(n)));
            }
            AggregateExpression::FunctionCall {
                name,
                expr,
                distinct,
            } => (name, expr, *distinct),
        };
        let vals = self.values(expr, rows, distinct)?;
        Ok(match name {
            AggregateFunction::Count => Some(count(vals.iter().flatten().count())),
            AggregateFunction::Sum => sum(&vals).map(Num::term),
            AggregateFunction::Avg => {
                if vals.is_empty() {
                    Some(Num::Int(0.into()).term())
                } else {
                    let n = vals.len() as i64;
                    match sum(&vals) {
                        Some(Num::Int(i)) => {
                            Decimal::from(i).checked_div(Decimal::from(n)).map(decimal)
                        }
                        Some(Num::Dec(d)) => d.checked_div(Decimal::from(n)).map(decimal),
                        Some(Num::Float(f)) => {
                            Some(Num::Float(f / oxsdatatypes::Float::from(n as f32)).term())
                        }
                        Some(Num::Double(d)) => {
                            Some(Num::Double(d / oxsdatatypes::Double::from(n as f64)).term())
                        }
                        None => None,
                    }
                }
            }
            AggregateFunction::Min | AggregateFunction::Max => {
                let max = matches!(name, AggregateFunction::Max);
                let mut best: Option<Term> = None;
                for v in vals.into_iter().flatten() {
                    let better = match &best {
                        None => true,
                        Some(b) => {
                            let o = value::order(Some(&v), Some(b));
                            if max {
                                o.is_gt()
                            } else {
                                o.is_lt()
                            }
                        }
                    };
                    if better {
                        best = Some(v);
                    }
                }
                best
            }
            AggregateFunction::Sample => vals.into_iter().flatten().next(),
            AggregateFunction::GroupConcat { separator } => {
                let sep = separator.as_deref().unwrap_or(" ");
                let mut parts = Vec::with_capacity(vals.len());
                let mut tag: Option<Option<String>> = None;
                let mut ok = true;
                for v in vals.iter() {
                    match v {
                        Some(Term::Literal(l))
                            if l.language().is_some()
                                || l.datatype() == oxrdf::vocab::xsd::STRING =>
                        {
                            parts.push(l.value().to_string());
                            let t = l.language().map(str::to_string);
                            tag = match tag {
                                None => Some(t),
                                Some(p) if p == t => Some(p),
                                Some(_) => Some(None),
                            };
                        }
                        _ => ok = false,
                    }
                }
                ok.then(|| {
                    let s = parts.join(sep);
                    match tag.flatten() {
                        Some(t) => Literal::new_language_tagged_literal(s.clone(), t)
                            .unwrap_or_else(|_| Literal::new_simple_literal(s))
                            .into(),
                        None => Literal::new_simple_literal(s).into(),
                    }
                })
            }
            AggregateFunction::Custom(_) => unreachable!("refused before the query runs"),
        })
    }
}

fn count(n: usize) -> Term {
    Num::Int((n as i64).into()).term()
}

/// The sum of numbers (0 for none); `None` if a value is not a number.
fn sum(vals: &[Option<Term>]) -> Option<Num> {
    let mut acc = Num::Int(0.into());
    for v in vals {
        let x = value::num(v.as_ref()?)?;
        acc = match Num::promote(acc, x) {
            (Num::Int(a), Num::Int(b)) => Num::Int(a.checked_add(b)?),
            (Num::Dec(a), Num::Dec(b)) => Num::Dec(a.checked_add(b)?),
            (Num::Float(a), Num::Float(b)) => Num::Float(a + b),
            (Num::Double(a), Num::Double(b)) => Num::Double(a + b),
            _ => unreachable!("promoted to one type"),
        };
    }
    Some(acc)
}
