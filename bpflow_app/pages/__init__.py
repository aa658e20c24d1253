"""One module per page, each with its own small state."""
