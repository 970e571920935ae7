//! Retention: how much of each branch's history to keep, as Iceberg's snapshot
//! retention (a maximum age and a minimum count of snapshots kept per branch).
//!
//! A [`RetentionRule`] keeps, along a branch's history from its tip, the last
//! `keep_last` snapshots and every snapshot flushed within `keep_within` of now;
//! a snapshot is kept when either says so, and the tip and the history's first
//! snapshot always are. A [`RetentionPolicy`] gives a default rule and rules for
//! named branches; a branch without a rule keeps its whole history.
//!
//! Applying a policy ([`crate::Repository::apply_retention`]) is an expiry in the
//! sense of Icechunk's `expire_v2`, recorded as `ExpirationRan` in the ops log: the
//! snapshots of branch histories that no rule keeps leave the `repo` object, and
//! each kept snapshot whose parent left is re-parented onto its nearest kept
//! ancestor, recording the transaction logs it now spans in
//! `pruned_ancestor_tx_logs` (spec 2.1). Unlike a time cut-off, which Icechunk
//! re-parents onto the history's root, the nearest kept ancestor keeps fork points
//! and tagged snapshots in the history. Nothing is deleted until garbage
//! collection.
//!
//! What is never released: a branch's tip, a tag's snapshot (tags are never
//! expired), snapshots that only tags or no ref reach (detached snapshots, such as
//! forks' starting points), and the first snapshot of every history. Spec 2 only:
//! per-branch histories of a spec-1 repository live in shared snapshot files.
//!
//! A policy can be stored in the repository ([`crate::Repository::set_retention_policy`]):
//! a JSON value in the spec-2 repository metadata under [`RETENTION_METADATA_KEY`],
//! which Icechunk keeps and ignores; `floe maintain` applies it, then collects
//! garbage.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::expire::{release_snapshots, ExpireResult};
use crate::error::{Error, Result};
use crate::format::repo_info::RepoInfo;
use crate::format::SnapshotId;

/// The repository-metadata key that holds a stored [`RetentionPolicy`] (spec 2).
pub const RETENTION_METADATA_KEY: &str = "floe:retention";

/// How much of one branch's history to keep.
///
/// A snapshot is kept when it is among the last `keep_last` of the history (the
/// tip counts as one) or was flushed within `keep_within` before now; a rule with
/// neither keeps only the tip and the history's first snapshot.
///
/// ```
/// use std::time::Duration;
/// use floe::lifecycle::RetentionRule;
/// // The last 10 commits, and every commit of the last 30 days.
/// let rule = RetentionRule::default()
///     .keep_last(10)
///     .keep_within(Duration::from_secs(30 * 86_400));
/// assert_eq!(rule.keep_last, Some(10));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct RetentionRule {
    /// Snapshots kept from the tip down, the tip included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_last: Option<u64>,
    /// Snapshots flushed less than this long before now are kept (whole seconds
    /// when stored).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "keep_within_seconds",
        with = "seconds"
    )]
    pub keep_within: Option<Duration>,
}

impl RetentionRule {
    /// This rule keeping the last `n` snapshots.
    pub fn keep_last(mut self, n: u64) -> Self {
        self.keep_last = Some(n);
        self
    }

    /// This rule keeping the snapshots flushed within `age` of now.
    pub fn keep_within(mut self, age: Duration) -> Self {
        self.keep_within = Some(age);
        self
    }

    /// Whether the snapshot at `position` from the tip (0 is the tip), flushed at
    /// `flushed_at` (microseconds since the epoch), is kept at `now` (same unit).
    fn keeps(&self, position: usize, flushed_at: u64, now: u64) -> bool {
        let by_count = self
            .keep_last
            .is_some_and(|n| u64::try_from(position).unwrap_or(u64::MAX) < n);
        let by_age = self.keep_within.is_some_and(|age| {
            let age = u64::try_from(age.as_micros()).unwrap_or(u64::MAX);
            flushed_at >= now.saturating_sub(age)
        });
        position == 0 || by_count || by_age
    }
}

/// Retention rules per branch: `default` for branches not named in `branches`.
/// A branch with no rule (neither named nor covered by a default) keeps its
/// whole history.
///
/// ```
/// use floe::lifecycle::{RetentionPolicy, RetentionRule};
/// let policy = RetentionPolicy::default()
///     .default_rule(RetentionRule::default().keep_last(100))
///     .branch("scratch", RetentionRule::default().keep_last(1));
/// assert_eq!(policy.rule_for("scratch").and_then(|r| r.keep_last), Some(1));
/// assert_eq!(policy.rule_for("main").and_then(|r| r.keep_last), Some(100));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct RetentionPolicy {
    /// The rule of branches without one of their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<RetentionRule>,
    /// Rules of named branches.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub branches: BTreeMap<String, RetentionRule>,
}

impl RetentionPolicy {
    /// This policy with `rule` for branches not named.
    pub fn default_rule(mut self, rule: RetentionRule) -> Self {
        self.default = Some(rule);
        self
    }

    /// This policy with `rule` for the branch `name`.
    pub fn branch(mut self, name: impl Into<String>, rule: RetentionRule) -> Self {
        self.branches.insert(name.into(), rule);
        self
    }

    /// The rule that applies to the branch `name`, if any.
    pub fn rule_for(&self, name: &str) -> Option<&RetentionRule> {
        self.branches.get(name).or(self.default.as_ref())
    }

    /// Whether no branch has a rule (applying it changes nothing).
    pub fn is_empty(&self) -> bool {
        self.default.is_none() && self.branches.is_empty()
    }

    /// Checks that every rule keeps something beyond the tip: a rule needs
    /// `keep_last` of at least 1 or a `keep_within`, so that a rule with a
    /// misspelt or missing field cannot release a whole history.
    ///
    /// # Errors
    /// [`Error::InvalidRetentionPolicy`] naming the rule.
    pub fn validate(&self) -> Result<()> {
        let named = self
            .branches
            .iter()
            .map(|(b, r)| (format!("branch `{b}`"), r));
        for (whose, rule) in self
            .default
            .iter()
            .map(|r| ("the default rule".to_string(), r))
            .chain(named)
        {
            if rule.keep_last.is_none() && rule.keep_within.is_none() {
                return Err(Error::InvalidRetentionPolicy {
                    reason: format!("{whose} sets neither keep_last nor keep_within"),
                });
            }
            if rule.keep_last == Some(0) {
                return Err(Error::InvalidRetentionPolicy {
                    reason: format!("{whose}: keep_last must be at least 1 (the tip)"),
                });
            }
        }
        Ok(())
    }

    /// The policy a JSON value describes (as [`RetentionPolicy`] serializes:
    /// `{"default": {"keep_last": 10, "keep_within_seconds": 2592000},
    /// "branches": {"dev": {"keep_last": 1}}}`), checked by [`Self::validate`].
    ///
    /// # Errors
    /// [`Error::InvalidRetentionPolicy`]: unknown fields, wrong types, a rule that
    /// keeps nothing.
    pub fn from_json(value: &serde_json::Value) -> Result<RetentionPolicy> {
        let policy: RetentionPolicy =
            serde_json::from_value(value.clone()).map_err(|e| Error::InvalidRetentionPolicy {
                reason: e.to_string(),
            })?;
        policy.validate()?;
        Ok(policy)
    }

    /// The policy stored in `info`'s metadata under [`RETENTION_METADATA_KEY`].
    ///
    /// # Errors
    /// [`Error::InvalidRetentionPolicy`] when the stored value is not a valid policy.
    pub fn stored_in(info: &RepoInfo) -> Result<Option<RetentionPolicy>> {
        info.metadata
            .get(RETENTION_METADATA_KEY)
            .map(Self::from_json)
            .transpose()
    }
}

/// Serde of an optional [`Duration`] as whole seconds.
mod seconds {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_u64(d.as_secs()),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_secs))
    }
}

/// The snapshots `policy` releases in `info` at `now` (microseconds): those of a
/// branch's history that no rule keeps. Kept: every snapshot a branch's rule keeps,
/// every branch's whole history when it has no rule, every ref's tip and every
/// history's first snapshot. Each branch's history is walked once.
fn released_snapshots(info: &RepoInfo, policy: &RetentionPolicy, now: u64) -> HashSet<SnapshotId> {
    let mut kept: HashSet<SnapshotId> = info.tags.values().copied().collect();
    let mut in_branch_history: HashSet<SnapshotId> = HashSet::new();
    for (name, tip) in &info.branches {
        let Ok(history) = info.ancestry(*tip) else {
            // A loop: keep all of it, release nothing of it.
            kept.extend(info.snapshots.keys().copied());
            continue;
        };
        let rule = policy.rule_for(name);
        for (position, s) in history.iter().enumerate() {
            in_branch_history.insert(s.id);
            let keep =
                s.parent_id.is_none() || rule.is_none_or(|r| r.keeps(position, s.flushed_at, now));
            if keep {
                kept.insert(s.id);
            }
        }
    }
    in_branch_history
        .into_iter()
        .filter(|id| !kept.contains(id))
        .collect()
}

/// Applies `policy` to `info` at `now` (microseconds since the epoch): removes the
/// snapshots of branch histories it does not keep and re-parents each kept
/// snapshot whose parent was removed onto its nearest kept ancestor (see the
/// module docs). Returns what left (`expired`) and what was re-parented
/// (`edited`); refs are never deleted.
pub(crate) fn apply_to_repo_info(
    info: &mut RepoInfo,
    policy: &RetentionPolicy,
    now: u64,
) -> ExpireResult {
    let original = info.clone();
    let released = released_snapshots(&original, policy, now);
    let edited = release_snapshots(
        info,
        &original,
        &released,
        |a| !released.contains(&a.id),
        |_, nearest_kept| nearest_kept.unwrap_or(SnapshotId::INITIAL),
    );
    ExpireResult {
        expired: released.iter().copied().collect(),
        edited,
        ..ExpireResult::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_keep_by_count_or_age_and_always_the_tip() {
        let now = 1_000_000_000_000;
        let day = 86_400_000_000;
        let count = RetentionRule::default().keep_last(2);
        assert!(count.keeps(0, 0, now));
        assert!(count.keeps(1, 0, now));
        assert!(!count.keeps(2, now, now));
        let age = RetentionRule::default().keep_within(Duration::from_secs(86_400));
        assert!(age.keeps(5, now - day + 1, now));
        assert!(!age.keeps(5, now - day - 1, now));
        assert!(age.keeps(0, 0, now));
        let both = count.keep_within(Duration::from_secs(86_400));
        assert!(both.keeps(1, 0, now));
        assert!(both.keeps(9, now, now));
        assert!(!both.keeps(9, 0, now));
    }

    #[test]
    fn policies_store_as_json_and_refuse_other_values() {
        let policy = RetentionPolicy::default()
            .default_rule(RetentionRule::default().keep_within(Duration::from_secs(60)))
            .branch("dev", RetentionRule::default().keep_last(3));
        let v = serde_json::to_value(&policy).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"default": {"keep_within_seconds": 60},
                               "branches": {"dev": {"keep_last": 3}}})
        );
        assert_eq!(
            serde_json::from_value::<RetentionPolicy>(v).unwrap(),
            policy
        );
        for bad in [
            serde_json::json!({"default": 3}),
            serde_json::json!({"default": {"keep_lst": 3}}),
            serde_json::json!({"default": {}}),
            serde_json::json!({"branches": {"dev": {"keep_last": 0}}}),
            serde_json::json!({"defaults": {"keep_last": 3}}),
        ] {
            assert!(
                matches!(
                    RetentionPolicy::from_json(&bad),
                    Err(Error::InvalidRetentionPolicy { .. })
                ),
                "{bad}"
            );
        }
    }
}
