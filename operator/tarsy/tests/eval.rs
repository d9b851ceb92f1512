//! `tarsy eval` with the real binary: the shipped cases pass with the
//! scripted provider (the CI smoke test), a case whose analysis misses what
//! it must say fails with the reasons, a real provider's calls go to the
//! LLM service (never to the script), and a malformed case is refused.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn eval(dir: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tarsy"))
        .arg("eval")
        .arg(dir)
        .args(extra)
        // Nothing listens here: scripted providers never need it, and a
        // real provider's call must fail rather than reach anything.
        .env("TARSY_LLM_ADDR", "http://127.0.0.1:9")
        .env_remove("RUST_LOG")
        .output()
        .expect("run tarsy eval")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn report(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object: {e}\nstdout:\n{}\nstderr:\n{}",
            text(&out.stdout),
            text(&out.stderr)
        )
    })
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tarsy-{name}-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The shipped cases, as CI runs them: every case passes, every tool call
/// of every case is answered by its fixture, tokens and judges counted.
#[test]
fn the_shipped_cases_pass_with_the_scripted_provider() {
    let out = eval(&repo().join("eval"), &["--json"]);
    let r = report(&out);
    assert!(out.status.success(), "exit {:?}\n{r:#}", out.status);
    let cases = r["cases"].as_array().unwrap();
    let names: Vec<&str> = cases.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "certificate-expiry",
            "image-pull-error",
            "node-pressure",
            "oom-killed",
            "readiness-after-config-change"
        ]
    );
    for case in cases {
        let name = case["name"].as_str().unwrap();
        assert_eq!(case["passed"], true, "{name}: {case:#}");
        assert_eq!(case["status"], "completed", "{name}");
        assert!(case["tool_calls"].as_array().unwrap().len() >= 3, "{name}");
        assert_eq!(case["tool_errors"], 0, "{name}");
        assert!(case["tokens"]["input"].as_i64().unwrap() > 0, "{name}");
        let kinds: Vec<&str> = case["checks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["kind"].as_str().unwrap())
            .collect();
        assert!(
            kinds.contains(&"required") && kinds.contains(&"forbidden"),
            "{name}: {kinds:?}"
        );
    }
    let judged: Vec<&str> = cases
        .iter()
        .filter(|c| {
            c["checks"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k["kind"] == "judge" && k["passed"] == true)
        })
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        judged,
        ["certificate-expiry", "readiness-after-config-change"]
    );
    assert_eq!(r["summary"]["passed"], 5);
    assert_eq!(r["summary"]["failed"], 0);

    // The text form: a line per case, then the table.
    let out = eval(&repo().join("eval"), &["--case", "oom", "--case", "image"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("PASS  image-pull-error  (3 tool call(s), 0 failed;"),
        "{stdout}"
    );
    assert!(stdout.contains("\ntotal "), "{stdout}");
    assert!(
        stdout.ends_with("2 case(s): 2 passed, 0 failed\n"),
        "{stdout}"
    );
    assert_eq!(text(&out.stderr), "");
}

/// `--judge scoring`: TARSy's scoring judge scores each completed case
/// (here from the case's scripted judge answers) and its verdict is
/// reported beside the rubric's results; a case the judge cannot score is
/// reported as such and still passes on its rubric.
#[test]
fn the_scoring_judge_is_reported_next_to_the_rubric() {
    let args = ["--judge", "scoring", "--case", "oom", "--case", "image"];
    let out = eval(&repo().join("eval"), &[&args[..], &["--json"]].concat());
    let r = report(&out);
    assert!(out.status.success(), "exit {:?}\n{r:#}", out.status);
    let case = |name: &str| {
        r["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap()
    };
    let oom = case("oom-killed");
    assert_eq!(oom["passed"], true, "{oom:#}");
    assert_eq!(oom["score"]["score"], 84, "{oom:#}");
    assert_eq!(oom["score"]["outcome"], "correct");
    assert_eq!(
        oom["score"]["failure_tags"],
        serde_json::json!(["incomplete-evidence"])
    );
    assert!(
        oom["score"]["missing_tools"][0]
            .as_str()
            .unwrap()
            .starts_with("JVM native memory tracking"),
        "{oom:#}"
    );
    // No judge answers in this case's script: no score, and why.
    let image = case("image-pull-error");
    assert_eq!(image["passed"], true, "{image:#}");
    assert_eq!(
        image["score"]["score"],
        serde_json::Value::Null,
        "{image:#}"
    );
    assert!(
        image["score"]["error"]
            .as_str()
            .is_some_and(|e| !e.is_empty()),
        "{image:#}"
    );

    let out = eval(&repo().join("eval"), &args);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("★ score 84/100 (correct) · failure tags: incomplete-evidence · missing tools: JVM native memory tracking"),
        "{stdout}"
    );
    assert!(stdout.contains("★ not scored: "), "{stdout}");
    let table_row = stdout
        .lines()
        .find(|l| l.starts_with("oom-killed ") && l.contains("PASS"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(table_row.trim_end().ends_with("84"), "{table_row}");
}

/// A case graded against expectations its analysis does not meet, and a
/// fixture missing a call the agent makes: the case fails, with each reason.
#[test]
fn a_case_that_misses_its_findings_fails_with_the_reasons() {
    let dir = scratch("eval-fail");
    copy_dir(&repo().join("eval/config"), &dir.join("config"));
    let case = dir.join("cases/oom-killed");
    copy_dir(&repo().join("eval/cases/oom-killed"), &case);
    std::fs::write(
        case.join("case.yaml"),
        "expect:\n  required:\n  - name: names a memory leak as the cause\n    all: [memory leak]\n\
         \x20 forbidden:\n  - name: mentions the heap flag\n    any: [-Xmx1g]\n\
         \x20 tools: [kubernetes.events_list]\n  max_tool_errors: 0\n",
    )
    .unwrap();
    // The fixture no longer records the previous container's logs.
    let fixture = case.join("fixture/kubernetes.yaml");
    let yaml = std::fs::read_to_string(&fixture).unwrap();
    std::fs::write(&fixture, yaml.replace("previous: true", "previous: false")).unwrap();

    let out = eval(&dir, &["--json"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let r = report(&out);
    let case = &r["cases"][0];
    assert_eq!(case["passed"], false);
    assert_eq!(case["status"], "completed");
    assert_eq!(case["tool_errors"], 1);
    let failed: Vec<(String, String)> = case["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["passed"] == false)
        .map(|c| {
            (
                c["kind"].as_str().unwrap().to_owned(),
                c["detail"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        failed,
        [
            ("required".to_owned(), "no \"memory leak\"".to_owned()),
            (
                "forbidden".to_owned(),
                "the analysis says it (\"-xmx1g\")".to_owned()
            ),
            ("tool".to_owned(), "never called successfully".to_owned()),
            (
                "tool_errors".to_owned(),
                "1 failed: kubernetes.pods_log".to_owned()
            ),
        ]
    );
    assert_eq!(r["summary"]["failed"], 1);
}

/// `--provider gemini`: every call goes to the LLM service (here nothing
/// listens), never to the case's script; the cases fail, the run does not.
/// (The investigation waits for the LLM service to come up, so the case
/// ends at its own timeout.)
#[test]
fn a_real_provider_is_never_answered_by_the_script() {
    let out = eval(
        &repo().join("eval"),
        &[
            "--json",
            "--case",
            "image-pull",
            "--provider",
            "gemini",
            "--timeout",
            "3s",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let r = report(&out);
    let case = &r["cases"][0];
    assert_eq!(case["passed"], false);
    assert_ne!(case["status"], "completed", "{case:#}");
    assert!(
        case["error"]
            .as_str()
            .unwrap_or_default()
            .contains("in_progress"),
        "{case:#}"
    );
    assert_eq!(case["tool_calls"].as_array().unwrap().len(), 0);
    assert_eq!(case["tokens"]["input"], 0);

    let out = eval(&repo().join("eval"), &["--provider", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("--provider \"nope\": no such LLMProvider in the configuration"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn malformed_cases_are_refused_before_anything_runs() {
    let dir = scratch("eval-bad");
    copy_dir(&repo().join("eval/config"), &dir.join("config"));
    let case = dir.join("cases/broken");
    copy_dir(&repo().join("eval/cases/oom-killed"), &case);
    std::fs::write(
        case.join("case.yaml"),
        "expect:\n  required:\n  - name: x\n    regex: '(unclosed'\n",
    )
    .unwrap();
    let out = eval(&dir, &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), "", "nothing ran");
    assert!(
        stderr.starts_with(
            "error: case broken: case.yaml: expect.required[0].regex: regex parse error"
        ),
        "{stderr}"
    );
    std::fs::write(case.join("case.yaml"), "expect:\n  requird: []\n").unwrap();
    let stderr = text(&eval(&dir, &[]).stderr);
    assert!(stderr.contains("unknown field `requird`"), "{stderr}");
    let empty = scratch("eval-empty");
    let stderr = text(&eval(&empty, &["--config", dir.join("config").to_str().unwrap()]).stderr);
    assert!(
        stderr.contains("no evaluation case (a directory with case.yaml)"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&empty);
}
