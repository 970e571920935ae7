//! Rendering the Jinja template strings of a kerchunk reference set (version 1
//! `templates`: string variables and template functions) with `minijinja`, every
//! rendering on the shared fuel and output budget of [`KerchunkLimits`] (templates are
//! code from the document).
//!
//! Spec: `../shared/specs/kerchunk-references.txt` ("Version 1": `templates`, Jinja strings in keys, URLs,
//! offsets and lengths).

use std::collections::BTreeMap;

use super::limits::KerchunkLimits;
use crate::error::KerchunkError;

/// A `Write` that keeps at most `max` bytes and fails beyond.
struct BoundedOutput {
    buf: Vec<u8>,
    max: usize,
}

impl std::io::Write for BoundedOutput {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.buf.len().saturating_add(data.len()) > self.max {
            return Err(std::io::Error::other("rendered text too long"));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The execution budget of one document's templates, shared by every rendering
/// (including template functions rendered from inside other templates).
#[derive(Debug)]
struct Budget {
    limits: KerchunkLimits,
    /// Fuel consumed so far by all renderings.
    spent: std::sync::atomic::AtomicU64,
    /// Set when any rendering hit a limit (so an error surfacing through an outer
    /// template is still reported as [`KerchunkError::TemplateLimit`]).
    exceeded: std::sync::atomic::AtomicBool,
}

impl Budget {
    fn new(limits: KerchunkLimits) -> Self {
        Budget {
            limits,
            spent: Default::default(),
            exceeded: Default::default(),
        }
    }

    /// A template environment with strict undefined values and per-rendering fuel.
    fn environment(&self) -> minijinja::Environment<'static> {
        let mut env = minijinja::Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        env.set_fuel(Some(self.limits.template_fuel.max(1)));
        env
    }

    /// Renders `tpl` (source text `src`) within the limits.
    fn render(
        &self,
        tpl: &minijinja::Template<'_, '_>,
        ctx: minijinja::Value,
        src: &str,
    ) -> Result<String, KerchunkError> {
        use std::sync::atomic::Ordering;
        let mut out = BoundedOutput {
            buf: Vec::new(),
            max: self.limits.max_rendered_bytes,
        };
        let result = tpl.render_captured_to(ctx, &mut out);
        let consumed = match &result {
            Ok(c) => c.state().fuel_levels().map_or(0, |(used, _)| used),
            Err(_) => self.limits.template_fuel,
        };
        let spent = self
            .spent
            .fetch_add(consumed, Ordering::Relaxed)
            .saturating_add(consumed);
        let limit = |reason: String| {
            self.exceeded.store(true, Ordering::Relaxed);
            KerchunkError::TemplateLimit {
                template: src.to_string(),
                reason,
            }
        };
        match result {
            Err(e) if e.kind() == minijinja::ErrorKind::OutOfFuel => Err(limit(format!(
                "more than {} instructions in one rendering",
                self.limits.template_fuel
            ))),
            Err(_) if e_is_write_failure(&result) => Err(limit(format!(
                "renders to more than {} bytes",
                self.limits.max_rendered_bytes
            ))),
            Err(_) if self.exceeded.load(Ordering::Relaxed) => Err(limit(
                "a template function it calls exceeded its budget".into(),
            )),
            Err(e) => Err(KerchunkError::Template {
                template: src.to_string(),
                reason: e.to_string(),
            }),
            Ok(_) if spent > self.limits.total_fuel => Err(limit(format!(
                "the document's templates ran more than {} instructions in total",
                self.limits.total_fuel
            ))),
            Ok(_) => String::from_utf8(out.buf).map_err(|e| KerchunkError::Template {
                template: src.to_string(),
                reason: e.to_string(),
            }),
        }
    }
}

/// Whether a rendering failed writing its output (the [`BoundedOutput`] limit).
fn e_is_write_failure<T>(result: &Result<T, minijinja::Error>) -> bool {
    matches!(result, Err(e) if e.kind() == minijinja::ErrorKind::WriteFailure)
}

/// Renders Jinja strings with the document's templates: a template without `{{` is a
/// string variable; one with `{{` is a function whose keyword arguments are its context.
/// Every rendering (template functions included) runs within the shared [`Budget`].
pub(super) struct Renderer {
    pub(super) env: minijinja::Environment<'static>,
    budget: std::sync::Arc<Budget>,
}

impl Renderer {
    pub(super) fn new(templates: &BTreeMap<String, String>, limits: &KerchunkLimits) -> Self {
        let budget = std::sync::Arc::new(Budget::new(limits.clone()));
        let mut env = budget.environment();
        for (name, text) in templates {
            if text.contains("{{") {
                let text = text.clone();
                let budget = std::sync::Arc::clone(&budget);
                env.add_function(
                    name.clone(),
                    move |kwargs: minijinja::value::Kwargs| -> Result<String, minijinja::Error> {
                        let mut ctx = BTreeMap::new();
                        for k in kwargs.args() {
                            ctx.insert(k.to_string(), kwargs.get::<minijinja::Value>(k)?);
                        }
                        let env = budget.environment();
                        let fail = |e: KerchunkError| {
                            minijinja::Error::new(
                                minijinja::ErrorKind::InvalidOperation,
                                e.to_string(),
                            )
                        };
                        let tpl = compile(&env, &text).map_err(fail)?;
                        budget
                            .render(&tpl, minijinja::Value::from(ctx), &text)
                            .map_err(fail)
                    },
                );
            } else {
                env.add_global(name.clone(), text.clone());
            }
        }
        Renderer { env, budget }
    }

    /// Renders `text` (returned as it is when it holds no template).
    pub(super) fn render_owned(
        &self,
        text: String,
        ctx: &BTreeMap<String, i64>,
    ) -> Result<String, KerchunkError> {
        if !text.contains("{{") && !text.contains("{%") {
            return Ok(text);
        }
        let tpl = compile(&self.env, &text)?;
        self.render_compiled(&tpl, ctx, &text)
    }

    pub(super) fn render_compiled(
        &self,
        tpl: &minijinja::Template<'_, '_>,
        ctx: &BTreeMap<String, i64>,
        src: &str,
    ) -> Result<String, KerchunkError> {
        self.budget
            .render(tpl, minijinja::Value::from(ctx.clone()), src)
    }
}

/// Compiles template `text` in `env`.
pub(super) fn compile<'e, 's>(
    env: &'e minijinja::Environment<'static>,
    text: &'s str,
) -> Result<minijinja::Template<'e, 's>, KerchunkError> {
    env.template_from_str(text)
        .map_err(|e| KerchunkError::Template {
            template: text.to_string(),
            reason: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::limits::KerchunkLimits;
    use super::super::test_support::{collect, collect_limited};
    use super::super::Reference;
    use crate::error::KerchunkError;

    #[test]
    fn templates_run_on_a_budget() {
        let is_limit = |r: Result<BTreeMap<String, Reference>, KerchunkError>| {
            matches!(r, Err(KerchunkError::TemplateLimit { .. }))
        };
        // Nested loops in a reference URL: out of fuel, not 10^10 iterations.
        let nested = r#"{"version": 1, "refs": {"a": ["{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}/x", 0, 1]}}"#;
        let started = std::time::Instant::now();
        assert!(is_limit(collect(nested)));
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
        // ... and inside a template function called from a reference.
        let in_function = r#"{"version": 1,
            "templates": {"f": "{% for i in range(100000) %}{% for j in range(100000) %}{{c}}{% endfor %}{% endfor %}"},
            "refs": {"a": ["/{{f(c='x')}}", 0, 1]}}"#;
        assert!(is_limit(collect(in_function)));
        // A rendered string longer than the bound.
        let long = r#"{"version": 1, "refs": {"a": ["/{{ 'x' * 100000 }}", 0, 1]}}"#;
        assert!(is_limit(collect(long)));
        let long_fn = r#"{"version": 1, "templates": {"f": "{{ c * 100000 }}"},
            "refs": {"a": ["/{{ f(c='x') }}", 0, 1]}}"#;
        assert!(is_limit(collect(long_fn)));
        // The whole document's renderings share one budget.
        let many = r#"{"version": 1, "refs": {}, "gen": [{"key": "k/{{i}}",
            "url": "/{% for j in range(50) %}{% endfor %}f", "dimensions": {"i": {"stop": 1000}}}]}"#;
        assert_eq!(collect(many).unwrap().len(), 1000);
        let tight = KerchunkLimits {
            total_fuel: 10_000,
            ..Default::default()
        };
        assert!(is_limit(collect_limited(many, &tight)));
        // Ordinary template errors stay `Template`.
        assert!(matches!(
            collect(r#"{"version": 1, "refs": {"a": ["/{{ nope }}", 0, 1]}}"#),
            Err(KerchunkError::Template { .. })
        ));
    }
}
