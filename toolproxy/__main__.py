"""`python -m toolproxy`: the same as the `toolproxy` command."""

from toolproxy.cli import main

raise SystemExit(main())
