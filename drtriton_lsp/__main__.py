"""`python -m drtriton_lsp`: the `drtriton` command line (cli.py), where only the interpreter's path is known.

The same subcommands and exit codes as `drtriton`, e.g. `python -m drtriton_lsp worker` on a remote host.
"""

from drtriton_lsp.cli import main

raise SystemExit(main())
