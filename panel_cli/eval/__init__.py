"""`panel eval`: whether a panel beats one of its members alone, on questions with known
answers. Where the questions come from (`datasets`), how an answer is graded (`grading`), the
statistics (`stats`, pure), how the runs are made (`runner`) and the scores and comparisons
(`results`). How a person reads them is a view's (`panel_cli.view.eval`) or an export's
(`panel_cli.export.eval_markdown`, `eval_page`): eval imports neither."""
