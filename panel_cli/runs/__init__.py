"""The run core: a run's life below the command line.

- `panels`: the panel a protocol runs, from a file, a panel built in code, `--members`, the
  user's default panel or the demo personas, with the protocol's options applied (as its spec
  declares them) and its gate armed.
- `prepare`: what is checked and gathered before the first call: keys, routability,
  secrets, the spending cap, a follow-up's earlier turns.
- `execute`: the run itself: gateway, engine, event bus, store and view (subscribers handed
  in), ended in the store as finished, no_answer, failed or interrupted.
- `outcome`: the result envelope every protocol's result starts with.
- `resume` and `followup`: a run continued from where it stopped, and a run asked on top of
  an earlier one.
- `ask`: a whole run, from a request to its stored result, for a caller that owns its output
  (the Python API, a server): one subscriber hears it, errors are raised, cancelling stops it.

Nothing here prints: what a person sees goes through the view or the notice the caller hands
in. The command line (`panel_cli.cli`), the Python API (`panel_cli.api`), batch, eval and
estimate call it; it never imports them.
"""
