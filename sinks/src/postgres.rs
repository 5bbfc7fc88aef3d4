//! PostgreSQL store (being written).
