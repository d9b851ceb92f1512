//! Compiles `llm_service.proto` with the pure-Rust `protox` compiler, so building
//! TARSy needs no system `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=llm_service.proto");
    let descriptors = protox::compile(["llm_service.proto"], ["."])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}
