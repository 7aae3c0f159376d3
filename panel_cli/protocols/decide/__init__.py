"""decide: a vote inside the group, stored as a decision; the leader chooses when no option wins."""
