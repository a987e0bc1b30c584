//! The `waterline.v1` contract: messages, clients and servers generated from `proto/`.
//! Every other crate that speaks gRPC imports these types from here; nothing else runs
//! the generator.
#![forbid(unsafe_code)]

/// Generated code for package `waterline.v1`.
pub mod v1 {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("waterline.v1");

    /// Encoded `FileDescriptorSet` of every waterline proto, for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        tonic::include_file_descriptor_set!("waterline_descriptor");
}

pub use prost_types::{Duration as ProtoDuration, Timestamp as ProtoTimestamp};
