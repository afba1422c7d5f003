"""The Kubernetes Pod Security Standards' baseline and restricted profiles, as data, and a check of
a pod spec against them.

Written from the standards' page (kubernetes.io/docs/concepts/security/pod-security-standards,
the "latest" policy version) and the admission controller's checks (k8s.io/pod-security-admission,
policy/check_*.go), one entry per control.  Containers are ``containers``, ``initContainers``
and ``ephemeralContainers``.  Not modelled: the relaxations of the alpha gate
UserNamespacesPodSecurityStandards (off by default), and Windows pods.  GKE Autopilot refuses
what the restricted profile refuses, and more.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

CONTAINER_KINDS = ("containers", "initContainers", "ephemeralContainers")

# baseline: capabilities a container may add (the runtime's default set)
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
                "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                "net.ipv4.tcp_keepalive_probes"}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
# restricted: the only volume types
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret"}


def containers(spec: dict) -> list[dict]:
    return [c for kind in CONTAINER_KINDS for c in spec.get(kind) or []]


def contexts(spec: dict) -> list[dict]:
    """The pod's security context and every container's."""
    return [spec.get("securityContext") or {}] + [c.get("securityContext") or {} for c in containers(spec)]


def _caps(c: dict) -> dict:
    return (c.get("securityContext") or {}).get("capabilities") or {}


def _host_process(meta, spec):
    return not any((ctx.get("windowsOptions") or {}).get("hostProcess") for ctx in contexts(spec))


def _host_namespaces(meta, spec):
    return not any(spec.get(k) for k in ("hostNetwork", "hostPID", "hostIPC"))


def _privileged(meta, spec):
    return not any((c.get("securityContext") or {}).get("privileged") for c in containers(spec))


def _capabilities_baseline(meta, spec):
    return all(set(_caps(c).get("add") or []) <= BASELINE_CAPABILITIES for c in containers(spec))


def _host_path(meta, spec):
    return not any("hostPath" in v for v in spec.get("volumes") or [])


def _host_ports(meta, spec):
    return not any(p.get("hostPort") for c in containers(spec) for p in c.get("ports") or [])


def _app_armor(meta, spec):
    profiles = [(ctx.get("appArmorProfile") or {}).get("type") for ctx in contexts(spec)]
    annotations = [v for k, v in (meta.get("annotations") or {}).items()
                   if k.startswith("container.apparmor.security.beta.kubernetes.io/")]
    return all(p in (None, "RuntimeDefault", "Localhost") for p in profiles) and \
        all(v == "runtime/default" or v.startswith("localhost/") for v in annotations)


def _selinux(meta, spec):
    options = [ctx.get("seLinuxOptions") or {} for ctx in contexts(spec)]
    return all(o.get("type", "") in SELINUX_TYPES and not o.get("user") and not o.get("role") for o in options)


def _proc_mount(meta, spec):
    return all((c.get("securityContext") or {}).get("procMount") in (None, "Default") for c in containers(spec))


def _seccomp_baseline(meta, spec):
    return all((ctx.get("seccompProfile") or {}).get("type") != "Unconfined" for ctx in contexts(spec))


def _sysctls(meta, spec):
    return all(s.get("name") in SAFE_SYSCTLS for s in (spec.get("securityContext") or {}).get("sysctls") or [])


def _volume_types(meta, spec):
    return all(set(v) - {"name"} <= RESTRICTED_VOLUMES for v in spec.get("volumes") or [])


def _privilege_escalation(meta, spec):
    return all((c.get("securityContext") or {}).get("allowPrivilegeEscalation") is False for c in containers(spec))


def _run_as_non_root(meta, spec):
    pod = (spec.get("securityContext") or {}).get("runAsNonRoot")
    if pod is False:
        return False
    each = [(c.get("securityContext") or {}).get("runAsNonRoot") for c in containers(spec)]
    return all(v is True or (v is None and pod is True) for v in each)


def _run_as_user(meta, spec):
    return all(ctx.get("runAsUser") != 0 for ctx in contexts(spec))


def _seccomp_restricted(meta, spec):
    allowed = ("RuntimeDefault", "Localhost")
    pod = ((spec.get("securityContext") or {}).get("seccompProfile") or {}).get("type")
    each = [((c.get("securityContext") or {}).get("seccompProfile") or {}).get("type") for c in containers(spec)]
    if pod is not None and pod not in allowed:
        return False
    return all(t in allowed or (t is None and pod in allowed) for t in each)


def _capabilities_restricted(meta, spec):
    return all("ALL" in (_caps(c).get("drop") or []) and set(_caps(c).get("add") or []) <= {"NET_BIND_SERVICE"}
               for c in containers(spec))


@dataclass(frozen=True)
class Control:
    name: str          # as the admission controller's message names it
    level: str         # "baseline" or "restricted"
    passes: Callable[[dict, dict], bool]   # (pod metadata, pod spec) -> allowed


CONTROLS = [
    Control("hostProcess", "baseline", _host_process),
    Control("host namespaces", "baseline", _host_namespaces),
    Control("privileged", "baseline", _privileged),
    Control("capabilities (baseline)", "baseline", _capabilities_baseline),
    Control("hostPath volumes", "baseline", _host_path),
    Control("hostPort", "baseline", _host_ports),
    Control("AppArmor", "baseline", _app_armor),
    Control("SELinux", "baseline", _selinux),
    Control("procMount", "baseline", _proc_mount),
    Control("seccompProfile (baseline)", "baseline", _seccomp_baseline),
    Control("sysctls", "baseline", _sysctls),
    Control("volume types", "restricted", _volume_types),
    Control("allowPrivilegeEscalation != false", "restricted", _privilege_escalation),
    Control("runAsNonRoot != true", "restricted", _run_as_non_root),
    Control("runAsUser=0", "restricted", _run_as_user),
    Control("seccompProfile (restricted)", "restricted", _seccomp_restricted),
    Control("capabilities (restricted)", "restricted", _capabilities_restricted),
]
PROFILES = {"privileged": (), "baseline": ("baseline",), "restricted": ("baseline", "restricted")}


def violations(pod_template: dict, profile: str) -> list[str]:
    """The controls of ``profile`` that a pod (or a workload's pod template: ``metadata`` and
    ``spec``) breaks; empty when admitted."""
    meta, spec = pod_template.get("metadata") or {}, pod_template["spec"]
    return [c.name for c in CONTROLS if c.level in PROFILES[profile] and not c.passes(meta, spec)]
