//! The deployment files in `deploy/`, the Dockerfile and the systemd unit, checked without a
//! cluster: every Kubernetes manifest parses and the cross-references hold (the headless
//! Service the StatefulSet names exists, selects its pods and carries the ports the hostfile
//! and the probes use; the ConfigMap and the volume claim it mounts exist; the serving
//! Deployment's Service targets its port; the kustomization lists every manifest). The
//! StatefulSet's start script runs under `sh` with a stand-in `hotlist` that records its
//! arguments: the hostfile it writes has one line per replica, each the stable name of one pod,
//! and the job config in the ConfigMap validates with those cluster settings. The overlay for
//! checkpoints in object storage (`deploy/k8s/s3`) patches only what the base has, and its
//! config validates with its checkpoints in a bucket.

use hotlist_dataflow::config::{Overrides, SinkPlan};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use yaml_rust2::{Yaml, YamlLoader};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every document of every manifest in deploy/k8s, by (kind, name).
fn manifests() -> BTreeMap<(String, String), Yaml> {
    let dir = root().join("deploy/k8s");
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).expect("deploy/k8s") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read manifest");
        let docs = YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for doc in docs {
            let kind = doc["kind"]
                .as_str()
                .unwrap_or_else(|| panic!("{}: no kind", path.display()))
                .to_string();
            assert!(
                doc["apiVersion"].as_str().is_some(),
                "{}: no apiVersion",
                path.display()
            );
            let name = if kind == "Kustomization" {
                "kustomization".to_string()
            } else {
                doc["metadata"]["name"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{}: a {kind} without metadata.name", path.display()))
                    .to_string()
            };
            let file = path.file_name().and_then(|f| f.to_str()).expect("name").to_string();
            let mut doc = doc;
            if let Yaml::Hash(h) = &mut doc {
                h.insert(Yaml::String("x-file".into()), Yaml::String(file));
            }
            assert!(
                out.insert((kind.clone(), name.clone()), doc).is_none(),
                "{kind} {name} defined twice"
            );
        }
    }
    out
}

fn get<'a>(m: &'a BTreeMap<(String, String), Yaml>, kind: &str, name: &str) -> &'a Yaml {
    m.get(&(kind.to_string(), name.to_string()))
        .unwrap_or_else(|| panic!("no {kind} named {name} in deploy/k8s"))
}

fn str_of(y: &Yaml) -> &str {
    y.as_str().unwrap_or_else(|| panic!("expected a string, got {y:?}"))
}

/// The `name: value` pairs of a list of `{name, value}` maps (env vars, ports).
fn named<'a>(list: &'a Yaml, value: &str) -> BTreeMap<&'a str, &'a Yaml> {
    list.as_vec()
        .map(|v| v.iter().map(|e| (str_of(&e["name"]), &e[value])).collect())
        .unwrap_or_default()
}

/// Whether `selector` (matchLabels or a Service selector) selects pods labelled `labels`.
fn selects(selector: &Yaml, labels: &Yaml) -> bool {
    let (Some(sel), Some(labels)) = (selector.as_hash(), labels.as_hash()) else {
        return false;
    };
    !sel.is_empty() && sel.iter().all(|(k, v)| labels.get(k) == Some(v))
}

#[test]
fn kubernetes_manifests_reference_each_other() {
    let m = manifests();
    // the kustomization lists every manifest file
    let kust = get(&m, "Kustomization", "kustomization");
    let mut listed: Vec<&str> = kust["resources"]
        .as_vec()
        .expect("resources")
        .iter()
        .map(str_of)
        .collect();
    listed.sort_unstable();
    let mut files: Vec<String> = m
        .values()
        .map(|d| str_of(&d["x-file"]).to_string())
        .filter(|f| f != "kustomization.yaml")
        .collect();
    files.sort_unstable();
    files.dedup();
    assert_eq!(
        listed, files,
        "kustomization.yaml resources vs the manifests in deploy/k8s"
    );

    // the job: StatefulSet, its headless Service, its ConfigMap and checkpoint claim
    let sts = get(&m, "StatefulSet", "hotlist");
    let pod = &sts["spec"]["template"];
    assert!(selects(
        &sts["spec"]["selector"]["matchLabels"],
        &pod["metadata"]["labels"]
    ));
    assert_eq!(
        str_of(&sts["spec"]["podManagementPolicy"]),
        "Parallel",
        "processes start together"
    );
    let svc = get(&m, "Service", str_of(&sts["spec"]["serviceName"]));
    assert_eq!(
        str_of(&svc["spec"]["clusterIP"]),
        "None",
        "the job's Service is headless"
    );
    assert!(
        selects(&svc["spec"]["selector"], &pod["metadata"]["labels"]),
        "the Service selects the job's pods"
    );
    let container = &pod["spec"]["containers"][0];
    let ports = named(&container["ports"], "containerPort");
    let svc_ports = named(&svc["spec"]["ports"], "port");
    for name in ["cluster", "metrics"] {
        assert_eq!(
            ports.get(name),
            svc_ports.get(name),
            "port {name}: container vs Service"
        );
    }
    for probe in ["livenessProbe", "readinessProbe"] {
        let p = &container[probe];
        let port = if p["tcpSocket"].is_badvalue() {
            &p["httpGet"]["port"]
        } else {
            &p["tcpSocket"]["port"]
        };
        assert!(
            ports.contains_key(str_of(port)),
            "{probe} uses a port the container has"
        );
    }
    let env = named(&container["env"], "value");
    assert_eq!(
        env.get("HOTLIST_PROCESSES").map(|v| str_of(v).to_string()),
        sts["spec"]["replicas"].as_i64().map(|r| r.to_string()),
        "HOTLIST_PROCESSES equals the replicas"
    );
    assert_eq!(
        env.get("HOTLIST_SERVICE").map(|v| str_of(v)),
        Some(str_of(&svc["metadata"]["name"]))
    );
    assert_eq!(
        env.get("HOTLIST_CLUSTER_PORT").map(|v| str_of(v).parse::<i64>().ok()),
        Some(ports.get("cluster").and_then(|p| p.as_i64()))
    );
    let mounts = named(&container["volumeMounts"], "mountPath");
    let volumes: BTreeMap<&str, &Yaml> = pod["spec"]["volumes"]
        .as_vec()
        .expect("volumes")
        .iter()
        .map(|v| (str_of(&v["name"]), v))
        .collect();
    for name in mounts.keys() {
        assert!(volumes.contains_key(name), "volume {name} is mounted and defined");
    }
    get(&m, "ConfigMap", str_of(&volumes["config"]["configMap"]["name"]));
    let pvc = get(
        &m,
        "PersistentVolumeClaim",
        str_of(&volumes["checkpoints"]["persistentVolumeClaim"]["claimName"]),
    );
    assert_eq!(
        str_of(&pvc["spec"]["accessModes"][0]),
        "ReadWriteMany",
        "every process shares the checkpoints"
    );

    // serving: a Deployment and a Service targeting its port
    let serve = get(&m, "Deployment", "hotlist-serve");
    let serve_pod = &serve["spec"]["template"];
    assert!(selects(
        &serve["spec"]["selector"]["matchLabels"],
        &serve_pod["metadata"]["labels"]
    ));
    let serve_svc = get(&m, "Service", "hotlist-serve");
    assert!(selects(
        &serve_svc["spec"]["selector"],
        &serve_pod["metadata"]["labels"]
    ));
    assert!(
        !selects(&serve_svc["spec"]["selector"], &pod["metadata"]["labels"]),
        "not the job's pods"
    );
    let serve_ports = named(&serve_pod["spec"]["containers"][0]["ports"], "containerPort");
    let target = str_of(&serve_svc["spec"]["ports"][0]["targetPort"]);
    assert!(serve_ports.contains_key(target), "the Service targets the serve port");
    let args: Vec<&str> = serve_pod["spec"]["containers"][0]["args"]
        .as_vec()
        .expect("args")
        .iter()
        .map(str_of)
        .collect();
    assert_eq!(args[0], "serve");
    let listen = args
        .iter()
        .position(|a| *a == "--listen")
        .map(|i| args[i + 1])
        .expect("--listen");
    assert!(
        listen.ends_with(&format!(":{}", serve_ports[target].as_i64().expect("port"))),
        "{listen}"
    );
}

/// What the stand-in `hotlist` of [`run_start_script`] saw.
struct StartedWith {
    args: Vec<String>,
    hosts: Vec<String>,
    /// Its open-file limits: soft, hard.
    nofile: (String, String),
}

/// Runs the StatefulSet's start script for pod `hotlist-<ordinal>` (under a soft open-file
/// limit of `soft_nofile`, if given, as a container runtime may set) with a stand-in `hotlist`
/// that writes its arguments, the hostfile it was given and its open-file limits.
fn run_start_script(ordinal: usize, soft_nofile: Option<u32>) -> StartedWith {
    let m = manifests();
    let sts = get(&m, "StatefulSet", "hotlist");
    let container = &sts["spec"]["template"]["spec"]["containers"][0];
    let command: Vec<&str> = container["command"]
        .as_vec()
        .expect("command")
        .iter()
        .map(str_of)
        .collect();
    assert_eq!(command, ["/bin/sh", "-c"]);
    let mut script = str_of(&container["args"][0]).replace("/tmp/hosts", "$HOSTS");
    if let Some(n) = soft_nofile {
        script = format!("ulimit -S -n {n}\n{script}");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = dir.path().join("hotlist");
    std::fs::write(
        &fake,
        "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$OUT/args\"\nulimit -S -n > \"$OUT/nofile\"\nulimit -H -n >> \"$OUT/nofile\"\nwhile [ $# -gt 0 ]; do [ \"$1\" = --hostfile ] && cp \"$2\" \"$OUT/hosts\"; shift; done\n",
    )
    .expect("write fake hotlist");
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&fake)
        .status()
        .expect("chmod");
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.arg("-c").arg(&script);
    for (name, value) in named(&container["env"], "value") {
        if let Some(v) = value.as_str() {
            cmd.env(name, v);
        }
    }
    let path = format!("{}:{}", dir.path().display(), std::env::var("PATH").unwrap_or_default());
    let status = cmd
        .env("PATH", path)
        .env("POD_NAMESPACE", "prod")
        .env("HOSTNAME", format!("hotlist-{ordinal}"))
        .env("HOSTS", dir.path().join("hosts.txt"))
        .env("OUT", dir.path())
        .status()
        .expect("run the start script");
    assert!(status.success(), "the start script failed: {status}");
    let read = |f: &str| -> Vec<String> {
        std::fs::read_to_string(dir.path().join(f))
            .unwrap_or_else(|e| panic!("{f}: {e}"))
            .lines()
            .map(str::to_string)
            .collect()
    };
    let nofile = read("nofile");
    StartedWith {
        args: read("args"),
        hosts: read("hosts"),
        nofile: (nofile[0].clone(), nofile[1].clone()),
    }
}

#[test]
fn the_start_script_writes_one_hostfile_line_per_replica() {
    let m = manifests();
    let sts = get(&m, "StatefulSet", "hotlist");
    let replicas = sts["spec"]["replicas"].as_i64().expect("replicas") as usize;
    let service = str_of(&sts["spec"]["serviceName"]);
    let StartedWith { args, hosts, .. } = run_start_script(replicas - 1, None);
    let want: Vec<String> = (0..replicas)
        .map(|i| format!("hotlist-{i}.{service}.prod.svc:2101"))
        .collect();
    assert_eq!(hosts, want);
    let flag = |f: &str| args.iter().position(|a| a == f).map(|i| args[i + 1].clone());
    assert_eq!(args[0], "run");
    assert_eq!(flag("--processes"), Some(replicas.to_string()));
    assert_eq!(flag("--process"), Some((replicas - 1).to_string()), "the pod ordinal");

    // the ConfigMap's job config validates as process `replicas - 1` of that cluster
    let config = str_of(&get(&m, "ConfigMap", "hotlist-config")["data"]["hotlist.toml"]).to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let hostfile = dir.path().join("hosts.txt");
    std::fs::write(&hostfile, hosts.join("\n")).expect("hostfile");
    let overrides = Overrides {
        processes: Some(replicas),
        process: Some(replicas - 1),
        hostfile: Some(hostfile),
        ..Overrides::default()
    };
    let plan = hotlist_dataflow::config::parse(&config, &overrides).expect("the ConfigMap's config validates");
    assert!(
        matches!(plan.sink, SinkPlan::Postgres { .. }),
        "a store every process reaches"
    );
    let mounts = named(
        &sts["spec"]["template"]["spec"]["containers"][0]["volumeMounts"],
        "mountPath",
    );
    let ckpt = plan.checkpoint.expect("checkpointing on");
    assert_eq!(
        Some(ckpt.dir.to_str().expect("utf-8")),
        mounts["checkpoints"].as_str(),
        "checkpoints on the shared volume"
    );
    assert_eq!(flag("--config").as_deref(), Some("/etc/hotlist/hotlist.toml"));
    assert_eq!(mounts["config"].as_str(), Some("/etc/hotlist"));
}

#[test]
fn dockerfile_and_systemd_unit_are_shaped_right() {
    let docker = std::fs::read_to_string(root().join("Dockerfile")).expect("Dockerfile");
    let froms: Vec<&str> = docker.lines().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(froms.len(), 2, "multi-stage: build, then run: {froms:?}");
    assert!(
        froms[0].ends_with(" AS build") && froms[1].contains("slim"),
        "{froms:?}"
    );
    assert!(docker.contains("cargo build --release --locked -p hotlist"));
    assert!(docker.contains("COPY --from=build /usr/local/bin/hotlist /usr/local/bin/hotlist"));
    assert!(docker.contains("ENTRYPOINT [\"hotlist\"]"));
    let unit = std::fs::read_to_string(root().join("deploy/systemd/hotlist@.service")).expect("unit");
    let exec = unit.lines().find(|l| l.starts_with("ExecStart=")).expect("ExecStart");
    for part in [
        "run --config",
        "--processes ${HOTLIST_PROCESSES}",
        "--process %i",
        "--hostfile",
    ] {
        assert!(exec.contains(part), "ExecStart has {part}: {exec}");
    }
    assert!(unit.contains("Restart=on-failure"));
    let env = std::fs::read_to_string(root().join("deploy/systemd/cluster.env")).expect("cluster.env");
    assert!(env.lines().any(|l| l.starts_with("HOTLIST_PROCESSES=")));
}

/// The object-storage overlay (`deploy/k8s/s3`): it builds on the base, patches only what
/// the base has (its ConfigMap, its StatefulSet, its checkpoint claim, which it deletes), and
/// its job config validates as the same cluster with checkpoints in a bucket, written to the
/// pods' own checkpoint mount (an emptyDir), with credentials from a Secret.
#[test]
fn the_object_storage_overlay_patches_the_base() {
    let base = manifests();
    let dir = root().join("deploy/k8s/s3");
    let load = |name: &str| {
        let text = std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        YamlLoader::load_from_str(&text)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .remove(0)
    };
    let kust = load("kustomization.yaml");
    assert_eq!(str_of(&kust["resources"][0]), "../", "built on the base");
    let patches: Vec<String> = kust["patches"]
        .as_vec()
        .expect("patches")
        .iter()
        .map(|p| str_of(&p["path"]).to_string())
        .collect();
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("deploy/k8s/s3")
        .filter_map(|e| e.ok()?.file_name().to_str().map(str::to_string))
        .filter(|f| f.ends_with(".yaml") && f != "kustomization.yaml")
        .collect();
    files.sort();
    let mut listed = patches.clone();
    listed.sort();
    assert_eq!(listed, files, "every patch file is listed");
    for p in &patches {
        let doc = load(p);
        let (kind, name) = (str_of(&doc["kind"]), str_of(&doc["metadata"]["name"]));
        assert!(
            base.contains_key(&(kind.to_string(), name.to_string())),
            "{p}: patches {kind} {name}, which the base does not have"
        );
    }
    assert_eq!(str_of(&load("no-checkpoint-claim.yaml")["$patch"]), "delete");
    let sts = load("statefulset.yaml");
    let pod = &sts["spec"]["template"]["spec"];
    assert_eq!(
        str_of(&pod["containers"][0]["envFrom"][0]["secretRef"]["name"]),
        "hotlist-s3"
    );
    let volumes = pod["volumes"].as_vec().expect("volumes");
    let ckpt_volume = volumes
        .iter()
        .find(|v| str_of(&v["name"]) == "checkpoints")
        .expect("the checkpoints volume");
    assert!(ckpt_volume["emptyDir"].as_hash().is_some(), "an emptyDir per pod");
    assert!(ckpt_volume["persistentVolumeClaim"].is_null(), "the claim is dropped");
    // the patched config validates as process 2 of the 3-process cluster
    let base_sts = get(&base, "StatefulSet", "hotlist");
    let replicas = base_sts["spec"]["replicas"].as_i64().expect("replicas") as usize;
    let config = str_of(&load("configmap.yaml")["data"]["hotlist.toml"]).to_string();
    let tmp = tempfile::tempdir().expect("tempdir");
    let hostfile = tmp.path().join("hosts.txt");
    let hosts: Vec<String> = (0..replicas)
        .map(|i| format!("hotlist-{i}.hotlist-cluster.prod.svc:2101"))
        .collect();
    std::fs::write(&hostfile, hosts.join("\n")).expect("hostfile");
    let overrides = Overrides {
        processes: Some(replicas),
        process: Some(replicas - 1),
        hostfile: Some(hostfile),
        ..Overrides::default()
    };
    let plan = hotlist_dataflow::config::parse(&config, &overrides).expect("the overlay's config validates");
    let ckpt = plan.checkpoint.expect("checkpointing on");
    assert!(
        ckpt.remote.is_some_and(|r| r.url().starts_with("s3://")),
        "checkpoints in a bucket"
    );
    let mounts = named(
        &base_sts["spec"]["template"]["spec"]["containers"][0]["volumeMounts"],
        "mountPath",
    );
    assert_eq!(
        Some(ckpt.dir.to_str().expect("utf-8")),
        mounts["checkpoints"].as_str(),
        "the local checkpoint directory is the pods' checkpoint mount"
    );
}

/// The paths a router serves: the `.route("PATH"` calls of `file` (a server source file).
fn routes_of(file: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    text.split(".route(")
        .skip(1)
        .filter_map(|rest| rest.trim_start().strip_prefix('"')?.split('"').next())
        .map(str::to_string)
        .collect()
}

/// The probes of the manifests ask what they mean and are served: the serving pods' liveness
/// probe is `/livez` (alive whatever the store does: a store outage must not restart every
/// pod, throwing their cached lists away) and their readiness probe `/readyz` (the store is
/// fresh), both routes of `hotlist serve`'s router on the container's serving port; the job's
/// HTTP probes are routes of its metrics endpoint on the port `--metrics-addr` binds.
#[test]
fn probes_are_served_by_the_endpoints_they_name() {
    let m = manifests();
    let serve_routes = routes_of("server/src/lib.rs");
    assert!(
        serve_routes.contains(&"/v1/top".to_string()),
        "read the route table: {serve_routes:?}"
    );
    let serve = &get(&m, "Deployment", "hotlist-serve")["spec"]["template"]["spec"]["containers"][0];
    let ports = named(&serve["ports"], "containerPort");
    for (probe, path) in [("livenessProbe", "/livez"), ("readinessProbe", "/readyz")] {
        let get = &serve[probe]["httpGet"];
        assert_eq!(get["path"].as_str(), Some(path), "hotlist-serve {probe}");
        assert!(
            serve_routes.iter().any(|r| r == path),
            "{path} is a route of serve: {serve_routes:?}"
        );
        assert!(
            ports.contains_key(str_of(&get["port"])),
            "{probe} on a port the container has"
        );
    }

    let metrics_routes = routes_of("server/src/metrics_endpoint.rs");
    let job = &get(&m, "StatefulSet", "hotlist")["spec"]["template"]["spec"]["containers"][0];
    let job_ports = named(&job["ports"], "containerPort");
    let metrics_port = job_ports["metrics"].as_i64().expect("metrics port");
    assert!(
        str_of(&job["args"][0]).contains(&format!("--metrics-addr 0.0.0.0:{metrics_port}")),
        "the metrics endpoint listens on the metrics port"
    );
    for probe in ["livenessProbe", "readinessProbe"] {
        let get = &job[probe]["httpGet"];
        if let Some(path) = get["path"].as_str() {
            assert!(
                metrics_routes.iter().any(|r| r == path),
                "job {probe}: {path} is served: {metrics_routes:?}"
            );
            assert_eq!(str_of(&get["port"]), "metrics", "job {probe}");
        }
    }
}

/// The job runs with enough open files: the systemd unit sets `LimitNOFILE` (systemd's default
/// soft limit is 1024), and the pods' start script raises the soft limit to the hard one the
/// runtime grants (a pod spec cannot set it): started under a soft limit of 256, `hotlist`
/// runs with soft = hard.
#[test]
fn the_job_gets_enough_open_files() {
    let unit = std::fs::read_to_string(root().join("deploy/systemd/hotlist@.service")).expect("unit");
    let nofile: u64 = unit
        .lines()
        .find_map(|l| l.strip_prefix("LimitNOFILE="))
        .expect("the unit sets LimitNOFILE")
        .trim()
        .parse()
        .expect("LimitNOFILE is a number");
    assert!(
        nofile >= 8192,
        "LimitNOFILE={nofile} is too few for checkpoints, panes and sockets"
    );

    let hard = String::from_utf8(
        std::process::Command::new("/bin/sh")
            .args(["-c", "ulimit -H -n"])
            .output()
            .expect("sh")
            .stdout,
    )
    .expect("utf-8");
    let hard = hard.trim();
    if hard != "unlimited" && hard.parse::<u64>().is_ok_and(|h| h <= 256) {
        return; // nothing to raise here: the check needs a hard limit above 256
    }
    let started = run_start_script(0, Some(256));
    assert_eq!(
        started.nofile,
        (hard.to_string(), hard.to_string()),
        "the start script raises the soft open-file limit to the hard one"
    );
}
