//! Turns each committed CRD manifest's `openAPIV3Schema` (`kubernetes/crds/manifests`,
//! generated from this crate's model by `tarsy crdgen`) into compact JSON in
//! `OUT_DIR`, for `schema`: parsing the YAML costs milliseconds on the
//! start-up path of `tarsy investigate` and of every runner, the JSON a tenth
//! of that.

use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"))
        .join("../../kubernetes/crds/manifests");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    println!("cargo:rerun-if-changed={}", dir.display());
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("readable manifests directory").path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        println!("cargo:rerun-if-changed={}", path.display());
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let crd: serde_json::Value =
            serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let schema = crd
            .pointer("/spec/versions/0/schema/openAPIV3Schema")
            .unwrap_or_else(|| panic!("{}: no openAPIV3Schema", path.display()));
        let target = out.join(
            path.with_extension("json")
                .file_name()
                .expect("a file name"),
        );
        std::fs::write(&target, schema.to_string())
            .unwrap_or_else(|e| panic!("{}: {e}", target.display()));
    }
}
