"""What a run would cost before it is made: `panel estimate FILE` and `--dry-run`.

`plans` says, per protocol, which calls each stage makes (at least and at most) and with
which prompts; `build` counts those prompts with litellm's token counter, prices them from
litellm's table and adds them up into an `Estimate` (`models`). No model is called.
"""
