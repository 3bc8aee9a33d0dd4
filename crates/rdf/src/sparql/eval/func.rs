//! SPARQL's built-in functions (17.4) and the XSD casts (17.5) over
//! evaluated arguments; `None` is an error.

use std::str::FromStr;

use md5::Md5;
use oxrdf::vocab::xsd;
use oxrdf::{Literal, NamedNode, Term};
use oxsdatatypes::{Boolean, DateTime, Decimal, Double, Float, Integer};
use rand::Rng;
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha384, Sha512};
use spargebra::algebra::Function;

use super::expr::{Ctx, REGEXES_MAX};
use super::value::{self, boolean, lang_string, lit, Lit, Num};

const XSD: &str = "http://www.w3.org/2001/XMLSchema#";

/// The casts implemented, by XSD local name.
const CASTS: &[&str] = &[
    "string", "boolean", "integer", "decimal", "float", "double", "dateTime",
];

/// Names `f` if the evaluator does not implement it.
pub(crate) fn unsupported(f: &Function) -> Option<String> {
    match f {
        Function::Custom(n) => match n.as_str().strip_prefix(XSD) {
            Some(t) if CASTS.contains(&t) => None,
            _ => Some(format!("the function <{}>", n.as_str())),
        },
        #[allow(unreachable_patterns)]
        Function::Str
        | Function::Lang
        | Function::LangMatches
        | Function::Datatype
        | Function::Iri
        | Function::BNode
        | Function::Rand
        | Function::Abs
        | Function::Ceil
        | Function::Floor
        | Function::Round
        | Function::Concat
        | Function::SubStr
        | Function::StrLen
        | Function::Replace
        | Function::UCase
        | Function::LCase
        | Function::EncodeForUri
        | Function::Contains
        | Function::StrStarts
        | Function::StrEnds
        | Function::StrBefore
        | Function::StrAfter
        | Function::Year
        | Function::Month
        | Function::Day
        | Function::Hours
        | Function::Minutes
        | Function::Seconds
        | Function::Timezone
        | Function::Tz
        | Function::Now
        | Function::Uuid
        | Function::StrUuid
        | Function::Md5
        | Function::Sha1
        | Function::Sha256
        | Function::Sha384
        | Function::Sha512
        | Function::StrLang
        | Function::StrDt
        | Function::IsIri
        | Function::IsBlank
        | Function::IsLiteral
        | Function::IsNumeric
        | Function::Regex => None,
        #[allow(unreachable_patterns)]
        other => Some(format!("the function {other}")),
    }
}

fn simple(s: impl Into<String>) -> Term {
    Literal::new_simple_literal(s).into()
}

fn int(i: i64) -> Term {
    Literal::new_typed_literal(i.to_string(), xsd::INTEGER).into()
}

/// A string literal's value and tag (simple, `xsd:string` or tagged).
fn string(t: &Term) -> Option<(&str, Option<&str>)> {
    match t {
        Term::Literal(l) => match lit(l) {
            Lit::Str(s) => Some((s, None)),
            Lit::Lang(s, tag) => Some((s, Some(tag))),
            _ => None,
        },
        _ => None,
    }
}

/// A simple literal or `xsd:string`'s value.
fn plain(t: &Term) -> Option<&str> {
    match string(t)? {
        (s, None) => Some(s),
        _ => None,
    }
}

/// A string with `tag` (or none).
fn tagged(s: impl Into<String>, tag: Option<&str>) -> Option<Term> {
    Some(match tag {
        Some(t) => Literal::new_language_tagged_literal(s, t).ok()?.into(),
        None => simple(s),
    })
}

/// The two arguments of STRSTARTS and its kin, if compatible (17.4.3.1.2).
fn pair<'a>(a: &'a Term, b: &'a Term) -> Option<(&'a str, Option<&'a str>, &'a str)> {
    let (x, tx) = string(a)?;
    let (y, ty) = string(b)?;
    match (tx, ty) {
        (_, None) => Some((x, tx, y)),
        (Some(p), Some(q)) if p.eq_ignore_ascii_case(q) => Some((x, tx, y)),
        _ => None,
    }
}

pub(crate) fn date_time_term(d: DateTime) -> Term {
    Literal::new_typed_literal(d.to_string(), xsd::DATE_TIME).into()
}

pub(crate) fn rand(ctx: &mut Ctx) -> Option<Term> {
    let x: f64 = ctx.rng.gen();
    Some(Num::Double(Double::from(x)).term())
}

pub(crate) fn uuid(ctx: &mut Ctx, iri: bool) -> Option<Term> {
    let mut b: [u8; 16] = ctx.rng.gen();
    b[6] = (b[6] & 0x0f) | 0x40; // version 4
    b[8] = (b[8] & 0x3f) | 0x80; // RFC 4122 variant
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    let s = format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    );
    Some(if iri {
        NamedNode::new(format!("urn:uuid:{s}")).ok()?.into()
    } else {
        simple(s)
    })
}

fn hex(bytes: &[u8]) -> Term {
    simple(bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// The value of `f` over evaluated arguments `a`.
pub(crate) fn apply(f: &Function, a: &[Term], ctx: &mut Ctx) -> Option<Term> {
    let arg = |i: usize| a.get(i);
    let one = || a.first();
    match f {
        Function::Str => match one()? {
            Term::NamedNode(n) => Some(simple(n.as_str())),
            Term::Literal(l) => Some(simple(l.value())),
            Term::BlankNode(_) => None,
        },
        Function::Lang => match one()? {
            Term::Literal(l) => Some(simple(l.language().unwrap_or(""))),
            _ => None,
        },
        Function::LangMatches => {
            let (tag, range) = (plain(arg(0)?)?, plain(arg(1)?)?);
            let t = tag.to_ascii_lowercase();
            let r = range.to_ascii_lowercase();
            Some(boolean(if r == "*" {
                !t.is_empty()
            } else {
                t == r || t.starts_with(&format!("{r}-"))
            }))
        }
        Function::Datatype => match one()? {
            Term::Literal(l) if l.language().is_some() => Some(lang_string().into_owned().into()),
            Term::Literal(l) => Some(l.datatype().into_owned().into()),
            _ => None,
        },
        Function::Iri => match one()? {
            Term::NamedNode(n) => Some(n.clone().into()),
            t => {
                let s = plain(t)?;
                let full = match (&ctx.base, s.contains(':')) {
                    (Some(b), false) => format!("{b}{s}"),
                    _ => s.to_string(),
                };
                NamedNode::new(full).ok().map(Into::into)
            }
        },
        Function::BNode => {
            let s = plain(one()?)?.to_string();
            Some(ctx.bnodes.entry(s).or_default().clone().into())
        }
        Function::Abs => num1(one()?, |n| match n {
            Num::Int(i) => i.checked_abs().map(Num::Int),
            Num::Dec(d) => d.checked_abs().map(Num::Dec),
            Num::Float(f) => Some(Num::Float(f.abs())),
            Num::Double(d) => Some(Num::Double(d.abs())),
        }),
        Function::Ceil => num1(one()?, |n| match n {
            Num::Int(i) => Some(Num::Int(i)),
            Num::Dec(d) => d.checked_ceil().map(Num::Dec),
            Num::Float(f) => Some(Num::Float(f.ceil())),
            Num::Double(d) => Some(Num::Double(d.ceil())),
        }),
        Function::Floor => num1(one()?, |n| match n {
            Num::Int(i) => Some(Num::Int(i)),
            Num::Dec(d) => d.checked_floor().map(Num::Dec),
            Num::Float(f) => Some(Num::Float(f.floor())),
            Num::Double(d) => Some(Num::Double(d.floor())),
        }),
        Function::Round => num1(one()?, |n| match n {
            Num::Int(i) => Some(Num::Int(i)),
            Num::Dec(d) => d.checked_round().map(Num::Dec),
            Num::Float(f) => Some(Num::Float(f.round())),
            Num::Double(d) => Some(Num::Double(d.round())),
        }),
        Function::Concat => {
            let mut out = String::new();
            let mut tag: Option<Option<&str>> = None;
            for t in a {
                let (s, l) = string(t)?;
                out.push_str(s);
                tag = match tag {
                    None => Some(l),
                    Some(p) if p == l => Some(p),
                    Some(_) => Some(None),
                };
            }
            tagged(out, tag.flatten())
        }
        Function::SubStr => {
            let (s, tag) = string(arg(0)?)?;
            let start = to_f64(value::num(arg(1)?)?).round();
            let len = match arg(2) {
                Some(t) => Some(to_f64(value::num(t)?).round()),
                None => None,
            };
            let out: String = s
                .chars()
                .enumerate()
                .filter(|&(i, _)| {
                    let p = (i + 1) as f64;
                    p >= start && len.is_none_or(|l| p < start + l)
                })
                .map(|(_, c)| c)
                .collect();
            tagged(out, tag)
        }
        Function::StrLen => Some(int(string(one()?)?.0.chars().count() as i64)),
        Function::UCase => {
            let (s, tag) = string(one()?)?;
            tagged(s.to_uppercase(), tag)
        }
        Function::LCase => {
            let (s, tag) = string(one()?)?;
            tagged(s.to_lowercase(), tag)
        }
        Function::EncodeForUri => {
            let (s, _) = string(one()?)?;
            let mut out = String::with_capacity(s.len());
            for b in s.bytes() {
                if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                    out.push(b as char);
                } else {
                    out.push_str(&format!("%{b:02X}"));
                }
            }
            Some(simple(out))
        }
        Function::Contains => {
            let (x, _, y) = pair(arg(0)?, arg(1)?)?;
            Some(boolean(x.contains(y)))
        }
        Function::StrStarts => {
            let (x, _, y) = pair(arg(0)?, arg(1)?)?;
            Some(boolean(x.starts_with(y)))
        }
        Function::StrEnds => {
            let (x, _, y) = pair(arg(0)?, arg(1)?)?;
            Some(boolean(x.ends_with(y)))
        }
        Function::StrBefore => {
            let (x, tag, y) = pair(arg(0)?, arg(1)?)?;
            match x.find(y) {
                Some(i) => tagged(&x[..i], tag),
                None => Some(simple("")),
            }
        }
        Function::StrAfter => {
            let (x, tag, y) = pair(arg(0)?, arg(1)?)?;
            match x.find(y) {
                Some(i) => tagged(&x[i + y.len()..], tag),
                None => Some(simple("")),
            }
        }
        Function::Year => date_part(one()?, |d| Some(int(d.year()))),
        Function::Month => date_part(one()?, |d| Some(int(d.month().into()))),
        Function::Day => date_part(one()?, |d| Some(int(d.day().into()))),
        Function::Hours => date_time(one()?).map(|d| int(d.hour().into())),
        Function::Minutes => date_time(one()?).map(|d| int(d.minute().into())),
        Function::Seconds => date_time(one()?).map(|d| Num::Dec(d.second()).term()),
        Function::Timezone => {
            let tz = date_time(one()?)?.timezone()?;
            Some(Literal::new_typed_literal(tz.to_string(), xsd::DAY_TIME_DURATION).into())
        }
        Function::Tz => {
            date_time(one()?)?;
            let Term::Literal(l) = one()? else {
                return None;
            };
            // The zone as written: "Z", "+hh:mm", "-hh:mm", or none.
            let v = l.value();
            let tz = if v.ends_with('Z') {
                "Z"
            } else if v.len() > 6 && matches!(v.as_bytes()[v.len() - 6], b'+' | b'-') {
                &v[v.len() - 6..]
            } else {
                ""
            };
            Some(simple(tz))
        }
        Function::Md5 => Some(hex(&Md5::digest(plain(one()?)?.as_bytes()))),
        Function::Sha1 => Some(hex(&Sha1::digest(plain(one()?)?.as_bytes()))),
        Function::Sha256 => Some(hex(&Sha256::digest(plain(one()?)?.as_bytes()))),
        Function::Sha384 => Some(hex(&Sha384::digest(plain(one()?)?.as_bytes()))),
        Function::Sha512 => Some(hex(&Sha512::digest(plain(one()?)?.as_bytes()))),
        Function::StrLang => {
            let s = plain(arg(0)?)?;
            let tag = plain(arg(1)?)?;
            if tag.is_empty() {
                return None;
            }
            tagged(s, Some(tag))
        }
        Function::StrDt => {
            let s = plain(arg(0)?)?;
            let Term::NamedNode(dt) = arg(1)? else {
                return None;
            };
            Some(Literal::new_typed_literal(s, dt.clone()).into())
        }
        Function::IsIri => Some(boolean(matches!(one()?, Term::NamedNode(_)))),
        Function::IsBlank => Some(boolean(matches!(one()?, Term::BlankNode(_)))),
        Function::IsLiteral => Some(boolean(matches!(one()?, Term::Literal(_)))),
        Function::IsNumeric => Some(boolean(value::is_number(one()?))),
        Function::Regex => {
            let (s, _) = string(arg(0)?)?;
            let re = regex(ctx, plain(arg(1)?)?, flags(arg(2))?)?;
            Some(boolean(re.is_match(s)))
        }
        Function::Replace => {
            let (s, tag) = string(arg(0)?)?;
            let re = regex(ctx, plain(arg(1)?)?, flags(arg(3))?)?;
            let with = replacement(plain(arg(2)?)?)?;
            tagged(re.replace_all(s, with.as_str()).into_owned(), tag)
        }
        Function::Custom(n) => cast(n.as_str().strip_prefix(XSD)?, one()?),
        // Handled before the arguments are evaluated (expr::call).
        Function::Rand | Function::Now | Function::Uuid | Function::StrUuid => None,
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

fn to_f64(n: Num) -> f64 {
    match n {
        Num::Int(i) => i64::from(i) as f64,
        Num::Dec(d) => f64::from(Double::from(d)),
        Num::Float(f) => f64::from(f),
        Num::Double(d) => f64::from(d),
    }
}

fn num1(t: &Term, f: impl Fn(Num) -> Option<Num>) -> Option<Term> {
    f(value::num(t)?).map(Num::term)
}

fn date_time(t: &Term) -> Option<DateTime> {
    match t {
        Term::Literal(l) => match lit(l) {
            Lit::DateTime(d) => Some(d),
            _ => None,
        },
        _ => None,
    }
}

/// YEAR, MONTH and DAY read an `xsd:date` as well as an `xsd:dateTime`.
fn date_part(t: &Term, f: impl Fn(DateTime) -> Option<Term>) -> Option<Term> {
    match t {
        Term::Literal(l) => match lit(l) {
            Lit::DateTime(d) => f(d),
            Lit::Date(d) => f(DateTime::try_from(d).ok()?),
            _ => None,
        },
        _ => None,
    }
}

fn flags(t: Option<&Term>) -> Option<&str> {
    match t {
        None => Some(""),
        Some(t) => plain(t),
    }
}

/// XPath regex flags (s, m, i, x, q) on the `regex` crate; compiled once per query.
fn regex(ctx: &mut Ctx, pattern: &str, flags: &str) -> Option<regex::Regex> {
    let key = (pattern.to_string(), flags.to_string());
    if let Some(r) = ctx.regexes.get(&key) {
        return r.clone();
    }
    let mut quoted = false;
    let mut b = regex::RegexBuilder::new(pattern);
    for c in flags.chars() {
        match c {
            's' => b.dot_matches_new_line(true),
            'm' => b.multi_line(true),
            'i' => b.case_insensitive(true),
            'x' => b.ignore_whitespace(true),
            'q' => {
                quoted = true;
                &mut b
            }
            _ => return None,
        };
    }
    if quoted {
        let esc = regex::escape(pattern);
        b = regex::RegexBuilder::new(&esc);
        for c in flags.chars() {
            match c {
                'i' => b.case_insensitive(true),
                _ => &mut b,
            };
        }
    }
    let r = b.size_limit(1 << 20).build().ok();
    if ctx.regexes.len() < REGEXES_MAX {
        ctx.regexes.insert(key, r.clone());
    }
    r
}

/// XPath's replacement (`$n`, `\$`, `\\`) in the `regex` crate's syntax.
fn replacement(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\\' => match it.next()? {
                '$' => out.push_str("$$"),
                '\\' => out.push('\\'),
                _ => return None,
            },
            '$' => {
                let mut n = String::new();
                while let Some(d) = it.peek().filter(|d| d.is_ascii_digit()) {
                    n.push(*d);
                    it.next();
                }
                if n.is_empty() {
                    return None;
                }
                out.push_str(&format!("${{{n}}}"));
            }
            c => out.push(c),
        }
    }
    Some(out)
}

/// `xsd:T(t)` (17.5).
fn cast(to: &str, t: &Term) -> Option<Term> {
    let l = match t {
        Term::Literal(l) => l,
        Term::NamedNode(n) if to == "string" => return Some(simple(n.as_str())),
        _ => return None,
    };
    let v = lit(l);
    let s = match v {
        Lit::Str(s) => Some(s),
        _ if l.language().is_some() => return None,
        _ => None,
    };
    match to {
        "string" => Some(Literal::new_typed_literal(l.value(), xsd::STRING).into()),
        "boolean" => match (v, s) {
            (Lit::Bool(b), _) => Some(boolean(b)),
            (Lit::Num(n), _) => Some(boolean(!n.is_zero_or_nan())),
            (_, Some(s)) => Some(boolean(bool::from(Boolean::from_str(s).ok()?))),
            _ => None,
        },
        "integer" => {
            let i = match (v, s) {
                (Lit::Num(Num::Int(i)), _) => i,
                (Lit::Num(Num::Dec(d)), _) => Integer::try_from(d).ok()?,
                (Lit::Num(Num::Float(f)), _) => Integer::try_from(f).ok()?,
                (Lit::Num(Num::Double(d)), _) => Integer::try_from(d).ok()?,
                (Lit::Bool(b), _) => Integer::from(b),
                (_, Some(s)) => Integer::from_str(s).ok()?,
                _ => return None,
            };
            Some(Num::Int(i).term())
        }
        "decimal" => {
            let d = match (v, s) {
                (Lit::Num(Num::Int(i)), _) => Decimal::from(i),
                (Lit::Num(Num::Dec(d)), _) => d,
                (Lit::Num(Num::Float(f)), _) => Decimal::try_from(f).ok()?,
                (Lit::Num(Num::Double(d)), _) => Decimal::try_from(d).ok()?,
                (Lit::Bool(b), _) => Decimal::from(b),
                // A decimal's lexical form has no exponent.
                (_, Some(s)) if !s.contains(['e', 'E']) => Decimal::from_str(s).ok()?,
                _ => return None,
            };
            Some(Num::Dec(d).term())
        }
        "float" => {
            let f = match (v, s) {
                (Lit::Num(Num::Int(i)), _) => Float::from(i),
                (Lit::Num(Num::Dec(d)), _) => Float::from(d),
                (Lit::Num(Num::Float(f)), _) => f,
                (Lit::Num(Num::Double(d)), _) => Float::from(d),
                (Lit::Bool(b), _) => Float::from(Boolean::from(b)),
                (_, Some(s)) => Float::from_str(s).ok()?,
                _ => return None,
            };
            Some(Num::Float(f).term())
        }
        "double" => {
            let d = match (v, s) {
                (Lit::Num(Num::Int(i)), _) => Double::from(i),
                (Lit::Num(Num::Dec(d)), _) => Double::from(d),
                (Lit::Num(Num::Float(f)), _) => Double::from(f),
                (Lit::Num(Num::Double(d)), _) => d,
                (Lit::Bool(b), _) => Double::from(Boolean::from(b)),
                (_, Some(s)) => Double::from_str(s).ok()?,
                _ => return None,
            };
            Some(Num::Double(d).term())
        }
        "dateTime" => match (v, s) {
            (Lit::DateTime(d), _) => Some(date_time_term(d)),
            (Lit::Date(d), _) => Some(date_time_term(DateTime::try_from(d).ok()?)),
            (_, Some(s)) => Some(date_time_term(DateTime::from_str(s).ok()?)),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xpath_replacement_syntax() {
        assert_eq!(replacement("$1-\\$").unwrap(), "${1}-$$");
        assert!(replacement("$").is_none());
    }
}
