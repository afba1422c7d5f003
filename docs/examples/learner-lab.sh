#!/bin/sh
# What `copy-that lab` does for a learner, done once for the environment a hub's servers run in
# (the students' image, or TLJH's /opt/tljh/user).  Run it as root with that environment's
# `jupyter` and `python` first on PATH:
#   sudo env PATH=/opt/tljh/user/bin:$PATH sh docs/examples/learner-lab.sh      (TLJH)
#   RUN sh /opt/copy-that/learner-lab.sh                                         (Dockerfile)
# 1. nbgrader's instructor tools off for every server of this environment: the formgrader, the
#    course list, Create Assignment and Validate (students check their work with `copy-that check`).
#    The Assignments tab stays on (its server extension and its Lab plugin, with nbgrader's menu):
#    students fetch, submit and fetch feedback through it.  The grader runs in an environment of
#    its own, where this script is not run: the tools stay on there.
# 2. The style that shows a collapsed output as "..." only, so the answer to the prediction above
#    it stays hidden until asked for; taken from the course package (autograder.learner.lab), so it
#    is the style `copy-that lab` uses.
set -eu
jupyter server extension disable --sys-prefix nbgrader.server_extensions.formgrader
jupyter server extension disable --sys-prefix nbgrader.server_extensions.course_list
jupyter server extension disable --sys-prefix nbgrader.server_extensions.validate_assignment
jupyter labextension disable --level=sys_prefix @jupyter/nbgrader:formgrader
jupyter labextension disable --level=sys_prefix @jupyter/nbgrader:course-list
jupyter labextension disable --level=sys_prefix @jupyter/nbgrader:create-assignment
jupyter labextension disable --level=sys_prefix @jupyter/nbgrader:validate-assignment
# JupyterLab >= 4.1 lets a user switch a disabled plugin back on in its Plugin Manager, unless locked
jupyter labextension lock --level=sys_prefix @jupyter/nbgrader:formgrader @jupyter/nbgrader:course-list \
  @jupyter/nbgrader:create-assignment @jupyter/nbgrader:validate-assignment
python - <<'END'
import json
import sys
from pathlib import Path

from autograder.learner.lab import CUSTOM_CSS

custom = Path(sys.prefix) / "share" / "copy-that" / "custom"
custom.mkdir(parents=True, exist_ok=True)
(custom / "custom.css").write_text(CUSTOM_CSS)
# JupyterLab serves custom/custom.css from the server's static_custom_path when LabApp.custom_css
# is on; both are set in the environment's jupyter_server_config.json (the .d folder next to it
# only switches extensions), for every user of the environment: their own ~/.jupyter stays theirs
conf = Path(sys.prefix) / "etc" / "jupyter" / "jupyter_server_config.json"
settings = json.loads(conf.read_text()) if conf.is_file() else {}
settings.setdefault("ServerApp", {}).setdefault("tornado_settings", {})["static_custom_path"] = [str(custom)]
settings.setdefault("LabApp", {})["custom_css"] = True
conf.parent.mkdir(parents=True, exist_ok=True)
conf.write_text(json.dumps(settings, indent=1) + "\n")
print(f"learner lab: instructor tools hidden, {custom / 'custom.css'} served")
END
