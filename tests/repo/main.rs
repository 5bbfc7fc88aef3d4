//! Repository tests: what the repository says about itself holds, checked without running the
//! job: the deployment files reference each other and their config validates, every crate's
//! module map is complete, and every path the docs name exists.

// deploy/, the Dockerfile and the systemd unit
mod deploy;
// module maps and the paths named in README.md and docs/
mod layout;
