#!/usr/bin/env bash
# Checks the Kubernetes manifests in deploy/kubernetes (or DIR):
#
#   scripts/validate-manifests.sh [DIR]
#
# 1. kubernetes-validate (PyPI, pinned in .ci/run) in strict mode, so an
#    unknown or misspelled field is an error, against the oldest Kubernetes
#    the manifests are written for (1.30) and the newest the validator knows
#    (1.37). A resource it has no schema for is an error too, not the
#    validator's warning: a wrong apiVersion would otherwise pass unchecked.
#    agent-sandbox's custom resources (Sandbox, SandboxTemplate,
#    SandboxWarmPool, SandboxClaim) are checked by hand against their
#    v1beta1 fields (their CRDs are published only on GitHub, out of CI's
#    reach); pod templates and volumeClaimTemplates are validated as the
#    Pod and PersistentVolumeClaims the controller makes, a template's
#    networkPolicy as a NetworkPolicy; a pool's template and a claim's pool
#    must be in the directory.
#    The Kustomization's resources must exist.
# 2. What the sandbox needs of every pod: every container runs as uid and
#    gid 10001 (the socket's directory is 0700, so a harness must be the
#    daemon's user), the pod is user-namespaced, and the agentd container has
#    the Localhost seccomp profile profiles/agentd.json, an unmasked /proc,
#    AppArmor unconfined, no capabilities, and the readiness probe
#    `agentctl status --require-sandbox`.
#
# The validator: $AGENTD_TEST_KUBE_VALIDATE, else kubernetes-validate on
# PATH; the Python beside it (its venv's, which has PyYAML) runs the rest.
# Exits non-zero on any error.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-$repo/deploy/kubernetes}"
versions="1.30.0 1.37.0"

kv="${AGENTD_TEST_KUBE_VALIDATE:-$(command -v kubernetes-validate || true)}"
if [ -z "$kv" ] || [ ! -x "$kv" ]; then
  echo "validate-manifests: kubernetes-validate not found (pip install kubernetes-validate==1.37.0, or set AGENTD_TEST_KUBE_VALIDATE)" >&2
  exit 2
fi
py="$(dirname "$kv")/python"
[ -x "$py" ] || py=python3
if ! "$py" -c 'import yaml' 2>/dev/null; then
  echo "validate-manifests: $py has no PyYAML (use the venv kubernetes-validate is installed in)" >&2
  exit 2
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

status=0

# Step 1a: what kubernetes-validate can check, one file per manifest (the
# Sandbox's pod and claims in a file of their own), written to $work; the
# Sandbox's own fields and the Kustomization checked here.
"$py" - "$dir" "$work" <<'PY' || status=1
import os, sys, yaml

src, out = sys.argv[1], sys.argv[2]
errors = []

# A key given twice in one mapping: YAML keeps the last one silently (the
# validator would see only it); the API server's strict decoding refuses it.
class Loader(yaml.SafeLoader):
    def construct_mapping(self, node, deep=False):
        keys = [self.construct_object(k, deep=deep) for k, _ in node.value]
        for key in {k for k in keys if keys.count(k) > 1}:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", node.start_mark)
        return super().construct_mapping(node, deep=deep)

def only(where, value, keys):
    if not isinstance(value, dict):
        errors.append(f"{where}: not a mapping")
        return {}
    for key in value:
        if key not in keys:
            errors.append(f"{where}: unknown field {key!r} (known: {', '.join(sorted(keys))})")
    return value

# The Sandbox's fields, from agent-sandbox's api/v1beta1 (SandboxSpec with
# SandboxBlueprint and Lifecycle inlined).
def sandbox(name, doc):
    only(name, doc, {"apiVersion", "kind", "metadata", "spec"})
    spec = only(f"{name}: spec", doc.get("spec"), {
        "podTemplate", "volumeClaimTemplates", "service",
        "shutdownTime", "shutdownPolicy", "operatingMode"})
    if spec.get("operatingMode", "Running") not in ("Running", "Suspended"):
        errors.append(f"{name}: spec.operatingMode must be Running or Suspended")
    if spec.get("shutdownPolicy", "Retain") not in ("Delete", "Retain"):
        errors.append(f"{name}: spec.shutdownPolicy must be Delete or Retain")
    if not isinstance(spec.get("service", False), bool):
        errors.append(f"{name}: spec.service must be a boolean")
    return pod_and_claims(name, doc, spec)

def enum(where, value, allowed):
    if value is not None and value not in allowed:
        errors.append(f"{where} must be one of {', '.join(allowed)}")

def ref(where, value):
    value = only(where, value, {"name"})
    if not isinstance(value.get("name"), str) or not value.get("name"):
        errors.append(f"{where}.name is required")
    return value.get("name")

# agent-sandbox's extensions (extensions.agents.x-k8s.io/v1beta1), their
# spec fields as its api/v1beta1 types give them. The template's pod and
# claims are validated as the Pod and claims its Sandboxes get; its
# network policy as the NetworkPolicy the controller makes of it.
templates, pools = set(), []

def sandbox_template(name, doc):
    only(name, doc, {"apiVersion", "kind", "metadata", "spec"})
    spec = only(f"{name}: spec", doc.get("spec"), {
        "podTemplate", "volumeClaimTemplates", "service", "networkPolicy", "networkPolicyManagement",
        "envVarsInjectionPolicy", "volumeClaimTemplatesPolicy"})
    enum(f"{name}: spec.networkPolicyManagement", spec.get("networkPolicyManagement"), ("Managed", "Unmanaged"))
    enum(f"{name}: spec.envVarsInjectionPolicy", spec.get("envVarsInjectionPolicy"),
         ("Allowed", "Overrides", "Disallowed"))
    enum(f"{name}: spec.volumeClaimTemplatesPolicy", spec.get("volumeClaimTemplatesPolicy"),
         ("Disallowed", "Allowed", "Overrides"))
    if not isinstance(spec.get("service", False), bool):
        errors.append(f"{name}: spec.service must be a boolean")
    templates.add(doc["metadata"]["name"])
    derived = pod_and_claims(name, doc, spec)
    if "networkPolicy" in spec:
        policy = only(f"{name}: spec.networkPolicy", spec["networkPolicy"], {"ingress", "egress"})
        derived.append({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                        "metadata": {"name": doc["metadata"]["name"]},
                        "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"], **policy}})
    return derived

def sandbox_warm_pool(name, doc):
    only(name, doc, {"apiVersion", "kind", "metadata", "spec"})
    spec = only(f"{name}: spec", doc.get("spec"), {"sandboxTemplateRef", "replicas", "updateStrategy"})
    pools.append((name, doc["metadata"]["name"], ref(f"{name}: spec.sandboxTemplateRef", spec.get("sandboxTemplateRef"))))
    replicas = spec.get("replicas", 1)
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        errors.append(f"{name}: spec.replicas must be a whole number, 0 or more")
    strategy = only(f"{name}: spec.updateStrategy", spec.get("updateStrategy", {}), {"type"})
    enum(f"{name}: spec.updateStrategy.type", strategy.get("type"), ("Recreate", "OnReplenish"))
    return []

def sandbox_claim(name, doc):
    only(name, doc, {"apiVersion", "kind", "metadata", "spec"})
    spec = only(f"{name}: spec", doc.get("spec"), {
        "warmPoolRef", "lifecycle", "additionalPodMetadata", "env", "volumeClaimTemplates"})
    claim_refs.append((name, ref(f"{name}: spec.warmPoolRef", spec.get("warmPoolRef"))))
    life = only(f"{name}: spec.lifecycle", spec.get("lifecycle", {}),
                {"shutdownTime", "ttlSecondsAfterFinished", "shutdownPolicy"})
    enum(f"{name}: spec.lifecycle.shutdownPolicy", life.get("shutdownPolicy"), ("Delete", "DeleteForeground", "Retain"))
    only(f"{name}: spec.additionalPodMetadata", spec.get("additionalPodMetadata", {}), {"labels", "annotations"})
    for i, e in enumerate(spec.get("env", [])):
        e = only(f"{name}: spec.env[{i}]", e, {"name", "value", "containerName"})
        if "name" not in e or "value" not in e:
            errors.append(f"{name}: spec.env[{i}] needs name and value")
    return []

claim_refs = []

def pod_and_claims(name, doc, spec):
    template = only(f"{name}: spec.podTemplate", spec.get("podTemplate"), {"metadata", "spec"})
    meta = only(f"{name}: spec.podTemplate.metadata", template.get("metadata", {}), {"labels", "annotations"})
    pod_spec = template.get("spec")
    if not isinstance(pod_spec, dict):
        errors.append(f"{name}: spec.podTemplate.spec is required")
        pod_spec = {}
    claims, volumes = [], list(pod_spec.get("volumes", []))
    for i, t in enumerate(spec.get("volumeClaimTemplates", [])):
        t = only(f"{name}: spec.volumeClaimTemplates[{i}]", t, {"metadata", "spec"})
        tmeta = only(f"{name}: spec.volumeClaimTemplates[{i}].metadata", t.get("metadata", {}),
                     {"name", "labels", "annotations"})
        claim = f"{tmeta.get('name')}-{doc['metadata']['name']}"
        claims.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                       "metadata": {**tmeta, "name": claim}, "spec": t.get("spec")})
        # As the controller does: a volume named after the template.
        if not any(v.get("name") == tmeta.get("name") for v in volumes):
            volumes.append({"name": tmeta.get("name"), "persistentVolumeClaim": {"claimName": claim}})
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": doc["metadata"]["name"], **meta},
           "spec": {**pod_spec, "volumes": volumes}}
    return [pod] + claims

for name in sorted(os.listdir(src)):
    if not name.endswith((".yaml", ".yml")):
        continue
    with open(os.path.join(src, name)) as f:
        try:
            docs = [d for d in yaml.load_all(f, Loader=Loader) if d]
        except yaml.YAMLError as e:
            errors.append(f"{name}: {e}")
            continue
    plain, derived = [], []
    for doc in docs:
        kind, api = doc.get("kind"), doc.get("apiVersion")
        if (api, kind) == ("kustomize.config.k8s.io/v1beta1", "Kustomization"):
            for r in doc.get("resources", []):
                if not os.path.exists(os.path.join(src, r)):
                    errors.append(f"{name}: resource {r} does not exist")
        elif (api, kind) == ("agents.x-k8s.io/v1beta1", "Sandbox"):
            derived += sandbox(name, doc)
        elif (api, kind) == ("extensions.agents.x-k8s.io/v1beta1", "SandboxTemplate"):
            derived += sandbox_template(name, doc)
        elif (api, kind) == ("extensions.agents.x-k8s.io/v1beta1", "SandboxWarmPool"):
            derived += sandbox_warm_pool(name, doc)
        elif (api, kind) == ("extensions.agents.x-k8s.io/v1beta1", "SandboxClaim"):
            derived += sandbox_claim(name, doc)
        else:
            plain.append(doc)
    if plain:
        with open(os.path.join(out, name), "w") as f:
            yaml.safe_dump_all(plain, f, sort_keys=False)
    if derived:
        with open(os.path.join(out, f"{name}.pod.yaml"), "w") as f:
            yaml.safe_dump_all(derived, f, sort_keys=False)

# What the pools and claims name must be here.
for file, pool, template in pools:
    if template not in templates:
        errors.append(f"{file}: SandboxWarmPool {pool} names SandboxTemplate {template!r}, which is not here")
for file, pool in claim_refs:
    if pool not in {p for _, p, _ in pools}:
        errors.append(f"{file}: SandboxClaim names SandboxWarmPool {pool!r}, which is not here")

for e in errors:
    print(f"ERROR {e}")
sys.exit(1 if errors else 0)
PY

# Step 1b: the validator, strict, for each version. Its own exit code counts,
# and so does any WARN (no schema for a kind) or ERROR line.
shopt -s nullglob
files=("$work"/*.yaml)
if [ "${#files[@]}" -eq 0 ]; then
  echo "ERROR no manifest found in $dir"
  exit 1
fi
for v in $versions; do
  set +e
  report="$("$kv" --strict -k "$v" "${files[@]}" 2>&1)"
  rc=$?
  set -e
  printf '%s\n' "${report//$work\//}"
  if [ "$rc" -ne 0 ] || grep -qE '^(WARN|ERROR|FATAL)' <<<"$report"; then
    status=1
  fi
done

# Step 2: what the sandbox needs of every pod.
"$py" - "$work" <<'PY' || status=1
import os, sys, yaml

UID = 10001
PROBE = ["agentctl", "status", "--require-sandbox"]
errors = []

def pods(doc):
    kind = doc.get("kind")
    if kind == "Pod":
        yield doc["metadata"]["name"], doc["spec"]
    elif kind in ("Job", "StatefulSet", "Deployment", "DaemonSet", "ReplicaSet"):
        yield doc["metadata"]["name"], doc["spec"]["template"]["spec"]

def check(where, spec):
    psc = spec.get("securityContext", {})
    if spec.get("hostUsers") is not False:
        errors.append(f"{where}: hostUsers must be false (procMount: Unmasked needs a user-namespaced pod)")
    if spec.get("automountServiceAccountToken") is not False:
        errors.append(f"{where}: automountServiceAccountToken must be false (the agent's commands could read it)")
    if psc.get("fsGroup") != UID:
        errors.append(f"{where}: securityContext.fsGroup must be {UID}")
    containers = spec.get("initContainers", []) + spec.get("containers", [])
    agentd = [c for c in containers if c.get("name") == "agentd"]
    if len(agentd) != 1:
        errors.append(f"{where}: expected one container named agentd, found {len(agentd)}")
    for c in containers:
        csc = c.get("securityContext", {})
        at = f"{where}: container {c.get('name')}"
        for field in ("runAsUser", "runAsGroup"):
            if csc.get(field, psc.get(field)) != UID:
                errors.append(f"{at}: {field} must be {UID} (the socket's directory is 0700)")
        if csc.get("runAsNonRoot", psc.get("runAsNonRoot")) is not True:
            errors.append(f"{at}: runAsNonRoot must be true")
        if csc.get("allowPrivilegeEscalation") is not False:
            errors.append(f"{at}: allowPrivilegeEscalation must be false")
        if csc.get("capabilities", {}).get("drop") != ["ALL"]:
            errors.append(f"{at}: capabilities.drop must be [ALL]")
        if csc.get("capabilities", {}).get("add"):
            errors.append(f"{at}: adds capabilities")
    for c in agentd:
        csc = c.get("securityContext", {})
        at = f"{where}: container agentd"
        seccomp = csc.get("seccompProfile", psc.get("seccompProfile"))
        if seccomp != {"type": "Localhost", "localhostProfile": "profiles/agentd.json"}:
            errors.append(f"{at}: seccompProfile must be Localhost profiles/agentd.json, not {seccomp}")
        if csc.get("procMount") != "Unmasked":
            errors.append(f"{at}: procMount must be Unmasked")
        if csc.get("appArmorProfile", psc.get("appArmorProfile")) != {"type": "Unconfined"}:
            errors.append(f"{at}: appArmorProfile must be Unconfined")
        for probe in ("startupProbe", "readinessProbe"):
            if c.get(probe, {}).get("exec", {}).get("command") != PROBE:
                errors.append(f"{at}: {probe} must run {' '.join(PROBE)}")
        env = {e["name"]: e.get("value") for e in c.get("env", [])}
        grace = int(env.get("AGENTD_SHUTDOWN_GRACE", "10"))
        if spec.get("terminationGracePeriodSeconds", 30) < grace + 10:
            errors.append(f"{at}: terminationGracePeriodSeconds leaves under 10 s past AGENTD_SHUTDOWN_GRACE={grace}")
        mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
        run = mounts.get("/run/agentd")
        if run is None:
            errors.append(f"{at}: /run/agentd is not mounted")
        for other in containers:
            if other is not c and "AGENTD_SOCKET" in {e["name"] for e in other.get("env", [])}:
                theirs = {m["mountPath"]: m["name"] for m in other.get("volumeMounts", [])}
                if theirs.get("/run/agentd") != run:
                    errors.append(f"{where}: container {other.get('name')} uses AGENTD_SOCKET but does not share agentd's /run/agentd")

seen = 0
for name in sorted(os.listdir(sys.argv[1])):
    with open(os.path.join(sys.argv[1], name)) as f:
        for doc in yaml.safe_load_all(f):
            for pod, spec in pods(doc or {}):
                seen += 1
                check(f"{name.removesuffix('.pod.yaml')}: {doc['kind'].lower()}/{pod}", spec)
if seen == 0:
    errors.append("no pod found to check")
for e in errors:
    print(f"ERROR {e}")
if not errors:
    print(f"INFO {seen} pod specs: every container runs as {UID}; agentd has the seccomp profile, an unmasked /proc and the sandbox probe")
sys.exit(1 if errors else 0)
PY

# The seccomp profile the pods name, where the repository ships it: JSON
# with a default action.
profile="$repo/deploy/seccomp/agentd.json"
if [ -f "$profile" ]; then
  "$py" -c 'import json, sys; p = json.load(open(sys.argv[1])); sys.exit(0 if "defaultAction" in p else "no defaultAction")' "$profile" \
    || { echo "ERROR $profile is not a seccomp profile"; status=1; }
else
  echo "NOTE $profile is missing: the pods name it as their seccomp profile"
fi

if [ "$status" -ne 0 ]; then
  echo "validate-manifests: FAILED" >&2
else
  echo "validate-manifests: ok"
fi
exit "$status"
