//! The reference schedulers' rules, each written from its upstream source and cited, so the
//! simulator can put waterline beside them. Pure functions over plain inputs: no I/O, no
//! clock, no dependency on waterline's own engine.
#![forbid(unsafe_code)]

pub mod crane;
pub mod koordinator;
pub mod kube_default;
pub mod profile;
pub mod trimaran;
