//! Expression evaluation (SPARQL 1.1, 17): a value is a `Term`, `None` is
//! an error, and FILTER keeps a row only when the effective boolean value
//! is true. Built-in functions live in [`super::func`].

use std::collections::HashMap;

use oxrdf::{BlankNode, Term};
use oxsdatatypes::{DateTime, Decimal, Double, Float};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use spargebra::algebra::{Expression, Function, GraphPattern};

use super::func;
use super::value::{self, boolean, ebv, Num};

/// What an expression reads besides itself: the current row, EXISTS over
/// the store, and the query-wide state in [`Ctx`].
pub(crate) trait Env {
    /// The term bound to variable `name` in the current row.
    fn var(&self, name: &str) -> Option<Term>;
    /// Whether `p` has a solution under the current row (`None`: it failed;
    /// the environment keeps the reason).
    fn exists(&mut self, p: &GraphPattern) -> Option<bool>;
    /// Query-wide state.
    fn ctx(&mut self) -> &mut Ctx;
}

/// State shared by every expression of one query: NOW is one instant
/// (17.4.5.1), RAND and UUID draw from a seeded generator (runs repeat),
/// BNODE(str) gives one node per string per row, regexes compile once.
pub(crate) struct Ctx {
    pub now: DateTime,
    pub rng: Xoshiro256PlusPlus,
    pub bnodes: HashMap<String, BlankNode>,
    pub regexes: HashMap<(String, String), Option<regex::Regex>>,
    /// The query's BASE, for IRI().
    pub base: Option<String>,
}

/// Compiled regexes kept per query at most.
pub(crate) const REGEXES_MAX: usize = 256;

impl Ctx {
    pub fn new(seed: u64, base: Option<String>) -> Ctx {
        Ctx {
            now: DateTime::now(),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            bnodes: HashMap::new(),
            regexes: HashMap::new(),
            base,
        }
    }
}

/// An environment with only variables (FILTERs run inside exploration,
/// which never hold EXISTS).
pub(crate) struct VarEnv<'a, F: Fn(&str) -> Option<Term>> {
    pub lookup: F,
    pub ctx: &'a mut Ctx,
}

impl<F: Fn(&str) -> Option<Term>> Env for VarEnv<'_, F> {
    fn var(&self, name: &str) -> Option<Term> {
        (self.lookup)(name)
    }
    fn exists(&mut self, _: &GraphPattern) -> Option<bool> {
        debug_assert!(false, "EXISTS is never pushed into exploration");
        None
    }
    fn ctx(&mut self) -> &mut Ctx {
        self.ctx
    }
}

/// Whether `e` is true for the environment's row.
pub(crate) fn holds(e: &Expression, env: &mut dyn Env) -> bool {
    eval(e, env).and_then(|t| ebv(&t)) == Some(true)
}

fn truth(e: &Expression, env: &mut dyn Env) -> Option<bool> {
    eval(e, env).and_then(|t| ebv(&t))
}

/// The value of `e`, `None` for an error.
pub(crate) fn eval(e: &Expression, env: &mut dyn Env) -> Option<Term> {
    use Expression as E;
    match e {
        E::NamedNode(n) => Some(n.clone().into()),
        E::Literal(l) => Some(l.clone().into()),
        E::Variable(v) => env.var(v.as_str()),
        E::Or(a, b) => match (truth(a, env), truth(b, env)) {
            (Some(true), _) | (_, Some(true)) => Some(boolean(true)),
            (Some(false), Some(false)) => Some(boolean(false)),
            _ => None,
        },
        E::And(a, b) => match (truth(a, env), truth(b, env)) {
            (Some(false), _) | (_, Some(false)) => Some(boolean(false)),
            (Some(true), Some(true)) => Some(boolean(true)),
            _ => None,
        },
        E::Not(a) => truth(a, env).map(|b| boolean(!b)),
        E::Equal(a, b) => value::equal(&eval(a, env)?, &eval(b, env)?).map(boolean),
        E::SameTerm(a, b) => Some(boolean(eval(a, env)? == eval(b, env)?)),
        E::Greater(a, b) => cmp(a, b, env, |o| o.is_gt()),
        E::GreaterOrEqual(a, b) => cmp(a, b, env, |o| o.is_ge()),
        E::Less(a, b) => cmp(a, b, env, |o| o.is_lt()),
        E::LessOrEqual(a, b) => cmp(a, b, env, |o| o.is_le()),
        E::In(a, list) => {
            let x = eval(a, env)?;
            let mut error = false;
            for e in list {
                match eval(e, env).and_then(|y| value::equal(&x, &y)) {
                    Some(true) => return Some(boolean(true)),
                    Some(false) => {}
                    None => error = true,
                }
            }
            (!error).then(|| boolean(false))
        }
        E::Add(a, b) => arith(a, b, env, Op::Add),
        E::Subtract(a, b) => arith(a, b, env, Op::Sub),
        E::Multiply(a, b) => arith(a, b, env, Op::Mul),
        E::Divide(a, b) => arith(a, b, env, Op::Div),
        E::UnaryPlus(a) => {
            let t = eval(a, env)?;
            value::is_number(&t).then_some(t)
        }
        E::UnaryMinus(a) => {
            let t = eval(a, env)?;
            if let Some(neg) = value::negate_big(&t) {
                return Some(neg);
            }
            Some(
                match value::num(&t)? {
                    Num::Int(i) => Num::Int(i.checked_neg()?),
                    Num::Dec(d) => Num::Dec(d.checked_neg()?),
                    Num::Float(f) => Num::Float(-f),
                    Num::Double(d) => Num::Double(-d),
                }
                .term(),
            )
        }
        E::Exists(p) => env.exists(p).map(boolean),
        E::Bound(v) => Some(boolean(env.var(v.as_str()).is_some())),
        E::If(c, a, b) => {
            if truth(c, env)? {
                eval(a, env)
            } else {
                eval(b, env)
            }
        }
        E::Coalesce(list) => list.iter().find_map(|e| eval(e, env)),
        E::FunctionCall(f, args) => call(f, args, env),
    }
}

fn cmp(
    a: &Expression,
    b: &Expression,
    env: &mut dyn Env,
    ok: fn(std::cmp::Ordering) -> bool,
) -> Option<Term> {
    value::compare(&eval(a, env)?, &eval(b, env)?).map(|o| boolean(ok(o)))
}

#[derive(Clone, Copy)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
}

fn arith(a: &Expression, b: &Expression, env: &mut dyn Env, op: Op) -> Option<Term> {
    let (x, y) = (value::num(&eval(a, env)?)?, value::num(&eval(b, env)?)?);
    let (x, y) = match (op, Num::promote(x, y)) {
        // integer / integer is a decimal (17.4.2).
        (Op::Div, (Num::Int(i), Num::Int(j))) => (Num::Dec(i.into()), Num::Dec(j.into())),
        (_, p) => p,
    };
    Some(
        match (x, y) {
            (Num::Int(i), Num::Int(j)) => Num::Int(match op {
                Op::Add => i.checked_add(j)?,
                Op::Sub => i.checked_sub(j)?,
                Op::Mul => i.checked_mul(j)?,
                Op::Div => unreachable!("promoted to decimal"),
            }),
            (Num::Dec(i), Num::Dec(j)) => Num::Dec(match op {
                Op::Add => i.checked_add(j)?,
                Op::Sub => i.checked_sub(j)?,
                Op::Mul => i.checked_mul(j)?,
                Op::Div => i.checked_div(j)?,
            }),
            (Num::Float(i), Num::Float(j)) => Num::Float(float_op(op, i, j)),
            (Num::Double(i), Num::Double(j)) => Num::Double(double_op(op, i, j)),
            _ => unreachable!("promoted to one type"),
        }
        .term(),
    )
}

fn float_op(op: Op, i: Float, j: Float) -> Float {
    match op {
        Op::Add => i + j,
        Op::Sub => i - j,
        Op::Mul => i * j,
        Op::Div => i / j,
    }
}

fn double_op(op: Op, i: Double, j: Double) -> Double {
    match op {
        Op::Add => i + j,
        Op::Sub => i - j,
        Op::Mul => i * j,
        Op::Div => i / j,
    }
}

fn call(f: &Function, args: &[Expression], env: &mut dyn Env) -> Option<Term> {
    // Functions that see their arguments unevaluated or may skip errors.
    match f {
        Function::BNode if args.is_empty() => {
            return Some(BlankNode::default().into());
        }
        Function::Rand => return func::rand(env.ctx()),
        Function::Now => return Some(func::date_time_term(env.ctx().now)),
        Function::Uuid => return func::uuid(env.ctx(), true),
        Function::StrUuid => return func::uuid(env.ctx(), false),
        _ => {}
    }
    let mut vals = Vec::with_capacity(args.len());
    for a in args {
        vals.push(eval(a, env)?);
    }
    func::apply(f, &vals, env.ctx())
}

/// The decimal `d` as a term (for aggregates).
pub(crate) fn decimal(d: Decimal) -> Term {
    Num::Dec(d).term()
}

/// Names a function the evaluator does not implement, if `e` calls one
/// (checked before a query runs, so no row is silently dropped).
pub(crate) fn unsupported(e: &Expression) -> Option<String> {
    use Expression as E;
    match e {
        E::NamedNode(_) | E::Literal(_) | E::Variable(_) | E::Bound(_) | E::Exists(_) => None,
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
        | E::Divide(a, b) => unsupported(a).or_else(|| unsupported(b)),
        E::UnaryPlus(a) | E::UnaryMinus(a) | E::Not(a) => unsupported(a),
        E::In(a, l) => unsupported(a).or_else(|| l.iter().find_map(unsupported)),
        E::If(a, b, c) => unsupported(a)
            .or_else(|| unsupported(b))
            .or_else(|| unsupported(c)),
        E::Coalesce(l) => l.iter().find_map(unsupported),
        E::FunctionCall(f, args) => {
            func::unsupported(f).or_else(|| args.iter().find_map(unsupported))
        }
    }
}

/// Whether `e` holds an EXISTS (which needs the store, not only the row).
pub(crate) fn has_exists(e: &Expression) -> bool {
    use Expression as E;
    match e {
        E::Exists(_) => true,
        E::NamedNode(_) | E::Literal(_) | E::Variable(_) | E::Bound(_) => false,
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
        | E::Divide(a, b) => has_exists(a) || has_exists(b),
        E::UnaryPlus(a) | E::UnaryMinus(a) | E::Not(a) => has_exists(a),
        E::In(a, l) => has_exists(a) || l.iter().any(has_exists),
        E::If(a, b, c) => has_exists(a) || has_exists(b) || has_exists(c),
        E::Coalesce(l) | E::FunctionCall(_, l) => l.iter().any(has_exists),
    }
}

/// Whether `e` calls BNODE with an argument (one node per string per solution).
pub(crate) fn calls_bnode(e: &Expression) -> bool {
    use Expression as E;
    match e {
        E::FunctionCall(Function::BNode, args) if !args.is_empty() => true,
        E::NamedNode(_) | E::Literal(_) | E::Variable(_) | E::Bound(_) | E::Exists(_) => false,
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
        | E::Divide(a, b) => calls_bnode(a) || calls_bnode(b),
        E::UnaryPlus(a) | E::UnaryMinus(a) | E::Not(a) => calls_bnode(a),
        E::In(a, l) => calls_bnode(a) || l.iter().any(calls_bnode),
        E::If(a, b, c) => calls_bnode(a) || calls_bnode(b) || calls_bnode(c),
        E::Coalesce(l) | E::FunctionCall(_, l) => l.iter().any(calls_bnode),
    }
}

/// Variables `e` reads (outside EXISTS patterns).
pub(crate) fn vars<'a>(e: &'a Expression, out: &mut Vec<&'a str>) {
    use Expression as E;
    match e {
        E::Variable(v) | E::Bound(v) => out.push(v.as_str()),
        E::NamedNode(_) | E::Literal(_) | E::Exists(_) => {}
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
            vars(a, out);
            vars(b, out);
        }
        E::UnaryPlus(a) | E::UnaryMinus(a) | E::Not(a) => vars(a, out),
        E::In(a, l) => {
            vars(a, out);
            l.iter().for_each(|e| vars(e, out));
        }
        E::If(a, b, c) => {
            vars(a, out);
            vars(b, out);
            vars(c, out);
        }
        E::Coalesce(l) | E::FunctionCall(_, l) => l.iter().for_each(|e| vars(e, out)),
    }
}
