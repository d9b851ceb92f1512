//! Regenerates `kubernetes/crds/manifests/*.yaml` without the `tarsy` binary:
//! `cargo run -p tarsy-crds --example crdgen [DIR]`.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("manifests"));
    for path in tarsy_crds::write_manifests(&dir)? {
        println!("wrote {}", path.display());
    }
    Ok(())
}
