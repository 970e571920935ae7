//! Whether the environment can sign cloud requests without a metadata server.
//!
//! object_store's Google Cloud Storage and Azure clients built "from the environment"
//! fall back, when the environment names no credential, to the cloud's metadata
//! server (`169.254.169.254`: Compute Engine's token endpoint, Azure's managed
//! identity endpoint). Off those clouds nothing answers there, and the client retries
//! the connection until its retry deadline: a read that hangs for a minute before
//! failing with a network error that does not say what is missing. The checks here
//! look at the environment only (variables, files, the machine's DMI product
//! strings), ask no server, and say what is missing, so a caller can fail at once
//! with a clear error instead.

use std::path::PathBuf;

/// Reads the environment variable `name`, `None` when unset or empty.
fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Whether any of the variables `names` is set to a non-empty value.
fn any_var(names: &[&str]) -> bool {
    names.iter().any(|n| var(n).is_some())
}

/// The machine's DMI string `field` (`product_name`, `sys_vendor`) as Linux shows it,
/// empty where it cannot be read (containers, other systems).
fn dmi(field: &str) -> String {
    std::fs::read_to_string(format!("/sys/class/dmi/id/{field}"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// gcloud's application default credentials file, as object_store looks for it:
/// `$HOME/.config/gcloud/application_default_credentials.json`.
fn gcloud_adc_file() -> Option<PathBuf> {
    let home = var("HOME")?;
    let path = PathBuf::from(home).join(".config/gcloud/application_default_credentials.json");
    path.is_file().then_some(path)
}

/// Why a Google Cloud Storage client built from the environment
/// ([`crate::storage::GcsCredentials::FromEnv`]) would have nothing to sign with but
/// a metadata server this machine does not have; `None` when it has a source:
///
/// - credentials named by the environment: `GOOGLE_SERVICE_ACCOUNT`,
///   `GOOGLE_SERVICE_ACCOUNT_PATH`, `GOOGLE_SERVICE_ACCOUNT_KEY`,
///   `GOOGLE_APPLICATION_CREDENTIALS`, `SERVICE_ACCOUNT`, or gcloud's application
///   default credentials file;
/// - an emulator (`STORAGE_EMULATOR_HOST`: requests go unsigned);
/// - a metadata server: named by `GCE_METADATA_HOST` or `GCE_METADATA_ROOT`, on
///   Cloud Run (`K_SERVICE`, `CLOUD_RUN_JOB`), or this machine is a Compute Engine VM
///   (its DMI product name starts with `Google`). `GCE_METADATA_IP` alone does not
///   count: it only replaces the address object_store tries after the host name.
pub fn gcs_env_credentials_missing() -> Option<String> {
    let named = any_var(&[
        "GOOGLE_SERVICE_ACCOUNT",
        "GOOGLE_SERVICE_ACCOUNT_PATH",
        "GOOGLE_SERVICE_ACCOUNT_KEY",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "SERVICE_ACCOUNT",
        "STORAGE_EMULATOR_HOST",
        "GCE_METADATA_HOST",
        "GCE_METADATA_ROOT",
        "K_SERVICE",
        "CLOUD_RUN_JOB",
    ]);
    if named || gcloud_adc_file().is_some() || dmi("product_name").starts_with("Google") {
        return None;
    }
    Some(
        "no Google Cloud credentials in the environment (GOOGLE_APPLICATION_CREDENTIALS, \
         GOOGLE_SERVICE_ACCOUNT_PATH, GOOGLE_SERVICE_ACCOUNT_KEY, gcloud's application \
         default credentials file) and this machine is not a Compute Engine VM with a \
         metadata server; give the container anonymous credentials to read a public \
         bucket, or credentials of its own"
            .into(),
    )
}

/// Why an Azure Blob Storage client built from the environment
/// ([`crate::storage::AzureCredentials::FromEnv`]) would have nothing to sign with
/// but a managed identity endpoint this machine does not have; `None` when it has a
/// source:
///
/// - credentials named by the environment: an account key (`AZURE_STORAGE_ACCOUNT_KEY`,
///   `AZURE_STORAGE_ACCESS_KEY`, `AZURE_STORAGE_MASTER_KEY`), a SAS
///   (`AZURE_STORAGE_SAS_KEY`, `AZURE_STORAGE_SAS_TOKEN`), a bearer token
///   (`AZURE_STORAGE_TOKEN`), a service principal (`AZURE_CLIENT_SECRET`,
///   `AZURE_STORAGE_CLIENT_SECRET`, `AZURE_FEDERATED_TOKEN_FILE`), the Azure CLI
///   (`AZURE_USE_AZURE_CLI`), unsigned requests (`AZURE_SKIP_SIGNATURE`);
/// - the emulator (`AZURE_STORAGE_USE_EMULATOR`);
/// - a managed identity endpoint: named by `AZURE_MSI_ENDPOINT`, `MSI_ENDPOINT`,
///   `IDENTITY_ENDPOINT` or `AZURE_MSI_RESOURCE_ID`, or this machine is an Azure VM
///   (its DMI vendor is `Microsoft Corporation` and product `Virtual Machine`).
pub fn azure_env_credentials_missing() -> Option<String> {
    let named = any_var(&[
        "AZURE_STORAGE_ACCOUNT_KEY",
        "AZURE_STORAGE_ACCESS_KEY",
        "AZURE_STORAGE_MASTER_KEY",
        "AZURE_STORAGE_SAS_KEY",
        "AZURE_STORAGE_SAS_TOKEN",
        "AZURE_STORAGE_TOKEN",
        "AZURE_CLIENT_SECRET",
        "AZURE_STORAGE_CLIENT_SECRET",
        "AZURE_FEDERATED_TOKEN_FILE",
        "AZURE_USE_AZURE_CLI",
        "AZURE_SKIP_SIGNATURE",
        "AZURE_STORAGE_USE_EMULATOR",
        "AZURE_MSI_ENDPOINT",
        "MSI_ENDPOINT",
        "IDENTITY_ENDPOINT",
        "AZURE_MSI_RESOURCE_ID",
    ]);
    let azure_vm =
        dmi("sys_vendor") == "Microsoft Corporation" && dmi("product_name") == "Virtual Machine";
    if named || azure_vm {
        return None;
    }
    Some(
        "no Azure credentials in the environment (AZURE_STORAGE_ACCOUNT_KEY, \
         AZURE_STORAGE_SAS_TOKEN, AZURE_CLIENT_SECRET, AZURE_FEDERATED_TOKEN_FILE, \
         AZURE_USE_AZURE_CLI) and this machine is not an Azure VM with a managed identity \
         endpoint; give the container anonymous credentials to read a public container, \
         or credentials of its own"
            .into(),
    )
}
