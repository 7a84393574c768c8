"""The WSGI entry point: `gunicorn -c gunicorn.conf.py app:app`.

No monkey-patching here: gunicorn's gevent worker patches the process before it imports this module, which
is also why gunicorn.conf.py must not preload the app (requests and ssl imported early break patching).
"""

from toolproxy import create_app
from toolproxy.config.settings import load_settings
from toolproxy.observe.logs import configure

settings = load_settings()
configure(settings)
app = create_app(settings)
