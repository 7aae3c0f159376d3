"""`panel batch`: one panel, many questions: where they come from (`questions`), how they
run (`runner`), the line each writes to the results file (`lines`) and how a person watches
them (`progress`)."""
