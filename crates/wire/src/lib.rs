//! Zero-copy wire views.
