"""Copy That on JupyterHub: the part of jupyterhub_config.py that nbgrader needs (JupyterHub >= 4).

Instructors share one grader service (a Jupyter server running as the account
grader-copy-that in the course checkout) where the formgrader lives; students use the
Assignments tab of their own JupyterLab.  Merge this into the hub's jupyterhub_config.py;
authentication and spawner settings are the hub's own.
"""
c = get_config()  # noqa: F821

from pathlib import Path

COURSE = "copy-that"
GRADER = f"grader-{COURSE}"
INSTRUCTORS = ["instructor1", "instructor2"]
# The class list, one hub user name per line (150 students: nobody types them here).  The hub
# reads it at start; after editing it, restart the hub (or use the REST loop in docs/jupyterhub.md).
ROSTER = Path("/srv/jupyterhub/students.txt")
STUDENTS = ROSTER.read_text().split() if ROSTER.is_file() else ["student1", "student2"]

c.Authenticator.allowed_users = set(INSTRUCTORS + STUDENTS)

# The group names are how nbgrader knows who teaches and who takes the course.
c.JupyterHub.load_groups = {
    f"formgrade-{COURSE}": INSTRUCTORS,
    f"nbgrader-{COURSE}": STUDENTS,
}

c.JupyterHub.load_roles = [
    {   # instructors reach the grader service (the formgrader)
        "name": f"formgrade-{COURSE}",
        "groups": [f"formgrade-{COURSE}"],
        "scopes": [f"access:services!service={COURSE}", "list:services", f"read:services!service={COURSE}"],
    },
    {   # students can see that the course exists (the Assignments tab lists it)
        "name": f"nbgrader-{COURSE}",
        "groups": [f"nbgrader-{COURSE}"],
        "scopes": ["list:services", f"read:services!service={COURSE}"],
    },
    {   # single-user servers act for their owner (nbgrader's course list asks the hub)
        "name": "server",
        "scopes": ["inherit"],
    },
]

# The grader service: a Jupyter server as the grader account, in the course checkout.
# Its name must be the course id.
c.JupyterHub.services = [
    {
        "name": COURSE,
        "url": "http://127.0.0.1:9999",
        "command": ["jupyterhub-singleuser", "--debug"],
        "user": GRADER,
        "cwd": f"/home/{GRADER}/{COURSE}",
        "environment": {"JUPYTERHUB_DEFAULT_URL": "/lab"},
    },
]
