"""orchestrate: a planner splits the task into a dependency graph of subtasks for workers; a chairman synthesises."""
