"""gunicorn settings for `make run` (`gunicorn -c gunicorn.conf.py app:app`): the ones `toolproxy serve` uses,
from `toolproxy.server`, so both ways of running are the same server. `gunicorn -b HOST:PORT` still overrides
`bind`, and the exposure check runs on the real addresses.

`toolproxy.server` imports only the standard library, PyYAML and gunicorn, so loading it here, in the master,
keeps `ssl` and `requests` out until each worker has monkey-patched.
"""

from toolproxy.server import gunicorn_settings, settings_or_exit

globals().update(gunicorn_settings(settings_or_exit()))
