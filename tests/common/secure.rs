//! A real Prometheus behind its own TLS and basic auth (`--web.config.file`), with certificates made
//! in the test.
//!
//! Testing auth against a mock would only test the mock. Prometheus' web config is what operators
//! actually put in front of their metrics, so the handshake, the certificate checks and the 401 are
//! the real ones. Certificates come from a CA generated per test ([`Pki`]); a second, unrelated CA
//! stands in for "the wrong CA".

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::Command;

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType};
use tempfile::TempDir;
use vllm_diag_sim::ScenarioSpec;

use super::{load_scenario, temp_dir, PromServer, WebServing};

/// A CA, a server certificate for 127.0.0.1 and localhost, a client certificate, and an unrelated CA.
pub struct Pki {
    dir: TempDir,
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// A CA that signed nothing here.
    pub other_ca: PathBuf,
}

impl Pki {
    pub fn generate() -> Pki {
        let dir = temp_dir("vllm-diag-pki-");
        let (ca_cert, ca_key) = make_ca("vllm-diag test CA");
        let (other, _) = make_ca("some other CA");

        let server_key = KeyPair::generate().unwrap_or_else(|e| panic!("key: {e}"));
        let mut sp = CertificateParams::new(vec!["localhost".to_string()]).unwrap_or_else(|e| panic!("params: {e}"));
        sp.subject_alt_names.push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        sp.distinguished_name.push(DnType::CommonName, "prometheus test server");
        sp.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server = sp.signed_by(&server_key, &ca_cert, &ca_key).unwrap_or_else(|e| panic!("sign: {e}"));

        let client_key = KeyPair::generate().unwrap_or_else(|e| panic!("key: {e}"));
        let mut cp = CertificateParams::new(Vec::<String>::new()).unwrap_or_else(|e| panic!("params: {e}"));
        cp.distinguished_name.push(DnType::CommonName, "vllm-diag test client");
        cp.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client = cp.signed_by(&client_key, &ca_cert, &ca_key).unwrap_or_else(|e| panic!("sign: {e}"));

        let write = |name: &str, text: String| -> PathBuf {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
            p
        };
        Pki {
            ca: write("ca.pem", ca_cert.pem()),
            server_cert: write("server.pem", server.pem()),
            server_key: write("server-key.pem", server_key.serialize_pem()),
            client_cert: write("client.pem", client.pem()),
            client_key: write("client-key.pem", client_key.serialize_pem()),
            other_ca: write("other-ca.pem", other.pem()),
            dir,
        }
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

fn make_ca(name: &str) -> (rcgen::Certificate, KeyPair) {
    let key = KeyPair::generate().unwrap_or_else(|e| panic!("key: {e}"));
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap_or_else(|e| panic!("params: {e}"));
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let cert = p.self_signed(&key).unwrap_or_else(|e| panic!("self-sign: {e}"));
    (cert, key)
}

/// What Prometheus' `--web.config.file` should demand.
pub struct WebConfig<'a> {
    pub pki: Option<&'a Pki>,
    /// Require a client certificate signed by the PKI's CA.
    pub require_client_cert: bool,
    /// (user, password); the password is stored as a bcrypt hash, as Prometheus wants it.
    pub basic_auth: Option<(&'a str, &'a str)>,
}

impl WebConfig<'_> {
    fn yaml(&self) -> String {
        let mut y = String::new();
        if let Some(pki) = self.pki {
            y.push_str("tls_server_config:\n");
            y.push_str(&format!("  cert_file: {}\n  key_file: {}\n", pki.server_cert.display(), pki.server_key.display()));
            if self.require_client_cert {
                y.push_str(&format!("  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {}\n", pki.ca.display()));
            }
        }
        if let Some((user, pass)) = self.basic_auth {
            let hash = bcrypt::hash(pass, 4).unwrap_or_else(|e| panic!("bcrypt: {e}"));
            y.push_str(&format!("basic_auth_users:\n  {user}: '{hash}'\n"));
        }
        y
    }
}

/// A scenario's data in a Prometheus that serves it only as `web` demands. `PromServer::url` is the
/// https:// (or http://) base; its plain-HTTP helpers (`get`, `query`) do not work on it.
pub fn start_scenario_secured(name: &str, web: &WebConfig) -> (ScenarioSpec, PromServer) {
    let spec = load_scenario(name);
    let dir = temp_dir("vllm-diag-prom-");
    let web_file = dir.path().join("web.yml");
    std::fs::write(&web_file, web.yaml()).unwrap_or_else(|e| panic!("write web config: {e}"));
    let serving = WebServing { config: &web_file, scheme: if web.pki.is_some() { "https" } else { "http" } };
    let server = PromServer::start_generated_in(dir, &spec, Some(serving));
    (spec, server)
}

/// A scenario's data in a Prometheus behind TLS, with a certificate from a fresh [`Pki`], and basic
/// auth for `user` with `password`. The PKI is returned with it: it holds the CA to trust and must
/// outlive the server, which reads its certificate from there.
pub fn start_scenario_tls_basic_auth(name: &str, user: &str, password: &str) -> (Pki, ScenarioSpec, PromServer) {
    let pki = Pki::generate();
    let web = WebConfig { pki: Some(&pki), require_client_cert: false, basic_auth: Some((user, password)) };
    let (spec, prom) = start_scenario_secured(name, &web);
    (pki, spec, prom)
}

impl PromServer {
    /// The server's process id (to kill it mid-run, as a crash would).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// SIGKILL a process this test started.
pub fn kill_pid(pid: u32) {
    let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
}
