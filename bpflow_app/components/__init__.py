"""Components shared by the pages."""
