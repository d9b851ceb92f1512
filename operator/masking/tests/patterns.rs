//! Each built-in pattern on its own: what it must mask, and what it must
//! leave alone.

use tarsy_masking::{AlertMaskingConfig, MaskingConfig, MaskingService};

fn service(patterns: &[&str]) -> MaskingService {
    let cfg = MaskingConfig {
        enabled: true,
        pattern_groups: vec![],
        patterns: patterns.iter().map(|s| s.to_string()).collect(),
        custom_patterns: vec![],
    };
    MaskingService::new([("s".to_string(), cfg)], AlertMaskingConfig::default()).unwrap()
}

/// Asserts exact outputs for `pattern` alone.
fn check(pattern: &str, cases: &[(&str, &str)]) {
    let svc = service(&[pattern]);
    for (input, expected) in cases {
        assert_eq!(
            svc.mask_tool_result("s", input),
            *expected,
            "pattern {pattern} on {input:?}"
        );
    }
}

#[test]
fn api_key() {
    check(
        "api_key",
        &[
            ("api_key=abc123def", "api_key=[MASKED_API_KEY]"),
            (
                r#"{"apiKey": "k-123 456"}"#,
                r#"{"apiKey": "[MASKED_API_KEY]"}"#,
            ),
            ("X-API-Key: 0f9e8d7c", "X-API-Key: [MASKED_API_KEY]"),
            (
                "OPENAI_API_KEY='sk-live'",
                "OPENAI_API_KEY='[MASKED_API_KEY]'",
            ),
            (
                "key sk-proj-AbCdEfGhIjKlMnOpQrStUvWx12 used",
                "key [MASKED_API_KEY] used",
            ),
            (
                "google AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW end",
                "google [MASKED_API_KEY] end",
            ),
            // Placeholders from kubectl describe and other fields stay.
            (
                "API_KEY: <set to the key 'api-key' in secret 'x'>",
                "API_KEY: <set to the key 'api-key' in secret 'x'>",
            ),
            ("api_key_env: GOOGLE_API_KEY", "api_key_env: GOOGLE_API_KEY"),
            ("rotate the api key weekly", "rotate the api key weekly"),
        ],
    );
}

#[test]
fn password() {
    check(
        "password",
        &[
            ("password: hunter2", "password: [MASKED_PASSWORD]"),
            ("DB_PASSWORD=s3cr3t!", "DB_PASSWORD=[MASKED_PASSWORD]"),
            (
                r#"{"password":"with \"quote\" inside","user":"bob"}"#,
                r#"{"password":"[MASKED_PASSWORD]","user":"bob"}"#,
            ),
            (
                r#"{\"password\":\"esc4ped\"}"#,
                r#"{\"password\":\"[MASKED_PASSWORD]\"}"#,
            ),
            (
                "postgres://app:P%40ss@db.prod:5432/app",
                "postgres://app:[MASKED_PASSWORD]@db.prod:5432/app",
            ),
            (
                "url=https://host/?password=abc&user=x",
                "url=https://host/?password=[MASKED_PASSWORD]&user=x",
            ),
            ("password reset requested", "password reset requested"),
            ("password:\n  nested: value", "password:\n  nested: value"),
            // kubectl describe secret shows sizes, not values.
            ("password:  16 bytes", "password:  16 bytes"),
            ("password: 123456", "password: [MASKED_PASSWORD]"),
            (
                "https://example.com:8443/path",
                "https://example.com:8443/path",
            ),
        ],
    );
}

#[test]
fn token() {
    check(
        "token",
        &[
            (
                "Authorization: Bearer abcdefgh.ijklmnop-qrst",
                "Authorization: Bearer [MASKED_TOKEN]",
            ),
            (
                "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig_nature-x here",
                "jwt [MASKED_TOKEN] here",
            ),
            (
                r#"{"access_token": "ya29.a0AfH6SMB"}"#,
                r#"{"access_token": "[MASKED_TOKEN]"}"#,
            ),
            (
                "Authorization: Basic dXNlcjpwYXNz",
                "Authorization: Basic [MASKED_TOKEN]",
            ),
            // Counts and short values are not tokens.
            ("prompt_tokens: 512", "prompt_tokens: 512"),
            ("input_token: 5", "input_token: 5"),
            ("bearer token auth", "bearer token auth"),
        ],
    );
}

#[test]
fn secret_key() {
    check(
        "secret_key",
        &[
            ("client_secret=Zx9-abc", "client_secret=[MASKED_SECRET_KEY]"),
            (
                "SECRET_KEY: 'django-insecure'",
                "SECRET_KEY: '[MASKED_SECRET_KEY]'",
            ),
            ("secretName: db-creds", "secretName: db-creds"),
            ("kind: Secret", "kind: Secret"),
            (
                "- secret:\n    secretName: x",
                "- secret:\n    secretName: x",
            ),
        ],
    );
}

#[test]
fn cloud_and_vendor_tokens() {
    check(
        "aws_access_key",
        &[
            (
                "id AKIAIOSFODNN7EXAMPLE ok",
                "id [MASKED_AWS_ACCESS_KEY] ok",
            ),
            ("ASIAY34FZKBOKMUTVV7A", "[MASKED_AWS_ACCESS_KEY]"),
            ("AKIATOOSHORT", "AKIATOOSHORT"),
        ],
    );
    check(
        "aws_secret_key",
        &[
            (
                "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "aws_secret_access_key = [MASKED_AWS_SECRET_KEY]",
            ),
            (
                r#""SecretAccessKey": "9drTJvcXLB89EXAMPLELB8923FB892xMFI/AaBbC""#,
                r#""SecretAccessKey": "[MASKED_AWS_SECRET_KEY]""#,
            ),
        ],
    );
    check(
        "github_token",
        &[
            (
                "ghp_1234567890abcdefghijABCDEFGHIJ123456",
                "[MASKED_GITHUB_TOKEN]",
            ),
            (
                "t=github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
                "t=[MASKED_GITHUB_TOKEN]",
            ),
            ("ghp_short", "ghp_short"),
        ],
    );
    check(
        "slack_token",
        &[
            (
                "xoxb-123456789012-1234567890123-AbCdEfGh",
                "[MASKED_SLACK_TOKEN]",
            ),
            (
                "hook https://hooks.slack.com/services/T000/B000/XXXXXXXX done",
                "hook [MASKED_SLACK_TOKEN] done",
            ),
        ],
    );
}

#[test]
fn keys_and_certificates() {
    check(
        "private_key",
        &[
            (
                "k: -----BEGIN RSA PRIVATE KEY-----\nMIIEow\nAAAA==\n-----END RSA PRIVATE KEY-----\nnext",
                "k: [MASKED_PRIVATE_KEY]\nnext",
            ),
            (
                r#"{"private_key":"-----BEGIN PRIVATE KEY-----\nMIIEv\n-----END PRIVATE KEY-----\n"}"#,
                r#"{"private_key":"[MASKED_PRIVATE_KEY]\n"}"#,
            ),
            // Truncated: no END line.
            (
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\nAAAAB3Nz",
                "[MASKED_PRIVATE_KEY]",
            ),
            (
                "client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQo=",
                "client-key-data: [MASKED_PRIVATE_KEY]",
            ),
            // Legacy encrypted PEM headers, a key flattened onto one line,
            // and a key inside escaped JSON are masked whole, up to END.
            (
                "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,3F17F5316E2BAC89\n\nc2VjcmV0Ym9keQ==\n-----END RSA PRIVATE KEY-----\nafter",
                "[MASKED_PRIVATE_KEY]\nafter",
            ),
            (
                "KEY=-----BEGIN PRIVATE KEY----- MIIEvQIBADAN Bgkqhkw== -----END PRIVATE KEY----- next",
                "KEY=[MASKED_PRIVATE_KEY] next",
            ),
            (
                r#"{\"k\":\"-----BEGIN EC PRIVATE KEY-----\\nMHcCAQEE\\n-----END EC PRIVATE KEY-----\\n\"}"#,
                r#"{\"k\":\"[MASKED_PRIVATE_KEY]\\n\"}"#,
            ),
            // Many headers whose END never comes: each masked (and fast).
            (
                "-----BEGIN PRIVATE KEY-----\nQUJD\n-----BEGIN PRIVATE KEY-----\nREVG\n",
                "[MASKED_PRIVATE_KEY][MASKED_PRIVATE_KEY]",
            ),
        ],
    );
    check(
        "certificate",
        &[
            (
                "-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----",
                "[MASKED_CERTIFICATE]",
            ),
            (
                "ca.crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM=",
                "ca.crt: [MASKED_CERTIFICATE]",
            ),
        ],
    );
    check(
        "certificate_authority_data",
        &[(
            "    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t",
            "    certificate-authority-data: [MASKED_CERTIFICATE_DATA]",
        )],
    );
    check(
        "ssh_key",
        &[(
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl user@host",
            "ssh-ed25519 [MASKED_SSH_KEY] user@host",
        )],
    );
}

#[test]
fn email_and_base64() {
    check(
        "email",
        &[
            (
                "contact jane.doe+ops@example.co.uk now",
                "contact [MASKED_EMAIL] now",
            ),
            ("image nginx@sha256:abc", "image nginx@sha256:abc"),
        ],
    );
    check(
        "base64_secret",
        &[
            (
                "blob dGhpcyBpcyBhIHZlcnkgc2VjcmV0IHZhbHVlIGluZGVlZA== end",
                "blob [MASKED_BASE64_SECRET] end",
            ),
            (
                "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            ),
        ],
    );
    check(
        "base64_short",
        &[
            ("password: aHVudGVyMg==", "password: [MASKED_BASE64_VALUE]"),
            ("replicas: 3", "replicas: 3"),
        ],
    );
}

#[test]
fn masking_is_idempotent() {
    let svc = service(&["api_key", "password", "token", "secret_key", "base64_short"]);
    let once = svc.mask_tool_result(
        "s",
        "password: hunter2\napi_key=abcdefgh\ntoken: abcdefghijkl\nsecret: \"xyzw1234\"",
    );
    assert_eq!(svc.mask_tool_result("s", &once), once);
}

/// What an MCP server prints to stderr is masked before it is logged, with
/// the default groups, whatever the server's own masking.
#[test]
fn log_lines_are_masked_with_the_default_groups() {
    let line =
        "connecting with password=hunter2-is-long token ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    let masked = tarsy_masking::mask_log_line(line);
    assert!(!masked.contains("hunter2-is-long"), "{masked}");
    assert!(
        !masked.contains("ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
        "{masked}"
    );
    assert!(masked.starts_with("connecting with"), "{masked}");
    let prose = "listening on 127.0.0.1:8080; connection refused by upstream";
    assert_eq!(tarsy_masking::mask_log_line(prose), prose);
}
