//! The placement-quality simulator (design.md §9): a seeded discrete-event simulation of a
//! cluster whose true usage reaches the scheduler only through a modelled metrics pipeline,
//! with strategies behind one trait. See sim/README.md.
#![forbid(unsafe_code)]

pub mod model;
pub mod strategy;
