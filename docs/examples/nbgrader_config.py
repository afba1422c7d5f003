"""Copy That on JupyterHub: the hub-wide nbgrader configuration.

Install as /etc/jupyter/nbgrader_config.py in the students' image and the grader's (the
Dockerfile does) or on the TLJH machine: students' servers and the grader read it, whichever
Python environment they run.  The course's
own settings (solutions/ -> exercises/, warnings dropped, hidden tests kept out of feedback)
stay in the course checkout's nbgrader_config.py, which nbgrader loads from the course root.
"""
c = get_config()  # noqa: F821  (nbgrader provides get_config)

# One course on this hub: its id is the name of the grader service (tljh/copy-that.py, z2jh/config.yaml).
c.CourseDirectory.course_id = "copy-that"

# Where releases, submissions and feedback pass between accounts.  Create it once:
#   sudo mkdir -p /srv/nbgrader/exchange && sudo chmod 777 /srv/nbgrader/exchange
c.Exchange.root = "/srv/nbgrader/exchange"
# Room for more courses later: each course gets its own folder in the exchange.
c.Exchange.path_includes_course = True

# Students see courses through JupyterHub's groups (formgrade-<course>, nbgrader-<course>).
c.Authenticator.plugin_class = "nbgrader.auth.JupyterHubAuthPlugin"
