//! The reader's credentials for virtual chunk containers (Icechunk 2.3.0's
//! `containers_credentials`: URL prefix to credential).
//!
//! A credential is given with the prefix the reader authorizes; a read uses the
//! credential of the longest authorized prefix covering the location read. A prefix
//! authorized without a credential reads as Icechunk's `None`: S3 containers sign with
//! the reader's S3 options ([`crate::OpenOptions::virtual_s3_credentials`]) or the
//! `AWS_*` variables, unsigned when the container is anonymous; GCS and Azure
//! containers read anonymously (Icechunk 2.3.0 reads GCS so, and refuses Azure).
//!
//! Credentials are only ever sent to an endpoint the reader chose (see
//! [`crate::error::VirtualChunkError::UntrustedEndpoint`]).

use std::fmt;
use std::sync::Arc;

use object_store::aws::AwsCredential;
use object_store::CredentialProvider;

use crate::storage::{AzureCredentials, GcsCredentials};

/// The credential of one authorized prefix.
#[derive(Clone)]
pub enum ContainerCredentials {
    /// S3: keys from the `AWS_*` environment variables of the reading process
    /// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`).
    S3FromEnv,
    /// S3: unsigned requests (public buckets).
    S3Anonymous,
    /// S3: a fixed access key.
    S3Static {
        /// Access key id.
        access_key_id: String,
        /// Secret access key.
        secret_access_key: String,
        /// Session token of temporary keys.
        session_token: Option<String>,
    },
    /// S3: keys from a caller's provider, fetched when missing or expired
    /// ([`crate::storage::cloud::RefreshingCredentials`]).
    S3Refreshable(Arc<dyn CredentialProvider<Credential = AwsCredential>>),
    /// Google Cloud Storage credentials of a `gcs_store` container (Icechunk's
    /// `Credentials.Gcs`): anonymous, a service account (file or key), application
    /// credentials, a bearer token (fixed or refreshed), or the environment's
    /// (`GOOGLE_*`).
    Gcs(GcsCredentials),
    /// Azure credentials of an `azure_store` container (Icechunk's
    /// `Credentials.Azure`): anonymous, an account key, a SAS token, a bearer token
    /// (fixed or refreshed), or the environment's (`AZURE_*`).
    Azure(AzureCredentials),
    /// A `file://` container: no credential needed (Icechunk's
    /// `LocalFileSystemAccess`).
    LocalFileSystemAccess,
    /// An `http(s)://` container: no credential needed (Icechunk's `HttpAccess`).
    HttpAccess,
}

impl ContainerCredentials {
    /// A short name of the variant, for errors (never the secrets).
    pub fn kind(&self) -> &'static str {
        match self {
            ContainerCredentials::S3FromEnv => "S3 credentials from the environment",
            ContainerCredentials::S3Anonymous => "anonymous S3 credentials",
            ContainerCredentials::S3Static { .. } => "static S3 credentials",
            ContainerCredentials::S3Refreshable(_) => "refreshable S3 credentials",
            ContainerCredentials::Gcs(_) => "GCS credentials",
            ContainerCredentials::Azure(_) => "Azure credentials",
            ContainerCredentials::LocalFileSystemAccess => "local file system access",
            ContainerCredentials::HttpAccess => "HTTP access",
        }
    }

    /// Whether these are S3 credentials.
    pub fn is_s3(&self) -> bool {
        matches!(
            self,
            ContainerCredentials::S3FromEnv
                | ContainerCredentials::S3Anonymous
                | ContainerCredentials::S3Static { .. }
                | ContainerCredentials::S3Refreshable(_)
        )
    }
}

impl fmt::Debug for ContainerCredentials {
    /// The variant only: secrets are never printed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind())
    }
}
