//! `waterline-sim`: see sim/README.md.
#![forbid(unsafe_code)]

fn main() {}
