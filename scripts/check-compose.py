#!/usr/bin/env python3
"""Cheap check of docker-compose.yml without a Docker engine.

    python3 scripts/check-compose.py [--tollgate target/debug/tollgate]

1. The file parses as YAML (PyYAML; when it is not installed, `pip install --target <tmp>` is
   tried; when pip is unavailable too, a minimal line-based check runs instead).
2. It names only files that exist: build contexts and Dockerfiles, bind-mounted sources, env_file
   entries; and depends_on names only defined services.
3. With --tollgate BIN: the gateway config the compose file mounts is validated with
   `BIN check`, after mapping service hostnames to 127.0.0.1 (backends are resolved when the
   config is loaded, and compose service names do not resolve outside compose).

Exit status 0 when everything holds, 1 otherwise (every problem is printed).
"""

import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMPOSE = os.path.join(ROOT, "docker-compose.yml")
problems = []


def problem(msg):
    problems.append(msg)
    print(f"  problem: {msg}")


def load_yaml_module():
    try:
        import yaml  # noqa: F401

        return yaml
    except ImportError:
        pass
    target = tempfile.mkdtemp(prefix="check-compose-pyyaml.")
    atexit.register(shutil.rmtree, target, ignore_errors=True)
    try:
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             "--target", target, "pyyaml"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120,
        )
        sys.path.insert(0, target)
        import yaml  # noqa: F401

        return yaml
    except Exception:
        return None


def exists(rel, what):
    path = rel if os.path.isabs(rel) else os.path.join(ROOT, rel)
    if not os.path.exists(path):
        problem(f"{what}: {rel} does not exist")
        return None
    return path


def bind_source(volume):
    """Host path of a bind mount (short or long syntax), or None for named volumes."""
    if isinstance(volume, dict):
        if volume.get("type") == "bind":
            return volume.get("source")
        return None
    src = str(volume).split(":", 1)[0]
    if src.startswith((".", "/", "~")):
        return src
    return None


def full_check(yaml, text):
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        problem(f"docker-compose.yml does not parse: {e}")
        return {}
    if not isinstance(doc, dict) or not isinstance(doc.get("services"), dict) or not doc["services"]:
        problem("docker-compose.yml has no services mapping")
        return {}
    services = doc["services"]
    mounts = {}
    for name, svc in services.items():
        where = f"services.{name}"
        if not isinstance(svc, dict):
            problem(f"{where} is not a mapping")
            continue
        if "image" not in svc and "build" not in svc:
            problem(f"{where} has neither image nor build")
        build = svc.get("build")
        if build is not None:
            context = build if isinstance(build, str) else build.get("context", ".")
            ctx = exists(context, f"{where}.build.context")
            dockerfile = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
            if ctx:
                exists(os.path.join(context, dockerfile), f"{where}.build.dockerfile")
        for i, vol in enumerate(svc.get("volumes") or []):
            src = bind_source(vol)
            if src:
                if exists(src, f"{where}.volumes[{i}]"):
                    target = vol.get("target") if isinstance(vol, dict) else str(vol).split(":")[1]
                    mounts[target] = src
        env_files = svc.get("env_file") or []
        for f in [env_files] if isinstance(env_files, str) else env_files:
            exists(f if isinstance(f, str) else f.get("path", ""), f"{where}.env_file")
        deps = svc.get("depends_on") or []
        for dep in deps if isinstance(deps, list) else deps.keys():
            if dep not in services:
                problem(f"{where}.depends_on names unknown service {dep!r}")
    print(f"  parsed with PyYAML: {len(services)} services ({', '.join(services)})")
    return {"services": services, "mounts": mounts}


def minimal_check(text):
    """No PyYAML: structural sanity plus every ./path the file mentions must exist."""
    if "\t" in text:
        problem("docker-compose.yml contains tab characters")
    if not re.search(r"^services:\s*$", text, re.M):
        problem("docker-compose.yml has no top-level services:")
    paths = set(re.findall(r"(?<![\w/.])(\./[\w./-]+)", text))
    for p in sorted(paths):
        exists(p, "referenced path")
    for m in re.finditer(r"^\s*dockerfile:\s*(\S+)", text, re.M):
        exists(m.group(1), "dockerfile")
    if re.search(r"^\s*build:\s*\.\s*$", text, re.M):
        exists("Dockerfile", "build: . needs ./Dockerfile")
    print(f"  minimal check (PyYAML unavailable): {len(paths)} referenced paths")
    return {}


def check_gateway_config(tollgate, parsed):
    config = None
    for target, src in parsed.get("mounts", {}).items():
        if target.endswith("gateway.yaml"):
            config = os.path.join(ROOT, src)
    if config is None:
        config = os.path.join(ROOT, "demo", "compose-gateway.yaml")
    text = open(config).read()
    hosts = set(parsed.get("services", {}).keys()) or set(
        re.findall(r"^  ([a-z0-9-]+):\s*$", open(COMPOSE).read(), re.M))
    for host in sorted(hosts, key=len, reverse=True):
        text = re.sub(rf"(?<![\w.-]){re.escape(host)}(?=:\d)", "127.0.0.1", text)
    text = re.sub(r'(secret_file:\s*)"[^"]*jwt-hs256.secret"',
                  rf'\g<1>"{os.path.join(ROOT, "demo", "jwt-hs256.secret")}"', text)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(text)
        tmp = f.name
    try:
        r = subprocess.run([tollgate, "check", "-c", tmp], capture_output=True, text=True)
    finally:
        os.unlink(tmp)
    if r.returncode != 0:
        problem(f"{os.path.relpath(config, ROOT)} fails `tollgate check` "
                f"(hostnames mapped to 127.0.0.1):\n{r.stdout}{r.stderr}")
    else:
        print(f"  {os.path.relpath(config, ROOT)}: tollgate check ok (hostnames mapped to 127.0.0.1)")


def main():
    args = sys.argv[1:]
    tollgate = None
    if args[:1] == ["--tollgate"] and len(args) == 2:
        tollgate = args[1]
    elif args:
        print(__doc__)
        return 2
    print("checking docker-compose.yml")
    if not os.path.exists(COMPOSE):
        problem("docker-compose.yml does not exist")
        return 1
    text = open(COMPOSE).read()
    yaml = load_yaml_module()
    parsed = full_check(yaml, text) if yaml else minimal_check(text)
    if tollgate:
        if os.path.exists(tollgate):
            check_gateway_config(tollgate, parsed)
        else:
            print(f"  skipped the gateway config check: {tollgate} not built")
    if problems:
        print(f"docker-compose.yml: {len(problems)} problem(s)")
        return 1
    print("docker-compose.yml: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
