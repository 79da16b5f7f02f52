"""One module per group of UI pages."""
