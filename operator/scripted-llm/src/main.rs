//! `tarsy-scripted-llm --listen ADDR --script FILE.json`: serves a script file
//! until interrupted (used by e2e scenarios that run the service out of process).

use std::net::SocketAddr;

use tarsy_scripted_llm::{ScriptFile, ScriptedLlm, ScriptedLlmServer};

fn usage() -> ! {
    eprintln!("usage: tarsy-scripted-llm --listen ADDR --script FILE.json");
    std::process::exit(2)
}

#[tokio::main]
async fn main() {
    let mut listen: Option<String> = None;
    let mut script: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--listen" => listen = args.next(),
            "--script" => script = args.next(),
            _ => usage(),
        }
    }
    let addr: SocketAddr = match listen.as_deref().unwrap_or("127.0.0.1:50051").parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("invalid --listen address: {e}");
            std::process::exit(2)
        }
    };
    let file = match script {
        Some(path) => {
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("cannot read {path}: {e}");
                    std::process::exit(1)
                }
            };
            match serde_json::from_str::<ScriptFile>(&text) {
                Ok(f) => f,
                Err(e) => {
                    eprintln!("invalid script {path}: {e}");
                    std::process::exit(1)
                }
            }
        }
        None => ScriptFile::default(),
    };
    let server = match ScriptedLlmServer::start_on(addr, ScriptedLlm::from_file(file)).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot listen on {addr}: {e}");
            std::process::exit(1)
        }
    };
    println!("scripted LLM service listening on {}", server.endpoint());
    let _ = tokio::signal::ctrl_c().await;
    server.shutdown().await;
}
