"""confer: every member answers, then votes anonymously with confidence until the winner is stable."""
