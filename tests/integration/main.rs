//! floe's integration tests, one binary: a module per feature, sharing the helpers in
//! `tests/common` (one link of the library for all of them instead of one per file).
//! Separate binaries are only those that cannot share a process: the runners with
//! their own `main` (`harness = false`: `concurrency`, `maintenance_live`) and the
//! tests that install a counting global allocator to measure heap peaks
//! (`snapshot_lazy`, `fuzz_decoders`).
//!
//! Run one feature's tests with a filter on its module name, e.g.
//! `cargo test --test integration forks::`.

#[path = "../common/mod.rs"]
mod common;

mod ancestry;
mod branches_tags;
mod chunk_moves;
mod cli;
mod clone;
mod cloud_storage;
mod coalesced_reads;
mod commits;
mod compact;
mod compression;
mod config;
mod conflicts;
mod crash;
mod diff;
mod fault_injection;
mod forks;
mod format;
mod hardening_arith;
mod hostile_http;
mod hostile_names;
mod hostile_repository;
mod icechunk_interop;
mod kerchunk;
mod lifecycle;
mod local_files;
mod manifest_splitting;
mod module_graph;
mod netcdf;
mod numcodecs;
mod object_limits;
mod object_storage_concurrency;
mod ops;
mod packs;
mod raw_chunk_writes;
mod rebase;
mod rectilinear;
mod repository;
mod repository_config;
mod retention;
mod round_trips;
mod schema;
mod serve;
mod session_lazy;
mod session_store;
mod spec2;
mod storage_conformance;
mod time_travel;
mod verify;
mod virtual_cloud;
mod virtual_confinement;
mod virtual_endpoints;
mod virtual_refs;
mod zarr_api;
mod zarr_interop;
mod zarr_proptest;
mod zarr_v1;
