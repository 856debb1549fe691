pub mod dissect;
pub mod topics;
