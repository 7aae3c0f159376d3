"""`panel mcp`: the panel as an MCP server, so an agent (Claude Code, Claude Desktop, Cursor)
can convene the user's panels.

Trust: an agent chooses among the user's panels, by name, and never gives a panel's YAML, so it
can never start a command or send a key anywhere the user's own files do not. It attaches only
files from the folder the user named, never spends more than the cap on a run, and every
argument it sends is checked against the tool's published schema before anything starts.

Above the run core (`runs/`), below the command line (`cli/`), which it never imports. This
package imports the MCP SDK only in the modules that serve (`server`, `results`, `resources`,
`transports`' serving functions), so `panel --help` never loads it.
"""

# The cap on each run when `panel mcp` is given no --max-cost, in US dollars.
DEFAULT_MAX_COST = 1.0
