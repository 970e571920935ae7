//! The cryptography of floe's HTTP clients (the S3, GCS, Azure and HTTP object stores
//! and the virtual-chunk client): rustls with the *ring* provider.
//!
//! `reqwest` is built without a bundled provider (`rustls-no-provider`) and
//! `object_store` signs with *ring*, so one provider serves TLS and request signing.
//! [`install_crypto_provider`] makes *ring* rustls' process-wide default before the
//! first client is built; an application that installed a provider of its own first
//! keeps it.

use std::sync::Once;

/// Installs rustls' *ring* provider as the process default, once per process, unless
/// a default provider is already installed (rustls then keeps the first one).
///
/// Called by every constructor of an HTTP client in floe; cheap after the first call.
pub(crate) fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // An `Err` means another provider was installed first: that one is used.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

#[cfg(test)]
mod tests {
    use super::install_crypto_provider;

    #[test]
    fn https_clients_build_once_the_provider_is_installed() {
        install_crypto_provider();
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
        reqwest::Client::builder()
            .https_only(true)
            .build()
            .expect("an HTTPS client builds with the ring provider");
    }
}
