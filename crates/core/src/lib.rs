//! Core engine.
