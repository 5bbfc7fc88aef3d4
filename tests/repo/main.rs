//! Repository tests: what the repository says about itself holds, checked without running the
//! job: the deployment files reference each other and their config validates, the dashboard's
//! and alert rules' PromQL parses and names documented metrics, every crate's module map is
//! complete, and every path the docs name exists.

// the Grafana dashboard and the Prometheus alert rules: their PromQL parses and matches the runbook
mod dashboard;
// deploy/, the Dockerfile and the systemd unit
mod deploy;
// module maps and the paths named in README.md and docs/
mod layout;
