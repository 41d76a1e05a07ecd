#!/usr/bin/env python3
"""Offline checks of ringtrain's Kubernetes manifests (k8s/*.yaml), beyond the MPIJob CRD schema.

Usage: check_manifests.py FILE.yaml [FILE.yaml ...]

For every object:
  - the YAML parses; apiVersion/kind are ones ringtrain uses; metadata.name is a DNS-1123 name;
  - typed check of standard objects (Deployment, Service, PersistentVolumeClaim, Pod, and the pod
    templates inside an MPIJob) against the Kubernetes API types of the python3-kubernetes
    package (Debian's, API 1.22): unknown or misspelled fields, wrong types, missing required
    fields. Skipped, saying so, without that package.
Across objects (what no schema can see):
  - every volumeMount names a volume of its pod; every claimName is a PVC defined in the files;
  - every probe's port and every Service targetPort is a port the container declares;
  - a Service's selector matches the pod labels of a Deployment, whose selector matches its own;
  - the MPIJob: mpirun -np = Worker replicas x slotsPerWorker = --expect-world-size where the
    manifest gives them (launcher-entrypoint.sh derives both otherwise); the GPU limit
    of a worker = slotsPerWorker; worker requests = limits; /dev/shm is a memory-backed emptyDir;
    a launcher's `bash -c` script parses; WaitForWorkersReady comes with a worker readiness probe on the SSH port the launcher waits
    for; pods run as non-root.
Not checkable offline: defaulting and admission by a real API server (quotas, storage classes,
pod security admission), and fields newer than API 1.22.
Exits 0 when all is well, 1 with one line per problem, 77 when python3-yaml is missing.
"""
import re
import subprocess
import sys

try:
    import yaml
except ImportError:
    print("SKIP: python3-yaml is not installed (apt-get install python3-yaml)")
    sys.exit(77)

try:
    import kubernetes.client
    import kubernetes.client.models as k8s_models
except ImportError:
    k8s_models = None

KNOWN = {
    ("kubeflow.org/v2beta1", "MPIJob"): None,
    ("apps/v1", "Deployment"): "V1Deployment",
    ("v1", "Service"): "V1Service",
    ("v1", "PersistentVolumeClaim"): "V1PersistentVolumeClaim",
    ("v1", "Pod"): "V1Pod",
}
DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
QUANTITY_KEYS = {"limits", "requests", "sizeLimit", "storage", "capacity"}
problems = []


def problem(where, text):
    problems.append(f"{where}: {text}")


# ---- typed check against the python3-kubernetes models ------------------------------------------
def typed(value, type_name, path, parent_key=""):
    if type_name == "object":  # int-or-string and free-form fields
        return
    if type_name in ("str", "int", "bool", "float", "datetime"):
        expected = {"str": str, "int": int, "bool": bool, "float": (int, float), "datetime": str}[type_name]
        # Resource quantities are strings in the models but numbers are fine in YAML (cpu: 1).
        if type_name == "str" and parent_key in QUANTITY_KEYS and isinstance(value, (int, float)):
            return
        if isinstance(value, bool) and type_name != "bool" or not isinstance(value, expected):
            problem(path, f"expected {type_name}, got {type(value).__name__} {value!r}")
        return
    if type_name.startswith("list["):
        if not isinstance(value, list):
            problem(path, f"expected a list, got {type(value).__name__}")
            return
        for i, item in enumerate(value):
            typed(item, type_name[5:-1], f"{path}[{i}]")
        return
    if type_name.startswith("dict("):
        if not isinstance(value, dict):
            problem(path, f"expected a map, got {type(value).__name__}")
            return
        inner = type_name[5:-1].split(", ", 1)[1]
        for key, item in value.items():
            typed(item, inner, f"{path}.{key}", parent_key=path.rsplit(".", 1)[-1])
        return
    klass = getattr(k8s_models, type_name)
    if not isinstance(value, dict):
        problem(path, f"expected an object ({type_name}), got {type(value).__name__}")
        return
    json_to_attribute = {json: attribute for attribute, json in klass.attribute_map.items()}
    for key, item in value.items():
        if key not in json_to_attribute:
            problem(path, f"unknown field '{key}' ({type_name} has no such field)")
        else:
            typed(item, klass.openapi_types[json_to_attribute[key]], f"{path}.{key}", parent_key=key)


def required_fields(obj, type_name, where):
    # The models refuse None for required fields when constructed: let them say what is missing.
    try:
        kubernetes.client.ApiClient()._ApiClient__deserialize(obj, type_name)
    except ValueError as e:
        problem(where, f"missing a required field: {e}")


def check_typed(obj, type_name, where):
    if k8s_models is None:
        return
    typed(obj, type_name, where)
    required_fields(obj, type_name, where)


# ---- helpers over pod specs -------------------------------------------------------------------
def containers(pod_spec):
    return (pod_spec or {}).get("containers") or []


def port_matches(port, container):
    for declared in container.get("ports") or []:
        if port == declared.get("containerPort") or port == declared.get("name"):
            return True
    return False


def check_pod_spec(pod_spec, where, claims):
    volumes = {v.get("name"): v for v in (pod_spec or {}).get("volumes") or []}
    for volume in volumes.values():
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if claim is not None and claim not in claims:
            problem(where, f"volume '{volume.get('name')}' uses claim '{claim}', which no file defines")
    security = (pod_spec or {}).get("securityContext") or {}
    for c in containers(pod_spec):
        cwhere = f"{where} container '{c.get('name')}'"
        for mount in c.get("volumeMounts") or []:
            if mount.get("name") not in volumes:
                problem(cwhere, f"mounts volume '{mount.get('name')}', which the pod does not define")
            if mount.get("mountPath") == "/dev/shm":
                medium = ((volumes.get(mount.get("name")) or {}).get("emptyDir") or {}).get("medium")
                if medium != "Memory":
                    problem(cwhere, "/dev/shm must be an emptyDir with medium: Memory")
        for probe_name in ("readinessProbe", "livenessProbe", "startupProbe"):
            probe = c.get(probe_name) or {}
            for action in ("tcpSocket", "httpGet"):
                port = (probe.get(action) or {}).get("port")
                if port is not None and not port_matches(port, c):
                    problem(cwhere, f"{probe_name} checks port {port!r}, which the container does not declare")
        context = c.get("securityContext") or {}
        if not (context.get("runAsNonRoot") or security.get("runAsNonRoot")):
            problem(cwhere, "does not set runAsNonRoot: true")
        if context.get("allowPrivilegeEscalation") is not False:
            problem(cwhere, "does not set allowPrivilegeEscalation: false")


def option_value(args, name):
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def check_mpijob(job, where, claims):
    spec = job.get("spec") or {}
    replicas = spec.get("mpiReplicaSpecs") or {}
    launcher = ((replicas.get("Launcher") or {}).get("template") or {}).get("spec") or {}
    worker_spec = replicas.get("Worker") or {}
    worker = (worker_spec.get("template") or {}).get("spec") or {}
    for role, pod_spec in (("Launcher", launcher), ("Worker", worker)):
        check_pod_spec(pod_spec, f"{where} {role}", claims)
        template = (replicas.get(role) or {}).get("template") or {}
        check_typed(template, "V1PodTemplateSpec", f"{where} {role}.template")
    slots = spec.get("slotsPerWorker", 1)
    worker_replicas = worker_spec.get("replicas", 1)
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (slots, worker_replicas)):
        problem(where, f"slotsPerWorker ({slots!r}) and Worker replicas ({worker_replicas!r}) must be numbers")
        return
    ranks = worker_replicas * slots
    lc = (containers(launcher) or [{}])[0]
    args = (lc.get("command") or []) + (lc.get("args") or [])
    # launcher-entrypoint.sh derives -np and the expected world size from the operator's hostfile;
    # where a manifest still writes them, they must agree with the job's shape.
    derives = any(str(a).endswith("launcher-entrypoint.sh") for a in args)
    np_value = option_value(args, "-np") or option_value(args, "-n")
    if (np_value is None and not derives) or (np_value is not None and int(np_value) != ranks):
        problem(where, f"mpirun -np is {np_value} but Worker replicas x slotsPerWorker = {ranks}")
    world = option_value(args, "--expect-world-size")
    if (world is None and not derives) or (world is not None and int(world) != ranks):
        problem(where, f"--expect-world-size is {world} but the job has {ranks} ranks")
    # mpirun as an argument, or in a script the launcher runs (bash -c "... mpirun ...").
    if not any(a == "mpirun" or (" " in str(a) and "mpirun " in str(a)) for a in args):
        problem(where, "the launcher does not run mpirun")
    # A script the launcher runs with bash -c must at least parse.
    for i, a in enumerate(args[:-1]):
        if str(a).endswith("bash") and str(args[i + 1]).startswith("-") and "c" in str(args[i + 1]):
            script = str(args[i + 2]) if i + 2 < len(args) else ""
            checked = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
            if checked.returncode != 0:
                problem(where, f"the launcher's bash script does not parse: {checked.stderr.strip()}")
    for c in containers(launcher):
        if "nvidia.com/gpu" in (c.get("resources") or {}).get("limits", {}):
            problem(where, "the launcher asks for a GPU; it only runs mpirun")
    ssh_port = None
    for c in containers(launcher):
        for env in c.get("env") or []:
            if env.get("name") == "RINGTRAIN_SSH_PORT":
                ssh_port = int(env.get("value"))
    for c in containers(worker):
        resources = c.get("resources") or {}
        limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
        if str(limits.get("nvidia.com/gpu", slots)) != str(slots):
            problem(where, f"worker GPU limit {limits.get('nvidia.com/gpu')} differs from slotsPerWorker {slots}")
        if {k: str(v) for k, v in limits.items()} != {k: str(v) for k, v in requests.items()}:
            problem(where, f"worker requests {requests} differ from limits {limits}")
        probe_port = ((c.get("readinessProbe") or {}).get("tcpSocket") or {}).get("port")
        if spec.get("launcherCreationPolicy") == "WaitForWorkersReady" and probe_port is None:
            problem(where, "WaitForWorkersReady needs a tcpSocket readiness probe on the workers' sshd")
        if ssh_port is not None and probe_port is not None and probe_port != ssh_port:
            problem(where, f"workers are probed on port {probe_port} but the launcher waits for SSH on {ssh_port}")
        sshd_args = " ".join((c.get("command") or []) + (c.get("args") or []))
        if "sshd" not in sshd_args:
            problem(where, "the worker does not run sshd")


def check_services(objects):
    deployments = [(w, o) for w, o in objects if o.get("kind") == "Deployment"]
    for where, deployment in deployments:
        spec = deployment.get("spec") or {}
        selector = (spec.get("selector") or {}).get("matchLabels") or {}
        labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if not selector or any(labels.get(k) != v for k, v in selector.items()):
            problem(where, f"selector {selector} does not match the pod labels {labels}")
    for where, service in ((w, o) for w, o in objects if o.get("kind") == "Service"):
        selector = (service.get("spec") or {}).get("selector") or {}
        pods = []
        for _, deployment in deployments:
            template = (deployment.get("spec") or {}).get("template") or {}
            labels = (template.get("metadata") or {}).get("labels") or {}
            if selector and all(labels.get(k) == v for k, v in selector.items()):
                pods.append(template.get("spec") or {})
        if not pods:
            problem(where, f"selector {selector} matches no Deployment's pods")
            continue
        for port in (service.get("spec") or {}).get("ports") or []:
            target = port.get("targetPort", port.get("port"))
            if not any(port_matches(target, c) for pod in pods for c in containers(pod)):
                problem(where, f"targetPort {target!r} is not a port of the selected pods")


def main(files):
    objects = []
    for name in files:
        try:
            with open(name) as f:
                documents = [d for d in yaml.safe_load_all(f) if d is not None]
        except (OSError, yaml.YAMLError) as e:
            problem(name, f"cannot be read as YAML: {e}".replace("\n", " "))
            continue
        for i, obj in enumerate(documents):
            where = f"{name}[{i}] {obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"
            key = (obj.get("apiVersion"), obj.get("kind"))
            if key not in KNOWN:
                problem(where, f"unexpected apiVersion/kind {key}")
                continue
            if not DNS1123.match(str((obj.get("metadata") or {}).get("name", ""))):
                problem(where, "metadata.name is missing or not a DNS-1123 name")
            objects.append((where, obj))
    claims = {o["metadata"]["name"] for _, o in objects if o.get("kind") == "PersistentVolumeClaim"}
    for where, obj in objects:
        kind = obj.get("kind")
        if KNOWN[(obj["apiVersion"], kind)]:
            check_typed(obj, KNOWN[(obj["apiVersion"], kind)], where)
        if kind == "MPIJob":
            check_mpijob(obj, where, claims)
        elif kind == "Deployment":
            check_pod_spec(((obj.get("spec") or {}).get("template") or {}).get("spec"), where, claims)
        elif kind == "Pod":
            check_pod_spec(obj.get("spec"), where, claims)
        elif kind == "PersistentVolumeClaim":
            spec = obj.get("spec") or {}
            if "ReadWriteMany" not in (spec.get("accessModes") or []):
                problem(where, "the shared volume must be ReadWriteMany (every worker mounts it)")
            if not ((spec.get("resources") or {}).get("requests") or {}).get("storage"):
                problem(where, "no storage request")
    check_services(objects)
    if k8s_models is None:
        print("SKIP typed field check: python3-kubernetes is not installed (apt-get install python3-kubernetes)")
    for line in problems:
        print("FAIL " + line)
    kinds = sorted({o.get("kind") for _, o in objects})
    print(f"{len(objects)} objects ({', '.join(kinds)}) in {len(files)} files: "
          f"{'OK' if not problems else f'{len(problems)} problems'}")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__.split("\n\n")[1])
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
