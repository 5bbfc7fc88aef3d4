//! Redis store (being written).
