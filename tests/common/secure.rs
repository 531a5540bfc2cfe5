//! A real Prometheus behind its own TLS and basic auth (`--web.config.file`), with certificates made
//! in the test.
//!
//! Testing auth against a mock would only test the mock. Prometheus' web config is what operators
//! actually put in front of their metrics, so the handshake, the certificate checks and the 401 are
//! the real ones. Certificates come from a CA generated per test ([`Pki`]); a second, unrelated CA
//! stands in for "the wrong CA".

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
};
use tempfile::TempDir;
use vllm_diag::scenario::{generate_openmetrics, ScenarioSpec};

use super::{backfill, free_port, new_tempdir, read_log, require_tools, scenario_path, PromServer, CONFIG};

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
        let dir = tempfile::Builder::new()
            .prefix("vllm-diag-pki-")
            .tempdir()
            .unwrap_or_else(|e| panic!("tempdir: {e}"));
        let (ca_cert, ca_key) = make_ca("vllm-diag test CA");
        let (other, _) = make_ca("some other CA");

        let server_key = KeyPair::generate().unwrap_or_else(|e| panic!("key: {e}"));
        let mut sp = CertificateParams::new(vec!["localhost".to_string()]).unwrap_or_else(|e| panic!("params: {e}"));
        sp.subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        sp.distinguished_name.push(DnType::CommonName, "prometheus test server");
        sp.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server = sp
            .signed_by(&server_key, &ca_cert, &ca_key)
            .unwrap_or_else(|e| panic!("sign: {e}"));

        let client_key = KeyPair::generate().unwrap_or_else(|e| panic!("key: {e}"));
        let mut cp = CertificateParams::new(Vec::<String>::new()).unwrap_or_else(|e| panic!("params: {e}"));
        cp.distinguished_name.push(DnType::CommonName, "vllm-diag test client");
        cp.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client = cp
            .signed_by(&client_key, &ca_cert, &ca_key)
            .unwrap_or_else(|e| panic!("sign: {e}"));

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
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
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
            y.push_str(&format!(
                "  cert_file: {}\n  key_file: {}\n",
                pki.server_cert.display(),
                pki.server_key.display()
            ));
            if self.require_client_cert {
                y.push_str(&format!(
                    "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {}\n",
                    pki.ca.display()
                ));
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
    require_tools();
    let spec = ScenarioSpec::load(scenario_path(name)).unwrap_or_else(|e| panic!("scenario {name}: {e}"));
    let dir = new_tempdir();
    let om = dir.path().join(format!("{name}.om"));
    {
        let file = std::fs::File::create(&om).unwrap_or_else(|e| panic!("create {}: {e}", om.display()));
        let mut out = std::io::BufWriter::new(file);
        generate_openmetrics(&spec, &mut out)
            .and_then(|()| std::io::Write::flush(&mut out))
            .unwrap_or_else(|e| panic!("write {}: {e}", om.display()));
    }
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap_or_else(|e| panic!("mkdir: {e}"));
    backfill(&om, &data);
    let _ = std::fs::remove_file(&om);
    let config = dir.path().join("prometheus.yml");
    std::fs::write(&config, CONFIG).unwrap_or_else(|e| panic!("write config: {e}"));
    let web_file = dir.path().join("web.yml");
    std::fs::write(&web_file, web.yaml()).unwrap_or_else(|e| panic!("write web config: {e}"));

    let scheme = if web.pki.is_some() { "https" } else { "http" };
    let mut last = String::new();
    for attempt in 1..=5 {
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let log = dir.path().join(format!("prometheus-secure-{attempt}.log"));
        let log_file = std::fs::File::create(&log).unwrap_or_else(|e| panic!("create log: {e}"));
        let log_err = log_file.try_clone().unwrap_or_else(|e| panic!("clone log: {e}"));
        let mut child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", data.display()))
            .arg("--storage.tsdb.retention.time=100y")
            .arg(format!("--web.listen-address={addr}"))
            .arg(format!("--web.config.file={}", web_file.display()))
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(log_err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start prometheus: {e}"));
        // /-/ready sits behind the same TLS and auth, so readiness is read from the log instead.
        let started = Instant::now();
        loop {
            let text = read_log(&log);
            if text.contains("Server is ready to receive web requests") {
                return (
                    spec,
                    PromServer {
                        url: format!("{scheme}://{addr}"),
                        addr,
                        child,
                        log,
                        dir,
                    },
                );
            }
            if let Ok(Some(status)) = child.try_wait() {
                if text.contains("address already in use") {
                    last = text;
                    break;
                }
                panic!("prometheus with --web.config.file exited ({status}):\n{text}");
            }
            if started.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("prometheus with --web.config.file was not ready after 30s:\n{text}");
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }
    panic!("prometheus could not bind a port:\n{last}");
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
