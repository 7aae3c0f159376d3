"""Views draw a run from its events: live on a terminal, plain lines elsewhere, or nothing.

This file imports nothing: `panel history` uses `view.fmt` alone and must not pay for
Rich's live display, Markdown and every event model. `view.base.make_view` picks a view."""
