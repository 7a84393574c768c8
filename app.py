"""The WSGI entry point: `gunicorn -c gunicorn.conf.py app:app`.

No monkey-patching here: gunicorn's gevent worker patches the process before it imports this module, which
is also why gunicorn.conf.py must not preload the app (requests and ssl imported early break patching).
"""

import logging

from toolproxy import create_app

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

app = create_app()
