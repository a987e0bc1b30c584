//! The placement-quality simulator (docs/design.md): a seeded discrete-event simulation of a
//! cluster whose true usage reaches the scheduler only through a modelled metrics pipeline,
//! with strategies behind one trait. See sim/README.md.
#![forbid(unsafe_code)]

pub mod import;
pub mod measure;
pub mod model;
pub mod pipeline;
pub mod plot;
pub mod rebalance;
pub mod report;
pub mod scenario;
pub mod sim;
pub mod strategy;
