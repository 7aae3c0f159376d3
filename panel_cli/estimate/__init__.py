"""What a run would cost before it is made: `panel estimate FILE` and `--dry-run`.

Each protocol's plan (`panel_cli.protocols.plans`) says which calls each stage makes (at
least and at most) and with which prompts; `build` counts those prompts with litellm's token counter, prices them from
litellm's table and adds them up into an `Estimate` (`models`). No model is called.
"""
