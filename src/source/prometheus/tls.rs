//! TLS: the CA file, the client certificate and the verification switch on the client builder, and a
//! certificate or handshake failure put in words with the flag that fixes it.

use std::path::PathBuf;

use super::transport::{innermost, io_text};
use super::SourceError;

/// How TLS connections are checked. The defaults trust the built-in web roots only.
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    /// PEM file of CA certificates to trust in addition to the built-in roots (`--ca-file`).
    pub ca_file: Option<PathBuf>,
    /// PEM client certificate and its private key, for servers that require mutual TLS
    /// (`--cert-file`, `--key-file`).
    pub client_cert: Option<(PathBuf, PathBuf)>,
    /// Accept any certificate (`--insecure-skip-verify`). Only for tests: the caller warns loudly.
    pub insecure_skip_verify: bool,
}

/// Add the CA file, the client certificate and the verification switch to the client builder. Errors
/// name the flag and the file; a key's content never appears in them.
pub(crate) fn configure_tls(mut builder: reqwest::ClientBuilder, tls: &TlsOptions) -> Result<reqwest::ClientBuilder, SourceError> {
    let read = |flag: &str, path: &PathBuf| -> Result<Vec<u8>, SourceError> {
        std::fs::read(path).map_err(|e| SourceError::Other { detail: format!("{flag} {}: cannot read it: {}", path.display(), io_text(&e)) })
    };
    if let Some(path) = &tls.ca_file {
        let pem = read("--ca-file", path)?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem).unwrap_or_default();
        if certs.is_empty() {
            return Err(SourceError::Other {
                detail: format!("--ca-file {}: holds no PEM certificate (expected -----BEGIN CERTIFICATE----- blocks)", path.display()),
            });
        }
        for cert in certs {
            builder = builder.add_root_certificate(cert);
        }
    }
    if let Some((cert_path, key_path)) = &tls.client_cert {
        let mut pem = read("--cert-file", cert_path)?;
        let key = read("--key-file", key_path)?;
        if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
            return Err(SourceError::Other { detail: format!("--cert-file {}: holds no PEM certificate", cert_path.display()) });
        }
        if !String::from_utf8_lossy(&key).contains("PRIVATE KEY-----") {
            return Err(SourceError::Other {
                detail: format!("--key-file {}: holds no PEM private key (expected a -----BEGIN PRIVATE KEY----- block)", key_path.display()),
            });
        }
        pem.push(b'\n');
        pem.extend_from_slice(&key);
        let identity = reqwest::Identity::from_pem(&pem).map_err(|_| SourceError::Other {
            detail: format!(
                "--cert-file {} and --key-file {}: cannot be used together as a client certificate; give a PEM \
                 certificate and its PEM (PKCS#8, PKCS#1 or SEC1) private key",
                cert_path.display(),
                key_path.display()
            ),
        })?;
        builder = builder.identity(identity);
    }
    if tls.insecure_skip_verify {
        builder = builder.danger_accept_invalid_certs(true);
    }
    Ok(builder)
}

/// A certificate or handshake failure in words, with the flag that fixes it.
pub(super) fn tls_advice(text: &str, host: &str, client_cert: bool) -> String {
    let t = text.to_ascii_lowercase();
    let cause = innermost(text);
    let advice = if t.contains("unknownissuer") || t.contains("unknown issuer") || t.contains("unknownca") {
        "the server's certificate is not signed by a CA this machine trusts. If it uses a private CA, pass \
         that CA's certificate with --ca-file FILE"
            .to_string()
    } else if t.contains("notvalidforname") || t.contains("not valid for name") {
        format!(
            "the server's certificate is not valid for the name {host}; use a host name the certificate \
             lists, or have the certificate reissued"
        )
    } else if t.contains("expired") || t.contains("notvalidyet") {
        "the server's certificate has expired or is not valid yet; check the server's certificate and this \
         machine's clock"
            .to_string()
    } else if t.contains("certificaterequired") || t.contains("certificate required") {
        "the server requires a client certificate: pass --cert-file FILE and --key-file FILE".to_string()
    } else if (t.contains("badcertificate") || t.contains("bad certificate")) && !client_cert {
        "the server refused the connection for want of a certificate: it probably requires a client \
         certificate; pass --cert-file FILE and --key-file FILE"
            .to_string()
    } else if t.contains("badcertificate") || t.contains("bad certificate") {
        "the server rejected the client certificate (--cert-file/--key-file): check that the CA the server \
         trusts for clients signed it"
            .to_string()
    } else if t.contains("corrupt message") || t.contains("invalidcontenttype") || t.contains("wrong version") {
        "the server does not speak TLS on this port: write the URL with http:// (or use the server's HTTPS \
         port)"
            .to_string()
    } else if !client_cert {
        "check the server's certificate (--ca-file FILE adds a CA to trust); if the server requires a client \
         certificate (mutual TLS), pass --cert-file FILE and --key-file FILE"
            .to_string()
    } else {
        "check the server's certificate (--ca-file FILE adds a CA to trust) and the client certificate".to_string()
    };
    format!("TLS handshake failed: {advice} ({cause})")
}

pub(super) fn looks_like_tls(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    ["certificate", "tls", "handshake", "ssl", "alert", "corrupt message", "invalidcontenttype"].iter().any(|w| t.contains(w))
}
