"""The Python API (docs/python.md): `panel_cli.run`, `arun` and `stream` (`runs`), their
`RunResult` (`result`), and `panel_cli.history` (`history`). Each is a thin layer over the run
core (`panel_cli.runs`) and the store's reader; none of it prints, and none of it imports the
command line."""
