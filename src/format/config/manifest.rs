//! The `manifest` section of the repository configuration: which manifests a session
//! preloads when it opens, how an array's chunk refs are split over manifests, and
//! the compression of virtual chunk locations.
//!
//! The types serialize as Icechunk's do (serde's externally tagged enums): in
//! `config.yaml` a condition is a YAML tag (`!name_matches {regex: ...}`, `!and [...]`,
//! `any_array`, `!Axis 0`, `Any`), in the FlexBuffers configuration of a spec-2 `repo`
//! object a one-key map (`{name_matches: {regex: ...}}`) or a string. Icechunk reads
//! what floe writes and the other way round.
//!
//! Regular expressions are searched for anywhere in the text (not anchored), and one
//! that does not compile matches nothing, as in Icechunk.

use std::collections::HashMap;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::format::path::NodePath;

/// `manifest`: preloading, splitting and virtual-location compression settings.
/// Every field is optional; unset ones take Icechunk's defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestConfig {
    /// Which manifests a session fetches in the background when it opens.
    #[serde(default)]
    pub preload: Option<ManifestPreloadConfig>,
    /// How an array's chunk refs are spread over manifests. Unset: floe's own layout
    /// (at most 50,000 chunk positions per manifest).
    #[serde(default)]
    pub splitting: Option<ManifestSplittingConfig>,
    /// Compression of virtual chunk locations (kept for Icechunk; floe writes
    /// locations uncompressed, which every reader accepts).
    #[serde(default)]
    pub virtual_chunk_location_compression: Option<VirtualChunkLocationCompressionConfig>,
    /// Committed manifests of one array fetched at once while a commit merges
    /// changes into them (Icechunk's default 1).
    #[serde(default)]
    pub max_concurrent_manifest_fetches_during_commit: Option<u16>,
}

impl ManifestConfig {
    /// The preload settings, Icechunk's defaults when unset.
    pub fn preload(&self) -> ManifestPreloadConfig {
        self.preload.clone().unwrap_or_default()
    }

    /// Manifests fetched at once during a commit: the configured number (at least 1),
    /// 1 when unset.
    pub fn max_concurrent_manifest_fetches_during_commit(&self) -> u16 {
        self.max_concurrent_manifest_fetches_during_commit
            .unwrap_or(1)
            .max(1)
    }
}

/// When a manifest is preloaded (Icechunk's `ManifestPreloadCondition`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ManifestPreloadCondition {
    /// Any of the conditions holds.
    Or(Vec<ManifestPreloadCondition>),
    /// All of the conditions hold.
    And(Vec<ManifestPreloadCondition>),
    /// The array's absolute path (`/a/b`) matches the regular expression.
    PathMatches {
        /// The regular expression.
        regex: String,
    },
    /// The array's name (last path segment) matches the regular expression.
    NameMatches {
        /// The regular expression.
        regex: String,
    },
    /// The manifest's number of chunk refs is within the bounds.
    NumRefs {
        /// Lower bound.
        from: Bound<u32>,
        /// Upper bound.
        to: Bound<u32>,
    },
    /// Always.
    True,
    /// Never.
    False,
}

/// Whether `regex` is found in `text`; an invalid expression matches nothing.
fn search(regex: &str, text: &str) -> bool {
    compiled(regex).is_some_and(|r| r.is_match(text))
}

/// How many distinct expressions [`compiled`] keeps; past it the cache starts over.
const MAX_CACHED_REGEXES: usize = 256;

/// Compiled expressions by their source (`None`: does not compile).
static COMPILED: LazyLock<Mutex<HashMap<String, Option<Arc<Regex>>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// `source` compiled, once per process: every session open matches the preload
/// condition against every array (Icechunk's default holds six expressions) and
/// every commit the split conditions, and compiling an expression costs tens of
/// microseconds where matching a name costs tens of nanoseconds. At most
/// [`MAX_CACHED_REGEXES`] are kept, so configurations read from other people's
/// repositories cannot grow the cache without bound.
fn compiled(source: &str) -> Option<Arc<Regex>> {
    let mut cache = COMPILED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(found) = cache.get(source) {
        return found.clone();
    }
    let regex = Regex::new(source).ok().map(Arc::new);
    if cache.len() >= MAX_CACHED_REGEXES {
        cache.clear();
    }
    cache.insert(source.to_owned(), regex.clone());
    regex
}

/// The array name conditions match: the last segment, none for the root.
fn name_of(path: &NodePath) -> Option<&str> {
    (!path.is_root()).then(|| path.name())
}

impl ManifestPreloadCondition {
    /// Whether a manifest of `num_refs` chunk refs of the array at `path` is preloaded.
    pub fn matches(&self, path: &NodePath, num_refs: u32) -> bool {
        match self {
            Self::Or(all) => all.iter().any(|c| c.matches(path, num_refs)),
            Self::And(all) => all.iter().all(|c| c.matches(path, num_refs)),
            Self::PathMatches { regex } => search(regex, path.as_str()),
            Self::NameMatches { regex } => name_of(path).is_some_and(|n| search(regex, n)),
            Self::NumRefs { from, to } => (*from, *to).contains(&num_refs),
            Self::True => true,
            Self::False => false,
        }
    }

    /// Icechunk's default: arrays named like CF coordinates (time, vertical, latitude,
    /// longitude, x, y; the expressions of cf-xarray's axis guesses) whose manifest
    /// holds at most 1,000 refs.
    pub fn default_condition() -> Self {
        let names = [
            r"^\bt\b$|^(time|min|hour|day|week|month|year)[0-9]*$",
            r"^(z|nav_lev|gdep|lv_|[o]*lev|bottom_top|sigma|h(ei)?ght|altitude|depth|isobaric|pres|isotherm)[a-z_]*[0-9]*$",
            r"^(y|j|nlat|rlat|nj)$",
            r"^y?(nav_lat|lat|gphi)[a-z0-9]*$",
            r"^x?(nav_lon|lon|glam)[a-z0-9]*$",
            r"^(x|i|nlon|rlon|ni)$",
        ];
        Self::And(vec![
            Self::Or(
                names
                    .iter()
                    .map(|r| Self::NameMatches {
                        regex: (*r).to_string(),
                    })
                    .collect(),
            ),
            Self::NumRefs {
                from: Bound::Unbounded,
                to: Bound::Included(1000),
            },
        ])
    }
}

/// `manifest.preload`: which manifests a new session fetches into the cache in the
/// background.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestPreloadConfig {
    /// At most this many chunk refs are preloaded in all (default 10,000; 0 turns
    /// preloading off).
    #[serde(default)]
    pub max_total_refs: Option<u32>,
    /// Which manifests; unset: [`ManifestPreloadCondition::default_condition`].
    #[serde(default)]
    pub preload_if: Option<ManifestPreloadCondition>,
    /// At most this many arrays are looked at (default 50).
    #[serde(default)]
    pub max_arrays_to_scan: Option<u32>,
}

impl ManifestPreloadConfig {
    /// The refs budget (default 10,000).
    pub fn max_total_refs(&self) -> u32 {
        self.max_total_refs.unwrap_or(10_000)
    }

    /// Arrays looked at (default 50).
    pub fn max_arrays_to_scan(&self) -> u32 {
        self.max_arrays_to_scan.unwrap_or(50)
    }

    /// The condition, the default one when unset.
    pub fn preload_if(&self) -> ManifestPreloadCondition {
        self.preload_if
            .clone()
            .unwrap_or_else(ManifestPreloadCondition::default_condition)
    }
}

/// Which arrays a splitting rule applies to (Icechunk's `ManifestSplitCondition`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ManifestSplitCondition {
    /// Any of the conditions holds.
    Or(Vec<ManifestSplitCondition>),
    /// All of the conditions hold.
    And(Vec<ManifestSplitCondition>),
    /// The array's absolute path matches the regular expression.
    PathMatches {
        /// The regular expression.
        regex: String,
    },
    /// The array's name matches the regular expression.
    NameMatches {
        /// The regular expression.
        regex: String,
    },
    /// Every array.
    AnyArray,
}

impl ManifestSplitCondition {
    /// Whether the rule applies to the array at `path`.
    pub fn matches(&self, path: &NodePath) -> bool {
        match self {
            Self::Or(all) => all.iter().any(|c| c.matches(path)),
            Self::And(all) => all.iter().all(|c| c.matches(path)),
            Self::PathMatches { regex } => search(regex, path.as_str()),
            Self::NameMatches { regex } => name_of(path).is_some_and(|n| search(regex, n)),
            Self::AnyArray => true,
        }
    }
}

/// Which dimension of a matched array a split size applies to (Icechunk's
/// `ManifestSplitDimCondition`; its variant names are written as they are).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ManifestSplitDimCondition {
    /// The dimension at this axis (0-based).
    Axis(usize),
    /// A dimension whose name matches the regular expression (an unnamed one never
    /// does).
    DimensionName(String),
    /// Any dimension.
    Any,
}

impl ManifestSplitDimCondition {
    /// Whether the condition holds for dimension `axis`, named `name`.
    pub fn matches(&self, axis: usize, name: Option<&str>) -> bool {
        match self {
            Self::Axis(a) => *a == axis,
            Self::DimensionName(regex) => name.is_some_and(|n| search(regex, n)),
            Self::Any => true,
        }
    }
}

/// One split size: dimensions matching `condition` are cut every `num_chunks` chunks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestSplitDim {
    /// The dimensions it applies to.
    pub condition: ManifestSplitDimCondition,
    /// Chunks per manifest along them (`u32::MAX`: never cut).
    pub num_chunks: u32,
}

/// `manifest.splitting`: rules, in order, each a condition on arrays and split sizes
/// for their dimensions. For each dimension the first matching size of the first
/// matching rule that sizes it applies; dimensions no rule sizes are not cut.
/// `split_sizes: null` means one manifest per array.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestSplittingConfig {
    /// The rules, in order.
    pub split_sizes: Option<Vec<(ManifestSplitCondition, Vec<ManifestSplitDim>)>>,
}

impl ManifestSplittingConfig {
    /// Chunks per manifest along each dimension of the array at `path` with
    /// `num_chunks` chunks per dimension and dimension names `names` (as Icechunk's
    /// `get_split_sizes`): the size of a dimension no rule cuts is its whole number
    /// of chunks (at least 1); a size of 0 is taken as 1.
    pub fn block_sizes(
        &self,
        path: &NodePath,
        num_chunks: &[u64],
        names: Option<&[Option<String>]>,
    ) -> Vec<u64> {
        let mut block: Vec<u64> = num_chunks.iter().map(|&n| n.max(1)).collect();
        let mut sized = vec![false; num_chunks.len()];
        for (condition, dims) in self.split_sizes.iter().flatten() {
            if !condition.matches(path) {
                continue;
            }
            for (axis, b) in block.iter_mut().enumerate() {
                if sized[axis] {
                    continue;
                }
                let name = names.and_then(|n| n.get(axis)).and_then(|n| n.as_deref());
                if let Some(d) = dims.iter().find(|d| d.condition.matches(axis, name)) {
                    *b = u64::from(d.num_chunks.max(1)).min(num_chunks[axis].max(1));
                    sized[axis] = true;
                }
            }
        }
        block
    }
}

/// `manifest.virtual_chunk_location_compression` (Icechunk's
/// `ManifestVirtualChunkLocationCompressionConfig`): stored and returned as given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VirtualChunkLocationCompressionConfig {
    /// Fewest virtual chunks for compression to apply (default 1,000).
    #[serde(default)]
    pub min_num_chunks: Option<u16>,
    /// Location samples the dictionary is trained on (default 100).
    #[serde(default)]
    pub dictionary_max_training_samples: Option<u16>,
    /// Largest dictionary, in bytes (default 2,048).
    #[serde(default)]
    pub dictionary_max_size_bytes: Option<u32>,
    /// zstd level (default 3).
    #[serde(default)]
    pub compression_level: Option<i32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> NodePath {
        NodePath::new(s).unwrap()
    }

    #[test]
    fn split_sizes_follow_rule_and_dimension_order() {
        use ManifestSplitDimCondition as D;
        let dims = |v: Vec<(D, u32)>| {
            v.into_iter()
                .map(|(condition, num_chunks)| ManifestSplitDim {
                    condition,
                    num_chunks,
                })
                .collect::<Vec<_>>()
        };
        let names = [
            Some("time".to_string()),
            Some("latitude".to_string()),
            Some("longitude".to_string()),
        ];
        let cfg = ManifestSplittingConfig {
            split_sizes: Some(vec![
                (
                    ManifestSplitCondition::NameMatches {
                        regex: "temp".into(),
                    },
                    dims(vec![
                        (D::DimensionName("longitude".into()), 3),
                        (D::Axis(1), 2),
                    ]),
                ),
                (ManifestSplitCondition::AnyArray, dims(vec![(D::Any, 1)])),
            ]),
        };
        assert_eq!(
            cfg.block_sizes(&p("/temperature"), &[3, 4, 17], Some(&names)),
            vec![1, 2, 3]
        );
        // Not matched by the first rule: every dimension by the second.
        assert_eq!(
            cfg.block_sizes(&p("/salinity"), &[3, 4, 17], Some(&names)),
            vec![1, 1, 1]
        );
        // Unnamed dimensions: only the axis condition of the first rule.
        assert_eq!(
            cfg.block_sizes(&p("/temperature"), &[3, 4, 17], None),
            vec![1, 2, 1]
        );
        // No rule: whole dimensions; a size larger than the dimension is the dimension.
        assert_eq!(
            ManifestSplittingConfig::default().block_sizes(&p("/a"), &[3, 0], None),
            vec![3, 1]
        );
    }

    #[test]
    fn preload_conditions_match_as_icechunks() {
        let c = ManifestPreloadCondition::default_condition();
        assert!(c.matches(&p("/group/time"), 10));
        assert!(c.matches(&p("/lat"), 1000));
        assert!(!c.matches(&p("/lat"), 1001));
        assert!(!c.matches(&p("/temperature"), 1));
        let range = ManifestPreloadCondition::NumRefs {
            from: Bound::Included(2),
            to: Bound::Excluded(8),
        };
        assert!(range.matches(&p("/x"), 2) && !range.matches(&p("/x"), 8));
        let path = ManifestPreloadCondition::PathMatches {
            regex: "^/a/".into(),
        };
        assert!(path.matches(&p("/a/b"), 0) && !path.matches(&p("/b/a"), 0));
        let bad = ManifestPreloadCondition::NameMatches { regex: "(".into() };
        assert!(!bad.matches(&p("/("), 0));
    }

    #[test]
    fn compiled_expressions_are_kept_and_bounded() {
        // The same answers from the cache as from a fresh compile, an invalid
        // expression included, and never more than the bound kept.
        for round in 0..2 {
            assert!(
                search("^lat$", "lat") && !search("^lat$", "lon"),
                "round {round}"
            );
            assert!(!search("(", "("), "round {round}");
        }
        for i in 0..MAX_CACHED_REGEXES + 10 {
            let source = format!("^name{i}$");
            assert!(search(&source, &format!("name{i}")));
            assert!(!search(&source, "other"));
        }
        let kept = COMPILED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        assert!(kept <= MAX_CACHED_REGEXES, "{kept} expressions kept");
        assert!(search("^lat$", "lat"));
    }
}
