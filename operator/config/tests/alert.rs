//! The rule set of a valid alert (`Config::check_alert`), rule by rule:
//! what passes, what is refused and the message the submitter reads.

use std::collections::BTreeMap;

use serde_json::json;
use tarsy_config::{Config, Defaults, Named, Origin, check_runbook_url};
use tarsy_core::control::NewAlert;
use tarsy_core::{
    InvalidAlert, MAX_ALERT_DATA_BYTES, McpSelection, NoToolCatalog, SelectionError, ToolCatalog,
};

/// Chains `pods` (PodCrashLooping), `nodes-a` and `nodes-b` (both
/// NodeNotReady); MCP server `prometheus`, which lists `query` and
/// `query_range`, besides the built-in `kubernetes-server`.
fn world() -> Config {
    let mut config = Config::for_cluster(Defaults::default());
    let chain = |name: &str, types: &[&str]| {
        let spec = serde_json::from_value(json!({
            "alertTypes": types, "stages": [{"name": "investigate", "agent": "KubernetesAgent"}],
        }))
        .unwrap();
        Named::new(name, spec, Origin::Cluster)
    };
    config.insert_chain(chain("pods", &["PodCrashLooping"]));
    config.insert_chain(chain("nodes-a", &["NodeNotReady"]));
    config.insert_chain(chain("nodes-b", &["NodeNotReady"]));
    let prometheus =
        serde_json::from_value(json!({"url": "https://prometheus.example/mcp"})).unwrap();
    config.insert_mcp_server(Named::new("prometheus", prometheus, Origin::Cluster));
    config
}

fn alert(alert_type: &str) -> NewAlert {
    NewAlert {
        alert_type: alert_type.into(),
        data: "pod: api-0".into(),
        chain: None,
        runbook_url: None,
        mcp_selection: None,
        author: "test".into(),
    }
}

fn selection(value: serde_json::Value) -> Option<McpSelection> {
    Some(serde_json::from_value(value).unwrap())
}

fn tools() -> BTreeMap<String, Vec<String>> {
    BTreeMap::from([(
        "prometheus".to_string(),
        vec!["query_range".to_string(), "query".to_string()],
    )])
}

#[test]
fn a_valid_alert_gets_its_chain() {
    let config = world();
    let mut a = alert("PodCrashLooping");
    a.runbook_url = Some("https://runbooks.example.com/pods".into());
    a.mcp_selection = selection(json!({"servers": [
        {"name": "prometheus", "tools": ["query"]}, {"name": "kubernetes-server"}]}));
    assert_eq!(config.check_alert(&a, &tools()).unwrap().name, "pods");

    // A named chain wins over the type, even an ambiguous one.
    let mut named = alert("NodeNotReady");
    named.chain = Some("nodes-b".into());
    assert_eq!(
        config.check_alert(&named, &NoToolCatalog).unwrap().name,
        "nodes-b"
    );

    // Exactly at the limits.
    let mut full = alert(&"T".repeat(253));
    full.chain = Some("pods".into());
    full.data = "x".repeat(MAX_ALERT_DATA_BYTES);
    full.runbook_url = Some(format!("https://{}", "r".repeat(2040)));
    assert_eq!(
        config.check_alert(&full, &NoToolCatalog).unwrap().name,
        "pods"
    );
}

#[test]
fn each_rule_refuses_with_a_precise_message() {
    let config = world();
    let cases: Vec<(&str, NewAlert, &str)> = vec![
        ("blank type", alert(" \t"), "alert type must not be empty"),
        (
            "long type",
            alert(&"é".repeat(254)),
            "alert type is 254 characters long; at most 253 are allowed",
        ),
        (
            "long chain name",
            NewAlert {
                chain: Some("c".repeat(300)),
                ..alert("PodCrashLooping")
            },
            "chain name is 300 characters long; at most 253 are allowed",
        ),
        (
            "blank data",
            NewAlert {
                data: "\n  ".into(),
                ..alert("PodCrashLooping")
            },
            "alert data must not be empty",
        ),
        (
            "data over the limit, in bytes",
            NewAlert {
                data: "é".repeat(MAX_ALERT_DATA_BYTES / 2 + 1),
                ..alert("PodCrashLooping")
            },
            "alert data is 1048578 bytes; the limit is 1048576 bytes",
        ),
        (
            "runbook scheme",
            NewAlert {
                runbook_url: Some("file:///etc/passwd".into()),
                ..alert("PodCrashLooping")
            },
            "runbook URL must be an http:// or https:// URL",
        ),
        (
            "runbook length",
            NewAlert {
                runbook_url: Some(format!("https://{}", "r".repeat(2041))),
                ..alert("PodCrashLooping")
            },
            "runbook URL is 2049 characters long; at most 2048 are allowed",
        ),
        (
            "unknown chain",
            NewAlert {
                chain: Some("nodes-c".into()),
                ..alert("PodCrashLooping")
            },
            "unknown chain \"nodes-c\" (known: nodes-a, nodes-b, pods)",
        ),
        (
            "no chain for the type",
            alert("KubeJobFailed"),
            "no chain handles alert type \"KubeJobFailed\" (known alert types: NodeNotReady, PodCrashLooping); add it to a chain's alertTypes or name the chain to run",
        ),
        (
            "several chains for the type",
            alert("NodeNotReady"),
            "alert type \"NodeNotReady\" is handled by several chains (nodes-a, nodes-b); name the chain to run",
        ),
        (
            "unknown MCP server",
            NewAlert {
                mcp_selection: selection(
                    json!({"servers": [{"name": "prometheus"}, {"name": "tempo"}]}),
                ),
                ..alert("PodCrashLooping")
            },
            "MCP selection: servers[1].name: unknown MCP server \"tempo\" (known: kubernetes-server, prometheus)",
        ),
        (
            "a tool the server does not offer",
            NewAlert {
                mcp_selection: selection(
                    json!({"servers": [{"name": "prometheus", "tools": ["query_rang"]}]}),
                ),
                ..alert("PodCrashLooping")
            },
            "MCP selection: servers[0].tools: MCP server \"prometheus\" has no tool \"query_rang\" (it offers: query, query_range)",
        ),
    ];
    for (what, a, message) in cases {
        let err = config.check_alert(&a, &tools()).unwrap_err();
        assert_eq!(err.to_string(), message, "{what}");
    }
}

#[test]
fn refusals_are_typed() {
    let config = world();
    let check = |a: &NewAlert, tools: &dyn ToolCatalog| config.check_alert(a, tools).unwrap_err();
    assert_eq!(
        check(&alert(""), &NoToolCatalog),
        InvalidAlert::EmptyAlertType
    );
    let big = NewAlert {
        data: "x".repeat(MAX_ALERT_DATA_BYTES + 1),
        ..alert("PodCrashLooping")
    };
    assert_eq!(
        check(&big, &NoToolCatalog),
        InvalidAlert::DataTooLarge {
            bytes: MAX_ALERT_DATA_BYTES + 1
        }
    );
    let dup = NewAlert {
        mcp_selection: selection(
            json!({"servers": [{"name": "prometheus"}, {"name": "prometheus"}]}),
        ),
        ..alert("PodCrashLooping")
    };
    assert_eq!(
        check(&dup, &NoToolCatalog),
        InvalidAlert::McpSelection(SelectionError::Duplicate {
            index: 1,
            name: "prometheus".into()
        })
    );
    // Without a catalog, tools are not checked (they show on the timeline).
    let typo = NewAlert {
        mcp_selection: selection(
            json!({"servers": [{"name": "prometheus", "tools": ["query_rang"]}]}),
        ),
        ..alert("PodCrashLooping")
    };
    assert!(config.check_alert(&typo, &NoToolCatalog).is_ok());
}

#[test]
fn runbook_urls_need_an_http_scheme() {
    for ok in ["http://wiki/x", "https://runbooks.example.com/a?b=c"] {
        assert_eq!(check_runbook_url(ok), Ok(()), "{ok}");
    }
    for bad in [
        "ftp://x",
        "HTTPS://x",
        " https://x",
        "runbooks.example.com",
        "",
    ] {
        assert_eq!(
            check_runbook_url(bad),
            Err(InvalidAlert::RunbookUrlScheme),
            "{bad}"
        );
    }
}
