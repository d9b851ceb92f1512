//! Masks a file (or stdin) as a tool result and prints the result, to see
//! what the model would see.
//!
//! `cargo run -p tarsy-masking --example mask_file -- [GROUP[,GROUP...]] [FILE]`
//! (default group `kubernetes`, default input stdin).

use std::io::Read;

use tarsy_masking::{AlertMaskingConfig, MaskingConfig, MaskingService};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let groups = args.next().unwrap_or_else(|| "kubernetes".to_owned());
    let mut input = String::new();
    match args.next() {
        Some(path) => input = std::fs::read_to_string(path)?,
        None => {
            std::io::stdin().read_to_string(&mut input)?;
        }
    }
    let cfg = MaskingConfig {
        pattern_groups: groups.split(',').map(str::to_owned).collect(),
        ..MaskingConfig::default()
    };
    let svc = MaskingService::new([("cli".to_owned(), cfg)], AlertMaskingConfig::default())?;
    print!("{}", svc.mask_tool_result("cli", &input));
    Ok(())
}
