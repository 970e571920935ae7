//! `floe repair`: puts back the newest readable copy of an unreadable spec-2 `repo`
//! object (see [`floe::lifecycle::repair`]).

use std::io::Write;

use serde_json::json;

use super::CliError;
use super::{output, CliResult};
use floe::lifecycle::{repair_repo_object, RepairOutcome};

/// Repairs the repository at `location` and prints what it did.
///
/// # Errors
/// As [`repair_repo_object`]; storage location errors.
pub(super) async fn repair(
    out: &mut impl Write,
    location: &str,
    dry_run: bool,
    json: bool,
) -> CliResult<()> {
    let storage = super::target::repo_storage(location)?;
    let outcome = repair_repo_object(storage.as_ref(), dry_run).await?;
    let (state, reason, from, saved) = match &outcome {
        RepairOutcome::Healthy => ("healthy", None, None, None),
        RepairOutcome::WouldRestore { reason, from } => {
            ("would_restore", Some(reason), Some(from), None)
        }
        RepairOutcome::Restored {
            reason,
            from,
            damaged_saved_as,
        } => ("restored", Some(reason), Some(from), Some(damaged_saved_as)),
        other => {
            return Err(CliError::Usage(format!(
                "repair reported an outcome this floe binary cannot show: {other:?}"
            )))
        }
    };
    if json {
        output::json_line(
            out,
            &json!({"state": state, "reason": reason, "from": from, "damaged_saved_as": saved}),
        )?;
        return Ok(());
    }
    let clean = |s: &str| s.chars().filter(|c| !c.is_control()).collect::<String>();
    match (reason, from) {
        (Some(reason), Some(from)) => {
            writeln!(out, "The repo object cannot be read: {}", clean(reason))?;
            let verb = if dry_run { "Would restore" } else { "Restored" };
            writeln!(out, "{verb} the copy overwritten/{from}")?;
            if let Some(saved) = saved {
                writeln!(
                    out,
                    "The unreadable object was saved as overwritten/{saved}"
                )?;
            }
        }
        _ => writeln!(out, "The repo object reads: nothing to repair")?,
    }
    Ok(())
}
