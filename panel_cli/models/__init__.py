"""What a panel may name as a model, known before any call: short names (`aliases`, with the
shipped `aliases.yaml`), the providers and models litellm knows, read from its files without
importing it (`catalog`), which way a model's calls go (`routes`), and the demo personas and
simulated voters (`personas`). `panel models` lists them.

The panel model (`panel_cli.config`) checks every member against these, so they sit below it
and import nothing of panel's but the YAML reader."""
