//! A cluster process whose peer goes away stops with one clear line.
//!
//! timely's network threads panic when a connection to a peer breaks ("timely communication
//! error: …"), and the panic then cascades through the workers (poisoned queues) and the main
//! thread: a pile of panic messages and exit code 101. The cluster is fate-sharing anyway (its
//! processes are restarted together and restore the committed checkpoint), so the process exits
//! at the first such panic with one line and exit code 1. That is no worse than being killed:
//! exactly-once holds across crashes (nothing after the last commit counts).

/// Installs the panic hook (for a cluster process; other panics keep the default report).
pub fn exit_on_peer_loss() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied());
        if let Some(m) = message.filter(|m| m.starts_with("timely communication error:")) {
            eprintln!(
                "error: lost the connection to a cluster peer ({m}); stopping: restart all the \
                 processes, they restore the committed checkpoint"
            );
            std::process::exit(1);
        }
        default(info)
    }));
}
