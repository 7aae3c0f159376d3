"""vote: every member casts a ballot on fixed options, counted by the method against the quorum."""
