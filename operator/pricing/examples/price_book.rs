//! Converts LiteLLM's model price map into TARSy's price book format, on
//! stdout. `scripts/price-book.sh` runs it to regenerate the bundled
//! snapshot:
//!
//! ```text
//! cargo run -q -p tarsy-pricing --example price_book -- <catalog.json> <litellm version> [YYYY-MM-DD]
//! ```
//!
//! The date defaults to today (UTC).

use std::process::ExitCode;

use tarsy_pricing::PriceBook;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (path, version, date) = match args.as_slice() {
        [path, version] => (
            path,
            version,
            chrono::Utc::now().format("%Y-%m-%d").to_string(),
        ),
        [path, version, date] => (path, version, date.clone()),
        _ => {
            eprintln!("usage: price_book <catalog.json> <litellm version> [YYYY-MM-DD]");
            return ExitCode::from(2);
        }
    };
    let json = match std::fs::read_to_string(path) {
        Ok(json) => json,
        Err(e) => {
            eprintln!("price_book: cannot read {path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    match PriceBook::from_catalog(&json) {
        Ok(book) => {
            let source = book.source().to_string();
            let book = book.with_origin(source, format!("litellm {version}"), date);
            print!("{}", book.to_json());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("price_book: {path}: {e}");
            ExitCode::FAILURE
        }
    }
}
