//! Expanding the `gen` entries of a version-1 kerchunk reference set: each entry's
//! `dimensions` (integer lists, or `start`/`stop`/`step` ranges that are never
//! materialized) span a cartesian product, and every combination renders the entry's
//! `key`, `url` and optional `offset`/`length` templates into one reference. The total
//! is checked against
//! [`KerchunkLimits::max_generated_refs`](super::limits::KerchunkLimits::max_generated_refs) before anything is
//! generated.
//!
//! Spec: `../shared/specs/kerchunk-references.txt` ("Version 1": `gen`).

use std::collections::BTreeMap;

use serde_json::Value;

use super::parse::Reference;
use super::templates::{compile, Renderer};
use crate::error::KerchunkError;

/// The values of one `gen` dimension: a list, or a range that is never materialized.
enum Axis {
    List(Vec<i64>),
    /// `len` values `start, start + step, ...` (all within `start..stop`, so in `i64`).
    Range {
        start: i64,
        step: i64,
        len: u64,
    },
}

impl Axis {
    fn len(&self) -> u64 {
        match self {
            Axis::List(v) => v.len() as u64,
            Axis::Range { len, .. } => *len,
        }
    }

    /// The `i`-th value (`i < len`).
    fn value(&self, i: u64) -> i64 {
        match self {
            Axis::List(v) => usize::try_from(i)
                .ok()
                .and_then(|i| v.get(i))
                .copied()
                .unwrap_or_default(),
            // start + i * step < stop <= i64::MAX, computed without overflow.
            Axis::Range { start, step, .. } => {
                let v = i128::from(*start) + i128::from(i) * i128::from(*step);
                i64::try_from(v).unwrap_or_default()
            }
        }
    }
}

/// Number of values of the range `start..stop` by `step` (`step > 0`).
fn range_len(start: i64, stop: i64, step: i64) -> u64 {
    if stop <= start {
        return 0;
    }
    let span = (i128::from(stop) - i128::from(start) - 1) / i128::from(step) + 1;
    u64::try_from(span).unwrap_or(u64::MAX)
}

/// The parsed dimensions of a `gen` entry and the number of references it generates
/// (`None` when the product overflows `u64`).
type Axes = (Vec<(String, Axis)>, Option<u64>);

/// Parses the dimensions of `gen` entry `index`.
fn gen_axes(index: usize, spec: &Value) -> Result<Axes, KerchunkError> {
    let bad = |reason: String| KerchunkError::InvalidGen { index, reason };
    let dims = spec
        .get("dimensions")
        .and_then(Value::as_object)
        .ok_or_else(|| bad("`dimensions` is required".into()))?;
    let mut axes: Vec<(String, Axis)> = Vec::new();
    for (name, d) in dims {
        let axis = match d {
            Value::Array(items) => Axis::List(
                items
                    .iter()
                    .map(|v| {
                        v.as_i64()
                            .ok_or_else(|| bad(format!("dimension `{name}` lists a non-integer")))
                    })
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(o) => {
                let get = |k: &str, default: Option<i64>| -> Result<i64, KerchunkError> {
                    match o.get(k) {
                        Some(v) => v.as_i64().ok_or_else(|| {
                            bad(format!("dimension `{name}`: `{k}` must be an integer"))
                        }),
                        None => {
                            default.ok_or_else(|| bad(format!("dimension `{name}` needs `{k}`")))
                        }
                    }
                };
                let (start, stop, step) = (
                    get("start", Some(0))?,
                    get("stop", None)?,
                    get("step", Some(1))?,
                );
                if step <= 0 {
                    return Err(bad(format!("dimension `{name}`: step must be positive")));
                }
                Axis::Range {
                    start,
                    step,
                    len: range_len(start, stop, step),
                }
            }
            _ => return Err(bad(format!("dimension `{name}` must be a list or a range"))),
        };
        axes.push((name.clone(), axis));
    }
    let total = axes
        .iter()
        .try_fold(1u64, |acc, (_, a)| acc.checked_mul(a.len()));
    Ok((axes, total))
}

/// Checks that the `gen` entries generate at most `limit` references together,
/// before any is generated; returns how many they generate.
///
/// # Errors
/// [`KerchunkError::TooManyRefs`] naming the first entry past the limit;
/// [`KerchunkError::InvalidGen`] for malformed dimensions.
pub(super) fn check_gen_total(gen: &[Value], limit: u64) -> Result<u64, KerchunkError> {
    let mut sum = Some(0u64);
    for (index, spec) in gen.iter().enumerate() {
        let (_, n) = gen_axes(index, spec)?;
        sum = sum.zip(n).and_then(|(a, b)| a.checked_add(b));
        match sum {
            Some(total) if total <= limit => {}
            other => {
                return Err(KerchunkError::TooManyRefs {
                    index,
                    count: other.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string()),
                    limit,
                })
            }
        }
    }
    Ok(sum.unwrap_or_default())
}

/// Expands one `gen` entry, calling `emit` for every generated reference.
pub(super) fn expand_gen(
    index: usize,
    spec: &Value,
    renderer: &Renderer,
    emit: &mut dyn FnMut(String, Reference) -> Result<(), KerchunkError>,
) -> Result<u64, KerchunkError> {
    let bad = |reason: String| KerchunkError::InvalidGen { index, reason };
    let field = |name: &str| spec.get(name).and_then(Value::as_str).map(str::to_string);
    let key_t = field("key").ok_or_else(|| bad("`key` is required".into()))?;
    let url_t = field("url").ok_or_else(|| bad("`url` is required".into()))?;
    let text_field = |name: &str| -> Option<String> {
        spec.get(name).map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    };
    let offset_t = text_field("offset");
    let length_t = text_field("length");
    if offset_t.is_some() != length_t.is_some() {
        return Err(bad("`offset` and `length` go together".into()));
    }
    let (axes, total) = gen_axes(index, spec)?;
    // Checked by `check_gen_total` against the limit; an overflow here is an error
    // too, never a wrapped count.
    let total = total.ok_or_else(|| KerchunkError::TooManyRefs {
        index,
        count: "more than 2^64".into(),
        limit: u64::MAX,
    })?;
    let env = &renderer.env;
    let key_tpl = compile(env, &key_t)?;
    let url_tpl = compile(env, &url_t)?;
    let offset_tpl = offset_t.as_deref().map(|t| compile(env, t)).transpose()?;
    let length_tpl = length_t.as_deref().map(|t| compile(env, t)).transpose()?;
    let render = |tpl: &minijinja::Template<'_, '_>, ctx: &BTreeMap<String, i64>, src: &str| {
        renderer.render_compiled(tpl, ctx, src)
    };
    let mut positions = vec![0u64; axes.len()];
    let mut count = 0u64;
    for _ in 0..total {
        let ctx: BTreeMap<String, i64> = axes
            .iter()
            .zip(&positions)
            .map(|((n, a), &i)| (n.clone(), a.value(i)))
            .collect();
        let key = render(&key_tpl, &ctx, &key_t)?;
        let url = render(&url_tpl, &ctx, &url_t)?;
        let reference = match (&offset_tpl, &length_tpl) {
            (Some(o), Some(l)) => {
                let num = |s: String, what: &str| {
                    s.trim()
                        .parse::<u64>()
                        .map_err(|_| bad(format!("{what} `{s}` is not a non-negative integer")))
                };
                Reference::Range {
                    url,
                    offset: num(
                        render(o, &ctx, offset_t.as_deref().unwrap_or(""))?,
                        "offset",
                    )?,
                    length: num(
                        render(l, &ctx, length_t.as_deref().unwrap_or(""))?,
                        "length",
                    )?,
                }
            }
            _ => Reference::Url(url),
        };
        emit(key, reference)?;
        count += 1;
        // Odometer over the cartesian product, last dimension fastest.
        for d in (0..positions.len()).rev() {
            positions[d] += 1;
            if positions[d] < axes[d].1.len() {
                break;
            }
            positions[d] = 0;
        }
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::super::limits::KerchunkLimits;
    use super::super::test_support::{collect, collect_limited};
    use super::Reference;
    use crate::error::KerchunkError;

    fn gen_doc(dimensions: &str) -> String {
        format!(
            r#"{{"version": 1, "refs": {{}}, "gen": [{{"key": "k/{{{{i}}}}", "url": "/d/f",
               "dimensions": {dimensions}}}]}}"#
        )
    }

    #[test]
    fn gen_with_a_huge_stop_is_refused_before_expanding() {
        // The old code collected the range into a Vec (capacity overflow panic).
        for dims in [
            r#"{"i": {"stop": 9223372036854775807}}"#,
            r#"{"i": {"start": -9223372036854775808, "stop": 9223372036854775807}}"#,
            r#"{"i": {"stop": 10000001}}"#,
        ] {
            let e = collect(&gen_doc(dims)).unwrap_err();
            assert!(
                matches!(
                    e,
                    KerchunkError::TooManyRefs {
                        index: 0,
                        limit: 10_000_000,
                        ..
                    }
                ),
                "{dims}: {e}"
            );
        }
        // Exactly at the limit, and a long range with a big step, are fine.
        let limits = KerchunkLimits {
            max_generated_refs: 3,
            ..Default::default()
        };
        let refs = collect_limited(
            &gen_doc(r#"{"i": {"start": -9223372036854775808, "stop": 9223372036854775807, "step": 6148914691236517205}}"#),
            &limits,
        )
        .unwrap();
        let keys: Vec<&String> = refs.keys().collect();
        assert_eq!(
            keys,
            [
                "k/-3074457345618258603",
                "k/-9223372036854775808",
                "k/3074457345618258602"
            ]
        );
    }

    #[test]
    fn gen_product_overflow_is_an_error_not_zero() {
        // 65536^4 = 2^64 wrapped to 0 (nothing imported, no error) in the old code.
        let dims = r#"{"a": {"stop": 65536}, "b": {"stop": 65536}, "c": {"stop": 65536}, "d": {"stop": 65536}}"#;
        let e = collect(&gen_doc(dims)).unwrap_err();
        match &e {
            KerchunkError::TooManyRefs { count, .. } => assert_eq!(count, "more than 2^64"),
            other => panic!("{other}"),
        }
        // The limit counts all entries together and can be raised.
        let two = r#"{"version": 1, "gen": [
            {"key": "a/{{i}}", "url": "/d/f", "dimensions": {"i": {"stop": 6}}},
            {"key": "b/{{i}}", "url": "/d/f", "dimensions": {"i": [1, 2, 3, 4, 5]}}]}"#;
        let small = KerchunkLimits {
            max_generated_refs: 10,
            ..Default::default()
        };
        let e = collect_limited(two, &small).unwrap_err();
        assert!(
            matches!(&e, KerchunkError::TooManyRefs { index: 1, count, limit: 10 } if count == "11"),
            "{e}"
        );
        let raised = KerchunkLimits {
            max_generated_refs: 11,
            ..Default::default()
        };
        assert_eq!(collect_limited(two, &raised).unwrap().len(), 11);
    }

    #[test]
    fn gen_cartesian_product_with_lists_and_steps() {
        let refs = collect(
            r#"{"version": 1, "refs": {},
            "gen": [{"key": "v/{{a}}.{{b}}", "url": "/data/f{{a}}.nc",
                     "dimensions": {"a": [3, 7], "b": {"start": 1, "stop": 6, "step": 2}}}]}"#,
        )
        .unwrap();
        let keys: Vec<&String> = refs.keys().collect();
        assert_eq!(keys, ["v/3.1", "v/3.3", "v/3.5", "v/7.1", "v/7.3", "v/7.5"]);
        assert_eq!(refs["v/7.5"], Reference::Url("/data/f7.nc".into()));
    }
}
