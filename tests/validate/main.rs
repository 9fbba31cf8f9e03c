//! The translation validator (`src/validate`, in cranelift-interpreter): it must
//! catch wrong merges and thunks, pass right ones, and report what it could not
//! check.
//!
//! One test binary (the former `tests/validate/validate.rs`). A test of the validator goes
//! here.

mod validate;
