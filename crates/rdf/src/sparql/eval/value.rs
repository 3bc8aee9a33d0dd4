//! Typed views of literals and SPARQL's operator table over them (SPARQL
//! 1.1, 17.3): numeric promotion integer < decimal < float < double with
//! exact integers (`i64`, then `xsd:decimal`'s 128 bits) and decimals,
//! date-time comparison by instant (an unzoned value in UTC, XPath's
//! implicit zone), and the ORDER BY order (15.1).

use std::cmp::Ordering;
use std::str::FromStr;

use oxrdf::vocab::{rdf, xsd};
use oxrdf::{Literal, NamedNodeRef, Term};
use oxsdatatypes::{
    Date, DateTime, DayTimeDuration, Decimal, Double, Duration, Float, Integer, Time,
    TimezoneOffset, YearMonthDuration,
};

const XSD: &str = "http://www.w3.org/2001/XMLSchema#";

/// A number after promotion to a common type.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Num {
    Int(Integer),
    Dec(Decimal),
    Float(Float),
    Double(Double),
}

/// A literal seen through its datatype.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Lit<'a> {
    Num(Num),
    /// A simple literal or `xsd:string`.
    Str(&'a str),
    /// A language-tagged string: value and tag.
    Lang(&'a str, &'a str),
    Bool(bool),
    DateTime(DateTime),
    Date(Date),
    Time(Time),
    Duration(Duration),
    YearMonth(YearMonthDuration),
    DayTime(DayTimeDuration),
    /// An integer past `xsd:decimal`'s range: negative?, digits without
    /// leading zeros. It compares exactly; arithmetic on it overflows (an error).
    BigInt(bool, &'a str),
    /// A datatype without operators here, or an ill-typed lexical form.
    Other,
}

fn xsd_local(dt: NamedNodeRef<'_>) -> Option<&str> {
    dt.as_str().strip_prefix(XSD)
}

/// Whether `local` (an XSD local name) is a type derived from `xsd:integer`.
pub(crate) fn is_integer_type(local: &str) -> bool {
    matches!(
        local,
        "integer"
            | "int"
            | "long"
            | "short"
            | "byte"
            | "nonNegativeInteger"
            | "positiveInteger"
            | "negativeInteger"
            | "nonPositiveInteger"
            | "unsignedInt"
            | "unsignedLong"
            | "unsignedShort"
            | "unsignedByte"
    )
}

/// An integer: `i64`, or past it a decimal (exact up to about 1.7e20), so
/// that integers never go through floating point.
fn parse_integer(v: &str) -> Option<Num> {
    if let Ok(i) = Integer::from_str(v) {
        return Some(Num::Int(i));
    }
    if v.contains(['.', 'e', 'E']) {
        return None;
    }
    Decimal::from_str(v).ok().map(Num::Dec)
}

/// An integer's sign and digits when it is all digits (past every fixed width).
fn big_int(v: &str) -> Option<Lit<'_>> {
    let (neg, digits) = match v.as_bytes().first()? {
        b'-' => (true, &v[1..]),
        b'+' => (false, &v[1..]),
        _ => (false, v),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(Lit::BigInt(neg, digits.trim_start_matches('0')))
}

/// Orders two big integers exactly: sign, then length, then digits.
fn big_cmp((n1, d1): (bool, &str), (n2, d2): (bool, &str)) -> Ordering {
    match (n1, n2) {
        (false, true) => Ordering::Greater,
        (true, false) => Ordering::Less,
        _ => {
            let o = d1.len().cmp(&d2.len()).then_with(|| d1.cmp(d2));
            if n1 {
                o.reverse()
            } else {
                o
            }
        }
    }
}

/// A big integer against a number: it lies past every integer and decimal;
/// floats and doubles compare by value.
fn big_vs_num(neg: bool, digits: &str, n: Num) -> Option<Ordering> {
    let past = if neg {
        Ordering::Less
    } else {
        Ordering::Greater
    };
    let f = |x: f64| {
        let big: f64 = digits.parse::<f64>().ok()? * if neg { -1.0 } else { 1.0 };
        big.partial_cmp(&x)
    };
    match n {
        Num::Int(_) | Num::Dec(_) => Some(past),
        Num::Float(x) => f(f64::from(x)),
        Num::Double(x) => f(f64::from(x)),
    }
}

/// `-t` for a big integer `t` (exact, as text).
pub(crate) fn negate_big(t: &Term) -> Option<Term> {
    let Term::Literal(l) = t else { return None };
    match lit(l) {
        Lit::BigInt(neg, digits) => {
            let v = if neg {
                digits.to_string()
            } else {
                format!("-{digits}")
            };
            Some(Literal::new_typed_literal(v, xsd::INTEGER).into())
        }
        _ => None,
    }
}

/// Whether `t` is a number (a valid numeric literal, big integers included).
pub(crate) fn is_number(t: &Term) -> bool {
    match t {
        Term::Literal(l) => matches!(lit(l), Lit::Num(_) | Lit::BigInt(..)),
        _ => false,
    }
}

/// The typed view of `l`.
pub(crate) fn lit(l: &Literal) -> Lit<'_> {
    if let Some(lang) = l.language() {
        return Lit::Lang(l.value(), lang);
    }
    let Some(local) = xsd_local(l.datatype()) else {
        return Lit::Other;
    };
    let v = l.value();
    let r = match local {
        "string" => Some(Lit::Str(v)),
        "boolean" => match v {
            "true" | "1" => Some(Lit::Bool(true)),
            "false" | "0" => Some(Lit::Bool(false)),
            _ => None,
        },
        "decimal" => Decimal::from_str(v).ok().map(|d| Lit::Num(Num::Dec(d))),
        "float" => Float::from_str(v).ok().map(|d| Lit::Num(Num::Float(d))),
        "double" => Double::from_str(v).ok().map(|d| Lit::Num(Num::Double(d))),
        "dateTime" => DateTime::from_str(v).ok().map(Lit::DateTime),
        "date" => Date::from_str(v).ok().map(Lit::Date),
        "time" => Time::from_str(v).ok().map(Lit::Time),
        "duration" => Duration::from_str(v).ok().map(Lit::Duration),
        "yearMonthDuration" => YearMonthDuration::from_str(v).ok().map(Lit::YearMonth),
        "dayTimeDuration" => DayTimeDuration::from_str(v).ok().map(Lit::DayTime),
        t if is_integer_type(t) => parse_integer(v).map(Lit::Num).or_else(|| big_int(v)),
        _ => None,
    };
    r.unwrap_or(Lit::Other)
}

/// The number `t` holds, if it is a valid numeric literal.
pub(crate) fn num(t: &Term) -> Option<Num> {
    match t {
        Term::Literal(l) => match lit(l) {
            Lit::Num(n) => Some(n),
            _ => None,
        },
        _ => None,
    }
}

impl Num {
    fn rank(self) -> u8 {
        match self {
            Num::Int(_) => 0,
            Num::Dec(_) => 1,
            Num::Float(_) => 2,
            Num::Double(_) => 3,
        }
    }

    /// `self` as the type of rank `r` (at least its own).
    fn to_rank(self, r: u8) -> Num {
        match (self, r) {
            (n, r) if n.rank() == r => n,
            (Num::Int(i), 1) => Num::Dec(Decimal::from(i)),
            (Num::Int(i), 2) => Num::Float(Float::from(i)),
            (Num::Int(i), _) => Num::Double(Double::from(i)),
            (Num::Dec(d), 2) => Num::Float(Float::from(d)),
            (Num::Dec(d), _) => Num::Double(Double::from(d)),
            (Num::Float(f), _) => Num::Double(Double::from(f)),
            (Num::Double(d), _) => Num::Double(d),
        }
    }

    /// Both numbers promoted to their common type (17.3, numeric type promotion).
    pub(crate) fn promote(a: Num, b: Num) -> (Num, Num) {
        let r = a.rank().max(b.rank());
        (a.to_rank(r), b.to_rank(r))
    }

    pub(crate) fn cmp(a: Num, b: Num) -> Option<Ordering> {
        match Num::promote(a, b) {
            (Num::Int(x), Num::Int(y)) => Some(x.cmp(&y)),
            (Num::Dec(x), Num::Dec(y)) => Some(x.cmp(&y)),
            (Num::Float(x), Num::Float(y)) => x.partial_cmp(&y),
            (Num::Double(x), Num::Double(y)) => x.partial_cmp(&y),
            _ => unreachable!("promoted to one type"),
        }
    }

    pub(crate) fn is_zero_or_nan(self) -> bool {
        match self {
            Num::Int(i) => i == Integer::from(0),
            Num::Dec(d) => d == Decimal::from(0),
            Num::Float(f) => f.is_nan() || f == Float::from(0u8),
            Num::Double(d) => d.is_nan() || d == Double::from(0u8),
        }
    }

    /// The number as a literal in canonical form.
    pub(crate) fn term(self) -> Term {
        let (v, dt) = match self {
            Num::Int(i) => (i.to_string(), xsd::INTEGER),
            Num::Dec(d) => (d.to_string(), xsd::DECIMAL),
            Num::Float(f) => (f.to_string(), xsd::FLOAT),
            Num::Double(d) => (d.to_string(), xsd::DOUBLE),
        };
        Literal::new_typed_literal(v, dt).into()
    }
}

/// Whether two literals' datatypes have operators here (an unknown
/// datatype compares as an error, not as false).
fn known(l: Lit<'_>) -> bool {
    !matches!(l, Lit::Other)
}

/// The ordering of two literals where the operator table defines one.
fn lit_cmp(a: Lit<'_>, b: Lit<'_>) -> Option<Ordering> {
    match (a, b) {
        (Lit::Num(x), Lit::Num(y)) => Num::cmp(x, y),
        (Lit::BigInt(a, x), Lit::BigInt(b, y)) => Some(big_cmp((a, x), (b, y))),
        (Lit::BigInt(a, x), Lit::Num(n)) => big_vs_num(a, x, n),
        (Lit::Num(n), Lit::BigInt(a, x)) => big_vs_num(a, x, n).map(Ordering::reverse),
        (Lit::Str(x), Lit::Str(y)) => Some(x.cmp(y)),
        (Lit::Bool(x), Lit::Bool(y)) => Some(x.cmp(&y)),
        // A value without a zone takes the implicit zone, UTC (XPath F&O
        // 10.4), so a zoned and an unzoned value always compare.
        (Lit::DateTime(x), Lit::DateTime(y)) => {
            let z = |d: DateTime| match d.timezone_offset() {
                Some(_) => Some(d),
                None => d.adjust(Some(TimezoneOffset::UTC)),
            };
            z(x)?.partial_cmp(&z(y)?)
        }
        (Lit::Date(x), Lit::Date(y)) => {
            let z = |d: Date| match d.timezone_offset() {
                Some(_) => Some(d),
                None => d.adjust(Some(TimezoneOffset::UTC)),
            };
            z(x)?.partial_cmp(&z(y)?)
        }
        (Lit::Time(x), Lit::Time(y)) => {
            let z = |d: Time| match d.timezone_offset() {
                Some(_) => Some(d),
                None => d.adjust(Some(TimezoneOffset::UTC)),
            };
            z(x)?.partial_cmp(&z(y)?)
        }
        (Lit::Duration(x), Lit::Duration(y)) => x.partial_cmp(&y),
        (Lit::YearMonth(x), Lit::YearMonth(y)) => x.partial_cmp(&y),
        (Lit::DayTime(x), Lit::DayTime(y)) => x.partial_cmp(&y),
        (Lit::YearMonth(x), Lit::Duration(y)) => x.partial_cmp(&y),
        (Lit::Duration(x), Lit::YearMonth(y)) => x.partial_cmp(&y),
        (Lit::DayTime(x), Lit::Duration(y)) => x.partial_cmp(&y),
        (Lit::Duration(x), Lit::DayTime(y)) => x.partial_cmp(&y),
        _ => None,
    }
}

/// The `=` operator: `None` is a type error.
pub(crate) fn equal(a: &Term, b: &Term) -> Option<bool> {
    let (Term::Literal(x), Term::Literal(y)) = (a, b) else {
        return Some(a == b);
    };
    let (lx, ly) = (lit(x), lit(y));
    if let (Lit::Lang(v, l), Lit::Lang(w, m)) = (lx, ly) {
        return Some(v == w && l.eq_ignore_ascii_case(m));
    }
    match lit_cmp(lx, ly) {
        Some(o) => Some(o == Ordering::Equal),
        None if x == y => Some(true),
        // NaN, or times whose order is indeterminate: not equal.
        None if same_family(lx, ly) => Some(false),
        None if known(lx) && known(ly) => Some(false),
        None => None,
    }
}

fn same_family(a: Lit<'_>, b: Lit<'_>) -> bool {
    matches!(
        (a, b),
        (Lit::Num(_) | Lit::BigInt(..), Lit::Num(_) | Lit::BigInt(..))
            | (Lit::DateTime(_), Lit::DateTime(_))
            | (Lit::Date(_), Lit::Date(_))
            | (Lit::Time(_), Lit::Time(_))
    )
}

/// The `<` family: `None` is a type error (no order defined).
pub(crate) fn compare(a: &Term, b: &Term) -> Option<Ordering> {
    match (a, b) {
        (Term::Literal(x), Term::Literal(y)) => lit_cmp(lit(x), lit(y)),
        _ => None,
    }
}

/// Effective boolean value (17.2.2); `None` is a type error.
pub(crate) fn ebv(t: &Term) -> Option<bool> {
    let Term::Literal(l) = t else { return None };
    match lit(l) {
        Lit::Bool(b) => Some(b),
        Lit::Num(n) => Some(!n.is_zero_or_nan()),
        // Past every fixed width, so not zero.
        Lit::BigInt(..) => Some(true),
        Lit::Str(s) => Some(!s.is_empty()),
        Lit::Other => match xsd_local(l.datatype()) {
            // An ill-typed boolean or number is false.
            Some(t) if t == "boolean" || is_numeric_type(t) => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// Whether `local` names a numeric XSD type.
pub(crate) fn is_numeric_type(local: &str) -> bool {
    matches!(local, "decimal" | "float" | "double") || is_integer_type(local)
}

pub(crate) fn boolean(b: bool) -> Term {
    Literal::from(b).into()
}

/// ORDER BY's total order (15.1): unbound, blank nodes, IRIs, literals;
/// literals by value where comparable, else by their text, for determinism.
pub(crate) fn order(a: Option<&Term>, b: Option<&Term>) -> Ordering {
    fn rank(t: Option<&Term>) -> u8 {
        match t {
            None => 0,
            Some(Term::BlankNode(_)) => 1,
            Some(Term::NamedNode(_)) => 2,
            Some(Term::Literal(_)) => 3,
        }
    }
    match (a, b) {
        (Some(Term::BlankNode(x)), Some(Term::BlankNode(y))) => x.as_str().cmp(y.as_str()),
        (Some(Term::NamedNode(x)), Some(Term::NamedNode(y))) => x.as_str().cmp(y.as_str()),
        (Some(Term::Literal(x)), Some(Term::Literal(y))) => {
            match lit_cmp(lit(x), lit(y)) {
                Some(o) if o != Ordering::Equal => o,
                // Plain strings first, then by text, datatype and tag.
                _ => (
                    x.datatype() != xsd::STRING,
                    x.value(),
                    x.datatype().as_str(),
                    x.language(),
                )
                    .cmp(&(
                        y.datatype() != xsd::STRING,
                        y.value(),
                        y.datatype().as_str(),
                        y.language(),
                    )),
            }
        }
        _ => rank(a).cmp(&rank(b)),
    }
}

/// `rdf:langString`, the datatype of tagged strings.
pub(crate) fn lang_string() -> NamedNodeRef<'static> {
    rdf::LANG_STRING
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(v: &str, dt: NamedNodeRef<'_>) -> Term {
        Literal::new_typed_literal(v, dt).into()
    }

    #[test]
    fn integers_past_2_pow_53_compare_exactly() {
        let a = typed("9007199254740993", xsd::INTEGER);
        let b = typed("9007199254740992", xsd::INTEGER);
        assert_eq!(equal(&a, &b), Some(false));
        assert_eq!(compare(&b, &a), Some(Ordering::Less));
        let big = typed("100000000000000000001", xsd::INTEGER);
        let big1 = typed("100000000000000000000", xsd::INTEGER);
        assert_eq!(compare(&big1, &big), Some(Ordering::Less));
        // Past xsd:decimal's 128 bits, still exact.
        let huge = typed("123456789012345678901234567891", xsd::INTEGER);
        let huge0 = typed("+0123456789012345678901234567890", xsd::INTEGER);
        assert_eq!(compare(&huge0, &huge), Some(Ordering::Less));
        assert_eq!(equal(&huge, &huge0), Some(false));
        assert_eq!(
            equal(
                &huge0,
                &typed("123456789012345678901234567890", xsd::INTEGER)
            ),
            Some(true)
        );
        let neg = typed("-123456789012345678901234567891", xsd::INTEGER);
        assert_eq!(compare(&neg, &a), Some(Ordering::Less));
        assert_eq!(compare(&huge, &big), Some(Ordering::Greater));
        assert_eq!(
            compare(&huge, &typed("1e40", xsd::DOUBLE)),
            Some(Ordering::Less)
        );
    }

    #[test]
    fn date_times_compare_in_time_not_text() {
        let a = typed("2020-01-01T10:00:00+02:00", xsd::DATE_TIME);
        let b = typed("2020-01-01T09:00:00Z", xsd::DATE_TIME);
        // As text a > b; in time a (08:00Z) is before b.
        assert_eq!(compare(&a, &b), Some(Ordering::Less));
        let c = typed("2020-01-01T08:00:00Z", xsd::DATE_TIME);
        assert_eq!(equal(&a, &c), Some(true));
    }

    #[test]
    fn promotion_and_unknown_types() {
        let i = typed("1", xsd::INTEGER);
        let d = typed("1.0", xsd::DECIMAL);
        let f = typed("1.0E0", xsd::DOUBLE);
        assert_eq!(equal(&i, &d), Some(true));
        assert_eq!(equal(&d, &f), Some(true));
        let s: Term = Literal::new_simple_literal("1").into();
        assert_eq!(equal(&i, &s), Some(false));
        let odd = typed("x", NamedNodeRef::new_unchecked("http://ex/dt"));
        let odd2 = typed("y", NamedNodeRef::new_unchecked("http://ex/dt"));
        assert_eq!(equal(&odd, &odd2), None);
        assert_eq!(equal(&odd, &odd), Some(true));
    }
}
