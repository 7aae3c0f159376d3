"""The run core: a run's life below the command line.

- `panels`: the panel a protocol runs, from a file, `--members`, the user's default panel or
  the demo personas, with the protocol's options applied (as its spec declares them).
- `prepare`: what is checked and gathered before the first call: keys, routability,
  secrets, the spending cap, a follow-up's earlier turns.
- `execute`: the run itself: gateway, engine, event bus, store and view (subscribers handed
  in), ended in the store as finished, no_answer, failed or interrupted.
- `outcome`: the result envelope every protocol's result starts with.
- `resume` and `followup`: a run continued from where it stopped, and a run asked on top of
  an earlier one.

The command line (`panel_cli.cli`), batch, eval and estimate call it; it never imports them.
"""
