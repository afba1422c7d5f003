"""docs/jupyterhub.md: the guide's own text (links, shell blocks, what it says of the code) and
the files and commands of its TLJH and grader sections, checked the way they can be here:
Python configuration loaded as TLJH loads it, systemd files read, the guide's shell blocks run
with the system's paths moved to a scratch folder.  The images: test_hub_image.py; Kubernetes:
test_hub_kubernetes.py; a real hub: test_hub_live.py.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness import ROOT
from hub_guide import (EXAMPLES, GUIDE, SERVICE_KEYS, TOKEN, code_blocks, env_file, guide, guide_block,
                       load_py, service_env_checks, tljh_config, unit_file, roster)  # noqa: F401  (roster: a fixture)


# --- the guide itself ---------------------------------------------------------------------------

OFFICIAL_HOSTS = {"kubernetes.io", "download.pytorch.org", "hub.jupyter.org"}   # named sources
EXAMPLE_HOSTS = {"hub.example.org", "registry.example.org"}                     # placeholders


def slug(heading: str) -> str:
    """A heading's anchor, as GitHub makes it."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def test_the_guide_lists_every_example_file_and_only_existing_ones():
    named = set(re.findall(r"\(examples/([^)#\s]+)\)", guide()))
    files = {str(p.relative_to(EXAMPLES)) for p in EXAMPLES.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert named == files


def test_links_lead_to_files_headings_or_official_sources():
    text = guide()
    anchors = {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links
    for link in links:
        target, _, anchor = link.partition("#")
        if target.startswith(("http://", "https://")):
            continue
        if target:
            assert (GUIDE.parent / target).exists(), link
        else:
            assert anchor in anchors, f"no heading for #{anchor}"
    hosts = {re.match(r"https?://([^/:]+)", u).group(1) for u in re.findall(r"https?://[^\s)`\"']+", text)}
    sites = {h for h in hosts if not _private_address(h)}      # a listening address names no site
    assert sites <= OFFICIAL_HOSTS | EXAMPLE_HOSTS, sites - OFFICIAL_HOSTS - EXAMPLE_HOSTS


def _private_address(host: str) -> bool:
    import ipaddress

    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_private or address.is_unspecified or address.is_loopback


def test_every_shell_block_and_script_parses():
    blocks = code_blocks(guide(), "bash")
    assert len(blocks) >= 10
    for block in blocks:
        proc = subprocess.run(["bash", "-n"], input=block, capture_output=True, text=True)
        assert proc.returncode == 0, f"{proc.stderr}\n{block}"
    for script in EXAMPLES.rglob("*.sh"):
        proc = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


def test_the_guides_disable_lines_are_the_scripts():
    script = [line for line in (EXAMPLES / "learner-lab.sh").read_text().splitlines()
              if re.match(r"jupyter (server extension|labextension) disable", line)]
    shown = [line for block in code_blocks(guide(), "bash") for line in block.splitlines()
             if re.match(r"jupyter (server extension|labextension) disable", line)]
    assert script and shown == script


def test_guide_and_code_agree_on_the_default_number_of_jobs(monkeypatch):
    from autograder.grading import config

    monkeypatch.setattr(os, "cpu_count", lambda: 7)
    assert config.default_jobs() == 8
    text = " ".join(guide().split())
    assert "one more than the number of cores" in text
    assert not re.search(r"default:? (is )?the number of cores", text)
    assert "one more than the number of cores" in config.GradeOptions.jobs.help


def test_class_data_and_grading_output_are_ignored_by_git():
    paths = ["reports/a1_views/report.html", "reports/a1_views/report.csv", "canvas.csv", "grades.csv",
             "students.csv", ".copy-that-staging-a1_views-x1y2/alice/a1_views.ipynb", ".nbgrader.log",
             "gradebook.db", "submitted/alice/a1_views/a1_views.ipynb", "autograded/alice/a1_views/a1_views.ipynb",
             "feedback/alice/a1_views/a1_views.html", "release/a1_views/a1_views.ipynb"]
    proc = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=ROOT, capture_output=True, text=True)
    assert sorted(proc.stdout.split()) == sorted(paths)
    # and nothing the repository tracks
    tracked = subprocess.run(["git", "ls-files", "-ci", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True)
    assert tracked.stdout == ""
    for kept in ("exercises/a1_views/a1_views.ipynb", "docs/examples/z2jh/config.yaml", "course/00_start_here.ipynb"):
        assert subprocess.run(["git", "check-ignore", "-q", "--no-index", kept], cwd=ROOT).returncode == 1, kept


def test_the_capacity_figures_script_runs_and_reports_a_kernels_memory_and_cpu(tmp_path):
    out = tmp_path / "cost.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "kernel_cost.py"), "--kernels", "1", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "import torch" in proc.stdout and "PSS" in proc.stdout
    median = json.loads(out.read_text())["median"]
    # torch is in the kernel: far more than an idle interpreter, and some CPU to load it
    assert median["rss_mib"] > 150 and 0 < median["pss_mib"] <= median["rss_mib"] and median["cpu_s"] > 0.5
    assert "bench/kernel_cost.py" in guide()


# --- nbgrader's configuration, everywhere ----------------------------------------------------


def test_hub_nbgrader_config_with_the_grader_s_and_the_course_s_gives_the_settings_grading_relies_on():
    from traitlets.config import Config
    from traitlets.utils.importstring import import_item

    hub, grader = load_py(EXAMPLES / "nbgrader_config.py"), load_py(EXAMPLES / "grader_nbgrader_config.py")
    course = load_py(ROOT / "nbgrader_config.py")
    assert hub.CourseDirectory.course_id == "copy-that"
    assert hub.Exchange.root == "/srv/nbgrader/exchange" and hub.Exchange.path_includes_course is True
    assert import_item(hub.Authenticator.plugin_class).__name__ == "JupyterHubAuthPlugin"
    merged = Config()
    for layer in (hub, grader, course):  # nbgrader's order: system, user, course root
        merged.merge(layer)
    assert merged.CourseDirectory.root == "/home/grader-copy-that/copy-that"
    assert merged.CourseDirectory.source_directory == "solutions"
    assert merged.CourseDirectory.release_directory == "exercises"
    assert "nbgrader.preprocessors.ClearHiddenTests" in merged.GenerateFeedback.preprocessors
    assert merged.Exchange.root in " ".join(code_blocks(guide(), "bash")) + (EXAMPLES / "z2jh" / "grader.yaml").read_text()


# --- The Littlest JupyterHub ---------------------------------------------------------------------


def test_tljh_dropin_adds_to_tljh_config_users_and_services_instead_of_replacing_them(tmp_path, roster):
    cfg = tljh_config(tmp_path)
    groups = cfg.JupyterHub.load_groups
    instructors = groups["formgrade-copy-that"]["users"]
    assert groups["nbgrader-copy-that"]["users"] == roster and instructors
    assert cfg.Authenticator.allowed_users == {"alice-tljh", *instructors, *roster}
    assert cfg.Authenticator.admin_users == {"root-admin"}          # grading needs no hub admin
    culler, grader = cfg.JupyterHub.services
    assert culler["name"] == "cull-idle"
    assert set(grader) <= SERVICE_KEYS and "command" not in grader, "an external service: the hub starts nothing"
    assert grader == {"name": "copy-that", "url": "http://127.0.0.1:9999", "api_token": TOKEN,
                      "oauth_no_confirm": True, "display": True}
    assert cfg.Spawner.cmd == ["/opt/tljh/user/bin/jupyterhub-singleuser"]
    assert cfg.SystemdSpawner.extra_paths == ["/opt/tljh/user/bin"]


def test_tljh_dropin_roles_give_instructors_the_formgrader_and_students_only_the_listing(tmp_path, roster):
    roles = {r["name"]: r for r in tljh_config(tmp_path).JupyterHub.load_roles}
    assert roles["formgrade-copy-that"]["groups"] == ["formgrade-copy-that"]
    assert "access:services!service=copy-that" in roles["formgrade-copy-that"]["scopes"]
    assert roles["nbgrader-copy-that"]["groups"] == ["nbgrader-copy-that"]
    assert not any(s.startswith("access:") for s in roles["nbgrader-copy-that"]["scopes"])
    assert roles["server"]["scopes"] == ["inherit"]


def test_tljh_dropin_follows_another_course_environment_and_grader_address(tmp_path, roster, monkeypatch):
    monkeypatch.setenv("COPY_THAT_COURSE_ENV", "/opt/copy-that/env")
    monkeypatch.setenv("COPY_THAT_GRADER_URL", "http://10.0.0.5:9999")
    cfg = tljh_config(tmp_path)
    assert cfg.Spawner.cmd == ["/opt/copy-that/env/bin/jupyterhub-singleuser"]
    assert cfg.JupyterHub.services[-1]["url"] == "http://10.0.0.5:9999"
    assert "COPY_THAT_COURSE_ENV=/opt/copy-that/env" in guide()


def test_tljh_dropin_refuses_to_start_the_hub_without_the_grader_token(tmp_path, roster, monkeypatch):
    monkeypatch.delenv("COPY_THAT_GRADER_TOKEN")
    with pytest.raises(ValueError, match="COPY_THAT_GRADER_TOKEN.*hub.env"):
        tljh_config(tmp_path)


# --- the grader as a service ---------------------------------------------------------------------


def test_grader_environment_file_matches_the_hub_s_service(tmp_path, roster):
    env = env_file(EXAMPLES / "grader" / "grader.env")
    (service,) = [s for s in tljh_config(tmp_path).JupyterHub.services if s["name"] == "copy-that"]
    service_env_checks(env, service["name"])
    assert env["JUPYTERHUB_SERVICE_URL"] == service["url"]
    assert env["JUPYTERHUB_API_URL"] == "http://127.0.0.1:15001/hub/api"   # TLJH's hub_port
    # the guide's token block writes the token into this line
    assert "s/^JUPYTERHUB_API_TOKEN=.*/JUPYTERHUB_API_TOKEN=$token/" in guide() and "JUPYTERHUB_API_TOKEN" in env


def test_grader_unit_runs_the_service_as_its_own_user_in_the_checkout_with_delegation():
    unit = unit_file(EXAMPLES / "grader" / "copy-that-grader.service")["Service"]
    root = load_py(EXAMPLES / "grader_nbgrader_config.py").CourseDirectory.root
    assert unit["User"] == ["grader-copy-that"] and unit["WorkingDirectory"] == [root]
    assert unit["EnvironmentFile"] == ["/etc/copy-that/grader.env"]
    assert unit["Delegate"] == ["yes"]
    (start,) = unit["ExecStart"]
    assert start.endswith("/bin/jupyterhub-singleuser")
    path = dict(v.split("=", 1) for v in unit["Environment"])["PATH"]
    assert path.split(":")[0] == str(Path(start).parent)
    text = guide()
    assert f"sudo {Path(start).parent}/pip install -r requirements.txt" in text
    assert "sudo useradd --create-home --user-group --shell /bin/bash grader-copy-that" in text


def test_the_guide_quotes_doctors_grading_limits_row_as_the_grader_writes_it(monkeypatch):
    from pathlib import PurePath

    from autograder.grading import cgroups

    text = " ".join(guide().split())
    monkeypatch.setattr(cgroups, "_v2_parent", lambda: None)
    monkeypatch.setattr(cgroups, "_v1_parents", lambda: None)
    monkeypatch.setattr(cgroups, "_v2_note", "")      # what an earlier look at this machine's v2 found
    version, nothing = cgroups.available()
    assert version is None and nothing in text
    monkeypatch.setattr(cgroups, "_v1_parents", lambda: [PurePath("/memory"), PurePath("/pids")])
    version, v1 = cgroups.available()
    assert version == "v1" and v1 in text
    monkeypatch.setattr(cgroups, "_v2_parent", lambda: PurePath("/grader"))
    version, v2 = cgroups.available()
    # "the same with cgroup v2", naming the delegated group
    assert version == "v2" and v2.startswith("cgroup v2 (delegated /grader") and v2.endswith(v1.split(": ", 1)[1])


def run_as_written(block: str, tmp_path: Path, moves: dict[str, str]) -> None:
    """Run a block of the guide without root: `sudo` dropped, system paths moved under tmp_path."""
    script = block.replace("sudo ", "").replace("docs/examples", str(EXAMPLES))
    for old, new in moves.items():
        script = script.replace(old, new)
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_the_token_block_gives_the_hub_and_the_grader_the_same_private_token(tmp_path):
    etc = tmp_path / "etc-copy-that"
    run_as_written(guide_block("openssl rand -hex 32"), tmp_path, {"/etc/copy-that": str(etc)})
    hub, grader = env_file(etc / "hub.env"), env_file(etc / "grader.env")
    assert re.fullmatch(r"[0-9a-f]{64}", hub["COPY_THAT_GRADER_TOKEN"])
    assert grader["JUPYTERHUB_API_TOKEN"] == hub["COPY_THAT_GRADER_TOKEN"]
    assert {k: v for k, v in grader.items() if k != "JUPYTERHUB_API_TOKEN"} == {
        k: v for k, v in env_file(EXAMPLES / "grader" / "grader.env").items() if k != "JUPYTERHUB_API_TOKEN"}
    assert all((etc / f).stat().st_mode & 0o077 == 0 for f in ("hub.env", "grader.env"))


def test_the_tljh_hub_block_gives_the_hub_its_token_and_the_class_list(tmp_path, monkeypatch):
    moves = {"/etc/systemd/system": str(tmp_path / "systemd"), "/opt/tljh/config": str(tmp_path / "tljh-config"),
             "systemctl daemon-reload": "true", "tljh-config reload hub": "true"}
    (tmp_path / "tljh-config" / "jupyterhub_config.d").mkdir(parents=True)
    (tmp_path / "students.csv").write_text("id,first_name,last_name,email,lms_user_id\n"
                                           "ada,Ada,L,ada@example.org,101\nalan,Alan,T,alan@example.org,102\n")
    run_as_written(guide_block("jupyterhub.service.d"), tmp_path, moves)
    unit = unit_file(tmp_path / "systemd" / "jupyterhub.service.d" / "copy-that.conf")
    assert unit["Service"]["EnvironmentFile"] == ["/etc/copy-that/hub.env"]
    roster = tmp_path / "tljh-config" / "copy-that-students.txt"
    assert roster.read_text().split() == ["ada", "alan"]
    assert "/opt/tljh/config/copy-that-students.txt" in (EXAMPLES / "tljh" / "copy-that.py").read_text()
    monkeypatch.setenv("COPY_THAT_ROSTER", str(roster))
    monkeypatch.setenv("COPY_THAT_GRADER_TOKEN", TOKEN)
    cfg = load_py(tmp_path / "tljh-config" / "jupyterhub_config.d" / "copy-that.py")
    assert cfg.JupyterHub.load_groups["nbgrader-copy-that"]["users"] == ["ada", "alan"]
