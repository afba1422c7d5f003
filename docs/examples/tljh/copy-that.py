"""Copy That on The Littlest JupyterHub: /opt/tljh/config/jupyterhub_config.d/copy-that.py

TLJH loads this file after its own settings (those of `tljh-config`), so it adds to them rather
than replacing them: the users it allows go next to `users.allowed`, its service next to TLJH's
idle culler.  Then `sudo tljh-config reload hub`.

- Instructors and students: the instructors below, the students from a class list (one hub user
  name per line); the hub's groups tell nbgrader who teaches (formgrade-copy-that) and who takes
  the course (nbgrader-copy-that).
- The grader: a Jupyter server that runs outside the hub's process (a systemd unit of its own,
  docs/examples/grader/copy-that-grader.service) as the hub's `copy-that` service; the hub
  routes /services/copy-that/ to it, and instructors reach the formgrader there.  Its API token
  comes from the hub's environment (COPY_THAT_GRADER_TOKEN, from /etc/copy-that/hub.env).
- Students' servers run the course's environment (COURSE_ENV): TLJH's user environment, whose
  jupyterhub-singleuser is TLJH's own, at the hub's version.
"""
import os
from pathlib import Path

c = get_config()  # noqa: F821  (the hub provides get_config)

COURSE = "copy-that"
INSTRUCTORS = ["instructor1", "instructor2"]
ROSTER = Path(os.environ.get("COPY_THAT_ROSTER", "/opt/tljh/config/copy-that-students.txt"))
STUDENTS = ROSTER.read_text().split() if ROSTER.is_file() else []
# The grader's Jupyter server, as the proxy reaches it (on the TLJH machine itself by default)
GRADER_URL = os.environ.get("COPY_THAT_GRADER_URL", "http://127.0.0.1:9999")
# TLJH's user environment; a Python 3.11 environment of its own where TLJH's is on another Python
COURSE_ENV = Path(os.environ.get("COPY_THAT_COURSE_ENV", "/opt/tljh/user"))

TOKEN = os.environ.get("COPY_THAT_GRADER_TOKEN", "")
if len(TOKEN) < 32:
    raise ValueError(
        "COPY_THAT_GRADER_TOKEN is unset or shorter than 32 characters: the hub reads the grader "
        "service's API token from it (/etc/copy-that/hub.env, see docs/jupyterhub.md, 'The grader as "
        "its own service')")

# Added to TLJH's users.allowed (`tljh-config add-item users.allowed NAME` replaces nothing here)
c.Authenticator.allowed_users.update(INSTRUCTORS + STUDENTS)

c.JupyterHub.load_groups = {
    f"formgrade-{COURSE}": {"users": INSTRUCTORS},
    f"nbgrader-{COURSE}": {"users": STUDENTS},
}

c.JupyterHub.load_roles = [
    {   # instructors reach the grader service (the formgrader)
        "name": f"formgrade-{COURSE}",
        "groups": [f"formgrade-{COURSE}"],
        "scopes": [f"access:services!service={COURSE}", "list:services", f"read:services!service={COURSE}"],
    },
    {   # students see that the course exists (the Assignments tab lists it)
        "name": f"nbgrader-{COURSE}",
        "groups": [f"nbgrader-{COURSE}"],
        "scopes": ["list:services", f"read:services!service={COURSE}"],
    },
    {   # single-user servers act for their owner (nbgrader's course list asks the hub)
        "name": "server",
        "scopes": ["inherit"],
    },
]

# The grader: started by systemd, not by the hub (no "command"); the hub only routes to it and
# knows its token.  Its name is the course id.
c.JupyterHub.services.append({
    "name": COURSE,
    "url": GRADER_URL,
    "api_token": TOKEN,
    "oauth_no_confirm": True,
    "display": True,
})

c.Spawner.cmd = [str(COURSE_ENV / "bin" / "jupyterhub-singleuser")]
c.SystemdSpawner.extra_paths = [str(COURSE_ENV / "bin")]
c.Spawner.default_url = "/lab"
