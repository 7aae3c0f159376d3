"""`panel eval`: whether a panel beats one of its members alone, on questions with known
answers. Where the questions come from (`datasets`), how an answer is graded (`grading`), the
statistics (`stats`, pure), how the runs are made (`runner`), the scores and comparisons
(`results`) and how a person reads them (`report`)."""
