//! Masking throughput on 1 MiB documents.
//!
//! `cargo run --release --example bench_masking -p tarsy-masking`
//!
//! Prints MB/s for: a mixed document (logs, env dumps, PEM material, YAML and
//! JSON manifests glued together, so the structural masker falls back to its
//! line scanner), a valid YAML `List` of Secrets and ConfigMaps (the parsing
//! path), and plain logs (regex patterns only). `-- --per-pattern` adds one
//! line per pattern on the mixed document.

use std::time::{Duration, Instant};

use tarsy_masking::{AlertMaskingConfig, MaskingConfig, MaskingService};

const MIB: usize = 1024 * 1024;

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn fill(parts: &[String]) -> String {
    let mut doc = String::with_capacity(MIB + 64 * 1024);
    while doc.len() < MIB {
        for p in parts {
            doc.push_str(p);
            doc.push('\n');
        }
    }
    doc
}

fn secret_list() -> String {
    let mut doc = String::from("apiVersion: v1\nitems:\n");
    let mut i = 0;
    while doc.len() < MIB {
        doc.push_str(&format!(
            "- apiVersion: v1\n  data:\n    password: c2VjcmV0LXtpfS12YWx1ZQ==\n    username: YWRtaW4=\n  kind: Secret\n  metadata:\n    name: app-{i}\n    namespace: team-{i}\n  type: Opaque\n\
             - apiVersion: v1\n  data:\n    LOG_LEVEL: info\n    ENDPOINT: https://svc-{i}.example.com\n  kind: ConfigMap\n  metadata:\n    name: cfg-{i}\n    namespace: team-{i}\n"
        ));
        i += 1;
    }
    doc.push_str("kind: List\nmetadata:\n  resourceVersion: \"\"\n");
    doc
}

fn bench(label: &str, svc: &MaskingService, doc: &str) {
    // Warm up once, then run for at least a second.
    let first = svc.mask_tool_result("bench", doc);
    assert!(
        !first.starts_with("[MASKED_TOOL_RESULT"),
        "{label}: masking failed"
    );
    let start = Instant::now();
    let mut runs = 0u32;
    while start.elapsed() < Duration::from_secs(1) || runs < 3 {
        std::hint::black_box(svc.mask_tool_result("bench", std::hint::black_box(doc)));
        runs += 1;
    }
    let per_run = start.elapsed() / runs;
    let mb_s = doc.len() as f64 / 1e6 / per_run.as_secs_f64();
    println!(
        "{label:<44} {:>7.2} MiB  {:>9.2?}/run  {mb_s:>8.1} MB/s",
        doc.len() as f64 / MIB as f64,
        per_run
    );
}

fn service(groups: &[&str]) -> MaskingService {
    let cfg = MaskingConfig {
        pattern_groups: groups.iter().map(|g| g.to_string()).collect(),
        ..MaskingConfig::default()
    };
    match MaskingService::new([("bench".to_string(), cfg)], AlertMaskingConfig::default()) {
        Ok(svc) => svc,
        Err(e) => panic!("{e}"),
    }
}

fn main() {
    let mixed = fill(&[
        fixture("access_logs.log"),
        fixture("env_dump.txt"),
        fixture("pem_material.txt"),
        fixture("mixed_list.yaml"),
        fixture("secret_get.json"),
        fixture("describe_pod.txt"),
        fixture("app_logs_emails.log"),
        fixture("kubectl_tables.txt"),
    ]);
    let logs = fill(&[fixture("access_logs.log"), fixture("app_logs_emails.log")]);
    let list = secret_list();

    for group in ["kubernetes", "security", "all"] {
        let svc = service(&[group]);
        bench(&format!("mixed document, group {group}"), &svc, &mixed);
    }
    bench(
        "YAML List of Secrets+ConfigMaps, kubernetes",
        &service(&["kubernetes"]),
        &list,
    );
    bench("plain logs, group security", &service(&["security"]), &logs);

    if std::env::args().any(|a| a == "--per-pattern") {
        for name in tarsy_masking::builtin::CODE_MASKERS
            .iter()
            .copied()
            .chain(tarsy_masking::builtin::PATTERNS.iter().map(|p| p.name))
        {
            let cfg = MaskingConfig {
                patterns: vec![name.to_string()],
                ..MaskingConfig::default()
            };
            let svc =
                MaskingService::new([("bench".to_string(), cfg)], AlertMaskingConfig::default())
                    .unwrap_or_else(|e| panic!("{e}"));
            bench(&format!("mixed document, only {name}"), &svc, &mixed);
        }
    }
}
