"""`panel history export`: a stored run as Markdown for a ticket, JSON for a script, or one
self-contained HTML page for a person to share.

Everything is built from what the store kept (the run, its events, its calls), never from a
live engine, so a run of any protocol, finished or cut short, exports the same way and
nothing here imports litellm.
"""
