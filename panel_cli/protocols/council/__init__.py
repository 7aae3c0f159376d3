"""council: answers, an anonymous peer ranking, then a chairman's synthesis."""
