//! MCPServer / LLMProvider resources → runtime configuration, per placement,
//! with secrets from a caller-supplied resolver.

use std::collections::BTreeMap;
use std::time::Duration;

use tarsy_config::model::{MCPServerSpec, SecretKeyRef, SummarizationSpec};
use tarsy_config::{
    Config, Defaults, EnvSecretResolver, MapSecretResolver, Named, Origin, Placement, ResolveError,
    SecretError, SecretResolver, summarization_config,
};
use tarsy_core::{McpTransport, ProviderType, SummarizationConfig};

fn server(json: serde_json::Value) -> MCPServerSpec {
    serde_json::from_value(json).unwrap()
}

fn config_with(servers: &[(&str, serde_json::Value)]) -> Config {
    let mut c = Config::builtin(Defaults::default());
    for (name, json) in servers {
        c.insert_mcp_server(Named::new(*name, server(json.clone()), Origin::Cluster));
    }
    c
}

fn pod(ports: &[(&str, u16)]) -> Placement {
    Placement::Pod {
        bridge_ports: ports.iter().map(|(n, p)| (n.to_string(), *p)).collect(),
    }
}

#[test]
fn builtin_kubernetes_server_is_read_only_stdio() {
    let c = Config::builtin(Defaults::default());
    let m = c
        .mcp_server_config(
            "kubernetes-server",
            &MapSecretResolver::default(),
            &Placement::Local,
        )
        .unwrap();
    match &m.transport {
        McpTransport::Stdio {
            command, args, env, ..
        } => {
            assert_eq!(command, "npx");
            assert!(
                args.iter()
                    .any(|a| a.starts_with("kubernetes-mcp-server@0.")),
                "{args:?}"
            );
            assert!(args.contains(&"--read-only".to_string()));
            assert!(args.contains(&"--disable-destructive".to_string()));
            assert!(env.is_empty());
        }
        other => panic!("{other:?}"),
    }
    assert!(m.summarization.enabled);
    assert!(!m.instructions.is_empty());
    let masking = c.masking_config("kubernetes-server").unwrap();
    assert_eq!(masking.pattern_groups, ["kubernetes", "security"]);
    // In a pod the same server is reached through its bridge sidecar.
    let m = c
        .mcp_server_config(
            "kubernetes-server",
            &MapSecretResolver::default(),
            &pod(&[("kubernetes-server", 9101)]),
        )
        .unwrap();
    assert!(
        matches!(m.transport, McpTransport::Http(ref h) if h.url == "http://127.0.0.1:9101/mcp")
    );
    let err = c
        .mcp_server_config(
            "kubernetes-server",
            &MapSecretResolver::default(),
            &pod(&[]),
        )
        .unwrap_err();
    assert!(err.to_string().contains("no mcp-bridge port"), "{err}");
}

#[test]
fn url_servers_get_bearer_tokens_from_the_resolver() {
    let c = config_with(&[
        (
            "prom",
            serde_json::json!({
                "url": "https://prom.example/mcp",
                "bearerTokenSecretRef": {"name": "prom-mcp", "key": "token"},
                "headers": {"X-Team": "sre"},
                "timeout": "45s",
                "tls": {"insecureSkipVerify": true, "caSecretRef": {"name": "ca", "key": "ca.crt"}}
            }),
        ),
        (
            "legacy",
            serde_json::json!({"url": "http://legacy:8000/sse", "transport": "sse", "bearerTokenEnv": "LEGACY_TOKEN"}),
        ),
    ]);
    let secrets = MapSecretResolver::default()
        .with_secret("prom-mcp", "token", "s3cr3t")
        .with_env("LEGACY_TOKEN", "l3gacy");
    let m = c.mcp_server_config("prom", &secrets, &pod(&[])).unwrap();
    let McpTransport::Http(h) = &m.transport else {
        panic!("{:?}", m.transport)
    };
    assert_eq!(h.url, "https://prom.example/mcp");
    assert_eq!(h.bearer_token.as_ref().unwrap().expose(), "s3cr3t");
    assert!(!format!("{m:?}").contains("s3cr3t"), "secrets never print");
    assert_eq!(
        h.headers,
        BTreeMap::from([("X-Team".to_string(), "sre".to_string())])
    );
    assert_eq!(h.timeout, Some(Duration::from_secs(45)));
    assert!(h.tls.insecure_skip_verify);
    assert_eq!(
        h.tls.ca_file.as_deref(),
        Some("/var/run/tarsy/mcp-ca/prom/ca.crt")
    );
    assert!(!m.summarization.enabled, "no summarization block → off");

    let m = c
        .mcp_server_config("legacy", &secrets, &Placement::Local)
        .unwrap();
    let McpTransport::Sse(h) = &m.transport else {
        panic!("{:?}", m.transport)
    };
    assert_eq!(h.bearer_token.as_ref().unwrap().expose(), "l3gacy");

    // Missing secrets name the server and the field.
    let err = c
        .mcp_server_config("prom", &MapSecretResolver::default(), &pod(&[]))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "MCP server \"prom\": spec.bearerTokenSecretRef: secret \"prom-mcp\" has no key \"token\""
    );
    let err = c
        .mcp_server_config("legacy", &MapSecretResolver::default(), &Placement::Local)
        .unwrap_err();
    assert!(matches!(
        err,
        ResolveError::Secret { source: SecretError::EnvUnset(ref v), .. } if v == "LEGACY_TOKEN"
    ));
    // A CA Secret cannot be mounted in local mode.
    let err = c
        .mcp_server_config("prom", &secrets, &Placement::Local)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("tls.caSecretRef needs cluster mode"),
        "{err}"
    );
}

#[test]
fn container_servers_are_localhost_sidecars_in_pods_only() {
    let c = config_with(&[
        (
            "k8s",
            serde_json::json!({"container": {"image": "ghcr.io/x/k8s-mcp:1", "port": 8080}, "instructions": "hi",
                           "summarization": {"sizeThresholdTokens": 2000}}),
        ),
        (
            "custom-path",
            serde_json::json!({"container": {"image": "x", "port": 9000, "path": "/v1/mcp"}}),
        ),
    ]);
    let none = MapSecretResolver::default();
    let m = c.mcp_server_config("k8s", &none, &pod(&[])).unwrap();
    assert!(
        matches!(m.transport, McpTransport::Http(ref h) if h.url == "http://127.0.0.1:8080/mcp" && h.bearer_token.is_none())
    );
    assert_eq!(m.instructions, "hi");
    assert_eq!(
        m.summarization,
        SummarizationConfig {
            enabled: true,
            size_threshold_tokens: 2000,
            summary_max_token_limit: 1000
        }
    );
    let m = c
        .mcp_server_config("custom-path", &none, &pod(&[]))
        .unwrap();
    assert!(
        matches!(m.transport, McpTransport::Http(ref h) if h.url == "http://127.0.0.1:9000/v1/mcp")
    );
    let err = c
        .mcp_server_config("k8s", &none, &Placement::Local)
        .unwrap_err();
    assert!(err.to_string().contains("runs only as a sidecar"), "{err}");
    assert!(matches!(
        c.mcp_server_config("ghost", &none, &Placement::Local),
        Err(ResolveError::McpServerNotFound(n)) if n == "ghost"
    ));
}

#[test]
fn stdio_env_secrets_are_resolved_locally() {
    let c = config_with(&[(
        "github",
        serde_json::json!({"stdio": {"command": "npx", "args": ["-y", "gh-mcp"],
            "env": [{"name": "LOG", "value": "debug"},
                    {"name": "GITHUB_TOKEN", "valueFrom": {"secretKeyRef": {"name": "gh", "key": "token"}}}]}}),
    )]);
    let secrets = MapSecretResolver::default().with_secret("gh", "token", "ghp_x");
    let m = c
        .mcp_server_config("github", &secrets, &Placement::Local)
        .unwrap();
    let McpTransport::Stdio {
        command, args, env, ..
    } = &m.transport
    else {
        panic!("{:?}", m.transport)
    };
    assert_eq!(command, "npx");
    assert_eq!(args, &["-y", "gh-mcp"]);
    assert_eq!(
        env,
        &BTreeMap::from([
            ("GITHUB_TOKEN".to_string(), "ghp_x".to_string()),
            ("LOG".to_string(), "debug".to_string())
        ])
    );
    let err = c
        .mcp_server_config("github", &MapSecretResolver::default(), &Placement::Local)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "MCP server \"github\": spec.stdio.env[1].valueFrom.secretKeyRef: secret \"gh\" has no key \"token\""
    );
}

#[test]
fn env_secret_resolver_maps_keys_to_variables() {
    assert_eq!(tarsy_config::convert::env_name_for_key("token"), "TOKEN");
    assert_eq!(
        tarsy_config::convert::env_name_for_key("api-key.v2"),
        "API_KEY_V2"
    );
    let err = EnvSecretResolver
        .secret(&SecretKeyRef {
            name: "x".into(),
            key: "tarsy-test-surely-unset-variable".into(),
        })
        .unwrap_err();
    assert_eq!(
        err,
        SecretError::EnvUnset("TARSY_TEST_SURELY_UNSET_VARIABLE".into())
    );
}

#[test]
fn summarization_defaults() {
    assert!(!summarization_config(None).enabled);
    let s = summarization_config(Some(&SummarizationSpec {
        enabled: None,
        size_threshold_tokens: None,
        summary_max_token_limit: Some(500),
    }));
    assert_eq!(
        s,
        SummarizationConfig {
            enabled: true,
            size_threshold_tokens: 5000,
            summary_max_token_limit: 500
        }
    );
}

#[test]
fn llm_provider_fields_map_to_the_runtime_config() {
    let mut c = Config::builtin(Defaults::default());
    let spec = serde_json::from_value(serde_json::json!({
        "type": "vertexai", "model": "gemini-2.5-pro", "credentialsEnv": "GOOGLE_APPLICATION_CREDENTIALS",
        "project": "p", "location": "us-central1", "maxToolResultTokens": 1000, "contextWindowTokens": 100000,
        "nativeTools": {"google_search": true}, "fallback": ["openai-default"]
    }))
    .unwrap();
    c.insert_llm_provider(Named::new("vertex", spec, Origin::Cluster));
    let p = c.llm_provider_config("vertex").unwrap();
    assert_eq!(p.provider_type, ProviderType::Vertexai);
    assert_eq!(
        p.credentials_env.as_deref(),
        Some("GOOGLE_APPLICATION_CREDENTIALS")
    );
    assert_eq!(
        (p.project.as_deref(), p.location.as_deref()),
        (Some("p"), Some("us-central1"))
    );
    assert_eq!(p.max_tool_result_tokens, Some(1000));
    assert_eq!(p.context_window_tokens, Some(100_000));
    assert_eq!(
        p.native_tools,
        BTreeMap::from([("google_search".to_string(), true)])
    );
    assert_eq!(p.fallback.len(), 1);
    assert_eq!(p.fallback[0].name, "openai-default");
    assert_eq!(p.fallback[0].api_key_env.as_deref(), Some("OPENAI_API_KEY"));

    // apiKeySecretRef: the LLM service reads the key from a variable named like the key.
    let spec = serde_json::from_value(serde_json::json!({
        "type": "anthropic", "model": "claude", "apiKeySecretRef": {"name": "keys", "key": "ANTHROPIC_KEY"}
    }))
    .unwrap();
    c.insert_llm_provider(Named::new("claude", spec, Origin::Cluster));
    assert_eq!(
        c.llm_provider_config("claude")
            .unwrap()
            .api_key_env
            .as_deref(),
        Some("ANTHROPIC_KEY")
    );
    assert!(matches!(
        c.llm_provider_config("nope"),
        Err(ResolveError::ProviderNotFound(n)) if n == "nope"
    ));
}

/// Masking is on by default: a user MCP server with no `dataMasking` (or
/// only `enabled: true`) masks cloud and forge credentials, passwords, keys
/// and tokens; only an explicit `enabled: false` opts out, and it is listed.
#[test]
fn every_mcp_server_is_masked_unless_it_opts_out() {
    let yaml = r#"
apiVersion: tarsy.dev/v1alpha1
kind: MCPServer
metadata: {name: plain}
spec: {url: "http://127.0.0.1:1/mcp"}
---
apiVersion: tarsy.dev/v1alpha1
kind: MCPServer
metadata: {name: enabled-only}
spec: {url: "http://127.0.0.1:2/mcp", dataMasking: {enabled: true}}
---
apiVersion: tarsy.dev/v1alpha1
kind: MCPServer
metadata: {name: opted-out}
spec: {url: "http://127.0.0.1:3/mcp", dataMasking: {enabled: false}}
"#;
    let objects = tarsy_config::parse_config("t.yaml", yaml, &|_| None).unwrap();
    let c = tarsy_config::build_config(objects, &tarsy_config::DefaultsSpec::default()).unwrap();
    assert_eq!(c.unmasked_mcp_servers(), ["opted-out"]);
    let service =
        tarsy_masking::MaskingService::new(c.masking_configs(), Default::default()).unwrap();
    // (text, the secret in it); values are split so that secret scanners do
    // not flag this file.
    let pem_body = "MIIEow".repeat(8);
    let planted: Vec<(String, String)> = vec![
        (
            format!("key {}", "AKIA".to_owned() + "IOSFODNN7EXAMPLE"),
            "AKIA".to_owned() + "IOSFODNN7EXAMPLE",
        ),
        (
            format!(
                "aws_secret_access_key = {}",
                "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
            ),
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
        ),
        (
            format!("token ghp_{}", "a".repeat(36)),
            format!("ghp_{}", "a".repeat(36)),
        ),
        (
            format!("glpat-{}", "b1c2d3e4f5g6h7i8j9k0"),
            "b1c2d3e4f5g6h7i8j9k0".into(),
        ),
        (
            format!("xoxb-{}", "123456789012-abcdefghijkl"),
            "123456789012-abcdefghijkl".into(),
        ),
        ("password: hunter2-prod".into(), "hunter2-prod".into()),
        (
            format!("-----BEGIN RSA PRIVATE KEY-----\n{pem_body}\n-----END RSA PRIVATE KEY-----"),
            pem_body.clone(),
        ),
        (
            format!(
                "eyJhbGciOiJIUzI1NiJ9.{}.{}",
                "eyJzdWIiOiIxMjM0NTY3ODkwIn0", "dozjgNryP4J3jVmNHl0w5N"
            ),
            "eyJzdWIiOiIxMjM0NTY3ODkwIn0".into(),
        ),
        (
            format!(
                "DefaultEndpointsProtocol=https;AccountName=x;AccountKey={};",
                "abcdEFGH1234ijklMNOP5678qrst=="
            ),
            "abcdEFGH1234ijklMNOP5678qrst==".into(),
        ),
        (
            format!(
                "\"private_key_id\": \"{}\"",
                "0123456789abcdef0123456789abcdef01234567"
            ),
            "0123456789abcdef0123456789abcdef01234567".into(),
        ),
        (
            "postgres://app:s3cr3t-pass@db:5432/app".into(),
            "s3cr3t-pass".into(),
        ),
        (
            "api_key=sk-live-0123456789abcdefghij".into(),
            "0123456789abcdefghij".into(),
        ),
        ("client_secret: 9f8e7d6c5b4a".into(), "9f8e7d6c5b4a".into()),
    ];
    let keep = [
        "connection refused",
        "secret: connection refused",
        "replicas: 3",
        "LOG_LEVEL=debug",
        "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ\n-----END CERTIFICATE-----",
    ];
    for server in ["plain", "enabled-only"] {
        for (text, secret) in &planted {
            let out = service.mask_tool_result(server, text);
            assert!(
                out.contains("[MASKED_") && !out.contains(secret.as_str()),
                "{server} leaks {secret:?}: {out}"
            );
        }
        for text in keep {
            assert_eq!(
                service.mask_tool_result(server, text),
                text,
                "{server} over-masks {text:?}"
            );
        }
    }
    let out = service.mask_tool_result("opted-out", &planted[0].0);
    assert_eq!(out, planted[0].0, "an explicit opt-out is honoured");
}
