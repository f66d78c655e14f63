#!/usr/bin/env bash
# Offline check of the Kubernetes deployment files (deploy/kubernetes), no cluster needed:
#
#   scripts/check-kubernetes.sh [TOLLGATE_BIN]    (default: ${CARGO_TARGET_DIR:-target}/debug/tollgate)
#
# 1. Every file parses as YAML; every kustomization.yaml names only files and folders that exist
#    and uses only `resources` (plus images, namespace, labels, commonAnnotations): overlays add
#    complete objects, no patches, so each file below is the object that gets applied; every
#    object file is listed by some kustomization; no kustomization renders two objects of the same
#    kind and name. Where kubectl is installed (optional), `kubectl kustomize` of each must render
#    the same objects.
# 2. Every other file is validated with kubernetes-validate --strict (unknown fields fail) against
#    the Kubernetes API schemas of $KUBE_VERSIONS (the oldest and newest versions we claim).
# 3. Cross-checks of what the schemas cannot see, per kustomization: the Deployment `tollgate`
#    mounts ConfigMap `tollgate-config` as a folder (no subPath) where its `-c` path points; every
#    `*_env` the config names is set in the container, from a Secret key that exists; the probes
#    hit /readyz and /healthz on the admin port and the proxy port is a container port;
#    terminationGracePeriodSeconds exceeds preStop sleep + server.grace_period +
#    server.graceful_shutdown_timeout (either spelling); every Service selects pods that have its target ports;
#    in overlays/try, Redis and the backends are Services of the overlay.
# 4. The ConfigMap's gateway.yaml passes `TOLLGATE_BIN check`, with dummy values for the secret
#    environment variables and backend Service names mapped to 127.0.0.1 (backends are resolved
#    when the config loads; Service names do not resolve outside the cluster).
#
# Python packages come from the repository's venv (scripts/venv.sh: .venv/, made on first use,
# pinned versions from PyPI; offline once warm). Exit status 0 when everything holds, 1 otherwise
# (each problem is printed with its file).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${1:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/tollgate}
[[ $BIN == /* ]] || BIN=$PWD/$BIN
cd "$ROOT"
KUBE_VERSIONS=${KUBE_VERSIONS:-"1.25.0 1.37.0"}
REQUIREMENTS=(kubernetes-validate==1.37.0 PyYAML==6.0.4)

if [[ ! -x $BIN ]]; then
  echo "check-kubernetes: $BIN not built (cargo build --bin tollgate first)" >&2
  exit 1
fi
VENV=$("$ROOT/scripts/venv.sh" "${REQUIREMENTS[@]}") || {
  echo "check-kubernetes: no Python venv with ${REQUIREMENTS[*]}" >&2
  exit 1
}

exec "$VENV/bin/python" - "$ROOT" "$BIN" "$VENV" "$KUBE_VERSIONS" <<'PY'
import ipaddress
import os
import posixpath
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

ROOT, BIN, VENV, KUBE_VERSIONS = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split()
KDIR = os.path.join(ROOT, "deploy", "kubernetes")
KUSTOMIZATION_NAMES = {"kustomization.yaml", "kustomization.yml", "Kustomization"}
KUSTOMIZATION_KEYS = {"apiVersion", "kind", "resources", "images", "namespace", "labels",
                      "commonAnnotations"}
problems = []


def rel(path):
    return os.path.relpath(path, ROOT)


def problem(where, msg):
    line = f"{where}: {msg}"
    if line not in problems:  # the base's problems show again in every overlay: once is enough
        problems.append(line)
        print(f"  FAIL {line}")


# ---- 1. parse, kustomizations --------------------------------------------------------------------
files = sorted(
    os.path.join(d, f)
    for d, _, names in os.walk(KDIR)
    for f in names
    if f.endswith((".yaml", ".yml")) or f in KUSTOMIZATION_NAMES
)
docs = {}
for path in files:
    try:
        with open(path) as f:
            docs[path] = [d for d in yaml.safe_load_all(f) if d is not None]
    except yaml.YAMLError as e:
        problem(rel(path), f"not valid YAML: {e}")
kustomizations = [p for p in files if os.path.basename(p) in KUSTOMIZATION_NAMES]
objects = [p for p in files if p not in kustomizations]
print(f"deploy/kubernetes: {len(kustomizations)} kustomizations, {len(objects)} object files")
for path in objects:
    for d in docs.get(path, []):
        if not isinstance(d, dict) or not d.get("kind") or not d.get("apiVersion"):
            problem(rel(path), "not a Kubernetes object (no kind/apiVersion)")

listed = set()
rendered = {}  # kustomization dir -> [(file, object)]


def render(kdir, stack=()):
    if kdir in rendered:
        return rendered[kdir]
    kfile = next((os.path.join(kdir, n) for n in KUSTOMIZATION_NAMES
                  if os.path.exists(os.path.join(kdir, n))), None)
    if kfile is None:
        problem(rel(kdir), "is not a kustomization (no kustomization.yaml)")
        return []
    if kdir in stack:
        problem(rel(kfile), "includes itself")
        return []
    k = (docs.get(kfile) or [{}])[0]
    out = []
    for key in sorted(set(k) - KUSTOMIZATION_KEYS):
        problem(rel(kfile), f"`{key}:` is not understood by scripts/check-kubernetes.sh: add "
                "complete objects to `resources:` instead (or teach the check)")
    for entry in k.get("resources") or []:
        target = os.path.normpath(os.path.join(kdir, entry))
        if os.path.isdir(target):
            out += render(target, stack + (kdir,))
        elif os.path.isfile(target):
            listed.add(target)
            out += [(target, d) for d in docs.get(target, [])]
        else:
            problem(rel(kfile), f"resources: {entry} does not exist")
    seen = {}
    for path, d in out:
        ident = (d.get("kind"), (d.get("metadata") or {}).get("name"))
        if ident in seen:
            problem(rel(kfile), f"{ident[0]}/{ident[1]} twice ({rel(seen[ident])}, {rel(path)})")
        seen[ident] = path
    rendered[kdir] = out
    return out


for kfile in kustomizations:
    render(os.path.dirname(kfile))
for path in objects:
    if path not in listed:
        problem(rel(path), "is listed in no kustomization.yaml (it would never be applied)")

# Where kubectl exists (it is optional), its kustomize must agree with the reading above.
kubectl = shutil.which("kubectl")
for kdir, objs in sorted(rendered.items()):
    if kubectl is None:
        print("  kubectl not found: `kubectl kustomize` comparison skipped")
        break
    r = subprocess.run([kubectl, "kustomize", kdir], capture_output=True, text=True)
    where = rel(os.path.join(kdir, "kustomization.yaml"))
    if r.returncode != 0:
        problem(where, f"kubectl kustomize fails: {r.stderr.strip()}")
        continue
    theirs = sorted((d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(r.stdout) if d)
    ours = sorted((d.get("kind"), (d.get("metadata") or {}).get("name")) for _, d in objs)
    if theirs != ours:
        problem(where, f"kubectl kustomize renders {theirs}, this check read {ours}")
    else:
        print(f"  {where}: kubectl kustomize renders the same {len(ours)} objects")

# ---- 2. schemas ----------------------------------------------------------------------------------
validator = os.path.join(VENV, "bin", "kubernetes-validate")
for version in KUBE_VERSIONS:
    r = subprocess.run([validator, "--strict", "-k", version, *[rel(p) for p in objects]],
                       cwd=ROOT, capture_output=True, text=True)
    lines = (r.stdout + r.stderr).strip().splitlines()
    bad = [l for l in lines if not l.startswith("INFO")]
    # An unknown kind or apiVersion is only a warning to kubernetes-validate: a typo there would
    # validate nothing, so it fails here (every object in deploy/kubernetes is a built-in kind).
    if r.returncode != 0 or any(l.startswith("ERROR") or "find schema" in l for l in bad):
        for l in bad or lines:
            problem(f"kubernetes-validate --strict -k {version}", l)
    else:
        for l in bad:  # warnings (deprecated APIs): shown, not fatal
            print(f"  {l}")
        print(f"  kubernetes-validate --strict -k {version}: {len(objects)} files valid")

# ---- 3. cross-checks -----------------------------------------------------------------------------


def find(objs, kind, name):
    return next(((p, d) for p, d in objs if d.get("kind") == kind
                 and (d.get("metadata") or {}).get("name") == name), (None, None))


def env_names(node):
    """Every `*_env` value of the gateway config: the environment it reads."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key.endswith("_env") and isinstance(value, str):
                yield value
            else:
                yield from env_names(value)
    elif isinstance(node, list):
        for item in node:
            yield from env_names(item)


DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def drain_seconds(server, name, default):
    """`server.<name>` ("10s", "1m") or its old spelling `<name>_s` (whole seconds), in seconds."""
    if name + "_s" in server:
        return int(server[name + "_s"])
    text = str(server.get(name, f"{default}s")).strip()
    m = re.fullmatch(r"(\d+)(ms|s|m|h|d)", text)
    if not m:
        raise SystemExit(f"server.{name}: cannot read duration {text!r}")
    return int(m.group(1)) * DURATION_UNITS[m.group(2)]


def port_of(addr):
    return int(str(addr).rsplit(":", 1)[1])


def host_port(addr):
    host, port = str(addr).rsplit(":", 1)
    return host.strip("[]"), int(port)


def is_ip(host):
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def listen_addr(entry):
    return entry.get("addr") if isinstance(entry, dict) else entry


def config_hosts(cfg):
    """(where, host, port) of every Redis and backend address the config names."""
    redis = cfg.get("redis") or {}
    for url in [redis.get("url")] + list(redis.get("urls") or []):
        if url:
            m = re.match(r"^rediss?://(?:[^@/]*@)?(\[[^\]]+\]|[^:/]+)(?::(\d+))?", url)
            if m:
                yield "redis", m.group(1).strip("[]"), int(m.group(2) or 6379)
    for name, up in (cfg.get("upstreams") or {}).items():
        for backend in up.get("backends") or []:
            host, port = host_port(backend)
            yield f"upstreams.{name}", host, port


def pod_ports(pod_spec):
    return {(p.get("name"), p.get("containerPort")) for c in pod_spec.get("containers") or []
            for p in c.get("ports") or []}


configs = {}  # gateway.yaml text -> where it came from
for kdir, objs in sorted(rendered.items()):
    where = rel(os.path.join(kdir, "kustomization.yaml"))
    dpath, dep = find(objs, "Deployment", "tollgate")
    cpath, cm = find(objs, "ConfigMap", "tollgate-config")
    if dep is None or cm is None:
        problem(where, "renders no Deployment tollgate and ConfigMap tollgate-config")
        continue
    text = (cm.get("data") or {}).get("gateway.yaml")
    if not text:
        problem(rel(cpath), "ConfigMap tollgate-config has no gateway.yaml key")
        continue
    configs.setdefault(text, rel(cpath))
    cfg = yaml.safe_load(text)
    pod = dep["spec"]["template"]["spec"]
    c = next((c for c in pod.get("containers") or [] if c.get("name") == "tollgate"), None)
    if c is None:
        problem(rel(dpath), "no container named tollgate")
        continue
    d = rel(dpath)
    args = list(c.get("command") or []) + list(c.get("args") or [])
    cfg_path = args[args.index("-c") + 1] if "-c" in args[:-1] else "/etc/tollgate/gateway.yaml"
    volumes = {v.get("name"): v for v in pod.get("volumes") or []}
    mount = next((m for m in c.get("volumeMounts") or []
                  if ((volumes.get(m.get("name")) or {}).get("configMap") or {}).get("name")
                  == "tollgate-config"), None)
    if mount is None:
        problem(d, "does not mount ConfigMap tollgate-config")
    elif mount.get("subPath"):
        problem(d, "mounts tollgate-config with subPath: such a mount never sees ConfigMap "
                "updates; mount the folder")
    else:
        cm_vol = volumes[mount["name"]]["configMap"]
        key = posixpath.relpath(cfg_path, mount["mountPath"])
        items = {i["path"]: i["key"] for i in cm_vol.get("items") or []}
        if (items.get(key) if items else key) != "gateway.yaml":
            problem(d, f"-c {cfg_path} is not the key gateway.yaml of the ConfigMap mounted at "
                    f"{mount['mountPath']}")
    env = {e["name"]: e for e in c.get("env") or []}
    for var in sorted(set(env_names(cfg))):
        if var not in env:
            problem(d, f"gateway.yaml reads ${var}, which the container does not set")
            continue
        ref = (env[var].get("valueFrom") or {}).get("secretKeyRef")
        if ref:
            spath, secret = find(objs, "Secret", ref.get("name"))
            keys = set((secret or {}).get("data") or {}) | set((secret or {}).get("stringData") or {})
            if secret is None:
                problem(d, f"${var} comes from Secret {ref.get('name')}, which {where} lacks")
            elif ref.get("key") not in keys:
                problem(rel(spath), f"has no key {ref.get('key')} (needed for ${var})")
    admin = cfg.get("admin") or {}
    admin_port = port_of(admin["listen"]) if admin.get("listen") else None
    if admin_port is None or not str(admin["listen"]).startswith(("0.0.0.0:", "[::]:")):
        problem(cpath and rel(cpath), "admin.listen must be 0.0.0.0:PORT (probes and Prometheus "
                "reach the pod address)")
    ports = pod_ports(pod)
    by_name = {n: p for n, p in ports}
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = (c.get(probe) or {}).get("httpGet") or {}
        port = by_name.get(get.get("port"), get.get("port"))
        if get.get("path") != path or port != admin_port:
            problem(d, f"{probe} must GET {path} on the admin port {admin_port}")
    for entry in cfg.get("listen") or []:
        if port_of(listen_addr(entry)) not in {p for _, p in ports}:
            problem(d, f"listen {listen_addr(entry)} is not a container port")
    server = cfg.get("server") or {}
    sleep = 0
    pre = ((c.get("lifecycle") or {}).get("preStop") or {})
    if "sleep" in pre:
        sleep = int(pre["sleep"].get("seconds", 0))
    elif "exec" in pre:
        cmd = pre["exec"].get("command") or []
        if len(cmd) == 2 and cmd[0] == "sleep":
            sleep = int(cmd[1])
    if sleep == 0:
        problem(d, "no preStop sleep: the pod may stop accepting before it leaves the endpoints")
    need = (sleep + drain_seconds(server, "grace_period", 10)
            + drain_seconds(server, "graceful_shutdown_timeout", 5))
    grace = int(pod.get("terminationGracePeriodSeconds", 30))
    if grace <= need:
        problem(d, f"terminationGracePeriodSeconds {grace} must exceed preStop {sleep} + "
                f"server.grace_period + server.graceful_shutdown_timeout = {need}")
    deployments = [dd for _, dd in objs if dd.get("kind") in ("Deployment", "StatefulSet")]
    services = {}
    for spath, svc in objs:
        if svc.get("kind") != "Service":
            continue
        name = svc["metadata"]["name"]
        services[name] = svc
        sel = (svc.get("spec") or {}).get("selector") or {}
        pods = [dd["spec"]["template"] for dd in deployments
                if sel and all((dd["spec"]["template"]["metadata"].get("labels") or {}).get(k) == v
                               for k, v in sel.items())]
        if not pods:
            problem(rel(spath), f"Service {name} selects no pods of {where}")
            continue
        for p in svc["spec"].get("ports") or []:
            target = p.get("targetPort", p.get("port"))
            for t in pods:
                named = dict(pod_ports(t["spec"]))
                if target not in named and target not in named.values():
                    problem(rel(spath), f"Service {name} targets port {target}, which its pods lack")
    for field, host, port in config_hosts(cfg):
        if is_ip(host) or "." in host:
            continue
        svc = services.get(host)
        if svc is None:
            if os.path.basename(kdir) == "try":
                problem(where, f"gateway.yaml {field} names {host}:{port}, not a Service here")
            continue
        if port not in [p.get("port") for p in svc["spec"].get("ports") or []]:
            problem(where, f"gateway.yaml {field} names {host}:{port}; Service {host} has no port {port}")
    print(f"  {where}: {len(objs)} objects, cross-checks done")

# ---- 4. tollgate check ---------------------------------------------------------------------------
for text, where in configs.items():
    cfg = yaml.safe_load(text)
    mapped = text
    names = []
    for field, host, port in config_hosts(cfg):
        if field.startswith("upstreams.") and not is_ip(host):
            mapped = mapped.replace(f'"{host}:{port}"', f'"127.0.0.1:{port}"')
            names.append(host)
    env = dict(os.environ)
    for var in env_names(cfg):
        env[var] = "dummy-value-from-check-kubernetes-0123456789abcdef"
    with tempfile.TemporaryDirectory(prefix="tollgate-k8s-config.") as tmp:
        path = os.path.join(tmp, "gateway.yaml")
        with open(path, "w") as f:
            f.write(mapped)
        r = subprocess.run([BIN, "check", "-c", path], cwd=tmp, env=env, capture_output=True,
                           text=True)
    out = (r.stdout + r.stderr).strip()
    if r.returncode != 0:
        problem(f"{where} (gateway.yaml)", "fails `tollgate check`:\n    " + out.replace("\n", "\n    "))
    else:
        mapped_note = f", {', '.join(sorted(set(names)))} mapped to 127.0.0.1" if names else ""
        print(f"  {where}: gateway.yaml passes tollgate check (dummy secrets{mapped_note})")

if problems:
    print(f"deploy/kubernetes: {len(problems)} problem(s)")
    sys.exit(1)
print("deploy/kubernetes: ok")
PY
