//! Limits on the work a kerchunk reference set can make floe do: how many references
//! its `gen` entries may generate and how much its Jinja templates may run (fuel per
//! rendering and over the document, bytes per rendered string). The reader
//! ([`super::ReferenceFile`]) enforces them: `gen` totals in [`super::gen`], template
//! budgets in [`super::templates`].
//!
//! Spec: `../shared/specs/kerchunk-references.txt` ("Version 1": templates and `gen`). The limits themselves are
//! floe's (the spec sets none): a reference set is untrusted input.

/// Bounds on the work a reference set can make the reader do: the `gen` expansion
/// and Jinja template rendering (templates are code from the document).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct KerchunkLimits {
    /// Most references all `gen` entries of a document may generate together
    /// (default 10^7). Checked before anything is generated.
    pub max_generated_refs: u64,
    /// Fuel of one template rendering: minijinja instructions (default 100 000).
    pub template_fuel: u64,
    /// Fuel of all renderings of the document together (default 10^9).
    pub total_fuel: u64,
    /// Longest string one rendering may produce, in bytes (default 64 KiB).
    pub max_rendered_bytes: usize,
}

impl KerchunkLimits {
    /// These limits with at most `n` references from `gen` entries.
    pub fn max_generated_refs(mut self, n: u64) -> Self {
        self.max_generated_refs = n;
        self
    }

    /// These limits with `per_render` fuel per template rendering and `total` over
    /// the document.
    pub fn template_fuel(mut self, per_render: u64, total: u64) -> Self {
        self.template_fuel = per_render;
        self.total_fuel = total;
        self
    }

    /// These limits with renderings of at most `n` bytes.
    pub fn max_rendered_bytes(mut self, n: usize) -> Self {
        self.max_rendered_bytes = n;
        self
    }
}

impl Default for KerchunkLimits {
    fn default() -> Self {
        KerchunkLimits {
            max_generated_refs: 10_000_000,
            template_fuel: 100_000,
            total_fuel: 1_000_000_000,
            max_rendered_bytes: 64 << 10,
        }
    }
}
