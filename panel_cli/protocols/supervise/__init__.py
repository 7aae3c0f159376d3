"""supervise: workers deliver their tasks; a critic approves or sends them back; a chairman consolidates."""
