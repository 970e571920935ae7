//! Dispatch: runs one parsed command line, writing its output to stdout.

use std::io::Write;

use super::args::{CatFormat, Cli, Command, ImportCommand};
use super::cat::{cat, CatRequest};
use super::import::{import_kerchunk, import_zarr};
use super::target::{create_repo, open_repo};
use super::{demo, export, history, lifecycle, ls, output, refs, retention, serve, CliResult};

/// Runs one parsed command line.
///
/// # Errors
/// Whatever the command fails with; printed as one line by the caller.
pub(super) async fn run(cli: Cli) -> CliResult<()> {
    let stdout = std::io::BufWriter::new(std::io::stdout().lock());
    // Raw array bytes are data; everything else is text for a terminal, where no
    // control character from the repository may pass.
    let raw = matches!(
        cli.command,
        Command::Cat {
            format: CatFormat::Raw,
            ..
        }
    );
    let mut out: Box<dyn Write> = if raw {
        Box::new(stdout)
    } else {
        Box::new(output::TerminalSafe::new(stdout))
    };
    match cli.command {
        Command::Init {
            repo,
            spec_version,
            chunk_packing,
        } => {
            let spec =
                floe::format::SpecVersion::from_byte(spec_version).map_err(floe::Error::from)?;
            let config = match chunk_packing {
                None => None,
                Some(mode) => {
                    let mut c = floe::format::config::RepositoryConfig::default();
                    c.set_chunk_packing(Some(&floe::format::config::ChunkPackingConfig {
                        mode: Some(mode.into()),
                        ..Default::default()
                    }))
                    .map_err(floe::Error::from)?;
                    Some(c)
                }
            };
            let r = create_repo(&repo, spec, config).await?;
            writeln!(
                out,
                "Initialized empty floe repository (Icechunk spec {spec}) at {}",
                r.storage().root_url()
            )?;
        }
        Command::Upgrade {
            repo,
            dry_run,
            json,
        } => lifecycle::upgrade(&mut out, &repo, dry_run, json).await?,
        Command::Repair {
            repo,
            dry_run,
            json,
        } => super::repair::repair(&mut out, &repo, dry_run, json).await?,
        Command::OpsLog { repo, json } => {
            history::ops_log(&mut out, &open_repo(&repo, &[]).await?, json).await?
        }
        Command::Info { repo, json } => {
            history::info(&mut out, &open_repo(&repo, &[]).await?, json).await?
        }
        Command::Log {
            repo,
            at,
            json,
            max_count,
        } => {
            let repo = open_repo(&repo, &[]).await?;
            history::log(&mut out, &repo, &at, json, max_count).await?
        }
        Command::Branch(cmd) => refs::branch(&mut out, cmd).await?,
        Command::Tag(cmd) => refs::tag(&mut out, cmd).await?,
        Command::Diff {
            repo,
            from,
            to,
            json,
        } => history::diff(&mut out, &open_repo(&repo, &[]).await?, &from, &to, json).await?,
        Command::Ls {
            repo,
            path,
            at,
            json,
        } => ls::ls(&mut out, &repo, path.as_deref(), &at, json).await?,
        Command::Cat {
            repo,
            array,
            at,
            region,
            format,
            virtual_reads,
        } => {
            let request = CatRequest {
                array: &array,
                region: region.as_deref(),
                format,
            };
            cat(&mut out, &repo, &at, &virtual_reads, &request).await?
        }
        Command::Import(ImportCommand::Zarr { src, target }) => {
            import_zarr(&mut out, &src, &target).await?
        }
        Command::Import(ImportCommand::Kerchunk {
            refs,
            target,
            max_refs,
        }) => {
            let limits = floe::ops::KerchunkLimits::default().max_generated_refs(max_refs);
            import_kerchunk(&mut out, &refs, &target, &limits).await?
        }
        Command::Export {
            repo,
            dest,
            at,
            virtual_reads,
        } => export::export(&mut out, &repo, &dest, &at, &virtual_reads).await?,
        Command::Serve(args) => serve::serve(&mut out, &args).await?,
        Command::Expire {
            repo,
            older_than,
            keep_last,
            keep_within,
            branch,
            delete_expired_branches,
            delete_expired_tags,
            dry_run,
            json,
        } => {
            let repo = open_repo(&repo, &[]).await?;
            match older_than {
                Some(older_than) => {
                    let options = floe::lifecycle::ExpireOptions::default()
                        .delete_expired_branches(delete_expired_branches)
                        .delete_expired_tags(delete_expired_tags)
                        .dry_run(dry_run);
                    lifecycle::expire(&mut out, &repo, &older_than, options, json).await?
                }
                None => {
                    let rule = retention::rule(keep_last, keep_within.as_deref())?;
                    retention::expire_by_rule(&mut out, &repo, rule, &branch, dry_run, json).await?
                }
            }
        }
        Command::Retention {
            repo,
            keep_last,
            keep_within,
            branch,
            clear,
            json,
        } => {
            let repo = open_repo(&repo, &[]).await?;
            let change = if clear {
                retention::Change::Clear(branch)
            } else if keep_last.is_some() || keep_within.is_some() {
                let rule = retention::rule(keep_last, keep_within.as_deref())?;
                retention::Change::Set(branch, rule)
            } else {
                retention::Change::Show
            };
            retention::retention(&mut out, &repo, change, json).await?
        }
        Command::Maintain {
            repo,
            gc_older_than,
            dry_run,
            json,
        } => {
            let repo = open_repo(&repo, &[]).await?;
            retention::maintain(&mut out, &repo, gc_older_than.as_deref(), dry_run, json).await?
        }
        Command::Squash {
            repo,
            branch,
            from,
            to,
            dry_run,
            json,
        } => {
            let repo = open_repo(&repo, &[]).await?;
            retention::squash(
                &mut out,
                &repo,
                &branch,
                &from,
                to.as_deref(),
                dry_run,
                json,
            )
            .await?
        }
        Command::Compact {
            repo,
            branch,
            paths,
            message,
            dry_run,
            json,
        } => {
            let repo = open_repo(&repo, &[]).await?;
            let request = retention::CompactRequest {
                branch: &branch,
                paths: &paths,
                message,
                dry_run,
                json,
            };
            retention::compact(&mut out, &repo, request).await?
        }
        Command::Gc {
            repo,
            older_than,
            dry_run,
            allow_recent_cutoff,
            full,
            json,
        } => {
            let options = floe::lifecycle::GcOptions::default()
                .dry_run(dry_run)
                .allow_recent_cutoff(allow_recent_cutoff)
                .incremental(!full);
            let repo = open_repo(&repo, &[]).await?;
            lifecycle::gc(&mut out, &repo, &older_than, options, json).await?
        }
        Command::Clone {
            src,
            dst,
            refs,
            concurrency,
            no_verify,
            json,
        } => {
            let options = floe::lifecycle::CloneOptions::default()
                .concurrency(concurrency)
                .verify(!no_verify);
            lifecycle::clone(&mut out, &src, &dst, &refs, options, json).await?
        }
        Command::Verify {
            repo,
            read_chunks,
            check_virtual,
            virtual_reads,
            json,
        } => {
            let options = floe::lifecycle::VerifyOptions::default().read_chunks(read_chunks);
            let check = lifecycle::VerifyRequest {
                location: &repo,
                check_virtual,
                virtual_reads: &virtual_reads,
                options,
                json,
            };
            lifecycle::verify(&mut out, check).await?
        }
        Command::Demo { dir } => demo::demo(&mut out, &dir).await?,
    }
    out.flush()?;
    Ok(())
}
