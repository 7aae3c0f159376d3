"""ensemble: one prompt to every member at once; the mode decides what comes back."""
