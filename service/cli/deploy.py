"""Placeholder: this sub-command is being written; it registers nothing yet."""
