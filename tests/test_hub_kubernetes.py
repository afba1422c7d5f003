"""Zero to JupyterHub: the Helm values against the TLJH file, the grader's pod and service, the pod
against the Pod Security Standards' rules (tests/pod_security.py), and `helm template` where Helm
and the chart are at hand."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from hub_guide import (EXAMPLES, TOKEN, guide, load_py, service_env_checks, tljh_config, values, yaml_docs,
                       roster)  # noqa: F401  (roster: a fixture)


# --- Zero to JupyterHub ------------------------------------------------------------------------


def test_z2jh_values_hold_the_keys_the_guide_names():
    v = values()
    text = guide()
    for dotted in ("hub.services.copy-that", "hub.loadRoles", "hub.config", "hub.extraConfig",
                   "hub.networkPolicy.interNamespaceAccessLabels", "singleuser.image",
                   "singleuser.storage.extraVolumes", "cull"):
        assert f"`{dotted}" in text, f"the guide does not name {dotted}"
        node = v
        for part in dotted.split("."):
            assert part in node, f"config.yaml has no {dotted}"
            node = node[part]
    assert v["singleuser"]["fsGid"] == 100 and "fsGid: 100" in text
    assert "apiToken" not in v["hub"]["services"]["copy-that"], "the token comes from the command line"
    assert v["hub"]["networkPolicy"]["interNamespaceAccessLabels"] == "accept"
    (mount,) = v["singleuser"]["storage"]["extraVolumeMounts"]
    assert mount["mountPath"] == load_py(EXAMPLES / "nbgrader_config.py").Exchange.root
    assert v["singleuser"]["storage"]["extraVolumes"][0]["persistentVolumeClaim"]["claimName"] == "nbgrader-exchange"


def test_z2jh_values_describe_the_same_service_roles_and_groups_as_the_tljh_file(tmp_path, roster):
    tljh = tljh_config(tmp_path)
    v = values()
    roles = [{"name": name, **{k: r[k] for k in r if k != "description"}} for name, r in v["hub"]["loadRoles"].items()]
    assert sorted(roles, key=lambda r: r["name"]) == sorted(tljh.JupyterHub.load_roles, key=lambda r: r["name"])
    service = dict(v["hub"]["services"]["copy-that"], name="copy-that")
    tljh_service = tljh.JupyterHub.services[-1]
    assert {k: service[k] for k in service if k != "url"} == {k: tljh_service[k] for k in tljh_service
                                                            if k not in ("url", "api_token")}
    assert set(v["hub"]["config"]["JupyterHub"]["load_groups"]) == set(tljh.JupyterHub.load_groups)


def test_z2jh_extra_config_gives_each_student_a_uid_of_its_own():
    from traitlets.config import Config

    (code,) = values()["hub"]["extraConfig"].values()
    c = Config()
    exec(compile(code, "hub.extraConfig", "exec"), {"c": c})

    class User:
        def __init__(self, id):
            self.id = id

    class Spawner:
        def __init__(self, id):
            self.user = User(id)

    uid = c.KubeSpawner.uid
    uids = {uid(Spawner(i)) for i in range(1, 151)}
    assert len(uids) == 150 and min(uids) > 65535 and 1000 not in uids


def test_z2jh_grader_pod_is_the_hubs_copy_that_service():
    docs = {d["kind"]: d for d in yaml_docs(EXAMPLES / "z2jh" / "grader.yaml")}
    namespace, service, sts = docs["Namespace"], docs["Service"], docs["StatefulSet"]
    url = values()["hub"]["services"]["copy-that"]["url"]
    (port,) = service["spec"]["ports"]
    assert url == f"http://{service['metadata']['name']}.{namespace['metadata']['name']}.svc.cluster.local:{port['port']}"
    pod = sts["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (container,) = pod["spec"]["containers"]
    env = {e["name"]: e.get("value", "") for e in container["env"]}
    service_env_checks(env, "copy-that")
    assert env["JUPYTERHUB_SERVICE_URL"] == f"http://0.0.0.0:{port['targetPort']}"
    token = [e for e in container["env"] if e["name"] == "JUPYTERHUB_API_TOKEN"][0]
    assert token["valueFrom"]["secretKeyRef"]["name"] in guide()
    assert container["workingDir"] == load_py(EXAMPLES / "grader_nbgrader_config.py").CourseDirectory.root
    # the label the chart's network policy admits from another namespace, on both
    assert namespace["metadata"]["labels"]["hub.jupyter.org/network-access-hub"] == "true"
    assert pod["metadata"]["labels"]["hub.jupyter.org/network-access-hub"] == "true"


# --- the grader's pod and Pod Security admission --------------------------------------------

BUBBLEWRAP_NEEDS = {"seccompProfile (baseline)", "AppArmor", "procMount"}


def grader_pod() -> dict:
    (sts,) = [d for d in yaml_docs(EXAMPLES / "z2jh" / "grader.yaml") if d["kind"] == "StatefulSet"]
    return sts["spec"]["template"]


def test_grader_pod_breaks_only_what_bubblewrap_needs_and_its_namespace_admits_it():
    from pod_security import violations

    pod = grader_pod()
    assert set(violations(pod, "baseline")) == BUBBLEWRAP_NEEDS
    assert set(violations(pod, "restricted")) == BUBBLEWRAP_NEEDS | {"seccompProfile (restricted)"}
    assert violations(pod, "privileged") == []
    (namespace,) = [d for d in yaml_docs(EXAMPLES / "z2jh" / "grader.yaml") if d["kind"] == "Namespace"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    # Kubernetes accepts an unmasked /proc only in a pod with its own user namespace
    assert pod["spec"]["hostUsers"] is False


def test_the_pod_security_rules_refuse_what_the_standards_refuse():
    """The rules of tests/pod_security.py catch each setting the standards name (so the check above
    can fail), and admit a pod written to the restricted profile."""
    import copy

    from pod_security import violations

    good = {"metadata": {}, "spec": {
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "c", "image": "i", "securityContext": {
            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}],
        "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "x"}}]}}
    assert violations(good, "restricted") == []

    def broken(edit) -> set[str]:
        pod = copy.deepcopy(good)
        edit(pod["spec"], pod["spec"]["containers"][0]["securityContext"], pod["metadata"])
        return set(violations(pod, "restricted")), set(violations(pod, "baseline"))

    cases = {
        "privileged": lambda s, c, m: c.update(privileged=True),
        "host namespaces": lambda s, c, m: s.update(hostPID=True),
        "capabilities (baseline)": lambda s, c, m: c["capabilities"].update(add=["SYS_ADMIN"]),
        "hostPath volumes": lambda s, c, m: s["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
        "procMount": lambda s, c, m: c.update(procMount="Unmasked"),
        "seccompProfile (baseline)": lambda s, c, m: c.update(seccompProfile={"type": "Unconfined"}),
        "AppArmor": lambda s, c, m: s["securityContext"].update(appArmorProfile={"type": "Unconfined"}),
        "sysctls": lambda s, c, m: s["securityContext"].update(sysctls=[{"name": "kernel.msgmax", "value": "1"}]),
        "hostPort": lambda s, c, m: s["containers"][0].update(ports=[{"containerPort": 80, "hostPort": 80}]),
    }
    for control, edit in cases.items():
        restricted, baseline = broken(edit)
        assert control in baseline and control in restricted, control
    restricted_only = {
        "allowPrivilegeEscalation != false": lambda s, c, m: c.update(allowPrivilegeEscalation=True),
        "runAsNonRoot != true": lambda s, c, m: s["securityContext"].pop("runAsNonRoot"),
        "runAsUser=0": lambda s, c, m: c.update(runAsUser=0),
        "seccompProfile (restricted)": lambda s, c, m: s["securityContext"].pop("seccompProfile"),
        "capabilities (restricted)": lambda s, c, m: c["capabilities"].update(drop=[]),
        "volume types": lambda s, c, m: s["volumes"].append({"name": "n", "nfs": {"server": "x", "path": "/"}}),
    }
    for control, edit in restricted_only.items():
        restricted, baseline = broken(edit)
        assert control in restricted and not baseline, control


def test_z2jh_values_render_with_helm_template(tmp_path):
    """`helm template` with the values, where Helm and the chart are at hand."""
    chart = os.environ.get("COPY_THAT_Z2JH_CHART")
    if shutil.which("helm") is None or not chart:
        pytest.skip("the helm command is not in the registries this project installs from (Debian has no "
                    "helm package; PyPI's and npm's `helm` are other programs, PyPI's helm-python-sdk a "
                    "binding of Helm's Go library, not the command), and the Zero to JupyterHub chart is "
                    "published only in its own Helm repository, out of reach here: with helm on PATH and "
                    "COPY_THAT_Z2JH_CHART set to the chart (a folder or .tgz) this test renders the values")
    proc = subprocess.run(["helm", "template", "jhub", chart, "--namespace", "jhub",
                           "--values", str(EXAMPLES / "z2jh" / "config.yaml"),
                           "--set", f"hub.services.copy-that.apiToken={TOKEN}"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    import yaml

    rendered = [d for d in yaml.safe_load_all(proc.stdout) if d]
    kinds = {d["kind"] for d in rendered}
    assert {"Deployment", "ConfigMap", "Secret"} <= kinds
    assert "copy-that" in proc.stdout and "registry.example.org/copy-that/student" in proc.stdout


