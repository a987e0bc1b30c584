//! Compiles `proto/waterline/v1/*.proto` with protox, a pure-Rust protobuf compiler, so a
//! fresh machine builds without a protoc binary. The encoded descriptor set is kept for
//! gRPC server reflection.
use std::{env, path::PathBuf};

const PROTO_ROOT: &str = "../proto";
const FILES: &[&str] =
    &["waterline/v1/types.proto", "waterline/v1/scorer.proto", "waterline/v1/collector.proto"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(env::var("OUT_DIR")?);
    let descriptors = protox::compile(FILES, [PROTO_ROOT])?;
    let descriptor_path = out.join("waterline_descriptor.bin");
    std::fs::write(&descriptor_path, prost::Message::encode_to_vec(&descriptors))?;
    tonic_prost_build::configure()
        .file_descriptor_set_path(&descriptor_path)
        .skip_protoc_run()
        .compile_fds(descriptors)?;
    for file in FILES {
        println!("cargo:rerun-if-changed={PROTO_ROOT}/{file}");
    }
    Ok(())
}
