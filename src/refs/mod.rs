//! Branches and tags in storage.
//!
//! Spec 1 keeps each ref in its own file (`ref_files.rs`: `refs/branch.<name>/ref.json`
//! moved by compare-and-swap, tags and tag tombstones); spec 2 keeps every ref in the
//! one `repo` object (`repo_object`: replaced by compare-and-swap after a copy of it
//! is saved under `overwritten/`, each change recorded in its ops log).
//! `RefStore` is the one interface the repository and sessions use for either.
//!
//! Spec: Icechunk specification, "Reference Files", "Creating and Updating Branches",
//! "Tags"; spec 2: `../shared/docs/icechunk-format-notes.md` §1.3, §2.5, §4.2.

mod branch_hints;
mod detect;
pub(crate) mod ref_files;
pub(crate) mod repo_object;
mod store;

pub use detect::spec_version_of;
pub(crate) use ref_files::{
    create_branch, delete_branch_if_unmoved, delete_tag, fetch_branch, fetch_tag, list_refs,
    validate_ref_name, RefData, RefListing,
};
pub(crate) use store::{check_flag, BranchTip, RefStore, RefUpdate};
