"""Simulated members: what the demo personas and the simulated voters of `panel eval` say,
drawn from the request's brief alone (`panel_cli.llm.brief`), never from a prompt.

`voters` plays `demo/oracle@p?knobs`: voters of known accuracy that herd, are persuaded and
report a noisy confidence, whose theory `panel_cli.eval.theory` computes; `seeded` is what
every simulated reply shares. It sits low, on the brief and the persona names alone, so the
demo route (`panel_cli.llm.demo_replies`) and eval both import it without reaching up."""
