"""`panel batch`: one panel, many questions: where they come from (`questions`), how they
run (`runner`) and how a person watches them (`progress`)."""
