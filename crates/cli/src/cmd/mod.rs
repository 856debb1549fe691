pub mod dissect;
